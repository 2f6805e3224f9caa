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
    assert "--nan-at INT" in out and "--env ID" in out and "--resume" in out
    assert "--overwrite" in out and "--env-kwargs [KEY=VALUE ...]" in out
    assert "RunArgs" not in out and "ToyConfig" not in out


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
    assert main(["solve", "FrozenLake-v1", "--env-kwargs", "map_name=8x8"]) == 0
    assert "S=64" in capsys.readouterr().out


def test_solve_make_is_a_deprecated_name_of_env_kwargs(capsys):
    """--make, the old flag, still works; it says once that --env-kwargs replaces it."""
    assert main(["solve", "FrozenLake-v1", "--make", "map_name=8x8"]) == 0
    captured = capsys.readouterr()
    assert "S=64" in captured.out and "--make is deprecated; use --env-kwargs" in captured.err
    with pytest.raises(SystemExit):
        main(["solve", "--help"])
    help_text = capsys.readouterr().out
    assert "--env-kwargs" in help_text and "--make" not in help_text


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
        (["solve", "FrozenLake-v1", "--env-kwargs", "map_name=9x9"], "map_name='9x9'"),
        (["solve", "GridWorld", "--env-kwargs", "size=-1"], "no keyword 'size'"),
        (["solve", "GridWorld", "--env-kwargs", "rows=-1"], "-1x4 grid is not possible"),
        (["solve", "GridWorld", "--env-kwargs", "rows"], "KEY=VALUE"),
        (
            ["solve", "GridWorld", "--method", "magic"],
            "--method expects one of value-iteration, policy-iteration, not 'magic'",
        ),
        (
            ["train", "toy-counter", "--env", "X", "--total-steps", "abc"],
            "--total-steps expects a whole number (e.g. 100000, 100_000, 1e5 or 100k), not 'abc'",
        ),
        (["train", "toy-counter", "--env", "X", "--total-steps", "1.5"], "not '1.5'"),
        (["train", "toy-counter", "--env", "X", "--w", "heavy"], "--w expects a number"),
        (["train", "toy-counter", "--total-steps", "3"], "toy-counter needs an environment (--env"),
        (
            ["train", "toy-counter", "--env", "X", "--no-such-flag", "1"],
            "has no flag --no-such-flag",
        ),
        (
            ["train", "toy-counter", "--env", "X", "--totl-steps", "1"],
            "did you mean --total-steps?",
        ),
        (["train", "grpo", "--env", "X"], "use `rlx align grpo"),
        (["eval"], "the following arguments are required: RUN_DIR (see `rlx eval --help`)"),
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
        "for args in (['--help'], ['--version'], ['list'], ['train', '--help'],\n"
        "             ['align', '--help']):\n"
        "    assert rlx.cli.main(args) == 0\n"
        "heavy = {'torch', 'numba', 'transformers', 'gymnasium', 'tyro'} & set(sys.modules)\n"
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


# --- every --help generated, the parser's own errors, the smaller things of issue 39 ------------


def test_every_help_is_generated_from_the_code(capsys):
    """The top level, `rlx train` and `rlx align` list their commands (from the registry and
    the argument classes), and each command's flags come from its dataclass."""
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    assert all(name in top for name in ("train", "align", "doctor", "recommend", "play"))
    assert main(["train", "--help"]) == 0
    train = capsys.readouterr().out
    assert "usage: rlx train ALGO" in train and "q-learning" in train and "toy-counter" in train
    assert "sft" not in train.split("algorithms:")[1]  # language models: rlx align
    assert main(["align", "--help"]) == 0
    align = capsys.readouterr().out
    for command in ("tiny", "data", "sft", "rm", "dpo", "grpo", "rlhf", "eval"):
        assert f"\n  {command} " in align, command
    for args, shown in (
        (["eval", "--help"], ("RUN_DIR", "--episodes INT", "--env-kwargs [KEY=VALUE ...]")),
        (["solve", "--help"], ("{value-iteration,policy-iteration}", "--gamma FLOAT")),
        (["doctor", "--help"], ("[RUN ...]", "--strict, --no-strict")),
        (["align", "tiny", "--help"], ("--out DIR", "--arch {llama,gpt2}")),
    ):
        with pytest.raises(SystemExit) as exited:
            main(args)
        out = capsys.readouterr().out
        assert exited.value.code == 0 and all(text in out for text in shown), (args, out)


def test_align_stage_help_lists_its_fields(capsys):
    pytest.importorskip("transformers")
    with pytest.raises(SystemExit):
        main(["align", "sft", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: rlx align sft [")
    assert "--model STR" in out and "--data STR" in out and "--learning-rate FLOAT" in out
    assert "--env " not in out  # a data stage takes no env
    assert "SFTConfig" not in out


@pytest.mark.parametrize(("given", "steps"), [("1e1", 10), ("1.2e1", 12), ("1_2", 12), ("12", 12)])
def test_whole_numbers_may_be_written_as_people_write_them(given, steps, tmp_path):
    """--total-steps 1e4 was refused (issue 39); a whole number in any usual spelling is not."""
    run_dir = tmp_path / "r"
    assert main(["train", "toy-counter", "--env", "X", "--run-dir", str(run_dir),
                 "--total-steps", given, "--no-progress"]) == 0  # fmt: skip
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == steps


def test_whole_number_suffixes_and_refusals():
    import argparse

    from rlx.flags import whole_number

    assert whole_number("100k") == 100_000 and whole_number("2M") == 2_000_000
    assert whole_number("1e4") == 10_000 and whole_number("10_000") == 10_000
    for bad in ("1.5", "1e-3", "ten", "inf", "nan", "1e400"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"not '{bad}'"):
            whole_number(bad)


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("--lr", "--learning-rate"), ("--learning_rate", "--learning-rate"),
     ("--learnin-rate", "--learning-rate"), ("--ent", "--ent-coef"), ("--bs", "--batch-size")],
)  # fmt: skip
def test_an_unknown_flag_gets_the_one_meant(typed, meant):
    from rlx.flags import suggest

    options = ["--learning-rate", "--ent-coef", "--batch-size", "--total-steps", "--gamma"]
    assert suggest(typed, options) == [meant]


def test_lr_suggests_learning_rate_on_the_command_line(capsys):
    assert main(["train", "ppo", "--env", "CartPole-v1", "--lr", "3e-4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "rlx: error: rlx train ppo has no flag --lr; did you mean --learning-rate? "
        "(see `rlx train ppo --help`)."
    )


def test_a_flag_given_once_is_parsed_once_and_the_record_fills_the_rest(tmp_path, capsys):
    """--resume with only --total-steps keeps every other field of config.json, even one
    whose recorded value is not the default (w=2), and a flag given overrides it."""
    run_dir = tmp_path / "r"
    assert main(["train", "toy-counter", "--env", "X", "--run-dir", str(run_dir),
                 "--total-steps", "2", "--w", "2", "--no-progress"]) == 0  # fmt: skip
    assert main(["train", "toy-counter", "--run-dir", str(run_dir), "--resume",
                 "--total-steps", "4", "--seed", "7", "--no-progress"]) == 0  # fmt: skip
    config = json.loads((run_dir / "config.json").read_text())
    assert config["config"] == {**config["config"], "w": 2.0, "total_steps": 4, "seed": 7}
    assert [h["kind"] for h in config["history"]] == ["start", "resume"]
    assert config["history"][1]["command"].startswith("rlx train toy-counter --run-dir")


def test_cli_refusals_name_flags_not_python_arguments(tmp_path, capsys):
    run_dir = tmp_path / "r"
    assert main(["train", "toy-counter", "--env", "X", "--run-dir", str(run_dir),
                 "--total-steps", "2", "--no-progress"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["train", "toy-counter", "--env", "X", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "pass --resume to continue it, --overwrite to start over in it" in err
    assert "=True" not in err
    assert main(["train", "toy-counter", "--env", "X", "--run-dir", str(run_dir),
                 "--overwrite", "--total-steps", "3", "--no-progress"]) == 0  # fmt: skip
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 3


def test_play_quits_with_0_and_only_ctrl_c_is_130(monkeypatch, capsys):
    """q or the end of input is a deliberate quit (exit 0); Ctrl-C is 130."""
    import io

    for typed in ("q\n", ""):
        monkeypatch.setattr("sys.stdin", io.StringIO(typed))
        assert main(["play", "tictactoe"]) == 0
        assert "you gave up." in capsys.readouterr().out

    class CtrlC(io.StringIO):
        def readline(self, *_):
            raise KeyboardInterrupt

    monkeypatch.setattr("sys.stdin", CtrlC())
    assert main(["play", "tictactoe"]) == 130
    assert "rlx: interrupted" in capsys.readouterr().err


def test_recommend_knows_atari_ids_as_train_does(capsys):
    """`rlx train dqn --env ALE/Pong-v5` works, so `rlx recommend ALE/Pong-v5` must too."""
    pytest.importorskip("ale_py")
    assert main(["recommend", "ALE/Pong-v5"]) == 0
    out = capsys.readouterr().out
    assert "Recommended: dqn" in out and "rlx train dqn --env ALE/Pong-v5" in out


def test_doctor_says_what_it_checked_on_a_run_no_rule_reads(tmp_path, capsys):
    """An AlphaZero run logs losses and arena results no rule of the table reads: the doctor
    says it checked them for NaN or inf, not "checked no known metric"."""
    run = tmp_path / "az"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"algo": "alphazero", "env": "tictactoe",
                                                 "config": {}}))  # fmt: skip
    rows = [{"step": i, "wall_s": float(i), "loss": 3.0 - 0.1 * i, "policy_loss": 2.0,
             "value_loss": 1.0, "vs_random_win": 0.5} for i in range(1, 6)]  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["doctor", str(run)]) == 0
    out = capsys.readouterr().out
    assert "no known metric" not in out
    assert "checked the 4 logged metrics for NaN or inf: loss, policy_loss, value_loss" in out
    assert "no other rule of the troubleshooting table reads these metrics" in out


def test_rich_output_keeps_its_colours_and_folder_text_keeps_no_control_character(
    tmp_path, capsys, monkeypatch
):
    """stdout passes through rlx.errors.printable, but rich writes its own escape codes for
    colour: those must reach a terminal as they are (not as the text '\\x1b['), while a run
    folder's own text in the summary table is escaped (no control character, no markup)."""
    from rlx.cli import _print_summary

    monkeypatch.setenv("FORCE_COLOR", "1")  # rich colours as on a terminal
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" in out and "\\x1b[" not in out
    run = tmp_path / "r"
    run.mkdir()
    hostile = {"status": "complete", "env": "\x1b]0;owned\x07[bold]Cart[/bold]\x1b[2J"}
    (run / "summary.json").write_text(json.dumps(hostile))
    _print_summary(run, 1.0)
    out = capsys.readouterr().out
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\x07" not in out
    assert "\\x1b]0;owned" in out and "[bold]Cart[/bold]" in out
