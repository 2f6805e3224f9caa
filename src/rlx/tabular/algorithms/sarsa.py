"""SARSA: on-policy TD control (Rummery & Niranjan, 1994; Sutton & Barto, section 6.4).

    Q(s, a) <- Q(s, a) + alpha [r + gamma Q(s', a') - Q(s, a)]

``a'`` is the action the epsilon-greedy policy actually takes next, chosen before the update,
so SARSA learns the value of the policy it follows (exploration included). No bootstrap after
termination; after truncation ``a'`` is still drawn and bootstrapped on.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rlx.tabular.environment import GymEnv, env_reset, env_step
from rlx.tabular.explore import epsilon_greedy_action
from rlx.tabular.model import ModelArrays
from rlx.tabular.targets import sarsa_target, step_size, td_step


@njit(cache=True, inline="always")
def sarsa_update(
    Q: np.ndarray,
    visits: np.ndarray,
    s: int,
    a: int,
    r: float,
    s_next: int,
    a_next: int,
    terminated: bool,
    alpha: float,
    gamma: float,
) -> float:
    """``Q(s, a) += alpha [r + gamma Q(s', a') - Q(s, a)]``; returns the TD error."""
    visits[s, a] += 1
    target = sarsa_target(r, gamma, Q[s_next], a_next, terminated)
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
        a = epsilon_greedy_action(Q[s], epsilon, rng)
        episode_return = 0.0
        t = 0
        while True:
            s_next, r, terminated, truncated = env_step(env, s, a, rng)
            # a terminal state has no next action: draw nothing, bootstrap on nothing
            a_next = 0 if terminated else epsilon_greedy_action(Q[s_next], epsilon, rng)
            abs_td += abs(
                sarsa_update(Q, visits, s, a, r, s_next, a_next, terminated, alpha, gamma)
            )
            episode_return += r
            t += 1
            if terminated or truncated or t >= max_steps:
                break
            s, a = s_next, a_next
        returns[episode] = episode_return
        lengths[episode] = t
        steps += t
    return steps, abs_td


learn_on_model = njit(cache=True)(learn)
