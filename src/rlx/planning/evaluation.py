"""Policy evaluation: the value of a fixed policy, by sweeps or by solving the linear system."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from rlx.errors import MDPError
from rlx.mdp.tabular import TabularMDP
from rlx.planning._checks import (
    check_choice,
    check_max_iterations,
    check_tol,
    policy_probabilities,
    resolve_gamma,
)
from rlx.planning.bellman import policy_model, states_never_ending

METHODS = ("iterative", "exact", "krylov")
# relative residual at which BiCGSTAB counts as solved: far below any tol a caller would ask for
_KRYLOV_RTOL = 1e-13


def policy_evaluation(
    mdp: TabularMDP,
    policy: np.ndarray,
    *,
    tol: float = 1e-8,
    method: str = "iterative",
    gamma: float | None = None,
    max_iterations: int = 100_000,
) -> np.ndarray:
    """``V^pi``, the fixed point of the Bellman equation of ``policy``.

    ``V^pi(s) = sum_a pi(a|s) sum_{s',r} P(s',r|s,a) [r + gamma V^pi(s')]``, i.e.
    ``V = R_pi + gamma P_pi V`` with ``V = 0`` in terminal states.

    Args:
        mdp: the MDP.
        policy: actions ``int [S]`` or probabilities ``pi(a | s)`` as ``[S, A]``.
        tol: ``"iterative"`` stops when ``max_s |V_{k+1}(s) - V_k(s)| < tol``.
        method: ``"iterative"``: synchronous sweeps ``V_{k+1} = R_pi + gamma P_pi V_k``.
            ``"exact"``: sparse LU solve of ``(I - gamma P_pi) V = R_pi`` on the non-terminal
            states; fast on structured MDPs (grids, FrozenLake, Taxi), but LU fill-in makes it
            cubic in the states on random transition graphs. ``"krylov"``: the same system by
            BiCGSTAB (relative residual 1e-13), falling back to LU if it stalls; the fast
            choice on large random MDPs.
        gamma: override the MDP's discount.
        max_iterations: cap on ``"iterative"`` sweeps; reaching it warns and returns the last V.

    With ``gamma = 1`` the exact and Krylov solves need every non-terminal state to reach a
    terminal state under ``policy``; otherwise an :class:`MDPError` names such a state.
    """
    tol = check_tol(tol)
    check_choice("method", method, METHODS)
    max_iterations = check_max_iterations(max_iterations)
    g = resolve_gamma(mdp, gamma)
    P_pi, R_pi = policy_model(mdp, policy_probabilities(mdp, policy))
    if method == "iterative":
        return _iterate(P_pi, R_pi, g, tol, max_iterations)
    return _solve(mdp, P_pi, R_pi, g, krylov=method == "krylov")


def _iterate(
    P_pi: sp.csr_array, R_pi: np.ndarray, gamma: float, tol: float, max_iterations: int
) -> np.ndarray:
    V = np.zeros_like(R_pi)
    change = np.inf
    for _ in range(max_iterations):
        V_next = P_pi @ V
        V_next *= gamma
        V_next += R_pi
        change = float(np.max(np.abs(V_next - V), initial=0.0))
        V = V_next
        if change < tol:
            return V
    warnings.warn(
        f"policy evaluation stopped after max_iterations={max_iterations} sweeps with "
        f"max |V_k+1 - V_k| = {change:.3g} >= tol={tol:g}; raise max_iterations or use "
        "method='exact'.",
        RuntimeWarning,
        stacklevel=3,
    )
    return V


def _solve(
    mdp: TabularMDP, P_pi: sp.csr_array, R_pi: np.ndarray, gamma: float, *, krylov: bool
) -> np.ndarray:
    if gamma == 1.0:
        _require_proper(mdp, P_pi)
    live = np.flatnonzero(~mdp.terminal)
    P_live = P_pi[live][:, live]
    system = sp.identity(live.size, format="csr") - gamma * P_live
    b = R_pi[live]
    x = _bicgstab(system, b) if krylov else None
    if x is None:
        x = _lu(system, b, mdp)
    V = np.zeros(mdp.n_states)
    V[live] = x
    return V


def _bicgstab(system: sp.csr_array, b: np.ndarray) -> np.ndarray | None:
    x, info = spla.bicgstab(system, b, rtol=_KRYLOV_RTOL, atol=0.0, maxiter=10 * b.size + 100)
    return x if info == 0 and np.all(np.isfinite(x)) else None


def _lu(system: sp.csr_array, b: np.ndarray, mdp: TabularMDP) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("error", spla.MatrixRankWarning)
        try:
            x = spla.spsolve(system.tocsc(), b)
        except (spla.MatrixRankWarning, RuntimeError):
            x = None
    if x is None or not np.all(np.isfinite(x)):
        raise MDPError(
            f"the Bellman system (I - gamma P_pi) V = R_pi of {mdp.name} is singular; "
            "use gamma < 1 or a policy that reaches a terminal state from every state."
        )
    return np.asarray(x, dtype=np.float64)


def _require_proper(mdp: TabularMDP, P_pi: sp.csr_array) -> None:
    stuck = states_never_ending(P_pi, mdp.terminal)
    if stuck.size:
        s = int(stuck[0])
        label = mdp.state_names[s] if mdp.state_names else str(s)
        raise MDPError(
            f"with gamma=1 the policy never reaches a terminal state from state {label} "
            f"({stuck.size} such states), so its value is undefined; use gamma < 1, "
            "method='iterative', or a policy that ends every episode."
        )
