"""AlphaZero on Connect Four: strength reached within a CPU budget, against pure MCTS.

1. **Train**: ``rlx train alphazero --env connect4`` (the ``connect4`` preset: a residual
   network that sees the stones and both players' threat cells, 160 self-play games per
   iteration with a quarter of the moves searched fully (playout-cap randomisation), the value
   trained on ``(z + Q) / 2``; ``--set threat_planes=false`` for the stones alone, ``--set
   value_target_q=0 full_search_fraction=1 games_per_iteration=64 buffer_size=60000`` for the
   preset before the cap) in this process,
   one torch thread, until the iteration that ends after ``--minutes`` of wall time
   (``max_minutes``; checkpoint saved).
2. **Play**: the trained agent (MCTS with the network, no noise; ``--simulations`` per move:
   the preset's 200 and AlphaZero's 800 by default) plays ``--games`` games against pure MCTS
   with random rollouts (UCT, ``mcts-K``, K = 200 and 1,000 simulations per move by default),
   seats alternating. The issue bounds the training budget, not the search at play; 800
   simulations, the AlphaZero paper's, is still fewer than mcts-1000 spends per move.

The issue's bar: after at most 60 CPU-minutes, win at least 80% of 50 games against mcts-200;
the goal is at least 90% against mcts-1000. Reported: the wall and CPU minutes spent training,
the iterations and self-play games, and the win/draw/loss counts against each opponent; the
table goes to ``benchmarks/results/alphazero_connect4.json`` (``--out-dir`` elsewhere).

Run: ``.venv/bin/python benchmarks/bench_alphazero_connect4.py [--minutes 60] [--games 50]
[--simulations 200 800] [--seed 0]``; ``--agent RUN_DIR`` plays a trained run's agent instead of
training one.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import rlx  # noqa: E402
from results import goal, write_result  # noqa: E402  (benchmarks/results.py)
from rlx.games.evaluation import arena  # noqa: E402


def cpu_seconds() -> float:
    """CPU time of this process and of its finished child processes (self-play workers)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def train(minutes: float, run_dir: Path, seed: int, overrides: dict) -> tuple[object, float]:
    """Train with the connect4 preset for at most ``minutes``; the agent and CPU minutes
    (the workers' included: the pool is shut down, so its processes waited for, by then)."""
    # iterations: no bound but the clock, unless --set gives one (learning_rate_end decays
    # over it)
    settings = {"iterations": 10_000, **overrides}
    cpu0 = cpu_seconds()
    agent = rlx.train("alphazero", "connect4", run_dir=run_dir, seed=seed, progress=True,
                      doctor=False, eval_games=0, max_minutes=minutes, **settings)  # fmt: skip
    return agent, (cpu_seconds() - cpu0) / 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="training wall budget")
    parser.add_argument("--games", type=int, default=50, help="games against each opponent")
    parser.add_argument("--opponents", nargs="+", default=["mcts-200", "mcts-1000"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", default=None, help="keep the run here (default: temp)")
    parser.add_argument("--set", nargs="*", default=[], help="config overrides field=value")
    parser.add_argument("--simulations", nargs="+", type=int, default=[200, 800],
                        help="the agent's simulations per move when it plays")  # fmt: skip
    parser.add_argument("--agent", default=None, help="play this run's agent; no training")
    parser.add_argument("--quick", action="store_true",
                        help="half a minute of training, 4 games against mcts-20 with 20 "
                             "simulations: checks that it works")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where the result file goes (default benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.minutes, args.games = min(args.minutes, 0.5), min(args.games, 4)
        args.opponents, args.simulations = ["mcts-20"], [20]
    figures: dict = {}
    agent = rlx.load(args.agent) if args.agent else train_and_report(args, figures)
    rows = []
    for simulations in args.simulations:
        player = functools.partial(agent.act, simulations=simulations)
        for name, result in arena(agent.game, player, args.opponents, args.games, seed=1).items():
            print(f"{simulations} simulations against {name:10s} over {result.games} games "
                  f"(seats alternating): {result} -> win rate {result.win_rate:.0%}",
                  flush=True)  # fmt: skip
            rows.append([simulations, name, result.wins, result.draws, result.losses,
                         round(result.win_rate, 3)])  # fmt: skip
            figures[f"win_rate_{simulations}_vs_{name}"] = round(result.win_rate, 3)
    trained = f"the run {args.agent}" if args.agent else f"{args.minutes} minutes of training"
    bars = {"mcts-200": 0.8, "mcts-1000": 0.9}  # the bar and the goal
    goals = [
        goal(f"{sims} simulations win at least {bars[name]:.0%} against {name}",
             f">= {bars[name]:g}", rate, rate >= bars[name])
        for sims, name, *_, rate in rows if name in bars
    ]  # fmt: skip
    if "cpu_minutes" in figures:
        goals.append(goal("training within 60 CPU minutes", "<= 60", figures["cpu_minutes"],
                          figures["cpu_minutes"] <= 60))  # fmt: skip
    write_result(
        "alphazero_connect4",
        title="AlphaZero on Connect Four against pure MCTS, within a CPU budget",
        columns=["simulations", "opponent", "won", "drawn", "lost", "win rate"],
        rows=rows,
        libraries=("torch", "numba"),
        repeats=args.games,
        seeds=[args.seed],
        goals=goals,
        peer="pure MCTS (rlx's rollout search)",
        figures=figures,
        notes=f"The connect4 preset after {trained}, one torch thread; {args.games} games "
        "against each opponent, seats alternating; the games are the repeats of each win rate.",
        quick=args.quick,
        out_dir=args.out_dir,
    )


def train_and_report(args: argparse.Namespace, figures: dict) -> object:
    """Train as the arguments say, print the budget spent (and note it in ``figures``); the
    agent."""
    overrides = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="az-c4-")) / "run"
    t0 = time.perf_counter()
    agent, cpu_minutes = train(args.minutes, run_dir, args.seed, overrides)
    wall_minutes = (time.perf_counter() - t0) / 60
    summary = json.loads((run_dir / "summary.json").read_text())
    iterations = summary["steps"]
    games = iterations * agent.config.games_per_iteration
    print(f"trained {iterations} iterations ({games} self-play games) in {wall_minutes:.1f} "
          f"wall minutes, {cpu_minutes:.1f} CPU minutes; run folder {run_dir}",
          flush=True)  # fmt: skip
    figures.update(
        iterations=iterations,
        selfplay_games=games,
        wall_minutes=round(wall_minutes, 2),
        cpu_minutes=round(cpu_minutes, 2),
    )
    return agent


if __name__ == "__main__":
    main()
