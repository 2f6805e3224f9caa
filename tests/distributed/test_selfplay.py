"""AlphaZero and MuZero self-play workers on Ray: the same games as worker processes, faults
replayed."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rlx
from rlx import registry
from rlx.distributed.env_runners import RunnerPool
from rlx.distributed.selfplay import remote_self_play
from rlx.games import make
from rlx.games.alphazero import METHOD, AlphaZeroConfig, PolicyValueNet
from rlx.games.selfplay import SelfPlayPool, play_share

pytestmark = pytest.mark.ray

TINY = {"games_per_iteration": 6, "simulations": 8, "eval_simulations": 8,
        "train_steps_per_iteration": 3, "batch_size": 16, "eval_games": 0}  # fmt: skip


def play_with_ray(config: AlphaZeroConfig, seed: int):
    game = make("tictactoe")
    net = PolicyValueNet(game, config)
    pool = SelfPlayPool(METHOD, game, config, remote_self_play(registry.get("alphazero")))
    try:
        return pool.play(net, np.random.default_rng(seed)), net
    finally:
        pool.close()


def play_here(config: AlphaZeroConfig, net: PolicyValueNet, seed: int, k: int):
    """What ``workers=k`` processes would play: the same shares and seeds, in this process."""
    rng = np.random.default_rng(seed)
    n = config.games_per_iteration
    shares = [n // k + (i < n % k) for i in range(k)]
    seeds = rng.integers(0, 2**63 - 1, size=k)
    weights = {name: t.detach().clone() for name, t in net.state_dict().items()}
    return [game for s, g in zip(seeds, shares, strict=True)
            for game in play_share(METHOD, "tictactoe", config, weights, int(s), g)]  # fmt: skip


def assert_same_games(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        for name in ("planes", "policies", "to_play", "root_values", "actions"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name))
        assert (x.length, x.result) == (y.length, y.result)


def test_ray_workers_play_the_games_worker_processes_would():
    config = AlphaZeroConfig(**TINY, runners=2)
    played, net = play_with_ray(config, seed=7)
    assert len(played) == 6 and all(len(g.planes) == g.length > 0 for g in played)
    assert_same_games(played, play_here(config, net, seed=7, k=2))


def test_a_killed_worker_is_replaced_and_its_games_played_again(monkeypatch, capfd):
    config = AlphaZeroConfig(**TINY, runners=2)
    run = RunnerPool.run
    calls = []

    def run_with_a_crash(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            self.kill(0)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(RunnerPool, "run", run_with_a_crash)
    played, net = play_with_ray(config, seed=7)
    assert "Ray self-play worker 0 died" in capfd.readouterr().err
    assert_same_games(played, play_here(config, net, seed=7, k=2))


def test_alphazero_trains_with_ray_workers(tmp_path):
    rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "run", progress=False, iterations=2,
              runners=2, **TINY)  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    assert all(5 <= row["game_length"] <= 9 for row in rows)
    assert [row["runner_restarts"] for row in rows] == [0, 0]


def test_alphazero_logs_a_worker_restart_and_goes_on(tmp_path, monkeypatch):
    run = RunnerPool.run
    calls = []

    def run_with_a_crash(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # in the second iteration
            self.kill(1)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(RunnerPool, "run", run_with_a_crash)
    rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "run", progress=False, iterations=3,
              runners=2, **TINY)  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert [row["runner_restarts"] for row in rows] == [0, 1, 1]


def test_muzero_trains_with_ray_workers(tmp_path):
    """The self-play loop is shared: MuZero takes runners as AlphaZero does."""
    rlx.train("muzero", "tictactoe", run_dir=tmp_path / "run", progress=False, iterations=2,
              runners=2, **{**TINY, "buffer_size": 64, "latent_size": 16,
                            "hidden_sizes": (32,)})  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    assert all(5 <= row["game_length"] <= 9 for row in rows)
    assert [row["runner_restarts"] for row in rows] == [0, 0]
