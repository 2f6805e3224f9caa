"""Q-learning on slippery FrozenLake 8x8: the textbook plain Python loop vs rlx, in one run.

Three learners, the same hyperparameters (alpha 0.1, constant epsilon 0.1, gamma 0.99, Q_0 = 0,
the env's step limit as truncation, which bootstraps: 100 steps, FrozenLake-v1's TimeLimit, which
``map_name="8x8"`` keeps) and the same number of episodes:

1. **dict loop, model**: the textbook update lines verbatim: ``Q`` a dict of dicts,
   ``if random() < epsilon: return choice(ACTIONS)``,
   ``target = r + (gamma * max(Q[s_next].values()) if not done else 0.0)``,
   ``Q[s][a] += alpha * (target - Q[s][a])``; transitions drawn in Python from the env's own
   model ``env.unwrapped.P[s][a]`` (probability lists). Greedy ties are broken at random, as
   rlx breaks them, so that both run the same algorithm.
2. **dict loop, env.step**: the same loop stepping the real Gymnasium env (with its TimeLimit).
3. **rlx**: ``TabularLearner("q-learning", from_gymnasium("FrozenLake-v1", map_name="8x8"))``,
   what ``rlx.tabular.q_learning`` runs: whole chunks of episodes in one numba kernel that
   samples the model itself.

The settings that change the work (episodes, alpha, epsilon and its schedule, gamma, Q_0, the
step limit, the seed) are read from rlx's config and the loop's constants, and must be equal.

Reported: env steps per second of each learning run, each repeated ``--repeats`` times (at
least 3) on the same seed, so on the same work: min, median and spread of the seconds; the
ratio of the medians to the dict loop on the model; numba's first-call time measured apart in
fresh processes (cold: an empty cache; warm: the on-disk cache); the learning outcome: the
greedy policy's value from the start state (exact policy evaluation) against ``V*(start)``
and the fields of ``rlx.tabular.check``; and rlx's seed-to-seed spread of that value over
``--spread-seeds`` seeds. Goal: rlx at least 50x the dict loop on the model (medians).

Run: ``.venv/bin/python benchmarks/bench_q_learning.py [--episodes 50000] [--seed 0]``;
``--quick`` checks that it works (2,000 episodes, 3 spread seeds).
"""

from __future__ import annotations

import os

# one thread for every library, set before numpy is imported
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gymnasium as gym  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402

from results import MIN_REPEATS, goal, ratio, settings_table, spread, write_result  # noqa: E402
from rlx.mdp import TabularMDP, from_gymnasium  # noqa: E402
from rlx.planning import policy_evaluation, value_iteration  # noqa: E402
from rlx.tabular import TabularLearner, TabularResult, check  # noqa: E402
from rlx.tabular.config import TabularConfig  # noqa: E402

ALPHA, EPSILON, GAMMA = 0.1, 0.1, 0.99
MAX_STEPS = gym.spec("FrozenLake-v1").max_episode_steps  # 100, also with map_name="8x8"
ACTIONS = [0, 1, 2, 3]


@dataclass
class Outcome:
    name: str
    steps: int
    seconds: float
    Q: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds


# --------------------------------------------------------------------------- the dict loop
def epsilon_greedy(q: dict, epsilon: float):
    if random.random() < epsilon:
        return random.choice(ACTIONS)
    best = max(q.values())
    return random.choice([a for a, v in q.items() if v == best])


def model_sampler(env: gym.Env):
    """``step(s, a) -> (s', r, done)`` drawn from ``env.unwrapped.P`` in plain Python."""
    P = env.unwrapped.P

    def step(s, a):
        u, acc = random.random(), 0.0
        outcomes = P[s][a]
        for prob, s_next, r, done in outcomes:
            acc += prob
            if u < acc:
                return s_next, r, done
        _, s_next, r, done = outcomes[-1]
        return s_next, r, done

    return step


def dict_loop_on_model(env: gym.Env, episodes: int, seed: int) -> Outcome:
    random.seed(seed)
    step = model_sampler(env)
    n_states = env.observation_space.n
    Q = {s: dict.fromkeys(ACTIONS, 0.0) for s in range(n_states)}
    returns, lengths, total = [], [], 0
    start = time.perf_counter()
    for _ in range(episodes):
        s, G, t = 0, 0.0, 0
        while True:
            a = epsilon_greedy(Q[s], EPSILON)
            s_next, r, done = step(s, a)
            target = r + (GAMMA * max(Q[s_next].values()) if not done else 0.0)
            Q[s][a] += ALPHA * (target - Q[s][a])
            G += r
            t += 1
            if done or t >= MAX_STEPS:  # a truncated last step bootstrapped above
                break
            s = s_next
        returns.append(G)
        lengths.append(t)
        total += t
    seconds = time.perf_counter() - start
    return Outcome(
        "dict loop, model (textbook)", total, seconds, _table(Q), *_arrays(returns, lengths)
    )


def dict_loop_on_env(env: gym.Env, episodes: int, seed: int) -> Outcome:
    random.seed(seed)
    n_states = env.observation_space.n
    Q = {s: dict.fromkeys(ACTIONS, 0.0) for s in range(n_states)}
    returns, lengths, total = [], [], 0
    start = time.perf_counter()
    s, _ = env.reset(seed=seed)
    for _ in range(episodes):
        s, _ = env.reset()
        G, t = 0.0, 0
        while True:
            a = epsilon_greedy(Q[s], EPSILON)
            s_next, r, terminated, truncated, _ = env.step(a)
            target = r + (GAMMA * max(Q[s_next].values()) if not terminated else 0.0)
            Q[s][a] += ALPHA * (target - Q[s][a])
            G += r
            t += 1
            if terminated or truncated:
                break
            s = s_next
        returns.append(G)
        lengths.append(t)
        total += t
    seconds = time.perf_counter() - start
    return Outcome("dict loop, env.step", total, seconds, _table(Q), *_arrays(returns, lengths))


def _table(Q: dict) -> np.ndarray:
    return np.array([[Q[s][a] for a in ACTIONS] for s in sorted(Q)])


def _arrays(returns: list, lengths: list) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(returns, dtype=float), np.asarray(lengths, dtype=int)


# --------------------------------------------------------------------------- rlx
def rlx_config(episodes: int, seed: int) -> TabularConfig:
    return TabularConfig(episodes=episodes, alpha=ALPHA, epsilon=EPSILON, seed=seed)


COMPILE_PROBE = """
import time
t0 = time.perf_counter()
from rlx.mdp import from_gymnasium
from rlx.tabular import TabularLearner, TabularConfig
from rlx.tabular.algorithms import q_learning
mdp = from_gymnasium("FrozenLake-v1", gamma=0.99, map_name="8x8")
t1 = time.perf_counter()
TabularLearner("q-learning", mdp, TabularConfig(seed=0)).run(1)
t2 = time.perf_counter()
hits = sum(q_learning.learn_on_model.stats.cache_hits.values())
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {hits}")
"""


def first_call_seconds(empty_cache: bool) -> tuple[float, bool]:
    """Seconds of the first ``run`` in a fresh process, and whether numba's disk cache hit."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        if empty_cache:
            env["NUMBA_CACHE_DIR"] = cache
        out = subprocess.run(
            [sys.executable, "-c", COMPILE_PROBE],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    _, first_run, hits = out.stdout.split()
    return float(first_run), int(hits) > 0


def rlx_q_learning(mdp: TabularMDP, episodes: int, seed: int) -> Outcome:
    """One timed run of rlx's learner (the kernel loaded before the clock)."""
    TabularLearner("q-learning", mdp, rlx_config(10, seed)).run(10)  # load the kernel first
    learner = TabularLearner("q-learning", mdp, rlx_config(episodes, seed))
    start = time.perf_counter()
    learner.run(episodes)
    seconds = time.perf_counter() - start
    result = learner.result()
    return Outcome(
        "rlx q_learning (numba)",
        learner.steps_done,
        seconds,
        result.Q,
        result.returns,
        result.lengths,
    )


def repeated(run: Callable[[], Outcome], repeats: int) -> tuple[Outcome, dict[str, Any]]:
    """``repeats`` runs of the same work (the same seed); the last run's outcome and the spread
    of the seconds."""
    outcomes = [run() for _ in range(repeats)]
    steps = {o.steps for o in outcomes}
    assert len(steps) == 1, f"the repeats did different work: {steps} env steps"
    return outcomes[-1], spread([o.seconds for o in outcomes])


def like_for_like(mdp: TabularMDP, env: gym.Env, episodes: int, seed: int) -> list[dict]:
    """The settings of the dict loops (their constants) against rlx's config."""
    config = rlx_config(episodes, seed)
    rlx = {
        "episodes": config.episodes,
        "alpha": config.alpha,
        "epsilon": config.epsilon,
        "epsilon schedule": config.epsilon_schedule,
        "gamma": mdp.gamma if config.gamma is None else config.gamma,
        "Q_0": config.q_init,
        "step limit (truncation, bootstrapped)": config.max_steps or mdp.max_episode_steps,
        "greedy ties": "random",
        "seed": config.seed,
    }
    loop = {
        "episodes": episodes,
        "alpha": ALPHA,
        "epsilon": EPSILON,
        "epsilon schedule": "constant",
        "gamma": GAMMA,
        "Q_0": 0.0,
        "step limit (truncation, bootstrapped)": env.spec.max_episode_steps,
        "greedy ties": "random",
        "seed": seed,
    }
    return settings_table(rlx, loop)


def rlx_seed_spread(
    mdp: TabularMDP, episodes: int, seeds: int, start: int
) -> tuple[np.ndarray, np.ndarray]:
    """V^greedy(start) and the last 1k episodes' mean return of rlx over several seeds."""
    values, returns = [], []
    for seed in range(seeds):
        learner = TabularLearner("q-learning", mdp, rlx_config(episodes, seed))
        learner.run(episodes)
        result = learner.result()
        values.append(policy_evaluation(mdp, result.policy, tol=1e-10, method="exact")[start])
        returns.append(result.returns[-1000:].mean())
    return np.array(values), np.array(returns)


# --------------------------------------------------------------------------- the outcome
def as_result(outcome: Outcome, mdp: TabularMDP) -> TabularResult:
    Q = np.zeros((mdp.n_states, mdp.n_actions))
    Q[: outcome.Q.shape[0]] = outcome.Q  # from_gymnasium may append terminal copies
    Q[mdp.terminal] = 0.0
    return TabularResult(
        algo=outcome.name,
        Q=Q,
        V=Q.max(axis=1),
        policy=np.argmax(Q, axis=1),
        returns=outcome.returns,
        lengths=outcome.lengths,
        gamma=GAMMA,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS,
                        help="timed runs of each learner (same seed: the same work)")  # fmt: skip
    parser.add_argument("--spread-seeds", type=int, default=20, help="rlx seeds for the spread")
    parser.add_argument("--quick", action="store_true",
                        help="2,000 episodes, 3 spread seeds: checks that it works")  # fmt: skip
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="where the result file goes (default benchmarks/results, --quick: "
        "benchmarks/results/quick)",
    )
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.spread_seeds = min(args.episodes, 2_000), min(args.spread_seeds, 3)

    versions = (
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"numba {numba.__version__}, gymnasium {gym.__version__}"
    )
    print(f"{versions}; {platform.machine()}, {os.cpu_count()} cores (shared)")
    print(
        f"FrozenLake 8x8 slippery, alpha {ALPHA}, epsilon {EPSILON}, gamma {GAMMA}, "
        f"{args.episodes} episodes, seed {args.seed}\n"
    )
    mdp = from_gymnasium("FrozenLake-v1", gamma=GAMMA, map_name="8x8")
    env = gym.make("FrozenLake-v1", map_name="8x8")
    # the three loops cap episodes alike: rlx takes the MDP's limit, env.step the TimeLimit's
    assert mdp.max_episode_steps == env.spec.max_episode_steps == MAX_STEPS
    settings = like_for_like(mdp, env, args.episodes, args.seed)

    cold, cold_hit = first_call_seconds(empty_cache=True)
    warm, warm_hit = first_call_seconds(empty_cache=False)
    timed_runs = [
        repeated(lambda: dict_loop_on_model(env, args.episodes, args.seed), args.repeats),
        repeated(lambda: dict_loop_on_env(env, args.episodes, args.seed), args.repeats),
        repeated(lambda: rlx_q_learning(mdp, args.episodes, args.seed), args.repeats),
    ]
    print(
        f"numba first call: {cold:.2f} s compiling into an empty cache (hit: {cold_hit}); "
        f"{warm:.2f} s from the on-disk cache (hit: {warm_hit})"
    )
    print()

    solution = value_iteration(mdp, tol=1e-10)
    start = int(np.flatnonzero(mdp.initial)[0])
    baseline = timed_runs[0][1]["median"]
    table = []
    for run, seconds in timed_runs:
        result = as_result(run, mdp)
        report = check(result, mdp)
        v_greedy = policy_evaluation(mdp, result.policy, tol=1e-10, method="exact")[start]
        table.append(
            [
                run.name,
                len(run.returns),
                run.steps,
                seconds["median"],
                seconds["min"],
                seconds["spread"],
                round(run.steps / seconds["median"]),
                ratio(baseline, seconds["median"]),
                round(float(np.mean(run.returns[-1000:])), 3),
                round(float(v_greedy), 4),
                round(report.optimal_action_share, 2),
            ]
        )
        print(f"{run.name:30} {run.steps:>10,} steps, median {seconds['median']:.3f} s "
              f"(min {seconds['min']:.3f}), {run.steps / seconds['median']:,.0f} steps/s, "
              f"V^greedy(start) {v_greedy:.4f}")  # fmt: skip
    print(f"V*(start) = {solution.V[start]:.4f} (value iteration)")
    values, returns = rlx_seed_spread(mdp, args.episodes, args.spread_seeds, start)
    print(
        f"\nrlx over seeds 0..{args.spread_seeds - 1}: V^greedy(start) {values.mean():.4f} "
        f"+/- {values.std():.4f}, return over the last 1k episodes {returns.mean():.3f} "
        f"+/- {returns.std():.3f} (seed-to-seed spread, for reading the rows above)"
    )
    speedup = ratio(baseline, timed_runs[2][1]["median"])
    print(f"\nrlx / dict loop on the model: {speedup}x (goal: >= 50x)")
    write_result(
        "q_learning",
        title="Q-learning on slippery FrozenLake 8x8: a plain Python loop vs rlx",
        columns=[
            "learner",
            "episodes",
            "env steps",
            "seconds, median",
            "seconds, min",
            "spread",
            "env steps/s (median)",
            "vs dict loop (medians)",
            "return, last 1k episodes",
            "V^greedy(start)",
            "optimal actions",
        ],
        rows=table,
        libraries=("gymnasium", "numba", "scipy"),
        repeats=args.repeats,
        seeds=[args.seed],
        goals=[
            goal(
                "rlx at least 50x the textbook dict loop on the model (median seconds)",
                "ratio >= 50",
                speedup,
                speedup is not None and speedup >= 50,
            ),
        ],
        peer="dict loop",
        settings=settings,
        figures={
            "v_star_start": round(float(solution.V[start]), 4),
            "numba_first_call_s": {"empty_cache": round(cold, 2), "disk_cache": round(warm, 2)},
            f"rlx_v_greedy_start_over_{args.spread_seeds}_seeds": {
                "mean": round(float(values.mean()), 3),
                "std": round(float(values.std()), 3),
            },
        },
        notes=(
            "The same algorithm and hyperparameters (alpha 0.1, constant epsilon 0.1, gamma "
            "0.99, Q_0 = 0, 100-step limit) three ways: a dict-of-dicts loop sampling the env's "
            "model, the same loop stepping the Gymnasium env, and rlx's compiled learner; each "
            "run repeated on the same seed (the same work), seconds as median, min and "
            "relative spread; numba's compile time is measured apart and not in rlx's seconds."
        ),
        quick=args.quick,
        out_dir=args.out_dir,
    )


if __name__ == "__main__":
    main()
