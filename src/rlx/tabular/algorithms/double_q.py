"""Double Q-learning (van Hasselt, 2010; Sutton & Barto, section 6.7).

With probability 1/2:

    Q1(s, a) <- Q1(s, a) + alpha [r + gamma Q2(s', argmax_a' Q1(s', a')) - Q1(s, a)]

else the same with Q1 and Q2 swapped. One table picks the action, the other values it, which
removes the maximisation bias of ``max_a' Q(s', a')``. The behaviour policy is epsilon-greedy
in ``Q1 + Q2``. No bootstrap after termination; kept after truncation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rlx.tabular.environment import GymEnv, env_reset, env_step
from rlx.tabular.explore import epsilon_greedy_action
from rlx.tabular.model import ModelArrays
from rlx.tabular.rng import uniform
from rlx.tabular.targets import double_q_target, step_size, td_step


@njit(cache=True, inline="always")
def double_q_update(
    Q_update: np.ndarray,
    Q_other: np.ndarray,
    visits: np.ndarray,
    s: int,
    a: int,
    r: float,
    s_next: int,
    terminated: bool,
    alpha: float,
    gamma: float,
    rng: np.ndarray,
) -> float:
    """``QA(s, a) += alpha [r + gamma QB(s', argmax QA(s', .)) - QA(s, a)]``; returns delta."""
    visits[s, a] += 1
    target = double_q_target(r, gamma, Q_update[s_next], Q_other[s_next], terminated, rng)
    Q_update[s, a], delta = td_step(Q_update[s, a], target, step_size(alpha, visits[s, a]))
    return delta


def learn(
    env: ModelArrays | GymEnv,
    Q1: np.ndarray,
    Q2: np.ndarray,
    visits1: np.ndarray,
    visits2: np.ndarray,
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
            a = epsilon_greedy_action(Q1[s] + Q2[s], epsilon, rng)
            s_next, r, terminated, truncated = env_step(env, s, a, rng)
            if uniform(rng) < 0.5:  # the coin flip: which table learns this time
                delta = double_q_update(
                    Q1, Q2, visits1, s, a, r, s_next, terminated, alpha, gamma, rng
                )
            else:
                delta = double_q_update(
                    Q2, Q1, visits2, s, a, r, s_next, terminated, alpha, gamma, rng
                )
            abs_td += abs(delta)
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
