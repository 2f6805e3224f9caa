"""DQN on CartPole-v1: rlx as a user runs it vs Stable-Baselines3 with rl-baselines3-zoo's tuning.

Side by side in one run, seed by seed (one torch thread for both):

1. **rlx**: ``rlx train dqn --env CartPole-v1 --seed S --total-steps N`` in a subprocess with
   no other flags, so it trains with rlx's CartPole-v1 preset. Its training episodes are read
   from the run folder's ``episodes.csv`` (``wall_s`` counts from the start of training).
2. **SB3**: ``DQN("MlpPolicy", ...)`` with rl-baselines3-zoo's ``dqn.yml`` CartPole-v1 entry:
   net_arch [256, 256], lr 2.3e-3, batch 64, buffer 100k, learning_starts 1000, gamma 0.99,
   target_update_interval 10, train_freq 256, gradient_steps 128, exploration_fraction 0.16,
   exploration_final_eps 0.04, 50k steps. Episodes are read by a callback from the Monitor's
   ``info["episode"]``, with the wall time since just before the env and model were built.

Per seed: wall time and env steps until the mean of the last 20 training episodes first
reaches 250 (and 475), the best such mean, training env steps per second (env steps / wall
time of the whole training run, each at its own budget: rlx's preset 80k, SB3's 50k), and
the final greedy evaluation over 20 episodes. Reported: medians over
the seeds, the ratio of wall times, a table and a markdown block for the README; the table
goes to ``benchmarks/results/dqn.json`` (``--out-dir`` elsewhere).

Run: ``.venv/bin/python benchmarks/bench_dqn.py [--seeds 0 1 2] [--only rlx|sb3]``; a smoke
run: ``--seeds 0 --only rlx --rlx-total-steps 2000 --out-dir /tmp/bench``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from results import write_result  # noqa: E402  (benchmarks/results.py)

ENV_ID = "CartPole-v1"
THRESHOLDS = (250.0, 475.0)
WINDOW = 20
SB3_STEPS = 50_000
SB3_ZOO = {
    "learning_rate": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_fraction": 0.16,
    "exploration_final_eps": 0.04,
    "policy_kwargs": {"net_arch": [256, 256]},
}


@dataclass
class Curve:
    """Training episodes of one run: env step and wall time at each episode's end, its return."""

    name: str
    seed: int
    steps: np.ndarray
    wall: np.ndarray
    returns: np.ndarray
    total_steps: int
    total_wall: float
    eval_return: float

    def first_reaching(self, threshold: float) -> tuple[int, float] | None:
        """(env steps, wall s) when the mean of the last WINDOW episodes first reaches it."""
        means = self.rolling_means()
        hit = np.flatnonzero(means >= threshold)
        if len(hit) == 0:
            return None
        i = hit[0] + WINDOW - 1
        return int(self.steps[i]), float(self.wall[i])

    def rolling_means(self) -> np.ndarray:
        if len(self.returns) < WINDOW:
            return np.zeros(0)
        return np.convolve(self.returns, np.ones(WINDOW) / WINDOW, mode="valid")

    @property
    def steps_per_s(self) -> float:
        return self.total_steps / self.total_wall


# --------------------------------------------------------------------------- rlx
def run_rlx(seed: int, total_steps: int | None) -> Curve:
    """``rlx train dqn --env CartPole-v1 --seed S [--total-steps N]``, as a user types it."""
    with tempfile.TemporaryDirectory(prefix="bench-dqn-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "rlx.cli",
            "train",
            "dqn",
            "--env",
            ENV_ID,
            "--seed",
            str(seed),
        ]
        if total_steps is not None:
            cmd += ["--total-steps", str(total_steps)]
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"rlx failed:\n{proc.stderr}")
        (run_dir,) = Path(tmp, "runs").iterdir()
        with open(run_dir / "episodes.csv") as f:
            rows = list(csv.DictReader(f))
        summary = json.loads((run_dir / "summary.json").read_text())
        # the last metrics line is the end of training (summary.json's wall_s adds the final
        # evaluation, which SB3's figure does not include either)
        last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    return Curve(
        "rlx",
        seed,
        np.array([int(r["step"]) for r in rows]),
        np.array([float(r["wall_s"]) for r in rows]),
        np.array([float(r["return"]) for r in rows]),
        int(last["step"]),
        float(last["wall_s"]),
        float(summary.get("eval_return_mean", float("nan"))),
    )


# --------------------------------------------------------------------------- SB3
def run_sb3(seed: int) -> Curve:
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    torch.set_num_threads(1)

    class EpisodeClock(BaseCallback):
        def __init__(self, t0: float) -> None:
            super().__init__()
            self.t0, self.rows = t0, []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    now = time.perf_counter() - self.t0
                    self.rows.append((self.num_timesteps, now, info["episode"]["r"]))
            return True

    t0 = time.perf_counter()
    env = Monitor(gym.make(ENV_ID))
    model = DQN("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **SB3_ZOO)
    clock = EpisodeClock(t0)
    model.learn(SB3_STEPS, callback=clock)
    total_wall = time.perf_counter() - t0
    mean_eval, _ = evaluate_policy(model, Monitor(gym.make(ENV_ID)), n_eval_episodes=20)
    rows = np.array(clock.rows)
    return Curve(
        "SB3",
        seed,
        rows[:, 0].astype(int),
        rows[:, 1],
        rows[:, 2],
        SB3_STEPS,
        total_wall,
        float(mean_eval),
    )


# --------------------------------------------------------------------------- report
def fmt_hit(hit: tuple[int, float] | None) -> str:
    return "never" if hit is None else f"{hit[1]:.1f} s / {hit[0]:,} steps"


def median_hit(curves: list[Curve], threshold: float) -> tuple[float, float, int]:
    """Median wall s and env steps over seeds (a seed that never reaches it counts as inf)."""
    hits = [c.first_reaching(threshold) for c in curves]
    walls = [h[1] if h else float("inf") for h in hits]
    steps = [h[0] if h else float("inf") for h in hits]
    reached = sum(h is not None for h in hits)
    return float(np.median(walls)), float(np.median(steps)), reached


COLUMNS = ["library", "time to 250 (s)", "env steps to 250", "time to 475 (s)",
           "seeds reaching 475", "training env steps/s"]  # fmt: skip


def report(results: dict[str, list[Curve]]) -> tuple[list[list], dict[str, float]]:
    """Print the per-seed and median tables; return the median table's rows and the figures."""
    print(
        "\nper seed (mean of the last 20 training episodes; wall time from the start of training)"
    )
    print(
        f"{'lib':<4} {'seed':>4} {'-> 250':>22} {'-> 475':>22} {'best':>6} "
        f"{'steps/s':>8} {'eval':>6}"
    )
    for name, curves in results.items():
        for c in curves:
            best = c.rolling_means().max() if len(c.rolling_means()) else float("nan")
            print(
                f"{name:<4} {c.seed:>4} {fmt_hit(c.first_reaching(250)):>22} "
                f"{fmt_hit(c.first_reaching(475)):>22} {best:>6.0f} {c.steps_per_s:>8,.0f} "
                f"{c.eval_return:>6.0f}"
            )
    print("\nmedians over seeds")
    lines = [
        "| CartPole-v1, DQN (median of seeds) | time to 250 | env steps to 250 | time to 475 "
        "| seeds reaching 475 | training env steps/s |",
        "|---|---|---|---|---|---|",
    ]
    medians, rows = {}, []
    for name, curves in results.items():
        w250, s250, _ = median_hit(curves, 250)
        w475, _, n475 = median_hit(curves, 475)
        sps = float(np.median([c.steps_per_s for c in curves]))
        medians[name] = (w250, s250, w475, sps)
        label = (
            "rlx (`rlx train dqn --env CartPole-v1`)"
            if name == "rlx"
            else "Stable-Baselines3 2.x, rl-zoo hyperparameters"
        )
        lines.append(
            f"| {label} | {w250:.1f} s | {s250:,.0f} | "
            f"{'never' if np.isinf(w475) else f'{w475:.1f} s'} | {n475}/{len(curves)} "
            f"| {sps:,.0f} |"
        )
        rows.append([name, _finite(w250), _finite(s250), _finite(w475),
                     f"{n475}/{len(curves)}", round(sps)])  # fmt: skip
    figures: dict = {}
    if "rlx" in medians and not np.isinf(medians["rlx"][2]):
        # what `rlx recommend CartPole-v1` reads to compare the methods rlx measured here
        figures.update(env=ENV_ID, goal="a last-20 mean of 475",
                       rlx_median_seconds_to_goal={"dqn": round(medians["rlx"][2], 2)})  # fmt: skip
    if {"rlx", "SB3"} <= medians.keys():
        ratio = medians["rlx"][0] / medians["SB3"][0]
        steps_ratio = medians["rlx"][1] / medians["SB3"][1]
        figures["wall_time_ratio_to_250"] = _finite(ratio)
        figures["env_steps_ratio_to_250"] = _finite(steps_ratio)
        lines.append("")
        lines.append(
            f"rlx needs {ratio:.2f}x SB3's wall time to reach a last-20 mean of 250 "
            f"({medians['SB3'][0] / medians['rlx'][0]:.1f}x faster) and "
            f"{medians['rlx'][1] / medians['SB3'][1]:.2f}x its env steps."
        )
    print("\n".join(lines))
    print(
        f"\n(machine: {platform.processor() or platform.machine()}, one torch thread, "
        f"python {platform.python_version()})"
    )
    return rows, figures


def _finite(value: float) -> float | None:
    """A figure for the result file (None where a threshold was never reached)."""
    return None if not np.isfinite(value) else round(float(value), 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", choices=("rlx", "sb3"), default=None)
    parser.add_argument(
        "--rlx-total-steps", type=int, default=None, help="rlx budget (default: its preset's)"
    )
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where dqn.json goes (default benchmarks/results)")  # fmt: skip
    args = parser.parse_args()
    results: dict[str, list[Curve]] = {}
    for seed in args.seeds:  # interleaved, so machine load hits both alike
        if args.only in (None, "rlx"):
            results.setdefault("rlx", []).append(run_rlx(seed, args.rlx_total_steps))
            print(f"rlx seed {seed} done", flush=True)
        if args.only in (None, "sb3"):
            results.setdefault("SB3", []).append(run_sb3(seed))
            print(f"SB3 seed {seed} done", flush=True)
    rows, figures = report(results)
    write_result(
        "dqn",
        title="DQN on CartPole-v1: rlx's preset vs Stable-Baselines3 with rl-zoo's tuning",
        columns=COLUMNS,
        rows=rows,
        seeds=args.seeds,
        figures=figures,
        notes=(
            "Medians over the seeds of the wall time and env steps until the mean of the last "
            f"{WINDOW} training episodes first reaches 250 (and 475), and of training env steps "
            "per second; one torch thread, libraries interleaved seed by seed."
        ),
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
