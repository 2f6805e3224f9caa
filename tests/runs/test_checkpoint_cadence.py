"""When a run checkpoints (``checkpoint_every_s``, ``checkpoint_every_steps``,
``checkpoints_kept``), continuing a run from a checkpoint that is not its latest
(``resume_from``), and a run killed before its first checkpoint."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rlx
from rlx.cli import main
from rlx.errors import CheckpointError, ConfigError
from rlx.runs import Run, read_record
from rlx.runs.checkpoints import CheckpointCadence, list_checkpoints
from tests.conftest import ROOT
from tests.runs import toy_drift
from tests.test_user_errors import snapshot


def steps_of(run_dir: Path) -> list[int]:
    return [step for step, _ in list_checkpoints(run_dir)]


def rows(run_dir: Path) -> list[int]:
    return [
        json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]


def test_checkpoints_every_n_steps_all_kept(tmp_path):
    run_dir = tmp_path / "r"
    rlx.train("toy-drift", "X", run_dir=run_dir, total_steps=50, checkpoint_every_steps=10,
              checkpoints_kept=0, progress=False)  # fmt: skip
    assert steps_of(run_dir) == [10, 20, 30, 40, 50]
    assert (run_dir / "checkpoints" / "latest").resolve().name == "step_000000000050.pt"


def test_checkpoints_kept_prunes_the_oldest(tmp_path):
    run_dir = tmp_path / "r"
    rlx.train("toy-drift", "X", run_dir=run_dir, total_steps=50, checkpoint_every_steps=10,
              checkpoints_kept=2, progress=False)  # fmt: skip
    assert steps_of(run_dir) == [40, 50]


def test_without_a_cadence_a_run_checkpoints_by_time(tmp_path, monkeypatch):
    quick = tmp_path / "quick"
    rlx.train("toy-drift", "X", run_dir=quick, total_steps=20, progress=False)
    assert steps_of(quick) == [20]  # 30 s never passed: only the final checkpoint
    monkeypatch.setattr("rlx.runs.run.CHECKPOINT_EVERY_S", 0.0)
    every = tmp_path / "every"
    rlx.train("toy-drift", "X", run_dir=every, total_steps=5, checkpoints_kept=0, progress=False)
    assert steps_of(every) == [1, 2, 3, 4, 5]


def test_the_cadence_reads_any_config_and_defaults_to_30_seconds():
    assert CheckpointCadence.of(object()) == CheckpointCadence(30.0, None, 3)
    config = toy_drift.DriftConfig(checkpoint_every_steps=7)
    assert CheckpointCadence.of(config) == CheckpointCadence(None, 7, 3)
    both = CheckpointCadence.of(toy_drift.DriftConfig(checkpoint_every_s=5.0,
                                                      checkpoint_every_steps=7))  # fmt: skip
    assert both.due(5.0, 0) and both.due(0.0, 7) and not both.due(4.9, 6)


def test_every_deep_agent_takes_the_cadence_fields_with_one_sentence_errors():
    from rlx import registry

    for name in ("ppo", "a2c", "reinforce", "dqn", "sac", "td3"):
        fields = {f for f in registry.get(name).config.__dataclass_fields__}
        assert {"checkpoint_every_s", "checkpoint_every_steps", "checkpoints_kept"} <= fields
    with pytest.raises(ConfigError, match=r"^checkpoint_every_steps=0 must be >= 1\.$"):
        rlx.train("ppo", "CartPole-v1", checkpoint_every_steps=0)
    with pytest.raises(ConfigError, match=r"^checkpoints_kept=-1 must be >= 0\.$"):
        rlx.train("ppo", "CartPole-v1", checkpoints_kept=-1)


def test_every_algorithm_takes_the_cadence_fields():
    from rlx import registry

    cadence = {"checkpoint_every_s", "checkpoint_every_steps", "checkpoints_kept"}
    for name in registry.BUILTINS:
        assert cadence <= set(registry.get(name).config.__dataclass_fields__), name


def test_a_tabular_learner_checkpoints_every_n_env_steps(tmp_path):
    run_dir = tmp_path / "q"
    rlx.train("q-learning", "FrozenLake-v1", run_dir=run_dir, episodes=3000, progress=False,
              checkpoint_every_steps=1, checkpoints_kept=0)  # fmt: skip
    logged = rows(run_dir)
    # a checkpoint at every logged chunk of episodes (each past the cadence), and the last
    assert len(logged) > 1 and steps_of(run_dir) == logged
    assert rlx.load(run_dir, checkpoint=f"step_{logged[0]:012d}.pt").Q is not None
    with pytest.raises(ConfigError, match=r"checkpoints_kept=-1 must be >= 0\.$"):
        rlx.train("q-learning", "FrozenLake-v1", run_dir=tmp_path / "bad", checkpoints_kept=-1)


def test_a_board_game_checkpoints_every_n_iterations_and_keeps_n(tmp_path):
    run_dir = tmp_path / "az"
    rlx.train("alphazero", "tictactoe", run_dir=run_dir, iterations=4, games_per_iteration=2,
              simulations=4, eval_simulations=4, batch_size=8, eval_games=2, eval_every=4,
              train_steps_per_iteration=1, checkpoint_every_steps=1, checkpoints_kept=2,
              progress=False)  # fmt: skip
    assert steps_of(run_dir) == [3, 4]


def test_the_checkpoint_flags_follow_the_run_fields_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["train", "ppo", "--help"])
    text = capsys.readouterr().out
    option = [line.split()[0] for line in text.splitlines() if line.startswith("  --")]
    at = {name: option.index(name) for name in ("--device", "--checkpoint-every-s", "--gamma")}
    assert at["--device"] < at["--checkpoint-every-s"] < at["--gamma"]
    assert {"--checkpoint-every-steps", "--checkpoints-kept"} <= set(option)


# ---------------------------------------------------------------------------- resume_from
@pytest.fixture
def ten_checkpoints(tmp_path) -> Path:
    run_dir = tmp_path / "r"
    rlx.train("toy-drift", "X", run_dir=run_dir, total_steps=100, checkpoint_every_steps=10,
              checkpoints_kept=0, progress=False)  # fmt: skip
    return run_dir


def test_resume_from_continues_from_an_earlier_checkpoint_with_a_changed_config(ten_checkpoints):
    run_dir = ten_checkpoints
    agent = rlx.train("toy-drift", run_dir=run_dir, resume=True, resume_from=30,
                      learning_rate=0.2, progress=False)  # fmt: skip
    assert agent.step == 100
    assert rows(run_dir) == list(range(1, 101))  # the rows after step 30 were logged again
    kl = [
        json.loads(line)["approx_kl"]
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert kl[45] == pytest.approx(0.04)  # step 46: learning_rate 0.2 squared
    assert steps_of(run_dir) == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    record = json.loads((run_dir / "config.json").read_text())
    assert record["config"]["learning_rate"] == 0.2
    assert record["history"][-1]["kind"] == "resume"
    assert "resume_from=30" in record["history"][-1]["command"]
    assert not (run_dir / ".rlx-previous").exists()


def test_resume_from_a_file_name_and_the_checkpoints_after_it_go(ten_checkpoints):
    run_dir = ten_checkpoints
    rlx.train("toy-drift", run_dir=run_dir, resume=True, resume_from="step_000000000050.pt",
              total_steps=60, checkpoints_kept=0, progress=False)  # fmt: skip
    assert steps_of(run_dir) == [10, 20, 30, 40, 50, 60]
    assert rows(run_dir)[-1] == 60


def test_resume_from_a_missing_checkpoint_names_the_ones_there(ten_checkpoints):
    before = snapshot(ten_checkpoints)
    with pytest.raises(CheckpointError, match=r"has no step checkpoint 35; its checkpoints are at "
                                              r"steps 10, 20, 30"):  # fmt: skip
        rlx.train("toy-drift", run_dir=ten_checkpoints, resume=True, resume_from=35)
    refusal = r"^resume_from=\.\.\. names the checkpoint a resumed run continues from; pass " \
              r"resume=True too\.$"  # fmt: skip
    with pytest.raises(ConfigError, match=refusal):
        rlx.train("toy-drift", "X", run_dir=ten_checkpoints, resume_from=30)
    assert snapshot(ten_checkpoints) == before


def test_a_rollback_refused_as_it_opens_leaves_every_checkpoint(ten_checkpoints):
    run_dir = ten_checkpoints
    before = snapshot(run_dir)
    config = toy_drift.DriftConfig(checkpoint_every_steps=10, checkpoints_kept=0)
    opened = Run(run_dir, algo="toy-drift", env_id="X", config=config, total=100,
                 resume=read_record(run_dir), resume_from=30)  # fmt: skip
    with pytest.raises(ConfigError, match="refused"), opened:
        raise ConfigError("refused")
    assert snapshot(run_dir) == before


# ---------------------------------------------------------------------------- SIGKILL
def test_a_run_killed_before_its_first_checkpoint_says_so_and_starts_over(tmp_path, capsys):
    run_dir = tmp_path / "killed"
    args = ["train", "toy-drift", "--env", "X", "--run-dir", str(run_dir), "--total-steps",
            "100000", "--sleep-s", "0.01", "--checkpoint-every-s", "3600",
            "--no-progress"]  # fmt: skip
    code = f"import tests.runs.toy_drift, sys; from rlx.cli import main; sys.exit(main({args!r}))"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not ((run_dir / "metrics.jsonl").exists() and rows(run_dir)[-1:] >= [3]):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not (run_dir / "checkpoints").exists() and not (run_dir / "summary.json").exists()

    capsys.readouterr()
    assert main(["eval", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"rlx: error: {run_dir} holds no checkpoint to load: its run was killed "
                   "before saving one (it left no summary.json); train it again in the same "
                   "folder.")  # fmt: skip
    assert main(["train", "toy-drift", "--run-dir", str(run_dir), "--resume", "--total-steps",
                 "5", "--sleep-s", "0", "--no-progress"]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert (f"rlx: {run_dir} holds a run that was killed before its first checkpoint (it left no "
            "summary.json), so there is nothing to resume: starting it over.") in err  # fmt: skip
    assert rows(run_dir) == [1, 2, 3, 4, 5]
    history = json.loads((run_dir / "config.json").read_text())["history"]
    assert [h["kind"] for h in history] == ["start", "overwrite"]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
