"""Rollout MCTS speed: rlx's numba MCTSPlayer vs OpenSpiel's Python and C++ MCTSBot.

Side by side in one process, one thread, on tic-tac-toe and Connect Four:

1. **rlx**: ``MCTSPlayer(game, simulations=N, seed=0, c=2)``, called on an rlx ``GameState``
   (the whole move: :func:`rlx.games.search.search` with random rollouts, which turns the state
   into bitboards and runs the numba kernel, then the move choice).
2. **OpenSpiel Python**: ``open_spiel.python.algorithms.mcts.MCTSBot(game, uct_c=2,
   max_simulations=N, evaluator=RandomRolloutEvaluator(n_rollouts=1), solve=False)``.
3. **OpenSpiel C++**: ``pyspiel.MCTSBot(game, pyspiel.RandomRolloutEvaluator(1, seed), uct_c=2,
   max_simulations=N, max_memory_mb=1000, solve=False, seed, verbose=False)``.

All three are the same algorithm: UCT selection ``Q/N + c sqrt(ln N_parent / N)``, a node
expanded at its second visit, one uniformly random rollout per simulation, the most visited
move played. ``solve=False`` so that OpenSpiel runs every simulation (MCTS-Solver stops once
the root is proven). Each engine searches the same positions: the empty board and positions
reached by random moves; rlx and C++ search each one ``--repeats`` times, Python once. Warm-up
(numba's compile or cache load, OpenSpiel's first call) is excluded from the timing.
Reported: simulations per second (simulations / wall time of ``step``) and the ratios, with
the goal lines: rlx >= 5x OpenSpiel Python and >= 0.5x OpenSpiel C++; the table goes to
``benchmarks/results/mcts.json`` (``--out-dir`` elsewhere). ``--rlx-only`` times rlx alone.

Run: ``.venv/bin/python benchmarks/bench_mcts.py [--simulations 1000] [--repeats 5]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from results import write_result  # noqa: E402  (benchmarks/results.py)
from rlx.games import ConnectFour, Game, GameState, TicTacToe  # noqa: E402
from rlx.games.rollout_mcts import MCTSPlayer  # noqa: E402

UCT_C = 2.0
# (rlx game, OpenSpiel name, numbers of random moves before the searched positions)
GAMES = (
    (TicTacToe(), "tic_tac_toe", (0, 1, 2, 3, 4)),
    (ConnectFour(), "connect_four", (0, 4, 8, 12, 16, 20)),
)


def positions(game: Game, depths: tuple[int, ...], seed: int) -> list[list[int]]:
    """Move sequences: for each depth, that many random moves ending in a live position."""
    rng = np.random.default_rng(seed)
    out = []
    for depth in depths:
        while True:
            state, moves = game.initial_state(), []
            for _ in range(depth):
                if state.is_terminal:
                    break
                moves.append(int(rng.choice(game.legal_actions(state))))
                state = game.apply(state, moves[-1])
            if not state.is_terminal:
                out.append(moves)
                break
    return out


def rlx_state(game: Game, moves: list[int]) -> GameState:
    state = game.initial_state()
    for move in moves:
        state = game.apply(state, move)
    return state


def native_state(native_game: Any, moves: list[int]) -> Any:
    state = native_game.new_initial_state()
    for move in moves:
        state.apply_action(move)
    return state


def sims_per_second(
    step: Callable[[object], int], states: list[object], simulations: int, repeats: int
) -> float:
    """Simulations per second of ``step`` over every state, ``repeats`` times each."""
    step(states[0])  # warm-up: numba's cache load, OpenSpiel's first allocations
    t0 = time.perf_counter()
    for _ in range(repeats):
        for state in states:
            step(state)
    return simulations * repeats * len(states) / (time.perf_counter() - t0)


def bench_game(
    game: Game,
    name: str,
    depths: tuple[int, ...],
    simulations: int,
    repeats: int,
    seed: int,
    rlx_only: bool = False,
) -> dict[str, float]:
    lines = positions(game, depths, seed)
    rlx_states = [rlx_state(game, m) for m in lines]
    rlx_player = MCTSPlayer(game, simulations=simulations, seed=seed, c=UCT_C)
    rlx_rate = sims_per_second(rlx_player, rlx_states, simulations, repeats)
    if rlx_only:
        return {"rlx": rlx_rate, "positions": len(lines)}

    import pyspiel
    from open_spiel.python.algorithms import mcts

    native_game = pyspiel.load_game(name)
    native_states = [native_state(native_game, m) for m in lines]
    python_bot = mcts.MCTSBot(
        native_game,
        UCT_C,
        simulations,
        mcts.RandomRolloutEvaluator(n_rollouts=1, random_state=np.random.RandomState(seed)),
        solve=False,
        random_state=np.random.RandomState(seed),
    )
    cpp_bot = pyspiel.MCTSBot(
        native_game,
        pyspiel.RandomRolloutEvaluator(1, seed),
        UCT_C,
        simulations,
        1000,  # max_memory_mb: far above what N simulations need, so no search is cut short
        False,  # solve
        seed,
        False,  # verbose
    )
    return {
        "rlx": rlx_rate,
        "OpenSpiel Python": sims_per_second(python_bot.step, native_states, simulations, 1),
        "OpenSpiel C++": sims_per_second(cpp_bot.step, native_states, simulations, repeats),
        "positions": len(lines),
    }


def report(results: dict[str, dict[str, float]], simulations: int) -> tuple[bool, list[list]]:
    """Print the table; whether rlx meets both goals on every game, and the table's rows."""
    print(f"\nsimulations per second ({simulations} simulations per move, uct_c={UCT_C})")
    print(
        f"{'game':<14} {'positions':>9} {'rlx':>12} {'OS Python':>12} {'OS C++':>12} "
        f"{'rlx/Python':>11} {'rlx/C++':>8}"
    )
    met, rows = True, []
    for name, r in results.items():
        if "OpenSpiel C++" not in r:  # --rlx-only
            print(f"{name:<14} {r['positions']:>9} {r['rlx']:>12,.0f}")
            rows.append([name, r["positions"], round(r["rlx"]), None, None, None, None])
            continue
        vs_python = r["rlx"] / r["OpenSpiel Python"]
        vs_cpp = r["rlx"] / r["OpenSpiel C++"]
        met &= vs_python >= 5.0 and vs_cpp >= 0.5
        print(
            f"{name:<14} {r['positions']:>9} {r['rlx']:>12,.0f} {r['OpenSpiel Python']:>12,.0f} "
            f"{r['OpenSpiel C++']:>12,.0f} {vs_python:>10.1f}x {vs_cpp:>7.1f}x"
        )
        rows.append([name, r["positions"], round(r["rlx"]), round(r["OpenSpiel Python"]),
                     round(r["OpenSpiel C++"]), round(vs_python, 2), round(vs_cpp, 2)])  # fmt: skip
    if all("OpenSpiel C++" in r for r in results.values()):
        print("\ngoals: rlx >= 5x OpenSpiel Python and >= 0.5x OpenSpiel C++ (within 2x of it)")
        print(f"goals met: {'yes' if met else 'NO'}")
    print(
        f"(machine: {platform.processor() or platform.machine()}, one thread, "
        f"python {platform.python_version()})"
    )
    return met, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=1000, help="per move, all engines")
    parser.add_argument(
        "--repeats", type=int, default=5, help="searches per position for rlx and C++"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rlx-only", action="store_true", help="time rlx alone, no OpenSpiel")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where mcts.json goes (default benchmarks/results)")  # fmt: skip
    args = parser.parse_args()
    results = {}
    for game, name, depths in GAMES:
        results[name] = bench_game(game, name, depths, args.simulations, args.repeats, args.seed,
                                   args.rlx_only)  # fmt: skip
        print(f"{name} done", flush=True)
    met, rows = report(results, args.simulations)
    figures = {f"rlx_{name}_sims_per_s": row[2] for name, row in zip(results, rows, strict=True)}
    if not args.rlx_only:
        figures["goals_met"] = met
        for name, row in zip(results, rows, strict=True):
            figures[f"{name}_rlx_vs_python"], figures[f"{name}_rlx_vs_cpp"] = row[5], row[6]
    columns = ["game", "positions", "rlx sims/s", "OpenSpiel Python sims/s",
               "OpenSpiel C++ sims/s", "rlx / Python", "rlx / C++"]  # fmt: skip
    write_result(
        "mcts",
        title="Rollout MCTS: simulations per second, rlx vs OpenSpiel's Python and C++ MCTSBot",
        columns=columns,
        rows=rows,
        seeds=[args.seed],
        figures=figures,
        notes=f"UCT with random rollouts, {args.simulations} simulations per move, "
        f"uct_c={UCT_C}, one thread; rlx and C++ search each position {args.repeats} times, "
        "Python once; warm-up excluded.",
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
