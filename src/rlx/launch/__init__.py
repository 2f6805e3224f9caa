"""Carrying out a request, for the command line and Python alike.

``rlx.train`` (:mod:`rlx.api`) and ``rlx train`` (:mod:`rlx.cli`) hand one request to
:func:`rlx.launch.run.launch`, which dispatches it: a plain run, a seed group or a healing run.

- :mod:`rlx.launch.run`: the one entry point of a training request, and its dispatch;
- :mod:`rlx.launch.plan`: planning a run (config, env recipe, consent, the run folder) and
  carrying the plan out;
- :mod:`rlx.launch.seed_groups`: one run per seed, in parallel processes;
- :mod:`rlx.launch.heal`: a child run from the last good checkpoint with a finding's fix;
- :mod:`rlx.launch.tune`: Optuna studies, the doctor as pruner, the held-out check of the best;
  :mod:`rlx.launch.search_space`: what each algorithm's trials sample (the study folder's
  format is :mod:`rlx.runs.study`'s);
- :mod:`rlx.launch.references`: what the doctor compares runs with, installed for the work;
- :mod:`rlx.launch.config_file`: YAML config files (``rlx train --config``, ``best.yaml``);
- :mod:`rlx.launch.presets`: which per-env preset a new run's config starts from, rlx's own
  or else rl-baselines3-zoo's, and how a run says which;
- :mod:`rlx.launch.zoo`: rl-baselines3-zoo's hyperparameters, read (the installed
  ``rl_zoo3``'s files or the copy rlx carries) and translated into rlx's config fields;
  :mod:`rlx.launch.zoo_agents`: the zoo's published agents.

Nothing here is imported by ``import rlx``; the modules import what they need when asked.
"""
