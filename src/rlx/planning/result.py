"""What a planner returns, and the greedy policy it reports."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Actions whose Q is within this (relative) distance of the best count as tied: floating-point
# noise must not pick between actions that are equally good.
TIE_RTOL = 1e-9


@dataclass(frozen=True)
class PlanningResult:
    """The solution of a planner.

    Attributes:
        V: ``V*(s)`` (or the last policy's value), shape ``[S]``; 0 in terminal states.
        Q: ``Q(s, a) = R(s, a) + gamma sum_s' P(s' | s, a) V(s')``, shape ``[S, A]``.
        policy: the greedy action per state, ``argmax_a Q(s, a)``, ties to the lowest index.
        iterations: sweeps (value iteration) or improvement steps (policy iteration).
        residual: value iteration: the last ``max_s |V_{k+1}(s) - V_k(s)|``; policy iteration:
            0 once the policy is stable, else the last change of V.
        converged: whether the stopping rule was met before ``max_iterations``.
        gamma: the discount used.
        method: ``"value_iteration"`` or ``"policy_iteration"``.
    """

    V: np.ndarray
    Q: np.ndarray
    policy: np.ndarray
    iterations: int
    residual: float
    converged: bool
    gamma: float
    method: str


def tie_tolerance(Q: np.ndarray) -> float:
    """Absolute tolerance below which two action values count as equal."""
    return TIE_RTOL * (1.0 + float(np.max(np.abs(Q), initial=0.0)))


def greedy_policy(Q: np.ndarray, atol: float | None = None) -> np.ndarray:
    """Greedy, ties to the lowest action: ``pi(s) = min {a : Q(s,a) >= max_a' Q(s,a') - atol}``."""
    atol = tie_tolerance(Q) if atol is None else atol
    threshold = Q.max(axis=1, keepdims=True) - atol
    near_best = np.greater_equal(Q, threshold)
    return np.argmax(near_best, axis=1).astype(np.int64)
