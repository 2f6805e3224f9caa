"""TD(0) prediction of a fixed policy's state values (Sutton & Barto, section 6.1).

    V(s) <- V(s) + alpha [r + gamma V(s') - V(s)]

with ``a ~ pi(. | s)`` and no bootstrap after termination (kept after truncation).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rlx.tabular.environment import GymEnv, env_reset, env_step
from rlx.tabular.explore import sample_action
from rlx.tabular.model import ModelArrays
from rlx.tabular.targets import bootstrap_target, step_size, td_step


@njit(cache=True, inline="always")
def td0_update(
    V: np.ndarray,
    visits: np.ndarray,
    s: int,
    r: float,
    s_next: int,
    terminated: bool,
    alpha: float,
    gamma: float,
) -> float:
    """``V(s) += alpha [r + gamma V(s') - V(s)]``; returns the TD error."""
    visits[s] += 1
    target = bootstrap_target(r, gamma, V[s_next], terminated)
    V[s], delta = td_step(V[s], target, step_size(alpha, visits[s]))
    return delta


def learn(
    env: ModelArrays | GymEnv,
    V: np.ndarray,
    visits: np.ndarray,
    policy_cdf: np.ndarray,
    rng: np.ndarray,
    n_episodes: int,
    alpha: float,
    gamma: float,
    max_steps: int,
    returns: np.ndarray,
    lengths: np.ndarray,
) -> tuple[int, float]:
    """Run ``n_episodes`` of ``pi`` into ``returns``/``lengths``; return (steps, sum |TD error|)."""
    steps = 0
    abs_td = 0.0
    for episode in range(n_episodes):
        s = env_reset(env, rng)
        episode_return = 0.0
        t = 0
        while True:
            a = sample_action(policy_cdf[s], rng)
            s_next, r, terminated, truncated = env_step(env, s, a, rng)
            abs_td += abs(td0_update(V, visits, s, r, s_next, terminated, alpha, gamma))
            episode_return += r
            t += 1
            if terminated or truncated or t >= max_steps:
                break
            s = s_next
        returns[episode] = episode_return
        lengths[episode] = t
        steps += t
    return steps, abs_td


learn_on_model = njit(cache=True)(learn)
