"""from_gymnasium on the toy-text environments, and its errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.errors import EnvError
from rlx.mdp import TabularMDP, from_gymnasium
from rlx.planning import value_iteration


def test_frozenlake_terminal_states_rewards_and_start():
    mdp = from_gymnasium("FrozenLake-v1")
    assert isinstance(mdp, TabularMDP)
    assert np.flatnonzero(mdp.terminal).tolist() == [5, 7, 11, 12, 15]  # holes and goal
    assert mdp.initial[0] == 1.0
    assert (mdp.name, mdp.max_episode_steps, mdp.grid_shape) == ("FrozenLake-v1", 100, (4, 4))
    assert mdp.action_names == ["←", "↓", "→", "↑"]
    RIGHT = 2
    # slippery: right from 14 reaches the goal with probability 1/3, the only reward
    assert mdp.R[14, RIGHT] == pytest.approx(1 / 3)
    assert np.count_nonzero(mdp.R) == 3  # (14, ↓), (14, →), (14, ↑)
    nxt, rew, done = mdp.sample_batch(
        np.full(3000, 14), np.full(3000, RIGHT), np.random.default_rng(0)
    )
    np.testing.assert_array_equal(rew, (nxt == 15).astype(float))
    np.testing.assert_array_equal(done, nxt == 15)
    assert 0.3 < np.mean(nxt == 15) < 0.37


def test_frozenlake_make_kwargs_reach_the_env():
    mdp = from_gymnasium("FrozenLake-v1", map_name="8x8", is_slippery=False)
    assert mdp.n_states == 64 and mdp.grid_shape == (8, 8)
    assert np.all(mdp.P_stacked.data == 1.0)  # deterministic


def test_cliffwalking_cliff_restarts_and_only_the_goal_ends():
    mdp = from_gymnasium("CliffWalking-v1", gamma=1.0)
    assert np.flatnonzero(mdp.terminal).tolist() == [47]
    assert mdp.initial[36] == 1.0 and mdp.max_episode_steps is None
    assert mdp.grid_shape == (4, 12)
    RIGHT = 1
    assert mdp.sample(36, RIGHT, np.random.default_rng(0)) == (36, -100.0, False)
    assert value_iteration(mdp).V[36] == pytest.approx(-13.0)  # 13 steps along the cliff


def test_taxi_dropoffs_are_terminal_and_start_matches_env():
    mdp = from_gymnasium("Taxi-v4")
    env = gym.make("Taxi-v4")
    u = env.unwrapped
    assert mdp.n_states == 500 and mdp.n_actions == 6
    np.testing.assert_allclose(mdp.initial, u.initial_state_distrib)
    ends = np.flatnonzero(mdp.terminal)
    # drop-off targets: taxi on the destination with the passenger there
    assert [tuple(u.decode(s)) for s in ends] == [
        (0, 0, 0, 0),
        (0, 4, 1, 1),
        (4, 0, 2, 2),
        (4, 3, 3, 3),
    ]
    DROPOFF = 5
    s = u.encode(0, 4, 4, 1)  # at G with the passenger aboard, destination G
    assert mdp.sample(s, DROPOFF, np.random.default_rng(0)) == (u.encode(0, 4, 1, 1), 20.0, True)
    assert mdp.max_episode_steps == 200


def test_env_object_is_accepted():
    mdp = from_gymnasium(gym.make("FrozenLake-v1", map_name="8x8"), gamma=0.9)
    assert mdp.n_states == 64 and mdp.gamma == 0.9 and mdp.name == "FrozenLake-v1"


class _LoopEnv(gym.Env):
    """State 1 is entered both by an ending move (from 0, reward 1) and by a continuing one."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.P = {
            0: {0: [(1.0, 1, 1.0, True)], 1: [(1.0, 1, 0.0, False)]},
            1: {0: [(1.0, 0, 0.0, False)], 1: [(1.0, 1, 0.0, False)]},
        }
        self.initial_state_distrib = np.array([1.0, 0.0])


def test_done_into_a_state_also_entered_without_done_gets_a_terminal_copy():
    mdp = from_gymnasium(_LoopEnv(), gamma=0.5)
    assert mdp.n_states == 3 and np.flatnonzero(mdp.terminal).tolist() == [2]
    assert mdp.sample(0, 0, np.random.default_rng(0)) == (2, 1.0, True)
    assert mdp.sample(0, 1, np.random.default_rng(0)) == (1, 0.0, False)
    # from 0: end now for 1, or loop 0 -> 1 -> 0 for nothing: V*(0) = 1, V*(1) = 0.5
    np.testing.assert_allclose(value_iteration(mdp, tol=1e-12).V, [1.0, 0.5, 0.0])


@pytest.mark.parametrize(
    ("env_id", "match"),
    [
        ("CartPole-v1", r"CartPole-v1 has observation space Box.*Discrete"),
        ("Pendulum-v1", r"Pendulum-v1 has observation space Box.*Discrete"),
        ("FrozenLak-v1", r"'FrozenLak-v1' is not a usable Gymnasium id.*FrozenLake-v1"),
        ("Taxi-v3", r"'Taxi-v3' .*Taxi-v4"),
    ],
)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_unusable_envs_raise_env_error(env_id, match):
    with pytest.raises(EnvError, match=match):
        from_gymnasium(env_id)


def test_discrete_env_without_model_raises_env_error():
    class NoModel(gym.Env):
        observation_space = gym.spaces.Discrete(3)
        action_space = gym.spaces.Discrete(2)

    with pytest.raises(EnvError, match=r"publishes no transition model"):
        from_gymnasium(NoModel())


def test_bad_make_kwargs_raise_env_error():
    with pytest.raises(EnvError, match=r"FrozenLake-v1 does not accept .*bogus"):
        from_gymnasium("FrozenLake-v1", bogus=1)
