"""Learning tests: each learner reaches what dynamic programming says it should.

Thresholds are ones a broken learner cannot reach; every run is seeded by ``train_seed``
(``pytest --rlx-seed N``), and the settings were chosen so that 10 of 10 seeds pass.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx import planning
from rlx.mdp import GridWorld, TabularMDP, from_gymnasium
from rlx.tabular import TabularConfig, TabularLearner, check, mc_prediction, monte_carlo, td0

TD_CONTROL = ["q-learning", "sarsa", "expected-sarsa", "double-q"]


@pytest.fixture(scope="module")
def gridworld() -> GridWorld:
    """Sutton & Barto's 4x4 GridWorld, undiscounted as in the book (its episodes all end)."""
    return GridWorld(4, 4, gamma=1.0)


@pytest.fixture(scope="module")
def frozen_lake() -> TabularMDP:
    return from_gymnasium("FrozenLake-v1", gamma=0.99)


def _train(algo: str, env, **fields) -> TabularLearner:
    learner = TabularLearner(algo, env, TabularConfig(**fields))
    learner.run(learner.config.episodes)
    return learner


@pytest.mark.parametrize("algo", TD_CONTROL)
def test_td_control_finds_the_optimal_policy_on_gridworld(gridworld, algo, train_seed):
    # the standard tabular defaults: alpha 0.1, epsilon 0.1
    report = check(_train(algo, gridworld, episodes=2000, seed=train_seed).result(), gridworld)
    assert report.optimal_action_share == 1.0, report
    assert report.policy_value_gap == pytest.approx(0.0, abs=1e-9)


# FrozenLake has near-ties (state 0: 0.542 left vs 0.528 down), so values must be accurate:
# a small alpha and many episodes, which the compiled path makes cheap (~4M steps, < 1 s).
# Off-policy learners can decay epsilon. On-policy SARSA / Expected SARSA learn the values of
# the policy they follow, and once epsilon has decayed they stop revisiting states off their
# path (state 2 is then left with a wrong action in 10 of 10 seeds), so they keep a small
# constant epsilon and start optimistic (q_init 1 > every value), which keeps them exploring.
FROZEN_LAKE_SETTINGS = {
    "q-learning": {"alpha": 0.02, "episodes": 100_000, "epsilon": 0.02, "q_init": 1.0},
    "sarsa": {"alpha": 0.02, "episodes": 100_000, "epsilon": 0.02, "q_init": 1.0},
    "expected-sarsa": {"alpha": 0.02, "episodes": 100_000, "epsilon": 0.02, "q_init": 1.0},
    "double-q": {
        "alpha": 0.02,
        "episodes": 60_000,
        "epsilon_schedule": "linear",
        "exploration_fraction": 1.0,
        "q_init": 1.0,
    },
}


@pytest.mark.parametrize("algo", TD_CONTROL)
def test_td_control_finds_the_optimal_policy_on_slippery_frozen_lake(frozen_lake, algo, train_seed):
    learner = _train(algo, frozen_lake, seed=train_seed, **FROZEN_LAKE_SETTINGS[algo])
    report = check(learner.result(), frozen_lake)
    # every non-terminal state (all are reachable from the start) gets an optimal action;
    # check counts any action within 1e-6 of max_a Q* as optimal, as several can tie
    assert report.optimal_action_share == 1.0, report
    assert report.policy_value_gap < 1e-6


def test_monte_carlo_control_finds_the_optimal_policy_on_gridworld(gridworld, train_seed):
    result = monte_carlo(
        gridworld,
        episodes=5000,
        seed=train_seed,
        epsilon_schedule="linear",
        exploration_fraction=0.5,
    )
    report = check(result, gridworld)
    assert report.optimal_action_share == 1.0, report


# ------------------------------------------------------------------ prediction
# The equiprobable policy's undiscounted return from a GridWorld state is -T, T the time to
# reach a corner; its standard deviation is at most 18.4 over the 14 states (from the
# first and second moments of T, solved exactly: (I - P) m = 1, (I - P) M2 = 1 + 2 P m).
RETURN_SD = 18.4


@pytest.mark.parametrize("first_visit", [True, False])
def test_mc_prediction_converges_to_v_pi(gridworld, first_visit, train_seed):
    settings = {"episodes": 20_000, "seed": train_seed, "alpha": None}
    result = mc_prediction(gridworld, first_visit=first_visit, **settings)
    report = check(result, gridworld)
    # sample averages over the episodes that visit s: standard error RETURN_SD / sqrt(n(s)),
    # n(s) >= ~6,600 such episodes here; 4.5 standard errors (~0.22 each) leaves a chance
    # below 1e-4 of a false alarm per state. The samples are episodes, not visits: every-visit
    # MC averages each visit, but the visits of one episode share its tail and are correlated
    # (counting them, ~3x more, gave a bound that seed 1 broke), so n(s) is the first-visit
    # count of the same episodes
    first = result if first_visit else mc_prediction(gridworld, first_visit=True, **settings)
    tolerance = 4.5 * RETURN_SD / np.sqrt(first.visits[~gridworld.terminal].min())
    assert report.reference == "V^pi" and report.optimal_action_share is None
    assert report.max_abs_v_error < tolerance, (report, tolerance)


def test_td0_converges_to_v_pi(gridworld, train_seed):
    result = td0(gridworld, episodes=100_000, seed=train_seed, alpha=0.001)
    V_pi = planning.policy_evaluation(gridworld, np.full((16, 4), 0.25))
    np.testing.assert_allclose(V_pi.reshape(4, 4)[0], [0, -14, -20, -22], atol=1e-6)
    # constant-alpha TD(0) keeps fluctuating around V^pi with a spread ~ sqrt(alpha) * sd(G):
    # at most 0.61 over 8 seeds; 1.0 is 5% of |V^pi| ~ 14-22, and a learner that ignored the
    # bootstrap (or bootstrapped past the end) would be off by more than 10
    assert check(result, gridworld).max_abs_v_error < 1.0


def test_prediction_of_a_given_deterministic_policy(gridworld, train_seed):
    # always "left" (action 3): from column 0 straight to the corner, elsewhere it never ends,
    # so the values are -(column) in row 0, and episodes are capped (truncated, bootstrapped)
    policy = np.full(16, 3)
    result = td0(gridworld, policy=policy, episodes=1000, seed=train_seed, alpha=0.5, max_steps=20)
    np.testing.assert_allclose(result.V[:4], [0, -1, -2, -3], atol=1e-6)


# ------------------------------------------------------------------ CliffWalking (S&B ex. 6.6)
def _greedy_path(mdp: TabularMDP, policy: np.ndarray, start: int, cols: int) -> list[tuple]:
    """The cells (row, col) the deterministic greedy policy visits from ``start``."""
    s, cells = start, []
    while not mdp.terminal[s] and len(cells) < mdp.n_states:
        cells.append(divmod(s, cols))
        row = mdp.P_stacked[[int(policy[s]) * mdp.n_states + s]].toarray()[0]
        s = int(np.argmax(row))
    assert mdp.terminal[s], f"the greedy path loops: {cells}"
    return cells


@pytest.fixture(scope="module")
def cliff_runs(train_seed):
    cliff = from_gymnasium("CliffWalking-v1", gamma=1.0)
    runs = {
        algo: _train(algo, cliff, episodes=2000, alpha=0.1, epsilon=0.1, seed=train_seed).result()
        for algo in ("sarsa", "q-learning")
    }
    return cliff, runs


def test_cliff_walking_sarsa_takes_the_safe_path_and_q_learning_the_edge(cliff_runs):
    cliff, runs = cliff_runs
    start = int(np.flatnonzero(cliff.initial)[0])  # (3, 0), the cliff is (3, 1..10)
    over_cliff = {algo: [r for r, c in _greedy_path(cliff, res.policy, start, 12) if 1 <= c <= 10]
                  for algo, res in runs.items()}  # fmt: skip
    # Q-learning learns the optimal path, right along the edge (row 2) ...
    assert set(over_cliff["q-learning"]) == {2}
    # ... SARSA, which learns the values of its exploring policy, keeps a row away from it
    assert max(over_cliff["sarsa"]) <= 1


def test_cliff_walking_sarsa_earns_more_online(cliff_runs):
    _, runs = cliff_runs
    sarsa_online = runs["sarsa"].returns[100:].mean()
    q_online = runs["q-learning"].returns[100:].mean()
    # the book's figure: about -25 for SARSA and -50 for Q-learning, which falls off the cliff
    assert sarsa_online > q_online + 10


# ------------------------------------------------------------------ maximisation bias (ex. 6.7)
def maximisation_bias_mdp(n_b_actions: int = 10, n_outcomes: int = 21) -> TabularMDP:
    """Sutton & Barto's example 6.7 as a TabularMDP.

    A (state 0): action 0 "left" -> B with reward 0; every other action "right" -> end, 0.
    B (state 1): every action -> end with reward ~ N(-0.1, 1), discretised as ``n_outcomes``
    equally spaced rewards in -0.1 +/- 3 with normal weights, each its own terminal state.
    """
    S = 3 + n_outcomes
    A_STATE, B_STATE, END = 0, 1, 2
    z = np.linspace(-3.0, 3.0, n_outcomes)
    weights = np.exp(-(z**2) / 2)
    P = np.zeros((n_b_actions, S, S))
    R = np.zeros((n_b_actions, S, S))
    P[0, A_STATE, B_STATE] = 1.0
    P[1:, A_STATE, END] = 1.0
    P[:, B_STATE, 3:] = weights / weights.sum()
    R[:, B_STATE, 3:] = -0.1 + z
    for t in range(2, S):
        P[:, t, t] = 1.0
    terminal = np.arange(S) >= 2
    return TabularMDP(P, R, 1.0, terminal=terminal, initial=A_STATE)


def _left_share(algo: str, mdp: TabularMDP, seeds: range, episodes: int) -> float:
    shares = []
    for seed in seeds:
        learner = TabularLearner(algo, mdp, TabularConfig(alpha=0.1, epsilon=0.1, seed=seed))
        shares.append(np.mean(learner.run(episodes).lengths == 2))  # left: A -> B -> end
    return float(np.mean(shares))


def test_double_q_has_less_maximisation_bias_than_q_learning(train_seed):
    mdp = maximisation_bias_mdp()
    seeds = range(100 * train_seed, 100 * (train_seed + 1))  # 100 runs, another 100 per seed
    assert mdp.R[1] == pytest.approx(np.full(10, -0.1))  # going left loses 0.1 on average
    q_share = _left_share("q-learning", mdp, seeds=seeds, episodes=300)
    double_share = _left_share("double-q", mdp, seeds=seeds, episodes=300)
    # optimal is right; epsilon-greedy alone goes left 0.1 / 10 = 1% of the time. Q-learning's
    # max over ten noisy Q(B, .) looks positive and pulls it left (~31%); Double Q (~6%) not.
    assert q_share > 0.2
    assert double_share < 0.1
    assert q_share > 3 * double_share


# ------------------------------------------------------------------ the Gymnasium path
def test_gym_env_object_learns_what_the_compiled_model_path_learns(frozen_lake, train_seed):
    settings = {"alpha": 0.03, "episodes": 15_000, "epsilon": 0.02, "q_init": 1.0,
                "seed": train_seed}  # fmt: skip
    env = gym.make("FrozenLake-v1")
    on_gym = _train("q-learning", env, **settings)
    on_model = _train("q-learning", frozen_lake, **settings)
    assert on_gym.env.model is None and on_model.env.model is not None
    assert on_gym.env.max_steps == on_model.env.max_steps == 100
    for learner in (on_gym, on_model):
        report = check(learner.result(), frozen_lake)
        assert report.optimal_action_share == 1.0, report
    # different random streams (the env samples with its own generator), the same policy values
    gym_V, model_V = on_gym.result().V, on_model.result().V
    live = ~frozen_lake.terminal[: gym_V.shape[0]]
    np.testing.assert_allclose(gym_V[live], model_V[: gym_V.shape[0]][live], atol=0.1)
