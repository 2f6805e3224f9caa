"""Slow (``-m slow``): DQN solves CartPole-v1 with its tuned preset, for every seed."""

from __future__ import annotations

import pytest

import rlx
from rlx.agents.dqn import PRESETS


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dqn_solves_cartpole_within_the_preset_budget(tmp_path, seed):
    # no overrides but the seed: the budget and hyperparameters are the CartPole-v1 preset's
    agent = rlx.train("dqn", "CartPole-v1", run_dir=tmp_path / "r", seed=seed)
    assert agent.config.total_steps == PRESETS["CartPole-v1"]["total_steps"]
    stats = rlx.evaluate(agent, "CartPole-v1", episodes=20, seed=1_000 + seed)
    assert stats.mean_return >= 475, f"seed {seed}: {stats}"
