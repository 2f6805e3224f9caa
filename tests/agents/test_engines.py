"""The seams the deep agents share: the Agent protocol, the final evaluation, the shared config
fields, renamed fields, env runners handed in as ``remote=`` (here without Ray), and
checkpoints written before the off-policy loops were one."""

from __future__ import annotations

import dataclasses
import functools
import json

import numpy as np
import pytest
import torch

import rlx
from rlx import registry
from rlx.agents.dqn import DQNConfig
from rlx.agents.ppo import PPOConfig
from rlx.agents.sac import SACConfig
from rlx.core.agent import EnvAgent
from rlx.core.buffers import ReplayBuffer
from rlx.core.envs import make_env
from rlx.core.evaluation import EVAL_SEED_OFFSET, final_evaluation
from rlx.core.seeding import runner_seeds
from rlx.core.transitions import clipped_rewards
from rlx.errors import ConfigError
from rlx.runs import load_checkpoint, save_checkpoint
from tests.agents import continuous_envs  # noqa: F401  (registers rlx-test/Target-v0)
from tests.agents.pg_helpers import interrupt_at, metric_rows, summary, train

TINY = {
    "dqn": ("CartPole-v1", {"total_steps": 300, "learning_starts": 100, "num_envs": 2}),
    "ppo": ("CartPole-v1", {"total_steps": 256, "num_envs": 2, "num_steps": 32,
                            "minibatch_size": 64}),
    "a2c": ("CartPole-v1", {"total_steps": 200, "num_envs": 2}),
    "reinforce": ("CartPole-v1", {"total_steps": 200, "num_envs": 2}),
    "sac": ("rlx-test/Target-v0", {"total_steps": 150, "learning_starts": 50, "batch_size": 16,
                                   "hidden_sizes": (8,)}),
    "td3": ("rlx-test/Target-v0", {"total_steps": 150, "learning_starts": 50, "batch_size": 16,
                                   "hidden_sizes": (8,)}),
}  # fmt: skip


# ---------------------------------------------------------------------------- the Agent protocol
@pytest.mark.parametrize("algo", sorted(TINY))
def test_every_deep_agent_is_an_env_agent_trained_and_loaded(algo, tmp_path):
    env, config = TINY[algo]
    trained = train(algo, env, tmp_path / "r", **config)
    loaded = rlx.load(tmp_path / "r")
    for agent in (trained, loaded):
        assert isinstance(agent, EnvAgent)
        assert agent.env_id == env and agent.run_dir == tmp_path / "r"
        assert agent.config == trained.config
    obs, _ = make_env(env).reset(seed=0)
    one = loaded.act(obs)
    many = loaded.act_batch(np.stack([obs, obs]))
    assert len(many) == 2 and np.array_equal(np.asarray(many[0]), np.asarray(one))


# ---------------------------------------------------------------------------- final evaluation
class FakeRun:
    def __init__(self, stop_requested: bool) -> None:
        self.stop_requested = stop_requested


def test_final_evaluation_seeds_from_the_offset_and_is_skipped_after_a_stop(tmp_path):
    agent = train("dqn", "CartPole-v1", tmp_path / "r", **TINY["dqn"][1])
    figures = final_evaluation(agent, "CartPole-v1", FakeRun(False), episodes=3, seed=5)
    stats = rlx.evaluate(agent, "CartPole-v1", episodes=3, seed=5 + EVAL_SEED_OFFSET)
    assert figures["eval_return_mean"] == stats.mean_return and figures["eval_episodes"] == 3
    assert final_evaluation(agent, "CartPole-v1", FakeRun(True), episodes=3, seed=5) == {}
    assert final_evaluation(agent, "CartPole-v1", FakeRun(False), episodes=0, seed=5) == {}


@pytest.mark.parametrize("algo", ["dqn", "ppo", "sac"])
def test_a_run_stopped_early_writes_no_evaluation(algo, tmp_path, monkeypatch):
    env, config = TINY[algo]
    logs_often = {} if algo == "ppo" else {"log_every": 50}
    interrupt_at(monkeypatch, 1)
    train(algo, env, tmp_path / "r", **config, **logs_often, eval_episodes=3)
    written = summary(tmp_path / "r")
    assert written["status"] == "interrupted" and "eval_return_mean" not in written


# ---------------------------------------------------------------------------- config fields
@pytest.mark.parametrize(
    ("config", "fields", "message"),
    [
        (SACConfig, {"learning_starts": 2_000, "buffer_size": 1_000}, "learning would never start"),
        (SACConfig, {"vectorization": "threads"}, "vectorization='threads' must be one of"),
        (PPOConfig, {"eval_episodes": -1}, "eval_episodes=-1 must be >= 0"),
        (DQNConfig, {"total_steps": 0}, "total_steps=0 must be >= 1"),
        (DQNConfig, {"learning_rate": 0.0}, "learning_rate=0.0 must be > 0"),
    ],
)
def test_the_shared_fields_are_checked_once_for_every_config(config, fields, message):
    with pytest.raises(ConfigError, match=message):
        config(**fields)


def test_shared_fields_come_first_and_keep_one_description():
    names = [f.name for f in dataclasses.fields(DQNConfig)]
    assert names[:4] == ["total_steps", "seed", "num_envs", "eval_episodes"]
    assert names.index("log_every") < names.index("learning_rate")
    assert SACConfig().eval_episodes == 10 and DQNConfig().eval_episodes == 20


@pytest.mark.parametrize(
    ("algo", "old", "new"),
    [
        ("dqn", {"lr": 3e-3, "lr_end": 0.0}, {"learning_rate": 3e-3, "learning_rate_end": 0.0}),
        ("sac", {"actor_lr": 1e-3, "critic_lr": 2e-3},
         {"actor_learning_rate": 1e-3, "critic_learning_rate": 2e-3}),
        ("td3", {"actor_lr": 1e-3, "critic_lr": 2e-3},
         {"actor_learning_rate": 1e-3, "critic_learning_rate": 2e-3}),
    ],
)  # fmt: skip
def test_a_config_recorded_with_the_old_step_size_names_still_loads(algo, old, new):
    config = registry.config_from_record(registry.get(algo), {"seed": 3, **old})
    assert config.seed == 3
    assert {name: getattr(config, name) for name in new} == new


# ---------------------------------------------------------------------------- env runners, no Ray
class InProcessRunners:
    """:class:`rlx.core.runners.EnvRunners` that builds every worker in this process."""

    def __init__(self) -> None:
        self.groups: list[InProcessGroup] = []

    def start(self, worker, options, *, count, seed, start_step, address):
        workers = [worker(s, **options) for s in runner_seeds(seed, count, start_step)]
        self.groups.append(InProcessGroup(workers))
        return self.groups[-1]


class InProcessGroup:
    def __init__(self, workers) -> None:
        self.workers, self.closed = workers, False

    def run_some(self, payload):
        return [worker.collect(payload) for worker in self.workers], set()

    def stats(self):
        return {"runner_restarts": 0.0}

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def in_process_runners(monkeypatch) -> InProcessRunners:
    """``rlx.train(..., runners=K)`` with the runners built in this process instead of Ray."""
    import rlx.distributed

    runners = InProcessRunners()
    monkeypatch.setattr(
        rlx.distributed, "scaled_out", lambda spec: functools.partial(spec.train, remote=runners)
    )
    return runners


def test_dqn_collects_through_the_runner_seam(tmp_path, in_process_runners):
    train("dqn", "CartPole-v1", tmp_path / "r", total_steps=1_000, runners=2, num_envs=2,
          runner_steps=8, learning_starts=100, log_every=250, n_step=3,
          normalize_obs=True)  # fmt: skip
    (group,) = in_process_runners.groups
    assert len(group.workers) == 2 and group.closed
    rows = metric_rows(tmp_path / "r")
    steps = [row["step"] for row in rows]
    assert steps[-1] >= 1_000 and all(np.diff(steps) > 0)
    assert all("loss" in row and row["gradient_steps"] > 0 for row in rows[1:])
    assert rows[-1]["runner_restarts"] == 0.0 and "epsilon" in rows[-1]
    ends = np.loadtxt(tmp_path / "r" / "episodes.csv", delimiter=",", skiprows=1, ndmin=2)
    assert len(ends) > 5 and np.all(np.diff(ends[:, 0]) >= 0) and ends[:, 3].sum() <= steps[-1]
    agent = rlx.load(tmp_path / "r")  # the observation statistics came back from the runners
    assert agent.learner.obs_norm.rms.count > 900


def test_ppo_collects_through_the_runner_seam(tmp_path, in_process_runners):
    train("ppo", "CartPole-v1", tmp_path / "r", total_steps=1_024, runners=2, num_envs=2,
          num_steps=16, minibatch_size=32, num_epochs=2)  # fmt: skip
    (group,) = in_process_runners.groups
    assert len(group.workers) == 2 and group.closed
    steps = np.array([row["step"] for row in metric_rows(tmp_path / "r")])
    assert np.all(np.diff(steps, prepend=0) <= 2 * 2 * 16) and steps[-1] >= 1_024


def test_runners_without_the_seam_are_a_clear_error(tmp_path):
    from rlx.agents.dqn import train as train_dqn

    class NoRun:
        env_id, resumed_state = "CartPole-v1", None

    with pytest.raises(ConfigError, match="runners=2 needs the Ray env runners"):
        train_dqn(DQNConfig(runners=2), "CartPole-v1", NoRun())


# ---------------------------------------------------------------------------- pieces
def test_clipped_rewards_are_float32_within_the_bound():
    rewards = np.array([-3.0, 0.25, 7.0])
    assert clipped_rewards(rewards, None).dtype == np.float32
    assert clipped_rewards(rewards, 1.0).tolist() == [-1.0, 0.25, 1.0]


def test_ending_episodes_at_a_cut_truncates_the_last_stored_transition_of_a_column():
    buffer = ReplayBuffer(8, (1,), num_envs=2)
    zeros, no = np.zeros((2, 1), np.float32), np.zeros(2, bool)
    for _ in range(3):
        buffer.add(zeros, np.zeros(2, np.int64), np.ones(2), zeros, no, no,
                   where=np.array([True, False]))  # fmt: skip
    buffer.end_episodes(np.array([0, 1]))  # column 1 holds nothing: nothing to cut
    assert buffer.truncated[:, 0].tolist() == [False, False, True, False]
    assert not buffer.truncated[:, 1].any()


# ---------------------------------------------------------------------------- older checkpoints
def as_written_before(state: dict) -> dict:
    """A DQN checkpoint as the DQN loop wrote it before the off-policy loops were one: the
    envs under ``collection`` (``envs``) and ``torch.optim.Adam``'s optimizer state."""
    old = {k: v for k, v in state.items() if k not in ("collector", "gradient_steps", "spec")}
    collector = dict(state["collector"])
    old["collection"] = {"envs": collector.pop("env"), **collector}
    adam = state["learner"]["optimizer"]
    params = list(range(len(adam["exp_avg"])))
    old["learner"] = {**state["learner"], "optimizer": {
        "state": {i: {"step": adam["steps"][i], "exp_avg": adam["exp_avg"][i],
                      "exp_avg_sq": adam["exp_avg_sq"][i]} for i in params},
        "param_groups": [{"lr": adam["lr"], "params": params}],
    }}  # fmt: skip
    return old


def test_a_dqn_checkpoint_of_the_earlier_layout_resumes_exactly(tmp_path, monkeypatch):
    config = {"total_steps": 1_200, "learning_starts": 100, "num_envs": 2, "log_every": 200,
              "save_replay_buffer": True, "eval_episodes": 0, "seed": 2}  # fmt: skip
    whole = train("dqn", "CartPole-v1", tmp_path / "whole", **config)
    with monkeypatch.context() as patch:
        interrupt_at(patch, 600)
        train("dqn", "CartPole-v1", tmp_path / "cut", **config)
    step, state = load_checkpoint(tmp_path / "cut")
    save_checkpoint(tmp_path / "cut", step, as_written_before(state))
    assert "collection" in load_checkpoint(tmp_path / "cut")[1]
    resumed = rlx.train("dqn", "CartPole-v1", run_dir=tmp_path / "cut", resume=True,
                        progress=False)  # fmt: skip
    for a, b in zip(whole.learner.online.parameters(), resumed.learner.online.parameters(),
                    strict=True):  # fmt: skip
        assert torch.equal(a, b)
    record = json.loads((tmp_path / "cut" / "summary.json").read_text())
    assert (
        record["status"] == "completed" and record["steps"] == summary(tmp_path / "whole")["steps"]
    )
