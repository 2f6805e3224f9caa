"""PPO and A2C on CartPole-v1: rlx as a user runs it vs Stable-Baselines3, in one run.

Protocol (one torch thread everywhere, every run in a fresh process, seeds 0-9):

- **rlx**: ``rlx train ppo --env CartPole-v1 --seed S --total-steps 100000`` and
  ``rlx train a2c --env CartPole-v1 --seed S --total-steps 500000`` with no other flag: the
  built-in CartPole-v1 presets apply. Time and steps are read from the run folder's
  ``episodes.csv`` (``wall_s`` counts from the start of training: run folder, envs, networks,
  every update; the import of rlx and torch before it is not counted, and is reported apart as
  the whole process's time).
- **Stable-Baselines3** with rl-baselines3-zoo's CartPole-v1 hyperparameters. PPO: 8 envs,
  n_steps 32, batch 256, gae_lambda 0.8, gamma 0.98, 20 epochs, ent_coef 0, learning rate and
  clip range linear from 1e-3 and 0.2, 1e5 steps. A2C: 8 envs, ent_coef 0, defaults otherwise,
  5e5 steps. Its clock starts before the envs are made; ``torch._dynamo``, which torch.optim
  imports on its first use (about 1 s here), is imported before the clock starts, so SB3 is
  not charged for it. A VecMonitor callback stops it at the threshold.
- **Threshold**: the mean return of the last 20 training episodes reaches 475.
- **Raw env ceiling**: Gymnasium's natively vectorised CartPole (8 copies) stepped with random
  actions and nothing else, measured in the same run.

Reported per run: seconds and env steps until the threshold, training env steps per second
(rlx: from metrics.jsonl; SB3: steps / seconds until the threshold), medians over the seeds,
rlx's share of SB3's time, its speed-up in steps/s, and the share of the raw env's throughput
the rlx PPO loop reaches. A table, then a markdown block for the README.

PPO's goal is every seed, not the median: rlx's median env steps at most SB3's, no seed past
twice SB3's median, and rlx's median time at most a quarter of SB3's both on seeds 0-2 and on
the others. The report checks the three and the result file keeps them (``ppo_goal``).

Ten seeds by default: the issue asks for three, but env steps to 475 range from about 17k to
47k over seeds for either library, and a change of float rounding alone moves one seed's
figure by 10k, so the median of three is mostly noise.

The table goes to ``benchmarks/results/policy_gradient.json`` (``--out-dir`` elsewhere).

The result file's table is per seed, each library's median after its seeds; its figures hold
what ``rlx recommend`` reads (the env, the goal and rlx's median seconds to it per algorithm).

Run: ``.venv/bin/python benchmarks/bench_policy_gradient.py [--seeds 0 1 2 ...] [--skip-a2c]``;
``--ppo-overrides KEY=VALUE ...`` trains rlx's PPO with those config fields over its preset
(to try a preset before it is one); a smoke run:
``--seeds 0 --skip-a2c --total-steps 2000 --out-dir /tmp/bench``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from results import write_result  # noqa: E402  (benchmarks/results.py)

THRESHOLD, WINDOW = 475.0, 20
ENV_ID = "CartPole-v1"
BUDGETS = {"ppo": 100_000, "a2c": 500_000}
RLX = Path(sys.executable).with_name("rlx")
FIRST_SEEDS = (0, 1, 2)  # the seeds PPO's tail was worst on, checked apart from the rest
TIME_RATIO_GOAL = 0.25
EXTRA_FLAGS: dict[str, list[str]] = {"ppo": [], "a2c": []}  # --ppo-overrides, as rlx flags


@dataclass
class Result:
    library: str
    algo: str
    seed: int
    seconds: float | None  # until the threshold; None when never reached
    steps: int | None
    steps_per_s: float
    process_s: float


# ---------------------------------------------------------------------------- rlx
def run_rlx(algo: str, seed: int, workdir: Path) -> Result:
    run_dir = workdir / f"rlx-{algo}-{seed}"
    command = [str(RLX), "train", algo, "--env", ENV_ID, "--seed", str(seed),
               "--total-steps", str(BUDGETS[algo]), "--run-dir", str(run_dir),
               *EXTRA_FLAGS[algo]]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    process_s = time.perf_counter() - start
    seconds, steps = _threshold_from_csv(run_dir / "episodes.csv")
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    return Result("rlx", algo, seed, seconds, steps, last["step"] / last["wall_s"], process_s)


def _threshold_from_csv(path: Path) -> tuple[float | None, int | None]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    returns = np.array([float(r["return"]) for r in rows])
    for i in range(WINDOW - 1, len(rows)):
        if returns[i - WINDOW + 1 : i + 1].mean() >= THRESHOLD:
            return float(rows[i]["wall_s"]), int(rows[i]["step"])
    return None, None


# ---------------------------------------------------------------------------- SB3
SB3_SCRIPT = r"""
import json, sys, time
import numpy as np, torch
torch.set_num_threads(1)
import torch._dynamo  # torch.optim imports it on first use; keep it off SB3's clock
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

algo, seed, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
threshold, window = float(sys.argv[4]), int(sys.argv[5])

class StopAtThreshold(BaseCallback):
    def __init__(self, start):
        super().__init__()
        self.start, self.returns, self.hit = start, [], None
    def _on_step(self):
        for info in self.locals["infos"]:
            if "episode" in info:
                self.returns.append(info["episode"]["r"])
                if len(self.returns) >= window and np.mean(self.returns[-window:]) >= threshold:
                    self.hit = (time.perf_counter() - self.start, self.num_timesteps)
                    return False
        return True

start = time.perf_counter()
env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
if algo == "ppo":
    linear = lambda v: (lambda progress: progress * v)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2),
                seed=seed, device="cpu")
else:
    model = A2C("MlpPolicy", env, ent_coef=0.0, seed=seed, device="cpu")
callback = StopAtThreshold(start)
model.learn(budget, callback=callback)
elapsed = time.perf_counter() - start
print(json.dumps({"hit": callback.hit, "steps": model.num_timesteps, "seconds": elapsed}))
"""


def run_sb3(algo: str, seed: int) -> Result:
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", SB3_SCRIPT, algo, str(seed), str(BUDGETS[algo]),
         str(THRESHOLD), str(WINDOW)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    process_s = time.perf_counter() - start
    data = json.loads(out.stdout.strip().splitlines()[-1])
    seconds, steps = data["hit"] if data["hit"] else (None, None)
    return Result("SB3", algo, seed, seconds, steps, data["steps"] / data["seconds"], process_s)


# ---------------------------------------------------------------------------- raw env
def raw_env_steps_per_s(num_envs: int = 8, vector_steps: int = 20_000) -> float:
    """Gymnasium's native vector CartPole stepped with pre-drawn random actions, nothing else."""
    import gymnasium as gym

    env = gym.make_vec(ENV_ID, num_envs, vectorization_mode="vector_entry_point")
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, size=(vector_steps, num_envs))
    start = time.perf_counter()
    for a in actions:
        env.step(a)
    elapsed = time.perf_counter() - start
    env.close()
    return vector_steps * num_envs / elapsed


# ---------------------------------------------------------------------------- report
def median(values: list[float | None]) -> float | None:
    """The median, counting a missed threshold as infinitely slow (None if most missed)."""
    ordered = sorted(values, key=lambda v: float("inf") if v is None else v)
    return ordered[len(ordered) // 2]


def fmt(value: float | None, spec: str) -> str:
    return "not reached" if value is None else format(value, spec)


COLUMNS = ["algo", "library", "seed", "time to 475 (s)", "env steps to 475",
           "train env steps/s", "process s"]  # fmt: skip


def per_seed_rows(results: list[Result]) -> list[list]:
    """The result file's table: every run, then each library's medians (seed "median")."""
    rows = []
    for algo in ("ppo", "a2c"):
        for lib in ("rlx", "SB3"):
            runs = [r for r in results if r.algo == algo and r.library == lib]
            if not runs:
                continue
            for r in runs:
                seconds = None if r.seconds is None else round(r.seconds, 2)
                rows.append([algo, lib, r.seed, seconds, r.steps, round(r.steps_per_s),
                             round(r.process_s, 2)])  # fmt: skip
            sec = median([r.seconds for r in runs])
            rows.append([algo, lib, "median", None if sec is None else round(sec, 2),
                         median([r.steps for r in runs]),
                         round(statistics.median(r.steps_per_s for r in runs)),
                         round(statistics.median(r.process_s for r in runs), 2)])  # fmt: skip
    return rows


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None:
        return None
    return round(numerator / denominator, 3)


def ppo_goal(results: list[Result]) -> dict[str, object] | None:
    """The three checks of PPO's goal (module docstring), with the figures they compare."""
    runs = {lib: [r for r in results if r.algo == "ppo" and r.library == lib]
            for lib in ("rlx", "SB3")}  # fmt: skip
    if not runs["rlx"] or not runs["SB3"]:
        return None
    unreached = float("inf")
    rlx_steps = [unreached if r.steps is None else r.steps for r in runs["rlx"]]
    sb3_median = median([r.steps for r in runs["SB3"]])
    rlx_median = median([r.steps for r in runs["rlx"]])

    def time_ratio(first: bool) -> float | None:
        def secs(lib: str) -> list[float | None]:
            return [r.seconds for r in runs[lib] if (r.seed in FIRST_SEEDS) == first]

        if not secs("rlx") or not secs("SB3"):
            return None
        return ratio(median(secs("rlx")), median(secs("SB3")))

    first, rest = time_ratio(True), time_ratio(False)
    worst = max(rlx_steps)
    checks: dict[str, object] = {
        "rlx_median_steps": rlx_median,
        "sb3_median_steps": sb3_median,
        "rlx_worst_seed_steps": None if worst == unreached else worst,
        "time_ratio_seeds_0_2": first,
        "time_ratio_other_seeds": rest,
    }
    checks["median_steps_at_most_sb3"] = (
        rlx_median is not None and sb3_median is not None and rlx_median <= sb3_median
    )
    checks["no_seed_past_twice_sb3_median"] = sb3_median is not None and worst <= 2 * sb3_median
    # a group without seeds in this run (e.g. --seeds 0 1 2) is not checked
    measured = [r for r, group in ((first, FIRST_SEEDS), (rest, None)) if group_ran(runs, group)]
    checks["time_ratio_at_most_0_25_on_both"] = bool(measured) and all(
        r is not None and r <= TIME_RATIO_GOAL for r in measured
    )
    return checks


def group_ran(runs: dict[str, list[Result]], seeds: tuple[int, ...] | None) -> bool:
    """Whether rlx ran any of ``seeds`` (None: any seed outside :data:`FIRST_SEEDS`)."""
    if seeds is None:
        return any(r.seed not in FIRST_SEEDS for r in runs["rlx"])
    return any(r.seed in seeds for r in runs["rlx"])


def print_per_seed(results: list[Result]) -> None:
    print(f"\n{'algo':5} {'library':8} " + " ".join(f"{'seed ' + str(s):>11}"
          for s in sorted({r.seed for r in results})))  # fmt: skip
    for algo in ("ppo", "a2c"):
        for lib in ("rlx", "SB3"):
            runs = sorted((r for r in results if r.algo == algo and r.library == lib),
                          key=lambda r: r.seed)  # fmt: skip
            if runs:
                print(f"{algo:5} {lib:8} " + " ".join(f"{fmt(r.steps, ','):>11}" for r in runs))


def print_goal(goal: dict[str, object]) -> None:
    def verdict(name: str) -> str:
        return "met" if goal[name] else "missed"

    print(
        f"\nPPO goal: median env steps {fmt(goal['rlx_median_steps'], ',')} against SB3's "
        f"{fmt(goal['sb3_median_steps'], ',')} ({verdict('median_steps_at_most_sb3')}); "
        f"worst seed {fmt(goal['rlx_worst_seed_steps'], ',')} against twice SB3's median "
        f"({verdict('no_seed_past_twice_sb3_median')}); time ratio "
        f"{fmt(goal['time_ratio_seeds_0_2'], '.2f')} on seeds 0-2 and "
        f"{fmt(goal['time_ratio_other_seeds'], '.2f')} on the rest, at most {TIME_RATIO_GOAL} "
        f"({verdict('time_ratio_at_most_0_25_on_both')})"
    )


def report(results: list[Result], raw: float) -> dict[str, object]:
    """Print the tables; return the figures a reader quotes (and ``rlx recommend`` reads)."""
    rows = []
    for algo in ("ppo", "a2c"):
        by_lib = {
            lib: [r for r in results if r.algo == algo and r.library == lib]
            for lib in ("rlx", "SB3")
        }
        if not by_lib["rlx"] or not by_lib["SB3"]:
            continue
        summary = {
            lib: (
                median([r.seconds for r in rs]),
                median([r.steps for r in rs]),
                statistics.median(r.steps_per_s for r in rs),
                statistics.median(r.process_s for r in rs),
                [fmt(r.seconds, ".2f") for r in rs],
            )
            for lib, rs in by_lib.items()
        }
        rows.append((algo, summary))
    print(
        f"\nraw vector env (Gymnasium native CartPole, 8 copies, random actions): "
        f"{raw:,.0f} steps/s"
    )
    header = (f"{'algo':5} {'library':8} {'median s to 475':>16} {'per seed':>22} "
              f"{'median steps':>13} {'train steps/s':>14} {'process s':>10}")  # fmt: skip
    print(header)
    print("-" * len(header))
    for algo, summary in rows:
        for lib, (sec, steps, sps, proc, per_seed) in summary.items():
            print(f"{algo:5} {lib:8} {fmt(sec, '.2f'):>16} {', '.join(per_seed):>22} "
                  f"{fmt(steps, ',.0f'):>13} {sps:>14,.0f} {proc:>10.1f}")  # fmt: skip
    print_per_seed(results)
    print()
    lines = ["| algo | library | time to 475 (median s) | env steps to 475 | train env steps/s |",
             "|---|---|---|---|---|"]  # fmt: skip
    for algo, summary in rows:
        (rs, rsteps, rsps, _, _), (ss, ssteps, ssps, _, _) = summary["rlx"], summary["SB3"]
        time_ratio = f" ({rs / ss:.2f}x SB3's)" if rs is not None and ss is not None else ""
        speedup = f" ({rsps / ssps:.1f}x)"
        lines.append(f"| {algo.upper()} | rlx | {fmt(rs, '.2f')}{time_ratio} | "
                     f"{fmt(rsteps, ',.0f')} | {rsps:,.0f}{speedup} |")  # fmt: skip
        lines.append(f"| {algo.upper()} | SB3 (zoo) | {fmt(ss, '.2f')} | {fmt(ssteps, ',.0f')} | "
                     f"{ssps:,.0f} |")  # fmt: skip
        if algo == "ppo":
            share = rsps / raw
            print(
                f"rlx PPO reaches {share:.0%} of the raw vector env's throughput "
                f"({raw:,.0f} steps/s)"
            )
    print("\n" + "\n".join(lines))
    figures: dict[str, object] = {"raw_env_steps_per_s": round(raw)}
    to_goal = {}
    for algo in ("ppo", "a2c"):
        runs = [r.seconds for r in results if r.algo == algo and r.library == "rlx"]
        seconds = median(runs) if runs else None
        if seconds is not None:
            to_goal[algo] = round(seconds, 2)
    if to_goal:
        # what `rlx recommend CartPole-v1` reads to compare the methods rlx measured here
        figures.update(env=ENV_ID, goal="a last-20 mean of 475",
                       rlx_median_seconds_to_goal=to_goal)  # fmt: skip
    for algo, summary in rows:
        (rs, _, rsps, _, _), (ss, _, ssps, _, _) = summary["rlx"], summary["SB3"]
        figures[f"{algo}_steps_per_s_ratio"] = round(rsps / ssps, 3)
        if rs is not None and ss is not None:
            figures[f"{algo}_time_ratio"] = round(rs / ss, 3)
        if algo == "ppo":
            figures["ppo_share_of_raw_env"] = round(rsps / raw, 3)
    goal = ppo_goal(results)
    if goal is not None:
        print_goal(goal)
        figures["ppo_goal"] = goal
    return figures


def override_flags(pairs: list[str]) -> list[str]:
    """``KEY=VALUE`` pairs as ``rlx train`` flags: ``learning_rate=3e-3`` ->
    ``--learning-rate 3e-3``; ``anneal_lr=false`` -> ``--no-anneal-lr``."""
    flags = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--ppo-overrides takes KEY=VALUE pairs, got {pair!r}")
        name = key.strip().replace("_", "-")
        if value.lower() in ("true", "false"):
            flags.append(f"--{name}" if value.lower() == "true" else f"--no-{name}")
        else:
            flags += [f"--{name}", *value.split()]
    return flags


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--skip-a2c", action="store_true", help="PPO only")
    parser.add_argument("--total-steps", type=int, default=None,
                        help="one budget for every run (default: PPO 100k, A2C 500k)")  # fmt: skip
    parser.add_argument(
        "--ppo-overrides",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="config fields for rlx's PPO over its preset, e.g. learning_rate=3e-3",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="where policy_gradient.json goes (default: benchmarks/results)",
    )
    args = parser.parse_args()
    if args.total_steps is not None:
        BUDGETS.update(dict.fromkeys(BUDGETS, args.total_steps))
    EXTRA_FLAGS["ppo"] = override_flags(args.ppo_overrides)
    algos = ["ppo"] if args.skip_a2c else ["ppo", "a2c"]
    raw = raw_env_steps_per_s()
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        for algo in algos:
            for seed in args.seeds:
                # alternate libraries so that a busy moment of the machine hits both
                for library in ("rlx", "SB3"):
                    if library == "rlx":
                        result = run_rlx(algo, seed, Path(tmp))
                    else:
                        result = run_sb3(algo, seed)
                    results.append(result)
                    print(f"{result.library:4} {algo} seed {seed}: {fmt(result.seconds, '.2f')} s, "
                          f"{fmt(result.steps, ',')} steps, {result.steps_per_s:,.0f} steps/s",
                          flush=True)  # fmt: skip
    figures = report(results, raw)
    if args.ppo_overrides:
        figures["ppo_overrides"] = args.ppo_overrides
    write_result(
        "policy_gradient",
        title="PPO and A2C on CartPole-v1: rlx's presets vs Stable-Baselines3 with rl-zoo's tuning",
        columns=COLUMNS,
        rows=per_seed_rows(results),
        seeds=args.seeds,
        figures=figures,
        notes=(
            f"Per seed, then the medians over the seeds: the wall time and env steps until the "
            f"mean of the last {WINDOW} training episodes reaches {THRESHOLD:.0f} (None: not "
            f"reached; a median is None when most seeds missed), training env steps per second "
            f"and the whole process's seconds; budgets {BUDGETS}; one torch thread, libraries "
            f"alternated seed by seed."
        ),
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
