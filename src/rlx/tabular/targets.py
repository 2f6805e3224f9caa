"""The tabular update rules as small pure functions, shared by every learner.

Each function computes one update line (docs: Concepts > Update lines); the compiled kernels
and the plain Python loop over a Gymnasium env call the same code. ``terminated`` means the
episode ended in a terminal state: the target has no bootstrap. A truncated episode (a step
cap) is *not* terminated, so its last transition still bootstraps on the next state's value.

Every function called once per step (these, the behaviour policies, the model sampler, the
generator, each algorithm's update) is ``inline="always"``: numba then compiles a learner's
episode loop as one function. Calls across numba's function boundaries had cost half of
Q-learning's step time (19M -> 38M env steps/s on FrozenLake 8x8); from Python they are
called as usual.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rlx.tabular.explore import greedy_action


@njit(cache=True, inline="always")
def bootstrap_target(r: float, gamma: float, next_value: float, terminated: bool) -> float:
    """``r + gamma * next_value``, or ``r`` alone after termination."""
    if terminated:
        return r
    return r + gamma * next_value


@njit(cache=True, inline="always")
def row_max(q_row: np.ndarray) -> float:
    """``max_a Q(s, a)``; a plain loop, which numba runs faster than ``np.max`` on short rows."""
    best = q_row[0]
    for a in range(1, q_row.shape[0]):
        if q_row[a] > best:
            best = q_row[a]
    return best


@njit(cache=True, inline="always")
def q_learning_target(r: float, gamma: float, q_next_row: np.ndarray, terminated: bool) -> float:
    """``target = r + (gamma * max_a' Q(s', a') if not terminated else 0)``."""
    if terminated:
        return r  # skip the max: nothing is bootstrapped
    return bootstrap_target(r, gamma, row_max(q_next_row), terminated)


@njit(cache=True, inline="always")
def sarsa_target(
    r: float, gamma: float, q_next_row: np.ndarray, a_next: int, terminated: bool
) -> float:
    """``target = r + (gamma * Q(s', a') if not terminated else 0)``, ``a'`` the action taken."""
    return bootstrap_target(r, gamma, q_next_row[a_next], terminated)


@njit(cache=True, inline="always")
def epsilon_greedy_expectation(q_row: np.ndarray, epsilon: float) -> float:
    """``sum_a pi(a | s) Q(s, a)`` under epsilon-greedy ``pi``.

    ``pi(a) = epsilon / |A| + (1 - epsilon) [a greedy]`` (the greedy mass split among ties,
    which all share the maximum), so the sum is ``epsilon * mean_a Q + (1 - epsilon) * max_a Q``.
    """
    return epsilon * np.mean(q_row) + (1.0 - epsilon) * row_max(q_row)


@njit(cache=True, inline="always")
def expected_sarsa_target(
    r: float, gamma: float, q_next_row: np.ndarray, epsilon: float, terminated: bool
) -> float:
    """``target = r + gamma * sum_a' pi(a' | s') Q(s', a')`` (just ``r`` if terminated).

    ``pi`` is the epsilon-greedy policy in ``Q``.
    """
    return bootstrap_target(r, gamma, epsilon_greedy_expectation(q_next_row, epsilon), terminated)


@njit(cache=True, inline="always")
def double_q_target(
    r: float,
    gamma: float,
    q_select_row: np.ndarray,
    q_evaluate_row: np.ndarray,
    terminated: bool,
    rng: np.ndarray,
) -> float:
    """``target = r + gamma * Q_B(s', argmax_a' Q_A(s', a'))``: one table picks, the other values.

    Ties in the argmax are broken at random with ``rng`` (no draw when there is no tie, nor
    after termination, where nothing is bootstrapped).
    """
    if terminated:
        return r
    a_star = greedy_action(q_select_row, rng)
    return bootstrap_target(r, gamma, q_evaluate_row[a_star], terminated)


@njit(cache=True, inline="always")
def td_step(estimate: float, target: float, alpha: float) -> tuple[float, float]:
    """``estimate += alpha * (target - estimate)``; returns ``(new estimate, TD error)``."""
    delta = target - estimate
    return estimate + alpha * delta, delta


@njit(cache=True, inline="always")
def step_size(alpha: float, visits: float) -> float:
    """``alpha``, or the sample average's ``1 / N`` when ``alpha`` is 0 (config ``alpha=None``).

    ``visits`` counts the current visit, so the first update replaces the initial value.
    """
    if alpha > 0.0:
        return alpha
    return 1.0 / visits


@njit(cache=True, inline="always")
def episode_returns_into(
    rewards: np.ndarray, n: int, gamma: float, bootstrap: float, out: np.ndarray
) -> None:
    """The reverse sweep ``G = r + gamma * G`` over ``rewards[:n]``, into ``out[:n]``.

    ``G`` starts at ``bootstrap``: 0 after termination, the value of the last state reached
    after a truncation (the rest of the episode is unseen, so it is estimated, not dropped).

    :func:`rlx.core.advantages.discounted_returns` is the same sweep for the deep agents; this
    one stays separate because it runs inside the compiled Monte Carlo episode loop: numba's
    nopython code cannot call a numpy-level function, and a learner's per-episode scratch
    array is written in place instead of allocating a result per episode.
    """
    G = bootstrap
    for t in range(n - 1, -1, -1):
        G = rewards[t] + gamma * G
        out[t] = G
