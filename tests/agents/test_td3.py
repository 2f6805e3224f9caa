"""TD3: learns a known optimal action, delays its actor, resumes exactly, refuses bad input.

Slow (``-m slow``): Pendulum-v1 to an evaluation mean of -200 within 20,000 steps for two
seeds; a 10,000-step HalfCheetah-v5 smoke run when MuJoCo is installed.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import rlx
from rlx.agents.td3 import TD3Config, TD3Learner
from rlx.core.off_policy import ReplayBatch
from rlx.errors import ConfigError, EnvError
from tests.agents import continuous_envs  # noqa: F401  (registers rlx-test/Target-v0)

# a small, quick configuration for the one-step Target env (Q(s, a) is the reward itself)
TOY = {
    "total_steps": 800,
    "learning_starts": 100,
    "batch_size": 64,
    "hidden_sizes": (32, 32),
    "actor_learning_rate": 3e-3,
    "critic_learning_rate": 3e-3,
    "exploration_noise": 0.2,
    "log_every": 250,
    "eval_episodes": 50,
}


def _metrics(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_td3_learns_the_best_action_of_a_contextual_bandit(tmp_path, train_seed):
    # random actions earn about -1.7, the best constant action -0.75; only a policy that
    # reads the state and maps [-1, 1] onto the off-centre box [0, 4] gets near 0
    rlx.train("td3", "rlx-test/Target-v0", run_dir=tmp_path / "r", seed=train_seed, **TOY)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["eval_return_mean"] > -0.05

    agent = rlx.load(tmp_path / "r")
    for s in (-0.8, 0.0, 0.6):
        assert agent.act(np.array([s], dtype=np.float32))[0] == pytest.approx(
            2.0 + 1.5 * s, abs=0.25
        )
    last = _metrics(tmp_path / "r")[-1]
    for name in ("critic_loss", "actor_loss", "q_mean", "td_error", "episode_return",
                 "mc_return", "q_start", "gradient_steps"):  # fmt: skip
        assert name in last, name


def test_actor_and_targets_move_only_every_policy_delay_critic_updates():
    torch.manual_seed(0)
    learner = TD3Learner(TD3Config(hidden_sizes=(8,), policy_delay=3), obs_dim=2, act_dim=1)
    batch = ReplayBatch(
        torch.randn(16, 2), torch.rand(16, 1) * 2 - 1, torch.randn(16), torch.randn(16, 2),
        torch.zeros(16), torch.full((16,), 0.99),
    )  # fmt: skip

    def snapshot():
        return [
            p.clone() for p in (*learner.actor.parameters(), *learner.critic_target.parameters())
        ]

    before = snapshot()
    for update in (1, 2, 3):
        metrics = learner.update(batch)
        after = snapshot()
        moved = any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
        assert moved == (update == 3), update
        assert ("actor_loss" in metrics) == (update == 3)
        before = after


def test_resume_continues_exactly_where_the_run_stopped(tmp_path):
    config = {**TOY, "total_steps": 600, "save_replay_buffer": True, "eval_episodes": 0}
    rlx.train("td3", "rlx-test/Target-v0", run_dir=tmp_path / "whole", **config)
    rlx.train(
        "td3", "rlx-test/Target-v0", run_dir=tmp_path / "parts", **{**config, "total_steps": 300}
    )
    rlx.train("td3", "rlx-test/Target-v0", run_dir=tmp_path / "parts", resume=True, total_steps=600)
    whole, parts = rlx.load(tmp_path / "whole").learner, rlx.load(tmp_path / "parts").learner
    for net in ("actor", "actor_target", "critic", "critic_target"):
        for a, b in zip(
            getattr(whole, net).state_dict().values(), getattr(parts, net).state_dict().values(),
            strict=True,
        ):  # fmt: skip
            torch.testing.assert_close(a, b)
    assert whole.critic_updates == parts.critic_updates


def test_discrete_actions_fail_before_training(tmp_path):
    with pytest.raises(EnvError, match="DQN or PPO"):
        rlx.train("td3", "rlx-test/DiscreteTarget-v0", run_dir=tmp_path / "r", total_steps=10)
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_unbounded_actions_get_a_clear_error(tmp_path):
    with pytest.raises(EnvError, match="unbounded actions"):
        rlx.train("td3", "rlx-test/Unbounded-v0", run_dir=tmp_path / "r", total_steps=10)


@pytest.mark.parametrize(
    ("field", "value"),
    [("policy_delay", 0), ("policy_noise", -0.1), ("tau", 1.5), ("learning_starts", -1)],
)
def test_bad_config_values_are_refused(field, value):
    with pytest.raises(ConfigError, match=field):
        TD3Config(**{field: value})


# ---------------------------------------------------------------------------- slow
def solved_at(run_dir, level: float = -200.0, window: int = 10) -> float:
    """The step at which the mean return of the last ``window`` training episodes first
    reaches ``level`` (inf: never)."""
    lines = (run_dir / "episodes.csv").read_text().splitlines()[1:]
    steps = np.array([float(line.split(",")[0]) for line in lines])
    returns = np.array([float(line.split(",")[2]) for line in lines])
    for end in range(window, len(returns) + 1):
        if returns[end - window : end].mean() >= level:
            return float(steps[end - 1])
    return float("inf")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_td3_solves_pendulum_within_20k_steps(tmp_path, seed):
    rlx.train("td3", "Pendulum-v1", run_dir=tmp_path / "r", seed=seed, eval_episodes=10)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    # "within 20k": the preset's budget, all of it spent (there is no early stop), and the
    # training episodes (200 steps each) already at the solved level before its end
    config = json.loads((tmp_path / "r" / "config.json").read_text())["config"]
    assert config["total_steps"] == summary["steps"] == 20_000
    assert solved_at(tmp_path / "r") < 20_000
    assert summary["eval_return_mean"] >= -200, summary


@pytest.mark.slow
def test_td3_mujoco_smoke(tmp_path):
    pytest.importorskip("mujoco")
    rlx.train(
        "td3", "HalfCheetah-v5", run_dir=tmp_path / "r", total_steps=10_000,
        learning_starts=5_000, eval_episodes=1,
    )  # fmt: skip
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "completed" and np.isfinite(summary["eval_return_mean"])
    assert _metrics(tmp_path / "r")[-1]["gradient_steps"] > 0
