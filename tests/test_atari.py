"""Atari: the Nature DQN preprocessing, the frame-once replay buffer, and smoke runs of DQN and
PPO on Breakout (the tests that need a game skip when ale-py is not installed)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from rlx.core import atari
from rlx.core.buffers import ReplayBuffer
from rlx.core.frame_buffer import FrameReplayBuffer, stores_frames_once
from rlx.errors import ConfigError, EnvError

ale = pytest.mark.skipif(not atari.register_atari_games(), reason="ale-py is not installed")
GAME = "ALE/Breakout-v5"


# ---------------------------------------------------------------------------- ids and wrappers
def test_an_ale_id_without_ale_py_names_the_extra(monkeypatch):
    monkeypatch.setattr(atari, "register_atari_games", lambda: False)
    with pytest.raises(EnvError, match=r"rlx\[atari\]"):
        atari.is_atari_id("ALE/NotAGame-v5")
    assert not atari.is_atari_id("CartPole-v1")


@ale
def test_atari_ids_are_the_screen_games_of_ale_py():
    assert atari.is_atari_id(GAME)
    assert atari.is_atari_id("BreakoutNoFrameskip-v4")
    assert not atari.is_atari_id("ALE/Breakout-ram-v5")  # RAM observations: no images
    assert not atari.is_atari_id("CartPole-v1")
    assert not atari.is_atari_id(object())


@ale
def test_the_pipeline_gives_four_stacked_84x84_grayscale_frames_and_clipped_rewards():
    env = atari.atari_env(GAME)
    try:
        assert env.observation_space.shape == (4, 84, 84)
        assert env.observation_space.dtype == np.uint8
        obs, _ = env.reset(seed=0)
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        chain, inner = [], env
        while hasattr(inner, "env"):
            chain.append(type(inner).__name__)
            inner = inner.env
        for name in ("AtariPreprocessing", "EpisodicLife", "FireReset", "ClipReward"):
            assert name in chain
        rewards = [env.step(env.action_space.sample())[1] for _ in range(300)]
        assert all(-1.0 <= r <= 1.0 for r in rewards)
    finally:
        env.close()


@ale
def test_a_lost_life_ends_the_episode_but_not_the_game():
    env = atari.atari_env(GAME, clip_rewards=False)
    try:
        env.reset(seed=0)
        lives = env.unwrapped.ale.lives()
        terminated = False
        for _ in range(5_000):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                break
        assert terminated
        left = env.unwrapped.ale.lives()
        assert 0 < left < lives  # one life lost, the game not over
        env.reset()
        assert env.unwrapped.ale.lives() == left  # the reset went on with the same game
    finally:
        env.close()


@ale
def test_make_env_and_make_vec_env_apply_the_pipeline_to_ale_ids():
    from rlx.core.env_recipe import EnvRecipe
    from rlx.core.envs import env_spaces, make_env, make_vec_env

    env = make_env(GAME)
    assert env.observation_space.shape == (4, 84, 84)
    env.close()
    # a run folder's recipe of the id (rlx eval, --resume) makes the same env
    recipe = EnvRecipe.from_record({"kind": "id", "target": GAME, "kwargs": {}, "reason": ""})
    assert env_spaces(recipe)[0].shape == (4, 84, 84)
    vec = make_vec_env(GAME, 2)
    try:
        obs, _ = vec.reset(seed=0)
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    finally:
        vec.close()


# ---------------------------------------------------------------------------- frame buffer
STACK, SIDE = 4, 8


def stacked_episodes(num_envs: int, steps: int, seed: int = 0):
    """Vector steps of a toy env whose observations stack the last 4 random frames, padded
    with the first at a reset, under NEXT_STEP autoreset (a reset-only step after a done)."""
    rng = np.random.default_rng(seed)

    def first_stack():
        frame = rng.integers(0, 256, (SIDE, SIDE), dtype=np.uint8)
        return np.repeat(frame[None], STACK, axis=0)

    stacks = np.stack([first_stack() for _ in range(num_envs)])
    after_done = np.zeros(num_envs, dtype=bool)
    for _ in range(steps):
        nxt = np.empty_like(stacks)
        for e in range(num_envs):
            if after_done[e]:
                nxt[e] = first_stack()
            else:
                new = rng.integers(0, 256, (1, SIDE, SIDE), dtype=np.uint8)
                nxt[e] = np.concatenate([stacks[e, 1:], new])
        done = rng.random(num_envs) < 0.05
        terminated, truncated = done & (rng.random(num_envs) < 0.5), done.copy()
        truncated &= ~terminated
        actions = rng.integers(0, 3, num_envs)
        rewards = rng.normal(size=num_envs).astype(np.float32)
        yield stacks, actions, rewards, nxt, terminated, truncated, ~after_done
        stacks, after_done = nxt, terminated | truncated


def filled(buffer_class, capacity=300, num_envs=3, steps=400, n_step=3):
    buffer = buffer_class(capacity, (STACK, SIDE, SIDE), np.uint8, num_envs=num_envs,
                          n_step=n_step, gamma=0.9)  # fmt: skip
    for obs, actions, rewards, nxt, terminated, truncated, where in stacked_episodes(
        num_envs, steps
    ):
        buffer.add(obs, actions, rewards, nxt, terminated, truncated, where=where)
    return buffer


def assert_same_samples(a, b, draws=4):
    for seed in range(draws):
        x, y = (
            a.sample(128, np.random.default_rng(seed)),
            b.sample(128, np.random.default_rng(seed)),
        )
        for name in x._fields:
            left, right = getattr(x, name), getattr(y, name)
            if left is None:
                assert right is None
            else:
                np.testing.assert_array_equal(left, right, err_msg=name)


def test_the_frame_buffer_samples_exactly_what_the_replay_buffer_does():
    # the ring wraps (400 steps into 100 rows per copy), episodes end and n-step windows span
    plain, frames = filled(ReplayBuffer), filled(FrameReplayBuffer)
    assert len(frames) == len(plain) == frames.capacity
    np.testing.assert_array_equal(frames.count, plain.count)
    assert_same_samples(plain, frames)


def test_the_frame_buffer_stores_each_frame_about_once():
    frames = filled(FrameReplayBuffer)
    plain_obs = 2 * frames.capacity * STACK * SIDE * SIDE  # obs and next_obs, whole
    assert frames.frames.nbytes < plain_obs / 6
    # frames written per stored transition: one, plus one more per episode start
    assert frames.written.sum() < 1.2 * 400 * 3


def test_short_episodes_drop_the_oldest_transitions_never_a_wrong_frame():
    buffer = FrameReplayBuffer(40, (STACK, SIDE, SIDE), np.uint8, num_envs=1)
    seen = set()
    rng = np.random.default_rng(0)
    for _ in range(200):  # one-step episodes: each takes two frames, the pool fills first
        first = np.repeat(rng.integers(0, 256, (1, SIDE, SIDE), dtype=np.uint8), STACK, axis=0)
        nxt = np.concatenate([first[1:], rng.integers(0, 256, (1, SIDE, SIDE), dtype=np.uint8)])
        seen.add(hashlib.sha1(first.tobytes() + nxt.tobytes()).hexdigest())
        buffer.add(first[None], np.zeros(1, np.int64), np.zeros(1, np.float32), nxt[None],
                   np.ones(1, bool), np.zeros(1, bool))  # fmt: skip
    assert 0 < len(buffer) <= 40
    sample = buffer.sample(64, rng)
    for obs, nxt in zip(sample.obs, sample.next_obs, strict=True):
        assert hashlib.sha1(obs.tobytes() + nxt.tobytes()).hexdigest() in seen


def test_the_frame_buffer_survives_a_checkpoint():
    saved = filled(FrameReplayBuffer)
    restored = FrameReplayBuffer(
        300, (STACK, SIDE, SIDE), np.uint8, num_envs=3, n_step=3, gamma=0.9
    )
    restored.load_state_dict(saved.state_dict())
    assert_same_samples(saved, restored)
    other = FrameReplayBuffer(600, (STACK, SIDE, SIDE), np.uint8, num_envs=3)
    with pytest.raises(ConfigError, match="buffer_size"):
        other.load_state_dict(saved.state_dict())


def test_the_frame_buffer_takes_only_stacks_of_uint8_frames():
    assert stores_frames_once((4, 84, 84), np.uint8)
    assert not stores_frames_once((84, 84, 3), np.uint8)  # channels last: not frames
    assert not stores_frames_once((4, 84, 84), np.float32)
    assert not stores_frames_once((4,), np.uint8)
    with pytest.raises(ConfigError, match="ReplayBuffer"):
        FrameReplayBuffer(10, (8,), np.float32)


# ---------------------------------------------------------------------------- smoke runs
@ale
def test_dqn_trains_a_few_thousand_steps_on_breakout_with_the_frame_buffer(tmp_path, monkeypatch):
    import rlx
    from rlx.core import transitions

    made = []
    plain = transitions.ReplayLayout.replay_buffer

    def replay_buffer(self, *args, **kwargs):  # a spy: the engine's own choice, recorded
        buffer = plain(self, *args, **kwargs)
        made.append(buffer)
        return buffer

    monkeypatch.setattr(transitions.ReplayLayout, "replay_buffer", replay_buffer)
    agent = rlx.train(
        "dqn", env=GAME, run_dir=tmp_path / "dqn", progress=False, total_steps=2_000,
        num_envs=4, buffer_size=2_000, batch_size=32, learning_starts=1_000, train_freq=16,
        eval_episodes=1, save_replay_buffer=True,
    )  # fmt: skip
    assert isinstance(made[0], FrameReplayBuffer) and len(made[0]) > 1_000
    obs, _ = atari.atari_env(GAME).reset(seed=0)
    assert 0 <= int(agent.act(obs)) < 4
    loaded = rlx.load(tmp_path / "dqn")
    assert int(loaded.act(obs)) == int(agent.act(obs))


@ale
def test_ppo_trains_a_thousand_steps_on_breakout(tmp_path):
    import rlx

    agent = rlx.train(
        "ppo", env=GAME, run_dir=tmp_path / "ppo", progress=False, total_steps=1_024,
        num_envs=4, num_steps=128, minibatch_size=256, num_epochs=1, eval_episodes=1,
    )  # fmt: skip
    obs, _ = atari.atari_env(GAME).reset(seed=0)
    assert 0 <= int(agent.act(obs)) < 4
