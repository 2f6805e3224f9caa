"""Where a Connect Four agent loses its games: the exact value of every position it moved in.

A trained agent (``--agent RUN_DIR``) plays ``--games`` games against an opponent (``mcts-K``
by default, seats alternating, the agent at ``--simulations`` per move). For every game it does
not win, each position the agent moved in with at most ``--empties`` empty cells is solved
exactly (:mod:`rlx.games.connect4_solver`); the report names the last position it held won or
drawn and the move that lost it. A game whose first solved position is already lost was lost
earlier than ``--empties`` reaches. The games not won go to
``benchmarks/results/connect4_losses.json`` (``--out-dir`` elsewhere).

Run: ``.venv/bin/python benchmarks/analyse_connect4_losses.py --agent D/run [--games 20]
[--opponent mcts-1000] [--empties 28]``
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import itertools  # noqa: E402
from pathlib import Path  # noqa: E402

import rlx  # noqa: E402
from results import write_result  # noqa: E402  (benchmarks/results.py)
from rlx.games import connect4_solver  # noqa: E402
from rlx.games.evaluation import make_opponent  # noqa: E402


def play_and_solve(game, agent, opponent, agent_first: bool, empties: int) -> tuple[int, list]:
    """One game; the agent's result and ``(empty cells, exact value, move)`` of each position
    the agent moved in with at most ``empties`` empty cells."""
    me = 1 if agent_first else -1
    state, solved = game.initial_state(), []
    while not state.is_terminal:
        move = agent(state) if state.to_play == me else opponent(state)
        if state.to_play == me and 42 - state.moves <= empties:
            solved.append((42 - state.moves, connect4_solver.value(state), move))
        state = game.apply(state, move)
    return int(state.result) * me, solved


def describe(solved: list) -> str:
    """Where the game turned: the last won or drawn position before a lost one."""
    if not solved:
        return "no position solved"
    for (cells, value, move), (next_cells, next_value, _) in itertools.pairwise(solved):
        if value is not None and value >= 0 and next_value == -1:
            held = "won" if value == 1 else "drawn"
            return (f"{held} with {cells} empty cells, column {move} played, lost by "
                    f"{next_cells}")  # fmt: skip
    first = solved[0]
    if first[1] == -1:
        return f"already lost with {first[0]} empty cells"
    return "values: " + ", ".join(f"{c}:{v}" for c, v, _ in solved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", required=True, help="a Connect Four run folder")
    parser.add_argument("--opponent", default="mcts-1000")
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--simulations", type=int, default=200)
    parser.add_argument("--empties", type=int, default=28, help="solve from this many empty cells")
    parser.add_argument("--seed", type=int, default=1, help="the opponent's seed")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where the result file goes (default benchmarks/results)")  # fmt: skip
    args = parser.parse_args()
    agent = rlx.load(args.agent)
    if agent.game.name != "connect4":
        parser.error(f"--agent must be a Connect Four run; {args.agent} plays {agent.game.name}.")
    player = functools.partial(agent.act, simulations=args.simulations)
    opponent = make_opponent(agent.game, args.opponent, seed=args.seed)
    tally = {1: 0, 0: 0, -1: 0}
    rows = []
    for i in range(args.games):
        first = i % 2 == 0
        result, solved = play_and_solve(agent.game, player, opponent, first, args.empties)
        tally[result] += 1
        if result < 1:
            outcome = "lost" if result < 0 else "drawn"
            seat = "first" if first else "second"
            print(f"game {i} ({seat}) {outcome}: {describe(solved)}", flush=True)
            rows.append([i, seat, outcome, describe(solved)])
    print(f"{tally[1]} won, {tally[0]} drawn, {tally[-1]} lost against {args.opponent}")
    write_result(
        "connect4_losses",
        title=f"Where a Connect Four agent's games against {args.opponent} were not won",
        columns=["game", "agent's seat", "outcome", "where it turned"],
        rows=rows,
        libraries=("torch", "numba"),
        repeats=args.games,
        goals=[],
        peer="(an analysis of one rlx agent)",
        seeds=[args.seed],
        figures={"won": tally[1], "drawn": tally[0], "lost": tally[-1]},
        notes=f"The agent of {args.agent} at {args.simulations} simulations per move, "
        f"{args.games} games, seats alternating; positions solved from {args.empties} empty "
        "cells on; the games are the repeats.",
        out_dir=args.out_dir,
    )


if __name__ == "__main__":
    main()
