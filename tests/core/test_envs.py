"""Vector envs: construction modes, NEXT_STEP autoreset handling, episode statistics."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.core.buffers import ReplayBuffer
from rlx.core.envs import EpisodeTracker, make_vec_env, require_discrete_actions
from rlx.errors import EnvError
from tests import toy_envs  # noqa: F401  (registers rlx-test/... ids)


def test_native_vector_env_when_the_env_has_one():
    vec = make_vec_env("CartPole-v1", 4)
    assert type(vec).__name__ == "CartPoleVectorEnv"
    assert vec.num_envs == 4
    vec.close()


def test_sync_and_async_on_request():
    sync = make_vec_env("CartPole-v1", 2, vectorization="sync")
    assert isinstance(sync, gym.vector.SyncVectorEnv)
    sync.close()
    async_ = make_vec_env("rlx-test/Count-v0", 2, vectorization="async")
    assert isinstance(async_, gym.vector.AsyncVectorEnv)
    obs, _ = async_.reset(seed=0)
    assert obs.shape == (2, 1)
    async_.close()


def test_env_object_is_vectorised_with_copies():
    env = gym.make("rlx-test/Count-v0")
    vec = make_vec_env(env, 3)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (3, 1)
    vec.close()


def test_bad_ids_and_modes_are_env_errors():
    with pytest.raises(EnvError, match="CartPole-v1"):
        make_vec_env("CartPol-v1", 1)
    with pytest.raises(EnvError, match="vectorization='threads'"):
        make_vec_env("CartPole-v1", 1, vectorization="threads")
    with pytest.raises(EnvError, match="num_envs=0"):
        make_vec_env("CartPole-v1", 0)


def test_discrete_action_check_names_the_space_and_alternatives():
    assert require_discrete_actions(gym.spaces.Discrete(3), "DQN", "X", "SAC") == 3
    box = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    with pytest.raises(EnvError, match=r"Pendulum-v1 has Box\(-2.0, 2.0, \(1,\), float32\).*SAC"):
        require_discrete_actions(box, "DQN", "Pendulum-v1", "SAC, TD3 or PPO")


def collect(vec, steps: int, buffer: ReplayBuffer, tracker: EpisodeTracker, rng):
    """The collection pattern every rlx agent uses under NEXT_STEP autoreset."""
    obs, _ = vec.reset(seed=0)
    after_done = np.zeros(vec.num_envs, dtype=bool)
    finished = []
    for _ in range(steps):
        actions = rng.integers(0, 2, size=vec.num_envs)
        next_obs, rewards, terminated, truncated, _ = vec.step(actions)
        stored = ~after_done
        buffer.add(obs, actions, rewards, next_obs, terminated, truncated, where=stored)
        finished.append(tracker.step(rewards, terminated, truncated, stored))
        after_done = terminated | truncated
        obs = next_obs
    return finished


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_no_transition_across_an_episode_boundary_is_stored(vectorization):
    # Count: obs = 100 * episode + t, so a real transition goes from t to t + 1 of one episode
    vec = make_vec_env("rlx-test/Count-v0", 3, vectorization=vectorization)
    buffer = ReplayBuffer(10_000, (1,), num_envs=3)
    tracker = EpisodeTracker(3)
    finished = collect(vec, 200, buffer, tracker, np.random.default_rng(0))
    vec.close()
    n = len(buffer)
    sample = buffer.sample(5000, np.random.default_rng(1))
    assert np.all(sample.next_obs == sample.obs + 1), "a stored transition crosses a reset"
    t_next = sample.next_obs[:, 0] % 100
    # truncated at the time limit (5 steps): next_obs is the true final observation t = 5
    assert np.all(t_next[sample.truncated] == 5)
    assert sample.truncated.any() and sample.terminated.any()
    # terminated only by action 1 at t >= 3
    assert np.all(t_next[sample.terminated] >= 3)
    # every stored step belongs to an episode: counts of transitions and episode lengths agree
    lengths = np.concatenate([f.lengths for f in finished])
    assert lengths.min() >= 3 and lengths.max() == 5
    assert lengths.sum() <= n < lengths.sum() + 3 * 5


def test_episode_tracker_returns_lengths_and_discounted_start_return():
    tracker = EpisodeTracker(2, gamma=0.5)
    z = np.zeros(2, dtype=bool)
    # env 0: rewards 1, 2, 4 then terminates; env 1: rewards 3, 3, 3 ... truncated at 3
    out = []
    out.append(tracker.step(np.array([1.0, 3.0]), z, z, ~z, values=np.array([7.0, 8.0])))
    out.append(tracker.step(np.array([2.0, 3.0]), z, z, ~z, values=np.array([0.0, 0.0])))
    out.append(
        tracker.step(np.array([4.0, 3.0]), np.array([True, False]), np.array([False, True]), ~z)
    )
    last = out[-1]
    assert last.envs.tolist() == [0, 1]
    assert last.returns.tolist() == [7.0, 9.0]
    assert last.lengths.tolist() == [3, 3]
    assert last.discounted_returns.tolist() == pytest.approx([1 + 1 + 1, 3 + 1.5 + 0.75])
    assert last.start_values.tolist() == [7.0, 8.0]
    assert last.truncated.tolist() == [False, True]
    # the autoreset step after the dones is not part of any episode
    reset = tracker.step(np.array([0.0, 0.0]), z, z, stored=z, values=np.array([9.0, 9.0]))
    assert len(reset.envs) == 0 and tracker.lengths.tolist() == [0, 0]
    tracker.step(np.array([5.0, 5.0]), z, z, ~z, values=np.array([1.0, 2.0]))
    assert tracker.start_values.tolist() == [1.0, 2.0] and tracker.returns.tolist() == [5.0, 5.0]
