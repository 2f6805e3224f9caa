"""TabularMDP: validation at the door, sparse rewards, and the sampler's statistics."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from rlx.errors import MDPError
from rlx.mdp import GridWorld, TabularMDP, random_sparse_mdp


def two_state_P() -> np.ndarray:
    P = np.zeros((2, 2, 2))
    P[0] = [[0.5, 0.5], [0.0, 1.0]]
    P[1] = [[1.0, 0.0], [0.0, 1.0]]
    return P


def test_row_not_summing_to_one_names_first_bad_state_action():
    P = two_state_P()
    P[1, 0] = [0.7, 0.2]
    with pytest.raises(MDPError, match=r"P\(\. \| s=0, a=1\) sums to 0\.9"):
        TabularMDP(P, np.zeros((2, 2)), 0.9)


def test_gamma_out_of_range_is_rejected():
    with pytest.raises(MDPError, match=r"gamma=1\.5 .*\[0, 1\]"):
        TabularMDP(two_state_P(), np.zeros((2, 2)), 1.5)


def test_negative_probability_is_rejected():
    P = two_state_P()
    P[0, 0] = [1.5, -0.5]
    with pytest.raises(MDPError, match=r"negative probability -0\.5 for \(s=0, a=0\)"):
        TabularMDP(P, np.zeros((2, 2)), 0.9)


@pytest.mark.parametrize("where", ["P", "R"])
def test_nan_is_rejected(where):
    P, R = two_state_P(), np.zeros((2, 2))
    (P if where == "P" else R)[0, 0, ...] = np.nan
    with pytest.raises(MDPError, match=rf"{where} has a non-finite value"):
        TabularMDP(P, R, 0.9)


@pytest.mark.parametrize(
    ("P", "R", "match"),
    [
        (np.ones((2, 2, 3)) / 3, np.zeros((2, 2)), r"P has shape \(2, 2, 3\)"),
        (two_state_P(), np.zeros((3, 2)), r"R has shape \(3, 2\)"),
        (sp.csr_array(np.eye(3)[:2]), np.zeros((3, 1)), r"sparse P has shape \(2, 3\)"),
    ],
)
def test_wrong_shapes_are_rejected(P, R, match):
    with pytest.raises(MDPError, match=match):
        TabularMDP(P, R, 0.9)


def test_terminal_index_out_of_range_is_rejected():
    with pytest.raises(MDPError, match=r"terminal state indices \[0, 2\] must lie in \[0, 2\)"):
        TabularMDP(two_state_P(), np.zeros((2, 2)), 0.9, terminal=[0, 2])


def test_initial_distribution_with_nan_is_rejected():
    with pytest.raises(MDPError, match="initial distribution"):
        TabularMDP(two_state_P(), np.zeros((2, 2)), 0.9, initial=np.array([np.nan, 1.0]))


def test_sparse_per_transition_rewards_give_expectation_and_exact_draws():
    P = two_state_P()
    R = sp.csr_array(([2.0], ([0], [1])), shape=(4, 2))  # reward 2 only on 0 -a0-> 1
    mdp = TabularMDP(P, R, 0.9)
    np.testing.assert_allclose(mdp.R, [[1.0, 0.0], [0.0, 0.0]])
    nxt, rew, _ = mdp.sample_batch(
        np.zeros(2000, int), np.zeros(2000, int), np.random.default_rng(0)
    )
    np.testing.assert_array_equal(rew, np.where(nxt == 1, 2.0, 0.0))


def test_sample_batch_frequencies_match_P():
    mdp = random_sparse_mdp(40, n_actions=3, n_successors=5, seed=1)
    rng = np.random.default_rng(123)
    n = 60_000
    for s, a in [(0, 0), (7, 2), (39, 1)]:
        nxt, _, _ = mdp.sample_batch(np.full(n, s), np.full(n, a), rng)
        freq = np.bincount(nxt, minlength=mdp.n_states) / n
        expected = mdp.P[a][[s]].toarray().ravel()
        # 5 standard errors of a frequency: sqrt(p (1 - p) / n) <= 0.002
        assert np.max(np.abs(freq - expected)) < 0.01
        assert set(np.flatnonzero(freq)) <= set(np.flatnonzero(expected))


def test_sample_reports_terminal_on_entering_a_terminal_state():
    g = GridWorld(gamma=1.0)
    rng = np.random.default_rng(0)
    LEFT, UP = 3, 0
    assert g.sample(g.state(0, 1), LEFT, rng) == (g.state(0, 0), -1.0, True)
    assert g.sample(g.state(1, 1), UP, rng) == (g.state(0, 1), -1.0, False)


def test_reset_draws_only_from_the_initial_distribution():
    g = GridWorld()
    rng = np.random.default_rng(0)
    starts = {g.reset(rng) for _ in range(500)}
    assert starts == set(range(1, 15))


def test_sample_batch_rejects_out_of_range_states():
    with pytest.raises(MDPError, match=r"state 16 is out of range"):
        GridWorld().sample_batch(np.array([16]), np.array([0]), np.random.default_rng(0))


def test_state_major_copy_holds_the_same_transitions():
    mdp = random_sparse_mdp(30, n_actions=3, n_successors=4, seed=2)
    by_action = mdp.P_stacked.toarray().reshape(3, 30, 30)
    by_state = mdp.P_by_state.toarray().reshape(30, 3, 30)
    np.testing.assert_array_equal(by_state, by_action.transpose(1, 0, 2))
