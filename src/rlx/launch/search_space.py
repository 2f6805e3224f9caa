"""The search spaces of ``rlx tune``: for each algorithm, the config fields a trial samples.

A :class:`Space` is data apart from the study: ``sample(sampler)`` draws one trial's fields
through a :class:`TrialSampler` (Optuna's ``trial.suggest_*`` under the zoo's parameter names,
set under rlx's field names), and ``source`` says where its ranges come from. :data:`SPACES`
maps each algorithm that has one to its space; :func:`space_for` finds it by any name the
registry knows. The tuner (:mod:`rlx.launch.tune`) builds a sampler for each trial and trains
the fields it returns.

**Where the spaces come from.**
The deep agents' spaces are rl-baselines3-zoo's (``rl_zoo3/hyperparams_opt.py``:
``sample_ppo_params``, ``sample_a2c_params``, ``sample_dqn_params``, ``sample_sac_params``,
``sample_td3_params``), written in rlx's field names and restricted to the fields rlx's configs
have; each :class:`Space` names what it took and what it changed. Two changes apply to every
space: choices that would leave fewer than :data:`MIN_UPDATES` updates in the study's budget
(rollouts, target syncs, train intervals and warm-ups longer than that share of it) are left
out, so that a small budget is not spent on configs that cannot learn in it or that the doctor
cannot judge; and a sampled minibatch or warm-up that the config would refuse is cut to the
largest valid value (the zoo's "batch_size <= n_steps"). The zoo has no tabular spaces: theirs
borrows its DQN space's exploration and discount ranges and takes the step size alpha over
Sutton and Barto's sweep (Figure 6.3 of *Reinforcement Learning: An Introduction*, alpha from
0.1 to 1), extended log-uniformly down to 0.01 for noisy envs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlx.diagnostics.rules import MIN_POINTS
from rlx.errors import ConfigError

MIN_UPDATES = 2 * MIN_POINTS
"""Choices of a space that leave fewer updates (logged rows) than this in the study's budget
are left out: the doctor's rules on the return need as many points to judge a run (the others
half as many)."""


class TrialSampler:
    """One trial's config fields, sampled through Optuna: what a space's ``sample`` is given.

    It asks the Optuna trial (``trial.suggest_*``) under the zoo's parameter names and sets
    the values under rlx's field names (:attr:`fields`), and it holds what the space needs to
    size its choices: the base config (defaults, the env's preset, the fields the user fixed)
    and the budget. A field the user fixed is never sampled. (Not one of Optuna's samplers,
    which propose the values: this is what a space draws one trial's fields through.)"""

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
    """The search space of one family of algorithms: ``sample(sampler)`` sets the fields,
    ``source`` says where its ranges come from."""

    algos: tuple[str, ...]
    sample: Callable[[TrialSampler], None]
    source: str


NET_ARCH = {"tiny": (64,), "small": (64, 64), "medium": (256, 256), "big": (400, 300)}
"""The zoo's ``net_arch`` names as rlx's ``hidden_sizes`` (one network per role in rlx)."""
ZOO_GAMMAS = (0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999)
"""The zoo's discount choices for DQN, SAC and TD3."""


def _one_minus(x: float) -> float:
    return 1.0 - x


def _policy_gradient(s: TrialSampler, batch_sizes: Sequence[int] | None, epochs: bool) -> None:
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


def _ppo(s: TrialSampler) -> None:
    _policy_gradient(s, (32, 64, 128, 256, 512), epochs=True)


def _a2c(s: TrialSampler) -> None:
    _policy_gradient(s, None, epochs=False)


def _dqn(s: TrialSampler) -> None:
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


def _warm_up(s: TrialSampler, choices: Sequence[int]) -> None:
    """``learning_starts`` from ``choices`` (those within the budget), at most the buffer."""
    s.categorical("learning_starts", s.within_budget(choices))
    buffer = s.value("buffer_size")
    if buffer is not None and int(s.value("learning_starts")) > int(buffer):
        s.set("learning_starts", int(buffer))


def _actor_critic(s: TrialSampler, batch_sizes: Sequence[int]) -> None:
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


def _sac(s: TrialSampler) -> None:
    _actor_critic(s, (16, 32, 64, 128, 256, 512, 1024, 2048))
    _warm_up(s, (0, 1_000, 10_000, 20_000))


def _td3(s: TrialSampler) -> None:
    _actor_critic(s, (16, 32, 64, 100, 128, 256, 512, 1024, 2048))
    s.uniform("exploration_noise", 0.0, 1.0, param="noise_std")


def _tabular(s: TrialSampler) -> None:
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


def base_budget(config: Any) -> int:
    """A config's budget in env steps, to size a space's choices by (for a tabular learner
    without a step budget: its episodes, each at least a step)."""
    steps = getattr(config, "total_steps", None)
    return int(steps) if steps else int(getattr(config, "episodes", 0) or 0)


__all__ = [
    "MIN_UPDATES",
    "NET_ARCH",
    "SPACES",
    "ZOO_GAMMAS",
    "Space",
    "TrialSampler",
    "base_budget",
    "space_for",
]
