"""Random sparse MDPs for tests and benchmarks, built without a Python loop over states."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from rlx.errors import MDPError
from rlx.mdp.tabular import TabularMDP


def random_sparse_mdp(
    n_states: int,
    n_actions: int = 4,
    n_successors: int = 10,
    gamma: float = 0.99,
    seed: int = 0,
) -> TabularMDP:
    """A random MDP where every ``(s, a)`` leads to ``n_successors`` distinct states.

    ``P(. | s, a)`` puts weights ``w_i / sum_j w_j`` (``w ~ U(0, 1]``) on distinct successors
    drawn at random, and ``R(s, a) ~ U(0, 1)``; no state is terminal. The successors of one
    row are distinct by construction: ``k`` sorted draws from ``[0, S - k]`` plus ``0 .. k-1``
    are strictly increasing, so each row comes out already in canonical CSR order.
    """
    S, A, k = _check_sizes(n_states, n_actions, n_successors)
    rng = np.random.default_rng(seed)
    n_rows = A * S
    draws = np.sort(rng.integers(0, S - k + 1, size=(n_rows, k)), axis=1)
    successors = draws + np.arange(k)
    weights = 1.0 - rng.random((n_rows, k))  # in (0, 1]: no zero probability gets dropped
    probabilities = weights / weights.sum(axis=1, keepdims=True)
    index_dtype = np.int32 if n_rows * k < np.iinfo(np.int32).max else np.int64
    P = sp.csr_array(
        (
            probabilities.ravel(),
            successors.ravel().astype(index_dtype),
            np.arange(0, n_rows * k + 1, k, dtype=index_dtype),
        ),
        shape=(n_rows, S),
    )
    R = rng.random((S, A))
    return TabularMDP(P, R, gamma, name=f"random_sparse_mdp(S={S}, A={A}, k={k}, seed={seed})")


def _check_sizes(n_states: int, n_actions: int, n_successors: int) -> tuple[int, int, int]:
    S, A, k = int(n_states), int(n_actions), int(n_successors)
    if S < 1 or A < 1:
        raise MDPError(f"n_states={n_states} and n_actions={n_actions} must both be >= 1.")
    if not 1 <= k <= S:
        raise MDPError(f"n_successors={n_successors} must lie in [1, n_states={S}].")
    return S, A, k
