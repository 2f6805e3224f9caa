"""One sentence for every user mistake (issue 39), proven by a fuzz over every command.

Every ``rlx`` command (train, eval, solve, list, align *, doctor, report, recommend, play) and
the public entry points ``rlx.train``, ``rlx.evaluate``, ``rlx.load`` are driven with the
mistakes people make: an env the run was not trained on, env keyword arguments the env does
not take, values of the wrong type, unknown flags, unknown algorithm names, negative budgets,
missing folders and run folders damaged in every way we know (empty, config.json that is not
JSON or names another algorithm, no checkpoint, a corrupt one, summary.json garbage).

Each must end in an :class:`rlx.errors.RLXError` of one sentence in the user's words (flags on
the command line, argument names in Python, never an internal class name), exit code 2 on the
command line without a traceback, and leave every folder as it was (or absent). Most cases run
``rlx.cli.main`` in this process, so the whole fuzz stays fast; a handful run the real ``rlx``
process for the exit code and the absence of a traceback.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rlx
from rlx.cli import main
from rlx.errors import RLXError
from tests.runs import toy_algorithm  # noqa: F401  (registers "toy-counter")

CLASS_NAMES = re.compile(r"\b\w+(Config|Args)\b|Namespace\(|argparse|Traceback")
"""An internal name in a message: a config or argument class, the parser's insides."""
PYTHON_WORDS = re.compile(r"\b(resume|overwrite|trust_env_code)=True|\brun_dir=|\benv=\.\.\.")
"""How Python is told to pass an argument; wrong on the command line."""
FLAG_WORDS = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
"""A command-line flag; wrong in a message to Python."""
TINY_PPO = {"total_steps": 64, "num_envs": 1, "num_steps": 32, "minibatch_size": 32,
            "eval_episodes": 0, "progress": False}  # fmt: skip


def snapshot(folder: Path) -> dict[str, object]:
    """Every path under ``folder`` with its bytes (a link as its target): equal snapshots,
    an untouched folder."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): str(p.readlink()) if p.is_symlink()
        else p.read_bytes() if p.is_file() else "<dir>"
        for p in sorted(folder.rglob("*"))
    }  # fmt: skip


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """A good run of each kind, and run folders damaged in every way the fuzz knows."""
    root = tmp_path_factory.mktemp("folders")
    toy, ppo = root / "toy", root / "ppo"
    rlx.train("toy-counter", "Toy-v0", run_dir=toy, total_steps=2, progress=False)
    rlx.train("ppo", "CartPole-v1", run_dir=ppo, **TINY_PPO)
    made = {"toy": toy, "ppo": ppo, "missing": root / "missing", "empty": root / "empty",
            "mine": root / "mine"}  # fmt: skip
    made["empty"].mkdir()
    made["mine"].mkdir()
    (made["mine"] / "notes.txt").write_text("a folder of the user's own")
    good = json.loads((ppo / "config.json").read_text())
    damaged = {
        "not_json": "{not json",
        "not_utf8": b"\xff\xfe\x00garbage",
        "a_list": "[1, 2, 3]",
        "no_algo": json.dumps({"env": "CartPole-v1", "config": {}}),
        "unknown_algo": json.dumps({**good, "algo": "no-such-algo"}),
        "other_algo": json.dumps({**good, "algo": "dqn"}),
        "bad_value": json.dumps({**good, "config": {**good["config"], "total_steps": "many"}}),
        "no_checkpoint": json.dumps(good),
    }
    for name, text in damaged.items():
        folder = root / name
        folder.mkdir()
        path = folder / "config.json"
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    for name, garbage in (("corrupt_checkpoint", b"\x00garbage"), ("empty_checkpoint", b"")):
        folder = root / name
        rlx.train("toy-counter", "Toy-v0", run_dir=folder, total_steps=2, progress=False)
        (folder / "checkpoints" / "latest").resolve().write_bytes(garbage)
        made[name] = folder
    garbage_summary = root / "garbage_summary"
    rlx.train("ppo", "CartPole-v1", run_dir=garbage_summary, **TINY_PPO)
    (garbage_summary / "summary.json").write_text("][ not a summary")
    made["garbage_summary"] = garbage_summary
    (root / "bad.jsonl").write_text("{not json\n")
    made["bad_jsonl"] = root / "bad.jsonl"
    made["new"] = root / "new" / "deep" / "run"  # a run folder that must not appear
    return {**made, **{name: root / name for name in damaged}}


# (command line with {folder} placeholders, what the sentence must say)
CLI_CASES = [
    # train: algorithms, flags, values, envs
    (["train", "no-such-algo", "--env", "CartPole-v1"], "unknown algorithm 'no-such-algo'"),
    (["train", "ppo", "--env", "CartPole-v1", "--lr", "3e-4", "--run-dir", "{new}"],
     "rlx train ppo has no flag --lr; did you mean --learning-rate?"),
    (["train", "ppo", "--env", "CartPole-v1", "--learning_rate", "3e-4"],
     "did you mean --learning-rate?"),
    (["train", "ppo", "--env", "CartPole-v1", "--total-steps", "many", "--run-dir", "{new}"],
     "--total-steps expects a whole number"),
    (["train", "ppo", "--env", "CartPole-v1", "--total-steps", "-5", "--run-dir", "{new}"],
     "total_steps=-5 must be >= 1"),
    (["train", "ppo", "--env", "CartPole-v1", "--gamma", "high", "--run-dir", "{new}"],
     "--gamma expects a number"),
    (["train", "ppo", "--env", "CartPole-v1", "--hidden-sizes", "64", "wide"],
     "--hidden-sizes expects a whole number"),
    (["train", "ppo", "--env", "CartPole-v1", "--activation"], "--activation expected one"),
    (["train", "ppo", "--env", "CartPole-v1", "--env-kwargs", "foo=1", "--run-dir", "{new}"],
     "CartPole-v1 takes no keyword argument 'foo'"),
    (["train", "ppo", "--env", "CartPole-v1", "--env-kwargs", "foo", "--run-dir", "{new}"],
     "--env-kwargs 'foo' must look like KEY=VALUE"),
    (["train", "dqn", "--env", "Pendulum-v1", "--run-dir", "{new}"], "discrete action space"),
    (["train", "ppo", "--env", "NoSuchEnv-v0", "--run-dir", "{new}"], "'NoSuchEnv-v0'"),
    (["train", "ppo", "--total-steps", "64"], "ppo needs an environment (--env ID"),
    (["train", "--env", "CartPole-v1"], "rlx train needs an algorithm name before --env"),
    (["train"], "rlx train needs an algorithm name first"),
    (["train", "grpo", "--env", "data.jsonl"], "use `rlx align grpo"),
    # train: run folders to start, continue or start over
    (["train", "toy-counter", "--env", "X", "--run-dir", "{toy}"],
     "already holds a run; pass --resume to continue it, --overwrite to start over in it"),
    (["train", "ppo", "--run-dir", "{missing}", "--resume"],
     "--resume needs an existing run folder"),
    (["train", "ppo", "--run-dir", "{empty}", "--resume"], "--resume needs an existing run"),
    (["train", "ppo", "--resume"], "--resume needs the run folder to continue (--run-dir DIR)"),
    (["train", "ppo", "--run-dir", "{toy}", "--resume"], "holds a 'toy-counter' run, not a"),
    (["train", "ppo", "--run-dir", "{other_algo}", "--resume"], "holds a 'dqn' run"),
    (["train", "ppo", "--run-dir", "{not_json}", "--resume"], "config.json is not valid JSON"),
    (["train", "ppo", "--run-dir", "{not_utf8}", "--resume"], "config.json is not valid JSON"),
    (["train", "ppo", "--run-dir", "{a_list}", "--resume"], "not an rlx run's config"),
    (["train", "ppo", "--run-dir", "{bad_value}", "--resume"], "records total_steps='many'"),
    (["train", "toy-counter", "--run-dir", "{corrupt_checkpoint}", "--resume"], "corrupt"),
    (["train", "toy-counter", "--run-dir", "{toy}", "--resume", "--overwrite"],
     "--resume continues the run and --overwrite deletes it"),
    (["train", "toy-counter", "--env", "X", "--run-dir", "{mine}", "--overwrite"],
     "--overwrite starts over only in an rlx run folder"),
    (["train", "toy-counter", "--env", "X", "--run-dir", "{not_json}"],
     "is not an rlx run folder"),
    (["train", "ppo", "--run-dir", "{ppo}", "--resume", "--env-kwargs", "foo=1",
      "--env", "CartPole-v1"], "takes no keyword argument 'foo'"),
    # eval
    (["eval", "{ppo}", "--env", "Pendulum-v1"],
     "trained on CartPole-v1 (observations Box of shape (4,), actions Discrete(2))"),
    (["eval", "{ppo}", "--env", "Acrobot-v1"], "Acrobot-v1 has observations Box of shape (6,)"),
    (["eval", "{ppo}", "--env", "CartPole-v1", "--env-kwargs", "foo=1"],
     "takes no keyword argument 'foo'"),
    (["eval", "{ppo}", "--episodes", "0"], "whole number >= 1 of episodes (--episodes N)"),
    (["eval", "{ppo}", "--episodes", "some"], "--episodes expects a whole number"),
    (["eval", "{ppo}", "--epsiodes", "3"], "did you mean --episodes?"),
    (["eval"], "the following arguments are required: RUN_DIR"),
    (["eval", "{missing}"], "does not exist"),
    (["eval", "{empty}"], "config.json does not exist"),
    (["eval", "{not_json}"], "is not valid JSON"),
    (["eval", "{no_algo}"], "not an rlx run's config"),
    (["eval", "{unknown_algo}"], "names an algorithm rlx cannot load"),
    (["eval", "{bad_value}"], "records total_steps='many'"),
    (["eval", "{no_checkpoint}"], "holds no checkpoint to load"),
    (["eval", "{corrupt_checkpoint}"], "corrupt"),
    (["eval", "{empty_checkpoint}"], "corrupt"),
    # solve
    (["solve", "NoSuchEnv-v9"], "NoSuchEnv-v9"),
    (["solve", "GridWorld", "--gamma", "high"], "--gamma expects a number"),
    (["solve", "GridWorld", "--gamma", "1.5"], "gamma=1.5"),
    (["solve", "GridWorld", "--methd", "x"], "did you mean --method?"),
    (["solve", "FrozenLake-v1", "--env-kwargs", "foo=1"], "'foo'"),
    (["solve"], "the following arguments are required: ENV"),
    # list
    (["list", "extra"], "rlx list takes no argument 'extra'"),
    (["list", "--all"], "rlx list has no flag --all"),
    # align
    (["align"], "rlx align needs a command"),
    (["align", "frob"], "unknown align command 'frob'"),
    (["align", "sft"], "rlx align sft needs --model DIR and --data FILE"),
    (["align", "dpo", "--lr", "1"], "did you mean --learning-rate"),
    (["align", "sft", "--model", "{missing}", "--data", "{missing}/d.jsonl", "--run-dir",
      "{new}"], "does not exist"),
    (["align", "tiny"], "the following arguments are required: --out"),
    (["align", "tiny", "--out", "{new}", "--arch", "bert"], "--arch expects one of llama, gpt2"),
    (["align", "data", "nope", "--out", "{new}"], "KIND expects one of arithmetic"),
    (["align", "data", "arithmetic", "--out", "{new}", "--n", "0"], "--n 0 must be >= 1"),
    (["align", "eval", "--model", "{missing}", "--data", "{bad_jsonl}"], "does not exist"),
    (["align", "rlhf", "--task", "chess", "--run-dir", "{new}"],
     "unknown rlhf task 'chess'; valid tasks: arithmetic, length-biased"),
    # doctor, report, recommend, play
    (["doctor"], "at least one RUN"),
    (["doctor", "{missing}"], "does not exist"),
    (["doctor", "{empty}"], "holds no rlx run"),
    (["doctor", "--strikt", "{toy}"], "did you mean --strict?"),
    (["report"], "at least one RUN"),
    (["report", "{missing}"], "does not exist"),
    (["report", "{not_json}"], "holds no rlx run"),
    (["recommend"], "the following arguments are required: TARGET"),
    (["recommend", "NoSuchEnv-v9"], "cannot recommend a method for 'NoSuchEnv-v9'"),
    (["recommend", "{bad_jsonl}"], "not valid JSON"),
    (["recommend", "{missing}/d.jsonl"], "does not exist"),
    (["play", "chess"], "unknown game 'chess'"),
    (["play", "tictactoe", "--agent", "{missing}"], "does not exist"),
    (["play", "tictactoe", "--agent", "{toy}"], "not a board-game agent"),
    (["play", "tictactoe", "--agent", "{not_json}"], "is not valid JSON"),
    (["play", "tictactoe", "--seed", "x"], "--seed expects a whole number"),
    # the command itself
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["trian"], "did you mean train?"),
    (["--verbose"], "rlx has no flag --verbose"),
]  # fmt: skip


def fill(args: list[str], folders: dict[str, Path]) -> list[str]:
    return [arg.format(**{k: str(v) for k, v in folders.items()}) for arg in args]


@pytest.mark.parametrize(("args", "says"), CLI_CASES, ids=[" ".join(a) for a, _ in CLI_CASES])
def test_every_command_answers_a_mistake_with_one_sentence(args, says, folders, capsys):
    before = {name: snapshot(path) for name, path in folders.items()}
    capsys.readouterr()
    assert main(fill(args, folders)) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("rlx: error: "), err
    assert len(err.splitlines()) == 1, err
    assert says in err, err
    assert not CLASS_NAMES.search(err), err
    assert not PYTHON_WORDS.search(err), err  # --resume on the command line, not resume=True
    assert err.endswith((".", "?", ")", ").")), err
    assert {name: snapshot(path) for name, path in folders.items()} == before  # nothing written
    assert not folders["new"].exists() and not folders["new"].parent.parent.exists()


def test_damaged_summaries_are_read_as_no_summary(folders, capsys):
    """summary.json garbage is no reason to refuse a run: it is read as absent."""
    run = str(folders["garbage_summary"])
    assert main(["eval", run, "--episodes", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 2
    assert main(["doctor", run]) == 0
    assert rlx.doctor(run) is not None


PYTHON_CASES = [
    ("unknown algorithm", lambda f: rlx.train("no-such-algo", "CartPole-v1"),
     "unknown algorithm 'no-such-algo'"),
    ("a string budget", lambda f: rlx.train("ppo", "CartPole-v1", total_steps="many",
                                            run_dir=f["new"]),
     "total_steps='many' must be a whole number (got str)"),
    ("a negative budget", lambda f: rlx.train("ppo", "CartPole-v1", total_steps=-5,
                                              run_dir=f["new"]), "total_steps=-5 must be >= 1"),
    ("a string for a float", lambda f: rlx.train("ppo", "CartPole-v1", gamma="0.9",
                                                 run_dir=f["new"]), "gamma='0.9' must be a number"),
    ("a string for a tuple", lambda f: rlx.train("ppo", "CartPole-v1", hidden_sizes="64",
                                                 run_dir=f["new"]),
     "hidden_sizes='64' must be a tuple of whole numbers"),
    ("an unknown field", lambda f: rlx.train("ppo", "CartPole-v1", lr=3e-4, run_dir=f["new"]),
     "ppo has no config field 'lr'; did you mean learning_rate?"),
    ("env kwargs the env rejects", lambda f: rlx.train("ppo", "CartPole-v1", run_dir=f["new"],
                                                       env_kwargs={"foo": 1}, **TINY_PPO),
     "CartPole-v1 takes no keyword argument 'foo'"),
    ("an env that is not there", lambda f: rlx.train("ppo", "NoSuchEnv-v0", run_dir=f["new"],
                                                     **TINY_PPO), "'NoSuchEnv-v0'"),
    ("no env", lambda f: rlx.train("ppo"), "ppo needs an environment (env=...)"),
    ("resume without a folder", lambda f: rlx.train("ppo", resume=True),
     "resume=True needs the run folder to continue (run_dir=...)"),
    ("resume of a missing folder", lambda f: rlx.train("ppo", run_dir=f["missing"], resume=True),
     "resume=True needs an existing run folder"),
    ("resume of another algorithm's run",
     lambda f: rlx.train("ppo", run_dir=f["toy"], resume=True), "holds a 'toy-counter'"),
    ("resume of a damaged folder", lambda f: rlx.train("ppo", run_dir=f["not_json"], resume=True),
     "is not valid JSON"),
    ("resume of a corrupt checkpoint", lambda f: rlx.train("toy-counter", resume=True,
                                                           run_dir=f["corrupt_checkpoint"]),
     "corrupt"),
    ("a folder holding a run", lambda f: rlx.train("toy-counter", "X", run_dir=f["toy"]),
     "pass resume=True to continue it, overwrite=True to start over in it"),
    ("overwrite of a folder that is not a run", lambda f: rlx.train("toy-counter", "X",
                                                                    run_dir=f["mine"],
                                                                    overwrite=True),
     "overwrite=True starts over only in an rlx run folder"),
    ("resume and overwrite", lambda f: rlx.train("toy-counter", run_dir=f["toy"], resume=True,
                                                 overwrite=True),
     "resume=True continues the run and overwrite=True deletes it"),
    ("evaluate on another env's spaces", lambda f: rlx.evaluate(rlx.load(f["ppo"]), "Pendulum-v1"),
     "and Pendulum-v1 has observations Box of shape (3,)"),
    ("evaluate no episodes", lambda f: rlx.evaluate(rlx.load(f["ppo"]), "CartPole-v1",
                                                    episodes=0), "episodes=0"),
    ("evaluate on an env that is not there", lambda f: rlx.evaluate(rlx.load(f["ppo"]),
                                                                   "NoSuchEnv-v0"),
     "'NoSuchEnv-v0'"),
    ("evaluate a run with rejected kwargs", lambda f: rlx.api.evaluate_run(
        f["ppo"], env="CartPole-v1", env_kwargs={"foo": 1}), "takes no keyword argument 'foo'"),
    ("evaluate a run, no episodes", lambda f: rlx.api.evaluate_run(f["ppo"], episodes=0),
     "whole number >= 1 of episodes (episodes=...)"),
    ("load a missing folder", lambda f: rlx.load(f["missing"]), "does not exist"),
    ("load an empty folder", lambda f: rlx.load(f["empty"]), "config.json does not exist"),
    ("load a config that is not JSON", lambda f: rlx.load(f["not_json"]), "is not valid JSON"),
    ("load a config that is not UTF-8", lambda f: rlx.load(f["not_utf8"]), "is not valid JSON"),
    ("load a config that is a list", lambda f: rlx.load(f["a_list"]), "not an rlx run's config"),
    ("load a config without algo", lambda f: rlx.load(f["no_algo"]), "not an rlx run's config"),
    ("load an unknown algorithm", lambda f: rlx.load(f["unknown_algo"]),
     "names an algorithm rlx cannot load"),
    ("load a config of wrong values", lambda f: rlx.load(f["bad_value"]),
     "records total_steps='many'"),
    ("load a run without a checkpoint", lambda f: rlx.load(f["no_checkpoint"]),
     "holds no checkpoint to load"),
    ("load a corrupt checkpoint", lambda f: rlx.load(f["corrupt_checkpoint"]), "corrupt"),
    ("load an empty checkpoint", lambda f: rlx.load(f["empty_checkpoint"]), "corrupt"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "says"), [c[1:] for c in PYTHON_CASES],
                         ids=[c[0] for c in PYTHON_CASES])  # fmt: skip
def test_every_entry_point_answers_a_mistake_in_pythons_words(call, says, folders):
    before = {name: snapshot(path) for name, path in folders.items()}
    with pytest.raises(RLXError) as raised:
        call(folders)
    message = str(raised.value)
    assert says in message, message
    assert "\n" not in message and not CLASS_NAMES.search(message), message
    assert not FLAG_WORDS.search(message), message  # resume=True in Python, not --resume
    assert {name: snapshot(path) for name, path in folders.items()} == before
    assert not folders["new"].exists()


def test_a_checkpoint_of_another_algorithm_is_one_sentence(folders, tmp_path):
    """A folder whose config.json says ppo but whose checkpoint is a toy's."""
    import shutil

    run = tmp_path / "mixed"
    shutil.copytree(folders["ppo"], run, symlinks=True)
    shutil.rmtree(run / "checkpoints")
    shutil.copytree(folders["toy"] / "checkpoints", run / "checkpoints", symlinks=True)
    with pytest.raises(RLXError, match="does not hold a ppo agent rlx can rebuild"):
        rlx.load(run)


# A handful of real processes: the exit code, and no traceback on a real stderr.
PROCESS_CASES = [
    (["eval", "{ppo}", "--env", "Pendulum-v1"], "Box of shape (3,)"),
    (["train", "ppo", "--env", "CartPole-v1", "--env-kwargs", "foo=1", "--run-dir", "{new}"],
     "takes no keyword argument 'foo'"),
    (["train", "q-learning", "--env", "FrozenLake-v1", "--aplha", "0.1"],
     "did you mean --alpha?"),
    (["eval", "{not_json}"], "is not valid JSON"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "says"), PROCESS_CASES, ids=[a[0] for a, _ in PROCESS_CASES])
def test_the_real_command_exits_2_without_a_traceback(args, says, folders):
    proc = subprocess.run(
        [sys.executable, "-m", "rlx.cli", *fill(args, folders)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and says in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not folders["new"].exists()
