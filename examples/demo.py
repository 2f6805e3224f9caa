"""`make demo`: solve an MDP exactly, train agents, evaluate them, diagnose them.

1. Value iteration on Sutton & Barto's 4x4 GridWorld: V* and the optimal policy.
2. Q-learning on FrozenLake 8x8 (slippery), evaluated on the real env and checked against DP.
3. PPO on CartPole-v1 with a progress bar, evaluated, with its final PPO diagnostics read
   back from the run folder next to the cheat sheet's healthy ranges.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import rlx
from rlx.diagnostics import metrics as M
from rlx.planning import format_policy, format_values

RUNS = Path("runs")
LAKE = "FrozenLake8x8-v1"  # slippery, 8x8, episodes capped at 200 steps

# (metric, healthy range, what the cheat sheet's troubleshooting table says outside it)
PPO_CHECKS = (
    (M.APPROX_KL, (0.0, 0.1), "mean KL past 0.1: reduce epochs or the learning rate"),
    (M.CLIP_FRACTION, (0.0, 0.5), "clip fraction 0.5 or more: lower LR or epochs"),
    (M.ENTROPY, (0.05, float("inf")), "entropy collapsed: add an entropy bonus c_e > 0"),
)


def banner(text: str) -> None:
    print(f"\n=== {text} " + "=" * max(0, 70 - len(text)))


def fresh(name: str) -> Path:
    path = RUNS / name
    shutil.rmtree(path, ignore_errors=True)
    return path


def solve_gridworld() -> None:
    banner("1. Solve the 4x4 GridWorld exactly (value iteration)")
    grid = rlx.mdp.GridWorld(4, 4, gamma=1.0)
    solution = rlx.planning.value_iteration(grid)
    print(format_values(grid, solution.V))
    print(format_policy(grid, solution.policy))
    print(f"converged in {solution.iterations} sweeps, residual {solution.residual:.1e}")


def q_learning_on_frozen_lake() -> None:
    banner("2. Q-learning on FrozenLake 8x8: train, evaluate, check against DP")
    run_dir = fresh("demo-q-learning")
    t0 = time.perf_counter()
    agent = rlx.train("q-learning", LAKE, run_dir=run_dir, episodes=200_000, seed=0)
    print(f"trained 200,000 episodes in {time.perf_counter() - t0:.1f} s -> {run_dir}/")
    stats = rlx.evaluate(agent, LAKE, episodes=1000, seed=0)
    print(f"success rate on the real env: {stats.mean_return:.1%} over 1,000 episodes")
    print(rlx.tabular.check(agent, rlx.mdp.from_gymnasium(LAKE)))


def ppo_on_cartpole() -> None:
    banner("3. PPO on CartPole-v1: train, evaluate, diagnose")
    run_dir = fresh("demo-ppo")
    t0 = time.perf_counter()
    agent = rlx.train("ppo", "CartPole-v1", run_dir=run_dir, seed=0, progress=True)
    print(f"trained in {time.perf_counter() - t0:.1f} s -> {run_dir}/")
    print(f"evaluation: {rlx.evaluate(agent, 'CartPole-v1', episodes=20, seed=100)}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    last = {k: v for row in rows for k, v in row.items()}  # latest value of every metric
    print("final diagnostics:")
    for metric, (low, high), advice in PPO_CHECKS:
        if metric in last:
            verdict = "ok" if low <= last[metric] < high else f"WARNING: {advice}"
            print(f"  {metric:<20} {last[metric]:>9.4f}  {verdict}")
    for metric in (M.EXPLAINED_VARIANCE, M.EPISODE_RETURN):
        if metric in last:
            print(f"  {metric:<20} {last[metric]:>9.4f}")


def main() -> None:
    solve_gridworld()
    q_learning_on_frozen_lake()
    ppo_on_cartpole()
    print(
        "\nNext: `rlx eval runs/demo-ppo`, `rlx train dqn --env CartPole-v1`, "
        "`rlx solve FrozenLake8x8-v1`, `rlx list`."
    )


if __name__ == "__main__":
    main()
