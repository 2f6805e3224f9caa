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

The study folder:

```
STUDY_DIR/study.journal   Optuna's JournalStorage on a file: JSON lines appended under a
                          file lock, safe for several processes (and on NFS); resumable
STUDY_DIR/trial-0000/     one seed group per trial: group.json, seed-0/, seed-1/, ... (each an
                          rlx run folder: config.json, metrics, summary, ...)
STUDY_DIR/best.yaml       the best trial's config, and the held-out check as comments:
                          rlx train --config STUDY_DIR/best.yaml
STUDY_DIR/heldout.json    the held-out check: seeds, configs, each seed's value
STUDY_DIR/heldout/        its runs: defaults/ and trial-NNNN/ (the best), seed groups
STUDY_DIR/report.html     rlx report STUDY_DIR: the trials, the best one's curves, the check
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
interrupted is marked failed (its seed group keeps what it wrote), and the study goes on until
``trials`` trials have completed or been pruned; a larger ``trials`` extends it. A trial left
running by a process that was killed outright is marked failed when the next ``rlx tune`` on
the machine starts. ``jobs=K`` starts K worker processes on the same study (through its
storage); ``ray="local"`` (or a cluster's address) runs them as Ray tasks instead, on
machines that share STUDY_DIR (:mod:`rlx.distributed.tune_ray`). Either way a worker runs
whole trials, every seed of one in its own process; the held-out check runs once, after the
trials, in the process that called :func:`tune` (its seeds ``jobs`` at a time).

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
from typing import TYPE_CHECKING, Any, TypeGuard

from rlx.callable_module import make_callable
from rlx.diagnostics.rules import MIN_POINTS
from rlx.errors import ConfigError, RLXError
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
HELDOUT_FILE = "heldout.json"
"""The held-out check's record, in the study folder (:class:`HeldOutCheck`)."""
HELDOUT_DIR = "heldout"
"""The held-out check's seed groups, in the study folder: ``defaults/`` and ``trial-NNNN/``."""
HELDOUT_KIND = "rlx tune held-out check"
"""``heldout.json``'s ``kind``: what tells the record from any other JSON."""
HELDOUT_OFFSET = 10_000
"""Held-out seeds start at the study's seed plus this; a trial's seeds are the study's seed and
the ``seeds_per_trial - 1`` after it, and ``seeds_per_trial`` may not exceed this, so the two
ranges never meet."""
CONFIDENCE = 0.95
"""The coverage of the held-out check's interval."""
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
            "(log_std_init left out: it acts only with use_sde, which the space leaves off)",
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
    seeds_per_trial: int = 3
    """the seeds each trial trains on (:meth:`trial_seeds`)"""
    heldout_seeds: int = 5
    """the seeds of the held-out check (:meth:`held_out_seeds`; 0: no check)"""

    def trial_seeds(self) -> list[int]:
        """Every trial's seeds: the study's seed and the ``seeds_per_trial - 1`` after it."""
        return [self.seed + i for i in range(self.seeds_per_trial)]

    def held_out_seeds(self) -> list[int]:
        """The held-out check's seeds, from ``seed + HELDOUT_OFFSET`` on: none a trial uses."""
        return [self.seed + HELDOUT_OFFSET + i for i in range(self.heldout_seeds)]

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
    """the trial's folder: a seed group (``group.json``, ``seed-N/``), or, in a study of an
    rlx that trained one seed per trial, the run folder itself"""
    pruned_by: str | None = None
    """``"doctor"`` or ``"median"`` for a pruned trial"""
    finding: dict[str, Any] | None = None
    """the doctor's finding that pruned it (:meth:`rlx.diagnostics.doctor.Finding.to_dict`
    with its one-line text as ``line``)"""
    error: str | None = None
    intermediate: dict[int, float] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    """the seeds it trained on (in order)"""
    seed_values: list[float | None] = field(default_factory=list)
    """each seed's value (its final evaluation), None for a seed not trained or pruned"""

    def seed_runs(self) -> list[tuple[int, Path]]:
        """``(seed, run folder)`` of each seed that has a folder, in order (the trial folder
        itself for a study that trained one seed per trial)."""
        from rlx.runs.group import seed_folder_name

        if (self.run_dir / "config.json").is_file():
            return [(self.seeds[0] if self.seeds else 0, self.run_dir)]
        runs = [(seed, self.run_dir / seed_folder_name(seed)) for seed in self.seeds]
        return [(seed, path) for seed, path in runs if path.is_dir() and not path.is_symlink()]


@dataclass(frozen=True)
class StudyResult:
    """What ``rlx.launch.tune`` returns (and :func:`read_study` reads): the settings, every trial,
    the best one and its config file."""

    study_dir: Path
    settings: StudySettings
    trials: list[TrialRecord]
    heldout: HeldOutCheck | None = None
    """the held-out check of the best trial (None until the study has its trials, with
    ``heldout_seeds=0``, or while ``heldout.json`` is of a trial no longer the best)"""

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

    @property
    def finished(self) -> bool:
        """Whether the study has its ``trials`` completed or pruned."""
        return self.count("complete") + self.count("pruned") >= self.settings.trials

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
            seeds = f" (seeds: {_values_text(t.seed_values)})" if t.seed_values else ""
            lines.append(f"  trial {t.number}: {t.state}{why}, value {value}{seeds}")
        best = self.best
        if best is not None:
            lines.append(
                f"best: trial {best.number}, value {best.value:.4g} (mean minus one standard "
                f"error of its seeds: {_values_text(best.seed_values)}); train it again with "
                f"rlx train --config {self.best_file}"
            )
        if self.heldout is not None:
            lines.append(f"held out: {self.heldout.sentence()}")
        elif s.heldout_seeds == 0:
            lines.append("held out: no check (heldout_seeds=0)")
        elif best is None and self.finished:
            lines.append("held out: no check (no trial completed)")
        return "\n".join(lines)


def _values_text(values: Sequence[float | None]) -> str:
    return " ".join("-" if v is None else f"{v:.4g}" for v in values)


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
            if json.loads(json.dumps(value, default=_plain)) != current[name]:
                raise ConfigError(
                    f"{study_dir} holds a study of {settings.algo} on {settings.env} with "
                    f"{name}={current[name]!r}, not {value!r}; resume it as it is (leave "
                    f"{name} out) or start another study in a new folder."
                )
        if any(getattr(settings, k) != v for k, v in changed.items()):
            settings = dataclasses.replace(settings, **changed)
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
                             env_kwargs, fixed, seeds_per_trial, heldout_seeds)  # fmt: skip
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


def check_seed_counts(seeds_per_trial: Any, heldout_seeds: Any) -> None:
    """``seeds_per_trial`` a whole number in 1 to :data:`HELDOUT_OFFSET`, ``heldout_seeds`` 0
    or a whole number >= 2 (None: not given); a ConfigError in one sentence otherwise."""
    whole = (int,)
    if seeds_per_trial is not None and (
        not isinstance(seeds_per_trial, whole) or isinstance(seeds_per_trial, bool)
        or not 1 <= seeds_per_trial <= HELDOUT_OFFSET
    ):  # fmt: skip
        raise ConfigError(
            f"seeds_per_trial={seeds_per_trial!r}: each trial trains on a seed group, so give a "
            f"whole number from 1 to {HELDOUT_OFFSET} (default 3)."
        )
    if heldout_seeds is not None and (
        not isinstance(heldout_seeds, whole) or isinstance(heldout_seeds, bool)
        or heldout_seeds < 0
    ):  # fmt: skip
        raise ConfigError(
            f"heldout_seeds={heldout_seeds!r} must be a whole number >= 0 (0 skips the held-out "
            "check; default 5)."
        )
    if heldout_seeds == 1:
        raise ConfigError(
            "heldout_seeds=1 gives no interval (a spread needs two seeds a side); give 0 to "
            "skip the held-out check, or 2 or more (default 5)."
        )


def create_study(study_dir: str | Path, algo: str | None = None, env: str | None = None,
                 **settings: Any) -> Any:  # fmt: skip
    """The Optuna study in ``study_dir``, created with the settings :func:`tune` takes (or,
    when the folder holds one, checked against them), before any trial runs: to enqueue
    trials of your own (``study.enqueue_trial({"learning_rate": 1.0})``), run next by
    :func:`tune` on the same folder."""
    fixed = {k: settings.pop(k) for k in list(settings) if k not in _SETTING_NAMES}
    prepare_study(Path(study_dir), algo, env, fixed=fixed, **settings)
    return _open_study(Path(study_dir))


_SETTING_NAMES = ("trials", "total_steps", "seed", "evaluations", "eval_episodes", "env_kwargs",
                  "seeds_per_trial", "heldout_seeds")  # fmt: skip


def read_settings(
    study_dir: str | Path,
    *,
    given: Sequence[str] = (),
    consent: Consent | None = None,
    warn: bool = False,
) -> StudySettings:
    """The settings kept in a study's storage, checked as data (names and types). A fixed
    field only the user sets (:data:`rlx.launch.plan.USER_ONLY_FIELDS`) is dropped, as
    :func:`rlx.launch.plan.without_user_only` does (``given``, ``consent`` and ``warn`` as there):
    the study's workers take those from the command that runs them, never from its folder."""
    from rlx.core.env_recipe import IN_PYTHON
    from rlx.launch.plan import without_user_only

    data = _open_study(Path(study_dir)).user_attrs.get(SETTINGS_ATTR)
    where = f"{study_dir}/{STORAGE_FILE}"
    if not isinstance(data, dict):
        raise ConfigError(f"{where} is not a study written by rlx tune.")
    kinds: dict[str, Any] = {
        "algo": str, "env": str, "trials": int, "total_steps": (int, type(None)), "seed": int,
        "evaluations": int, "eval_episodes": int, "env_kwargs": dict, "fixed": dict,
        "seeds_per_trial": int, "heldout_seeds": int,
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
    data = {"seeds_per_trial": 1, **data}  # a study of an rlx that trained one seed per trial
    try:
        check_seed_counts(data["seeds_per_trial"], data.get("heldout_seeds"))
    except ConfigError:
        raise ConfigError(
            f"{where} records the study settings seeds_per_trial={data['seeds_per_trial']!r} and "
            f"heldout_seeds={data.get('heldout_seeds')!r}, which rlx tune does not write; the "
            "study folder is damaged or was written by another program."
        ) from None
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
    user-only config fields (:data:`rlx.launch.plan.USER_ONLY_FIELDS`) the user gave the command
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
    """Train one trial into ``folder/trial-NNNN`` with the config its space samples: a seed
    group of the study's seeds (:meth:`StudySettings.trial_seeds`), one seed after another in
    this process (``rlx.train(..., seeds=[...])``), the median pruner and the doctor watching
    every seed (:class:`TrialPruner`), and tell the study how it ended: complete with
    :func:`trial_value` of the seeds' values, pruned (the seeds after the prune left
    untrained), or failed. ``user_fields``: as :func:`work` takes them (passed to the
    training, never recorded)."""
    from rlx import registry

    optuna = _optuna()
    states = optuna.trial.TrialState
    spec = registry.get(settings.algo)
    base = _base_config(spec, settings)
    suggest = Suggest(trial, dataclasses.asdict(base), settings.fixed, base_budget(base))
    space_for(spec.name).sample(suggest)
    fields = _trial_fields(spec, settings, suggest.fields)
    run_dir = folder / TRIAL_DIR.format(number=trial.number)
    seeds = settings.trial_seeds()
    trial.set_user_attr("config", json.loads(json.dumps(fields, default=_plain)))
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
    record = _record(study.get_trials(deepcopy=False)[trial.number], folder)
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
    optuna = _optuna()
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


def seed_value(run_dir: Path, seed: int, settings: StudySettings) -> float:
    """A seed's value: its run's final evaluation (``eval_return_mean`` of its summary), or,
    for a learner whose run has none (a tabular one), the mean return of ``eval_episodes``
    greedy episodes of its trained agent, seeded by ``seed``."""
    from rlx.runs import read_summary

    value = read_summary(run_dir).get("eval_return_mean")
    if _number(value) and math.isfinite(value):
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
    return json.loads(json.dumps({**finding.to_dict(), "line": finding.line()}, default=_plain))


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
        value += f" (seeds: {_values_text(record.seed_values)})"
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
    result = StudyResult(folder, settings, trials)
    check = read_heldout(folder)
    if check is not None and _is_current(check, result):
        result = dataclasses.replace(result, heldout=check)
    return result


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
    "seeds": (list, "a list of whole-number seeds"),
    "seed_values": (list, "a list of numbers (or null), one per seed"),
}


def trial_attrs(trial: Any, folder: Path) -> dict[str, Any]:
    """The user attrs rlx reads of a trial (``config``, ``finding``, ``pruned_by``, ``error``,
    ``worker``, ``seeds``, ``seed_values``; ``run_dir`` is :func:`trial_folder`'s), each
    checked as data, the one place they are: a ConfigError naming the journal, the trial and
    the value when one has another type (a finding without its ``rule``, a worker whose
    ``host`` is not text or whose ``pid`` is not a whole number in 0 to :data:`MAX_PID`, a
    seed that is not a whole number >= 0, a seed's value that is not a number); None for one
    not recorded."""
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
        if valid and name == "seeds" and value is not None:
            valid = all(_whole(v) and v >= 0 for v in value)
        if valid and name == "seed_values" and value is not None:
            valid = all(v is None or _number(v) for v in value)
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


def _whole(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _record(trial: Any, folder: Path) -> TrialRecord:
    attrs = {**trial.user_attrs, **trial_attrs(trial, folder)}
    run_dir = trial_folder(folder, trial.number, attrs.get("run_dir"))
    seeds = list(attrs.get("seeds") or [])
    values = list(attrs.get("seed_values") or [])
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
        seeds=seeds,
        seed_values=[None if v is None else float(v) for v in values[: len(seeds)]],
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
        f"{_seeds_text(best.seeds)}: {_values_text(best.seed_values)}.\n"
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
@dataclass(frozen=True)
class HeldOutSide:
    """One side of the held-out check: the config fields it trained with (as ``best.yaml``
    writes them, without the seed), its seed group, and each held-out seed's value."""

    config: dict[str, Any]
    run_dir: Path
    values: list[float]

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)


@dataclass(frozen=True)
class HeldOutCheck:
    """The best trial's config against the defaults on seeds no trial trained on
    (``heldout.json``): the difference of their means, best minus defaults, with Welch's t
    interval (:func:`welch_interval`) and a verdict in words (:attr:`verdict`)."""

    seeds: list[int]
    """the held-out seeds"""
    trial_seeds: list[int]
    """every seed a trial of the study trained on (none of :attr:`seeds`)"""
    best_trial: int
    best: HeldOutSide
    defaults: HeldOutSide
    same_config: bool
    """the best trial's config is the defaults' (then the defaults trained once)"""

    @property
    def difference(self) -> float:
        """mean(best) - mean(defaults)"""
        return self.best.mean - self.defaults.mean

    @property
    def interval(self) -> tuple[float, float]:
        """Welch's t interval of :attr:`difference` at :data:`CONFIDENCE`."""
        return welch_interval(self.best.values, self.defaults.values)

    @property
    def verdict(self) -> str:
        """``"beats the defaults"`` (the interval above 0), ``"worse than the defaults"``
        (below 0), ``"no better than the defaults (interval includes 0)"``, or, when the best
        config is the defaults', ``"is the defaults' config"``."""
        if self.same_config:
            return "is the defaults' config"
        low, high = self.interval
        if low > 0:
            return "beats the defaults"
        if high < 0:
            return "worse than the defaults"
        return "no better than the defaults (interval includes 0)"

    def sentence(self) -> str:
        """The check in one sentence (``str(result)``'s line)."""
        seeds = f"{len(self.seeds)} seeds no trial trained on ({_seeds_text(self.seeds)})"
        if self.same_config:
            return (
                f"the best config (trial {self.best_trial}) is the defaults' config, so there "
                f"is nothing to compare; on {seeds} it scored a mean of {self.defaults.mean:.4g}."
            )
        low, high = self.interval
        return (
            f"on {seeds}, the best config (trial {self.best_trial}) scored a mean of "
            f"{self.best.mean:.4g} and the defaults {self.defaults.mean:.4g}: difference "
            f"{self.difference:+.4g}, {CONFIDENCE:.0%} interval [{low:.4g}, {high:.4g}] "
            f"(Welch's t); verdict: {self.verdict}."
        )

    def lines(self) -> list[str]:
        """The check as ``best.yaml``'s comment lines."""
        head = (
            f"Held-out check: {len(self.seeds)} seeds no trial trained on "
            f"({_seeds_text(self.seeds)}; the trials used {_seeds_text(self.trial_seeds)}),"
        )
        if self.same_config:
            return [
                head,
                "this config is the defaults' config (nothing to compare); its final "
                f"evaluations: {_values_text(self.defaults.values)} (mean "
                f"{self.defaults.mean:.6g}).",
            ]
        low, high = self.interval
        return [
            head,
            "final evaluations (the mean return of eval_episodes episodes at each run's end):",
            f"  this config:  {_values_text(self.best.values)}  (mean {self.best.mean:.6g})",
            f"  the defaults: {_values_text(self.defaults.values)}  (mean "
            f"{self.defaults.mean:.6g})",
            f"difference of the means {self.difference:+.6g}, {CONFIDENCE:.0%} interval "
            f"[{low:.6g}, {high:.6g}] (Welch's t):",
            f"verdict: {self.verdict}.",
        ]

    def to_dict(self, study_dir: Path) -> dict[str, Any]:
        """``heldout.json``: what :func:`read_heldout` reads back, and the difference, interval
        and verdict for a reader (recomputed from the values when read)."""

        def side(s: HeldOutSide) -> dict[str, Any]:
            return {"config": json.loads(json.dumps(s.config, default=_plain)),
                    "run_dir": s.run_dir.relative_to(study_dir).as_posix(),
                    "values": list(s.values)}  # fmt: skip

        low, high = self.interval
        return {
            "kind": HELDOUT_KIND,
            "seeds": list(self.seeds),
            "trial_seeds": list(self.trial_seeds),
            "best_trial": self.best_trial,
            "same_config": self.same_config,
            "best": side(self.best),
            "defaults": side(self.defaults),
            "difference": self.difference,
            "interval": [low, high],
            "confidence": CONFIDENCE,
            "interval_method": "Welch's t",
            "verdict": self.verdict,
        }


def welch_interval(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Welch's t interval ``(low, high)`` of ``mean(a) - mean(b)``:

        d = mean(a) - mean(b),   se^2 = s_a^2 / n_a + s_b^2 / n_b   (s^2 with n - 1)
        nu = se^4 / ((s_a^2 / n_a)^2 / (n_a - 1) + (s_b^2 / n_b)^2 / (n_b - 1))
        d -/+ t_{(1 + confidence) / 2, nu} * se

    (Welch-Satterthwaite degrees of freedom); the point ``(d, d)`` when neither side varies.
    Each side needs two values or more."""
    from scipy.stats import t

    n_a, n_b = len(a), len(b)
    if n_a < 2 or n_b < 2:
        raise ValueError("Welch's interval needs two values or more on each side")
    mean_a, mean_b = sum(a) / n_a, sum(b) / n_b
    var_a = sum((x - mean_a) ** 2 for x in a) / (n_a - 1) / n_a
    var_b = sum((x - mean_b) ** 2 for x in b) / (n_b - 1) / n_b
    d = mean_a - mean_b
    se2 = var_a + var_b
    if se2 == 0:
        return d, d
    nu = se2**2 / (var_a**2 / (n_a - 1) + var_b**2 / (n_b - 1))
    half = float(t.ppf((1 + confidence) / 2, nu)) * math.sqrt(se2)
    return d - half, d + half


def _seeds_text(seeds: Sequence[int]) -> str:
    """``10000-10004`` for a run of seeds, else the seeds one by one."""
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(str(seed) for seed in seeds) or "none"


def defaults_fields(spec: Any, settings: StudySettings) -> dict[str, Any]:
    """The defaults' side of the held-out check: what ``rlx train ALGO --env ENV --total-steps
    S`` trains besides the preset (the study's budget and fixed fields), without the seed."""
    fields = {**_budget_fields(spec, settings), **settings.fixed}
    return {name: value for name, value in fields.items() if name != "seed"}


def _best_fields(best: TrialRecord) -> dict[str, Any]:
    return {name: value for name, value in best.config.items() if name != "seed"}


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (tuples and lists alike)."""
    return json.dumps(a, sort_keys=True, default=_plain) == json.dumps(
        b, sort_keys=True, default=_plain
    )


def _is_current(check: HeldOutCheck, result: StudyResult) -> bool:
    """Whether ``check`` is of the study's best trial, its config and held-out seeds now."""
    from rlx import registry

    best, s = result.best, result.settings
    return (
        best is not None
        and check.best_trial == best.number
        and check.seeds == s.held_out_seeds()
        and _same(check.best.config, _best_fields(best))
        and _same(check.defaults.config, defaults_fields(registry.get(s.algo), s))
    )


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
    best_config = _best_fields(best)
    same = _same_config(spec, s, best_config, defaults)
    real_folder(folder / HELDOUT_DIR, root=folder)  # a real folder of the study, not a link
    user = dict(user_fields or {})
    reuse = previous is not None and previous.seeds == seeds
    if reuse and previous is not None and _same(previous.defaults.config, defaults):
        defaults_side = previous.defaults
    else:
        defaults_side = _train_side(result, spec, "defaults", defaults, seeds, jobs, user)
    if same:
        best_side = HeldOutSide(best_config, defaults_side.run_dir, defaults_side.values)
    elif (
        reuse and previous is not None and previous.best_trial == best.number
        and _same(previous.best.config, best_config)
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
    print(f"rlx tune: held-out check: training {what} on seeds {_seeds_text(seeds)} into "
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


def read_heldout(study_dir: str | Path) -> HeldOutCheck | None:
    """The study's ``heldout.json`` (None when there is none), read as data from a folder that
    may be someone else's: without following a link, bounded (:func:`rlx.runs.files.
    load_json_file`), every field checked; a ConfigError in one sentence for anything rlx tune
    does not write. The difference, interval and verdict it records are recomputed from the
    values, never taken from it."""
    from rlx.runs.files import load_json_file

    folder = Path(study_dir)
    path = folder / HELDOUT_FILE
    if not path.exists() and not path.is_symlink():
        return None

    def refused(why: str) -> ConfigError:
        return ConfigError(
            f"{path} is not a held-out record rlx tune writes ({why}); remove it, and rlx tune "
            "on the study checks the best trial again."
        )

    try:
        data = load_json_file(path, root=folder)
    except RLXError as exc:  # its sentence names the file: said once here
        raise refused("it " + str(exc).rstrip(".").removeprefix(f"{path} ")) from None
    if not isinstance(data, dict) or data.get("kind") != HELDOUT_KIND:
        raise refused(f"no kind {HELDOUT_KIND!r}")
    seeds, trial_seeds = data.get("seeds"), data.get("trial_seeds")
    for name, value in (("seeds", seeds), ("trial_seeds", trial_seeds)):
        if not isinstance(value, list) or not all(_whole(v) and v >= 0 for v in value):
            raise refused(f"{name} is not a list of whole numbers >= 0")
    seeds, trial_seeds = list(seeds or []), list(trial_seeds or [])
    if len(seeds) < 2 or len(set(seeds)) < len(seeds):
        raise refused("seeds are not two or more distinct seeds")
    if set(seeds) & set(trial_seeds):
        raise refused("its held-out seeds include a seed the trials trained on")
    best_trial, same = data.get("best_trial"), data.get("same_config")
    if not _whole(best_trial) or best_trial < 0:
        raise refused("best_trial is not a trial number")
    if not isinstance(same, bool):
        raise refused("same_config is not true or false")
    sides = [_side(data.get(name), name, folder, len(seeds), refused)
             for name in ("best", "defaults")]  # fmt: skip
    return HeldOutCheck(list(seeds), list(trial_seeds), best_trial, sides[0], sides[1], same)


def _side(
    data: Any, name: str, folder: Path, count: int, refused: Callable[[str], ConfigError]
) -> HeldOutSide:
    if not isinstance(data, dict):
        raise refused(f"{name} is not an object")
    config, run_dir, values = data.get("config"), data.get("run_dir"), data.get("values")
    if not isinstance(config, dict) or not all(isinstance(k, str) for k in config):
        raise refused(f"{name}.config is not config fields by name")
    parts = Path(run_dir).parts if isinstance(run_dir, str) else ()
    if (
        len(parts) != 2 or parts[0] != HELDOUT_DIR or parts[1] in ("..", ".")
        or Path(str(run_dir)).is_absolute()
    ):  # fmt: skip
        raise refused(f"{name}.run_dir is not a folder in {HELDOUT_DIR}/")
    if (
        not isinstance(values, list) or len(values) != count
        or not all(_number(v) and math.isfinite(v) for v in values)
    ):  # fmt: skip
        raise refused(f"{name}.values is not {count} finite numbers, one per seed")
    return HeldOutSide(dict(config), folder / str(run_dir), [float(v) for v in values])


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
    "HELDOUT_OFFSET",
    "SPACES",
    "HeldOutCheck",
    "HeldOutSide",
    "Space",
    "StudyResult",
    "StudySettings",
    "Suggest",
    "TrialPruner",
    "TrialRecord",
    "TuneError",
    "check_heldout",
    "check_journal",
    "create_study",
    "is_study",
    "read_heldout",
    "read_study",
    "seed_value",
    "space_for",
    "trial_attrs",
    "trial_value",
    "tune",
    "welch_interval",
    "work",
    "write_best",
]
