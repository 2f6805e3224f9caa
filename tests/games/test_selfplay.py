"""The self-play loop AlphaZero and MuZero share: one vocabulary of metrics, workers, the time
limit, the arena of a run resumed at its end, and checkpoints of the earlier layouts."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
import torch

import rlx
from rlx import metrics as M
from rlx.runs import load_checkpoint, save_checkpoint
from tests.games.local_remote import LocalRemote

TINY = {
    "alphazero": {"iterations": 2, "games_per_iteration": 4, "simulations": 4,
                  "eval_simulations": 4, "train_steps_per_iteration": 3, "batch_size": 16,
                  "eval_every": 1, "eval_games": 2, "eval_opponents": ("random",)},
    "muzero": {"iterations": 2, "games_per_iteration": 4, "simulations": 4,
               "eval_simulations": 4, "train_steps_per_iteration": 3, "batch_size": 16,
               "buffer_size": 200, "latent_size": 16, "hidden_sizes": (32,), "eval_every": 1,
               "eval_games": 2, "eval_opponents": ("random",)},
}  # fmt: skip
ALGOS = list(TINY)
ARENA = re.compile(r"^vs_\w+_(win|draw|loss)$")


def train(algo: str, run_dir: Path, **overrides):
    return rlx.train(algo, "tictactoe", run_dir=run_dir, progress=False, doctor=False,
                     **{**TINY[algo], **overrides})  # fmt: skip


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def untimed(run: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.endswith("_s")} for row in run]


@pytest.mark.parametrize("algo", ALGOS)
def test_both_log_one_vocabulary_of_shared_metric_names(algo, tmp_path):
    """Every logged name is one of ``rlx.metrics`` (or an arena rate), and the two algorithms
    log the same self-play figures."""
    train(algo, tmp_path / algo)
    logged = {key for row in rows(tmp_path / algo) for key in row} - {"step", "wall_s"}
    assert {name for name in logged if not ARENA.match(name)} <= M.ALL_METRICS
    shared = {M.LOSS, M.POLICY_LOSS, M.VALUE_LOSS, M.LR, M.GAME_LENGTH, M.FIRST_PLAYER_WIN,
              M.DRAW, M.POSITIONS, M.SELFPLAY_S, M.TRAIN_S, "vs_random_win"}  # fmt: skip
    assert shared <= logged
    assert (M.REWARD_LOSS in logged) == (algo == "muzero")


def test_muzero_plays_in_worker_processes_the_games_remote_runners_would(tmp_path, monkeypatch):
    """MuZero takes ``workers`` and ``runners`` as AlphaZero does: two worker processes and two
    remote workers (here in this process) play the same shares with the same seeds, so both
    runs log the same figures, and a second run with workers repeats the first."""
    import rlx.distributed

    monkeypatch.setattr(rlx.distributed, "scaled_out",
                        lambda spec: functools.partial(spec.train, remote=LocalRemote))  # fmt: skip
    settings = {"eval_games": 0}
    train("muzero", tmp_path / "procs", workers=2, **settings)
    train("muzero", tmp_path / "again", workers=2, **settings)
    train("muzero", tmp_path / "remote", runners=2, **settings)
    remote = [{k: v for k, v in row.items() if k != "runner_restarts"}
              for row in rows(tmp_path / "remote")]  # fmt: skip
    assert untimed(rows(tmp_path / "procs")) == untimed(remote)
    assert untimed(rows(tmp_path / "procs")) == untimed(rows(tmp_path / "again"))


@pytest.mark.parametrize("algo", ALGOS)
def test_max_minutes_stops_after_the_iteration_that_crosses_it(algo, tmp_path):
    agent = train(algo, tmp_path / "r", iterations=5, eval_every=10, max_minutes=1e-9)
    (row,) = rows(tmp_path / "r")  # one iteration, then out of time: its arena, a checkpoint
    assert row["step"] == 1 and "vs_random_win" in row
    assert load_checkpoint(tmp_path / "r")[0] == 1
    assert agent.config.max_minutes == 1e-9


@pytest.mark.parametrize("algo", ALGOS)
def test_a_run_resumed_at_its_end_reports_its_arena(algo, tmp_path):
    train(algo, tmp_path / "r", iterations=1)
    (tmp_path / "r" / "summary.json").unlink()
    rlx.train(algo, "tictactoe", run_dir=tmp_path / "r", resume=True, progress=False,
              doctor=False)  # fmt: skip
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["steps"] == 1 and "vs_random_win" in summary


def test_checkpoints_keep_alphazeros_layout_and_read_muzeros_earlier_one(tmp_path):
    """AlphaZero's checkpoints keep their layout; MuZero's kept the networks under
    ``"muzero"`` before the loop was shared, and such a checkpoint loads and resumes exactly."""
    train("alphazero", tmp_path / "az", iterations=1, eval_games=0)
    _, state = load_checkpoint(tmp_path / "az")
    assert set(state) == {"game", "net", "optimizer", "buffer", "rng", "iteration"}
    assert set(state["buffer"]) == {"planes", "pi", "z", "cursor"}

    whole = train("muzero", tmp_path / "whole", eval_games=0)
    train("muzero", tmp_path / "cut", iterations=1, eval_games=0)
    step, state = load_checkpoint(tmp_path / "cut")
    assert set(state["buffer"]) == {"observations", "actions", "rewards", "values", "policies",
                                    "policy_mask", "cursor"}  # fmt: skip
    state["muzero"] = state.pop("net")  # as MuZero wrote it before
    save_checkpoint(tmp_path / "cut", step, state)
    assert rlx.load(tmp_path / "cut").act(rlx.games.TicTacToe().initial_state()) in range(9)
    resumed = rlx.train("muzero", "tictactoe", run_dir=tmp_path / "cut", resume=True,
                        progress=False, doctor=False, iterations=2)  # fmt: skip
    for a, b in zip(whole.net.parameters(), resumed.net.parameters(), strict=True):
        assert torch.equal(a, b)
    assert untimed(rows(tmp_path / "cut")) == untimed(rows(tmp_path / "whole"))
