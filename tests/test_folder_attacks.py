"""Folders stay data: run and study folders attacked as their author could attack them (a folder
travels: papers, model hubs, colleagues), each attack beside the honest case, each verdict
asserted.

- a study's journal that names env code runs none of it on ``rlx tune --study-dir`` without
  ``--trust-env-code`` (consent is the only gate: with it, the code runs);
- links planted in a folder (``.tmp-config.json``, ``report.html``, a clip's temporary and
  final names, ``best.yaml``, ``videos/*.gif``) are never written through nor inlined: their
  targets stay as they were, and the page holds none of their bytes;
- a study trial whose journal records a run folder outside the study is one sentence;
- ``ray_address`` and ``allow_unisolated`` a folder records are dropped, with one line naming
  the flag, unless the user gives them on this command; a config file of the user's own keeps
  them;
- a ``checkpoints``, ``.tmp-model``, ``adapter``, ``tensorboard``, ``wandb`` or
  ``.rlx-previous`` link is never written through nor pruned through (refused in one sentence,
  or replaced); a copy reads only a folder's own regular files; ``latest`` and step files that
  are links are no checkpoints;
- a pipe planted as a journal, a ``progress.csv`` or a log, a log linked to ``/dev/zero`` and a
  line longer than :data:`rlx.runs.files.MAX_LINE_CHARS` are one sentence, never a hang;
- malformed content (a YAML alias bomb, JSON nested 100k deep, a TensorBoard "scalar" of shape
  [2], a metric named ``$...$``, an integer of 5000 digits) is one :class:`rlx.errors.RLXError`
  sentence, exit 2, or read as data: never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
from pathlib import Path

import pytest

import rlx
from rlx import registry
from rlx.cli import main
from rlx.errors import EnvError, RLXError
from tests.runs import toy_drift

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nthe user's key\n"


# ---------------------------------------------------------------------------- a toy with flags
@dataclasses.dataclass(frozen=True)
class FlagsConfig(toy_drift.DriftConfig):
    """toy-drift with the two fields only the user sets."""

    ray_address: str | None = None
    """join the Ray cluster at HOST:PORT (the toy joins nothing)"""
    allow_unisolated: bool = False
    """run model-written code unisolated (the toy runs none)"""


FLAGS = dataclasses.replace(toy_drift.DRIFT, name="toy-drift-flags", config=FlagsConfig)
if FLAGS.name not in registry._REGISTRY:
    registry.register(FLAGS)
QUICK = {"total_steps": 20, "progress": False, "doctor": False}


def cli(argv, capsys) -> tuple[int, str]:
    """``rlx ARGV`` in this process: its exit code and its stderr."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    return int(code or 0), capsys.readouterr().err


def one_sentence(err: str) -> None:
    assert "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err


def victim(tmp_path: Path) -> Path:
    """A file of the user's outside every folder (a private key)."""
    path = tmp_path / "id_rsa"
    path.write_bytes(SECRET)
    return path


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("toy") / "run"
    rlx.train(FLAGS.name, "X", run_dir=run, **QUICK)
    return run


def copy_run(source: Path, where: Path, name: str = "run") -> Path:
    run = where / name
    shutil.copytree(source, run, symlinks=True)
    return run


def edit_config(run: Path, **fields) -> None:
    path = run / "config.json"
    record = json.loads(path.read_text())
    record["config"].update(fields)
    path.write_text(json.dumps(record))


# ---------------------------------------------------------------------------- a study's env code
@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """An honest study of one tabular trial (a registered id: no code to consent to)."""
    pytest.importorskip("optuna")
    folder = tmp_path_factory.mktemp("study") / "study"
    result = rlx.tune("q-learning", "FrozenLake-v1", study_dir=folder, trials=1, episodes=1_000,
                      eval_episodes=20, env_kwargs={"is_slippery": False})  # fmt: skip
    assert result.best is not None and (folder / "best.yaml").is_file()
    return folder


def hostile_study(study: Path, where: Path, marker: Path) -> Path:
    """A copy of the study whose journal names ``os:system`` touching ``marker`` as its env."""
    from rlx.launch.tune import SETTINGS_ATTR, create_study

    folder = where / "study"
    shutil.copytree(study, folder, symlinks=True)
    journal = create_study(folder)
    settings = dict(journal.user_attrs[SETTINGS_ATTR])
    settings.update(env="os:system", env_kwargs={"command": f"touch {marker}"}, trials=2)
    journal.set_user_attr(SETTINGS_ATTR, settings)
    return folder


def test_a_study_resumed_runs_no_env_code_its_journal_names(study, tmp_path, capsys):
    marker = tmp_path / "MARKER"
    folder = hostile_study(study, tmp_path, marker)
    with pytest.raises(EnvError, match=r"'os:system'.*trust_env_code=True"):
        rlx.tune(study_dir=folder)
    code, err = cli(["tune", "--study-dir", folder], capsys)
    assert code == 2 and "--trust-env-code" in err and "the study folder" in err
    one_sentence(err)
    assert not marker.exists()
    # consent is the only gate: with it, the folder's code runs (and fails as an env)
    with pytest.raises(Exception):  # noqa: B017 - os.system returns no env
        rlx.tune(study_dir=folder, trust_env_code=True)
    assert marker.exists()


def test_a_study_of_a_registered_id_resumes_without_consent(study, tmp_path):
    folder = tmp_path / "study"
    shutil.copytree(study, folder, symlinks=True)
    result = rlx.tune(study_dir=folder, trials=2)
    assert len(result.trials) == 2


# ---------------------------------------------------------------------------- links in a study
def test_a_trial_run_folder_outside_the_study_is_one_sentence(study, tmp_path, capsys):
    from rlx.launch.tune import create_study

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    honest = tmp_path / "honest"
    shutil.copytree(study, honest, symlinks=True)
    code, err = cli(["report", honest], capsys)
    assert code == 0 and (honest / "report.html").is_file()
    for recorded in (str(outside), "../elsewhere", "trial-0000/../../elsewhere"):
        folder = tmp_path / f"study-{abs(hash(recorded))}"
        shutil.copytree(study, folder, symlinks=True)
        journal = create_study(folder)
        trial = journal.ask()
        trial.set_user_attr("run_dir", recorded)
        journal.tell(trial, 1.0)
        code, err = cli(["report", folder], capsys)
        assert code == 2 and "not a folder inside the study" in err
        one_sentence(err)
        assert sorted(p.name for p in outside.iterdir()) == ["config.json"]


def test_a_trial_folder_linked_out_of_the_study_is_refused(study, tmp_path, capsys):
    outside = copy_run(study / "trial-0000", tmp_path, "elsewhere")
    folder = tmp_path / "study"
    shutil.copytree(study, folder, symlinks=True)
    shutil.rmtree(folder / "trial-0000")
    (folder / "trial-0000").symlink_to(outside)
    code, err = cli(["report", folder], capsys)
    assert code == 2 and "not a folder inside the study" in err
    assert not (outside / "report.html").exists()


def test_best_yaml_linked_to_a_key_is_neither_inlined_nor_written_through(study, tmp_path):
    from rlx.diagnostics.study_report import study_report
    from rlx.launch.tune import read_study, write_best

    key = victim(tmp_path)
    folder = tmp_path / "study"
    shutil.copytree(study, folder, symlinks=True)
    honest = study_report(folder).read_text()
    assert "algo: q-learning" in honest  # the study's own best.yaml is shown
    (folder / "best.yaml").unlink()
    (folder / "best.yaml").symlink_to(key)
    (folder / "report.html").unlink()
    page = study_report(folder).read_text()
    assert "the user&#x27;s key" not in page and "PRIVATE KEY" not in page
    write_best(read_study(folder))  # replaces the link, never writes through it
    assert key.read_bytes() == SECRET
    assert not (folder / "best.yaml").is_symlink()
    assert "algo: q-learning" in (folder / "best.yaml").read_text()


def test_a_linked_journal_is_refused(study, tmp_path, capsys):
    folder = tmp_path / "study"
    shutil.copytree(study, folder, symlinks=True)
    real = tmp_path / "real.journal"
    shutil.move(folder / "study.journal", real)
    (folder / "study.journal").symlink_to(real)
    before = real.read_bytes()
    code, err = cli(["tune", "--study-dir", folder, "--trials", "2"], capsys)
    assert code == 2 and "is a link" in err
    one_sentence(err)
    assert real.read_bytes() == before


# ---------------------------------------------------------------------------- links in a run
def test_resume_never_writes_through_a_planted_temporary(toy_run, tmp_path, capsys):
    key = victim(tmp_path)
    run = copy_run(toy_run, tmp_path)
    (run / ".tmp-config.json").symlink_to(key)
    (run / ".tmp-summary.json").symlink_to(key)
    code, err = cli(["train", FLAGS.name, "--resume", "--run-dir", run, "--total-steps", 30,
                     "--no-progress"], capsys)  # fmt: skip
    assert code == 0, err
    assert key.read_bytes() == SECRET
    assert json.loads((run / "summary.json").read_text())["steps"] == 30  # the honest resume


def test_logs_planted_as_links_are_never_appended_to(toy_run, tmp_path, capsys):
    key = victim(tmp_path)
    run = copy_run(toy_run, tmp_path)
    for name in ("metrics.jsonl", "episodes.csv"):
        (run / name).unlink(missing_ok=True)
        (run / name).symlink_to(key)
    code, err = cli(["train", FLAGS.name, "--resume", "--run-dir", run, "--total-steps", 30,
                     "--no-progress"], capsys)  # fmt: skip
    assert key.read_bytes() == SECRET
    assert code == 0 or (code == 2 and "Traceback" not in err)


def test_report_never_writes_through_a_planted_page(toy_run, tmp_path, capsys):
    key = victim(tmp_path)
    honest = copy_run(toy_run, tmp_path, "honest")
    code, _ = cli(["report", honest], capsys)
    assert code == 0 and "<html" in (honest / "report.html").read_text()
    run = copy_run(toy_run, tmp_path)
    (run / "report.html").symlink_to(key)
    code, err = cli(["report", run], capsys)
    assert code == 0, err
    assert key.read_bytes() == SECRET
    assert not (run / "report.html").is_symlink()


def test_report_inlines_no_clip_that_is_a_link(toy_run, tmp_path):
    from rlx.diagnostics.report import report

    key = victim(tmp_path)
    honest = copy_run(toy_run, tmp_path, "honest")
    (honest / "videos").mkdir()
    (honest / "videos" / "eval-step20.gif").write_bytes(b"GIF89a-honest")
    assert "data:image/gif;base64," in report(honest).read_text()
    for planted in ("file", "folder"):
        run = copy_run(toy_run, tmp_path, planted)
        if planted == "file":
            (run / "videos").mkdir()
            (run / "videos" / "eval-step20.gif").symlink_to(key)
        else:
            (tmp_path / "keys").mkdir()
            (tmp_path / "keys" / "eval-step20.gif").write_bytes(SECRET)
            (run / "videos").symlink_to(tmp_path / "keys")
        page = report(run).read_text()
        assert "data:image/gif" not in page and "LS0tLS1CRUdJTi" not in page  # base64 of it


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory) -> Path:
    pytest.importorskip("pygame", reason="CartPole draws its frames with pygame")
    run = tmp_path_factory.mktemp("ppo") / "run"
    rlx.train("ppo", "CartPole-v1", total_steps=256, seed=0, run_dir=run, progress=False)
    return run


def test_eval_video_never_writes_through_a_planted_clip(ppo_run, tmp_path, capsys):
    key = victim(tmp_path)
    step = rlx.load(ppo_run).checkpoint_step
    honest = copy_run(ppo_run, tmp_path, "honest")
    code, err = cli(["eval", honest, "--episodes", 1, "--video"], capsys)
    assert code == 0, err
    assert (honest / "videos" / f"eval-step{step}.gif").read_bytes().startswith(b"GIF8")
    run = copy_run(ppo_run, tmp_path)
    (run / "videos").mkdir()
    for name in (f".eval-step{step}.gif.part", f"eval-step{step}.gif"):
        (run / "videos" / name).symlink_to(key)
    code, err = cli(["eval", run, "--episodes", 1, "--video"], capsys)
    assert code == 0, err
    assert key.read_bytes() == SECRET
    assert (run / "videos" / f"eval-step{step}.gif").read_bytes().startswith(b"GIF8")
    # a videos folder that is a link out of the run: refused in one sentence
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = copy_run(ppo_run, tmp_path, "linked")
    (linked / "videos").symlink_to(elsewhere)
    code, err = cli(["eval", linked, "--episodes", 1, "--video"], capsys)
    assert code == 2 and "link" in err
    one_sentence(err)
    assert list(elsewhere.iterdir()) == []


# ---------------------------------------------------------------------------- flags a folder sets
def test_resume_drops_what_only_the_user_sets(toy_run, tmp_path, capsys):
    run = copy_run(toy_run, tmp_path)
    edit_config(run, ray_address="10.6.6.6:6379", allow_unisolated=True)
    code, err = cli(["train", FLAGS.name, "--resume", "--run-dir", run, "--total-steps", 30,
                     "--no-progress"], capsys)  # fmt: skip
    assert code == 0, err
    assert "--ray-address 10.6.6.6:6379" in err and "--allow-unisolated" in err
    config = json.loads((run / "config.json").read_text())["config"]
    assert config["ray_address"] is None and config["allow_unisolated"] is False
    # the user's flags on this command keep them
    run = copy_run(toy_run, tmp_path, "given")
    edit_config(run, ray_address="10.6.6.6:6379", allow_unisolated=True)
    code, err = cli(["train", FLAGS.name, "--resume", "--run-dir", run, "--total-steps", 30,
                     "--ray-address", "10.1.1.1:6379", "--allow-unisolated", "--no-progress"],
                    capsys)  # fmt: skip
    assert code == 0, err
    assert "warning" not in err
    config = json.loads((run / "config.json").read_text())["config"]
    assert config["ray_address"] == "10.1.1.1:6379" and config["allow_unisolated"] is True


def test_the_python_resume_drops_them_too(toy_run, tmp_path, capsys):
    run = copy_run(toy_run, tmp_path)
    edit_config(run, ray_address="10.6.6.6:6379", allow_unisolated=True)
    rlx.train(FLAGS.name, run_dir=run, resume=True, total_steps=30, progress=False)
    assert "ray_address='10.6.6.6:6379'" in capsys.readouterr().err
    config = json.loads((run / "config.json").read_text())["config"]
    assert config["ray_address"] is None and config["allow_unisolated"] is False
    run = copy_run(toy_run, tmp_path, "given")
    rlx.train(FLAGS.name, run_dir=run, resume=True, total_steps=30, progress=False,
              allow_unisolated=True)  # fmt: skip
    assert json.loads((run / "config.json").read_text())["config"]["allow_unisolated"] is True


def test_a_folders_config_file_is_data_and_the_users_own_is_not(tmp_path, capsys):
    text = f"algo: {FLAGS.name}\nenv: X\nconfig:\n  ray_address: 10.6.6.6:6379\n  total_steps: 20\n"
    study = tmp_path / "study"
    study.mkdir()
    (study / "study.journal").write_text("")
    (study / "best.yaml").write_text(text)
    own = tmp_path / "mine.yaml"
    own.write_text(text)
    code, err = cli(["train", FLAGS.name, "--config", study / "best.yaml", "--run-dir",
                     tmp_path / "a", "--no-progress"], capsys)  # fmt: skip
    assert code == 0 and "--ray-address 10.6.6.6:6379" in err
    assert json.loads((tmp_path / "a" / "config.json").read_text())["config"]["ray_address"] is None
    code, err = cli(["train", FLAGS.name, "--config", own, "--run-dir", tmp_path / "b",
                     "--no-progress"], capsys)  # fmt: skip
    assert code == 0 and "warning" not in err
    recorded = json.loads((tmp_path / "b" / "config.json").read_text())["config"]
    assert recorded["ray_address"] == "10.6.6.6:6379"


# ---------------------------------------------------------------------------- malformed content
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_a_yaml_alias_bomb_is_one_sentence(tmp_path, capsys):
    honest = tmp_path / "honest.yaml"
    honest.write_text("a: &a [1, 2]\nb: *a\nconfig:\n  total_steps: 20\n")
    from rlx.launch.config_file import read_config_file

    assert read_config_file(honest).fields["b"] == [1, 2]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    code, err = cli(["train", FLAGS.name, "--config", bomb, "--run-dir", tmp_path / "r"], capsys)
    assert code == 2 and str(bomb) in err and "expands into more than" in err
    one_sentence(err)


def deep(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("command", ["doctor", "report"])
def test_json_nested_100k_deep_is_one_sentence(toy_run, tmp_path, capsys, command):
    honest = copy_run(toy_run, tmp_path, "honest")
    assert cli([command, honest], capsys)[0] == 0
    run = copy_run(toy_run, tmp_path)
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 21, "x": ' + deep() + "}\n")
    code, err = cli([command, run], capsys)
    assert code == 2 and "metrics.jsonl, line" in err and "nested deeper" in err
    one_sentence(err)
    # summary.json is read as data: too deep, it is no summary
    run = copy_run(toy_run, tmp_path, "summary")
    (run / "summary.json").write_text(deep())
    code, err = cli([command, run], capsys)
    assert code in (0, 1, 3) and "Traceback" not in err
    # config.json too deep: one sentence naming it
    run = copy_run(toy_run, tmp_path, "config")
    (run / "config.json").write_text('{"algo": "x", "config": ' + deep() + "}")
    code, err = cli(["eval", run], capsys)
    assert code == 2 and "config.json" in err and "nested deeper" in err
    one_sentence(err)


def trainer_state(tmp_path: Path, loss: str) -> Path:
    folder = tmp_path / "trl"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(
        '{"global_step": 2, "log_history": [{"step": 1, "loss": 1.0}, {"step": 2, "loss": '
        + loss + "}]}"
    )  # fmt: skip
    return folder


@pytest.mark.parametrize("case", ["honest", "digits", "deep"])
def test_a_trl_log_with_a_huge_integer_or_deep_json(tmp_path, capsys, case):
    loss = {"honest": "0.5", "digits": "9" * 5000, "deep": deep()}[case]
    folder = trainer_state(tmp_path, loss)
    code, err = cli(["doctor", folder], capsys)
    assert "Traceback" not in err
    if case == "deep":
        assert code == 2 and "trainer_state.json" in err and "nested deeper" in err
        one_sentence(err)
    else:
        assert code != 2, err
        log = rlx.diagnostics.sources.read_run(folder)
        assert len(log.get("loss")) == 2  # the 5000 digits read as the (infinite) float they are


def write_events(folder: Path, shape: tuple[int, ...]) -> None:
    """A TensorBoard event file with a ``scalars`` tensor of ``shape`` at steps 1 and 2."""
    pytest.importorskip("tensorboard")
    import numpy as np
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    writer = EventFileWriter(str(folder))
    for step in (1, 2):
        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
        )
        tensor = tensor_util.make_tensor_proto(np.full(shape, float(step), dtype=np.float32))
        value = summary_pb2.Summary.Value(tag="loss", tensor=tensor, metadata=metadata)
        writer.add_event(event_pb2.Event(step=step, summary=summary_pb2.Summary(value=[value])))
    writer.close()


@pytest.mark.parametrize("shape", [(), (2,)])
def test_a_tensorboard_scalar_that_is_no_scalar(tmp_path, capsys, shape):
    write_events(tmp_path, shape)
    _, err = cli(["doctor", tmp_path], capsys)
    assert "Traceback" not in err
    log = rlx.diagnostics.sources.read_run(tmp_path)
    assert len(log.get("loss") or ()) == (2 if shape == () else 0)


@pytest.mark.parametrize("name", ["loss", r"$\undefinedmacro{$", "$x$ and $", "$$"])
def test_a_metric_named_as_mathtext_is_drawn_as_text(toy_run, tmp_path, name):
    from rlx.diagnostics.report import report

    run = copy_run(toy_run, tmp_path)
    with (run / "metrics.jsonl").open("a") as f:
        for step in (21, 22, 23):
            f.write(json.dumps({"step": step, name: step / 10}) + "\n")
    page = report(run).read_text()
    assert f'data-metric="{name}"' in page or json.dumps(name)[1:-1] in page


def test_every_refusal_is_an_rlx_error():
    from rlx.runs.files import load_json_file

    with pytest.raises(RLXError, match="does not exist"):
        load_json_file(Path("/nonexistent/summary.json"))


# ---------------------------------------------------------------------------- planted folders
def listing(folder: Path) -> dict[str, bytes]:
    """What a folder holds (names and bytes), to assert it unchanged."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}  # fmt: skip


def elsewhere(tmp_path: Path) -> Path:
    """Someone else's folder, holding what looks like old checkpoints and a key."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    for step in (1, 2, 3):
        (folder / f"step_{step:012d}.pt").write_bytes(SECRET)
    (folder / "id_rsa").write_bytes(SECRET)
    return folder


def test_checkpoints_linked_elsewhere_are_neither_written_nor_pruned(tmp_path, capsys):
    from rlx.runs.checkpoints import list_checkpoints, save_checkpoint

    honest = tmp_path / "honest"
    for step in (1, 2, 3):
        save_checkpoint(honest, step, {"x": step}, keep=2)
    assert [s for s, _ in list_checkpoints(honest)] == [2, 3]

    other = elsewhere(tmp_path)
    before = listing(other)
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").symlink_to(other)
    with pytest.raises(RLXError, match="link"):
        save_checkpoint(run, 4, {"x": 4}, keep=1)
    assert listing(other) == before
    code, err = cli(["train", FLAGS.name, "--env", "X", "--run-dir", run, "--total-steps", 20,
                     "--no-progress"], capsys)  # fmt: skip
    assert code == 2 and "checkpoints" in err
    one_sentence(err)
    assert listing(other) == before and sorted(p.name for p in other.iterdir()) == sorted(before)


def test_pruning_unlinks_only_the_folders_own_step_files(tmp_path):
    from rlx.runs.checkpoints import list_checkpoints, save_checkpoint

    key = victim(tmp_path)
    run = tmp_path / "run"
    save_checkpoint(run, 5, {"x": 5}, keep=1)
    planted = run / "checkpoints" / f"step_{1:012d}.pt"
    planted.symlink_to(key)  # an old "step" that is a link to the user's key
    assert [s for s, _ in list_checkpoints(run)] == [5]  # a link is no checkpoint
    save_checkpoint(run, 6, {"x": 6}, keep=1)
    assert key.read_bytes() == SECRET and planted.is_symlink()
    assert [s for s, _ in list_checkpoints(run)] == [6]


def test_latest_pointing_out_of_the_folder_is_not_loaded(tmp_path):
    from rlx.runs.checkpoints import latest_checkpoint, save_checkpoint

    key = victim(tmp_path)
    run = tmp_path / "run"
    save_checkpoint(run, 5, {"x": 5})
    assert latest_checkpoint(run) == run / "checkpoints" / f"step_{5:012d}.pt"
    (run / "checkpoints" / "latest").unlink()
    (run / "checkpoints" / "latest").symlink_to(key)
    assert latest_checkpoint(run) == run / "checkpoints" / f"step_{5:012d}.pt"


def test_a_copy_reads_only_the_folders_own_regular_files(tmp_path):
    from rlx.runs.files import copy_regular

    key = victim(tmp_path)
    parent, child = tmp_path / "parent", tmp_path / "child"
    parent.mkdir()
    (parent / "metrics.jsonl").write_text('{"step": 1}\n')
    copy_regular(parent / "metrics.jsonl", child / "metrics.jsonl", source_root=parent,
                 root=child)  # fmt: skip
    assert (child / "metrics.jsonl").read_text() == '{"step": 1}\n'

    (parent / "episodes.csv").symlink_to(key)  # a link read as the folder's own file: never
    with pytest.raises(RLXError, match="link"):
        copy_regular(parent / "episodes.csv", child / "episodes.csv", source_root=parent,
                     root=child)  # fmt: skip
    os.mkfifo(parent / "summary.json")  # a pipe: refused before a byte is read, no hang
    with pytest.raises(RLXError, match="not a regular file"):
        copy_regular(parent / "summary.json", child / "summary.json", source_root=parent,
                     root=child)  # fmt: skip
    (parent / "checkpoints").symlink_to(tmp_path)  # the source under a linked folder
    with pytest.raises(RLXError, match="link"):
        copy_regular(parent / "checkpoints" / "id_rsa", child / "x", source_root=parent,
                     root=child)  # fmt: skip
    other = elsewhere(tmp_path)
    before = listing(other)
    (child / "checkpoints").symlink_to(other)  # the destination under a linked folder
    with pytest.raises(RLXError, match="link"):
        copy_regular(parent / "metrics.jsonl", child / "checkpoints" / "step.pt",
                     source_root=parent, root=child)  # fmt: skip
    assert listing(other) == before and key.read_bytes() == SECRET
    assert sorted(p.name for p in child.iterdir()) == ["checkpoints", "metrics.jsonl"]


def test_a_planted_previous_folder_is_never_written_through(toy_run, tmp_path, capsys):
    other = elsewhere(tmp_path)
    before = listing(other)
    run = copy_run(toy_run, tmp_path)
    (run / ".rlx-previous").symlink_to(other)
    code, err = cli(["train", FLAGS.name, "--resume", "--run-dir", run, "--total-steps", 30,
                     "--no-progress"], capsys)  # fmt: skip
    assert code == 0, err  # the honest resume: the link is removed, never followed
    assert listing(other) == before
    assert json.loads((run / "summary.json").read_text())["steps"] == 30


# ---------------------------------------------------------------------------- libraries' folders
class FakeModel:
    """What Hugging Face does: writes files by name in the folder it is given."""

    def save_pretrained(self, folder: Path) -> None:
        (Path(folder) / "model.safetensors").write_bytes(b"weights")


class FakeTokenizer:
    def save_pretrained(self, folder: Path) -> None:
        (Path(folder) / "tokenizer_config.json").write_text('{"tokenizer_class": "X"}')


def test_save_pretrained_never_writes_through_a_planted_model_folder(tmp_path):
    pytest.importorskip("transformers")
    from rlx.llm.models import save_pretrained

    honest = tmp_path / "honest"
    honest.mkdir()
    save_pretrained(FakeModel(), FakeTokenizer(), honest / "model")  # type: ignore[arg-type]
    assert (honest / "model" / "model.safetensors").read_bytes() == b"weights"

    other = elsewhere(tmp_path)
    before = listing(other)
    run = tmp_path / "run"
    run.mkdir()
    (run / ".tmp-model").symlink_to(other)
    (run / "adapter").symlink_to(other)
    for name in ("model", "adapter"):
        save_pretrained(FakeModel(), FakeTokenizer(), run / name)  # type: ignore[arg-type]
        assert not (run / name).is_symlink()
        assert (run / name / "model.safetensors").read_bytes() == b"weights"
    assert listing(other) == before


def test_a_linked_tensorboard_or_wandb_folder_is_one_sentence(tmp_path, capsys):
    from rlx.runs.logger import MetricLogger

    honest = tmp_path / "honest"
    honest.mkdir()
    pytest.importorskip("tensorboard")
    MetricLogger(honest, tensorboard=True).close()
    assert (honest / "tensorboard").is_dir() and not (honest / "tensorboard").is_symlink()

    other = elsewhere(tmp_path)
    before = listing(other)
    run = tmp_path / "run"
    run.mkdir()
    (run / "tensorboard").symlink_to(other)
    (run / "wandb").symlink_to(other)
    with pytest.raises(RLXError, match="link"):
        MetricLogger(run, tensorboard=True, write=True)
    pytest.importorskip("wandb")
    with pytest.raises(RLXError, match="link"):
        MetricLogger(run, write=True, wandb={"name": "x"})
    assert listing(other) == before
    code, err = cli(["train", FLAGS.name, "--env", "X", "--run-dir", run, "--total-steps", 20,
                     "--no-progress", "--tensorboard"], capsys)  # fmt: skip
    assert code == 2 and "link" in err
    one_sentence(err)
    assert listing(other) == before


# ---------------------------------------------------------------------------- pipes, devices, lines
@pytest.fixture
def no_hang():
    """Fail, instead of hanging the suite, when a reader waits on a pipe."""

    def hung(signum, frame):
        raise AssertionError("a reader hung on a pipe")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_pipe_planted_as_the_journal_is_one_sentence(tmp_path, capsys, no_hang):
    pytest.importorskip("optuna")
    folder = tmp_path / "study"
    folder.mkdir()
    os.mkfifo(folder / "study.journal")
    code, err = cli(["tune", "q-learning", "--env", "FrozenLake-v1", "--study-dir", folder,
                     "--trials", 1], capsys)  # fmt: skip
    assert code == 2 and "study.journal" in err and "not a regular file" in err
    one_sentence(err)


def test_the_journal_check_opens_a_real_file(tmp_path):
    from rlx.runs.files import check_regular

    honest = tmp_path / "study.journal"
    assert check_regular(honest, create=True) == honest and honest.is_file()
    key = victim(tmp_path)
    linked = tmp_path / "linked.journal"
    linked.symlink_to(key)
    with pytest.raises(RLXError, match="is a link"):
        check_regular(linked, create=True)
    assert key.read_bytes() == SECRET


def test_a_pipe_planted_as_progress_csv_is_one_sentence(tmp_path, capsys, no_hang):
    honest = tmp_path / "honest"
    honest.mkdir()
    (honest / "progress.csv").write_text("time/total_timesteps,rollout/ep_rew_mean\n1,2.0\n")
    code, err = cli(["doctor", honest], capsys)
    assert code in (0, 1), err
    hostile = tmp_path / "sb3"
    hostile.mkdir()
    os.mkfifo(hostile / "progress.csv")
    code, err = cli(["doctor", hostile], capsys)
    assert code == 2 and "not a regular file" in err
    one_sentence(err)


@pytest.mark.parametrize("case", ["progress-line", "metrics-line", "episodes-line", "dev-zero",
                                  "fifo-metrics"])  # fmt: skip
def test_unbounded_logs_are_one_sentence(toy_run, tmp_path, capsys, case, no_hang):
    from rlx.runs.files import MAX_LINE_CHARS

    huge = "1" * (MAX_LINE_CHARS + 10)
    if case == "progress-line":
        target = tmp_path / "sb3"
        target.mkdir()
        (target / "progress.csv").write_text(f"time/total_timesteps,loss\n1,{huge}\n")
    else:
        target = copy_run(toy_run, tmp_path)
        metrics, episodes = target / "metrics.jsonl", target / "episodes.csv"
        if case == "metrics-line":
            with metrics.open("a") as handle:
                handle.write('{"step": 99, "loss": ' + huge + "}\n")
        elif case == "episodes-line":
            with episodes.open("a") as handle:
                handle.write(f"99,0.1,{huge},3\n")
        elif case == "dev-zero":
            episodes.unlink()
            episodes.symlink_to("/dev/zero")
        else:
            metrics.unlink()
            os.mkfifo(metrics)
    if case.startswith(("episodes", "dev")):  # the doctor reads episodes.csv only when needed
        from rlx.runs import read_episodes

        refused = r"characters rlx reads|not a regular file|is \(or lies under\) a link"
        with pytest.raises(RLXError, match=refused):
            read_episodes(target)
        argv = ["train", FLAGS.name, "--resume", "--run-dir", target, "--total-steps", 30,
                "--no-progress"]  # fmt: skip
    else:
        argv = ["doctor", target]
    code, err = cli(argv, capsys)
    assert code == 2 and ("characters rlx reads" in err or "not a regular" in err
                          or "is (or lies under) a link" in err
                          or "symbolic link" in err), err  # fmt: skip
    one_sentence(err)


# ---------------------------------------------------------------------- study and group records
class StoppedError(RLXError):
    """The spy's stop: the trial ends before training."""


def spy_train(monkeypatch) -> list[dict]:
    """The one way a study trains (``rlx.launch.tune.train_group``) replaced by a spy that
    records its keywords and the config fields it would train with, and stops the trial (no
    training, no Ray: what reaches it is the verdict)."""
    import rlx.launch.tune as tune_module

    calls: list[dict] = []

    def spy(*args, **kwargs):
        calls.append({**kwargs, **kwargs.get("overrides", {})})
        raise StoppedError("stopped by the test.")

    monkeypatch.setattr(tune_module, "train_group", spy)
    return calls


def study_with_fixed(study: Path, where: Path, name: str, **fixed) -> Path:
    """A copy of the study whose journal records ``fixed`` for every trial, one trial to go."""
    from rlx.launch.tune import SETTINGS_ATTR, create_study

    folder = where / name
    shutil.copytree(study, folder, symlinks=True)
    journal = create_study(folder)
    settings = dict(journal.user_attrs[SETTINGS_ATTR])
    settings.update(fixed={**settings["fixed"], **fixed}, trials=2)
    journal.set_user_attr(SETTINGS_ATTR, settings)
    return folder


def test_a_studys_recorded_ray_address_never_reaches_a_trial(study, tmp_path, capsys, monkeypatch):
    from rlx.launch.tune import read_settings

    calls = spy_train(monkeypatch)
    # honest: a study that records nothing only the user sets resumes without a word
    honest = study_with_fixed(study, tmp_path, "honest")
    with pytest.raises(StoppedError):
        rlx.tune(study_dir=honest)
    assert "warning" not in capsys.readouterr().err and "ray_address" not in calls[-1]
    # hostile: fixed {"ray_address": ..., "allow_unisolated": true} in the journal
    hostile = study_with_fixed(study, tmp_path, "hostile", ray_address="127.0.0.1:9",
                               allow_unisolated=True)  # fmt: skip
    assert "ray_address" not in read_settings(hostile).fixed
    with pytest.raises(StoppedError):
        rlx.tune(study_dir=hostile)
    err = capsys.readouterr().err
    assert "ray_address='127.0.0.1:9'" in err and "allow_unisolated=True" in err
    assert "ray_address" not in calls[-1] and "allow_unisolated" not in calls[-1]
    code, err = cli(["tune", "--study-dir", hostile], capsys)
    assert code == 2 and "--ray-address 127.0.0.1:9" in err and "--allow-unisolated" in err
    assert "ray_address" not in calls[-1]
    # the user's own on this command reach the trial, unrecorded, without a warning
    code, err = cli(["tune", "--study-dir", hostile, "--ray-address", "10.1.1.1:6379"], capsys)
    assert code == 2 and "ray_address=" not in err and "--allow-unisolated" in err
    assert calls[-1]["ray_address"] == "10.1.1.1:6379"
    with pytest.raises(StoppedError):
        rlx.tune(study_dir=honest, ray_address="10.1.1.1:6379")
    assert "warning" not in capsys.readouterr().err
    assert calls[-1]["ray_address"] == "10.1.1.1:6379"
    assert "ray_address" not in read_settings(honest).fixed  # never recorded


def seed_group(tmp_path: Path, name: str = "group") -> Path:
    group = tmp_path / name
    rlx.train(FLAGS.name, "X", seeds=[0], run_dir=group, **QUICK)
    return group


def test_a_groups_recorded_overrides_keep_nothing_only_the_user_sets(tmp_path, capsys):
    def resume(group: Path, *flags) -> tuple[int, str]:
        return cli(["train", FLAGS.name, "--seeds", 0, 1, "--resume", "--run-dir", group,
                    "--no-progress", *flags], capsys)  # fmt: skip

    for name in ("honest", "hostile", "given"):
        group = seed_group(tmp_path, name)
        if name != "honest":
            record = json.loads((group / "group.json").read_text())
            record["overrides"] = {**record.get("overrides", {}), "ray_address": "127.0.0.1:9"}
            (group / "group.json").write_text(json.dumps(record))
        code, err = resume(group, *(["--ray-address", "10.1.1.1:6379"] if name == "given" else []))
        assert code == 0, err
        recorded = json.loads((group / "seed-1" / "config.json").read_text())["config"]
        if name == "honest":
            assert "warning" not in err and recorded["ray_address"] is None
        elif name == "hostile":
            assert "--ray-address 127.0.0.1:9" in err and recorded["ray_address"] is None
        else:
            assert "warning" not in err and recorded["ray_address"] == "10.1.1.1:6379"


def test_a_seed_folder_linked_out_of_the_group_is_refused(tmp_path, capsys):
    honest = seed_group(tmp_path, "honest")
    code, err = cli(["train", FLAGS.name, "--seeds", 0, 1, "--resume", "--run-dir", honest,
                     "--no-progress"], capsys)  # fmt: skip
    assert code == 0 and (honest / "seed-1" / "config.json").is_file(), err
    hostile = seed_group(tmp_path, "hostile")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mine.txt").write_bytes(SECRET)
    (hostile / "seed-1").symlink_to(outside)
    code, err = cli(["train", FLAGS.name, "--seeds", 0, 1, "--resume", "--run-dir", hostile,
                     "--no-progress"], capsys)  # fmt: skip
    assert code == 2 and "seed-1" in err and "is a link" in err
    one_sentence(err)
    assert sorted(p.name for p in outside.iterdir()) == ["mine.txt"]


# ---------------------------------------------------------------------------- reads follow no link
@pytest.mark.parametrize("name", ["summary.json", "config.json", "metrics.jsonl"])
def test_a_folder_file_linked_to_a_secret_is_never_read(toy_run, tmp_path, capsys, name):
    from rlx.diagnostics.report import report

    secret = tmp_path / "kaggle.json"
    secret.write_text('{"username": "victim", "key": "SECRET-KEY-0123"}\n')
    honest = copy_run(toy_run, tmp_path, "honest")
    code, err = cli(["doctor", honest], capsys)
    assert code in (0, 1), err
    assert "SECRET" not in report(honest).read_text()
    run = copy_run(toy_run, tmp_path, "hostile")
    (run / name).unlink()
    (run / name).symlink_to(secret)
    capsys.readouterr()
    code = main(["doctor", str(run)])
    out, err = capsys.readouterr()
    assert "SECRET" not in out + err
    assert code in (0, 1, 2)  # read as missing (the doctor needs only the metrics), or refused
    if code == 2:
        assert "is (or lies under) a link" in err
        one_sentence(err)
    code, err = cli(["report", run], capsys)
    assert "SECRET" not in err
    assert not (run / "report.html").exists() or "SECRET" not in (run / "report.html").read_text()
    with pytest.raises(RLXError, match=r"is \(or lies under\) a link"):
        rlx.load(run) if name == "config.json" else rlx.runs.files.load_json_file(run / name)


def test_a_hard_link_to_another_users_file_is_not_inlined(tmp_path):
    from rlx.runs.files import read_regular

    own = tmp_path / "clip.gif"
    own.write_bytes(b"GIF89a-honest")
    assert read_regular(own, tmp_path) == b"GIF89a-honest"
    if os.getuid() != 0:
        pytest.skip("making a file another user owns needs root")
    theirs = tmp_path / "theirs"
    theirs.write_bytes(SECRET)
    os.chown(theirs, 12345, 12345)
    os.link(theirs, tmp_path / "linked.gif")
    with pytest.raises(RLXError, match="hard link to a file another user owns"):
        read_regular(tmp_path / "linked.gif", tmp_path)


def test_a_checkpoint_that_is_a_link_or_a_zip_bomb_is_one_sentence(tmp_path):
    import zipfile

    import numpy as np

    from rlx.errors import CheckpointError
    from rlx.runs.checkpoints import load_checkpoint, save_checkpoint

    honest = save_checkpoint(tmp_path / "run", 10, {"w": np.ones(3)})
    assert load_checkpoint(honest)[0] == 10 and load_checkpoint(tmp_path / "run")[0] == 10
    linked = tmp_path / "linked" / "checkpoints"
    linked.mkdir(parents=True)
    (linked / honest.name).symlink_to(honest)
    with pytest.raises(RLXError, match=r"is \(or lies under\) a link"):
        load_checkpoint(linked / honest.name)
    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a0.npy", b"\0" * (64 * 1024 * 1024))
    assert bomb.stat().st_size < 1024 * 1024
    with pytest.raises(CheckpointError, match="unpacks to"):
        load_checkpoint(bomb)


# ---------------------------------------------------------------------------- journals, YAML, logs
def journal_with(study: Path, where: Path, name: str, line: str, *, before_end: bool) -> Path:
    """A copy of the study with ``line`` in its journal (before the trial's end: still
    applied by Optuna; else last)."""
    folder = where / name
    shutil.copytree(study, folder, symlinks=True)
    journal = folder / "study.journal"
    lines = journal.read_bytes().splitlines(keepends=True)
    end = max(i for i, ln in enumerate(lines) if b'"op_code":6' in ln or b'"op_code": 6' in ln)
    at = end if before_end else len(lines)
    journal.write_bytes(
        b"".join([*lines[:at], line.encode("utf-8", "surrogateescape"), *lines[at:]])
    )
    return folder


ATTR = '{"op_code":8,"worker_id":"w","trial_id":0,"user_attr":%s}\n'


@pytest.mark.parametrize("line", [
    ATTR % '{"config":"abc"}', ATTR % '{"config":[1,2]}', ATTR % '{"finding":"abc"}',
    ATTR % '{"pruned_by":[1]}', ATTR % '{"error":{"a":1}}', ATTR % '{"worker":[1,2]}',
    ATTR % '{"worker":{"host":"h","pid":"abc"}}', ATTR % '{"worker":{"host":"h","pid":1e400}}',
    ATTR % ('{"x":' + "9" * 5000 + "}"), ATTR % ('{"x":' + "[" * 100_000 + "]" * 100_000 + "}"),
    '{"op_code":99,"worker_id":"w"}\n', ATTR % '{"x":"\udcff"}',
    '{"op_code":2,"worker_id":"w","study_id":0,"user_attr":{"rlx":{"algo":"q-learning"}}}\n',
])  # fmt: skip
def test_a_hostile_journal_line_is_one_sentence(study, tmp_path, capsys, line):
    honest = journal_with(study, tmp_path, "honest", ATTR % '{"note":"fine"}', before_end=True)
    code, err = cli(["report", honest], capsys)
    assert code == 0, err
    folder = journal_with(study, tmp_path, "hostile", line, before_end=True)
    code, err = cli(["report", folder], capsys)
    assert code == 2 and "study.journal" in err, err
    one_sentence(err)
    code, err = cli(["tune", "--study-dir", folder, "--trials", 2], capsys)  # may run a trial first
    assert code == 2 and "study.journal" in err, err
    one_sentence(err.strip().splitlines()[-1])


@pytest.mark.parametrize("value", ["2001-13-45", "9" * 5000, ":".join(["1"] * 3000),
                                   "!!timestamp 2001-13-45"])  # fmt: skip
def test_a_yaml_scalar_yaml_cannot_convert_is_one_sentence(tmp_path, capsys, value):
    honest = tmp_path / "honest.yaml"
    honest.write_text(f"algo: {FLAGS.name}\nenv: X\nconfig:\n  total_steps: 20\n")
    code, err = cli(["train", "--config", honest, "--run-dir", tmp_path / "a", "--no-progress"],
                    capsys)  # fmt: skip
    assert code == 0, err
    hostile = tmp_path / "best.yaml"
    hostile.write_text(f"algo: {FLAGS.name}\nenv: X\nconfig:\n  total_steps: {value}\n")
    code, err = cli(["train", "--config", hostile, "--run-dir", tmp_path / "b", "--no-progress"],
                    capsys)  # fmt: skip
    assert code == 2 and "best.yaml" in err, err
    one_sentence(err)


def test_a_log_that_is_not_utf8_is_one_sentence(toy_run, tmp_path, capsys):
    honest = copy_run(toy_run, tmp_path, "honest")
    code, err = cli(["doctor", honest], capsys)
    assert code in (0, 1), err
    run = copy_run(toy_run, tmp_path, "hostile")
    with (run / "metrics.jsonl").open("ab") as handle:
        handle.write(b'\xff\xfe{"step": 99}\n')
    code, err = cli(["doctor", run], capsys)
    assert code == 2 and "not UTF-8" in err
    one_sentence(err)


def test_terminal_escapes_from_a_folder_never_reach_the_terminal(toy_run, tmp_path, capsys):
    honest = copy_run(toy_run, tmp_path, "honest")
    assert cli(["doctor", honest], capsys)[0] in (0, 1)
    run = copy_run(toy_run, tmp_path, "hostile")
    record = json.loads((run / "config.json").read_text())
    record["env"] = "X\x1b]0;PWNED\x07\x1b[2J\x9bFAKE"
    (run / "config.json").write_text(json.dumps(record))
    capsys.readouterr()
    code = main(["doctor", str(run)])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2)
    assert "\x1b" not in out + err and "\x07" not in out + err and "\x9b" not in out + err
    assert "\\x1b]0;PWNED" in out + err  # shown, escaped
