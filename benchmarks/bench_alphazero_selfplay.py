"""AlphaZero self-play speed: the PUCT search's numba kernels vs the same search in Python.

One self-play iteration with the ``connect4`` preset's search (64 games played together, 100
PUCT simulations every move, no playout cap, root noise, the first 10 moves drawn from the visit
counts) with the preset's residual network (3 blocks x 32 channels, randomly initialised, seed
0, or a trained run's with ``--agent RUN_DIR``: its games are longer and its trees deeper), one
torch thread, twice: with :func:`rlx.games.mcts.search` (tic-tac-toe and Connect Four go to
:mod:`rlx.games.puct_kernel`) and with :func:`rlx.games.mcts.python_search` (the plain-Python
tree, which every other game uses). Both give the same visit counts from the same generator, so
both play the very same games: the difference is the search's own time. Reported: wall seconds,
moves per second, network evaluations per second, and the share of the time spent in the network
(timed around the evaluator).

Run: ``.venv/bin/python benchmarks/bench_alphazero_selfplay.py [--games 64] [--simulations 100]
[--agent RUN_DIR]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import time  # noqa: E402
from unittest import mock  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from rlx.games import ConnectFour, mcts  # noqa: E402
from rlx.games import alphazero as az  # noqa: E402

EVALUATOR = az.evaluator  # the unpatched one


def timed_evaluator(net: az.PolicyValueNet, clock: list[float], calls: list[int]):
    """The network's evaluator, adding its wall time to ``clock[0]`` and its rows to
    ``calls[0]``."""
    evaluate = EVALUATOR(net)

    def wrapped(planes: np.ndarray, legal: np.ndarray):
        t0 = time.perf_counter()
        out = evaluate(planes, legal)
        clock[0] += time.perf_counter() - t0
        calls[0] += len(planes)
        return out

    return wrapped


def one_iteration(config: az.AlphaZeroConfig, net: az.PolicyValueNet, python: bool) -> dict:
    """Self-play ``config.games_per_iteration`` games; timings and the games' results."""
    clock, calls = [0.0], [0]
    # self-play calls search_with_values (counts and root values): the tree under test
    search = mcts.python_search_with_values if python else mcts.search_with_values
    with (
        mock.patch.object(az, "evaluator", lambda n: timed_evaluator(n, clock, calls)),
        mock.patch.object(az, "search_with_values", search),
    ):
        t0 = time.perf_counter()
        played = az.self_play(ConnectFour(), net, config, np.random.default_rng(0))
        wall = time.perf_counter() - t0
    moves = sum(played.lengths)
    return {"wall": wall, "moves": moves, "evals": calls[0], "net": clock[0],
            "lengths": played.lengths, "results": played.results}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--simulations", type=int, default=100)
    parser.add_argument("--agent", default=None, help="a connect4 AlphaZero run's folder")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = dataclasses.replace(
        az.AlphaZeroConfig(**{**az.PRESETS["connect4"], "seed": 0}),
        games_per_iteration=args.games, simulations=args.simulations,
        full_search_fraction=1.0,  # every move a full search, as in the figures in the README
    )  # fmt: skip
    torch.manual_seed(0)
    net = az.PolicyValueNet(ConnectFour(), config).eval()
    if args.agent:
        import rlx

        net = rlx.load(args.agent).net.eval()
    # compile (or load from numba's cache) the kernels off the clock
    mcts.search(ConnectFour(), [ConnectFour().initial_state()], az.evaluator(net),
                mcts.SearchConfig(2), np.random.default_rng(0))  # fmt: skip
    rows = {"numba kernels": one_iteration(config, net, python=False),
            "Python tree": one_iteration(config, net, python=True)}  # fmt: skip
    same = all(rows["numba kernels"][k] == rows["Python tree"][k] for k in ("lengths", "results"))
    network = f"the network of {args.agent}" if args.agent else "a fresh connect4 preset network"
    print(f"Connect Four self-play: {args.games} games x {args.simulations} simulations per move, "
          f"{network}, 1 torch thread; same games both ways: {same}")  # fmt: skip
    print(f"{'search':14s} {'wall s':>8s} {'moves/s':>9s} {'evals/s':>9s} {'network share':>14s}")
    for name, r in rows.items():
        print(f"{name:14s} {r['wall']:8.2f} {r['moves'] / r['wall']:9.1f} "
              f"{r['evals'] / r['wall']:9.0f} {r['net'] / r['wall']:14.0%}")  # fmt: skip
    ratio = rows["Python tree"]["wall"] / rows["numba kernels"]["wall"]
    print(f"kernels: {ratio:.2f}x the Python tree's speed")


if __name__ == "__main__":
    main()
