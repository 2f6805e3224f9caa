"""Bad input gets one clear sentence of the right error type, naming the value and the range."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.errors import ConfigError, EnvError, RLXError, UnknownAlgorithmError
from rlx.mdp import GridWorld
from rlx.tabular import TabularConfig, TabularLearner, q_learning, td0


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("alpha", -0.1, "alpha=-0.1 is out of range; it must lie in (0, 1]"),
        ("alpha", 0.0, "alpha=0.0 is out of range"),
        ("alpha", 1.5, "alpha=1.5 is out of range"),
        ("epsilon", 1.2, "epsilon=1.2 is out of range; it must lie in [0, 1]"),
        ("epsilon", -0.01, "epsilon=-0.01 is out of range"),
        ("episodes", 0, "episodes=0 must be an integer >= 1"),
        ("episodes", 2.5, "episodes=2.5 must be an integer >= 1"),
        ("gamma", 1.5, "gamma=1.5 is out of range; it must lie in [0, 1]"),
        ("gamma", float("nan"), "gamma=nan is out of range"),
        ("max_steps", 0, "max_steps=0 must be an integer >= 1"),
        ("epsilon_schedule", "exp", "epsilon_schedule='exp' is not a schedule"),
        ("exploration_fraction", 0.0, "exploration_fraction=0.0 is out of range"),
        ("epsilon_end", 2.0, "epsilon_end=2.0 is out of range"),
        ("q_init", float("inf"), "q_init=inf must be a finite number"),
        ("seed", -1, "seed=-1 must be an integer >= 0"),
    ],
)
def test_config_rejects_out_of_range_values(field, value, words):
    with pytest.raises(ConfigError) as err:
        TabularConfig(**{field: value})
    assert words in str(err.value)


def test_valid_edge_values_are_accepted():
    TabularConfig(alpha=1.0, epsilon=0.0, gamma=1.0, episodes=1, max_steps=1)
    TabularConfig(alpha=None, gamma=None, epsilon_schedule="linear", exploration_fraction=1.0)


def test_unknown_algorithm_names_the_valid_ones():
    with pytest.raises(UnknownAlgorithmError) as err:
        TabularLearner("q-lerning", GridWorld(), TabularConfig())
    message = str(err.value)
    assert "unknown tabular algorithm 'q-lerning'" in message
    assert "Did you mean 'q-learning'?" in message
    assert isinstance(err.value, ConfigError)


def test_box_observation_space_suggests_dqn_or_ppo():
    with pytest.raises(EnvError) as err:
        TabularLearner("q-learning", "CartPole-v1", TabularConfig())
    message = str(err.value)
    assert message.startswith("q-learning needs a Discrete observation space; CartPole-v1 has Box(")
    assert message.endswith("Try DQN or PPO.")


def test_box_action_space_suggests_continuous_control():
    env = gym.make("Pendulum-v1")
    with pytest.raises(EnvError, match=r"Pendulum-v1 has Box\(.*Try SAC, TD3 or PPO\.$"):
        TabularLearner("sarsa", env, TabularConfig())


def test_unknown_env_id_and_wrong_env_type():
    with pytest.raises(EnvError, match="FrozenLake-v1"):
        TabularLearner("q-learning", "FrozenLak-v1", TabularConfig())
    with pytest.raises(EnvError, match="cannot train on a list"):
        TabularLearner("q-learning", [1, 2], TabularConfig())


def test_run_needs_a_positive_episode_count():
    learner = TabularLearner("q-learning", GridWorld(), TabularConfig())
    with pytest.raises(ConfigError, match="n_episodes=0 must be >= 1"):
        learner.run(0)


def test_prediction_policy_is_checked():
    mdp = GridWorld()
    with pytest.raises(ConfigError, match=r"policy has shape \(3,\)"):
        td0(mdp, policy=np.zeros(3, dtype=int), episodes=1)
    with pytest.raises(ConfigError, match="each row must sum to 1"):
        td0(mdp, policy=np.full((16, 4), 0.3), episodes=1)
    with pytest.raises(ConfigError, match=r"policy actions must lie in \[0, 4\)"):
        td0(mdp, policy=np.full(16, 7), episodes=1)
    with pytest.raises(ConfigError, match="policy= is for prediction"):
        TabularLearner("sarsa", mdp, TabularConfig(), policy=np.zeros(16, dtype=int))


def test_shortcuts_reject_unknown_settings():
    with pytest.raises(ConfigError, match="q-learning has no setting learning_rate"):
        q_learning(GridWorld(), episodes=1, learning_rate=0.1)


def test_all_user_errors_are_rlx_errors():
    for cls in (ConfigError, EnvError, UnknownAlgorithmError):
        assert issubclass(cls, RLXError)
