"""The stateful learner: determinism, chunk invariance, resume, and the two episode paths."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.mdp import GridWorld, TabularMDP
from rlx.tabular import ALGORITHMS, TabularConfig, TabularLearner
from rlx.tabular import learner as learner_module

CONTROL = ["mc", "q-learning", "sarsa", "expected-sarsa", "double-q"]


def _assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.fixture(scope="module")
def gridworld() -> GridWorld:
    return GridWorld(4, 4, gamma=1.0)


def _config(**overrides) -> TabularConfig:
    fields = {"episodes": 1000, "epsilon_schedule": "linear", "seed": 3, "max_steps": 200}
    return TabularConfig(**{**fields, **overrides})


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_same_seed_same_run_and_another_seed_another(gridworld, algo):
    a = TabularLearner(algo, gridworld, _config())
    b = TabularLearner(algo, gridworld, _config())
    c = TabularLearner(algo, gridworld, _config(seed=4))
    batches = [learner.run(200) for learner in (a, b, c)]
    _assert_same_state(a.state_dict(), b.state_dict())
    assert not np.array_equal(batches[0].lengths, batches[2].lengths)


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_300_then_700_episodes_equal_1000_also_across_a_state_dict(gridworld, algo):
    whole = TabularLearner(algo, gridworld, _config())
    whole.run(1000)
    split = TabularLearner(algo, gridworld, _config())
    split.run(300)
    resumed = TabularLearner(algo, gridworld, _config())
    resumed.load_state_dict(split.state_dict())
    split.run(700)
    resumed.run(700)
    expected = whole.state_dict()
    _assert_same_state(split.state_dict(), expected)
    _assert_same_state(resumed.state_dict(), expected)
    assert resumed.episodes_done == 1000 and resumed.steps_done == whole.steps_done
    np.testing.assert_array_equal(resumed.result().returns, whole.result().returns)


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_python_loop_equals_compiled_kernel_bit_for_bit(gridworld, algo, monkeypatch):
    compiled = TabularLearner(algo, gridworld, _config())
    compiled.run(60)
    _, plain = learner_module._LOOPS[algo]
    monkeypatch.setitem(learner_module._LOOPS, algo, (plain, plain))
    python = TabularLearner(algo, gridworld, _config())
    python.run(60)
    _assert_same_state(python.state_dict(), compiled.state_dict())


def test_gym_path_is_chunk_invariant_too():
    def learner() -> TabularLearner:
        return TabularLearner("q-learning", gym.make("FrozenLake-v1"), _config())

    whole, split = learner(), learner()
    whole.run(50)
    split.run(30)
    split.run(20)
    _assert_same_state(split.state_dict(), whole.state_dict())


def test_load_state_dict_rejects_another_algorithm(gridworld):
    from rlx.errors import CheckpointError

    state = TabularLearner("double-q", gridworld, _config()).state_dict()
    with pytest.raises(CheckpointError, match="missing Q"):
        TabularLearner("q-learning", gridworld, _config()).load_state_dict(state)


# ----------------------------------------------------------------- terminated vs truncated
def _loop_mdp() -> TabularMDP:
    """One state looping on itself with reward 1: every episode ends by truncation."""
    P = np.ones((2, 1, 1))
    return TabularMDP(P, np.ones((1, 2)), gamma=0.9)


class _OneStepEnv(gym.Env):
    """From state 0 every action gives reward 1 and ends the episode: terminated or truncated."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, terminates: bool) -> None:
        self.terminates = terminates

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        s_next = 1 if self.terminates else 0
        return s_next, 1.0, self.terminates, not self.terminates, {}


def _values_of_state_0(learner: TabularLearner) -> np.ndarray:
    result = learner.result()
    return result.V[:1] if result.Q is None else result.Q[0]


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_truncation_bootstraps_in_every_learner(algo):
    """Truncated after one step, the return is 1 + 0.9 V(s'): the fixed point is 1 / (1 - 0.9)."""
    # epsilon 0.5 so that both actions are updated often
    config = TabularConfig(episodes=3000, max_steps=1, alpha=0.1, gamma=0.9, epsilon=0.5)
    on_model = TabularLearner(algo, _loop_mdp(), config)
    on_model.run(3000)
    np.testing.assert_allclose(_values_of_state_0(on_model), 10.0, atol=0.01)
    on_gym = TabularLearner(algo, _OneStepEnv(terminates=False), config)
    on_gym.run(3000)
    np.testing.assert_allclose(_values_of_state_0(on_gym), 10.0, atol=0.01)
    assert on_gym.result().lengths.max() == 1


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_termination_does_not_bootstrap_in_any_learner(algo):
    """The terminal state's table entries start at q_init = 5, but the target is r = 1 alone."""
    config = TabularConfig(episodes=3000, alpha=0.1, gamma=0.9, q_init=5.0, epsilon=0.5)
    learner = TabularLearner(algo, _OneStepEnv(terminates=True), config)
    learner.run(3000)
    np.testing.assert_allclose(_values_of_state_0(learner), 1.0, atol=1e-3)


def test_max_steps_caps_episodes_and_defaults_to_the_env_limit(gridworld):
    capped = TabularLearner("sarsa", gridworld, TabularConfig(max_steps=3, epsilon=1.0))
    assert capped.run(200).lengths.max() == 3
    assert TabularLearner("sarsa", "FrozenLake-v1", TabularConfig()).env.max_steps == 100
    assert TabularLearner("sarsa", gridworld, TabularConfig()).env.max_steps == 10_000


# ----------------------------------------------------------------- results and logging
def test_linear_epsilon_schedule_decays_over_the_first_tenth():
    config = TabularConfig(episodes=1000, epsilon_schedule="linear")
    eps = config.epsilons(0, 1000)
    assert eps[0] == 1.0 and eps[50] == pytest.approx(1.0 - 0.99 * 0.5)
    assert np.all(eps[100:] == pytest.approx(0.01))
    np.testing.assert_array_equal(config.epsilons(300, 5), eps[300:305])
    assert np.all(TabularConfig(epsilon=0.2).epsilons(7, 3) == 0.2)


def test_episode_batch_and_result_fields(gridworld):
    learner = TabularLearner("double-q", gridworld, _config())
    batch = learner.run(50)
    assert batch.returns.shape == batch.lengths.shape == (50,)
    np.testing.assert_array_equal(batch.returns, -batch.lengths)  # -1 per step
    assert batch.epsilon == pytest.approx(1.0 + (0.01 - 1.0) * 49 / 100)  # the last episode's
    assert batch.td_error > 0
    assert learner.episodes_done == 50 and learner.steps_done == batch.lengths.sum()
    result = learner.result()
    np.testing.assert_allclose(result.Q, (result.Q1 + result.Q2) / 2)
    assert result.policy.dtype == np.int64 and result.policy.shape == (16,)
    np.testing.assert_array_equal(result.V, result.Q.max(axis=1))
    assert learner.greedy_action(5) == int(np.argmax(result.Q[5]))
    assert result.visits.sum() == learner.steps_done


def test_prediction_result_holds_the_evaluated_policy(gridworld):
    policy = np.zeros(16, dtype=int)
    learner = TabularLearner("td0", gridworld, TabularConfig(max_steps=5), policy=policy)
    batch = learner.run(10)
    result = learner.result()
    assert result.Q is None and result.is_prediction
    np.testing.assert_array_equal(result.policy, np.eye(4)[policy])
    assert batch.epsilon == 0.0 and learner.greedy_action(3) == 0
