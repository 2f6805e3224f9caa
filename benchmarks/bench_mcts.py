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
the root is proven). The settings (simulations, the exploration constant, rollouts per leaf,
solving off) are read from rlx's player and OpenSpiel's Python bot (the C++ bot gets the same
arguments) and must be equal. Each engine searches the same positions: the empty board and
positions reached by random moves; one repeat searches every position once, and every engine
runs ``--repeats`` repeats (at least 3). Warm-up (numba's compile or cache load, OpenSpiel's
first call) is excluded from the timing. Reported: simulations per second per repeat
(simulations / wall time of ``step``), median and min, and the ratios of the medians, with the
goals: rlx >= 5x OpenSpiel Python and >= 0.5x OpenSpiel C++ on each game; the table goes to
``benchmarks/results/mcts.json``. ``--rlx-only`` times rlx alone.

Run: ``.venv/bin/python benchmarks/bench_mcts.py [--simulations 1000] [--repeats 5]``;
``--quick`` checks that it works (100 simulations, 3 repeats).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from results import MIN_REPEATS, goal, ratio, settings_table, spread, write_result  # noqa: E402
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
) -> list[float]:
    """Simulations per second of ``step`` over every state, once per repeat."""
    step(states[0])  # warm-up: numba's cache load, OpenSpiel's first allocations
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for state in states:
            step(state)
        rates.append(simulations * len(states) / (time.perf_counter() - t0))
    return rates


def rlx_player(game: Game, simulations: int, seed: int) -> MCTSPlayer:
    return MCTSPlayer(game, simulations=simulations, seed=seed, c=UCT_C)


def python_bot(native_game: Any, simulations: int, seed: int) -> Any:
    from open_spiel.python.algorithms import mcts

    return mcts.MCTSBot(
        native_game,
        UCT_C,
        simulations,
        mcts.RandomRolloutEvaluator(n_rollouts=1, random_state=np.random.RandomState(seed)),
        solve=False,
        random_state=np.random.RandomState(seed),
    )


def like_for_like(simulations: int, seed: int) -> list[dict[str, Any]]:
    """rlx's player against OpenSpiel's Python bot, setting by setting (read from both)."""
    import pyspiel

    ours = rlx_player(TicTacToe(), simulations, seed)
    theirs = python_bot(pyspiel.load_game("tic_tac_toe"), simulations, seed)
    rlx = {
        "simulations per move": ours.simulations,
        "UCT exploration constant": ours.c,
        "random rollouts per leaf": 1,  # rlx's rollout search runs one per simulation
        "solve proven nodes": False,
        "threads": int(os.environ["NUMBA_NUM_THREADS"]),
    }
    peer = {
        "simulations per move": theirs.max_simulations,
        "UCT exploration constant": theirs.uct_c,
        "random rollouts per leaf": theirs.evaluator.n_rollouts,
        "solve proven nodes": theirs.solve,
        "threads": 1,  # OpenSpiel's bots are single-threaded
    }
    return settings_table(rlx, peer)


def bench_game(
    game: Game,
    name: str,
    depths: tuple[int, ...],
    simulations: int,
    repeats: int,
    seed: int,
    rlx_only: bool = False,
) -> dict[str, Any]:
    lines = positions(game, depths, seed)
    rlx_states = [rlx_state(game, m) for m in lines]
    rlx_rate = sims_per_second(rlx_player(game, simulations, seed), rlx_states, simulations,
                               repeats)  # fmt: skip
    if rlx_only:
        return {"rlx": rlx_rate, "positions": len(lines)}

    import pyspiel

    native_game = pyspiel.load_game(name)
    native_states = [native_state(native_game, m) for m in lines]
    bot = python_bot(native_game, simulations, seed)
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
        "OpenSpiel Python": sims_per_second(bot.step, native_states, simulations, repeats),
        "OpenSpiel C++": sims_per_second(cpp_bot.step, native_states, simulations, repeats),
        "positions": len(lines),
    }


ENGINES = ("rlx", "OpenSpiel Python", "OpenSpiel C++")
GOALS = {"OpenSpiel Python": 5.0, "OpenSpiel C++": 0.5}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=1000, help="per move, all engines")
    parser.add_argument(
        "--repeats", type=int, default=5, help=f"searches of every position (>= {MIN_REPEATS})"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rlx-only", action="store_true", help="time rlx alone, no OpenSpiel")
    parser.add_argument("--quick", action="store_true",
                        help="100 simulations, 3 repeats: checks that it works")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where mcts.json goes (default benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.simulations, args.repeats = min(args.simulations, 100), MIN_REPEATS
    settings = [] if args.rlx_only else like_for_like(args.simulations, args.seed)
    rows, goals, details = [], [], {}
    for game, name, depths in GAMES:
        result = bench_game(game, name, depths, args.simulations, args.repeats, args.seed,
                            args.rlx_only)  # fmt: skip
        rates = {engine: spread(result[engine]) for engine in ENGINES if engine in result}
        details[name] = rates
        row: list[Any] = [name, result["positions"]]
        for engine in ENGINES:
            rate = rates.get(engine)
            row += [rate["median"], rate["min"]] if rate else ["not run", "-"]
        for peer, target in GOALS.items():
            value = ratio(rates["rlx"]["median"], rates[peer]["median"]) if peer in rates else None
            row.append("not run" if value is None else value)
            goals.append(goal(f"{name}: rlx at least {target:g}x {peer} (median sims/s)",
                              f"ratio >= {target:g}", value,
                              None if value is None else value >= target))  # fmt: skip
        rows.append(row)
        print(f"{name}: " + ", ".join(f"{e} {r['median']:,.0f}/s" for e, r in rates.items()))
    columns = ["game", "positions", "rlx sims/s, median", "rlx min", "OpenSpiel Python, median",
               "Python min", "OpenSpiel C++, median", "C++ min", "rlx / Python",
               "rlx / C++"]  # fmt: skip
    write_result(
        "mcts",
        title="Rollout MCTS: simulations per second, rlx vs OpenSpiel's Python and C++ MCTSBot",
        columns=columns,
        rows=rows,
        libraries=("numba", "open_spiel"),
        repeats=args.repeats,
        seeds=[args.seed],
        goals=goals,
        peer="OpenSpiel",
        settings=settings,
        details=details,
        notes=f"UCT with random rollouts, {args.simulations} simulations per move, "
        f"uct_c={UCT_C}, one thread; every engine searches every position once per repeat, "
        f"{args.repeats} repeats; warm-up excluded; sims/s per repeat, median and min.",
        quick=args.quick,
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
