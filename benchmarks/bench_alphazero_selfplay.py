"""AlphaZero self-play speed: the PUCT search's numba kernels vs the same search in Python.

One self-play iteration with the ``connect4`` preset's search (64 games played together, 100
PUCT simulations every move, no playout cap, root noise, the first 10 moves drawn from the visit
counts) with the preset's residual network (3 blocks x 32 channels, seeing the stones and the
threat cells, randomly initialised, seed 0, or a trained run's with ``--agent RUN_DIR``: its
games are longer and its trees deeper), one torch thread, twice: with
:func:`rlx.games.search.search` as self-play calls it (tic-tac-toe and Connect Four run in
:mod:`rlx.games.kernels`) and with ``use_kernels=False`` (the Python tree, which every other
game uses). Both give the same visit counts from the same generator, so both play the very same
games: the difference is the search's own time. Reported: wall seconds, moves per second,
network evaluations per second, and the share of the time spent in the network (timed around
the evaluator), each the median (and min) of ``--repeats`` iterations (at least 3) run
alternately; the table goes to ``benchmarks/results/alphazero_selfplay.json``. The peer here is
rlx's own Python tree (no other library runs this search); both read one config object.
Goals: the same games both ways, and the kernels faster (median wall seconds).

Run: ``.venv/bin/python benchmarks/bench_alphazero_selfplay.py [--games 64] [--simulations 100]
[--agent RUN_DIR]``; ``--quick`` checks that it works (4 games x 10 simulations).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import functools  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from unittest import mock  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from results import MIN_REPEATS, goal, ratio, settings_table, spread, write_result  # noqa: E402
from rlx.games import alphazero as az  # noqa: E402
from rlx.games import selfplay  # noqa: E402
from rlx.games.leaf_evaluators import PolicyValueEvaluator  # noqa: E402
from rlx.games.search import SearchConfig, search  # noqa: E402

EVALUATOR = az.evaluator  # the unpatched one


def timed_evaluator(net: az.PolicyValueNet, clock: list[float], calls: list[int]):
    """The network's evaluator, adding its wall time to ``clock[0]`` and its rows to
    ``calls[0]``."""
    policy_value = EVALUATOR(net).policy_value

    def timed(planes: np.ndarray, legal: np.ndarray):
        t0 = time.perf_counter()
        out = policy_value(planes, legal)
        clock[0] += time.perf_counter() - t0
        calls[0] += len(planes)
        return out

    return PolicyValueEvaluator(timed)


def one_iteration(config: az.AlphaZeroConfig, net: az.PolicyValueNet, python: bool) -> dict:
    """Self-play ``config.games_per_iteration`` games (:func:`rlx.games.selfplay.self_play`,
    with the search's kernels or its Python tree); timings and the games' results."""
    clock, calls = [0.0], [0]
    tree = functools.partial(search, use_kernels=not python)
    game = az.make_game("connect4", config)
    with mock.patch.object(selfplay, "search", tree):
        t0 = time.perf_counter()
        played = selfplay.self_play(
            game, timed_evaluator(net, clock, calls), config, np.random.default_rng(0)
        )
        wall = time.perf_counter() - t0
    lengths = [p.length for p in played]
    return {"wall": wall, "moves": sum(lengths), "evals": calls[0], "net": clock[0],
            "lengths": lengths, "results": [p.result for p in played]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--simulations", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS)
    parser.add_argument("--agent", default=None, help="a connect4 AlphaZero run's folder")
    parser.add_argument("--quick", action="store_true",
                        help="4 games x 10 simulations: checks that it works")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where the result file goes (default benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.games, args.simulations = min(args.games, 4), min(args.simulations, 10)
    torch.set_num_threads(1)
    config = dataclasses.replace(
        az.AlphaZeroConfig(**{**az.PRESETS["connect4"], "seed": 0}),
        games_per_iteration=args.games, simulations=args.simulations,
        full_search_fraction=1.0,  # every move a full search
    )  # fmt: skip
    game = az.make_game("connect4", config)
    torch.manual_seed(0)
    net = az.PolicyValueNet(game, config).eval()
    if args.agent:
        import rlx

        agent = rlx.load(args.agent)
        net, config = agent.net.eval(), dataclasses.replace(config, **_encoding(agent.config))
        game = agent.game
    # compile (or load from numba's cache) the kernels off the clock
    search(game, [game.initial_state()], az.evaluator(net), SearchConfig(2),
           np.random.default_rng(0))  # fmt: skip
    runs: dict[str, list[dict]] = {"numba kernels": [], "Python tree": []}
    for _ in range(args.repeats):  # alternated, so a busy moment hits both
        runs["numba kernels"].append(one_iteration(config, net, python=False))
        runs["Python tree"].append(one_iteration(config, net, python=True))
    same = all(
        k["lengths"] == p["lengths"] and k["results"] == p["results"]
        for k, p in zip(runs["numba kernels"], runs["Python tree"], strict=True)
    )
    network = f"the network of {args.agent}" if args.agent else "a fresh connect4 preset network"
    print(f"Connect Four self-play: {args.games} games x {args.simulations} simulations per move, "
          f"{network}, 1 torch thread; same games both ways: {same}")  # fmt: skip
    table, walls = [], {}
    for name, iterations in runs.items():
        wall = spread([r["wall"] for r in iterations])
        walls[name] = wall
        first = iterations[0]
        moves_per_s = spread([r["moves"] / r["wall"] for r in iterations])
        evals_per_s = spread([r["evals"] / r["wall"] for r in iterations])
        share = spread([r["net"] / r["wall"] for r in iterations])
        table.append([name, wall["median"], wall["min"], moves_per_s["median"],
                      evals_per_s["median"], share["median"], first["moves"]])  # fmt: skip
        print(
            f"{name:14s} wall {wall['median']:.2f} s (min {wall['min']:.2f}), "
            f"{moves_per_s['median']:.1f} moves/s, network share {share['median']:.0%}"
        )
    speedup = ratio(walls["Python tree"]["median"], walls["numba kernels"]["median"])
    print(f"kernels: {speedup}x the Python tree's speed")
    both = {"games": config.games_per_iteration, "simulations per move": config.simulations,
            "network": f"{config.net} {config.blocks}x{config.channels}", "seed": 0,
            "torch threads": torch.get_num_threads()}  # fmt: skip
    goals = [
        goal("the kernels play the same games as the Python tree", "same", same, same),
        goal("the kernels faster than the Python tree (median wall seconds)", "ratio > 1",
             speedup, speedup is not None and speedup > 1),
    ]  # fmt: skip
    write_result(
        "alphazero_selfplay",
        title="AlphaZero self-play on Connect Four: the search's numba kernels vs its Python tree",
        columns=[
            "search",
            "wall s, median",
            "wall s, min",
            "moves/s, median",
            "network evaluations/s, median",
            "network share, median",
            "moves",
        ],
        rows=table,
        libraries=("torch", "numba"),
        repeats=args.repeats,
        seeds=[0],
        goals=goals,
        peer="rlx's Python tree",
        settings=settings_table(both, both),
        figures={"kernels_vs_python_tree": speedup, "same_games": same},
        details={
            name: [{k: r[k] for k in ("wall", "moves", "evals", "net")} for r in its]
            for name, its in runs.items()
        },
        notes=f"One self-play iteration: {args.games} games x {args.simulations} PUCT "
        f"simulations per move, {network}, one torch thread; both searches play the same "
        f"games; {args.repeats} iterations each, alternated.",
        quick=args.quick,
        out_dir=args.out_dir,
    )


def _encoding(config: az.AlphaZeroConfig) -> dict:
    """The fields of a trained run's config that its network's input depends on."""
    return {"threat_planes": config.threat_planes, "net": config.net,
            "channels": config.channels, "blocks": config.blocks}  # fmt: skip


if __name__ == "__main__":
    main()
