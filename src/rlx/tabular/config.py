"""The one config shared by every tabular learner, and its epsilon schedule.

Defaults are the standard ones (docs: Reference > Defaults): alpha 0.1 and epsilon 0.1 for
Q-learning and SARSA on the 4x4 GridWorld; the linear option decays epsilon from 1.0 to
0.01 over the first 10% of episodes ("Decay epsilon from 1.0 to 0.01 over the first 10% of
training").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np

from rlx.errors import ConfigError

EPSILON_SCHEDULES = ("constant", "linear")


@dataclass(frozen=True)
class TabularConfig:
    """Hyperparameters of a tabular learner (Monte Carlo, TD(0), Q-learning, SARSA, ...)."""

    episodes: int = 5000
    """number of training episodes (>= 1)"""
    alpha: float | None = 0.1
    """step size in (0, 1]; None: the sample average 1 / N(s, a)"""
    epsilon: float = 0.1
    """exploration rate of the constant epsilon-greedy schedule, in [0, 1]"""
    epsilon_schedule: str = "constant"
    """'constant' (epsilon) or 'linear' (epsilon_start -> epsilon_end over exploration_fraction)"""
    epsilon_start: float = 1.0
    """first epsilon of the linear schedule, in [0, 1]"""
    epsilon_end: float = 0.01
    """last epsilon of the linear schedule, in [0, 1], kept after the decay"""
    exploration_fraction: float = 0.1
    """share of the episodes over which the linear schedule decays, in (0, 1]"""
    gamma: float | None = None
    """discount in [0, 1]; None: the MDP's gamma (0.99 for a Gymnasium env)"""
    max_steps: int | None = None
    """per-episode step cap (truncation, which bootstraps); None: the env's limit, else 10,000"""
    q_init: float = 0.0
    """initial value of every non-terminal Q(s, a) (or V(s) for prediction)"""
    first_visit: bool = True
    """Monte Carlo: update on the first visit of (s, a) in an episode only (else every visit)"""
    seed: int = 0
    """seed of the learner's random number generator (bit-for-bit reproducible on CPU)"""

    def __post_init__(self) -> None:
        _check_int("episodes", self.episodes, minimum=1)
        if self.alpha is not None:
            _check_range(
                "alpha", self.alpha, 0.0, 1.0, "(0, 1] (or None for 1/N(s, a))", low_open=True
            )
        _check_range("epsilon", self.epsilon, 0.0, 1.0, "[0, 1]")
        if self.epsilon_schedule not in EPSILON_SCHEDULES:
            raise ConfigError(
                f"epsilon_schedule={self.epsilon_schedule!r} is not a schedule; "
                f"use one of {', '.join(map(repr, EPSILON_SCHEDULES))}."
            )
        _check_range("epsilon_start", self.epsilon_start, 0.0, 1.0, "[0, 1]")
        _check_range("epsilon_end", self.epsilon_end, 0.0, 1.0, "[0, 1]")
        _check_range(
            "exploration_fraction", self.exploration_fraction, 0.0, 1.0, "(0, 1]", low_open=True
        )
        if self.gamma is not None:
            _check_range("gamma", self.gamma, 0.0, 1.0, "[0, 1] (or None for the MDP's gamma)")
        if self.max_steps is not None:
            _check_int("max_steps", self.max_steps, minimum=1)
        if (
            isinstance(self.q_init, bool)
            or not _is_real(self.q_init)
            or not math.isfinite(self.q_init)
        ):
            raise ConfigError(f"q_init={self.q_init!r} must be a finite number.")
        if not isinstance(self.first_visit, bool | np.bool_):
            raise ConfigError(f"first_visit={self.first_visit!r} must be True or False.")
        _check_int("seed", self.seed, minimum=0)

    def epsilons(self, first_episode: int, n: int) -> np.ndarray:
        """Epsilon of episodes ``first_episode .. first_episode + n - 1`` (0-based).

        Linear: ``epsilon_k = start + (end - start) * min(1, k / (fraction * episodes))``.
        """
        k = np.arange(first_episode, first_episode + n, dtype=np.float64)
        if self.epsilon_schedule == "constant":
            return np.full(n, float(self.epsilon))
        decay_episodes = max(self.exploration_fraction * self.episodes, 1.0)
        progress = np.minimum(k / decay_episodes, 1.0)
        return self.epsilon_start + (self.epsilon_end - self.epsilon_start) * progress


def _is_real(x: object) -> TypeGuard[int | float | np.integer | np.floating]:
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool)


def _check_range(
    name: str, value: object, low: float, high: float, valid: str, low_open: bool = False
) -> None:
    ok = (
        _is_real(value)
        and math.isfinite(value)
        and value <= high
        and (value > low if low_open else value >= low)
    )
    if not ok:
        raise ConfigError(f"{name}={value!r} is out of range; it must lie in {valid}.")


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name}={value!r} must be an integer >= {minimum}.")
