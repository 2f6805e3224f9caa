"""Q-learning: off-policy TD control (Watkins, 1989; Sutton & Barto, section 6.5).

    Q(s, a) <- Q(s, a) + alpha [r + gamma max_a' Q(s', a') - Q(s, a)]

with no bootstrap after termination and the bootstrap kept after truncation. The behaviour
policy is epsilon-greedy in Q, ties broken at random.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rlx.tabular.environment import GymEnv, env_reset, env_step
from rlx.tabular.explore import epsilon_greedy_action
from rlx.tabular.model import ModelArrays
from rlx.tabular.targets import q_learning_target, step_size, td_step


@njit(cache=True, inline="always")
def q_learning_update(
    Q: np.ndarray,
    visits: np.ndarray,
    s: int,
    a: int,
    r: float,
    s_next: int,
    terminated: bool,
    alpha: float,
    gamma: float,
) -> float:
    """``Q(s, a) += alpha [r + gamma max_a' Q(s', a') - Q(s, a)]``; returns the TD error."""
    visits[s, a] += 1
    target = q_learning_target(r, gamma, Q[s_next], terminated)
    Q[s, a], delta = td_step(Q[s, a], target, step_size(alpha, visits[s, a]))
    return delta


def learn(
    env: ModelArrays | GymEnv,
    Q: np.ndarray,
    visits: np.ndarray,
    rng: np.ndarray,
    epsilons: np.ndarray,
    alpha: float,
    gamma: float,
    max_steps: int,
    returns: np.ndarray,
    lengths: np.ndarray,
) -> tuple[int, float]:
    """Run ``len(epsilons)`` episodes into ``returns``, ``lengths``; return (steps, sum |delta|)."""
    steps = 0
    abs_td = 0.0
    for episode in range(epsilons.shape[0]):
        epsilon = epsilons[episode]
        s = env_reset(env, rng)
        episode_return = 0.0
        t = 0
        while True:
            a = epsilon_greedy_action(Q[s], epsilon, rng)
            s_next, r, terminated, truncated = env_step(env, s, a, rng)
            abs_td += abs(q_learning_update(Q, visits, s, a, r, s_next, terminated, alpha, gamma))
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
