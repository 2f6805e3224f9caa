"""`make demo`: solve an MDP exactly, train agents, evaluate them, diagnose them.

1. Value iteration on Sutton & Barto's 4x4 GridWorld: V* and the optimal policy.
2. Q-learning on FrozenLake 8x8 (slippery), evaluated on the real env and checked against DP.
3. PPO on CartPole-v1 with a progress bar, evaluated, and diagnosed by the doctor, with an
   HTML report of the run.
4. The doctor on a deliberately broken run (learning rate 0.1, 40 epochs): what went wrong,
   and what to change.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import rlx
from rlx.planning import format_policy, format_values

RUNS = Path("runs")
LAKE = "FrozenLake8x8-v1"  # slippery, 8x8, episodes capped at 200 steps


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
    print(rlx.doctor(run_dir))
    print(f"report: {rlx.report(run_dir)}")


def doctor_on_a_broken_run() -> None:
    banner("4. The doctor on a broken run: PPO with learning rate 0.1 and 40 epochs")
    run_dir = fresh("demo-ppo-broken")
    # every setting the broken run depends on is spelled out, so a retuned preset leaves it as is
    rlx.train("ppo", "CartPole-v1", run_dir=run_dir, seed=0, learning_rate=0.1, num_epochs=40,
              gae_lambda=0.8, anneal_lr=False, anneal_clip=False, total_steps=30_000,
              eval_episodes=0, progress=True, doctor=False)  # fmt: skip
    print(rlx.doctor(run_dir))


def main() -> None:
    solve_gridworld()
    q_learning_on_frozen_lake()
    ppo_on_cartpole()
    doctor_on_a_broken_run()
    print(
        "\nNext: `rlx doctor runs/demo-ppo-broken --json`, `rlx report runs/demo-ppo "
        "runs/demo-ppo-broken`, `rlx recommend Pendulum-v1`, `rlx train dqn --env CartPole-v1`, "
        "`rlx list`."
    )


if __name__ == "__main__":
    main()
