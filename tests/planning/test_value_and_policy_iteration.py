"""value_iteration and policy_iteration: agree with each other and with brute force."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rlx.errors import ConfigError, MDPError
from rlx.mdp import GridWorld, TabularMDP, from_gymnasium, random_sparse_mdp
from rlx.planning import PlanningResult, policy_iteration, value_iteration


def dense_policy_value(mdp: TabularMDP, policy: np.ndarray) -> np.ndarray:
    """Independent check: ``V = (I - gamma P_pi)^-1 R_pi`` by a dense solve."""
    S, A = mdp.n_states, mdp.n_actions
    P = mdp.P_stacked.toarray().reshape(A, S, S)
    P_pi = P[policy, np.arange(S)] * ~mdp.terminal[:, None]
    R_pi = np.where(mdp.terminal, 0.0, mdp.R[np.arange(S), policy])
    return np.linalg.solve(np.eye(S) - mdp.gamma * P_pi, R_pi)


def dense_bellman_optimality_gap(mdp: TabularMDP, V: np.ndarray) -> float:
    S, A = mdp.n_states, mdp.n_actions
    P = mdp.P_stacked.toarray().reshape(A, S, S)
    TV = np.max(mdp.R + mdp.gamma * np.einsum("ast,t->sa", P, V), axis=1)
    TV[mdp.terminal] = 0.0
    return float(np.max(np.abs(TV - V)))


def test_gridworld_optimal_values_are_minus_the_distance_to_a_corner():
    g = GridWorld(4, 4, gamma=1.0)
    r, c = np.divmod(np.arange(16), 4)
    distance = np.minimum(r + c, 6 - r - c)
    for result in (value_iteration(g), policy_iteration(g)):
        np.testing.assert_allclose(result.V, -distance)
        assert result.converged
    # ties broken to the lowest action: (1,1) may go up or left, up is action 0
    assert value_iteration(g).policy[g.state(1, 1)] == 0


@pytest.mark.parametrize("evaluation", ["exact", "krylov", "iterative"])
def test_vi_and_pi_agree_on_frozenlake_8x8(evaluation):
    mdp = from_gymnasium("FrozenLake-v1", map_name="8x8")
    vi = value_iteration(mdp, tol=1e-10)
    pi = policy_iteration(mdp, evaluation=evaluation, tol=1e-10)
    assert vi.converged and pi.converged and pi.residual == 0.0
    np.testing.assert_allclose(vi.V, pi.V, atol=1e-6)
    np.testing.assert_allclose(dense_policy_value(mdp, vi.policy), pi.V, atol=1e-6)
    assert vi.V[0] == pytest.approx(0.4146, abs=1e-3)  # gamma 0.99, from the start


@pytest.mark.parametrize("evaluation", ["exact", "krylov"])
def test_vi_and_pi_agree_on_a_random_sparse_mdp(evaluation):
    mdp = random_sparse_mdp(300, n_actions=4, n_successors=10, gamma=0.95, seed=7)
    vi = value_iteration(mdp, tol=1e-10)
    pi = policy_iteration(mdp, evaluation=evaluation)
    np.testing.assert_allclose(vi.V, pi.V, atol=1e-6)
    np.testing.assert_allclose(dense_policy_value(mdp, vi.policy), pi.V, atol=1e-6)
    assert dense_bellman_optimality_gap(mdp, pi.V) < 1e-9
    np.testing.assert_array_equal(vi.policy, pi.policy)


def test_result_fields_and_frozen():
    r = value_iteration(GridWorld(gamma=1.0))
    assert isinstance(r, PlanningResult)
    assert r.Q.shape == (16, 4) and r.policy.dtype == np.int64 and r.residual == 0.0
    assert r.method == "value_iteration" and r.gamma == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.iterations = 3  # type: ignore[misc]


def test_value_iteration_gamma_override_and_bound():
    g = GridWorld(gamma=1.0)
    r = value_iteration(g, gamma=0.5, tol=1e-12)
    assert r.gamma == 0.5 and r.V[g.state(0, 2)] == pytest.approx(-1.5)


def test_max_iterations_gives_converged_false_and_a_warning():
    mdp = random_sparse_mdp(50, gamma=0.99)
    with pytest.warns(RuntimeWarning, match=r"value iteration stopped after max_iterations=3"):
        r = value_iteration(mdp, max_iterations=3)
    assert not r.converged and r.iterations == 3 and r.residual > 1e-8


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda m: value_iteration(m, tol=0), ConfigError, r"tol=0 must be a positive number"),
        (lambda m: value_iteration(m, gamma=1.5), MDPError, r"gamma=1\.5 is not a discount"),
        (lambda m: policy_iteration(m, evaluation="lu"), ConfigError, r"evaluation='lu'"),
        (lambda m: policy_iteration(m, max_iterations=1.5), ConfigError, r"max_iterations=1\.5"),
    ],
)
def test_bad_arguments_are_rejected(call, error, match):
    with pytest.raises(error, match=match):
        call(GridWorld())


def test_terminal_states_are_worth_zero_whatever_their_own_transitions():
    # state 1 is terminal but its rows pay 5 and lead back to 0: none of that may count
    P = np.zeros((1, 2, 2))
    P[0] = [[0.0, 1.0], [1.0, 0.0]]
    R = np.array([[1.0], [5.0]])
    mdp = TabularMDP(P, R, 0.9, terminal=[1])
    for result in (value_iteration(mdp), policy_iteration(mdp)):
        np.testing.assert_allclose(result.V, [1.0, 0.0])
        np.testing.assert_allclose(result.Q, [[1.0], [0.0]])
