"""REINFORCE: Monte Carlo returns of whole episodes, baselines, learning, resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.agents import reinforce
from rlx.core.buffers import RolloutBuffer
from rlx.core.policies import ActorCritic
from rlx.errors import ConfigError
from tests.agents.pg_helpers import metric_rows, resume_matches_uninterrupted, train


def hand_buffer() -> RolloutBuffer:
    """Copy 0 terminates at t = 1, resets at t = 2, is cut mid-episode at t = 3;
    copy 1 is truncated by a time limit at t = 2 and resets at t = 3. Every reward is 1."""
    buffer = RolloutBuffer(4, 2, (1,))
    for t in range(4):
        buffer.add(
            obs=np.zeros((2, 1), np.float32),
            actions=np.zeros(2, np.int64),
            rewards=np.ones(2, np.float32),
            terminated=np.array([t == 1, False]),
            truncated=np.array([False, t == 2]),
            valid=np.array([t != 2, t != 3]),
        )
    return buffer


@pytest.mark.parametrize(
    "baseline, expected_weights",
    [
        ("none", [1.5, 1.75, 1.0, 1.5, 1.0]),
        ("mean", [1.5 - 1.35, 1.75 - 1.35, 1.0 - 1.35, 1.5 - 1.35, 1.0 - 1.35]),
    ],
)
def test_monte_carlo_returns_of_whole_episodes_only(baseline, expected_weights):
    config = reinforce.ReinforceConfig(gamma=0.5, baseline=baseline, normalize_returns=False)
    policy = ActorCritic(1, {"n": 2}, (), critic=False)
    batch = reinforce.monte_carlo_batch(hand_buffer(), policy, np.zeros((2, 1), np.float32),
                                        config)  # fmt: skip
    # rows (t, copy) in order: (0,0) (0,1) (1,0) (1,1) (2,1); copy 0's cut tail is left out,
    # and without a learned baseline the time limit ends the sum (nothing to bootstrap from)
    np.testing.assert_allclose(batch.returns.numpy(), [1.5, 1.75, 1.0, 1.5, 1.0])
    np.testing.assert_allclose(batch.advantages.numpy(), expected_weights, rtol=1e-6)


def test_learned_baseline_bootstraps_the_time_limit_and_is_subtracted():
    config = reinforce.ReinforceConfig(gamma=0.5, baseline="learned", normalize_returns=False)
    policy = ActorCritic(1, {"n": 2}, ())
    with torch.no_grad():
        policy.critic.weight.fill_(2.0)  # V(s) = 2 s
    buffer = hand_buffer()
    buffer.obs[:] = 1.0  # every V = 2, the final observation of the time limit too
    batch = reinforce.monte_carlo_batch(buffer, policy, np.ones((2, 1), np.float32), config)
    # copy 1: G_2 = 1 + 0.5 * V(final) = 2, G_1 = 2, G_0 = 2; copy 0 as before
    np.testing.assert_allclose(batch.returns.numpy(), [1.5, 2.0, 1.0, 2.0, 2.0])
    np.testing.assert_allclose(batch.advantages.numpy(), np.array([1.5, 2.0, 1.0, 2.0, 2.0]) - 2)


def test_bad_baseline_is_a_clear_error():
    with pytest.raises(ConfigError, match="baseline='critic' is not one of learned, mean, none"):
        reinforce.ReinforceConfig(baseline="critic")


def test_every_copy_ends_an_episode_in_each_batch(tmp_path):
    train("reinforce", "CartPole-v1", tmp_path / "run", total_steps=2000, num_envs=4)
    rows = metric_rows(tmp_path / "run")
    assert all("episode_return" in row for row in rows)
    lines = (tmp_path / "run" / "episodes.csv").read_text().splitlines()[1:]
    assert len(lines) >= 4 * len(rows)


@pytest.mark.parametrize("baseline", ["none", "mean"])
def test_baseline_options_run(tmp_path, baseline):
    agent = train("reinforce", "CartPole-v1", tmp_path / "run", total_steps=500, baseline=baseline)
    assert agent.policy.critic is None
    assert rlx.load(tmp_path / "run").act(np.zeros(4, np.float32)) in (0, 1)


def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, monkeypatch):
    resume_matches_uninterrupted(
        "reinforce", "CartPole-v1", tmp_path, monkeypatch, stop_at=300, total_steps=1000,
        num_envs=4,
    )  # fmt: skip


def test_learns_cartpole(tmp_path, train_seed):
    """30k steps multiply the batches' mean return (seeds 0-4: 3.6x to 4.7x here)."""
    train("reinforce", "CartPole-v1", tmp_path / "run", total_steps=30_000, seed=train_seed)
    returns = [row["episode_return"] for row in metric_rows(tmp_path / "run")]
    assert np.mean(returns[-5:]) >= 2.5 * np.mean(returns[:5])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reaches_200_on_cartpole(tmp_path, seed):
    agent = train("reinforce", "CartPole-v1", tmp_path / "run", total_steps=200_000, seed=seed)
    stats = rlx.evaluate(agent, "CartPole-v1", episodes=20, seed=1000 + seed)
    assert stats.mean_return >= 200, stats
