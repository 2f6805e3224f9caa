"""Behaviour policies for the tabular learners, compiled and driven by the learner's generator.

Like every per-step helper of the learners, these are inlined into the kernels
(``inline="always"``, see :mod:`rlx.tabular.targets`).

Ties in ``argmax`` are broken uniformly at random: from a zero-initialised table every action
ties, and always taking the lowest index would send Q-learning down one corridor forever.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rlx.tabular.rng import random_index, uniform


@njit(cache=True, inline="always")
def greedy_action(q_row: np.ndarray, rng: np.ndarray) -> int:
    """``a = argmax_a Q(s, a)``, uniform among tied maxima (draws only when there is a tie)."""
    best, best_action, n_best = q_row[0], 0, 1
    for a in range(1, q_row.shape[0]):
        if q_row[a] > best:
            best, best_action, n_best = q_row[a], a, 1
        elif q_row[a] == best:
            n_best += 1
    if n_best == 1:
        return best_action
    pick = random_index(rng, n_best)
    for a in range(best_action, q_row.shape[0]):
        if q_row[a] == best:
            if pick == 0:
                return a
            pick -= 1
    return best_action  # unreachable: the n_best tied maxima start at best_action


@njit(cache=True, inline="always")
def epsilon_greedy_action(q_row: np.ndarray, epsilon: float, rng: np.ndarray) -> int:
    """``if random() < epsilon: return choice(ACTIONS)``, else the greedy action."""
    if uniform(rng) < epsilon:
        return random_index(rng, q_row.shape[0])
    return greedy_action(q_row, rng)


@njit(cache=True, inline="always")
def sample_action(policy_cdf_row: np.ndarray, rng: np.ndarray) -> int:
    """``a ~ pi(. | s)`` from the row's cumulative probabilities (last entry exactly 1)."""
    u = uniform(rng)
    last = policy_cdf_row.shape[0] - 1
    a = 0
    while a < last and policy_cdf_row[a] <= u:
        a += 1
    return a


def policy_cdf(policy: np.ndarray) -> np.ndarray:
    """Cumulative action probabilities ``[S, A]``, each row closed at exactly 1.

    Dividing by the row total makes every entry from the last positive action on exactly 1
    (``x / x == 1`` in floating point), so a zero-probability action is never drawn.
    """
    cdf = np.cumsum(np.asarray(policy, dtype=np.float64), axis=1)
    return np.ascontiguousarray(cdf / cdf[:, -1:])
