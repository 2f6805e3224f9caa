"""One launch path: ``rlx.train`` and ``rlx train`` hand one :class:`TrainRequest` to
:func:`rlx.launch.run.launch`, so both take the same options, record the same run and refuse
the same combinations."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import rlx
from rlx.cli import main
from rlx.core.env_recipe import ON_THE_COMMAND_LINE
from rlx.errors import ConfigError
from rlx.launch.run import TrainRequest, check_request, launch
from tests.runs import toy_drift  # noqa: F401  (registers "toy-drift")

QUIET = ["--no-progress"]


def record(run_dir: Path) -> dict:
    return json.loads((run_dir / "config.json").read_text())


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def logged_steps(run_dir: Path) -> list[int]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines]


def test_python_and_the_command_line_record_the_same_run(tmp_path):
    rlx.train("toy-drift", "X", run_dir=tmp_path / "py", total_steps=30, learning_rate=0.5,
              progress=False)  # fmt: skip
    code = main(["train", "toy-drift", "--env", "X", "--run-dir", str(tmp_path / "cli"),
                 "--total-steps", "30", "--learning-rate", "0.5", *QUIET])  # fmt: skip
    assert code == 0
    py, cli = record(tmp_path / "py"), record(tmp_path / "cli")
    assert py["config"] == cli["config"]
    assert (py["algo"], py["env"]) == (cli["algo"], cli["env"]) == ("toy-drift", "X")
    assert py["history"][-1]["command"].startswith("rlx.train('toy-drift'")
    assert cli["history"][-1]["command"].startswith("rlx train toy-drift")
    assert sorted(summary(tmp_path / "py")) == sorted(summary(tmp_path / "cli"))


def test_the_command_line_resumes_from_a_checkpoint_as_python_does(tmp_path):
    for name in ("py", "cli"):
        rlx.train("toy-drift", "X", run_dir=tmp_path / name, total_steps=60,
                  checkpoint_every_steps=10, checkpoints_kept=0, progress=False)  # fmt: skip
    rlx.train("toy-drift", run_dir=tmp_path / "py", resume=True, resume_from=30,
              learning_rate=0.2, progress=False)  # fmt: skip
    code = main(["train", "toy-drift", "--run-dir", str(tmp_path / "cli"), "--resume",
                 "--resume-from", "30", "--learning-rate", "0.2", *QUIET])  # fmt: skip
    assert code == 0
    for name in ("py", "cli"):
        run_dir = tmp_path / name
        assert logged_steps(run_dir) == list(range(1, 61))  # steps 31-60 logged again
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        kl = [json.loads(line)["approx_kl"] for line in lines]
        assert kl[45] == pytest.approx(0.04)  # step 46 was trained again at learning_rate 0.2
        assert record(run_dir)["config"]["learning_rate"] == 0.2
        assert record(run_dir)["history"][-1]["kind"] == "resume"
    assert "--resume-from 30" in record(tmp_path / "cli")["history"][-1]["command"]
    # a checkpoint file's name works too; a step with no checkpoint is refused
    code = main(["train", "toy-drift", "--run-dir", str(tmp_path / "cli"), "--resume",
                 "--resume-from", "35", *QUIET])  # fmt: skip
    assert code == 2


def test_no_doctor_leaves_the_summary_without_findings_on_both_faces(tmp_path, capsys):
    rlx.train("toy-drift", "X", run_dir=tmp_path / "py", total_steps=60, doctor=False,
              progress=False)  # fmt: skip
    main(["train", "toy-drift", "--env", "X", "--run-dir", str(tmp_path / "cli"),
          "--total-steps", "60", "--no-doctor", *QUIET])  # fmt: skip
    main(["train", "toy-drift", "--env", "X", "--run-dir", str(tmp_path / "watched"),
          "--total-steps", "60", *QUIET])  # fmt: skip
    assert "doctor" not in summary(tmp_path / "py")
    assert "doctor" not in summary(tmp_path / "cli")
    # the same drifting run, watched: the KL past 0.1 is named
    assert summary(tmp_path / "watched")["doctor"] == ["kl-too-high"]


@pytest.mark.parametrize(
    ("request_fields", "message"),
    [
        ({"heal": True, "seeds": [0, 1]}, "heal=True heals one run as it trains"),
        ({"heal": True, "doctor": False}, "heal=True needs the doctor watching the run"),
        ({"heal_max": 2}, "heal_max=2 caps the rollbacks of heal=True"),
        ({"jobs": 2}, "jobs=2 sets how many seeds of seeds= train at once; pass seeds= too"),
        (
            {"seeds": [0, 1], "resume": True, "resume_from": 30},
            "resume_from=30 picks one run's checkpoint",
        ),
    ],
)
def test_combinations_no_run_can_carry_out_are_refused_before_anything_starts(
    tmp_path, request_fields, message
):
    run_dir = tmp_path / "r"
    request = TrainRequest("toy-drift", "X", run_dir=run_dir, **request_fields)
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        check_request(request)
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        launch(request)
    assert not run_dir.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--heal", "--no-doctor"], "--heal needs the doctor watching the run"),
        (["--seeds", "0", "1", "--resume-from", "3"], "--resume-from picks one run's checkpoint"),
        (["--heal-max", "2"], "--heal-max caps the rollbacks of --heal"),
    ],
)
def test_the_command_line_names_its_flags_in_the_same_refusals(tmp_path, capsys, flags, message):
    code = main(["train", "toy-drift", "--env", "X", "--run-dir", str(tmp_path / "r"), *flags,
                 *QUIET])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_a_group_folder_given_back_is_a_group_request(tmp_path):
    group = rlx.train("toy-drift", "X", run_dir=tmp_path / "g", seeds=[0, 1], jobs=1,
                      total_steps=20, progress=False)  # fmt: skip
    assert [run.status for run in group.runs] == ["completed", "completed"]
    request = TrainRequest("toy-drift", run_dir=tmp_path / "g", resume=True,
                           consent=ON_THE_COMMAND_LINE)  # fmt: skip
    assert request.is_group
    assert not TrainRequest("toy-drift", run_dir=tmp_path / "g" / "seed-0").is_group
