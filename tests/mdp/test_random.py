"""random_sparse_mdp: shape, sparsity, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import MDPError
from rlx.mdp import random_sparse_mdp


def test_each_row_has_k_distinct_successors_and_sums_to_one():
    mdp = random_sparse_mdp(200, n_actions=3, n_successors=7, seed=5)
    P = mdp.P_stacked
    assert P.shape == (600, 200)
    assert np.all(np.diff(P.indptr) == 7)  # distinct: nothing was merged
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert mdp.R.shape == (200, 3) and not mdp.terminal.any()


def test_same_seed_same_mdp_other_seed_other_mdp():
    a, b, c = (random_sparse_mdp(50, seed=s) for s in (1, 1, 2))
    assert (a.P_stacked != b.P_stacked).nnz == 0 and np.array_equal(a.R, b.R)
    assert not np.array_equal(a.R, c.R)


def test_too_many_successors_is_rejected():
    with pytest.raises(MDPError, match=r"n_successors=11 must lie in \[1, n_states=10\]"):
        random_sparse_mdp(10, n_successors=11)
