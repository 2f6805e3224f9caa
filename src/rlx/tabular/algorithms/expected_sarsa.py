"""Expected SARSA (van Seijen et al., 2009; Sutton & Barto, section 6.6).

    Q(s, a) <- Q(s, a) + alpha [r + gamma sum_a' pi(a' | s') Q(s', a') - Q(s, a)]

``pi`` is the epsilon-greedy policy being followed (this episode's epsilon), so the target
averages over the next action instead of sampling it. No bootstrap after termination; kept
after truncation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rlx.tabular.environment import GymEnv, env_reset, env_step
from rlx.tabular.explore import epsilon_greedy_action
from rlx.tabular.model import ModelArrays
from rlx.tabular.targets import expected_sarsa_target, step_size, td_step


@njit(cache=True, inline="always")
def expected_sarsa_update(
    Q: np.ndarray,
    visits: np.ndarray,
    s: int,
    a: int,
    r: float,
    s_next: int,
    terminated: bool,
    epsilon: float,
    alpha: float,
    gamma: float,
) -> float:
    """``Q(s, a) += alpha [r + gamma E_pi Q(s', .) - Q(s, a)]``; returns the TD error."""
    visits[s, a] += 1
    target = expected_sarsa_target(r, gamma, Q[s_next], epsilon, terminated)
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
            abs_td += abs(
                expected_sarsa_update(Q, visits, s, a, r, s_next, terminated, epsilon, alpha, gamma)
            )
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
