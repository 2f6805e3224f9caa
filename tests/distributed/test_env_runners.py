"""Ray env runners (local Ray, 2 CPUs, in a private network namespace): learning, faults,
seeds, resume, and the CLI's own Ray start and stop."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import rlx
from rlx.core.envs import env_spaces
from rlx.core.policies import ActorCritic
from rlx.core.rollouts import RolloutWorker
from rlx.distributed.env_runners import RUNNER_NODES, RUNNER_RESTARTS, RunnerPool
from tests.agents.pg_helpers import interrupt_at, last_returns, metric_rows, summary, train
from tests.conftest import RLX

pytestmark = pytest.mark.ray

CARTPOLE_OPTIONS = {"env": "CartPole-v1", "num_envs": 2, "num_steps": 16, "algo": "PPO",
                    "env_id": "CartPole-v1", "normalize_obs": False,
                    "reward_scale_gamma": None}  # fmt: skip


def cartpole_policy() -> ActorCritic:
    from rlx.core.policies import describe_action_space

    _, action_space = env_spaces("CartPole-v1")
    torch.manual_seed(0)
    return ActorCritic(4, describe_action_space(action_space, "PPO", "CartPole-v1"), (16,))


def one_round(seed: int, policy: ActorCritic) -> list:
    options = {**CARTPOLE_OPTIONS, "architecture": policy.architecture}
    pool = RunnerPool(RolloutWorker, options, 2, seed)
    try:
        return pool.run({"policy": policy.state_dict(), "normalizer": None})
    finally:
        pool.close()


def episodes_csv(run_dir: Path) -> np.ndarray:
    lines = (run_dir / "episodes.csv").read_text().splitlines()[1:]
    return np.array([[float(x) for x in line.split(",")] for line in lines])


def kill_runner_at_round(monkeypatch, round_number: int, slot: int = 0) -> list[int]:
    """Kill runner ``slot`` as its ``round_number``-th round begins, as a crash would."""
    rounds = []
    run = RunnerPool.run

    def run_with_a_crash(self, *args, **kwargs):
        rounds.append(1)
        if len(rounds) == round_number:
            self.kill(slot)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(RunnerPool, "run", run_with_a_crash)
    return rounds


# ---------------------------------------------------------------------------- seeds
def test_runners_collect_different_episodes_and_the_seed_repeats_them():
    policy = cartpole_policy()
    a0, a1 = one_round(0, policy)
    assert not np.array_equal(a0.obs, a1.obs)  # two runners, two streams of episodes
    b0, b1 = one_round(0, policy)
    for name in ("obs", "actions", "rewards", "terminated", "truncated", "valid"):
        np.testing.assert_array_equal(getattr(a0, name), getattr(b0, name))
        np.testing.assert_array_equal(getattr(a1, name), getattr(b1, name))


def test_same_seed_same_run(tmp_path):
    cfg = {"runners": 2, "num_envs": 2, "num_steps": 16, "minibatch_size": 32, "num_epochs": 2,
           "total_steps": 1024, "seed": 3}  # fmt: skip
    train("ppo", "CartPole-v1", tmp_path / "a", **cfg)
    train("ppo", "CartPole-v1", tmp_path / "b", **cfg)
    assert metric_rows(tmp_path / "a") == metric_rows(tmp_path / "b")
    np.testing.assert_array_equal(
        episodes_csv(tmp_path / "a")[:, [0, 2, 3]], episodes_csv(tmp_path / "b")[:, [0, 2, 3]]
    )


# ---------------------------------------------------------------------------- learning
def test_ppo_with_two_runners_learns_cartpole(tmp_path):
    """The single-process test's threshold (tests/agents/test_ppo.py::test_learns_cartpole_fast:
    the last 10 training episodes average >= 100 after 20k steps), with the CartPole preset's
    8 x 32 rollout collected by 2 runners of 4 copies each."""
    train("ppo", "CartPole-v1", tmp_path / "run", total_steps=20_000, seed=0, runners=2,
          num_envs=4)  # fmt: skip
    assert last_returns(tmp_path / "run", 10).mean() >= 100
    rows = metric_rows(tmp_path / "run")
    steps = np.array([row["step"] for row in rows])
    assert np.all(np.diff(steps) > 0) and np.all(np.diff(steps) <= 256)
    assert summary(tmp_path / "run")["steps"] == steps[-1] >= 20_000
    assert all(row[RUNNER_RESTARTS] == 0 and row[RUNNER_NODES] == 1 for row in rows)
    ends = episodes_csv(tmp_path / "run")
    # every step is counted once: the episodes' lengths add up to at most the steps taken
    assert ends[:, 3].sum() <= steps[-1] and np.all(np.diff(ends[:, 0]) >= 0)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow),
                                  pytest.param(2, marks=pytest.mark.slow)])  # fmt: skip
def test_ppo_with_two_runners_solves_cartpole_within_100k_steps(tmp_path, seed):
    """tests/agents/test_ppo.py::test_solves_cartpole_within_100k_steps (slow there: seeds 0-2)
    with 2 runners; seed 0 takes about 15 s here, so it runs with the fast tests."""
    agent = train("ppo", "CartPole-v1", tmp_path / "run", total_steps=100_000, seed=seed,
                  runners=2, num_envs=4)  # fmt: skip
    stats = rlx.evaluate(agent, "CartPole-v1", episodes=20, seed=1000 + seed)
    assert stats.mean_return >= 475, stats


def test_a2c_with_runners_counts_every_step(tmp_path):
    train("a2c", "CartPole-v1", tmp_path / "run", total_steps=2_000, runners=2, num_envs=4)
    rows = metric_rows(tmp_path / "run")
    steps = [row["step"] for row in rows]
    assert steps[0] <= 40 and np.all(np.diff(steps) > 0) and np.all(np.diff(steps) <= 40)
    assert summary(tmp_path / "run")["status"] == "completed"
    assert len(episodes_csv(tmp_path / "run")) > 20


# ---------------------------------------------------------------------------- faults
def test_a_killed_runner_is_restarted_and_the_run_completes(tmp_path, monkeypatch, capfd):
    kill_runner_at_round(monkeypatch, round_number=4, slot=1)
    train("ppo", "CartPole-v1", tmp_path / "run", total_steps=4096, seed=0, runners=2,
          num_envs=4, num_steps=32, minibatch_size=128, num_epochs=2)  # fmt: skip
    assert summary(tmp_path / "run")["status"] == "completed"
    assert "Ray env runner 1 died (ActorDiedError); restarted it" in capfd.readouterr().err
    rows = metric_rows(tmp_path / "run")
    steps = np.array([row["step"] for row in rows])
    increments = np.diff(steps, prepend=0)
    # no gap: a row per update, the dropped fragment's steps never counted
    assert np.all(increments > 0) and np.all(increments <= 256)
    assert increments[3] <= 128  # the round with the crash: one runner's fragment only
    assert [row[RUNNER_RESTARTS] for row in rows[:3]] == [0, 0, 0]
    assert all(row[RUNNER_RESTARTS] == 1 for row in rows[3:])
    assert summary(tmp_path / "run")["steps"] == steps[-1] >= 4096
    assert episodes_csv(tmp_path / "run")[:, 0].max() <= steps[-1]


def test_dqn_runners_feed_the_replay_buffer_survive_a_crash_and_resume(
    tmp_path, monkeypatch, capfd
):
    with monkeypatch.context() as patch:
        kill_runner_at_round(patch, round_number=5, slot=0)
        train("dqn", "CartPole-v1", tmp_path / "run", total_steps=3_000, runners=2,
              num_envs=2, runner_steps=16, learning_starts=200, log_every=500, n_step=3,
              save_replay_buffer=True)  # fmt: skip
    assert summary(tmp_path / "run")["status"] == "completed"
    assert "Ray env runner 0 died" in capfd.readouterr().err
    rows = metric_rows(tmp_path / "run")
    assert rows[-1]["step"] >= 3_000 and rows[-1][RUNNER_RESTARTS] == 1
    assert all("loss" in row for row in rows[1:])  # the gradient steps ran
    assert np.isfinite(rows[-1]["q_mean"]) and "mc_return" in rows[-1]
    ends = episodes_csv(tmp_path / "run")
    assert len(ends) > 20 and np.all(np.diff(ends[:, 0]) >= 0)
    # a resume with one runner: the saved replay buffer's 4 columns no longer fit its 2
    rlx.train("dqn", "CartPole-v1", run_dir=tmp_path / "run", resume=True, progress=False,
              runners=1, total_steps=4_000)  # fmt: skip
    assert "starting with an empty replay buffer" in capfd.readouterr().err
    assert summary(tmp_path / "run")["status"] == "completed"
    assert metric_rows(tmp_path / "run")[-1]["step"] >= 4_000


def test_resume_with_another_number_of_runners(tmp_path, monkeypatch):
    cfg = {"num_envs": 4, "num_steps": 32, "minibatch_size": 128, "num_epochs": 2,
           "total_steps": 3072}  # fmt: skip
    with monkeypatch.context() as patch:
        interrupt_at(patch, 1024)
        train("ppo", "CartPole-v1", tmp_path / "run", runners=2, **cfg)
    cut = summary(tmp_path / "run")
    assert cut["status"] == "interrupted" and cut["steps"] < 3072
    rlx.train("ppo", "CartPole-v1", run_dir=tmp_path / "run", resume=True, progress=False,
              runners=1)  # fmt: skip
    assert summary(tmp_path / "run")["status"] == "completed"
    rows = metric_rows(tmp_path / "run")
    steps = np.array([row["step"] for row in rows])
    assert np.all(np.diff(steps) > 0) and steps[-1] >= 3072
    after = np.diff(steps[steps > cut["steps"]])
    assert np.all(after <= 128)  # one runner of 4 copies now
    # and a Ray run's checkpoint resumes in one process too
    rlx.train("ppo", "CartPole-v1", run_dir=tmp_path / "run", resume=True, progress=False,
              runners=None, total_steps=4096)  # fmt: skip
    assert summary(tmp_path / "run")["steps"] >= 4096


# A learner that trains PPO with 2 Ray runners, checkpointing every half second, until killed.
LEARNER = """
import sys
import rlx
import rlx.runs.run
rlx.runs.run.CHECKPOINT_EVERY_S = 0.5
rlx.train("ppo", "CartPole-v1", run_dir=sys.argv[1], progress=False, runners=2, num_envs=4,
          num_steps=32, minibatch_size=128, num_epochs=2, total_steps=10**7)
"""


def test_a_killed_learner_leaves_its_checkpoint_and_resumes_with_other_runners(tmp_path):
    """SIGKILL the learner process (and its own Ray) mid-run: the last checkpoint and the logs
    survive, and --resume continues from that checkpoint with one runner."""
    import signal
    import time

    run_dir = tmp_path / "run"
    env = {**os.environ, "RAY_ADDRESS": ""}  # its own Ray, not the test session's
    learner = subprocess.Popen([RLX[0], "-c", LEARNER, str(run_dir)], env=env,
                               start_new_session=True, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and learner.poll() is None:
            checkpoints = list((run_dir / "checkpoints").glob("step_*"))
            if len(checkpoints) >= 2:
                break
            time.sleep(0.2)
        assert learner.poll() is None, learner.stderr.read().decode()[-2000:]
        assert len(checkpoints) >= 2, "no checkpoints within 2 minutes"
    finally:
        os.killpg(learner.pid, signal.SIGKILL)  # the learner and the Ray it started
        learner.wait(timeout=30)
    assert not (run_dir / "summary.json").exists()  # a crash: nothing written at the end
    kept = rlx.runs.load_checkpoint(run_dir)[0]
    logged = metric_rows(run_dir)[-1]["step"]
    assert kept > 0 and logged >= kept

    rlx.train("ppo", "CartPole-v1", run_dir=run_dir, resume=True, progress=False, runners=1,
              total_steps=kept + 1024)  # fmt: skip
    assert summary(run_dir)["status"] == "completed"
    steps = np.array([row["step"] for row in metric_rows(run_dir)])
    assert np.all(np.diff(steps) > 0) and steps[-1] >= kept + 1024  # rows after kept replaced
    assert np.all(np.diff(steps[steps > kept]) <= 128)  # one runner of 4 copies x 32 steps


# ---------------------------------------------------------------------------- a cluster
def start_node(*args: str) -> subprocess.Popen:
    """``ray start ... --block`` in its own session, so that killing the group stops it."""
    ray = Path(RLX[0]).with_name("ray")
    return subprocess.Popen([str(ray), "start", "--block", "--num-cpus", "1", *args],
                            env={**os.environ, "RAY_ADDRESS": ""}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip


def test_ppo_joins_a_two_node_cluster_and_spreads_its_runners(tmp_path):
    """A head node and a second node (two raylets on this machine, one CPU each), joined with
    --ray-address: the two runners, one CPU each, can only run one per node."""
    import signal
    import time

    port = 6390
    nodes = [start_node("--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
                        "--include-dashboard", "false")]  # fmt: skip
    try:
        time.sleep(8)
        nodes.append(start_node("--address", f"127.0.0.1:{port}",
                                "--node-ip-address", "127.0.0.1"))  # fmt: skip
        time.sleep(8)
        assert all(node.poll() is None for node in nodes), nodes[-1].stderr.read()[-2000:]
        out = subprocess.run(
            [*RLX, "train", "ppo", "--env", "CartPole-v1", "--runners", "2", "--num-envs", "4",
             "--total-steps", "2048", "--eval-episodes", "0", "--ray-address",
             f"127.0.0.1:{port}", "--run-dir", str(tmp_path / "run")],
            capture_output=True, text=True, timeout=240, env={**os.environ, "RAY_ADDRESS": ""},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
    finally:
        for node in nodes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            node.wait(timeout=30)
    rows = metric_rows(tmp_path / "run")
    assert rows[-1]["step"] >= 2048
    assert all(row[RUNNER_NODES] == 2 for row in rows)  # one runner on each node


# ---------------------------------------------------------------------------- the CLI
def test_cli_starts_a_local_ray_and_stops_it(tmp_path):
    """Without --ray-address the command starts its own Ray and shuts it down at the end."""
    before = ray_head_processes()
    env = {**os.environ, "RAY_ADDRESS": ""}  # never the test session's instance
    out = subprocess.run(
        [*RLX, "train", "ppo", "--env", "CartPole-v1", "--runners", "2", "--num-envs", "4",
         "--total-steps", "2048", "--eval-episodes", "2", "--run-dir", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    record = json.loads((tmp_path / "run" / "config.json").read_text())
    assert record["config"]["runners"] == 2
    assert summary(tmp_path / "run")["steps"] >= 2048
    assert rlx.load(tmp_path / "run").act(np.zeros(4, np.float32)) in (0, 1)
    assert ray_head_processes() == before  # its own Ray was shut down with the run


def ray_head_processes() -> int:
    """Running Ray head processes (GCS servers) in this namespace's view of /proc."""
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            count += b"gcs_server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return count
