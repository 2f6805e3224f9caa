"""Evaluation during training (``eval_every``, ``checkpoints/best.pt``, ``stop_at_return``),
callbacks (``rlx.train(..., callbacks=[...])``) and what a resume says it keeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import rlx
from rlx.callbacks import CallbackObserver
from rlx.cli import main
from rlx.core.training_evaluation import TRAINING_EVAL_SEED_OFFSET, separate_env
from rlx.errors import CheckpointError, ConfigError
from rlx.runs import load_checkpoint
from rlx.runs.run import Run
from tests.toy_envs import ChainEnv

# DQN's CartPole preset (8 copies, 3-step returns, normalised observations) with a small
# target: every seed's evaluations pass 150 within a few thousand steps
CARTPOLE = dict(total_steps=30_000, eval_every=1_000, eval_episodes=5, stop_at_return=150.0)
# quick runs that only have to run, not learn
SHORT = {
    "dqn": ("CartPole-v1", dict(total_steps=2_000, learning_starts=200, log_every=250)),
    "ppo": ("CartPole-v1", dict(total_steps=2_048, num_envs=4, num_steps=64, num_epochs=2)),
    "sac": ("Pendulum-v1", dict(total_steps=600, learning_starts=100, log_every=100,
                                batch_size=32, hidden_sizes=(32, 32))),
}  # fmt: skip


def rows(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "wall_s"} for line in lines]


def evaluations(run_dir: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["eval_return_mean"]) for r in rows(run_dir) if "eval_return_mean" in r]


def summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


def parameters(agent: Any) -> torch.Tensor:
    module = getattr(agent, "policy", None) or agent.learner.online
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def stop_after_logging(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Ask the run to stop (as Ctrl-C does) once it has logged ``step``."""
    original = Run.log

    def log(self: Run, at: int, values: Any) -> Any:
        out = original(self, at, values)
        if at >= step:
            self.stop_requested = True
        return out

    monkeypatch.setattr(Run, "log", log)


# ---------------------------------------------------------------------------- the fields
def test_the_fields_are_checked_with_one_sentence_each():
    from rlx.agents.dqn import DQNConfig
    from rlx.agents.ppo import PPOConfig

    with pytest.raises(ConfigError, match=r"eval_every=1000 .* eval_episodes >= 1"):
        DQNConfig(eval_every=1000, eval_episodes=0)
    with pytest.raises(ConfigError, match=r"stop_at_return=200.* add eval_every"):
        PPOConfig(stop_at_return=200)
    with pytest.raises(ConfigError, match="eval_every=-5 must be >= 0"):
        PPOConfig(eval_every=-5)
    assert PPOConfig(eval_every=0, eval_episodes=0).eval_every == 0  # 0 is off


def test_every_deep_agent_takes_them_as_flags(capsys):
    for algo in ("dqn", "sac", "td3", "ppo", "a2c", "reinforce"):
        with pytest.raises(SystemExit):
            main(["train", algo, "--help"])
        out = capsys.readouterr().out
        for flag in ("--eval-every", "--eval-episodes", "--stop-at-return"):
            assert flag in out, (algo, flag)


# ---------------------------------------------------------------------------- learning
def test_dqn_on_cartpole_keeps_the_best_evaluation_and_stops_at_the_target(
    tmp_path, train_seed, capsys
):
    run_dir = tmp_path / "dqn"
    rlx.train("dqn", "CartPole-v1", run_dir=run_dir, seed=train_seed, progress=False, **CARTPOLE)
    evaluated = evaluations(run_dir)
    done = summary(run_dir)
    # stopped at the target, before the budget, as a completed run with its last checkpoint
    assert done["status"] == "completed"
    assert done["steps"] < CARTPOLE["total_steps"]
    assert evaluated[-1][0] == done["steps"] == done["stop_at_return_step"]
    assert evaluated[-1][1] >= CARTPOLE["stop_at_return"]
    assert all(mean < CARTPOLE["stop_at_return"] for _, mean in evaluated[:-1])
    assert load_checkpoint(run_dir)[0] == done["steps"]
    assert "stop_at_return=150" in capsys.readouterr().err
    # an evaluation every eval_every env steps, at the first log row past each multiple
    steps = [s for s, _ in evaluated]
    assert [s // 1_000 for s in steps] == list(range(1, len(steps) + 1))
    # checkpoints/best.pt holds the policy of the best evaluation
    best_step, best_mean = max(evaluated, key=lambda e: e[1])
    step, state = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    assert step == best_step and state["evaluation"]["eval_return_mean"] == best_mean
    assert (done["best_eval_step"], done["best_eval_return_mean"]) == (best_step, best_mean)
    best = rlx.load(run_dir, checkpoint="best")
    again = rlx.evaluate(
        best, "CartPole-v1", episodes=5, seed=train_seed + TRAINING_EVAL_SEED_OFFSET
    )
    assert again.mean_return == pytest.approx(best_mean)
    # and from the command line: rlx eval --checkpoint best evaluates that policy
    capsys.readouterr()
    seed = str(train_seed + TRAINING_EVAL_SEED_OFFSET)
    argv = ["eval", str(run_dir), "--checkpoint", "best", "--episodes", "5", "--seed", seed]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mean"] == pytest.approx(best_mean)


# ---------------------------------------------------------------------------- invariants
@pytest.mark.parametrize("algo", sorted(SHORT))
def test_evaluations_leave_training_as_it_was(tmp_path, algo):
    """The same seed trains the same with and without evaluations: they run on their own env
    copies and put the global random generators back (building an agent draws from torch's)."""
    env, config = SHORT[algo]
    config = {**config, "eval_episodes": 2, "seed": 3}
    plain = rlx.train(algo, env, run_dir=tmp_path / "plain", progress=False, **config)
    every = config["total_steps"] // 4
    evaluated = rlx.train(
        algo, env, run_dir=tmp_path / "eval", progress=False, eval_every=every, **config
    )
    with_eval = rows(tmp_path / "eval")
    assert len(evaluations(tmp_path / "eval")) >= 3
    training = [{k: v for k, v in r.items() if not k.startswith("eval_")} for r in with_eval]
    assert training == rows(tmp_path / "plain")
    if algo == "sac":
        a, b = plain.learner.actor.parameters(), evaluated.learner.actor.parameters()
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    else:
        assert torch.equal(parameters(plain), parameters(evaluated))


def test_an_env_object_is_copied_for_evaluations_never_stepped_by_them():
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    made = separate_env(env)()
    assert made is not env and made.spec.id == "CartPole-v1"
    bare = ChainEnv()  # no spec: a deep copy
    assert separate_env(bare)() is not bare
    assert separate_env("CartPole-v1") == "CartPole-v1"  # each evaluation builds its own
    assert isinstance(separate_env(ChainEnv)(), ChainEnv)


def test_a_resumed_run_evaluates_and_keeps_its_best_as_the_uninterrupted_one(tmp_path, monkeypatch):
    config = dict(SHORT["dqn"][1], total_steps=3_000, eval_every=500, eval_episodes=2,
                  save_replay_buffer=True, seed=1, progress=False)  # fmt: skip
    whole = rlx.train("dqn", "CartPole-v1", run_dir=tmp_path / "whole", **config)
    with monkeypatch.context() as patch:
        stop_after_logging(patch, 1_500)
        rlx.train("dqn", "CartPole-v1", run_dir=tmp_path / "cut", **config)
    resumed = rlx.train("dqn", "CartPole-v1", run_dir=tmp_path / "cut", resume=True)
    assert torch.equal(parameters(resumed), parameters(whole))
    assert evaluations(tmp_path / "cut") == evaluations(tmp_path / "whole")
    best = [load_checkpoint(tmp_path / r / "checkpoints" / "best.pt") for r in ("whole", "cut")]
    assert best[0][0] == best[1][0]
    assert best[0][1]["evaluation"] == best[1][1]["evaluation"]
    for key in ("best_eval_step", "best_eval_return_mean"):
        assert summary(tmp_path / "cut")[key] == summary(tmp_path / "whole")[key]


def test_the_report_draws_the_evaluations_and_rings_the_best(tmp_path):
    env, config = SHORT["ppo"]
    rlx.train("ppo", env, run_dir=tmp_path / "r", progress=False, eval_every=1_000,
              eval_episodes=2, **config)  # fmt: skip
    page = Path(rlx.report(tmp_path / "r")).read_text()
    assert "diamonds: evaluation return (mean ± std)" in page
    assert "ringed: the best evaluation, kept as checkpoints/best.pt" in page
    assert 'data-metric="eval_return_std"' not in page  # drawn as the diamonds' error bars


def test_a_run_without_evaluations_has_no_best_checkpoint(tmp_path, capsys):
    env, config = SHORT["ppo"]
    rlx.train("ppo", env, run_dir=tmp_path / "r", progress=False, eval_episodes=0, **config)
    with pytest.raises(CheckpointError, match="no best checkpoint"):
        rlx.load(tmp_path / "r", checkpoint="best")
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "r"), "--checkpoint", "best"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no best checkpoint" in err[0] and "--eval-every N" in err[0]


# ---------------------------------------------------------------------------- callbacks
class Recorder:
    """Every hook it sees, in order, as ``(hook, step)``; stops when ``stop`` says so."""

    def __init__(self, stop: Any = None) -> None:
        self.seen: list[tuple[str, int]] = []
        self.stop = stop or (lambda hook, step: False)
        self.payloads: dict[str, list[Any]] = {}

    def _see(self, hook: str, step: int, payload: Any) -> bool:
        self.seen.append((hook, step))
        self.payloads.setdefault(hook, []).append(payload)
        return not self.stop(hook, step)

    def on_start(self, step, info):
        return self._see("on_start", step, info)

    def on_step(self, step, info):
        return self._see("on_step", step, info)

    def on_update(self, step, metrics):
        return self._see("on_update", step, metrics)

    def on_eval(self, step, result):
        return self._see("on_eval", step, result)

    def on_end(self, step, summary):
        self._see("on_end", step, summary)


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_callbacks_see_the_hooks_in_order(tmp_path, algo):
    env, config = SHORT[algo]
    recorder = Recorder()
    rlx.train(algo, env, run_dir=tmp_path / "r", progress=False, callbacks=[recorder],
              eval_every=config["total_steps"] // 2, eval_episodes=2, **config)  # fmt: skip
    hooks = [hook for hook, _ in recorder.seen]
    steps = [step for _, step in recorder.seen]
    assert hooks[0] == "on_start" and steps[0] == 0
    assert recorder.payloads["on_start"][0] == {"run_dir": tmp_path / "r", "resumed": False}
    assert hooks[-1] == "on_end" and hooks.count("on_end") == 1
    assert recorder.payloads["on_end"][0]["status"] == "completed"
    assert steps == sorted(steps)  # one clock: env steps
    # every logged row, as metrics.jsonl has it; an evaluation right after its row
    logged = rows(tmp_path / "r")
    updates = [s for h, s in recorder.seen if h == "on_update"]
    assert updates == [r["step"] for r in logged]
    for i, (hook, step) in enumerate(recorder.seen):
        if hook == "on_eval":
            assert recorder.seen[i - 1] == ("on_update", step)
    results = recorder.payloads["on_eval"]
    assert len(results) == 2 and set(results[0]) == {
        "eval_return_mean", "eval_return_std", "eval_length_mean"
    }  # fmt: skip
    # on_step after each collection: every vector step (DQN) or rollout (PPO)
    on_steps = [s for h, s in recorder.seen if h == "on_step"]
    per_collection = 8 if algo == "dqn" else 4 * 64  # DQN's preset: 8 copies; PPO: N x T
    gaps = np.diff([0, *on_steps])  # autoreset steps are not counted: at most N x T
    assert gaps.min() > 0 and gaps.max() <= per_collection
    assert on_steps[-1] == summary(tmp_path / "r")["steps"]
    ended = recorder.payloads["on_step"]
    assert all(set(info) == {"episode_returns", "episode_lengths"} for info in ended)
    n_episodes = sum(len(info["episode_returns"]) for info in ended)
    assert n_episodes == len((tmp_path / "r" / "episodes.csv").read_text().splitlines()) - 1


@pytest.mark.parametrize("hook", ["on_step", "on_update"])
def test_a_callback_returning_false_stops_training_at_its_step(tmp_path, hook, capsys):
    env, config = SHORT["dqn"]
    recorder = Recorder(stop=lambda h, step: h == hook and step >= 700)
    rlx.train("dqn", env, run_dir=tmp_path / "r", progress=False, callbacks=[recorder],
              **config)  # fmt: skip
    stopped_at = next(s for h, s in recorder.seen if h == hook and s >= 700)
    done = summary(tmp_path / "r")
    assert done["status"] == "stopped" and done["steps"] == stopped_at
    assert load_checkpoint(tmp_path / "r")[0] == stopped_at
    assert rows(tmp_path / "r")[-1]["step"] == stopped_at
    assert "eval_return_mean" not in done  # a stopped run skips the final evaluation
    assert f"Recorder.{hook} returned False" in capsys.readouterr().err


def test_tabular_runs_call_on_update_and_language_model_rows_reach_on_eval(tmp_path):
    recorder = Recorder()
    rlx.train("q-learning", "FrozenLake-v1", run_dir=tmp_path / "q", episodes=300,
              progress=False, callbacks=[recorder])  # fmt: skip
    hooks = {hook for hook, _ in recorder.seen}
    assert hooks == {"on_start", "on_update", "on_end"}
    # held-out figures of a language-model stage are evaluation figures too
    observer = CallbackObserver([recorder])
    observer.observe(10, {"loss": 1.0, "eval_loss": 2.0, "exact_match": 0.5})
    assert recorder.seen[-2:] == [("on_update", 10), ("on_eval", 10)]
    assert recorder.payloads["on_eval"][-1] == {"eval_loss": 2.0, "exact_match": 0.5}


def test_a_hook_that_raises_ends_the_run_as_failed_with_its_folder_whole(tmp_path):
    class Broken:
        def on_start(self, step, info):
            raise RuntimeError("my logger is down")

    env, config = SHORT["ppo"]
    with pytest.raises(RuntimeError, match="my logger is down"):
        rlx.train("ppo", env, run_dir=tmp_path / "r", progress=False, callbacks=[Broken()],
                  **config)  # fmt: skip
    done = summary(tmp_path / "r")
    assert done["status"] == "failed" and "my logger is down" in done["error"]


def test_something_that_is_no_callback_is_refused_in_one_sentence(tmp_path):
    with pytest.raises(ConfigError, match=r"callbacks\[1\] \(int\) has none of the methods"):
        rlx.train("q-learning", "FrozenLake-v1", run_dir=tmp_path / "q", episodes=10,
                  callbacks=[Recorder(), 3])  # fmt: skip
    assert not (tmp_path / "q").exists()


# ---------------------------------------------------------------------------- resume
@pytest.mark.parametrize("algo", ["dqn", "sac"])
def test_an_off_policy_resume_says_when_it_starts_with_an_empty_replay_buffer(
    tmp_path, algo, capsys
):
    env, config = SHORT[algo]
    config = {**config, "eval_episodes": 0, "progress": False}
    total = config["total_steps"]
    rlx.train(algo, env, run_dir=tmp_path / "lost", **{**config, "total_steps": total // 2})
    capsys.readouterr()
    rlx.train(algo, env, run_dir=tmp_path / "lost", resume=True, total_steps=total)
    err = capsys.readouterr().err
    assert "empty replay buffer" in err and "save_replay_buffer=True" in err
    assert len([line for line in err.splitlines() if "replay buffer" in line]) == 1

    kept = {**config, "total_steps": total // 2, "save_replay_buffer": True}
    rlx.train(algo, env, run_dir=tmp_path / "kept", **kept)
    capsys.readouterr()
    rlx.train(algo, env, run_dir=tmp_path / "kept", resume=True, total_steps=total)
    assert "replay buffer" not in capsys.readouterr().err


def test_a_stopped_run_owes_its_evaluation_to_the_resume(tmp_path):
    """A stop skips the evaluation that was due; the resumed run makes it up at once."""
    env, config = SHORT["ppo"]  # 256 env steps an update
    config = {**config, "eval_every": 1_000, "eval_episodes": 2, "progress": False}
    stop = Recorder(stop=lambda hook, step: hook == "on_step" and step >= 1_000)
    rlx.train("ppo", env, run_dir=tmp_path / "r", callbacks=[stop], **config)
    stopped = summary(tmp_path / "r")["steps"]
    assert 1_000 <= stopped < 1_000 + 256 and evaluations(tmp_path / "r") == []
    rlx.train("ppo", env, run_dir=tmp_path / "r", resume=True)
    after = [r["step"] for r in rows(tmp_path / "r") if r["step"] > stopped]
    steps = [s for s, _ in evaluations(tmp_path / "r")]
    assert steps[0] == after[0]  # owed since the stop: the resumed run's first row
