"""Heal on a hostile run folder: ``rlx doctor RUN --fix``, ``rlx.heal(RUN)`` and ``rlx train
--resume --heal`` attacked as a folder's author could attack them (a folder travels: papers,
model hubs, colleagues). Each attack is beside the honest case, and each verdict is asserted:
no code of the folder runs without ``--trust-env-code`` (a pickle in a checkpoint runs none
at all), nothing outside the folders the user named is written or deleted (links out of the
folder, ``../`` checkpoints, a child folder in or through the parent), and malformed content
(``summary.json``'s ``heal``/``healed_from``, ``config.json``'s ``heal``, ``metrics.jsonl``)
is one :class:`rlx.errors.RLXError` sentence, exit 2, or is read as data: never a traceback.
The report draws the folder's heal labels as text, never as markup or mathtext.

Runs are the toy of :mod:`tests.runs.toy_drift` (milliseconds): its KL drifts from step 40, so
``kl-too-high`` fires and its fix (``learning_rate`` 1.0 -> 0.3) gives the heal something to do.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import shutil
from pathlib import Path

import pytest

import rlx
from rlx import registry
from rlx.cli import main
from rlx.diagnostics.doctor import MAX_HEALS_SHOWN, heal_markers, healed_lines
from rlx.errors import CheckpointError, RunError
from rlx.runs import read_summary
from tests.runs import toy_drift
from tests.test_user_errors import snapshot

ROOT = Path(__file__).resolve().parents[1]
DENSE = {"checkpoint_every_steps": 5, "checkpoints_kept": 0}
STEP_50 = "step_000000000050.pt"


# ---------------------------------------------------------------------------- a toy that builds
def _train_building_the_env(config, env, run):
    """toy-drift, but it builds its env first, as every real algorithm does: a recipe (an entry
    point the folder names) is called here, so consent is the only gate before it."""
    if not isinstance(env, str):
        env.make()
    return toy_drift._train(config, env, run)


BUILDER = dataclasses.replace(
    toy_drift.DRIFT, name="toy-drift-builds", train=_train_building_the_env
)
if BUILDER.name not in registry._REGISTRY:
    registry.register(BUILDER)


# ---------------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict[str, Path]:
    """Honest parents, trained once: ``dense`` checkpoints every 5 steps (a heal continues
    from step 50), ``sparse`` only at its end (a heal starts over); both built by
    ``toy-drift-builds``."""
    root = tmp_path_factory.mktemp("parents")
    runs = {"dense": root / "dense", "sparse": root / "sparse"}
    for name, run in runs.items():
        cadence = DENSE if name == "dense" else {}
        rlx.train("toy-drift-builds", "X", run_dir=run, learning_rate=1.0, progress=False,
                  doctor=False, **cadence)  # fmt: skip
    return runs


def copy_run(source: Path, where: Path, name: str = "run") -> Path:
    run = where / name
    shutil.copytree(source, run, symlinks=True)
    return run


def edit_json(path: Path, **fields) -> None:
    record = json.loads(path.read_text())
    record.update(fields)
    path.write_text(json.dumps(record))


def cli(argv, capsys) -> tuple[int, str]:
    """``rlx ARGV`` in this process: its exit code and stderr (a traceback would raise)."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def one_sentence(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlx: error: "), err
    assert "Traceback" not in err
    return lines[0]


# ============================================================================ code from the folder
def hostile_env(run: Path, marker: Path) -> None:
    recipe = {"kind": "entry_point", "target": "os:system",
              "kwargs": {"command": f"touch {marker}"}, "reason": ""}  # fmt: skip
    edit_json(run / "config.json", env_recipe=recipe)


@pytest.mark.parametrize("parent", ["dense", "sparse"])
def test_fix_runs_no_code_the_folder_names_without_consent(parent, base, tmp_path, capsys):
    run, marker, child = copy_run(base[parent], tmp_path), tmp_path / "MARKER", tmp_path / "child"
    hostile_env(run, marker)
    before = snapshot(run)
    code, err = cli(["doctor", run, "--fix", "--run-dir", child], capsys)
    line = one_sentence(err)
    assert code == 2 and "'os:system'" in line and "--trust-env-code" in line
    assert f"the run folder {run} " in line  # the parent names the code, not the child
    assert not marker.exists() and not child.exists() and snapshot(run) == before

    # the same folder, trusted: its code runs (consent is the gate, and the only one); what
    # os.system returns is no env, which the build then says in one sentence
    code, err = cli(["doctor", run, "--fix", "--run-dir", child, "--trust-env-code"], capsys)
    assert marker.exists() and code == 2 and "not a Gymnasium env" in one_sentence(err)


def test_a_registered_env_id_heals_without_consent(base, tmp_path, capsys):
    run = copy_run(base["dense"], tmp_path)
    code, _ = cli(["doctor", run, "--fix", "--run-dir", tmp_path / "child"], capsys)
    assert code == 0 and read_summary(tmp_path / "child")["healed_from"]["step"] == 50


class Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("which", ["steps", "best"])
def test_a_checkpoint_that_is_a_pickle_with_code_runs_none(which, base, tmp_path, capsys):
    import torch

    run, marker = copy_run(base["dense"], tmp_path), tmp_path / "PICKLE"
    files = sorted((run / "checkpoints").glob("step_*.pt")) if which == "steps" else []
    for path in files or [run / "checkpoints" / "best.pt"]:
        torch.save({"step": 90, "state": {"step": Evil(marker)}}, path)
    code, err = cli(["doctor", run, "--fix", "--run-dir", tmp_path / "child"], capsys)
    if which == "steps":  # the checkpoint to continue from: refused, one sentence, no child
        assert code == 2 and "is corrupt or not an rlx checkpoint" in one_sentence(err)
        assert not (tmp_path / "child").exists()
        code, err = cli(["train", "toy-drift-builds", "--run-dir", run, "--resume"], capsys)
        assert code == 2 and "is corrupt or not an rlx checkpoint" in one_sentence(err)
    else:  # an unreadable best.pt is left as it is, and the heal goes on
        assert code == 0
    assert not marker.exists()


def test_every_file_a_run_folder_holds_loads_without_pickle():
    """torch.load with weights_only=True everywhere; pickle only for a group's own pipe, and in
    the code sandbox's program room (the program's own objects, for the tests' round trips)."""
    for path in sorted((ROOT / "src" / "rlx").rglob("*.py")):
        text = path.read_text()
        for call in re.findall(r"torch\.load\([^)]*\)", text):
            assert "weights_only=True" in call, (path, call)
        unpickles = [
            node
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("load", "loads", "Unpickler")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "pickle"
        ]  # calls, not words: the sandbox's docstrings say that it never unpickles
        if unpickles and path.parent.name == "sandbox":
            # the program's own objects, round-tripped inside the program's room
            assert path.name == "server.py", path
        elif unpickles:
            assert path.name == "seed_groups.py" and "pickle.load(sys.stdin.buffer)" in text, path
        assert "allow_pickle=True" not in text, path


# ============================================================================ writes outside
def state(path: Path) -> object:
    return snapshot(path) if path.is_dir() else path.read_bytes()


@pytest.mark.parametrize("link", ["checkpoints", "metrics.jsonl", "episodes.csv"])
def test_a_resume_writes_nothing_through_a_link_out_of_the_folder(link, base, tmp_path, capsys):
    """The folder's file is a link to someone else's (here a copy of the run's own, so that
    a resume through it would cut it back to step 50 and write on)."""
    run = copy_run(base["dense"], tmp_path)
    other = tmp_path / f"someone-else-{link}"
    if link == "checkpoints":
        shutil.copytree(run / link, other, symlinks=True)
    else:
        shutil.copy(run / link, other)
    _remove(run / link)
    (run / link).symlink_to(other)
    before, theirs = snapshot(run), state(other)
    with pytest.raises(RunError, match=r"is a symbolic link .*rlx writes only inside the run"):
        rlx.train("toy-drift-builds", run_dir=run, resume=True, resume_from=50, progress=False)
    for argv in (["--resume"], ["--resume", "--heal", "--total-steps", "150"]):
        code, err = cli(["train", "toy-drift-builds", "--run-dir", run, *argv], capsys)
        assert code == 2 and f"{run / link} is a symbolic link" in one_sentence(err)
    # before the fix: the checkpoints after step 50 deleted and new ones written in the other
    # folder, the other file cut back to step 50 and appended to
    assert snapshot(run) == before and state(other) == theirs

    # doctor --fix copies only the parent's own files: a link there is never read as one of
    # them (one sentence naming it), the link's target is left and no child is left behind
    code, err = cli(["doctor", run, "--fix", "--run-dir", tmp_path / "child"], capsys)
    sentence = one_sentence(err)
    assert code == 2 and str(run / link) in sentence and "(or lies under) a link" in sentence
    assert state(other) == theirs and not (tmp_path / "child").exists()

    # honest: the link replaced by a copy resumes from step 50, the later checkpoints go
    _remove(run / link)
    if link == "checkpoints":
        shutil.copytree(other, run / link, symlinks=True)
    else:
        shutil.copy(other, run / link)
    rlx.train("toy-drift-builds", run_dir=run, resume=True, resume_from=50, total_steps=60,
              progress=False)  # fmt: skip
    steps = sorted(p.name for p in (run / "checkpoints").glob("step_*.pt"))
    assert steps[-1] == "step_000000000060.pt" and "step_000000000100.pt" not in steps
    assert state(other) == theirs


def test_a_resume_from_a_checkpoint_outside_the_folder_is_refused(base, tmp_path):
    run = copy_run(base["dense"], tmp_path)
    other = copy_run(base["dense"], tmp_path, "other")
    before, theirs = snapshot(run), snapshot(other)
    for named in (f"../other/checkpoints/{STEP_50}", other / "checkpoints" / STEP_50,
                  f"checkpoints/../../other/checkpoints/{STEP_50}", "/etc/passwd",
                  f"../{STEP_50}", True, 10**30):  # fmt: skip
        with pytest.raises(CheckpointError):
            rlx.train("toy-drift-builds", run_dir=run, resume=True, resume_from=named,
                      progress=False)  # fmt: skip
    assert snapshot(run) == before and snapshot(other) == theirs
    for honest in (50, STEP_50, run / "checkpoints" / STEP_50):  # its own checkpoint: resumes
        shutil.rmtree(run)
        copy_run(base["dense"], tmp_path)
        rlx.train("toy-drift-builds", run_dir=run, resume=True, resume_from=honest,
                  total_steps=55, progress=False)  # fmt: skip
        assert read_summary(run)["steps"] == 55


@pytest.mark.parametrize("shape", ["link", "file"])
def test_a_previous_folder_that_is_a_link_or_a_file_is_removed_not_followed(
    shape, base, tmp_path, capsys
):
    run = copy_run(base["dense"], tmp_path)
    other = tmp_path / "someone-else"
    other.mkdir()
    (other / "keep.txt").write_text("theirs")
    if shape == "link":
        (run / ".rlx-previous").symlink_to(other)
    else:
        (run / ".rlx-previous").write_text("junk")
    code, _ = cli(["train", "toy-drift-builds", "--run-dir", run, "--resume", "--total-steps",
                   "110", "--no-progress"], capsys)  # fmt: skip
    # before the fix: FileExistsError, and the run's config.json and logs deleted
    assert code == 0 and read_summary(run)["steps"] == 110
    assert (run / "config.json").is_file() and not (run / ".rlx-previous").exists()
    assert snapshot(other) == {"keep.txt": b"theirs"}


@pytest.mark.parametrize("shape", ["folder", "dangling link"])
def test_a_step_checkpoint_that_is_no_file_is_skipped(shape, base, tmp_path, capsys):
    run = copy_run(base["dense"], tmp_path)
    fake = run / "checkpoints" / STEP_50
    fake.unlink()
    if shape == "folder":
        fake.mkdir()
    else:
        fake.symlink_to(tmp_path / "nowhere")
    (run / "checkpoints" / "step_000000000001.pt").mkdir()
    code, _ = cli(["doctor", run, "--fix", "--run-dir", tmp_path / "child"], capsys)
    assert code == 0 and read_summary(tmp_path / "child")["healed_from"]["step"] == 45
    # a resume that prunes (checkpoints_kept) leaves what is no checkpoint alone
    code, _ = cli(["train", "toy-drift-builds", "--run-dir", run, "--resume", "--total-steps",
                   "120", "--checkpoints-kept", "3", "--no-progress"], capsys)  # fmt: skip
    assert code == 0 and (run / "checkpoints" / "step_000000000001.pt").is_dir()
    assert len(list((run / "checkpoints").glob("step_*.pt"))) == 5  # 3 kept, and the two


# ============================================================================ the child's folder
CHILDREN = {
    "the parent": ("{run}", "the healed run needs a folder of its own, not {run}"),
    "inside the parent": ("{run}/sub", "not one inside {run}"),
    "inside its checkpoints": ("{run}/checkpoints/x", "not one inside {run}"),
    "a link to the parent": ("@{run}", "the healed run needs a folder of its own, not {run}"),
    "a link elsewhere": ("@{tmp}/someone-else", "is a symbolic link (to {tmp}/someone-else)"),
    "a dangling link": ("@{tmp}/nowhere/deep", "is a symbolic link (to {tmp}/nowhere/deep)"),
    "someone's files": ("{tmp}/someone-else", "is not empty"),
}


@pytest.mark.parametrize(
    ("case", "named"),
    [*((case, True) for case in CHILDREN),
     *((case, False) for case, (target, _) in CHILDREN.items() if target.startswith("@"))],
    ids=lambda v: {True: "--run-dir", False: "default"}.get(v, v) if isinstance(v, bool) else v,
)  # fmt: skip
def test_a_child_folder_that_is_not_a_new_one_of_its_own_is_refused(
    case, named, base, tmp_path, capsys
):
    """``--run-dir CHILD``, or the default ``RUN-healed`` shipped beside the folder as a link
    (the default is beside the run, never in it)."""
    target, message = CHILDREN[case]
    run = copy_run(base["dense"], tmp_path)
    other = tmp_path / "someone-else"
    other.mkdir()
    if case == "someone's files":
        (other / "thesis.tex").write_text("theirs")
    child = Path(target.lstrip("@").format(run=run, tmp=tmp_path))
    if target.startswith("@"):
        link = tmp_path / "run-healed" if not named else tmp_path / "link"
        link.symlink_to(child)
        child = link
    before, theirs = snapshot(run), snapshot(other)
    code, err = cli(["doctor", run, "--fix", *(["--run-dir", child] if named else [])], capsys)
    assert code == 2 and message.format(run=run, tmp=tmp_path) in one_sentence(err)
    assert snapshot(run) == before and snapshot(other) == theirs
    assert not (tmp_path / "nowhere").exists()


def test_an_honest_child_folder_is_made_beside_and_an_empty_one_is_left_as_it_was(
    base, tmp_path, capsys
):
    run = copy_run(base["dense"], tmp_path)
    # RUN/checkpoints/.. is RUN: its child is RUN-healed beside it, not inside it
    assert cli(["doctor", f"{run}/checkpoints/..", "--fix"], capsys)[0] == 0
    assert (tmp_path / "run-healed" / "summary.json").is_file()
    assert not any("healed" in p.name for p in run.rglob("*"))
    # an empty folder the user made, refused by the env's consent: still there, still empty
    hostile_env(run, tmp_path / "MARKER")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _ = cli(["doctor", run, "--fix", "--run-dir", empty], capsys)
    assert code == 2 and empty.is_dir() and not any(empty.iterdir())
    shutil.rmtree(run / "checkpoints")  # from scratch: the same
    code, _ = cli(["doctor", run, "--fix", "--run-dir", empty], capsys)
    assert code == 2 and empty.is_dir() and not any(empty.iterdir())


# ============================================================================ malformed records
HOSTILE_SUMMARIES = {
    "heal an int": {"heal": 5},
    "heal a bool": {"heal": True},
    "heal a float": {"heal": 1.5},
    "heal a string": {"heal": "<script>"},
    "heal a mapping": {"heal": {"step": 3}},
    "heal null": {"heal": None},
    "healed_from a string": {"healed_from": "x"},
    "changes an int": {"healed_from": {"checkpoint": "c", "changes": 5}},
    "rules an int": {"heal": [{"rules": 7, "changes": [{"rules": 3}], "from_step": 3}]},
    "entries not mappings": {"heal": [1, "a", None, [2]], "healed_from": [1]},
    "steps not finite": {"heal": [{"from_step": math_value, "changes": []}
                                  for math_value in (float("nan"), float("inf"), 10**400)]},
    "nested junk": {"heal": [{"from_step": 5, "changes": [{"field": {"a": [1]}, "to": [[]]}]}]},
}  # fmt: skip


@pytest.mark.parametrize("case", HOSTILE_SUMMARIES)
def test_hostile_heal_records_in_summary_json_are_read_as_data(case, base, tmp_path, capsys):
    run = copy_run(base["dense"], tmp_path)
    edit_json(run / "summary.json", **HOSTILE_SUMMARIES[case])
    # before the fix: TypeError from rlx doctor, rlx doctor --json and rlx report
    assert cli(["doctor", run], capsys)[0] == 0
    assert cli(["doctor", run, "--json"], capsys)[0] == 0
    assert cli(["report", run], capsys)[0] == 0
    assert cli(["doctor", run, "--fix", "--run-dir", tmp_path / "c"], capsys)[0] == 0
    assert all(isinstance(step, float) for step, _ in heal_markers(read_summary(run)))


def test_honest_heal_records_are_shown_and_many_are_capped(base, tmp_path, capsys):
    change = {"field": "learning_rate", "from": 1.0, "to": 0.3, "rules": ["kl-too-high"]}
    honest = {"heal": [{"step": 60, "when": "live", "rules": ["kl-too-high"],
                        "checkpoint": STEP_50, "from_step": 50, "changes": [change]}]}  # fmt: skip
    assert healed_lines(honest) == [
        "at step 60 (as it trained) kl-too-high: back to its checkpoint at step 50 with "
        "learning_rate 1.0 -> 0.3"
    ]
    assert heal_markers(honest) == [(50.0, "learning_rate 1.0 -> 0.3")]
    many = {"heal": honest["heal"] * 20_000}  # before the fix: a report of 90 s
    assert len(healed_lines(many)) == MAX_HEALS_SHOWN + 1
    assert healed_lines(many)[-1] == "... and 19950 more rollbacks (summary.json)"
    run = copy_run(base["dense"], tmp_path)
    edit_json(run / "summary.json", **many)
    page = rlx.report(run).read_text()
    assert 0 < page.count('id="heal-') <= MAX_HEALS_SHOWN + 1


@pytest.mark.parametrize(
    "label", ["<script>alert(1)</script>", "</text><script>alert(1)</script>", r"$\frac{$",
              "$x$ & <b>", "x" * 100_000]
)  # fmt: skip
def test_a_heal_label_is_drawn_as_text_never_markup_nor_mathtext(label, base, tmp_path, capsys):
    run = copy_run(base["dense"], tmp_path)
    change = {"field": label, "from": label, "to": 1}
    edit_json(run / "summary.json", heal=[{"from_step": 50, "changes": [change]}])
    # before the fix: a ValueError from matplotlib's mathtext for r"$\frac{$"
    assert cli(["report", run], capsys)[0] == 0
    page = (run / "report.html").read_text()
    assert "<script>alert" not in page and "</text><script>" not in page and "<b>" not in page
    if label.startswith("<script>"):
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the text is there, escaped


HOSTILE_LINES = {
    "a list": ("[1, 2]", "not a JSON object"),
    "a number": ("5", "not a JSON object"),
    "a step that is text": ('{"step": "11", "approx_kl": 1}', "no numeric 'step'"),
    "an int no float holds": ('{"step": 11, "approx_kl": 1' + "0" * 400 + "}", None),
    "an int Python will not read": ('{"step": 11, "approx_kl": 1' + "0" * 5000 + "}", None),
    "wall_s text": ('{"step": 11, "wall_s": "abc", "approx_kl": 0.01}', None),
    "wall_s a list": ('{"step": 11, "wall_s": [1], "approx_kl": 0.01}', None),
    "a step past floats": ('{"step": 1e400, "approx_kl": 0.5}', None),
    "NaN step": ('{"step": NaN, "approx_kl": 0.5}', None),
    "bytes": ("\x00\x00", None),
}


@pytest.mark.parametrize("case", HOSTILE_LINES)
def test_malformed_metrics_are_one_sentence_or_data(case, base, tmp_path, capsys):
    line, refusal = HOSTILE_LINES[case]
    run = copy_run(base["dense"], tmp_path)
    rows = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join([*rows[:10], line, *rows[10:]]) + "\n")
    # before the fix: AttributeError, OverflowError, ValueError or TypeError tracebacks
    for argv in (["doctor", run], ["doctor", run, "--fix", "--run-dir", tmp_path / "c"]):
        code, err = cli(argv, capsys)
        if refusal is None:
            assert code == 0
        else:
            assert code == 2 and refusal in one_sentence(err) and "line 11" in err
    code, _ = cli(["train", "toy-drift-builds", "--run-dir", run, "--resume", "--heal",
                   "--total-steps", "110", "--no-progress"], capsys)  # fmt: skip
    assert code == 0 and read_summary(run)["steps"] == 110  # a resume keeps rlx's rows only
    assert cli(["doctor", run], capsys)[0] == 0


@pytest.mark.parametrize(
    "recorded", [5, None, "abc", [{"when": "live"}], [{"when": "live", "rules": 3}],
                 [{"when": "live", "rules": [{"a": 1}]}], [7, [1]]]
)  # fmt: skip
def test_a_resumed_healing_run_reads_its_recorded_rollbacks_as_data(
    recorded, base, tmp_path, capsys
):
    run = copy_run(base["dense"], tmp_path)
    edit_json(run / "config.json", heal=recorded)
    argv = ["train", "toy-drift-builds", "--run-dir", run, "--resume", "--heal", "--total-steps",
            "110", "--no-progress"]  # fmt: skip
    assert cli(argv, capsys)[0] == 0  # before the fix: TypeError or KeyError
    assert read_summary(run)["heal"][-1]["when"] == "live"  # the junk named no rule healed

    # honest: a rule healed live before is not watched live again (left to the end)
    run = copy_run(base["dense"], tmp_path, "honest")
    edit_json(run / "config.json", heal=[{"when": "live", "rules": ["kl-too-high"]}])
    argv[3] = run
    assert cli(argv, capsys)[0] == 0
    assert [h.get("when") for h in read_summary(run)["heal"]] == ["live", "end"]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
