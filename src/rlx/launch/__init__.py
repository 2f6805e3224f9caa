"""Carrying out a request, for the command line and Python alike.

- :mod:`rlx.launch.presets`: which per-env preset a new run's config starts from, rlx's own
  or else rl-baselines3-zoo's, and how a run says which;
- :mod:`rlx.launch.zoo`: rl-baselines3-zoo's hyperparameters, read (the installed
  ``rl_zoo3``'s files or the copy rlx carries) and translated into rlx's config fields.

Nothing here is imported by ``import rlx``; the modules import what they need when asked.
"""
