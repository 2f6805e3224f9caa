"""``rlx.tune``: hyperparameter search on Optuna, with the doctor as a second pruner.

```python
import rlx
result = rlx.tune("ppo", "CartPole-v1", trials=20, total_steps=50_000, study_dir="runs/study")
print(result)                      # the trials, and the best one
# rlx train --config runs/study/best.yaml   trains the best trial's config again
```

``rlx tune ALGO --env ENV --trials N --total-steps S --study-dir DIR [--jobs K]`` is the same
on the command line. Optuna's TPE sampler proposes each trial's config from the algorithm's
search space (:data:`SPACES`), and two pruners stop a trial early:

- Optuna's median pruner, on an intermediate value: the mean return of the evaluations a deep
  agent makes during training (``evaluations`` of them, ``eval_every`` spaced over the budget),
  or, for a learner that does not evaluate while it trains (the tabular ones), the training
  return of each logged row. A trial below the median of the earlier trials at the same
  evaluation stops.
- The doctor (:class:`rlx.diagnostics.doctor.LiveDoctor`, on every logged row): a trial whose
  run shows a fatal finding (:data:`FATAL_RULES`: NaN or infinite metrics, Q values or the TD
  error running away, the policy's entropy collapsing while it is still poor) stops at once;
  one with no learning at all (``no-learning``, a rule that judges a whole run) is pruned when
  it ends. The finding is recorded in the trial (user attributes ``pruned_by`` and
  ``finding``) and in its run folder's ``summary.json`` (``stopped_by`` and ``tune``).

A trial's value is its run's final evaluation: ``eval_return_mean`` of ``summary.json`` (a deep
agent's ``eval_episodes`` deterministic episodes), or, for a tabular learner, the mean return of
``eval_episodes`` greedy episodes. Every trial trains with the same seed (the study's), so
trials differ by their config alone, as in the rl-baselines3-zoo.

The study folder:

```
STUDY_DIR/study.journal   Optuna's JournalStorage on a file: JSON lines appended under a
                          file lock, safe for several processes (and on NFS); resumable
STUDY_DIR/trial-0000/     one rlx run folder per trial (config.json, metrics, summary, ...)
STUDY_DIR/best.yaml       the best trial's config: rlx train --config STUDY_DIR/best.yaml
STUDY_DIR/report.html     rlx report STUDY_DIR: the trials, and the best one's curve
```

The journal is a file of a folder that may have come from someone else. Before Optuna opens
it, rlx opens it itself without following a link and without waiting on it (made when
missing), refuses anything but a regular file of at most :data:`rlx.runs.files.MAX_LOG_BYTES`
in one sentence, and checks that the name still opens that same file
(:func:`rlx.runs.files.check_regular`). What remains: Optuna opens the journal (and makes its
``.lock`` link) by name each time it reads or appends, so a link swapped in at that name after
the check, by someone writing in the study folder while the study runs, is followed by Optuna;
nothing in the folder as it was handed over is.

Running ``rlx tune`` again on the same folder resumes the study: a trial that Ctrl-C
interrupted is marked failed (its run folder keeps what it wrote), and the study goes on until
``trials`` trials have completed or been pruned; a larger ``trials`` extends it. A trial left
running by a process that was killed outright is marked failed when the next ``rlx tune`` on
the machine starts. ``jobs=K`` starts K worker processes on the same study (through its
storage); ``ray="local"`` (or a cluster's address) runs them as Ray tasks instead, on
machines that share STUDY_DIR (:mod:`rlx.distributed.tune_ray`).

**Where the search spaces come from.**
The deep agents' spaces are rl-baselines3-zoo's (``rl_zoo3/hyperparams_opt.py``:
``sample_ppo_params``, ``sample_a2c_params``, ``sample_dqn_params``, ``sample_sac_params``,
``sample_td3_params``), written in rlx's field names and restricted to the fields rlx's configs
have; each :class:`Space` names what it took and what it changed. Two changes apply to every
space: choices that would leave fewer than :data:`MIN_UPDATES` updates in the study's budget
(rollouts, target syncs, train intervals and warm-ups longer than that share of it) are left
out, so that a small budget is not spent on configs that cannot learn in it or that the doctor
cannot judge; and a sampled minibatch or
warm-up that the config would refuse is cut to the largest valid value (the zoo's "batch_size
<= n_steps"). The zoo has no tabular spaces: theirs borrows its DQN space's exploration and
discount ranges and takes the step size alpha over Sutton and Barto's sweep (Figure 6.3 of
*Reinforcement Learning: An Introduction*, alpha from 0.1 to 1), extended log-uniformly down to
0.01 for noisy envs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import socket
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rlx.callable_module import make_callable
from rlx.diagnostics.rules import MIN_POINTS
from rlx.errors import ConfigError, RLXError, TrainingError
from rlx.runs.files import (
    MAX_INT_DIGITS,
    MAX_JSON_DEPTH,
    bounded_lines,
    check_regular,
    json_depth,
    open_text,
)
from rlx.runs.folder import STUDY_JOURNAL

if TYPE_CHECKING:
    from rlx.core.env_recipe import Consent

STORAGE_FILE = STUDY_JOURNAL
"""Optuna's journal of the study, in the study folder (its name is :mod:`rlx.runs.folder`'s)."""
LOCK_FILE = ".rlx-tune.lock"
"""Held while a worker decides whether to start a trial (so K workers start N, not N + K - 1)."""
BEST_FILE = "best.yaml"
TRIAL_DIR = "trial-{number:04d}"
STUDY_NAME = "rlx"
SETTINGS_ATTR = "rlx"
"""The study's user attribute that holds its :class:`StudySettings`."""
FATAL_RULES = ("non-finite", "dqn-diverges", "q-diverges", "entropy-collapse", "no-learning")
"""Doctor rules (:mod:`rlx.diagnostics.rules`) whose finding prunes a trial: the run cannot
become good by training on. All but ``no-learning`` are checked as the run trains; that one
judges a whole run, so it prunes a trial when the trial ends, and only by its test of a return
that never rose above its start (:func:`rlx.diagnostics.rules.flat_return`), confirmed by the
trial's evaluations (its final one no higher than its first): its other test, a return stopped
far short of solving the env, says at a tuning budget more about the budget than about the
config."""
MIN_UPDATES = 2 * MIN_POINTS
"""Choices of a space that leave fewer updates (logged rows) than this in the study's budget
are left out: the doctor's rules on the return need as many points to judge a run (the others
half as many)."""


# ============================================================================ search spaces
class Suggest:
    """What a space samples with: Optuna's ``trial.suggest_*`` under the zoo's parameter
    names, the values set under rlx's field names (:attr:`fields`), and what the space needs
    to size its choices: the base config (defaults, the env's preset, the fields the user
    fixed) and the budget. A field the user fixed is never sampled."""

    def __init__(
        self, trial: Any, base: Mapping[str, Any], fixed: Iterable[str], budget: int
    ) -> None:
        self.trial, self.base, self.fixed, self.budget = trial, dict(base), set(fixed), budget
        self.fields: dict[str, Any] = {}

    def value(self, name: str) -> Any:
        """A field's value so far: set by the space, else the base config's."""
        return self.fields.get(name, self.base.get(name))

    def set(self, name: str, value: Any) -> None:
        """Set a field (unless the user fixed it)."""
        if name not in self.fixed and name in self.base:
            self.fields[name] = value

    def categorical(
        self, name: str, choices: Sequence[Any], *, param: str | None = None, to: Any = None
    ) -> None:
        """``name`` from ``choices`` (Optuna parameter ``param``, default ``name``); ``to``
        maps a choice to the field's value (``"small"`` -> ``(64, 64)``)."""
        if name in self.fixed or name not in self.base:
            return
        choice = self.trial.suggest_categorical(param or name, list(choices))
        self.set(name, to(choice) if to is not None else choice)

    def uniform(
        self, name: str, low: float, high: float, *, log: bool = False, param: str | None = None,
        to: Callable[[float], Any] | None = None,
    ) -> None:  # fmt: skip
        """``name`` uniform (or log-uniform) in ``[low, high]``."""
        if name in self.fixed or name not in self.base:
            return
        sampled = self.trial.suggest_float(param or name, low, high, log=log)
        self.set(name, to(sampled) if to is not None else sampled)

    def within_budget(self, choices: Sequence[int], per_choice: int = 1) -> list[int]:
        """The choices ``c`` with ``c * per_choice`` at most the budget over
        :data:`MIN_UPDATES` (the smallest is always kept)."""
        limit = self.budget / MIN_UPDATES
        kept = [c for c in choices if c * per_choice <= limit]
        return kept or [min(choices)]


@dataclass(frozen=True)
class Space:
    """The search space of one family of algorithms: ``sample(suggest)`` sets the fields,
    ``source`` says where its ranges come from."""

    algos: tuple[str, ...]
    sample: Callable[[Suggest], None]
    source: str


NET_ARCH = {"tiny": (64,), "small": (64, 64), "medium": (256, 256), "big": (400, 300)}
"""The zoo's ``net_arch`` names as rlx's ``hidden_sizes`` (one network per role in rlx)."""
ZOO_GAMMAS = (0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999)
"""The zoo's discount choices for DQN, SAC and TD3."""


def _one_minus(x: float) -> float:
    return 1.0 - x


def _policy_gradient(s: Suggest, batch_sizes: Sequence[int] | None, epochs: bool) -> None:
    """PPO's and A2C's common part: rollout length, discount, GAE, step size, entropy bonus,
    gradient clip, networks."""
    envs = int(s.value("num_envs") or 1) * int(s.value("runners") or 1)
    s.categorical(
        "num_steps", s.within_budget((32, 64, 128, 256, 512, 1024, 2048), envs), param="n_steps"
    )
    s.uniform("gamma", 1e-4, 0.03, log=True, param="one_minus_gamma", to=_one_minus)
    s.uniform("gae_lambda", 1e-4, 0.1, log=True, param="one_minus_gae_lambda", to=_one_minus)
    s.uniform("learning_rate", 1e-5, 2e-3, log=True)
    s.uniform("ent_coef", 1e-8, 0.1, log=True)
    if batch_sizes is not None:
        s.categorical("minibatch_size", batch_sizes, param="batch_size")
        s.categorical("clip_eps", (0.1, 0.2, 0.3, 0.4), param="clip_range")
    if epochs:
        s.categorical("num_epochs", (1, 5, 10, 20), param="n_epochs")
    s.uniform("max_grad_norm", 0.3, 2.0)
    arches = ("tiny", "small", "medium") if batch_sizes is not None else ("small", "medium")
    s.categorical("hidden_sizes", arches, param="net_arch", to=NET_ARCH.get)
    s.categorical("activation", ("tanh", "relu"), param="activation_fn")
    if "minibatch_size" in s.base:  # the zoo's "batch_size <= n_steps", for a rollout of N x T
        rollout = envs * int(s.value("num_steps"))
        size = min(int(s.value("minibatch_size")), rollout)
        while rollout % size:
            size //= 2
        s.set("minibatch_size", max(size, 1))


def _ppo(s: Suggest) -> None:
    _policy_gradient(s, (32, 64, 128, 256, 512), epochs=True)


def _a2c(s: Suggest) -> None:
    _policy_gradient(s, None, epochs=False)


def _dqn(s: Suggest) -> None:
    s.categorical("gamma", ZOO_GAMMAS)
    s.uniform("learning_rate", 1e-5, 2e-3, log=True)
    s.categorical("batch_size", (16, 32, 64, 100, 128, 256, 512))
    s.categorical("buffer_size", (10_000, 50_000, 100_000, 1_000_000))
    s.uniform("epsilon_end", 0.0, 0.2, param="exploration_final_eps")
    s.uniform("exploration_fraction", 0.0, 0.5)
    s.categorical(
        "sync_every",
        s.within_budget((1, 1_000, 5_000, 10_000, 15_000, 20_000)),
        param="target_update_interval",
    )
    _warm_up(s, (0, 1_000, 5_000, 10_000, 20_000))
    s.categorical("train_freq", s.within_budget((1, 4, 8, 16, 128, 256, 1_000)))
    if "gradient_steps" not in s.fixed:
        subsample = s.trial.suggest_categorical("subsample_steps", [1, 2, 4, 8])
        s.set("gradient_steps", max(int(s.value("train_freq")) // subsample, 1))
    s.categorical("hidden_sizes", ("tiny", "small", "medium"), param="net_arch", to=NET_ARCH.get)


def _warm_up(s: Suggest, choices: Sequence[int]) -> None:
    """``learning_starts`` from ``choices`` (those within the budget), at most the buffer."""
    s.categorical("learning_starts", s.within_budget(choices))
    buffer = s.value("buffer_size")
    if buffer is not None and int(s.value("learning_starts")) > int(buffer):
        s.set("learning_starts", int(buffer))


def _actor_critic(s: Suggest, batch_sizes: Sequence[int]) -> None:
    """SAC's and TD3's common part (the zoo's one learning rate for both networks)."""
    s.categorical("gamma", ZOO_GAMMAS)
    rates = [name for name in ("actor_learning_rate", "critic_learning_rate")
             if name not in s.fixed]  # fmt: skip
    if rates:
        rate = s.trial.suggest_float("learning_rate", 1e-5, 1.0, log=True)
        for name in rates:
            s.set(name, rate)
    s.categorical("batch_size", batch_sizes)
    s.categorical("buffer_size", (10_000, 100_000, 1_000_000))
    s.categorical("tau", (0.001, 0.005, 0.01, 0.02, 0.05, 0.08))
    s.categorical("train_freq", s.within_budget((1, 4, 8, 16, 32, 64, 128, 256, 512)))
    s.set("gradient_steps", s.value("train_freq"))  # the zoo's gradient_steps = train_freq
    s.categorical("hidden_sizes", ("small", "medium", "big"), param="net_arch", to=NET_ARCH.get)


def _sac(s: Suggest) -> None:
    _actor_critic(s, (16, 32, 64, 128, 256, 512, 1024, 2048))
    _warm_up(s, (0, 1_000, 10_000, 20_000))


def _td3(s: Suggest) -> None:
    _actor_critic(s, (16, 32, 64, 100, 128, 256, 512, 1024, 2048))
    s.uniform("exploration_noise", 0.0, 1.0, param="noise_std")


def _tabular(s: Suggest) -> None:
    s.uniform("alpha", 0.01, 1.0, log=True)
    s.set("epsilon_schedule", "linear")
    s.uniform("exploration_fraction", 0.01, 0.5)
    s.uniform("epsilon_end", 0.0, 0.2, param="exploration_final_eps")
    s.categorical("gamma", ZOO_GAMMAS)


ZOO = "rl-baselines3-zoo, rl_zoo3/hyperparams_opt.py"
SPACES: dict[str, Space] = {
    space_algo: space
    for space in (
        Space(
            ("ppo",),
            _ppo,
            f"{ZOO}, sample_ppo_params: n_steps -> num_steps, batch_size -> minibatch_size, "
            "1 - gamma and 1 - gae_lambda log-uniform, learning_rate log-uniform in [1e-5, "
            "2e-3] (the zoo's range today; [1e-5, 1] before), ent_coef log-uniform in [1e-8, "
            "0.1], clip_range -> clip_eps, n_epochs -> num_epochs, max_grad_norm in [0.3, 2], "
            "net_arch -> hidden_sizes, activation_fn -> activation",
        ),
        Space(
            ("a2c",),
            _a2c,
            f"{ZOO}, sample_a2c_params: as PPO's without minibatches, clip and epochs; "
            "net_arch small or medium",
        ),
        Space(
            ("dqn",),
            _dqn,
            f"{ZOO}, sample_dqn_params: gamma from the zoo's choices, learning_rate "
            "log-uniform in [1e-5, 1], batch_size, buffer_size, exploration_final_eps -> "
            "epsilon_end in [0, 0.2], exploration_fraction in [0, 0.5], "
            "target_update_interval -> sync_every, learning_starts, train_freq, "
            "gradient_steps = train_freq // subsample_steps, net_arch -> hidden_sizes",
        ),
        Space(
            ("sac",),
            _sac,
            f"{ZOO}, sample_sac_params: gamma, one learning_rate (log-uniform in [1e-5, 1]) "
            "for actor_learning_rate and critic_learning_rate, batch_size, buffer_size, "
            "learning_starts, train_freq = gradient_steps, tau, net_arch -> hidden_sizes "
            "(log_std_init left out: rlx's SAC has no such field)",
        ),
        Space(
            ("td3",),
            _td3,
            f"{ZOO}, sample_td3_params: as SAC's without learning_starts; noise_std -> "
            "exploration_noise in [0, 1] (Gaussian noise: rlx's TD3 has no "
            "Ornstein-Uhlenbeck noise)",
        ),
        Space(
            ("q-learning", "sarsa", "expected-sarsa", "double-q", "mc"),
            _tabular,
            "no zoo space: alpha log-uniform in [0.01, 1] (Sutton and Barto's Figure 6.3 "
            "sweeps 0.1 to 1); the zoo's DQN exploration (a linear epsilon schedule, "
            "exploration_final_eps -> epsilon_end in [0, 0.2], exploration_fraction in [0.01, "
            "0.5]) and gamma choices",
        ),
    )
    for space_algo in space.algos
}
"""Algorithm name -> its :class:`Space`."""


def space_for(algo: str) -> Space:
    """The search space of ``algo``; ConfigError naming the algorithms that have one."""
    from rlx import registry

    name = registry.get(algo).name
    if name not in SPACES:
        raise ConfigError(
            f"rlx tune has no search space for {name}; spaces exist for {', '.join(SPACES)}."
        )
    return SPACES[name]


# ============================================================================ settings, results
@dataclass(frozen=True)
class StudySettings:
    """What a study tunes, kept in its storage so that a rerun resumes the same study."""

    algo: str
    env: str
    trials: int
    total_steps: int | None = None
    seed: int = 0
    evaluations: int = 5
    eval_episodes: int = 10
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    fixed: dict[str, Any] = field(default_factory=dict)
    """config fields the user set for every trial (the space leaves them alone)"""

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self), default=_plain))


@dataclass(frozen=True)
class TrialRecord:
    """One trial as the study keeps it."""

    number: int
    state: str
    """complete, pruned, failed, running or waiting"""
    value: float | None
    params: dict[str, Any]
    """Optuna's parameters (the zoo's names)"""
    config: dict[str, Any]
    """the config fields the trial trained with (rlx's names), as best.yaml writes them"""
    run_dir: Path
    pruned_by: str | None = None
    """``"doctor"`` or ``"median"`` for a pruned trial"""
    finding: dict[str, Any] | None = None
    """the doctor's finding that pruned it (:meth:`rlx.diagnostics.doctor.Finding.to_dict`
    with its one-line text as ``line``)"""
    error: str | None = None
    intermediate: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StudyResult:
    """What ``rlx.tune`` returns (and :func:`read_study` reads): the settings, every trial,
    the best one and its config file."""

    study_dir: Path
    settings: StudySettings
    trials: list[TrialRecord]

    @property
    def best(self) -> TrialRecord | None:
        """The completed trial with the highest value (the first one on a tie)."""
        done = [t for t in self.trials if t.state == "complete" and t.value is not None]
        return max(done, key=lambda t: (t.value, -t.number)) if done else None

    @property
    def best_file(self) -> Path:
        return self.study_dir / BEST_FILE

    def count(self, state: str) -> int:
        return sum(t.state == state for t in self.trials)

    def __str__(self) -> str:
        s = self.settings
        by_doctor = sum(t.pruned_by == "doctor" for t in self.trials)
        lines = [
            f"study {self.study_dir}: {s.algo} on {s.env}, {len(self.trials)} trials "
            f"({self.count('complete')} complete, {self.count('pruned')} pruned, "
            f"{by_doctor} of them by the doctor, {self.count('failed')} failed)"
        ]
        for t in self.trials:
            value = "-" if t.value is None else f"{t.value:.4g}"
            why = f" by {_pruned_text(t)}" if t.state == "pruned" else ""
            lines.append(f"  trial {t.number}: {t.state}{why}, value {value}")
        best = self.best
        if best is not None:
            lines.append(
                f"best: trial {best.number}, value {best.value:.4g}; train it again with "
                f"rlx train --config {self.best_file}"
            )
        return "\n".join(lines)


def _pruned_text(trial: TrialRecord) -> str:
    if trial.pruned_by == "doctor" and trial.finding:
        return f"the doctor ({trial.finding.get('rule')})"
    return "the median pruner" if trial.pruned_by == "median" else "Optuna"


# ============================================================================ the entry point
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
        seed: every trial's training seed, and the sampler's (default 0).
        jobs: worker processes on this machine (or Ray tasks with ``ray``), sharing the study.
        evaluations: evaluations during each deep agent's training, for the median pruner
            (default 5; 0: prune on the training return).
        eval_episodes: episodes of each evaluation, and of the final one that is a trial's
            value (default 10).
        ray: run the ``jobs`` workers as Ray tasks (extra ``ray``): ``"local"`` starts a Ray
            instance on this machine, ``"HOST:PORT"`` (or ``"auto"``) joins a cluster whose
            machines share ``study_dir``.
        trust_env_code: resuming a study (``env`` not given), let its recorded env be built
            from code its journal names (``package.module:factory``, an id whose module
            registers it); without it that is refused in one sentence, since a study folder
            may come from someone else.
        consent: words the refusals for where the user is (Python or the command line).
        **fixed: config fields set for every trial, left out of the search. Those only the
            user sets (:data:`rlx.plan.USER_ONLY_FIELDS`: ``ray_address``,
            ``allow_unisolated``) are this call's alone: the study never records them, and one
            its journal records is dropped with a warning (the folder may be someone else's).

    Returns the :class:`StudyResult`; the best trial's config is in ``study_dir/best.yaml``.
    Ctrl-C stops every worker after its trial's checkpoint (the trial is marked failed) and
    raises KeyboardInterrupt; ``rlx tune`` on the same folder goes on from there.
    """
    from rlx.core.env_recipe import IN_PYTHON
    from rlx.plan import USER_ONLY_FIELDS

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
        fixed=fixed,
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
) -> StudySettings:
    """Create the study in ``study_dir``, or check that what is asked matches the study it
    holds (only ``trials`` may change); returns the settings the workers read."""
    given: dict[str, Any] = {"algo": algo, "env": env, "total_steps": total_steps, "seed": seed,
             "evaluations": evaluations, "eval_episodes": eval_episodes,
             "env_kwargs": env_kwargs or None, "fixed": dict(fixed or {}) or None}  # fmt: skip
    if trials is not None:
        _check_whole("trials", trials, 1)
    for name in ("total_steps", "evaluations", "eval_episodes", "seed"):
        if given[name] is not None:
            _check_whole(name, given[name], 0 if name in ("evaluations", "seed") else 1)
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
            if json.loads(json.dumps(value, default=_plain)) != current[name]:
                raise ConfigError(
                    f"{study_dir} holds a study of {settings.algo} on {settings.env} with "
                    f"{name}={current[name]!r}, not {value!r}; resume it as it is (leave "
                    f"{name} out) or start another study in a new folder."
                )
        if trials is not None and trials != settings.trials:
            settings = dataclasses.replace(settings, trials=trials)
            _open_study(study_dir).set_user_attr(SETTINGS_ATTR, settings.to_dict())
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
                             env_kwargs, fixed)  # fmt: skip
    optuna = _optuna()
    study_dir.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(
        study_name=STUDY_NAME, storage=_storage(study_dir), direction="maximize",
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
    return _open_study(Path(study_dir))


_SETTING_NAMES = ("trials", "total_steps", "seed", "evaluations", "eval_episodes", "env_kwargs")


def read_settings(
    study_dir: str | Path,
    *,
    given: Sequence[str] = (),
    consent: Consent | None = None,
    warn: bool = False,
) -> StudySettings:
    """The settings kept in a study's storage, checked as data (names and types). A fixed
    field only the user sets (:data:`rlx.plan.USER_ONLY_FIELDS`) is dropped, as
    :func:`rlx.plan.without_user_only` does (``given``, ``consent`` and ``warn`` as there):
    the study's workers take those from the command that runs them, never from its folder."""
    from rlx.core.env_recipe import IN_PYTHON
    from rlx.plan import without_user_only

    data = _open_study(Path(study_dir)).user_attrs.get(SETTINGS_ATTR)
    where = f"{study_dir}/{STORAGE_FILE}"
    if not isinstance(data, dict):
        raise ConfigError(f"{where} is not a study written by rlx tune.")
    kinds: dict[str, Any] = {
        "algo": str, "env": str, "trials": int, "total_steps": (int, type(None)), "seed": int,
        "evaluations": int, "eval_episodes": int, "env_kwargs": dict, "fixed": dict,
    }  # fmt: skip
    for name, value in data.items():
        if name not in kinds or not isinstance(value, kinds[name]) or isinstance(value, bool):
            raise ConfigError(
                f"{where} records the study setting {name}={value!r}, which is not one rlx tune "
                "writes; the study folder is damaged or was written by another program."
            )
    missing = sorted({"algo", "env", "trials"} - set(data))
    if missing:
        raise ConfigError(
            f"{where} records no study setting {missing[0]}, which rlx tune always writes; the "
            "study folder is damaged or was written by another program."
        )
    fixed = without_user_only(
        data.get("fixed", {}), f"{where} (the study's fixed fields)", given=given,
        consent=consent or IN_PYTHON, warn=warn,
    )  # fmt: skip
    return StudySettings(**{**data, "fixed": fixed})


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
    user-only config fields (:data:`rlx.plan.USER_ONLY_FIELDS`) the user gave the command
    that runs this worker, for every trial (never recorded in the study)."""
    from rlx.core.threads import set_torch_threads

    set_torch_threads()
    folder = Path(study_dir)
    try:
        settings = read_settings(folder)
        study = _open_study(folder, worker=worker, settings=settings)
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


def _next_trial(folder: Path, study: Any, settings: StudySettings) -> Any:
    """A new trial, or None when the study has enough: under the study's lock, counting the
    completed, pruned and running trials (stale running ones marked failed first)."""
    optuna = _optuna()
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
    optuna = _optuna()
    host = socket.gethostname()
    storage = None
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = trial_attrs(trial, folder)["worker"] or {}
        if worker.get("host") != host or _alive(worker.get("pid", 0)):
            continue
        storage = storage or _storage(folder)
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


def run_trial(
    folder: Path,
    study: Any,
    trial: Any,
    settings: StudySettings,
    user_fields: Mapping[str, Any] | None = None,
) -> TrialRecord:
    """Train one trial into ``folder/trial-NNNN`` with the config its space samples, the
    median pruner and the doctor watching, and tell the study how it ended. ``user_fields``:
    as :func:`work` takes them (passed to the training, never recorded)."""
    import rlx
    from rlx import registry
    from rlx.runs import read_summary

    optuna = _optuna()
    states = optuna.trial.TrialState
    spec = registry.get(settings.algo)
    base = _base_config(spec, settings)
    suggest = Suggest(trial, dataclasses.asdict(base), settings.fixed, base_budget(base))
    space_for(spec.name).sample(suggest)
    fields = _trial_fields(spec, settings, suggest.fields)
    run_dir = folder / TRIAL_DIR.format(number=trial.number)
    trial.set_user_attr("config", json.loads(json.dumps(fields, default=_plain)))
    trial.set_user_attr("run_dir", run_dir.name)
    evaluates = "eval_every" in base.__dataclass_fields__ and settings.evaluations > 0
    extra = _evaluation_fields(settings, base) if evaluates else {}
    pruner = TrialPruner(trial, spec.name, settings.env, {**dataclasses.asdict(base), **fields},
                         on_eval=evaluates)  # fmt: skip
    agent = None
    try:
        agent = rlx.train(
            spec.name, settings.env, env_kwargs=settings.env_kwargs or None, run_dir=run_dir,
            overwrite=run_dir.exists(), progress=False, callbacks=[pruner], **fields, **extra,
            **dict(user_fields or {}),
        )  # fmt: skip
    except TrainingError:
        if pruner.finding is None:
            raise
    except KeyboardInterrupt:
        _tell(study, trial, states.FAIL, error="interrupted (Ctrl-C)")
        raise
    except BaseException as exc:
        message = str(exc) if isinstance(exc, RLXError) else f"{type(exc).__name__}: {exc}"
        _tell(study, trial, states.FAIL, error=message)
        raise
    summary = read_summary(run_dir)
    if summary.get("status") == "interrupted":
        _tell(study, trial, states.FAIL, error="interrupted (Ctrl-C)")
        _note_in_summary(run_dir, trial.number, "failed", None)
        raise KeyboardInterrupt
    value = None if pruner.finding or pruner.pruned else _value(agent, summary, settings)
    finding = pruner.finding
    if finding is None and value is not None:
        first = next(iter(pruner.evaluations), None)
        finding = _whole_run_finding(run_dir, evaluated=first is not None and value > first)
    if finding is not None:
        trial.set_user_attr("pruned_by", "doctor")
        trial.set_user_attr("finding", finding)
        state, value = states.PRUNED, None
    elif pruner.pruned:
        trial.set_user_attr("pruned_by", "median")
        state = states.PRUNED
    else:
        state = states.COMPLETE
    _tell(study, trial, state, value)
    record = _record(study.get_trials(deepcopy=False)[trial.number], folder)
    _note_in_summary(run_dir, trial.number, record.state, finding)
    _print_trial(record)
    if state == states.COMPLETE:
        write_best(read_study(folder))
    return record


def _tell(study: Any, trial: Any, state: Any, value: float | None = None,
          error: str | None = None) -> None:  # fmt: skip
    if error is not None:
        trial.set_user_attr("error", error)
    optuna = _optuna()
    if state == optuna.trial.TrialState.COMPLETE:
        study.tell(trial, value)
    else:
        study.tell(trial, state=state)


def _base_config(spec: Any, settings: StudySettings) -> Any:
    """The config every trial starts from: defaults, the env's preset, the fixed fields and
    the budget (the config's own checks run here: a bad fixed field stops the study early)."""
    from rlx.plan import checked_config

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


def base_budget(config: Any) -> int:
    """A config's budget in env steps, to size a space's choices by (for a tabular learner
    without a step budget: its episodes, each at least a step)."""
    steps = getattr(config, "total_steps", None)
    return int(steps) if steps else int(getattr(config, "episodes", 0) or 0)


def _trial_fields(spec: Any, settings: StudySettings, sampled: Mapping[str, Any]) -> dict:
    """What a trial trains with besides the preset: the budget, the fixed fields, the sampled
    ones (what best.yaml records)."""
    return {**_budget_fields(spec, settings), **settings.fixed, **sampled}


def _evaluation_fields(settings: StudySettings, base: Any) -> dict[str, Any]:
    """``eval_every``: ``evaluations`` evaluations spaced evenly inside the budget (the final
    evaluation, the trial's value, comes after them)."""
    budget = base_budget(base)
    return {"eval_every": max(1, math.ceil(budget / (settings.evaluations + 1)))}


def _value(agent: Any, summary: Mapping[str, Any], settings: StudySettings) -> float:
    """The trial's value: the final evaluation's mean return (a tabular learner's greedy
    policy is evaluated here)."""
    value = summary.get("eval_return_mean")
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    import rlx

    return float(
        rlx.evaluate(agent, episodes=settings.eval_episodes, seed=settings.seed).mean_return
    )


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
    return json.loads(json.dumps({**finding.to_dict(), "line": finding.line()}, default=_plain))


def _note_in_summary(run_dir: Path, number: int, state: str, finding: Mapping | None) -> None:
    """The trial's end in its run folder's ``summary.json``: ``tune`` (study, trial, state,
    the finding that pruned it) and ``stopped_by`` for a doctor's prune."""
    from rlx.runs import SUMMARY_FILE, read_summary, write_json_atomic

    summary = read_summary(run_dir)
    if not summary:
        return
    note: dict[str, Any] = {"study": str(run_dir.parent), "trial": number, "state": state}
    if finding is not None:
        note["pruned_by"] = finding["rule"]
        note["finding"] = finding["line"]
        summary.setdefault("stopped_by", finding["rule"])
    summary["tune"] = note
    write_json_atomic(run_dir / SUMMARY_FILE, summary)


def _print_trial(record: TrialRecord) -> None:
    value = "" if record.value is None else f", value {record.value:.4g}"
    why = ""
    if record.state == "pruned":
        why = f" by {_pruned_text(record)}"
        if record.finding:
            why += f": {record.finding.get('line')}"
    changed = ", ".join(f"{k}={_short(v)}" for k, v in record.config.items()
                        if k not in ("total_steps", "seed", "eval_episodes"))  # fmt: skip
    print(f"rlx tune: trial {record.number} {record.state}{why}{value} ({changed})",
          file=sys.stderr, flush=True)  # fmt: skip


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class TrialPruner:
    """The callback (:mod:`rlx.callbacks`) of one trial: it reports each evaluation (or each
    logged training return) to Optuna and stops the run when the median pruner says so, and
    runs the doctor's fatal rules on every logged row, stopping the run at the first finding
    (:attr:`finding`)."""

    def __init__(self, trial: Any, algo: str, env: str, config: Mapping[str, Any],
                 *, on_eval: bool) -> None:  # fmt: skip
        from rlx.diagnostics.doctor import LiveDoctor
        from rlx.diagnostics.rules import RULES_BY_ID

        live = [rule for rule in FATAL_RULES if RULES_BY_ID[rule].live]
        self.trial, self.on_eval_only = trial, on_eval
        self.doctor = LiveDoctor(algo, env, config, stop_on=live, every=1, printer=_quiet)
        self.finding: dict[str, Any] | None = None
        self.pruned = False
        self.reports = 0
        self.evaluations: list[float] = []
        """the evaluations' mean returns, in order (none for a learner that does not evaluate)"""

    def on_update(self, step: int, metrics: Mapping[str, float]) -> bool | None:
        self.doctor.observe(step, metrics)
        if not all(math.isfinite(v) for v in metrics.values()):
            self.doctor.check()  # the run raises right after this row: judge it now
        if self.doctor.stop is not None:
            self.finding = finding_record(self.doctor.stop)
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

    def _report(self, value: float) -> bool | None:
        if not math.isfinite(value):
            return None
        self.trial.report(value, self.reports)
        self.reports += 1
        if self.trial.should_prune():
            self.pruned = True
            return False
        return None


def _quiet(message: str) -> None:
    """The trial's own doctor prints nothing: the run's doctor already says what it sees."""


# ============================================================================ parallel workers
def _run_processes(
    study_dir: Path, jobs: int, user_fields: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """``jobs`` worker processes on the study; Ctrl-C reaches them (the terminal's, or
    forwarded), each stops after its trial's checkpoint, and this waits for them all."""
    import multiprocessing
    import signal

    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [
        context.Process(
            target=_process_main,
            args=(str(study_dir), i, results, dict(user_fields)),
            daemon=False,
        )
        for i in range(jobs)
    ]
    for process in processes:
        process.start()
    interrupted = False
    while any(p.is_alive() for p in processes):
        try:
            for process in processes:
                process.join(timeout=0.2)
        except KeyboardInterrupt:
            interrupted = True
            for process in processes:
                if process.is_alive() and process.pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGINT)
    outcomes = []
    while not results.empty():
        outcomes.append(results.get())
    for process in processes:
        if process.exitcode not in (0, None) and not any(o[0] != "done" for o in outcomes):
            outcomes.append(("error", f"a tune worker ended with exit code {process.exitcode}"))
    if interrupted:
        outcomes.append(("interrupted", ""))
    return outcomes


def _process_main(
    study_dir: str, worker: int, results: Any, user_fields: Mapping[str, Any]
) -> None:
    try:
        results.put(work(study_dir, worker, user_fields=user_fields))
    except BaseException as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))
        raise


# ============================================================================ reading a study
def read_study(study_dir: str | Path) -> StudyResult:
    """Every trial of the study in ``study_dir``, as :class:`StudyResult`."""
    folder = Path(study_dir)
    if not (folder / STORAGE_FILE).is_file():
        raise ConfigError(f"{folder} holds no study ({STORAGE_FILE} is missing).")
    study = _open_study(folder)
    settings = read_settings(folder)
    trials = [_record(t, folder) for t in study.get_trials(deepcopy=False)]
    return StudyResult(folder, settings, trials)


def is_study(path: str | Path) -> bool:
    """True when ``path`` is a study folder of ``rlx tune``."""
    return (Path(path) / STORAGE_FILE).is_file()


_STATES = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed",
           "RUNNING": "running", "WAITING": "waiting"}  # fmt: skip


MAX_PID = 2**31 - 1
"""The largest process id a trial's ``worker`` may record (a pid is a C int)."""
_ATTR_KINDS: dict[str, tuple[type, str]] = {
    "config": (dict, "an object of config fields"),
    "finding": (dict, "a doctor's finding (an object with its rule)"),
    "pruned_by": (str, "text"),
    "error": (str, "text"),
    "worker": (dict, "an object of a host and a process id"),
}


def trial_attrs(trial: Any, folder: Path) -> dict[str, Any]:
    """The user attrs rlx reads of a trial (``config``, ``finding``, ``pruned_by``, ``error``,
    ``worker``; ``run_dir`` is :func:`trial_folder`'s), each checked as data, the one place
    they are: a ConfigError naming the journal, the trial and the value when one has another
    type (a finding without its ``rule``, a worker whose ``host`` is not text or whose
    ``pid`` is not a whole number in 0 to :data:`MAX_PID`); None for one not recorded."""
    import reprlib

    attrs = trial.user_attrs
    checked: dict[str, Any] = {}
    for name, (kind, what) in _ATTR_KINDS.items():
        value = attrs.get(name)
        valid = value is None or isinstance(value, kind)
        if valid and name == "finding" and value is not None:
            valid = isinstance(value.get("rule"), str) and isinstance(
                value.get("evidence") or {}, dict
            )
        if valid and name == "worker" and value is not None:
            pid = value.get("pid", 0)
            valid = (
                isinstance(value.get("host"), (str, type(None)))
                and isinstance(pid, int)
                and not isinstance(pid, bool)
                and 0 <= pid <= MAX_PID
            )
        if not valid:
            raise ConfigError(
                f"{folder / STORAGE_FILE} records {name}={reprlib.repr(value)} for trial "
                f"{trial.number}, which is not {what} as rlx tune writes it; the study folder is "
                "damaged or was written by another program."
            )
        checked[name] = value
    return checked


def _record(trial: Any, folder: Path) -> TrialRecord:
    attrs = {**trial.user_attrs, **trial_attrs(trial, folder)}
    run_dir = trial_folder(folder, trial.number, attrs.get("run_dir"))
    return TrialRecord(
        number=trial.number,
        state=_STATES.get(trial.state.name, trial.state.name.lower()),
        value=trial.value,
        params=dict(trial.params),
        config=dict(attrs.get("config") or {}),
        run_dir=run_dir,
        pruned_by=attrs.get("pruned_by"),
        finding=attrs.get("finding"),
        error=attrs.get("error"),
        intermediate=dict(trial.intermediate_values),
    )


def trial_folder(folder: Path, number: int, recorded: Any) -> Path:
    """The run folder of trial ``number``, as the study's journal records it (``trial-NNNN``
    when it records none): a ConfigError unless it is a folder's name inside the study
    (relative, no ``..``, no link out of it), so a journal never points rlx elsewhere."""
    name = TRIAL_DIR.format(number=number) if recorded is None else recorded
    parts = Path(name).parts if isinstance(name, str) else ()
    run_dir = folder / name if parts else folder
    inside = (
        len(parts) == 1
        and not Path(name).is_absolute()
        and parts[0] not in ("..", ".")
        and not run_dir.is_symlink()
        and run_dir.resolve().parent == folder.resolve()
    )
    if not inside:
        raise ConfigError(
            f"{folder / STORAGE_FILE} records {name!r} as trial {number}'s run folder, which is "
            f"not a folder inside the study (a name such as {TRIAL_DIR.format(number=number)!r})."
        )
    return run_dir


def write_best(result: StudyResult) -> Path | None:
    """``best.yaml``: the best completed trial's config, as ``rlx train --config`` reads it."""
    from rlx.config_file import write_config_file

    best = result.best
    if best is None:
        return None
    s = result.settings
    comment = (
        f"The best trial of the rlx tune study in {result.study_dir}: trial {best.number} of "
        f"{len(result.trials)}, value {best.value:.6g}\n(its run folder: {best.run_dir}).\n"
        f"Train it again: rlx train --config {result.best_file} --run-dir DIR\n"
        "Fields not listed are the algorithm's defaults and the env's preset."
    )
    return write_config_file(result.best_file, algo=s.algo, env=s.env, fields=best.config,
                             env_kwargs=s.env_kwargs, comment=comment)  # fmt: skip


# ============================================================================ Optuna
def _optuna() -> ModuleType:
    """Optuna (extra ``tune``), or a ConfigError saying how to install it."""
    try:
        import optuna
    except ImportError as exc:
        raise ConfigError(
            "rlx tune needs Optuna, which is not installed; install it with pip install "
            "'rlx[tune]'."
        ) from exc
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _storage(folder: Path) -> Any:
    optuna = _optuna()
    from optuna.storages.journal import JournalFileBackend

    journal = folder / STORAGE_FILE  # Optuna appends to what it names (its lock is a link)
    if journal.is_symlink() or journal.is_dir():
        raise ConfigError(
            f"{journal} is a link or a folder, not the study's own file; rlx tune writes a "
            "study only into a real file: remove it, or use another study folder."
        )
    # opened here without a link and without waiting (a pipe, a device or a journal too large
    # is one sentence, not a hang), made when missing, and the file its name opens now
    check_regular(journal, create=True)
    check_journal(journal)
    return optuna.storages.JournalStorage(JournalFileBackend(str(journal)))


JOURNAL_OPS = frozenset(range(11))
"""The op codes of Optuna's journal (``JournalOperation``: create study 0 to discard trials 10)."""


def _journal_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of more than {MAX_INT_DIGITS} digits")
    return int(text)


def check_journal(journal: Path) -> None:
    """Refuse, in one ConfigError sentence naming the line, a journal Optuna would choke on
    (its errors are tracebacks): each line at most :data:`rlx.runs.files.MAX_LINE_CHARS` of
    UTF-8, JSON nested at most :data:`rlx.runs.files.MAX_JSON_DEPTH` levels with no integer
    of more than :data:`rlx.runs.files.MAX_INT_DIGITS` digits, an object whose ``op_code`` is
    one of :data:`JOURNAL_OPS`. A last line a crash cut short is left to Optuna, which skips
    it. What the lines record for rlx is checked where it is read (:func:`read_settings`,
    :func:`trial_attrs`, :func:`trial_folder`)."""

    def refused(number: int, why: str) -> ConfigError:
        return ConfigError(
            f"{journal}, line {number}: {why}; it is not a journal rlx tune writes (the study "
            "folder is damaged or was written by another program)."
        )

    pending: ConfigError | None = None
    with open_text(journal, encoding="utf-8") as handle:  # bounded: size, lines, UTF-8
        for number, line in enumerate(bounded_lines(handle, journal), 1):
            if pending is not None:
                raise pending
            if not line.strip():
                continue
            if json_depth(line) > MAX_JSON_DEPTH:
                raise refused(number, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            try:
                op = json.loads(line, parse_int=_journal_int)
            except json.JSONDecodeError as exc:
                if not line.endswith("\n"):
                    continue  # cut short by a crash: Optuna skips it (and fails on another)
                pending = refused(number, f"not JSON ({exc.msg})")
                continue
            except ValueError as exc:  # an integer Python will not convert
                raise refused(number, str(exc)) from exc
            code = op.get("op_code") if isinstance(op, dict) else None
            if isinstance(code, bool) or code not in JOURNAL_OPS:
                raise refused(number, f"op_code {code!r} is none of Optuna's (0 to 10)")


def _open_study(folder: Path, *, worker: int = 0, settings: StudySettings | None = None) -> Any:
    """The study in ``folder`` with rlx's sampler and pruners: TPE (the zoo's multivariate
    TPE, with the constant liar for parallel workers) and the median pruner (after
    ``startup`` trials and a third of the evaluations, as the zoo). The sampler's seed
    depends on the study's seed, the worker and the trials so far, so that a resumed or
    parallel worker does not propose what another already tried."""
    optuna = _optuna()
    storage = _storage(folder)
    try:
        study = optuna.load_study(study_name=STUDY_NAME, storage=storage)
    except KeyError as exc:
        raise ConfigError(f"{folder}/{STORAGE_FILE} holds no rlx study.") from exc
    except (ValueError, RecursionError) as exc:  # a journal line rlx tune did not write
        raise ConfigError(
            f"{folder}/{STORAGE_FILE} is not a journal rlx tune can read ({type(exc).__name__})."
        ) from exc
    if settings is None:
        return study
    import numpy as np

    startup = max(1, min(10, settings.trials // 3))
    seed = int(
        np.random.SeedSequence([settings.seed, worker, len(study.trials)]).generate_state(1)[0]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(
            n_startup_trials=startup, seed=seed, multivariate=True, constant_liar=True
        )
    pruner = optuna.pruners.MedianPruner(
        n_startup_trials=startup, n_warmup_steps=settings.evaluations // 3
    )
    return optuna.load_study(study_name=STUDY_NAME, storage=storage, sampler=sampler, pruner=pruner)


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


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (tuple, set)):
        return list(value)
    return str(value)


# ============================================================================ rlx.tune(...)
make_callable(__name__, "tune")  # rlx.tune(...) calls tune

__all__ = [
    "FATAL_RULES",
    "SPACES",
    "Space",
    "StudyResult",
    "StudySettings",
    "Suggest",
    "TrialPruner",
    "TrialRecord",
    "TuneError",
    "check_journal",
    "create_study",
    "is_study",
    "read_study",
    "space_for",
    "trial_attrs",
    "tune",
    "work",
    "write_best",
]
