"""DQN: config validation, learning on a chain, Double vs vanilla overestimation, resume, NaN."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import rlx
from rlx.agents.dqn import PRESETS, DQNAgent, DQNConfig
from rlx.cli import main
from rlx.errors import ConfigError, EnvError, TrainingError
from rlx.runs import load_checkpoint
from tests.toy_envs import ChainEnv, NoisyBanditEnv

# small and quick: the chain is solved in a few thousand steps
CHAIN = dict(
    gamma=0.9,
    total_steps=4000,
    num_envs=4,
    learning_starts=200,
    learning_rate=3e-3,
    train_freq=2,
    sync_every=100,
    exploration_fraction=0.5,
    batch_size=64,
    eval_episodes=5,
    log_every=500,
)


def metrics(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def parameters(agent: DQNAgent) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in agent.learner.online.parameters()])


# ---------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"buffer_size": 32, "batch_size": 64}, "buffer_size=32 is smaller than batch_size=64"),
        ({"gamma": 1.5}, r"gamma=1.5 must be in \[0.0, 1.0\]"),
        ({"gamma": -0.1}, r"gamma=-0.1 must be in \[0.0, 1.0\]"),
        ({"num_envs": 0}, "num_envs=0 must be >= 1"),
        ({"tau": 0.0}, r"tau=0.0 must be in \(0, 1\]"),
        ({"learning_starts": 10**6}, "learning would never start"),
        ({"loss": "l1"}, "loss='l1'"),
        ({"hidden_sizes": ()}, "hidden_sizes"),
    ],
)
def test_bad_config_values_name_the_value_and_the_valid_range(fields, message):
    with pytest.raises(ConfigError, match=message):
        DQNConfig(**fields)


def test_defaults_follow_the_cheat_sheet():
    config = DQNConfig()
    assert config.gamma == 0.99 and config.double
    assert (config.epsilon_start, config.epsilon_end, config.exploration_fraction) == (
        1.0,
        0.01,
        0.1,
    )


def test_box_action_space_fails_before_training_and_suggests_other_methods(tmp_path):
    with pytest.raises(EnvError) as info:
        rlx.train("dqn", "Pendulum-v1", run_dir=tmp_path / "r", total_steps=100)
    message = str(info.value)
    assert "Pendulum-v1" in message and "Box(" in message
    assert "SAC, TD3 or PPO" in message
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_cli_user_errors_are_one_line(tmp_path, capsys):
    code = main(
        ["train", "dqn", "--env", "CartPole-v1", "--gamma", "1.5", "--run-dir", str(tmp_path / "r")]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "gamma=1.5" in err and len(err.splitlines()) == 1


def test_help_lists_fields_and_the_cartpole_preset(capsys):
    with pytest.raises(SystemExit):
        main(["train", "dqn", "--help"])
    out = capsys.readouterr().out
    assert "CartPole-v1" in out and "--double" in out and "--sync-every" in out
    assert "--save-replay-buffer" in out


# ---------------------------------------------------------------------------- learning
def test_dqn_learns_the_chain_values_and_policy(tmp_path, train_seed):
    agent = rlx.train("dqn", "rlx-test/Chain-v0", run_dir=tmp_path / "r", seed=train_seed, **CHAIN)
    q = agent.q_values(np.eye(8, dtype=np.float32))
    q_star = ChainEnv.optimal_q(8, CHAIN["gamma"])
    # every state: go right; and the values themselves, within 0.05 of Q* (a DQN that
    # bootstraps through the terminal, drops gamma or mixes up actions misses by far more)
    assert q.argmax(axis=1).tolist() == [1] * 8
    assert np.abs(q - q_star).max() < 0.05
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["eval_return_mean"] == 1.0 and summary["status"] == "completed"
    logged = metrics(tmp_path / "r")[-1]
    for name in ("q_mean", "td_error", "loss", "epsilon", "episode_return", "grad_norm",
                 "mc_return", "q_start"):  # fmt: skip
        assert name in logged


def test_double_dqn_overestimates_less_than_vanilla_on_noisy_rewards(tmp_path, train_seed):
    # every action pays N(-0.05, 1): Q* < 0 everywhere, so max over noisy estimates is biased
    config = dict(
        total_steps=8000, num_envs=4, learning_starts=500, learning_rate=3e-3, train_freq=2,
        sync_every=200, exploration_fraction=0.2, batch_size=32, eval_episodes=0,
        log_every=200,
    )  # fmt: skip
    gaps = {}
    for double in (False, True):
        run_dir = tmp_path / f"double-{double}"
        rlx.train(
            "dqn",
            NoisyBanditEnv(n_actions=16),
            run_dir=run_dir,
            seed=train_seed,
            double=double,
            **config,
        )
        rows = metrics(run_dir)[len(metrics(run_dir)) // 2 :]  # the second half of training

        def mean(key, rows=rows):
            return np.mean([r[key] for r in rows if key in r])

        gaps[double] = (mean("q_mean") - mean("mc_return"), mean("q_start") - mean("mc_return"))
    # same seed, same reward stream: the observed returns are equal, the estimates are not
    assert gaps[False][0] > 0.2 and gaps[False][1] > 0.2  # vanilla DQN overestimates
    assert gaps[True][0] < gaps[False][0] - 0.15
    assert gaps[True][1] < gaps[False][1] - 0.15


# ---------------------------------------------------------------------------- load, eval
def test_load_gives_the_greedy_agent_and_evaluate_runs_batched(tmp_path, train_seed):
    trained = rlx.train(
        "dqn", "rlx-test/Chain-v0", run_dir=tmp_path / "r", seed=train_seed, **CHAIN
    )
    agent = rlx.load(tmp_path / "r")
    assert torch.equal(parameters(agent), parameters(trained))
    obs = np.eye(8, dtype=np.float32)[3]
    assert agent.act(obs) == 1
    assert agent.act_batch(np.eye(8, dtype=np.float32)).tolist() == [1] * 8
    stats = rlx.evaluate(agent, "rlx-test/Chain-v0", episodes=7)
    assert stats.episodes == 7 and stats.mean_return == 1.0


def test_cli_train_then_eval(tmp_path, capsys):
    run_dir = tmp_path / "cp"
    args = ["train", "dqn", "--env", "CartPole-v1", "--total-steps", "800", "--learning-starts",
            "200", "--eval-episodes", "2", "--run-dir", str(run_dir)]  # fmt: skip
    assert main(args) == 0
    record = json.loads((run_dir / "config.json").read_text())
    assert record["preset"] == "CartPole-v1"
    assert record["config"]["num_envs"] == PRESETS["CartPole-v1"]["num_envs"]
    assert main(["eval", str(run_dir), "--episodes", "3"]) == 0
    assert "over 3 episodes" in capsys.readouterr().out


def test_observation_normalisation_travels_with_the_checkpoint(tmp_path):
    trained = rlx.train(
        "dqn", "CartPole-v1", run_dir=tmp_path / "r", total_steps=600, learning_starts=100,
        normalize_obs=True, scale_rewards=True, eval_episodes=0, num_envs=2,
    )  # fmt: skip
    loaded = rlx.load(tmp_path / "r")
    before, after = trained.learner.obs_norm.rms, loaded.learner.obs_norm.rms
    assert before.count > 500 and np.array_equal(before.mean, after.mean)
    assert np.array_equal(before.var, after.var)
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    assert np.array_equal(trained.q_values(obs), loaded.q_values(obs))


# ---------------------------------------------------------------------------- resume
def stop_at(monkeypatch, step: int) -> None:
    """Ask the run to stop (as Ctrl-C does) once it has logged ``step``."""
    from rlx.runs.run import Run

    original = Run.log

    def log(self, at, values):
        out = original(self, at, values)
        if at >= step:
            self.stop_requested = True
        return out

    monkeypatch.setattr(Run, "log", log)


def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, monkeypatch):
    config = dict(CHAIN, total_steps=3000, save_replay_buffer=True, eval_episodes=0)
    whole = rlx.train("dqn", "rlx-test/Chain-v0", run_dir=tmp_path / "whole", seed=3, **config)
    with monkeypatch.context() as patch:
        stop_at(patch, 1500)
        rlx.train("dqn", "rlx-test/Chain-v0", run_dir=tmp_path / "cut", seed=3, **config)
    step, _ = load_checkpoint(tmp_path / "cut")
    assert 1500 <= step < 3000
    assert json.loads((tmp_path / "cut" / "summary.json").read_text())["status"] == "interrupted"
    resumed = rlx.train("dqn", "rlx-test/Chain-v0", run_dir=tmp_path / "cut", resume=True)
    assert torch.equal(parameters(resumed), parameters(whole))
    rows = metrics(tmp_path / "cut")
    assert [r["step"] for r in rows] == sorted(r["step"] for r in rows)
    assert json.loads((tmp_path / "cut" / "summary.json").read_text())["steps"] >= 3000


def test_resume_without_the_replay_buffer_continues_from_the_checkpoint(tmp_path, monkeypatch):
    config = dict(CHAIN, total_steps=3000, eval_episodes=0)
    with monkeypatch.context() as patch:
        stop_at(patch, 1000)
        cut = rlx.train("dqn", "rlx-test/Chain-v0", run_dir=tmp_path / "r", seed=1, **config)
    step, state = load_checkpoint(tmp_path / "r")
    assert "replay" not in state
    resumed = rlx.train("dqn", "rlx-test/Chain-v0", run_dir=tmp_path / "r", resume=True)
    assert not torch.equal(parameters(resumed), parameters(cut))  # it kept learning
    later = [r["step"] for r in metrics(tmp_path / "r") if r["step"] > step]
    assert later and min(later) <= step + CHAIN["log_every"] + CHAIN["num_envs"]
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["status"] == "completed"


# ---------------------------------------------------------------------------- NaN
def test_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setattr("rlx.runs.run.CHECKPOINT_EVERY_S", 0.0)  # checkpoint at every log
    run_dir = tmp_path / "r"
    with pytest.raises(TrainingError, match=r"nan|NaN"):
        rlx.train(
            "dqn", "rlx-test/NaNAfter-v0", run_dir=run_dir, total_steps=5000,
            learning_starts=200, log_every=250, num_envs=1, eval_episodes=0,
        )  # fmt: skip
    step, state = load_checkpoint(run_dir)
    assert 0 < step <= 1500  # rewards turn NaN after 1500 steps
    for tensor in state["learner"]["online"].values():
        assert torch.isfinite(tensor).all()
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "failed"
    agent = rlx.load(run_dir)
    assert np.isfinite(agent.q_values(np.zeros((1, 1), dtype=np.float32))).all()


def test_config_round_trips_through_config_json(tmp_path):
    rlx.train("dqn", "rlx-test/Chain-v0", run_dir=tmp_path / "r", **dict(CHAIN, total_steps=300))
    record = json.loads((tmp_path / "r" / "config.json").read_text())
    config = DQNConfig(**record["config"])
    assert dataclasses.asdict(config) == dataclasses.asdict(
        DQNConfig(**dict(CHAIN, total_steps=300))
    )


def test_acting_in_numpy_gives_torchs_q_values_and_follows_the_optimizer():
    """EpsilonGreedy's numpy forward (a plain MLP on the CPU) reads the parameters in place:
    its Q values are torch's, before and after a gradient step and a load_state_dict; a
    dueling network keeps torch's forward."""
    from rlx.agents.dqn import EpsilonGreedy
    from rlx.core.nets import QNetwork

    torch.manual_seed(0)
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    q = QNetwork((4,), np.float32, 3, (16, 16))
    policy = EpsilonGreedy(q, 3, None)
    assert policy._numpy_forward() is not None

    def torch_q() -> np.ndarray:
        with torch.no_grad():
            return q(torch.from_numpy(obs)).numpy()

    np.testing.assert_allclose(policy.q_values(obs), torch_q(), rtol=1e-5, atol=1e-6)
    optimizer = torch.optim.Adam(q.parameters(), lr=0.1)
    q(torch.from_numpy(obs)).sum().backward()
    optimizer.step()
    np.testing.assert_allclose(policy.q_values(obs), torch_q(), rtol=1e-5, atol=1e-6)
    other = QNetwork((4,), np.float32, 3, (16, 16))
    q.load_state_dict(other.state_dict())
    np.testing.assert_allclose(policy.q_values(obs), torch_q(), rtol=1e-5, atol=1e-6)
    actions, values = policy.act(obs, 0.0, np.random.default_rng(0))
    assert actions.tolist() == torch_q().argmax(1).tolist()
    np.testing.assert_allclose(values, torch_q().max(1), rtol=1e-5, atol=1e-6)
    assert (
        EpsilonGreedy(QNetwork((4,), np.float32, 3, dueling=True), 3, None)._numpy_forward() is None
    )
