"""Replay and rollout buffers: ring overwrite, per-env order, n-step, terminal vs truncated."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.core.buffers import ReplayBuffer, RolloutBuffer
from rlx.errors import ConfigError


def fill(buffer: ReplayBuffer, steps: int, num_envs: int = 1, done_at=(), trunc_at=()) -> None:
    """Transition t of env e has obs = 100 e + t, reward = t, next_obs = obs + 0.5."""
    for t in range(steps):
        obs = (100.0 * np.arange(num_envs) + t).astype(np.float32)[:, None]
        buffer.add(
            obs,
            np.full(num_envs, t % 2),
            np.full(num_envs, float(t)),
            obs + 0.5,
            np.full(num_envs, t in done_at),
            np.full(num_envs, t in trunc_at),
        )


def test_ring_overwrites_the_oldest_transitions():
    buffer = ReplayBuffer(5, (1,))
    fill(buffer, 8)
    assert len(buffer) == 5
    sample = buffer.sample(500, np.random.default_rng(0))
    assert set(sample.obs[:, 0].tolist()) == {3.0, 4.0, 5.0, 6.0, 7.0}
    assert np.all(sample.next_obs == sample.obs + 0.5)
    assert np.all(sample.rewards == sample.obs[:, 0])


def test_sampling_is_uniform_over_stored_transitions():
    buffer = ReplayBuffer(100, (1,), num_envs=2)
    fill(buffer, 10, num_envs=2)
    # env 1 skips its first 5 steps (as after an autoreset): 10 + 5 stored
    buffer2 = ReplayBuffer(100, (1,), num_envs=2)
    for t in range(10):
        obs = np.array([[t], [100 + t]], dtype=np.float32)
        keep = np.array([True, t >= 5])
        z = np.zeros(2, dtype=bool)
        buffer2.add(obs, np.zeros(2), np.zeros(2), obs, z, z, where=keep)
    assert len(buffer) == 20 and len(buffer2) == 15
    obs = buffer2.sample(30_000, np.random.default_rng(1)).obs[:, 0]
    values, counts = np.unique(obs, return_counts=True)
    assert len(values) == 15
    assert counts.min() > 0.8 * 2000 and counts.max() < 1.2 * 2000


def test_where_leaves_out_the_reset_step():
    buffer = ReplayBuffer(10, (1,), num_envs=3)
    obs = np.arange(3, dtype=np.float32)[:, None]
    z = np.zeros(3, dtype=bool)
    buffer.add(obs, np.zeros(3), np.zeros(3), obs, z, z, where=np.array([True, False, True]))
    assert len(buffer) == 2
    assert set(buffer.sample(100, np.random.default_rng(0)).obs[:, 0]) == {0.0, 2.0}


def test_n_step_returns_stop_at_termination_and_bootstrap_at_truncation():
    gamma = 0.5
    buffer = ReplayBuffer(20, (1,), n_step=3, gamma=gamma)
    # rewards 0..9; t=3 terminated, t=6 truncated
    fill(buffer, 10, done_at=(3,), trunc_at=(6,))
    sample = buffer.sample(2000, np.random.default_rng(0))
    by_t = {int(o): i for i, o in enumerate(sample.obs[:, 0])}
    expected = {
        # t: (G, next_obs, discount, terminated, truncated)
        0: (0 + 0.5 * 1 + 0.25 * 2, 2.5, 0.125, False, False),
        2: (2 + 0.5 * 3, 3.5, 0.25, True, False),  # stops at the terminal t=3
        3: (3.0, 3.5, 0.5, True, False),
        5: (5 + 0.5 * 6, 6.5, 0.25, False, True),  # stops at the truncation, bootstraps
        8: (8 + 0.5 * 9, 9.5, 0.25, False, False),  # t=9 is the newest: a 2-step window
        9: (9.0, 9.5, 0.5, False, False),
    }
    for t, (G, nxt, disc, term, trunc) in expected.items():
        i = by_t[t]
        assert sample.rewards[i] == pytest.approx(G)
        assert sample.next_obs[i, 0] == nxt
        assert sample.discounts[i] == pytest.approx(disc)
        assert bool(sample.terminated[i]) is term and bool(sample.truncated[i]) is trunc


def test_n_step_window_never_reads_the_overwritten_past():
    buffer = ReplayBuffer(4, (1,), n_step=3, gamma=1.0)
    fill(buffer, 6)  # holds t = 2..5; t=5 is newest
    sample = buffer.sample(500, np.random.default_rng(0))
    for o, G in zip(sample.obs[:, 0], sample.rewards, strict=True):
        t = int(o)
        assert pytest.approx(sum(range(t, min(t + 3, 6)))) == G


def test_one_step_sample_keeps_terminated_and_truncated_apart():
    buffer = ReplayBuffer(10, (1,), gamma=0.9)
    fill(buffer, 4, done_at=(1,), trunc_at=(2,))
    sample = buffer.sample(400, np.random.default_rng(0))
    t = sample.obs[:, 0].astype(int)
    assert np.array_equal(sample.terminated, t == 1)
    assert np.array_equal(sample.truncated, t == 2)
    assert np.allclose(sample.discounts, 0.9)


def test_state_dict_round_trip():
    a = ReplayBuffer(8, (2,), num_envs=2)
    for t in range(5):
        obs = np.full((2, 2), t, dtype=np.float32)
        z = np.zeros(2, dtype=bool)
        a.add(obs, np.ones(2), np.ones(2), obs, z, z)
    b = ReplayBuffer(8, (2,), num_envs=2)
    b.load_state_dict(a.state_dict())
    sa, sb = a.sample(16, np.random.default_rng(3)), b.sample(16, np.random.default_rng(3))
    assert all(np.array_equal(x, y) for x, y in zip(sa, sb, strict=True))
    with pytest.raises(ConfigError, match="buffer_size"):
        ReplayBuffer(16, (2,), num_envs=2).load_state_dict(a.state_dict())


def test_bad_buffer_arguments():
    with pytest.raises(ConfigError, match="capacity"):
        ReplayBuffer(0, (1,))
    with pytest.raises(ConfigError, match="empty"):
        ReplayBuffer(4, (1,)).sample(1, np.random.default_rng(0))


def test_rollout_buffer_minibatches_skip_reset_steps():
    buf = RolloutBuffer(4, 2, (1,))
    for t in range(4):
        buf.add(
            obs=np.array([[t], [10 + t]], dtype=np.float32),
            actions=np.array([0, 1]),
            valid=np.array([True, t != 2]),  # env 1's step 2 is an autoreset step
        )
    assert buf.full
    seen = np.concatenate([b["obs"][:, 0] for b in buf.minibatches(3, np.random.default_rng(0))])
    assert sorted(seen.tolist()) == [0, 1, 2, 3, 10, 11, 13]
    with pytest.raises(ConfigError, match="full"):
        buf.add(obs=np.zeros((2, 1)))
    buf.reset()
    assert not buf.full


@pytest.mark.parametrize("frames", [False, True])
def test_a_resume_on_other_runners_keeps_a_fitting_replay_buffer_and_drops_another(frames, capsys):
    """RunnerTransitions.fitting_replay: a saved buffer laid out for this run's env columns is
    restored, one for another number of columns is dropped with a message, for the plain
    buffer and the frame buffer (Atari's stacked uint8 frames) alike."""
    from rlx.core.frame_buffer import FrameReplayBuffer
    from rlx.core.transitions import RunnerTransitions

    def buffer(columns: int):
        if frames:
            return FrameReplayBuffer(64, (4, 8, 8), np.uint8, num_envs=columns)
        return ReplayBuffer(64, (3,), np.float32, num_envs=columns)

    saved = buffer(2).state_dict()
    fitting = RunnerTransitions.fitting_replay
    assert fitting(None, saved, buffer(2)) is saved
    assert fitting(None, saved, buffer(4)) is None
    assert "holds 2 env columns, this run 4" in capsys.readouterr().err
    assert fitting(None, None, buffer(4)) is None
