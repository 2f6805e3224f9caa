"""``rlx.launch.tune``: hyperparameter search on Optuna, with the doctor as a second pruner.

```python
import rlx
result = rlx.tune("ppo", "CartPole-v1", trials=20, total_steps=50_000, study_dir="runs/study")
print(result)                      # the trials, the best one, the held-out check
result.heldout.verdict             # e.g. "no better than the defaults (interval includes 0)"
# rlx train --config runs/study/best.yaml   trains the best trial's config again
```

``rlx tune ALGO --env ENV --trials N --total-steps S --study-dir DIR [--jobs K]`` is the same
on the command line. Optuna's TPE sampler proposes each trial's config from the algorithm's
search space (:data:`SPACES`); each trial trains that config on a seed group; two pruners stop
a trial early; and when the study ends, the best config is checked against the defaults on
seeds no trial trained on.

**A trial is a seed group.** Each trial trains its config on ``seeds_per_trial`` seeds (default
3): the study's seed and the ones after it (``seed``, ``seed + 1``, ...), the same for every
trial, so that trials differ by their config alone. They train one after another in the
worker's process, as a seed group (:func:`rlx.launch.seed_groups.train_seeds`, through
``rlx.train(..., seeds=[...])``): the trial's folder holds ``group.json`` and one run folder
per seed (``trial-0003/seed-0/``, ...). Each seed's value is its run's final evaluation
(``eval_return_mean`` of its ``summary.json``: a deep agent's ``eval_episodes`` deterministic
episodes; for a tabular learner without one, the mean return of ``eval_episodes`` greedy
episodes). The trial's value is :func:`trial_value` of them: their mean minus one standard
error,

    value = mean(x) - sd(x) / sqrt(n)        sd with n - 1 in the denominator; n = 1: mean(x)

A seed that scores ``d`` above ``n - 1`` equal ones raises the mean by ``d / n`` and the
standard error by exactly ``d / n`` as well, so one lucky seed adds nothing to the value, for
any ``n``, while a config whose seeds disagree is marked down. The alternatives do worse on
three seeds: the interquartile mean of rliable (``scipy.stats.trim_mean(x, 0.25)``) trims
nothing from three values and is their plain mean, which the lucky seed carries; the minimum
is one order statistic, the noisiest single number of the three, and it throws away the other
two. The rl-baselines3-zoo's objective trains one model per trial, on the experiment's seed,
and averages ``n_eval_episodes`` evaluation episodes: that tames the noise of evaluating one
policy, not the larger noise between training seeds, so its best trial is partly the luckiest
seed. Optuna has no repeats of its own (its maintainers' answer, optuna/optuna#433: average
repeated runs inside the objective, with care for pruning). The seeds' values are in the
trial (user attributes ``seeds`` and ``seed_values``; None for a seed not trained) and in each
seed's ``summary.json`` (``tune``).

**Pruning.** Two pruners stop a trial early:

- Optuna's median pruner, on an intermediate value: the mean return of the evaluations a deep
  agent makes during training (``evaluations`` of them, ``eval_every`` spaced over the budget),
  or, for a learner that does not evaluate while it trains (the tabular ones), the training
  return of each logged row. The seeds train one after another, so the ``k``-th value of the
  seed at index ``i`` is reported at step ``i * stride + k`` (:class:`TrialPruner`):
  ``stride`` is ``evaluations + 1`` for a deep agent (the evaluations of one seed, and one more
  when the last lands on the budget) and, for rows, the number the first seed logged. Step
  ``s`` thus always means the same seed at the same point of its training, and the median
  pruner compares like with like: the trial's seed 1 against the other trials' seed 1. The
  first ``evaluations // 3`` values of each seed are reported but not judged (the median
  pruner's warm-up, which Optuna applies to the first seed, applied by rlx to every seed).
  A trial below the median of the earlier trials at the same step stops; its other seeds do
  not train.
- The doctor (:class:`rlx.diagnostics.doctor.LiveDoctor`, a new one for each seed, on every
  logged row): a trial whose run shows a fatal finding (:data:`FATAL_RULES`: NaN or infinite
  metrics, Q values or the TD error running away, the policy's entropy collapsing while it is
  still poor) stops at once; one with no learning at all (``no-learning``, a rule that judges a
  whole run) is pruned when that seed ends. The finding is recorded in the trial (user
  attributes ``pruned_by`` and ``finding``) and in its seed's ``summary.json`` (``stopped_by``
  and ``tune``).

**The held-out check.** When the study has its ``trials`` (and ``heldout_seeds``, default 5,
is not 0), the process that called :func:`tune` trains the best trial's config and the
defaults (what ``rlx train ALGO --env ENV --total-steps S`` trains: the algorithm's defaults,
the env's preset, the study's fixed fields and budget) on ``heldout_seeds`` seeds that no trial
used: ``seed + HELDOUT_OFFSET``, ``seed + HELDOUT_OFFSET + 1``, ... (:data:`HELDOUT_OFFSET`
is larger than any seed group a trial may have). A tuned config that only fit its trials'
seeds shows here. The comparison (:class:`HeldOutCheck`) is the difference of the two means,
best minus defaults, with Welch's t interval at 95% (:func:`welch_interval`): the seeds of the
two sides are independent samples of unequal spread, which is Welch's case, and with five
seeds a side a percentile bootstrap would be too narrow (resampling five values cannot see
beyond them), while the t quantile widens the interval for the few degrees of freedom. The
verdict: "beats the defaults" (the whole interval above 0), "worse than the defaults" (below
0), or "no better than the defaults (interval includes 0)"; when the best config is the
defaults' own, that is what it says and the defaults train once. The check is in ``best.yaml``
(as comments), in ``str(result)`` and in ``rlx report STUDY_DIR``. ``heldout.json`` records it
(the held-out seeds, every seed a trial trained on, each side's config and values), so a
resumed study that has its trials does not train it again; a study extended to more trials
checks its new best (the defaults' runs are kept when their seeds and config are unchanged).

Running ``rlx tune`` again on the same folder resumes the study: a trial that Ctrl-C
interrupted is marked failed (its seed group keeps what it wrote), and the study goes on until
``trials`` trials have completed or been pruned; a larger ``trials`` extends it. A trial left
running by a process that was killed outright is marked failed when the next ``rlx tune`` on
the machine starts. ``jobs=K`` starts K worker processes on the same study (through its
storage), as a seed group starts its seeds' processes (:mod:`rlx.runs.parallel`: each a fresh
``python`` given its work on stdin, all stopped alike by Ctrl-C); ``ray="local"`` (or a
cluster's address) runs them as Ray tasks instead, on machines that share STUDY_DIR
(:mod:`rlx.distributed.tune_ray`). Either way a worker runs whole trials, every seed of one in
its own process; the held-out check runs once, after the trials, in the process that called
:func:`tune` (its seeds ``jobs`` at a time).

**Where the parts live.** The study folder's format (its files, the journal's checks, the
records :class:`StudySettings`, :class:`TrialRecord`, :class:`StudyResult` and
:class:`HeldOutCheck`, and their readers) is :mod:`rlx.runs.study`'s; the search spaces
(:data:`SPACES`, :class:`Space`, :class:`TrialSampler`, where their ranges come from) are
:mod:`rlx.launch.search_space`'s. This module re-exports the names it documents, so
``rlx.tune.read_study`` and ``rlx.tune.SPACES`` read as before. What is left here is the
study's one flow: setting it up, the workers and their trials, the pruners, and the held-out
check. It runs past rlx's 800 lines on purpose: a trial's training, the pruner that watches it
and the held-out check that follows share the settings, the base config, the one way a study
trains a seed group (:func:`train_group`) and the doctor's fatal rules, and each step reads
the one before it; the study folder (``study.journal``, ``trial-NNNN/``, ``best.yaml``,
``heldout.json``, ``heldout/``) and how a folder from someone else is read are described
there, in :mod:`rlx.runs.study`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import socket
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlx.callable_module import make_callable
from rlx.errors import ConfigError, RLXError
from rlx.launch.references import with_references
from rlx.launch.search_space import SPACES, Space, TrialSampler, base_budget, space_for
from rlx.runs.study import (
    HELDOUT_DIR,
    HELDOUT_FILE,
    HELDOUT_OFFSET,
    LOCK_FILE,
    SETTINGS_ATTR,
    STORAGE_FILE,
    STUDY_NAME,
    TRIAL_DIR,
    HeldOutCheck,
    HeldOutSide,
    StudyResult,
    StudySettings,
    TrialRecord,
    as_json,
    check_journal,
    check_seed_counts,
    import_optuna,
    is_number,
    is_study,
    journal_storage,
    open_study,
    read_heldout,
    recorded_settings,
    same_json,
    seeds_text,
    trial_attrs,
    trial_record,
    values_text,
    welch_interval,
)
from rlx.runs.study import read_study as read_study_folder

if TYPE_CHECKING:
    from rlx.core.env_recipe import Consent
    from rlx.runs.parallel import Outcome

FATAL_RULES = ("non-finite", "dqn-diverges", "q-diverges", "entropy-collapse", "no-learning")
"""Doctor rules (:mod:`rlx.diagnostics.rules`) whose finding prunes a trial: the run cannot
become good by training on. All but ``no-learning`` are checked as the run trains; that one
judges a whole run, so it prunes a trial when the trial ends, and only by its test of a return
that never rose above its start (:func:`rlx.diagnostics.rules.flat_return`), confirmed by the
trial's evaluations (its final one no higher than its first): its other test, a return stopped
far short of solving the env, says at a tuning budget more about the budget than about the
config."""
TUNE_WORKER = "import sys; from rlx.launch.tune import worker_main; sys.exit(worker_main())"
"""What a ``jobs=K`` worker's process runs (``python -c``): :func:`worker_main`."""
INTERRUPTED_EXIT = 130
"""A worker process's exit code after Ctrl-C (or the parent's SIGTERM), as the CLI's."""


# ============================================================================ the entry point
@with_references  # the doctor judging trials compares them with rlx's references
def tune(
    algo: str | None = None,
    env: str | None = None,
    *,
    study_dir: str | Path,
    trials: int | None = None,
    total_steps: int | None = None,
    seed: int | None = None,
    jobs: int = 1,
    evaluations: int | None = None,
    eval_episodes: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    seeds_per_trial: int | None = None,
    heldout_seeds: int | None = None,
    ray: str | None = None,
    trust_env_code: bool = False,
    consent: Consent | None = None,
    **fixed: Any,
) -> StudyResult:
    """Search ``algo``'s hyperparameters on ``env`` (extra ``tune``: Optuna).

    Args:
        algo: an algorithm with a search space (:data:`SPACES`); None resumes the study in
            ``study_dir`` as it was started.
        env: a Gymnasium id (with ``env_kwargs`` for ``gymnasium.make``).
        study_dir: the study folder (storage, one run folder per trial, ``best.yaml``); a
            folder holding a study resumes it.
        trials: how many trials to complete or prune (default 20; on a resume, the study's).
        total_steps: every trial's budget in env steps (default: the config's).
        seed: the first of every trial's seeds, and the sampler's (default 0).
        jobs: worker processes on this machine (or Ray tasks with ``ray``), sharing the study,
            each running whole trials; the held-out check trains ``jobs`` seeds at a time.
        evaluations: evaluations during each deep agent's training, for the median pruner
            (default 5; 0: prune on the training return).
        eval_episodes: episodes of each evaluation, and of the final one that is a seed's
            value (default 10).
        seeds_per_trial: the seeds every trial trains on, ``seed`` and those after it
            (default 3); the trial's value is their mean minus one standard error
            (:func:`trial_value`).
        heldout_seeds: the seeds of the held-out check, which trains the best config and the
            defaults on seeds no trial used once the study has its trials (default 5; 0 skips
            it; 1 is refused, since one seed a side gives no interval). It may change on a
            resume: the check runs again on the new seeds.
        ray: run the ``jobs`` workers as Ray tasks (extra ``ray``): ``"local"`` starts a Ray
            instance on this machine, ``"HOST:PORT"`` (or ``"auto"``) joins a cluster whose
            machines share ``study_dir``.
        trust_env_code: resuming a study (``env`` not given), let its recorded env be built
            from code its journal names (``package.module:factory``, an id whose module
            registers it); without it that is refused in one sentence, since a study folder
            may come from someone else.
        consent: words the refusals for where the user is (Python or the command line).
        **fixed: config fields set for every trial, left out of the search. Those only the
            user sets (:data:`rlx.launch.plan.USER_ONLY_FIELDS`: ``ray_address``,
            ``allow_unisolated``) are this call's alone: the study never records them, and one
            its journal records is dropped with a warning (the folder may be someone else's).

    Returns the :class:`StudyResult`; the best trial's config is in ``study_dir/best.yaml``,
    the held-out check in ``result.heldout`` (and ``best.yaml``'s comments).
    Ctrl-C stops every worker after its trial's checkpoint (the trial is marked failed) and
    raises KeyboardInterrupt; ``rlx tune`` on the same folder goes on from there.
    """
    from rlx.core.env_recipe import IN_PYTHON
    from rlx.launch.plan import USER_ONLY_FIELDS

    study_dir = Path(study_dir)
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ConfigError(f"jobs={jobs!r} must be a whole number >= 1.")
    user_fields = {name: fixed.pop(name) for name in list(fixed) if name in USER_ONLY_FIELDS}
    recorded = is_study(study_dir)
    if recorded:  # what the journal records for a user-only field: named once, then dropped
        read_settings(study_dir, given=list(user_fields), consent=consent or IN_PYTHON, warn=True)
    settings = prepare_study(
        study_dir, algo, env, trials=trials, total_steps=total_steps, seed=seed,
        evaluations=evaluations, eval_episodes=eval_episodes, env_kwargs=env_kwargs,
        fixed=fixed, seeds_per_trial=seeds_per_trial, heldout_seeds=heldout_seeds,
    )  # fmt: skip
    if recorded and env is None:  # the env is the folder's, not the user's: data until cleared
        from rlx.core.env_recipe import recipe_of

        recipe = dataclasses.replace(recipe_of(settings.env, settings.env_kwargs), trusted=False)
        recipe.cleared(trust_env_code, consent or IN_PYTHON, source=f"the study folder {study_dir}")
    if ray is not None:
        from rlx.distributed.tune_ray import run_workers_on_ray

        outcomes = run_workers_on_ray(
            work, str(study_dir), jobs, None if ray == "local" else ray, user_fields=user_fields
        )
    elif jobs > 1:
        outcomes = _run_processes(study_dir, jobs, user_fields)
    else:
        outcomes = [work(str(study_dir), 0, raise_errors=True, user_fields=user_fields)]
    result = read_study(study_dir)
    if all(status == "done" for status, _ in outcomes) and result.finished:
        check_heldout(result, jobs=jobs, user_fields=user_fields)
        result = read_study(study_dir)
    write_best(result)
    _raise_outcomes(outcomes)
    return result


def _raise_outcomes(outcomes: Sequence[tuple[str, str]]) -> None:
    """A worker's error (the first), then an interruption, as the exception it was."""
    for status, message in outcomes:
        if status == "error":
            raise TuneError(message)
    if any(status == "interrupted" for status, _ in outcomes):
        raise KeyboardInterrupt


class TuneError(RLXError):
    """A study cannot go on: a worker stopped on an error (its message)."""


def prepare_study(
    study_dir: Path,
    algo: str | None,
    env: str | None,
    *,
    trials: int | None = None,
    total_steps: int | None = None,
    seed: int | None = None,
    evaluations: int | None = None,
    eval_episodes: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    fixed: Mapping[str, Any] | None = None,
    seeds_per_trial: int | None = None,
    heldout_seeds: int | None = None,
) -> StudySettings:
    """Create the study in ``study_dir``, or check that what is asked matches the study it
    holds (only ``trials`` and ``heldout_seeds``, which the trials do not depend on, may
    change); returns the settings the workers read."""
    given: dict[str, Any] = {"algo": algo, "env": env, "total_steps": total_steps, "seed": seed,
             "evaluations": evaluations, "eval_episodes": eval_episodes,
             "env_kwargs": env_kwargs or None, "fixed": dict(fixed or {}) or None,
             "seeds_per_trial": seeds_per_trial}  # fmt: skip
    if trials is not None:
        _check_whole("trials", trials, 1)
    for name in ("total_steps", "evaluations", "eval_episodes", "seed"):
        if given[name] is not None:
            _check_whole(name, given[name], 0 if name in ("evaluations", "seed") else 1)
    check_seed_counts(seeds_per_trial, heldout_seeds)
    changed: dict[str, Any] = {k: v for k, v in (("trials", trials),
                               ("heldout_seeds", heldout_seeds)) if v is not None}  # fmt: skip
    storage = study_dir / STORAGE_FILE
    if storage.is_file():
        settings = read_settings(study_dir)
        current = settings.to_dict()
        for name, value in given.items():
            if value is None:
                continue
            if name == "algo":
                from rlx import registry

                value = registry.get(value).name
            if as_json(value) != current[name]:
                raise ConfigError(
                    f"{study_dir} holds a study of {settings.algo} on {settings.env} with "
                    f"{name}={current[name]!r}, not {value!r}; resume it as it is (leave "
                    f"{name} out) or start another study in a new folder."
                )
        if any(getattr(settings, k) != v for k, v in changed.items()):
            settings = dataclasses.replace(settings, **changed)
            open_study(study_dir).set_user_attr(SETTINGS_ATTR, settings.to_dict())
        return settings
    if algo is None or env is None:
        raise ConfigError(
            f"{study_dir} holds no study to resume; a new one needs an algorithm and an env "
            "(rlx tune ALGO --env ID --study-dir DIR)."
        )
    if study_dir.is_dir() and any(study_dir.glob("trial-*")):
        raise ConfigError(
            f"{study_dir} holds trial folders but no {STORAGE_FILE}: it is not a study rlx can "
            "resume; choose a new folder."
        )
    if study_dir.exists() and not study_dir.is_dir():
        raise ConfigError(f"study folder {study_dir} is a file; choose a folder.")
    settings = _new_settings(algo, env, trials, total_steps, seed, evaluations, eval_episodes,
                             env_kwargs, fixed, seeds_per_trial, heldout_seeds)  # fmt: skip
    optuna = import_optuna()
    study_dir.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(
        study_name=STUDY_NAME, storage=journal_storage(study_dir), direction="maximize",
        load_if_exists=True,
    )  # fmt: skip
    study.set_user_attr(SETTINGS_ATTR, settings.to_dict())
    return settings


def _new_settings(
    algo: str,
    env: str,
    trials: int | None,
    total_steps: int | None,
    seed: int | None,
    evaluations: int | None,
    eval_episodes: int | None,
    env_kwargs: dict[str, Any] | None,
    fixed: Mapping[str, Any] | None,
    seeds_per_trial: int | None = None,
    heldout_seeds: int | None = None,
) -> StudySettings:
    """Settings of a new study, checked now: the algorithm has a space, the fixed fields are
    its config's, and the base config (defaults, preset, fixed fields, budget) is valid."""
    from rlx import registry

    spec = registry.get(algo)
    space_for(spec.name)
    if not isinstance(env, str):
        raise ConfigError(f"rlx tune takes an env id (text), not {type(env).__name__}.")
    fixed = dict(fixed or {})
    owned = sorted(set(fixed) & {"total_steps", "seed", "eval_episodes", "eval_every"})
    if owned:
        raise ConfigError(
            f"{owned[0]} is set by the study for every trial; pass it as the study's own "
            f"{'total_steps' if owned[0] == 'total_steps' else owned[0]} argument."
            if owned[0] != "eval_every"
            else "eval_every is set by the study (from evaluations); leave it out."
        )
    settings = StudySettings(
        algo=spec.name, env=env, trials=20 if trials is None else trials,
        total_steps=total_steps, seed=0 if seed is None else seed,
        evaluations=5 if evaluations is None else evaluations,
        eval_episodes=10 if eval_episodes is None else eval_episodes,
        env_kwargs=dict(env_kwargs or {}), fixed=fixed,
        seeds_per_trial=3 if seeds_per_trial is None else seeds_per_trial,
        heldout_seeds=5 if heldout_seeds is None else heldout_seeds,
    )  # fmt: skip
    _base_config(spec, settings)  # the fixed fields and the budget, checked by the config
    return settings


def _check_whole(name: str, value: Any, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name}={value!r} must be a whole number >= {minimum}.")


def create_study(study_dir: str | Path, algo: str | None = None, env: str | None = None,
                 **settings: Any) -> Any:  # fmt: skip
    """The Optuna study in ``study_dir``, created with the settings :func:`tune` takes (or,
    when the folder holds one, checked against them), before any trial runs: to enqueue
    trials of your own (``study.enqueue_trial({"learning_rate": 1.0})``), run next by
    :func:`tune` on the same folder."""
    fixed = {k: settings.pop(k) for k in list(settings) if k not in _SETTING_NAMES}
    prepare_study(Path(study_dir), algo, env, fixed=fixed, **settings)
    return open_study(Path(study_dir))


_SETTING_NAMES = ("trials", "total_steps", "seed", "evaluations", "eval_episodes", "env_kwargs",
                  "seeds_per_trial", "heldout_seeds")  # fmt: skip


def read_settings(
    study_dir: str | Path,
    *,
    given: Sequence[str] = (),
    consent: Consent | None = None,
    warn: bool = False,
) -> StudySettings:
    """The settings kept in a study's storage, checked as data
    (:func:`rlx.runs.study.recorded_settings`). A fixed field only the user sets
    (:data:`rlx.launch.plan.USER_ONLY_FIELDS`) is dropped, as
    :func:`rlx.launch.plan.without_user_only` does (``given``, ``consent`` and ``warn`` as
    there): the study's workers take those from the command that runs them, never from its
    folder."""
    from rlx.core.env_recipe import IN_PYTHON
    from rlx.launch.plan import without_user_only

    settings = recorded_settings(study_dir)
    fixed = without_user_only(
        settings.fixed, f"{study_dir}/{STORAGE_FILE} (the study's fixed fields)", given=given,
        consent=consent or IN_PYTHON, warn=warn,
    )  # fmt: skip
    return dataclasses.replace(settings, fixed=fixed)


def read_study(study_dir: str | Path) -> StudyResult:
    """Every trial of the study in ``study_dir``, as :class:`StudyResult`
    (:func:`rlx.runs.study.read_study`), with the settings as the tuner reads them
    (:func:`read_settings`) and the held-out check only when it is of the study as it is now:
    its best trial, config, held-out seeds and defaults (:func:`defaults_fields`)."""
    from rlx import registry

    def defaults(settings: StudySettings) -> dict[str, Any]:
        return defaults_fields(registry.get(settings.algo), settings)

    folder = Path(study_dir)
    settings = read_settings(folder)
    return read_study_folder(folder, settings=settings, defaults=defaults)


# ============================================================================ the workers
def work(
    study_dir: str,
    worker: int = 0,
    *,
    raise_errors: bool = False,
    user_fields: Mapping[str, Any] | None = None,
) -> tuple[str, str]:
    """One worker: start trials of the study in ``study_dir`` until it has its ``trials``
    completed or pruned ones. Returns ``(status, message)``: ``("done", "")``,
    ``("interrupted", "")`` after Ctrl-C, or ``("error", sentence)`` after an RLXError (raised
    instead with ``raise_errors``). Other exceptions propagate. ``user_fields``: the
    user-only config fields (:data:`rlx.launch.plan.USER_ONLY_FIELDS`) the user gave the command
    that runs this worker, for every trial (never recorded in the study)."""
    from rlx.core.threads import set_torch_threads

    set_torch_threads()
    folder = Path(study_dir)
    try:
        settings = read_settings(folder)
        study = _worker_study(folder, worker, settings)
        while True:
            trial = _next_trial(folder, study, settings)
            if trial is None:
                return "done", ""
            run_trial(folder, study, trial, settings, user_fields)
    except KeyboardInterrupt:
        if raise_errors:
            raise
        return "interrupted", ""
    except RLXError as exc:
        if raise_errors:
            raise
        return "error", str(exc)


def _worker_study(folder: Path, worker: int, settings: StudySettings) -> Any:
    """The study in ``folder`` with rlx's sampler and pruners: TPE (the zoo's multivariate
    TPE, with the constant liar for parallel workers) and the median pruner (after
    ``startup`` trials and a third of the evaluations, as the zoo). The sampler's seed
    depends on the study's seed, the worker and the trials so far, so that a resumed or
    parallel worker does not propose what another already tried."""
    import numpy as np

    optuna = import_optuna()
    trials_so_far = len(open_study(folder).trials)
    startup = max(1, min(10, settings.trials // 3))
    seed = int(np.random.SeedSequence([settings.seed, worker, trials_so_far]).generate_state(1)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(
            n_startup_trials=startup, seed=seed, multivariate=True, constant_liar=True
        )
    pruner = optuna.pruners.MedianPruner(
        n_startup_trials=startup, n_warmup_steps=settings.evaluations // 3
    )
    return open_study(folder, sampler=sampler, pruner=pruner)


def _next_trial(folder: Path, study: Any, settings: StudySettings) -> Any:
    """A new trial, or None when the study has enough: under the study's lock, counting the
    completed, pruned and running trials (stale running ones marked failed first)."""
    optuna = import_optuna()
    states = optuna.trial.TrialState
    with _locked(folder / LOCK_FILE):
        _fail_stale_trials(folder, study)
        trials = study.get_trials(deepcopy=False)
        started = sum(t.state in (states.COMPLETE, states.PRUNED, states.RUNNING) for t in trials)
        if started >= settings.trials:
            return None
        trial = study.ask()
        trial.set_user_attr("worker", {"host": socket.gethostname(), "pid": os.getpid()})
        return trial


def _fail_stale_trials(folder: Path, study: Any) -> None:
    """Running trials whose worker process on this machine is gone (killed outright): failed."""
    optuna = import_optuna()
    host = socket.gethostname()
    storage = None
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = trial_attrs(trial, folder)["worker"] or {}
        if worker.get("host") != host or _alive(worker.get("pid", 0)):
            continue
        storage = storage or journal_storage(folder)
        study_id = storage.get_study_id_from_name(STUDY_NAME)
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
        storage.set_trial_user_attr(
            trial_id, "error", f"its worker (pid {worker.get('pid')}) ended before it did"
        )
        storage.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` between processes (``flock``; none where there is none)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: one worker at a time is the user's to keep
        yield
        return
    from rlx.runs.files import append_file

    with append_file(path) as handle:  # never through a link planted at its name
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_trial(
    folder: Path,
    study: Any,
    trial: Any,
    settings: StudySettings,
    user_fields: Mapping[str, Any] | None = None,
) -> TrialRecord:
    """Train one trial into ``folder/trial-NNNN`` with the config its space samples: a seed
    group of the study's seeds (:meth:`StudySettings.trial_seeds`), one seed after another in
    this process (``rlx.train(..., seeds=[...])``), the median pruner and the doctor watching
    every seed (:class:`TrialPruner`), and tell the study how it ended: complete with
    :func:`trial_value` of the seeds' values, pruned (the seeds after the prune left
    untrained), or failed. ``user_fields``: as :func:`work` takes them (passed to the
    training, never recorded)."""
    from rlx import registry

    optuna = import_optuna()
    states = optuna.trial.TrialState
    spec = registry.get(settings.algo)
    base = _base_config(spec, settings)
    sampler = TrialSampler(trial, dataclasses.asdict(base), settings.fixed, base_budget(base))
    space_for(spec.name).sample(sampler)
    fields = _trial_fields(spec, settings, sampler.fields)
    run_dir = folder / TRIAL_DIR.format(number=trial.number)
    seeds = settings.trial_seeds()
    trial.set_user_attr("config", as_json(fields))
    trial.set_user_attr("run_dir", run_dir.name)
    trial.set_user_attr("seeds", seeds)
    evaluates = "eval_every" in base.__dataclass_fields__ and settings.evaluations > 0
    extra = _evaluation_fields(settings, base) if evaluates else {}
    pruner = TrialPruner(
        trial, spec.name, settings.env, {**dataclasses.asdict(base), **fields},
        on_eval=evaluates, evaluations=settings.evaluations,
        seed_value=lambda seed, seed_dir: seed_value(seed_dir, seed, settings),
    )  # fmt: skip
    per_seed = {name: value for name, value in fields.items() if name != "seed"}
    try:
        group = train_group(
            spec.name, settings.env, env_kwargs=settings.env_kwargs or None, run_dir=run_dir,
            seeds=seeds, jobs=1, overrides={**per_seed, **extra, **dict(user_fields or {})},
            callbacks=[pruner],
        )  # fmt: skip
    except KeyboardInterrupt:
        _tell(study, trial, states.FAIL, error="interrupted (Ctrl-C)")
        raise
    except BaseException as exc:
        message = str(exc) if isinstance(exc, RLXError) else f"{type(exc).__name__}: {exc}"
        _tell(study, trial, states.FAIL, error=message)
        raise
    values = [pruner.values.get(seed) for seed in seeds]
    trial.set_user_attr("seed_values", values)
    runs = list(group.runs)
    if any(run.status == "interrupted" for run in runs):
        _tell(study, trial, states.FAIL, error="interrupted (Ctrl-C)")
        _note_seeds(folder, run_dir, trial.number, "failed", pruner, seeds, values)
        raise KeyboardInterrupt
    finding = pruner.finding
    failed = next((run for run in runs if run.status == "failed"), None)
    if failed is not None and finding is None:
        error = f"seed {failed.seed} failed: {failed.error}"
        _tell(study, trial, states.FAIL, error=error)
        raise TuneError(f"trial {trial.number}'s {error}")
    untrained = [seed for seed, value in zip(seeds, values, strict=True) if value is None]
    if finding is not None:
        trial.set_user_attr("pruned_by", "doctor")
        trial.set_user_attr("finding", finding)
        state, value = states.PRUNED, None
    elif pruner.pruned:
        trial.set_user_attr("pruned_by", "median")
        state, value = states.PRUNED, None
    elif untrained:  # a seed that stopped with no prune: not a value rlx can stand behind
        status = {run.seed: run.status for run in runs}.get(untrained[0], "pending")
        error = f"seed {untrained[0]} ended {status}, without a final evaluation"
        _tell(study, trial, states.FAIL, error=error)
        raise TuneError(f"trial {trial.number}'s {error}")
    else:
        state, value = states.COMPLETE, trial_value([v for v in values if v is not None])
    _tell(study, trial, state, value)
    record = trial_record(study.get_trials(deepcopy=False)[trial.number], folder)
    _note_seeds(
        folder,
        run_dir,
        trial.number,
        record.state,
        pruner,
        seeds,
        values,
        record.value if state == states.COMPLETE else None,
    )
    _print_trial(record)
    if state == states.COMPLETE:
        write_best(read_study(folder))
    return record


def train_group(
    algo: str,
    env: Any,
    *,
    env_kwargs: dict[str, Any] | None,
    run_dir: Path,
    seeds: Sequence[int],
    jobs: int,
    overrides: Mapping[str, Any],
    callbacks: Sequence[Any] = (),
) -> Any:
    """Train one seed group of a study (a trial, a side of the held-out check) through the
    one entry point, as ``rlx.train(algo, env, seeds=..., ...)`` would, started over when its
    folder exists (a trial retried after a crash)."""
    from rlx.launch.plan import python_call
    from rlx.launch.run import TrainRequest, launch

    overwrite = run_dir.exists()
    call = python_call(algo, env, env_kwargs=env_kwargs, run_dir=run_dir, seeds=list(seeds),
                       jobs=jobs, overwrite=overwrite, **overrides)  # fmt: skip
    return launch(
        TrainRequest(
            algo, env, env_kwargs=env_kwargs, run_dir=run_dir, overwrite=overwrite,
            overrides=dict(overrides), seeds=list(seeds), jobs=jobs, command=call,
            progress=False, callbacks=callbacks,
        )
    )  # fmt: skip


def trial_value(values: Sequence[float]) -> float:
    """A trial's value from its seeds' values ``x``: their mean minus one standard error,

        mean(x) - sd(x) / sqrt(n),   sd(x) = sqrt(sum((x_i - mean(x))^2) / (n - 1))

    (``mean(x)`` for one seed). One seed ``d`` above ``n - 1`` equal ones adds ``d / n`` to
    the mean and ``d / n`` to the standard error: a lucky seed cannot carry a trial (the
    module's docstring says why this statistic, and not the IQM or the minimum)."""
    n = len(values)
    if n == 0:
        raise ValueError("a trial's value needs at least one seed's value")
    mean = sum(values) / n
    if n == 1:
        return float(mean)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return float(mean - sd / math.sqrt(n))


def _tell(study: Any, trial: Any, state: Any, value: float | None = None,
          error: str | None = None) -> None:  # fmt: skip
    if error is not None:
        trial.set_user_attr("error", error)
    optuna = import_optuna()
    if state == optuna.trial.TrialState.COMPLETE:
        study.tell(trial, value)
    else:
        study.tell(trial, state=state)


def _base_config(spec: Any, settings: StudySettings) -> Any:
    """The config every trial starts from: defaults, the env's preset, the fixed fields and
    the budget (the config's own checks run here: a bad fixed field stops the study early)."""
    from rlx.launch.plan import checked_config

    overrides = {**settings.fixed, **_budget_fields(spec, settings)}
    config, _ = checked_config(spec, settings.env, overrides)
    return config


def _budget_fields(spec: Any, settings: StudySettings) -> dict[str, Any]:
    fields = {"seed": settings.seed}
    if settings.total_steps is not None:
        fields["total_steps"] = settings.total_steps
    names = {f.name for f in dataclasses.fields(spec.config)}
    if "eval_episodes" in names:
        fields["eval_episodes"] = settings.eval_episodes
    return {k: v for k, v in fields.items() if k in names}


def _trial_fields(spec: Any, settings: StudySettings, sampled: Mapping[str, Any]) -> dict:
    """What a trial trains with besides the preset: the budget, the fixed fields, the sampled
    ones (what best.yaml records)."""
    return {**_budget_fields(spec, settings), **settings.fixed, **sampled}


def _evaluation_fields(settings: StudySettings, base: Any) -> dict[str, Any]:
    """``eval_every``: ``evaluations`` evaluations spaced evenly inside the budget (the final
    evaluation, the trial's value, comes after them)."""
    budget = base_budget(base)
    return {"eval_every": max(1, math.ceil(budget / (settings.evaluations + 1)))}


def seed_value(run_dir: Path, seed: int, settings: StudySettings) -> float:
    """A seed's value: its run's final evaluation (``eval_return_mean`` of its summary), or,
    for a learner whose run has none (a tabular one), the mean return of ``eval_episodes``
    greedy episodes of its trained agent, seeded by ``seed``."""
    from rlx.runs import read_summary

    value = read_summary(run_dir).get("eval_return_mean")
    if is_number(value) and math.isfinite(value):
        return float(value)
    from rlx.core.evaluation import evaluate
    from rlx.launch.plan import load

    agent = load(run_dir)
    return float(evaluate(agent, episodes=settings.eval_episodes, seed=seed).mean_return)


def _whole_run_finding(run_dir: Path, *, evaluated: bool) -> dict[str, Any] | None:
    """A fatal finding of the doctor over the whole finished run: a live rule that fired only
    at the end, or ``no-learning`` for a training return that never rose above its start
    (its other test, a return stalled short of solving the env, says more about a tuning
    budget than about a config), unless the trial's evaluations rose (``evaluated``: its
    final one above its first): the training return, exploration and all, can stay flat
    while the greedy policy learns."""
    from rlx.diagnostics.doctor import doctor
    from rlx.diagnostics.rules import flat_return

    try:
        diagnosis = doctor(run_dir)
    except RLXError:  # a run that logged nothing the doctor can read
        return None
    flat = not evaluated and flat_return(diagnosis.log) is not None
    for finding in diagnosis:
        if finding.rule.id in FATAL_RULES and (finding.rule.id != "no-learning" or flat):
            return finding_record(finding)
    return None


def finding_record(finding: Any) -> dict[str, Any]:
    """A finding as a trial keeps it: :meth:`Finding.to_dict` and its one line."""
    return dict(as_json({**finding.to_dict(), "line": finding.line()}))


def _note_seeds(
    study_dir: Path,
    run_dir: Path,
    number: int,
    state: str,
    pruner: TrialPruner,
    seeds: Sequence[int],
    values: Sequence[float | None],
    value: float | None = None,
) -> None:
    """The trial's end in each of its seeds' ``summary.json``: ``tune`` (study, trial, seed,
    state, the seed's value and the trial's, the finding that pruned it on the seed it fired
    on) and ``stopped_by`` for a doctor's prune."""
    from rlx.runs import SUMMARY_FILE, read_summary, write_json_atomic
    from rlx.runs.group import seed_folder_name

    finding = pruner.finding
    for index, seed in enumerate(seeds):
        seed_dir = run_dir / seed_folder_name(seed)
        summary = read_summary(seed_dir)
        if not summary:
            continue
        note: dict[str, Any] = {"study": str(study_dir), "trial": number, "seed": seed,
                                "state": state, "seed_value": _get(values, index),
                                "trial_value": value}  # fmt: skip
        if finding is not None and seed == pruner.finding_seed:
            note["pruned_by"] = finding["rule"]
            note["finding"] = finding["line"]
            summary.setdefault("stopped_by", finding["rule"])
        summary["tune"] = note
        write_json_atomic(seed_dir / SUMMARY_FILE, summary, root=study_dir)


def _get(values: Sequence[float | None], index: int) -> float | None:
    return values[index] if index < len(values) else None


def _print_trial(record: TrialRecord) -> None:
    value = "" if record.value is None else f", value {record.value:.4g}"
    if record.seed_values:
        value += f" (seeds: {values_text(record.seed_values)})"
    why = ""
    if record.state == "pruned":
        why = f" by {record.pruned_text()}"
        if record.finding:
            why += f": {record.finding.get('line')}"
    changed = ", ".join(f"{k}={_short(v)}" for k, v in record.config.items()
                        if k not in ("total_steps", "seed", "eval_episodes"))  # fmt: skip
    print(f"rlx tune: trial {record.number} {record.state}{why}{value} ({changed})",
          file=sys.stderr, flush=True)  # fmt: skip


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class TrialPruner:
    """The callback (:mod:`rlx.callbacks`) of one trial, over its seeds as they train one after
    another: it reports each evaluation (or each logged training return) to Optuna and stops
    the run when the median pruner says so, and runs the doctor's fatal rules on every logged
    row (a new :class:`~rlx.diagnostics.doctor.LiveDoctor` for each seed), stopping the run at
    the first finding (:attr:`finding`). As each seed ends (``on_seed_end``, the seed group's
    hook) it takes the seed's value (``seed_value(seed, run_dir)``) and the doctor's verdict on
    the whole run, and stops the group once the trial is pruned.

    Steps: the ``k``-th value of the seed at index ``i`` is reported at ``i * stride + k``,
    ``stride`` being ``evaluations + 1`` with ``on_eval`` and otherwise the number of values
    the first seed reported (a value past a seed's ``stride`` is not reported); each seed's
    first ``evaluations // 3`` values are not judged. Optuna's median pruner sets the trial's
    best value so far against the other trials' median at the step: a trial whose earlier seed
    did well is pruned on a later one only when the others' median there beats that."""

    def __init__(
        self,
        trial: Any,
        algo: str,
        env: str,
        config: Mapping[str, Any],
        *,
        on_eval: bool,
        evaluations: int = 0,
        seed_value: Callable[[int, Path], float] | None = None,
    ) -> None:
        self.trial, self.on_eval_only = trial, on_eval
        self.algo, self.env, self.config = algo, env, dict(config)
        self.seed_value = seed_value
        self.warmup = evaluations // 3
        self.stride: int | None = evaluations + 1 if on_eval else None
        self.seed_index = -1
        """the index of the seed training now (-1 before the first starts)"""
        self.index = 0
        """the values the seed training now has reported (its next one's ``k``)"""
        self.run_dir: Path | None = None
        self.doctor = self._doctor()
        self.finding: dict[str, Any] | None = None
        self.finding_seed: int | None = None
        """the seed whose run the finding is of"""
        self.pruned = False
        self.evaluations: list[float] = []
        """the seed's evaluations' mean returns, in order (none for a learner that does not
        evaluate)"""
        self.values: dict[int, float] = {}
        """seed -> its value, for each seed that completed unpruned"""

    def _doctor(self) -> Any:
        from rlx.diagnostics.doctor import LiveDoctor
        from rlx.diagnostics.rules import RULES_BY_ID

        live = [rule for rule in FATAL_RULES if RULES_BY_ID[rule].live]
        return LiveDoctor(self.algo, self.env, self.config, stop_on=live, every=1,
                          printer=_quiet)  # fmt: skip

    def on_start(self, step: int, info: Mapping[str, Any]) -> bool | None:
        if self.seed_index == 0 and self.stride is None:
            self.stride = max(1, self.index)  # rows: as many as the first seed logged
        self.seed_index += 1
        self.index = 0
        self.evaluations = []
        self.doctor = self._doctor() if self.seed_index > 0 else self.doctor
        run_dir = info.get("run_dir")
        self.run_dir = Path(run_dir) if run_dir is not None else None
        return None

    def observe_episodes(self, ends: Any, returns: Any, lengths: Any) -> None:
        """The seed's finished episodes as its run logs them
        (:class:`rlx.launch.plan.EpisodeCallbacks`):
        its doctor reads them as ``rlx doctor`` reads the run folder."""
        self.doctor.observe_episodes(ends, returns, lengths)

    def on_update(self, step: int, metrics: Mapping[str, float]) -> bool | None:
        self.doctor.observe(step, metrics)
        if not all(math.isfinite(v) for v in metrics.values()):
            self.doctor.check()  # the run raises right after this row: judge it now
        if self.doctor.stop is not None:
            self._found(finding_record(self.doctor.stop))
            return False
        value = metrics.get("episode_return")
        if not self.on_eval_only and value is not None:
            return self._report(float(value))
        return None

    def on_eval(self, step: int, result: Mapping[str, float]) -> bool | None:
        value = result.get("eval_return_mean")
        if value is not None:
            self.evaluations.append(float(value))
        if self.on_eval_only and value is not None:
            return self._report(float(value))
        return None

    def on_seed_end(self, seed: int, status: str) -> bool:
        """The seed group's hook (:func:`rlx.launch.seed_groups.train_seeds`): the seed's value and
        the doctor's whole-run verdict for a seed that completed; False (stop the group) once
        the trial is pruned or a seed did not complete."""
        if self.finding is not None or self.pruned or status != "completed":
            return False
        if self.run_dir is None or self.seed_value is None:
            return True
        value = self.seed_value(seed, self.run_dir)
        first = next(iter(self.evaluations), None)
        finding = _whole_run_finding(self.run_dir, evaluated=first is not None and value > first)
        if finding is not None:
            self.finding, self.finding_seed = finding, seed
            return False
        self.values[seed] = value
        return True

    def _found(self, finding: dict[str, Any]) -> None:
        self.finding = finding
        if self.run_dir is not None:
            self.finding_seed = _seed_of(self.run_dir)

    def _report(self, value: float) -> bool | None:
        k = self.index
        self.index += 1
        if not math.isfinite(value) or (self.stride is not None and k >= self.stride):
            return None
        seed_index = max(self.seed_index, 0)
        self.trial.report(value, seed_index * (self.stride or 0) + k)
        if seed_index > 0 and k < self.warmup:
            return None  # this seed's warm-up (Optuna's own covers the first seed)
        if self.trial.should_prune():
            self.pruned = True
            return False
        return None


def _seed_of(run_dir: Path) -> int | None:
    """The seed a seed group's run folder is of (``seed-3``: 3)."""
    name = run_dir.name
    return int(name[5:]) if name.startswith("seed-") and name[5:].isdigit() else None


def _quiet(message: str) -> None:
    """The trial's own doctor prints nothing: the run's doctor already says what it sees."""


# ============================================================================ parallel workers
def _run_processes(
    study_dir: Path, jobs: int, user_fields: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """``jobs`` worker processes on the study, through :func:`rlx.runs.parallel.run_jobs` as a
    seed group's seeds: each a fresh ``python`` (:data:`TUNE_WORKER`) given its study folder,
    number and the user's fields as JSON on stdin, its output shown line by line as
    ``[worker N] ...``. Ctrl-C (or SIGTERM) sent to this process is passed on to every worker
    as SIGTERM, which stops each after its trial's checkpoint (the trial marked failed); a
    second Ctrl-C aborts them. Returns each worker's ``(status, message)``, and
    ``("interrupted", "")`` when a stop was asked."""
    from rlx.runs.parallel import Job, child_environment, run_jobs

    payloads = [
        json.dumps({"study_dir": str(study_dir), "worker": i, "user_fields": dict(user_fields)},
                   default=str).encode()
        for i in range(jobs)
    ]  # fmt: skip
    work_jobs = [Job(f"worker {i}", payload, key=i) for i, payload in enumerate(payloads)]
    outcomes, aborted = run_jobs(
        work_jobs,
        [sys.executable, "-c", TUNE_WORKER],
        jobs,
        env=child_environment(),
        stop_line="rlx tune: stopping every worker, each after its trial's checkpoint (Ctrl-C "
        "again to abort now).",
    )
    results = [_worker_outcome(outcome) for outcome in outcomes]
    if aborted or any(outcome.stopped for outcome in outcomes):
        results.append(("interrupted", ""))
    return results


def _worker_outcome(outcome: Outcome) -> tuple[str, str]:
    """A worker process's ``(status, message)`` from how it ended: ``done`` for exit code 0,
    ``interrupted`` for :data:`INTERRUPTED_EXIT` (or any end after a stop was asked, a worker
    stopped before it could say so), else ``error`` with the sentence it wrote
    (``rlx: error: ...``) or its last line (a traceback's exception)."""
    code = outcome.returncode
    if code == 0:
        return "done", ""
    # None: never started, a stop came first; below 0: ended by a signal after the stop
    if code is None or code == INTERRUPTED_EXIT or (outcome.stopped and code < 0):
        return "interrupted", ""
    lines = [line.strip() for line in outcome.tail if line.strip()]
    sentence = next((line.removeprefix("rlx: error: ") for line in reversed(lines)
                     if line.startswith("rlx: error: ")), None)  # fmt: skip
    last = next((line for line in reversed(lines) if not line.startswith("rlx")), None)
    return "error", sentence or last or f"a tune worker ended with exit code {code}"


def worker_main() -> int:
    """One ``jobs=K`` worker's process (:data:`TUNE_WORKER`): reads its study folder, number
    and user fields as JSON on stdin, and runs :func:`work` until the study has its trials.
    The study's process stops it with SIGTERM, which a run in progress reads itself (it saves
    a checkpoint and stops) and which is a Ctrl-C anywhere else (:func:`_stop`). Exit codes as
    the CLI's: 0 done, 2 an error (its sentence on stderr), :data:`INTERRUPTED_EXIT` stopped."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)
    try:
        payload = json.loads(sys.stdin.read())  # from the study's own process
        work(payload["study_dir"], int(payload["worker"]), raise_errors=True,
             user_fields=payload["user_fields"])  # fmt: skip
    except KeyboardInterrupt:
        for sig in (signal.SIGINT, signal.SIGTERM):  # stopping already: leave without a traceback
            signal.signal(sig, signal.SIG_IGN)
        print("rlx tune: worker stopped", file=sys.stderr)
        return INTERRUPTED_EXIT
    except RLXError as exc:
        print(f"rlx: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def _stop(signum: int, frame: Any) -> None:
    """A worker's stop outside a run: KeyboardInterrupt, as Ctrl-C. A Ctrl-C at a terminal
    sends the worker SIGINT and the study's process, which passes it on, sends SIGTERM: the
    SIGTERM after the first stop is ignored, so the worker stops once (a second SIGINT, the
    user's second Ctrl-C, still raises)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


# ============================================================================ best.yaml
def write_best(result: StudyResult) -> Path | None:
    """``best.yaml``: the best completed trial's config, as ``rlx train --config`` reads it,
    with the held-out check (when there is one) in its comments."""
    from rlx.launch.config_file import write_config_file

    best = result.best
    if best is None:
        return None
    s = result.settings
    comment = (
        f"The best trial of the rlx tune study in {result.study_dir}: trial {best.number} of "
        f"{len(result.trials)}\n(its seed group: {best.run_dir}). Its value, {best.value:.6g}, "
        "is the mean minus one\nstandard error of its final evaluations on seeds "
        f"{seeds_text(best.seeds)}: {values_text(best.seed_values)}.\n"
        f"Train it again: rlx train --config {result.best_file} --run-dir DIR\n"
        "Fields not listed are the algorithm's defaults and the env's preset."
    )
    if result.heldout is not None:
        comment += "\n\n" + "\n".join(result.heldout.lines())
    elif s.heldout_seeds == 0:
        comment += "\n\nNo held-out check (heldout_seeds=0)."
    elif not result.finished:
        comment += "\n\nThe held-out check runs once the study has its trials."
    return write_config_file(result.best_file, algo=s.algo, env=s.env, fields=best.config,
                             env_kwargs=s.env_kwargs, comment=comment)  # fmt: skip


# ============================================================================ the held-out check
def defaults_fields(spec: Any, settings: StudySettings) -> dict[str, Any]:
    """The defaults' side of the held-out check: what ``rlx train ALGO --env ENV --total-steps
    S`` trains besides the preset (the study's budget and fixed fields), without the seed."""
    fields = {**_budget_fields(spec, settings), **settings.fixed}
    return {name: value for name, value in fields.items() if name != "seed"}


def check_heldout(
    result: StudyResult, *, jobs: int = 1, user_fields: Mapping[str, Any] | None = None
) -> HeldOutCheck | None:
    """The held-out check of a study that has its trials: its record when ``heldout.json``
    holds the check of the best trial on the study's held-out seeds (nothing trains), else
    the best config and the defaults trained on :meth:`StudySettings.held_out_seeds` into
    ``heldout/trial-NNNN/`` and ``heldout/defaults/`` (``jobs`` seeds at a time; the
    defaults' runs of an earlier record are kept when their seeds and config match), written
    to ``heldout.json``. None with ``heldout_seeds=0`` or no completed trial."""
    from rlx import registry
    from rlx.runs.files import real_folder

    s, best, folder = result.settings, result.best, result.study_dir
    if s.heldout_seeds == 0 or best is None:
        return None
    if result.heldout is not None:
        return result.heldout
    previous = read_heldout(folder)
    spec = registry.get(s.algo)
    seeds = s.held_out_seeds()
    trial_seeds = sorted({seed for t in result.trials for seed in t.seeds} | set(s.trial_seeds()))
    shared = sorted(set(seeds) & set(trial_seeds))
    if shared:
        raise ConfigError(
            f"{folder / STORAGE_FILE} records trials trained on seed {shared[0]}, one of the "
            "held-out seeds; the study folder is damaged or was written by another program."
        )
    defaults = defaults_fields(spec, s)
    best_config = best.heldout_fields()
    same = _same_config(spec, s, best_config, defaults)
    real_folder(folder / HELDOUT_DIR, root=folder)  # a real folder of the study, not a link
    user = dict(user_fields or {})
    reuse = previous is not None and previous.seeds == seeds
    if reuse and previous is not None and same_json(previous.defaults.config, defaults):
        defaults_side = previous.defaults
    else:
        defaults_side = _train_side(result, spec, "defaults", defaults, seeds, jobs, user)
    if same:
        best_side = HeldOutSide(best_config, defaults_side.run_dir, defaults_side.values)
    elif (
        reuse and previous is not None and previous.best_trial == best.number
        and same_json(previous.best.config, best_config)
    ):  # fmt: skip
        best_side = previous.best
    else:
        name = TRIAL_DIR.format(number=best.number)
        best_side = _train_side(result, spec, name, best_config, seeds, jobs, user)
    check = HeldOutCheck(seeds, trial_seeds, best.number, best_side, defaults_side, same)
    from rlx.runs import write_json_atomic

    write_json_atomic(folder / HELDOUT_FILE, check.to_dict(folder), root=folder)
    print(f"rlx tune: held out: {check.sentence()}", file=sys.stderr, flush=True)
    return check


def _same_config(
    spec: Any, settings: StudySettings, best: Mapping[str, Any], defaults: Mapping[str, Any]
) -> bool:
    """Whether the best trial's fields and the defaults' make the same config."""
    from rlx.launch.plan import checked_config

    ours, _ = checked_config(spec, settings.env, dict(best))
    theirs, _ = checked_config(spec, settings.env, dict(defaults))
    return bool(dataclasses.asdict(ours) == dataclasses.asdict(theirs))


def _train_side(
    result: StudyResult,
    spec: Any,
    name: str,
    fields: Mapping[str, Any],
    seeds: list[int],
    jobs: int,
    user_fields: Mapping[str, Any],
) -> HeldOutSide:
    """One side of the check, trained as a seed group into ``heldout/<name>``."""
    from rlx.launch.seed_groups import available_cores

    s, folder = result.settings, result.study_dir
    run_dir = folder / HELDOUT_DIR / name
    what = "the defaults" if name == "defaults" else f"the best config ({name})"
    print(f"rlx tune: held-out check: training {what} on seeds {seeds_text(seeds)} into "
          f"{run_dir}", file=sys.stderr, flush=True)  # fmt: skip
    group = train_group(
        spec.name, s.env, env_kwargs=s.env_kwargs or None, run_dir=run_dir, seeds=seeds,
        jobs=max(1, min(jobs, len(seeds), available_cores())),
        overrides={**dict(fields), **dict(user_fields)},
    )  # fmt: skip
    values = []
    for run in group.runs:
        if run.status == "interrupted":
            raise KeyboardInterrupt
        if run.status != "completed":
            why = f": {run.error}" if run.error else ""
            raise TuneError(
                f"the held-out check's seed {run.seed} of {what} ended {run.status}{why}; "
                "rlx tune on the study again trains it again."
            )
        values.append(seed_value(run.run_dir, run.seed, s))
    return HeldOutSide(dict(fields), run_dir, values)


# ============================================================================ rlx.tune(...)
make_callable(__name__, "tune")  # rlx.tune(...) calls tune

__all__ = [
    "FATAL_RULES",
    "HELDOUT_OFFSET",
    "SPACES",
    "HeldOutCheck",
    "HeldOutSide",
    "Space",
    "StudyResult",
    "StudySettings",
    "TrialPruner",
    "TrialRecord",
    "TrialSampler",
    "TuneError",
    "check_heldout",
    "check_journal",
    "create_study",
    "defaults_fields",
    "is_study",
    "read_heldout",
    "read_settings",
    "read_study",
    "seed_value",
    "space_for",
    "trial_attrs",
    "trial_value",
    "tune",
    "welch_interval",
    "work",
    "worker_main",
    "write_best",
]
