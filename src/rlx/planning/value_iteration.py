"""Value iteration: repeat the Bellman optimality backup until V stops changing."""

from __future__ import annotations

import warnings

import numpy as np

from rlx.mdp.tabular import TabularMDP
from rlx.planning._checks import check_max_iterations, check_tol, resolve_gamma
from rlx.planning.bellman import OptimalitySweep
from rlx.planning.result import PlanningResult, greedy_policy


def value_iteration(
    mdp: TabularMDP,
    *,
    tol: float = 1e-8,
    max_iterations: int = 100_000,
    gamma: float | None = None,
) -> PlanningResult:
    """``V*`` by synchronous sweeps of the Bellman optimality backup, from ``V_0 = 0``.

    ``V_{k+1}(s) = max_a sum_{s',r} P(s',r|s,a) [r + gamma V_k(s')]``, with ``V = 0`` in
    terminal states, until ``max_s |V_{k+1}(s) - V_k(s)| < tol``. For ``gamma < 1`` the result
    is then within ``gamma tol / (1 - gamma)`` of ``V*``. Each sweep is one compiled pass over
    the sparse transitions (see :mod:`rlx.planning.bellman`); nothing of size ``[A, S, S]`` is
    formed.

    Returns a :class:`PlanningResult` whose policy is greedy in ``Q`` (ties to the lowest
    action). Reaching ``max_iterations`` warns and returns ``converged=False``.
    """
    tol = check_tol(tol)
    max_iterations = check_max_iterations(max_iterations)
    g = resolve_gamma(mdp, gamma)
    sweep = OptimalitySweep(mdp, g)
    V = np.zeros(mdp.n_states)
    V_next = np.empty_like(V)
    residual, sweeps, converged = np.inf, 0, False
    while sweeps < max_iterations and not converged:
        residual = sweep(V, V_next)
        V, V_next = V_next, V  # swap buffers: no allocation per sweep
        sweeps += 1
        converged = residual < tol
    if not converged:
        warnings.warn(
            f"value iteration stopped after max_iterations={max_iterations} sweeps with "
            f"max |V_k+1 - V_k| = {residual:.3g} >= tol={tol:g}; raise max_iterations "
            "(with gamma close to 1, policy_iteration converges in far fewer steps).",
            RuntimeWarning,
            stacklevel=2,
        )
    Q = mdp.q_from_v(V, g)
    return PlanningResult(
        V=V,
        Q=Q,
        policy=greedy_policy(Q),
        iterations=sweeps,
        residual=float(residual),
        converged=converged,
        gamma=g,
        method="value_iteration",
    )
