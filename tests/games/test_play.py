"""``rlx play``: a scripted person against an agent; bad input is answered, not fatal."""

from __future__ import annotations

import io

import pytest

import rlx
from rlx.cli import main
from rlx.errors import EnvError
from rlx.games.play import play


def test_illegal_and_garbled_moves_are_answered_with_the_legal_ones():
    # X takes 4; then "4" again (taken), "x" (not a number), 9 (off the board), then quits
    stdin = io.StringIO("4\n4\nx\n9\nq\n")
    stdout = io.StringIO()
    outcome = play("tictactoe", stdin=stdin, stdout=stdout)
    text = stdout.getvalue()
    assert outcome is None and "you gave up." in text
    assert "move 4 is not legal here; legal moves:" in text
    assert "'x' is not a move" in text and "move 9 is not legal here" in text
    assert "the agent plays" in text and " X " in text  # the board is drawn after the moves


def test_a_whole_game_against_pure_mcts_ends_with_a_result():
    # the person always plays the first legal move offered; pure MCTS (1000 sims) must not lose
    stdout = io.StringIO()

    class FirstLegal(io.StringIO):
        def readline(self, *_):
            prompt = stdout.getvalue().rsplit("your move (", 1)[-1]
            return prompt.split(" ", 1)[0].rstrip(",") + "\n"

    outcome = play("tictactoe", stdin=FirstLegal(), stdout=stdout, human_first=False)
    assert outcome in (-1, 0)
    assert stdout.getvalue().rstrip().endswith(("you lost.", "a draw."))


def test_the_cli_plays_connect_four_and_quits_on_end_of_input(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("3\n"))
    assert main(["play", "connect4", "--seed", "1"]) == 0  # giving up is no failure
    out = capsys.readouterr().out
    assert "0 1 2 3 4 5 6" in out and "you gave up." in out


def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys):
    assert main(["play", "chess"]) == 2
    assert "unknown game 'chess'" in capsys.readouterr().err
    rlx.train("q-learning", "FrozenLake-v1", run_dir=tmp_path / "ql", progress=False,
              episodes=10)  # fmt: skip
    assert main(["play", "tictactoe", "--agent", str(tmp_path / "ql")]) == 2
    assert "not a board-game agent" in capsys.readouterr().err


def test_agent_of_another_game_is_refused(tmp_path):
    rlx.train("alphazero", "connect4", run_dir=tmp_path / "c4", progress=False, iterations=1,
              games_per_iteration=1, simulations=2, train_steps_per_iteration=1, eval_games=0,
              blocks=1, channels=8)  # fmt: skip
    with pytest.raises(EnvError, match="trained on 'connect4', not 'tictactoe'"):
        play("tictactoe", rlx.load(tmp_path / "c4"), source=tmp_path / "c4",
             stdin=io.StringIO(""), stdout=io.StringIO())  # fmt: skip
