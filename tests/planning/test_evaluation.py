"""policy_evaluation: Sutton & Barto's table, the methods agree, bad input is named."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import ConfigError, MDPError
from rlx.mdp import GridWorld, from_gymnasium, random_sparse_mdp
from rlx.planning import policy_evaluation

# Sutton & Barto, Figure 4.1: v_pi of the equiprobable random policy on the 4x4 GridWorld
SUTTON_BARTO_V_RANDOM = np.array(
    [
        [0, -14, -20, -22],
        [-14, -18, -20, -20],
        [-20, -20, -18, -14],
        [-22, -20, -14, 0],
    ],
    dtype=float,
)


@pytest.mark.parametrize("method", ["iterative", "exact", "krylov"])
def test_random_policy_on_4x4_gridworld_matches_sutton_barto(method):
    g = GridWorld(4, 4, gamma=1.0)
    uniform = np.full((16, 4), 0.25)
    V = policy_evaluation(g, uniform, method=method, tol=1e-10)
    np.testing.assert_allclose(V.reshape(4, 4), SUTTON_BARTO_V_RANDOM, atol=1e-6)


def test_methods_agree_on_a_deterministic_policy():
    mdp = from_gymnasium("FrozenLake-v1", map_name="8x8", gamma=0.95)
    policy = np.random.default_rng(0).integers(0, 4, size=64)
    exact = policy_evaluation(mdp, policy, method="exact")
    np.testing.assert_allclose(policy_evaluation(mdp, policy, tol=1e-12), exact, atol=1e-9)
    np.testing.assert_allclose(policy_evaluation(mdp, policy, method="krylov"), exact, atol=1e-9)


def test_exact_matches_a_dense_solve_on_a_random_mdp():
    mdp = random_sparse_mdp(120, n_actions=3, n_successors=6, gamma=0.9, seed=3)
    probs = np.random.default_rng(1).dirichlet(np.ones(3), size=120)
    P = mdp.P_stacked.toarray().reshape(3, 120, 120)
    P_pi = np.einsum("sa,ast->st", probs, P)
    R_pi = np.sum(probs * mdp.R, axis=1)
    expected = np.linalg.solve(np.eye(120) - 0.9 * P_pi, R_pi)
    np.testing.assert_allclose(policy_evaluation(mdp, probs, method="exact"), expected, atol=1e-10)


def test_gamma_override():
    g = GridWorld(gamma=1.0)
    V = policy_evaluation(g, np.full(16, 3), method="exact", gamma=0.5)  # always left
    assert V[g.state(0, 2)] == pytest.approx(-1.5)  # -1 - 0.5 * 1, then the terminal corner


def test_gamma_one_policy_that_never_ends_is_named():
    g = GridWorld(gamma=1.0)
    always_up = np.zeros(16, dtype=int)
    with pytest.raises(MDPError, match=r"never reaches a terminal state from state \(0,1\)"):
        policy_evaluation(g, always_up, method="exact")


@pytest.mark.parametrize(
    ("policy", "match"),
    [
        (np.zeros(15, dtype=int), r"policy has shape \(15,\); give actions int \[S\] = \(16,\)"),
        (np.full(16, 4), r"policy\[0\] = 4 is not an action; actions lie in \[0, 4\)"),
        (np.full((16, 4), 0.3), r"probabilities of state 0 sum to 1\.2"),
        (np.tile([1.5, -0.5, 0, 0], (16, 1)), r"pi\(a=1 \| s=0\) = -0\.5 is not a probability"),
        (np.full(16, 0.5), r"integer actions"),
    ],
)
def test_bad_policies_are_rejected(policy, match):
    with pytest.raises(MDPError, match=match):
        policy_evaluation(GridWorld(), policy)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"tol": 0.0}, ConfigError, r"tol=0\.0 must be a positive number"),
        ({"tol": -1e-3}, ConfigError, r"tol=-0\.001"),
        ({"gamma": 1.5}, MDPError, r"gamma=1\.5 is not a discount"),
        ({"method": "magic"}, ConfigError, r"method='magic' is not one of"),
        ({"max_iterations": 0}, ConfigError, r"max_iterations=0 must be an integer >= 1"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, error, match):
    with pytest.raises(error, match=match):
        policy_evaluation(GridWorld(), np.zeros(16, dtype=int), **kwargs)


def test_max_iterations_warns_instead_of_hanging():
    g = GridWorld(gamma=1.0)
    with pytest.warns(RuntimeWarning, match=r"stopped after max_iterations=5 sweeps"):
        V = policy_evaluation(g, np.full((16, 4), 0.25), max_iterations=5)
    assert np.all(np.isfinite(V))
