"""The rlx command line: dispatch, --help, and user errors as one line with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlx.cli import main
from tests.runs import toy_algorithm  # noqa: F401  (registers "toy-counter")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlx.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_top_level_help_lists_the_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("train", "eval", "solve", "list"):
        assert command in out


def test_train_help_lists_every_config_field_with_docstring_and_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "toy-counter", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--total-steps INT" in out and "steps to count" in out and "(default: 100)" in out
    assert "--nan-at INT" in out and "--env STR" in out and "--resume" in out


def test_train_then_eval_through_the_cli(tmp_path, capsys):
    run_dir = tmp_path / "r"
    code = main(
        [
            "train",
            "toy-counter",
            "--env",
            "Toy-v0",
            "--run-dir",
            str(run_dir),
            "--total-steps",
            "3",
            "--w",
            "2",
        ]
    )
    assert code == 0
    config = json.loads((run_dir / "config.json").read_text())
    assert config["config"]["w"] == 2.0 and config["config"]["total_steps"] == 3
    code = main(
        ["train", "toy-counter", "--run-dir", str(run_dir), "--resume", "--total-steps", "5"]
    )
    assert code == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 5 and summary["total"] == pytest.approx(2 * 15)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "no-such-algo", "--env", "X"], "unknown algorithm 'no-such-algo'"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["eval", "/nonexistent/run"], "run folder /nonexistent/run does not exist"),
        (["train", "toy-counter", "--env", "X", "--w", "-1"], "w=-1.0 must be >= 0"),
        (["solve", "NoSuchEnv-v9"], "NoSuchEnv-v9"),
    ],
)
def test_user_errors_exit_2_with_one_line_and_no_traceback(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlx: error: ") and message in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_user_error_in_a_real_process_exits_2_without_traceback(tmp_path):
    proc = run_cli(
        "train",
        "q-learning",
        "--env",
        "FrozenLake-v1",
        "--alpha",
        "-0.5",
        "--run-dir",
        str(tmp_path / "r"),
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "alpha" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_corrupt_checkpoint_is_one_line_exit_2(tmp_path, capsys):
    run_dir = tmp_path / "r"
    assert (
        main(
            ["train", "toy-counter", "--env", "X", "--run-dir", str(run_dir), "--total-steps", "2"]
        )
        == 0
    )
    latest = (run_dir / "checkpoints" / "latest").resolve()
    latest.write_bytes(b"\x00garbage")
    capsys.readouterr()
    assert main(["eval", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "corrupt" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "q-learning", "--env", "CartPole-v1"], "Discrete observation space"),
        (["train", "q-learning", "--env", "FrozenLak-v1"], "FrozenLak-v1"),
        (["train", "sarsa", "--env", "FrozenLake-v1", "--gamma", "1.5"], "gamma=1.5"),
        (["train", "q-learning", "--env", "FrozenLake-v1", "--alpha", "-0.1"], "alpha=-0.1"),
        (["train", "q-learning", "--env", "FrozenLake-v1", "--episodes", "0"], "episodes=0"),
    ],
)
def test_tabular_bad_input_is_one_line_exit_2(args, message, tmp_path, capsys):
    assert main([*args, "--run-dir", str(tmp_path / "r"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlx: error: ") and message in err and len(err.splitlines()) == 1


def test_train_q_learning_writes_a_run_folder_and_load_gives_the_same_policy(tmp_path, capsys):
    import numpy as np

    import rlx

    run_dir = tmp_path / "ql"
    args = ["train", "q-learning", "--env", "FrozenLake-v1", "--run-dir", str(run_dir),
            "--episodes", "20000", "--seed", "3", "--no-progress"]  # fmt: skip
    assert main(args) == 0
    for name in ("config.json", "metrics.jsonl", "episodes.csv", "summary.json"):
        assert (run_dir / name).is_file(), name
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["episodes"] == 20000
    episodes = (run_dir / "episodes.csv").read_text().splitlines()
    assert episodes[0] == "step,wall_s,return,length" and len(episodes) == 20001
    agent = rlx.load(run_dir)
    same = rlx.tabular.q_learning("FrozenLake-v1", episodes=20000, seed=3)
    np.testing.assert_array_equal(agent.policy, same.policy)
    np.testing.assert_array_equal(agent.Q, same.Q)


def test_solve_prints_values_and_a_policy_of_arrows(capsys):
    assert main(["solve", "GridWorld", "--gamma", "1"]) == 0
    out = capsys.readouterr().out
    assert "converged=True" in out and "-3.00" in out and "←" in out and "■" in out
    assert main(["solve", "FrozenLake8x8-v1", "--method", "policy-iteration"]) == 0
    assert "policy-iteration converged=True" in capsys.readouterr().out
    assert main(["solve", "FrozenLake-v1", "--make", "map_name=8x8"]) == 0
    assert "S=64" in capsys.readouterr().out


def test_list_shows_the_registered_algorithms(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("q-learning", "sarsa", "expected-sarsa", "double-q", "mc", "td0"):
        assert name in out
    assert "max_a'" in out  # the bracketed formula of q-learning's summary is not eaten as markup


def test_train_help_names_the_envs_the_algorithm_takes(capsys):
    for name, expected in (("alphazero", "tictactoe or connect4"), ("ppo", "Gymnasium id")):
        with pytest.raises(SystemExit):
            main(["train", name, "--help"])
        assert expected in capsys.readouterr().out


# --- bad input found by trying, and what a failed command leaves --------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["solve", "FrozenLake-v1", "--make", "map_name=9x9"], "map_name='9x9'"),
        (["solve", "GridWorld", "--make", "size=-1"], "no keyword 'size'"),
        (["solve", "GridWorld", "--make", "rows=-1"], "-1x4 grid is not possible"),
        (["solve", "GridWorld", "--make", "rows"], "KEY=VALUE"),
        (["solve", "GridWorld", "--method", "magic"], "--method 'magic'"),
        (["train", "toy-counter", "--env", "X", "--total-steps", "abc"], "whole number, not 'abc'"),
        (["train", "toy-counter", "--env", "X", "--w", "heavy"], "expects a number, not 'heavy'"),
        (["train", "toy-counter", "--total-steps", "3"], "missing --env"),
        (["train", "toy-counter", "--env", "X", "--no-such-flag", "1"], "--no-such-flag"),
        (["train", "grpo", "--env", "X"], "use `rlx align grpo"),
        (["eval"], "missing an argument"),
        (["doctor"], "at least one RUN"),
    ],
)
def test_bad_input_is_one_sentence(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlx: error: ") and message in err, err
    assert len(err.splitlines()) == 1 and "╭" not in err and "Traceback" not in err


def test_a_closed_pipe_ends_quietly():
    """`rlx solve ... | head -1`: the reader goes away; no BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlx.cli", "solve", "FrozenLake8x8-v1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) in (0, 141)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


@pytest.mark.parametrize(
    "bad",
    [
        ["--env", "FrozenLake-v1", "--alpha", "-1"],  # rejected by the config
        ["--env", "CartPole-v1"],  # rejected by the algorithm (no Discrete states)
    ],
)
def test_a_failed_command_leaves_no_folder_behind(tmp_path, bad, capsys):
    run_dir = tmp_path / "runs" / "deep" / "ql"
    assert main(["train", "q-learning", *bad, "--run-dir", str(run_dir), "--no-progress"]) == 2
    assert not (tmp_path / "runs").exists()


def test_the_quick_commands_import_no_torch():
    code = (
        "import sys, rlx.cli\n"
        "for args in (['--help'], ['--version'], ['list']):\n"
        "    assert rlx.cli.main(args) == 0\n"
        "heavy = {'torch', 'numba', 'transformers', 'gymnasium'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_list_says_when_to_use_each_algorithm(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # one line per row, so phrases stay whole
    assert main(["list"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "use when" in out and "Language models (rlx align)" in out
    assert "Small tabular MDP, samples only" in out  # q-learning's row of the chooser
