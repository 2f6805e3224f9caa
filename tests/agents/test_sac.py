"""SAC: learns a known optimal action, logs its metrics, resumes exactly, refuses bad input.

Slow (``-m slow``): Pendulum-v1 to an evaluation mean of -200 within 20,000 steps for two
seeds; a 10,000-step HalfCheetah-v5 smoke run when MuJoCo is installed.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
import torch

import rlx
from rlx.agents.sac import SACConfig
from rlx.errors import ConfigError, EnvError
from tests.agents import continuous_envs  # noqa: F401  (registers rlx-test/Target-v0)
from tests.conftest import RLX

# a small, quick configuration for the one-step Target env (Q(s, a) is the reward itself)
TOY = {
    "total_steps": 800,
    "learning_starts": 100,
    "batch_size": 64,
    "hidden_sizes": (32, 32),
    "actor_learning_rate": 3e-3,
    "critic_learning_rate": 3e-3,
    "alpha": 0.05,
    "log_every": 250,
    "eval_episodes": 50,
}


def _metrics(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_sac_learns_the_best_action_of_a_contextual_bandit(tmp_path, train_seed):
    # random actions earn about -1.7, the best constant action -0.75; only a policy that
    # reads the state and maps [-1, 1] onto the off-centre box [0, 4] gets near 0
    rlx.train("sac", "rlx-test/Target-v0", run_dir=tmp_path / "r", seed=train_seed, **TOY)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["eval_return_mean"] > -0.05

    agent = rlx.load(tmp_path / "r")
    for s in (-0.8, 0.0, 0.6):
        action = agent.act(np.array([s], dtype=np.float32))
        assert action.shape == (1,)
        assert action[0] == pytest.approx(2.0 + 1.5 * s, abs=0.25)
    # deterministic by default: the same observation gives the same action
    obs = np.array([0.3], dtype=np.float32)
    assert agent.act(obs) == agent.act(obs)


def test_sac_logs_its_metrics_and_tunes_alpha(tmp_path, train_seed):
    rlx.train(
        "sac",
        "rlx-test/Target-v0",
        run_dir=tmp_path / "r",
        **{**TOY, "total_steps": 600},
        seed=train_seed,
    )
    rows = _metrics(tmp_path / "r")
    last = rows[-1]
    for name in ("critic_loss", "actor_loss", "q_mean", "td_error", "entropy", "alpha",
                 "episode_return", "mc_return", "q_start", "gradient_steps"):  # fmt: skip
        assert name in last, name
    assert last["gradient_steps"] == 600 - TOY["learning_starts"] + 1
    assert last["alpha"] != pytest.approx(TOY["alpha"])  # autotune moved it
    # one-step episodes: the discounted return is the reward, and Q(s0, a0) estimates it
    assert abs(last["q_start"] - last["mc_return"]) < 0.5


def test_fixed_alpha_stays_fixed(tmp_path):
    rlx.train(
        "sac", "rlx-test/Target-v0", run_dir=tmp_path / "r",
        **{**TOY, "total_steps": 400, "autotune": False, "eval_episodes": 0},
    )  # fmt: skip
    alphas = [row["alpha"] for row in _metrics(tmp_path / "r") if "alpha" in row]
    assert alphas and alphas == pytest.approx([0.05] * len(alphas))


def test_resume_continues_exactly_where_the_run_stopped(tmp_path):
    # with the replay buffer in the checkpoint, 300 steps + 300 resumed = 600 uninterrupted
    config = {**TOY, "total_steps": 600, "save_replay_buffer": True, "eval_episodes": 0}
    rlx.train("sac", "rlx-test/Target-v0", run_dir=tmp_path / "whole", **config)
    rlx.train(
        "sac", "rlx-test/Target-v0", run_dir=tmp_path / "parts", **{**config, "total_steps": 300}
    )
    rlx.train("sac", "rlx-test/Target-v0", run_dir=tmp_path / "parts", resume=True, total_steps=600)
    whole, parts = rlx.load(tmp_path / "whole"), rlx.load(tmp_path / "parts")
    for a, b in zip(
        whole.learner.actor.state_dict().values(),
        parts.learner.actor.state_dict().values(),
        strict=True,
    ):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(whole.learner.log_alpha, parts.learner.log_alpha)
    assert json.loads((tmp_path / "parts" / "summary.json").read_text())["steps"] == 600


def test_discrete_actions_fail_before_training_with_a_pointer_to_dqn_or_ppo(tmp_path):
    result = subprocess.run(
        [*RLX, "train", "sac", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "DQN or PPO" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_unbounded_actions_get_a_clear_error(tmp_path):
    with pytest.raises(EnvError, match="unbounded actions"):
        rlx.train("sac", "rlx-test/Unbounded-v0", run_dir=tmp_path / "r", total_steps=10)


@pytest.mark.parametrize(
    ("field", "value"),
    [("tau", 0.0), ("gamma", 1.5), ("batch_size", 0), ("alpha", 0.0), ("hidden_sizes", ())],
)
def test_bad_config_values_are_refused(field, value):
    with pytest.raises(ConfigError, match=field):
        SACConfig(**{field: value})


def test_the_pendulum_preset_is_recorded(tmp_path):
    rlx.train("sac", "Pendulum-v1", run_dir=tmp_path / "r", total_steps=200, eval_episodes=0)
    record = json.loads((tmp_path / "r" / "config.json").read_text())
    assert record["preset"] == "Pendulum-v1"
    assert record["config"]["hidden_sizes"] == [64, 64]


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
def test_sac_solves_pendulum_within_20k_steps(tmp_path, seed):
    rlx.train("sac", "Pendulum-v1", run_dir=tmp_path / "r", seed=seed, eval_episodes=10)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    # "within 20k": the preset's budget, all of it spent (there is no early stop), and the
    # training episodes (200 steps each) already at the solved level before its end
    config = json.loads((tmp_path / "r" / "config.json").read_text())["config"]
    assert config["total_steps"] == summary["steps"] == 20_000
    assert solved_at(tmp_path / "r") < 20_000
    assert summary["eval_return_mean"] >= -200, summary


@pytest.mark.slow
def test_sac_mujoco_smoke(tmp_path):
    pytest.importorskip("mujoco")
    rlx.train(
        "sac", "HalfCheetah-v5", run_dir=tmp_path / "r", total_steps=10_000,
        learning_starts=5_000, eval_episodes=1,
    )  # fmt: skip
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "completed" and np.isfinite(summary["eval_return_mean"])
    assert _metrics(tmp_path / "r")[-1]["gradient_steps"] > 0
