"""Bellman operators over all states at once: the fused optimality sweep and ``(P_pi, R_pi)``.

The optimality sweep ``V'(s) = max_a [R(s, a) + gamma sum_s' P(s' | s, a) V(s')]`` is one
compiled pass over the state-major CSR matrix (row ``s * A + a``): for each state it reads the
``A`` adjacent rows, keeps the running max and the largest change, and never materialises
``Q``, which saves the pass that ``P_stacked @ V`` followed by a max in numpy would make over
``Q`` (``benchmarks/bench_value_iteration.py`` measures it). On large random MDPs its cost is
the random reads ``V[s']``, not the stream of ``P``.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from rlx.mdp.tabular import TabularMDP


@nb.njit(cache=True, nogil=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _optimality_sweep(indptr, indices, data, reward, gamma, terminal, V, out):  # pragma: no cover
    # unsigned counters: numba then skips the negative-index wraparound check on every access,
    # the dominant cost of this loop otherwise
    one = np.uint64(1)
    n_states = np.uint64(V.size)
    n_actions = np.uint64(reward.size // V.size)
    residual = 0.0
    row = np.uint64(0)
    s = np.uint64(0)
    while s < n_states:
        if terminal[s]:
            best = 0.0
            row += n_actions
        else:
            best = -np.inf
            last = row + n_actions
            while row < last:
                acc = 0.0
                j = np.uint64(indptr[row])
                end = np.uint64(indptr[row + one])
                while j < end:
                    acc += data[j] * V[np.uint64(indices[j])]
                    j += one
                best = max(best, reward[row] + gamma * acc)
                row += one
        residual = max(residual, abs(best - V[s]))
        out[s] = best
        s += one
    return residual


class OptimalitySweep:
    """``V -> (T V, max_s |T V(s) - V(s)|)`` for one MDP, with the arrays laid out once."""

    def __init__(self, mdp: TabularMDP, gamma: float) -> None:
        P = mdp.P_by_state
        self._indptr, self._indices, self._data = P.indptr, P.indices, P.data
        self._reward = np.ascontiguousarray(mdp.R, dtype=np.float64).ravel()  # row s * A + a
        self._terminal = mdp.terminal.astype(np.uint8)
        self._gamma = float(gamma)

    def __call__(self, V: np.ndarray, out: np.ndarray) -> float:
        """Write ``T V`` into ``out`` and return the largest change."""
        return float(
            _optimality_sweep(
                self._indptr,
                self._indices,
                self._data,
                self._reward,
                self._gamma,
                self._terminal,
                V,
                out,
            )
        )


def policy_model(mdp: TabularMDP, probs: np.ndarray) -> tuple[sp.csr_array, np.ndarray]:
    """``P_pi(s' | s) = sum_a pi(a | s) P(s' | s, a)`` and ``R_pi(s) = sum_a pi(a | s) R(s, a)``.

    Rows of terminal states are empty and their reward 0, so ``V = R_pi + gamma P_pi V`` gives
    them value 0. ``P_pi = W @ P_stacked`` with ``W[s, a * S + s] = pi(a | s)``.
    """
    S, A = mdp.n_states, mdp.n_actions
    live = ~mdp.terminal
    s_idx, a_idx = np.nonzero(probs * live[:, None])
    W = sp.csr_array((probs[s_idx, a_idx], (s_idx, a_idx * S + s_idx)), shape=(S, A * S))
    P_pi = sp.csr_array(W @ mdp.P_stacked)
    R_pi = np.where(live, np.sum(probs * mdp.R, axis=1), 0.0)
    return P_pi, R_pi


def states_never_ending(P_pi: sp.csr_array, terminal: np.ndarray) -> np.ndarray:
    """Non-terminal states from which ``P_pi`` never reaches a terminal state.

    With gamma 1 these make ``I - P_pi`` singular on the non-terminal states. Found by one
    breadth-first search backwards from the terminal states (through a virtual node ``S``).
    """
    S = terminal.size
    src, dst = P_pi.nonzero()
    ends = np.flatnonzero(terminal)
    # reversed edges s' -> s, plus virtual node S -> every terminal state
    rows = np.concatenate([dst, np.full(ends.size, S)])
    cols = np.concatenate([src, ends])
    graph = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(S + 1, S + 1))
    reached = np.zeros(S + 1, dtype=bool)
    reached[breadth_first_order(graph, S, directed=True, return_predecessors=False)] = True
    return np.flatnonzero(~reached[:S] & ~terminal)
