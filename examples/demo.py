"""`make demo`: solve an MDP exactly, train an agent, evaluate it, diagnose it.

1. Value iteration on Sutton & Barto's 4x4 GridWorld: V* and the optimal policy.
2. Q-learning on FrozenLake 8x8 (slippery) into a run folder, with a progress bar.
3. Evaluation of the trained agent on the real Gymnasium environment.
4. Diagnosis: the learned agent checked against the exact DP solution.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import rlx
from rlx.planning import format_policy, format_values

RUN_DIR = Path("runs/demo-q-learning")
ENV_ID = "FrozenLake8x8-v1"  # slippery, 8x8, episodes capped at 200 steps


def banner(text: str) -> None:
    print(f"\n=== {text} " + "=" * max(0, 70 - len(text)))


def main() -> None:
    banner("1. Solve the 4x4 GridWorld exactly (value iteration)")
    grid = rlx.mdp.GridWorld(4, 4, gamma=1.0)
    solution = rlx.planning.value_iteration(grid)
    print(format_values(grid, solution.V))
    print(format_policy(grid, solution.policy))
    print(f"converged in {solution.iterations} sweeps, residual {solution.residual:.1e}")

    banner("2. Train Q-learning on FrozenLake 8x8 (slippery)")
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    t0 = time.perf_counter()
    agent = rlx.train("q-learning", ENV_ID, run_dir=RUN_DIR, episodes=200_000, seed=0)
    print(f"trained in {time.perf_counter() - t0:.1f} s; run folder: {RUN_DIR}/")

    banner("3. Evaluate on the real Gymnasium env (1,000 episodes)")
    stats = rlx.evaluate(agent, ENV_ID, episodes=1000, seed=0)
    print(f"success rate {stats.mean_return:.1%}  ({stats})")

    banner("4. Diagnose: the learned agent against the exact DP solution")
    print(rlx.tabular.check(agent, rlx.mdp.from_gymnasium(ENV_ID)))
    print(
        f"\nNext: `rlx eval {RUN_DIR}`, `rlx solve FrozenLake8x8-v1`, "
        "`rlx train sarsa --env CliffWalking-v1`."
    )


if __name__ == "__main__":
    main()
