"""The run folder of DESIGN.md, exercised through rlx.train with a toy algorithm."""

from __future__ import annotations

import csv
import json
import time

import numpy as np
import pytest

import rlx
from rlx.errors import ConfigError, RunError, TrainingError, UnknownAlgorithmError
from tests.runs import toy_algorithm  # noqa: F401  (registers "toy-counter")


def read_metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_train_writes_a_complete_run_folder(tmp_path):
    run_dir = tmp_path / "run"
    agent = rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=5, seed=3)
    assert agent.total == pytest.approx(0.5 * (1 + 2 + 3 + 4 + 5))
    config = json.loads((run_dir / "config.json").read_text())
    assert config["algo"] == "toy-counter" and config["env"] == "Toy-v0"
    assert config["seed"] == 3 and config["config"]["total_steps"] == 5
    assert {"rlx", "torch", "numpy", "gymnasium", "python"} <= set(config["versions"])
    rows = read_metrics(run_dir)
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    assert all("wall_s" in r for r in rows) and rows[-1]["x"] == 2.5
    with open(run_dir / "episodes.csv") as f:
        episodes = list(csv.DictReader(f))
    assert list(episodes[0]) == ["step", "wall_s", "return", "length"] and len(episodes) == 5
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 5
    assert summary["algo"] == "toy-counter" and summary["seed"] == 3
    assert (run_dir / "checkpoints" / "latest").exists()


def test_load_restores_the_agent(tmp_path):
    rlx.train("toy-counter", "Toy-v0", run_dir=tmp_path / "r", total_steps=4)
    assert rlx.load(tmp_path / "r").total == pytest.approx(5.0)


def test_resume_continues_from_the_checkpoint_and_equals_an_uninterrupted_run(tmp_path):
    rlx.train("toy-counter", "Toy-v0", run_dir=tmp_path / "a", total_steps=3)
    resumed = rlx.train("toy-counter", "Toy-v0", run_dir=tmp_path / "a", resume=True, total_steps=6)
    whole = rlx.train("toy-counter", "Toy-v0", run_dir=tmp_path / "b", total_steps=6)
    assert resumed.total == whole.total
    assert [r["step"] for r in read_metrics(tmp_path / "a")] == [1, 2, 3, 4, 5, 6]


def test_resume_drops_rows_logged_after_the_checkpoint(tmp_path):
    run_dir = tmp_path / "r"
    rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=3)
    # a crash after logging step 4 but before its checkpoint was written
    with open(run_dir / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 4, "wall_s": 9.0, "x": 99.0}) + "\n")
        f.write('{"step": 5, "wall_s"')  # a line cut short
    with open(run_dir / "episodes.csv", "a") as f:
        f.write("4,9.0,99.0,1\n")
    rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, resume=True, total_steps=5)
    rows = read_metrics(run_dir)
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5] and rows[3]["x"] == 2.0
    lines = (run_dir / "episodes.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in lines[1:]] == ["1", "2", "3", "4", "5"]


def test_a_new_run_refuses_an_existing_run_folder_in_pythons_words(tmp_path):
    rlx.train("toy-counter", "Toy-v0", run_dir=tmp_path / "r", total_steps=2)
    with pytest.raises(RunError, match="already holds a run; pass resume=True") as refused:
        rlx.train("toy-counter", "Toy-v0", run_dir=tmp_path / "r", total_steps=2)
    assert "overwrite=True" in str(refused.value) and "--" not in str(refused.value)


def snapshot(folder):
    """Every file under ``folder`` and its bytes (links as their targets)."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() and not p.is_symlink()
                                     else str(p.readlink()) if p.is_symlink() else None)
        for p in sorted(folder.rglob("*"))
    }  # fmt: skip


def history(run_dir):
    return json.loads((run_dir / "config.json").read_text())["history"]


def test_a_run_that_failed_before_its_first_checkpoint_is_started_over_by_a_rerun(tmp_path, capsys):
    """The dead end of issue 39: a failed start left config.json and a failed summary; a
    rerun said "pass --resume", and --resume said "no checkpoint"."""
    run_dir = tmp_path / "r"
    with pytest.raises(TrainingError):
        rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=5, nan_at=1)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "failed"
    assert not (run_dir / "checkpoints").exists()
    capsys.readouterr()
    agent = rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=3, progress=False)
    assert agent.total == pytest.approx(0.5 * (1 + 2 + 3))
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rlx: {run_dir} holds a run that ended before its first checkpoint; "
                   "starting over in it."]  # fmt: skip
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    assert [r["step"] for r in read_metrics(run_dir)] == [1, 2, 3]
    assert [h["kind"] for h in history(run_dir)] == ["start", "overwrite"]
    assert not (run_dir / ".rlx-previous").exists()


def test_resume_of_a_run_without_a_checkpoint_says_so_and_starts_over(tmp_path, capsys):
    run_dir = tmp_path / "r"
    with pytest.raises(TrainingError):
        rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=5, nan_at=1, w=2.0)
    capsys.readouterr()
    agent = rlx.train("toy-counter", run_dir=run_dir, resume=True, nan_at=-1, progress=False)
    assert "nothing to resume: starting it over" in capsys.readouterr().err
    assert agent.total == pytest.approx(2.0 * 15)  # its recorded w and budget, from step 0
    assert [r["step"] for r in read_metrics(run_dir)] == [1, 2, 3, 4, 5]


def test_overwrite_starts_over_in_place(tmp_path):
    run_dir = tmp_path / "r"
    rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=6)
    agent = rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=2, overwrite=True)
    assert agent.total == pytest.approx(1.5)
    assert [r["step"] for r in read_metrics(run_dir)] == [1, 2]
    assert rlx.runs.load_checkpoint(run_dir)[0] == 2
    assert len(list((run_dir / "checkpoints").glob("step_*.pt"))) <= 2  # none of the old run
    kinds = [(h["kind"], h["budget"]) for h in history(run_dir)]
    assert kinds == [("start", 6), ("overwrite", 2)]
    assert "overwrite=True" in history(run_dir)[-1]["command"]
    assert not (run_dir / ".rlx-previous").exists()


def test_overwrite_refuses_a_folder_that_is_not_an_rlx_run(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(RunError, match=r"overwrite=True starts over only in an rlx run folder"):
        rlx.train("toy-counter", "Toy-v0", run_dir=mine, total_steps=2, overwrite=True)
    (mine / "config.json").write_text('{"my": "own config"}')
    before = snapshot(mine)
    with pytest.raises(RunError, match="is not an rlx run folder"):
        rlx.train("toy-counter", "Toy-v0", run_dir=mine, total_steps=2, overwrite=True)
    with pytest.raises(RunError, match="is not an rlx run folder"):
        rlx.train("toy-counter", "Toy-v0", run_dir=mine, total_steps=2)
    assert snapshot(mine) == before
    with pytest.raises(ConfigError, match="resume=True continues the run and overwrite=True"):
        rlx.train("toy-counter", "Toy-v0", run_dir=mine, resume=True, overwrite=True)


def test_a_start_over_refused_before_training_leaves_the_old_run_as_it_was(tmp_path):
    run_dir = tmp_path / "ql"
    rlx.train("q-learning", "FrozenLake-v1", run_dir=run_dir, episodes=50, progress=False)
    before = snapshot(run_dir)
    with pytest.raises(rlx.errors.EnvError, match="Discrete observation space"):
        rlx.train("q-learning", "CartPole-v1", run_dir=run_dir, overwrite=True, progress=False)
    assert snapshot(run_dir) == before
    with pytest.raises(rlx.errors.EnvError, match="Discrete observation space"):
        rlx.train("q-learning", "CartPole-v1", run_dir=run_dir, resume=True, episodes=80,
                  progress=False)  # fmt: skip
    assert snapshot(run_dir) == before  # logs not cut, config.json and summary as they were


def test_config_json_keeps_the_history_of_every_start_and_resume(tmp_path):
    """The budget and the call of each, where config.json used to keep the first only."""
    run_dir = tmp_path / "r"
    rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=2)
    rlx.train("toy-counter", run_dir=run_dir, resume=True, total_steps=4)
    rlx.train("toy-counter", run_dir=run_dir, resume=True, total_steps=7)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["config"]["total_steps"] == 7  # the config the run has now
    entries = config["history"]
    assert [(h["kind"], h["budget"], h["unit"]) for h in entries] == [
        ("start", 2, "steps"), ("resume", 4, "steps"), ("resume", 7, "steps")
    ]  # fmt: skip
    assert entries[0]["command"].startswith("rlx.train('toy-counter', 'Toy-v0'")
    assert "resume=True" in entries[2]["command"] and "total_steps=7" in entries[2]["command"]
    assert all(h["rlx"] == rlx.__version__ and h["time"] for h in entries)


def test_a_config_completed_during_training_keeps_the_history(tmp_path):
    from rlx.runs import Run
    from tests.runs.toy_algorithm import ToyConfig

    with Run(tmp_path / "r", algo="toy-counter", env_id="X", config=ToyConfig(), total=0,
             progress=False, command="rlx.train(...)") as run:  # fmt: skip
        run.record_config(ToyConfig(total_steps=50), total=50)
        run.finish(0)
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["config"]["total_steps"] == 50
    assert config["history"] == [{**config["history"][0], "kind": "start", "budget": 50,
                                  "command": "rlx.train(...)"}]  # fmt: skip


def test_resume_without_a_run_folder_is_an_error(tmp_path):
    with pytest.raises(RunError, match=r"has no config\.json"):
        rlx.train("toy-counter", "Toy-v0", run_dir=tmp_path / "none", resume=True)


def test_nan_metric_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
    run_dir = tmp_path / "r"
    with pytest.raises(TrainingError, match="x became nan at step 4"):
        rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=10, nan_at=4)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and "x became nan" in summary["error"]
    step, state = rlx.runs.load_checkpoint(run_dir)
    assert step == 3 and np.all(np.isfinite(state["arr"]))
    assert [r["step"] for r in read_metrics(run_dir)][:3] == [1, 2, 3]


def test_unknown_algorithm_and_field_name_the_valid_ones(tmp_path):
    with pytest.raises(UnknownAlgorithmError, match="Did you mean toy-counter"):
        rlx.train("toy-countr", "Toy-v0", run_dir=tmp_path / "r")
    with pytest.raises(
        ConfigError, match=r"no config field 'totl_steps'; did you mean total_steps\?"
    ):
        rlx.train("toy-counter", "Toy-v0", run_dir=tmp_path / "r", totl_steps=3)


def test_invalid_config_value_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="w=-1"):
        rlx.train("toy-counter", "Toy-v0", run_dir=tmp_path / "r", w=-1.0)


def test_tensorboard_and_progress_bar(tmp_path, capsys):
    run_dir = tmp_path / "r"
    rlx.train(
        "toy-counter", "Toy-v0", run_dir=run_dir, total_steps=3, tensorboard=True, progress=True
    )
    events = list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    err = capsys.readouterr().err
    assert "toy-counter Toy-v0" in err and "3/3" in err


def test_thread_count_comes_from_rlx_num_threads(monkeypatch):
    from rlx.core.threads import torch_threads

    monkeypatch.setenv("RLX_NUM_THREADS", "3")
    assert torch_threads() == 3
    monkeypatch.setenv("RLX_NUM_THREADS", "zero")
    with pytest.raises(ConfigError, match="RLX_NUM_THREADS='zero' must be a whole number >= 1"):
        torch_threads()


def test_set_threads_sets_torch_and_numpys_blas():
    import torch
    from threadpoolctl import threadpool_info

    from rlx.core.threads import set_torch_threads

    try:
        assert set_torch_threads(2) == 2
        assert torch.get_num_threads() == 2
        blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        assert blas and set(blas) == {2}
    finally:
        set_torch_threads(1)
    assert {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"} == {1}


def test_a_run_rejected_before_training_leaves_no_folder(tmp_path):
    run_dir = tmp_path / "r"
    with pytest.raises(rlx.errors.EnvError, match="Discrete observation space"):
        rlx.train("q-learning", "CartPole-v1", run_dir=run_dir)
    assert not run_dir.exists()
    # the same folder can be used once the input is fixed
    rlx.train("q-learning", "FrozenLake-v1", run_dir=run_dir, episodes=10)
    assert (run_dir / "summary.json").is_file()


def test_the_progress_bar_keeps_count_and_time_left_at_80_columns():
    """A long description and many metrics: the count and the time left stay on the bar's
    line, and the metrics go to a line of their own, cut to the width."""
    import io
    import re

    from rich.console import Console

    from rlx.runs.logger import ProgressBar

    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=True, color_system=None)
    bar = ProgressBar(100_000, "steps", "ppo " + "VeryLongEnvironmentName-v5" * 3, True, console)
    metrics = {"episode_return": 123.4, "approx_kl": 0.0123, "clip_fraction": 0.123,
               "td_error": 1.0, "loss": 3.25, "reward": 0.5, "kl_ref": 0.25}  # fmt: skip
    bar.update(35_000, metrics)
    bar.close()
    frames = re.split(r"[\r\n]", buffer.getvalue())  # the live display redraws with \r
    lines = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line) for line in frames]
    lines = [line for line in lines if line.strip()]
    bar_line, metrics_line = lines[-2], lines[-1]
    assert "35000/100000 steps" in bar_line and re.search(r"\d:\d\d:\d\d", bar_line)
    assert re.search(r"(-:--:--|\d:\d\d:\d\d)$", bar_line.rstrip())  # time left, at the end
    assert metrics_line.strip().startswith("episode_return=123.4")
    assert max(len(line) for line in lines[-2:]) <= 80


def test_a_run_that_does_not_write_leaves_no_file(tmp_path):
    """The ranks other than 0 of a data-parallel run train beside the writer: they log,
    checkpoint and finish without touching the folder."""
    from rlx.runs import Run
    from tests.runs.toy_algorithm import ToyConfig

    with Run(tmp_path / "r", algo="toy-counter", env_id="X", config=ToyConfig(), total=3,
             writer=False, progress=False) as run:  # fmt: skip
        assert run.log(1, {"loss": 0.5}) == {"loss": 0.5}
        run.log_episodes([1], [2.0], [3])
        run.save_checkpoint(1, {"x": 1})
        summary = run.finish(1)
    assert summary["status"] == "completed" and not (tmp_path / "r").exists()


def test_extra_record_fields_go_into_config_json(tmp_path):
    import json

    from rlx.runs import Run
    from tests.runs.toy_algorithm import ToyConfig

    spec = {"entry_point": "pkg.mod:make", "kwargs": {"size": 3}}
    with Run(tmp_path / "r", algo="toy-counter", env_id="X", config=ToyConfig(), total=1,
             progress=False, record={"env_spec": spec}) as run:  # fmt: skip
        run.finish(0)
    assert json.loads((tmp_path / "r" / "config.json").read_text())["env_spec"] == spec


def test_wandb_logs_the_same_metric_names_offline(tmp_path, monkeypatch):
    """--wandb beside the run folder, with no network: an offline run in RUN_DIR/wandb whose
    records carry rlx's metric names."""
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)  # the default must be offline
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "r"
    rlx.train("q-learning", "FrozenLake-v1", episodes=300, seed=0, run_dir=run_dir,
              progress=False, wandb=True)  # fmt: skip
    logged = {k for line in (run_dir / "metrics.jsonl").read_text().splitlines()
              for k in json.loads(line)} - {"step", "wall_s"}  # fmt: skip
    assert logged
    # wandb's own service process writes the records file; on a loaded machine it may still be
    # writing when finish() has returned, so read until every name is there (or 60 s passed)
    deadline = time.monotonic() + 60.0
    while True:
        (offline,) = (run_dir / "wandb").glob("offline-run-*")
        records = b"".join(path.read_bytes() for path in offline.glob("*.wandb"))
        missing = {name for name in logged if name.encode() not in records}
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not missing, missing


def test_a_preset_may_match_ids_by_pattern():
    """``"ALE/*"``: one preset for every game of a family; an exact id still wins."""
    from rlx import registry

    spec = registry.Algorithm("p", object, None, None, presets={"ALE/*": {"a": 1},
                              "ALE/Pong-v5": {"a": 2}})  # fmt: skip
    assert registry.preset_for(spec, "ALE/Breakout-v5") == ("ALE/*", {"a": 1})
    assert registry.preset_for(spec, "ALE/Pong-v5") == ("ALE/Pong-v5", {"a": 2})
    assert registry.preset_for(spec, "CartPole-v1") == (None, {})


def test_a_run_refused_as_it_opens_changes_nothing(tmp_path, monkeypatch):
    """Refused by its folder, or failing as it opens its logs (--tensorboard without
    tensorboard): the folder is as it was, the old run of a start-over put back."""
    from rlx.errors import ConfigError as Refused
    from rlx.runs import Run
    from tests.runs.toy_algorithm import ToyConfig

    run_dir = tmp_path / "r"
    rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=2)
    before = snapshot(run_dir)
    with pytest.raises(RunError, match="overwrite=True"):
        Run(run_dir, algo="toy-counter", env_id="X", config=ToyConfig(), total=1)
    assert snapshot(run_dir) == before

    def no_logs(*args, **kwargs):
        raise Refused("--tensorboard needs the tensorboard package.")

    monkeypatch.setattr("rlx.runs.run.MetricLogger", no_logs)
    with pytest.raises(Refused):
        Run(run_dir, algo="toy-counter", env_id="X", config=ToyConfig(), total=1, overwrite=True)
    assert snapshot(run_dir) == before
    with pytest.raises(Refused):
        Run(tmp_path / "new" / "r", algo="toy-counter", env_id="X", config=ToyConfig(), total=1)
    assert not (tmp_path / "new").exists()
