"""Policy iteration: evaluate the policy, act greedily on its values, until nothing changes."""

from __future__ import annotations

import warnings

import numpy as np

from rlx.mdp.tabular import TabularMDP
from rlx.planning._checks import check_choice, check_max_iterations, check_tol, resolve_gamma
from rlx.planning.evaluation import METHODS, policy_evaluation
from rlx.planning.result import PlanningResult, greedy_policy, tie_tolerance


def policy_iteration(
    mdp: TabularMDP,
    *,
    evaluation: str = "exact",
    tol: float = 1e-8,
    max_iterations: int = 1_000,
    gamma: float | None = None,
) -> PlanningResult:
    """``pi*`` and ``V*`` by alternating evaluation and greedy improvement.

    Evaluate ``V^pi(s) = sum_a pi(a|s) sum_{s',r} P(s',r|s,a) [r + gamma V^pi(s')]``, then
    improve ``pi'(s) = argmax_a sum_{s',r} P(s',r|s,a) [r + gamma V^pi(s')]``; stop when
    ``pi' = pi``. An action changes only if it beats the current one by more than the tie
    tolerance, so evaluation round-off cannot make the loop cycle between equal policies.

    The first policy is greedy on the value of the uniformly random policy: with ``gamma = 1``
    that policy ends every episode whenever any policy can, so the first solve is well posed
    (starting from an arbitrary deterministic policy it may loop forever).

    Args:
        evaluation: ``"exact"`` (sparse LU), ``"krylov"`` (BiCGSTAB; use it for large random
            MDPs, where LU fills in) or ``"iterative"`` (sweeps to ``tol``); see
            :func:`policy_evaluation`.
        tol: tolerance of ``"iterative"`` evaluation.
        max_iterations: cap on improvement steps; reaching it warns, ``converged=False``.
        gamma: override the MDP's discount.
    """
    check_choice("evaluation", evaluation, METHODS)
    tol = check_tol(tol)
    max_iterations = check_max_iterations(max_iterations)
    g = resolve_gamma(mdp, gamma)

    def evaluate(policy: np.ndarray) -> np.ndarray:
        return policy_evaluation(mdp, policy, tol=tol, method=evaluation, gamma=g)

    uniform = np.full((mdp.n_states, mdp.n_actions), 1.0 / mdp.n_actions)
    V = evaluate(uniform)
    policy = greedy_policy(mdp.q_from_v(V, g))
    change, steps, stable = np.inf, 0, False
    while steps < max_iterations and not stable:
        V_next = evaluate(policy)
        change = float(np.max(np.abs(V_next - V), initial=0.0))
        V = V_next
        steps += 1
        Q = mdp.q_from_v(V, g)
        improved = _improve(Q, policy, _switch_margin(Q, tol, evaluation))
        stable = bool(np.array_equal(improved, policy))
        policy = improved
    if not stable:
        warnings.warn(
            f"policy iteration stopped after max_iterations={max_iterations} improvement steps "
            "with the policy still changing; raise max_iterations.",
            RuntimeWarning,
            stacklevel=2,
        )
    Q = mdp.q_from_v(V, g)
    return PlanningResult(
        V=V,
        Q=Q,
        policy=greedy_policy(Q),
        iterations=steps,
        residual=0.0 if stable else change,
        converged=stable,
        gamma=g,
        method="policy_iteration",
    )


def _improve(Q: np.ndarray, policy: np.ndarray, margin: float) -> np.ndarray:
    """Greedy in ``Q``, but keep the current action unless another beats it by ``margin``."""
    best = greedy_policy(Q, atol=margin)
    current = Q[np.arange(Q.shape[0]), policy]
    return np.where(current >= Q.max(axis=1) - margin, policy, best)


def _switch_margin(Q: np.ndarray, tol: float, evaluation: str) -> float:
    # an iterative evaluation is only accurate to about tol: differences below it are noise
    return max(tie_tolerance(Q), tol) if evaluation == "iterative" else tie_tolerance(Q)
