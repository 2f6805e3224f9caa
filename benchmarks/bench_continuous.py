"""SAC and TD3 on Pendulum-v1: rlx as a user runs it vs Stable-Baselines3 with rl-zoo's tuning.

Side by side in one run, seed by seed (one torch thread for both):

1. **rlx**: ``rlx train ALGO --env Pendulum-v1 --seed S --total-steps 20000`` in a subprocess
   with no other flags, so it trains with rlx's Pendulum-v1 preset. Its training episodes
   are read from the run folder's ``episodes.csv`` as they are written (``wall_s`` counts
   from the start of training); once the threshold is reached the benchmark stops the run
   with Ctrl-C (SIGINT), as a user would, to save time: the run checkpoints and ends.
2. **SB3**: ``SAC`` / ``TD3("MlpPolicy", ...)`` with rl-baselines3-zoo's Pendulum
   hyperparameters (``hyperparams/sac.yml`` Pendulum-v1: learning_rate 1e-3, the rest SB3's
   defaults: net_arch [256, 256], batch 256, buffer 1M, learning_starts 100, tau 0.005,
   gamma 0.99, one gradient step per env step, ent_coef auto; ``hyperparams/td3.yml``
   Pendulum entry: gamma 0.98, buffer 200k, learning_starts 10000, normal action noise
   std 0.1, train_freq one episode, gradient_steps -1 (one per env step), learning_rate
   1e-3, net_arch [400, 300]). Episodes come from the Monitor's ``info["episode"]`` in a
   callback, with the wall time since just before the env and model were built; the
   callback stops training once the threshold is reached.

Per seed: wall time and env steps until the mean of the last 10 training episodes first
reaches -200 (capped at 20,000 env steps, the zoo's budget), and gradient updates per second
while learning (gradient steps over the wall time between the first and the last reading
after learning started: env stepping and acting included, as training runs). Reported:
medians over the seeds, the ratios, a table and a markdown block for the README.

Then, isolated: gradient updates per second on a filled replay buffer (batch 256, sampling
included) at equal network sizes, SB3's default architecture and rlx's Pendulum preset, so
the implementations are compared on the same arithmetic.

Both tables go to ``benchmarks/results/continuous.json`` (``--out-dir`` elsewhere).

Run: ``.venv/bin/python benchmarks/bench_continuous.py [--seeds 0 1] [--algos sac td3]
[--only rlx|sb3]``; a smoke run: ``--seeds 0 --only rlx --max-steps 600 --isolated 0
--out-dir /tmp/bench``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from results import write_result  # noqa: E402  (benchmarks/results.py)

ENV_ID = "Pendulum-v1"
THRESHOLD = -200.0
WINDOW = 10
MAX_STEPS = 20_000  # the zoo's n_timesteps for both algorithms
POLL_S = 0.25
SB3_ZOO = {
    # rl-baselines3-zoo hyperparams/sac.yml, Pendulum-v1 (everything else: SB3's defaults)
    "sac": {"learning_rate": 1e-3},
    # rl-baselines3-zoo hyperparams/td3.yml, Pendulum entry (noise_type normal, noise_std 0.1)
    "td3": {
        "gamma": 0.98,
        "buffer_size": 200_000,
        "learning_starts": 10_000,
        "train_freq": (1, "episode"),
        "gradient_steps": -1,
        "learning_rate": 1e-3,
        "policy_kwargs": {"net_arch": [400, 300]},
    },
}
TD3_NOISE_STD = 0.1


@dataclass
class Curve:
    """Training episodes of one run and its gradient-update readings."""

    lib: str
    algo: str
    seed: int
    steps: np.ndarray  # env steps at each episode's end
    wall: np.ndarray  # wall s at each episode's end
    returns: np.ndarray
    update_readings: list[tuple[float, int]]  # (wall s, gradient steps so far)

    def first_reaching(self) -> tuple[int, float] | None:
        """(env steps, wall s) when the mean of the last WINDOW episodes first reaches it."""
        return first_reaching(self.returns, self.steps, self.wall)

    @property
    def updates_per_s(self) -> float:
        learning = [(t, n) for t, n in self.update_readings if n > 0]
        if len(learning) < 2 or learning[-1][0] <= learning[0][0]:
            return float("nan")
        (t0, n0), (t1, n1) = learning[0], learning[-1]
        return (n1 - n0) / (t1 - t0)


def first_reaching(returns, steps, wall) -> tuple[int, float] | None:
    if len(returns) < WINDOW:
        return None
    means = np.convolve(returns, np.ones(WINDOW) / WINDOW, mode="valid")
    hit = np.flatnonzero(means >= THRESHOLD)
    if len(hit) == 0:
        return None
    i = hit[0] + WINDOW - 1
    return int(steps[i]), float(wall[i])


# --------------------------------------------------------------------------- rlx
def run_rlx(algo: str, seed: int) -> Curve:
    """``rlx train ALGO --env Pendulum-v1 --seed S --total-steps 20000``, as a user types it."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{algo}-") as tmp:
        cmd = [sys.executable, "-m", "rlx.cli", "train", algo, "--env", ENV_ID,
               "--seed", str(seed), "--total-steps", str(MAX_STEPS)]  # fmt: skip
        proc = subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rows: list[dict[str, str]] = []
        while proc.poll() is None:
            time.sleep(POLL_S)
            rows = _episode_rows(Path(tmp))
            if _reached(rows):
                proc.send_signal(signal.SIGINT)  # Ctrl-C: checkpoint and stop cleanly
                break
        _, stderr = proc.communicate(timeout=600)
        (run_dir,) = Path(tmp, "runs").iterdir()
        rows = _episode_rows(Path(tmp))
        if not rows:
            raise RuntimeError(f"rlx {algo} wrote no episodes:\n{stderr.decode()}")
        metrics = [
            json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        ]
    return Curve(
        "rlx", algo, seed,
        np.array([int(r["step"]) for r in rows]),
        np.array([float(r["wall_s"]) for r in rows]),
        np.array([float(r["return"]) for r in rows]),
        [(m["wall_s"], int(m.get("gradient_steps", 0))) for m in metrics],
    )  # fmt: skip


def _episode_rows(tmp: Path) -> list[dict[str, str]]:
    runs = list((tmp / "runs").glob("*/episodes.csv"))
    if not runs:
        return []
    with open(runs[0]) as f:
        return [row for row in csv.DictReader(f) if row.get("length")]  # skip a half-written line


def _reached(rows: list[dict[str, str]]) -> bool:
    returns = np.array([float(r["return"]) for r in rows])
    return first_reaching(returns, np.zeros(len(rows)), np.zeros(len(rows))) is not None


# --------------------------------------------------------------------------- SB3
def run_sb3(algo: str, seed: int) -> Curve:
    import gymnasium as gym
    import torch
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.noise import NormalActionNoise

    torch.set_num_threads(1)

    class EpisodeClock(BaseCallback):
        """Records each finished episode and stops training once the threshold is reached."""

        def __init__(self, t0: float) -> None:
            super().__init__()
            self.t0, self.rows, self.updates = t0, [], []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    now = time.perf_counter() - self.t0
                    self.rows.append((self.num_timesteps, now, info["episode"]["r"]))
                    self.updates.append((now, int(self.model._n_updates)))
            returns = np.array([r[2] for r in self.rows])
            return first_reaching(returns, np.zeros(len(returns)), np.zeros(len(returns))) is None

    t0 = time.perf_counter()
    env = Monitor(gym.make(ENV_ID))
    kwargs = dict(SB3_ZOO[algo])
    if algo == "td3":
        n = env.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(np.zeros(n), TD3_NOISE_STD * np.ones(n))
    cls = SAC if algo == "sac" else TD3
    model = cls("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **kwargs)
    clock = EpisodeClock(t0)
    model.learn(MAX_STEPS, callback=clock)
    rows = np.array(clock.rows)
    return Curve("SB3", algo, seed, rows[:, 0].astype(int), rows[:, 1], rows[:, 2], clock.updates)


# --------------------------------------------------------------------------- isolated updates
def isolated_rlx(algo: str, hidden: tuple[int, ...], batch: int, n: int) -> float:
    """rlx gradient updates per second on a filled replay buffer, sampling included."""
    import torch

    from rlx.agents.sac import SACConfig, SACLearner
    from rlx.agents.td3 import TD3Config, TD3Learner
    from rlx.core.buffers import ReplayBuffer
    from rlx.core.off_policy import replay_batches

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(10_000, (3,), np.float32, action_shape=(1,), action_dtype=np.float32)
    for _ in range(2_000):
        obs = rng.normal(size=(1, 3)).astype(np.float32)
        buffer.add(obs, rng.uniform(-1, 1, (1, 1)), rng.normal(size=1), obs,
                   np.zeros(1, bool), np.zeros(1, bool))  # fmt: skip
    if algo == "sac":
        learner = SACLearner(SACConfig(hidden_sizes=hidden, batch_size=batch), 3, 1)
    else:
        learner = TD3Learner(TD3Config(hidden_sizes=hidden, batch_size=batch), 3, 1)

    def steps(k: int) -> None:
        for _ in range(k):
            (minibatch,) = replay_batches(buffer.sample(batch, rng), 1, batch)
            learner.update(minibatch)

    steps(20)
    t0 = time.perf_counter()
    steps(n)
    return n / (time.perf_counter() - t0)


def isolated_sb3(algo: str, net_arch: list[int], batch: int, n: int) -> float:
    """SB3 gradient updates per second: ``model.train(gradient_steps=n)`` on a filled buffer."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import SAC, TD3

    torch.set_num_threads(1)
    cls = SAC if algo == "sac" else TD3
    model = cls("MlpPolicy", gym.make(ENV_ID), learning_starts=2_000, batch_size=batch,
                policy_kwargs={"net_arch": net_arch}, seed=0, device="cpu")  # fmt: skip
    model.learn(2_000)  # random actions into the buffer, no update yet
    model.train(gradient_steps=20, batch_size=batch)
    t0 = time.perf_counter()
    model.train(gradient_steps=n, batch_size=batch)
    return n / (time.perf_counter() - t0)


def isolated_report(algos: list[str], n: int) -> list[list]:
    """Updates per second at equal network sizes: SB3's defaults and rlx's Pendulum preset;
    returns the table's rows."""
    sizes = {"sac": [[256, 256], [64, 64]], "td3": [[400, 300], [64, 64]]}
    print("\ngradient updates per second, isolated (batch 256, sampling included)")
    lines = [
        "| algorithm, critic/actor hidden sizes | SB3 | rlx | rlx / SB3 |",
        "|---|---|---|---|",
    ]
    rows = []
    for algo in algos:
        for hidden in sizes[algo]:
            sb3 = isolated_sb3(algo, hidden, 256, n)
            ours = isolated_rlx(algo, tuple(hidden), 256, n)
            lines.append(
                f"| {algo.upper()} {hidden} | {sb3:,.0f} | {ours:,.0f} | {ours / sb3:.1f}x |"
            )
            rows.append([f"{algo.upper()} {hidden}", round(sb3), round(ours), round(ours / sb3, 2)])
    print("\n".join(lines))
    return rows


# --------------------------------------------------------------------------- report
def fmt_hit(hit: tuple[int, float] | None) -> str:
    return f"not in {MAX_STEPS:,} steps" if hit is None else f"{hit[1]:.1f} s / {hit[0]:,} steps"


def medians(curves: list[Curve]) -> tuple[float, float, int, float]:
    """Median wall s, env steps (a seed that never reaches it counts as inf), seeds reaching,
    median updates/s."""
    hits = [c.first_reaching() for c in curves]
    walls = [h[1] if h else float("inf") for h in hits]
    steps = [h[0] if h else float("inf") for h in hits]
    ups = float(np.median([c.updates_per_s for c in curves]))
    return float(np.median(walls)), float(np.median(steps)), sum(h is not None for h in hits), ups


COLUMNS = ["algorithm", "library", "time to -200 (s)", "env steps to -200", "seeds reaching",
           "gradient updates/s"]  # fmt: skip


def report(results: dict[tuple[str, str], list[Curve]]) -> tuple[list[list], dict[str, float]]:
    """Print the per-seed and median tables; return the median table's rows and the ratios."""
    print(f"\nper seed (mean of the last {WINDOW} training episodes >= {THRESHOLD:.0f}; "
          "wall time from the start of training)")  # fmt: skip
    print(f"{'algo':<4} {'lib':<4} {'seed':>4} {'-> -200':>24} {'updates/s':>10}")
    for (algo, lib), curves in results.items():
        for c in curves:
            print(f"{algo:<4} {lib:<4} {c.seed:>4} {fmt_hit(c.first_reaching()):>24} "
                  f"{c.updates_per_s:>10,.0f}")  # fmt: skip
    lines = [
        "| Pendulum-v1 (median of seeds) | time to -200 | env steps to -200 | seeds reaching "
        "| gradient updates/s |",
        "|---|---|---|---|---|",
    ]
    table: dict[tuple[str, str], tuple[float, float, int, float]] = {}
    rows = []
    for (algo, lib), curves in results.items():
        table[algo, lib] = m = medians(curves)
        label = (
            f"rlx `rlx train {algo} --env Pendulum-v1`"
            if lib == "rlx"
            else f"Stable-Baselines3 {algo.upper()}, rl-zoo hyperparameters"
        )
        wall = "never" if np.isinf(m[0]) else f"{m[0]:.1f} s"
        steps = "never" if np.isinf(m[1]) else f"{m[1]:,.0f}"
        lines.append(f"| {label} | {wall} | {steps} | {m[2]}/{len(curves)} | {m[3]:,.0f} |")
        rows.append([algo, lib, _finite(m[0]), _finite(m[1]), f"{m[2]}/{len(curves)}",
                     _finite(m[3])])  # fmt: skip
    notes, figures = [], {}
    for algo in dict.fromkeys(a for a, _ in results):
        if (algo, "rlx") in table and (algo, "SB3") in table:
            r, s = table[algo, "rlx"], table[algo, "SB3"]
            figures[f"{algo}_wall_time_ratio"] = _finite(r[0] / s[0])
            figures[f"{algo}_updates_per_s_ratio"] = _finite(r[3] / s[3])
            notes.append(
                f"{algo.upper()}: rlx needs {r[0] / s[0]:.2f}x SB3's wall time to reach -200 "
                f"({s[0] / r[0]:.1f}x faster), {r[1] / s[1]:.2f}x its env steps, and runs "
                f"{r[3] / s[3]:.1f}x its gradient updates per second."
            )
    print("\n".join(["", *lines, "", *notes]))
    machine = platform.processor() or platform.machine()
    print(
        f"\n(machine: {machine}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"one torch thread, python {platform.python_version()})"
    )
    return rows, figures


def _finite(value: float) -> float | None:
    """A figure for the result file (None where a threshold was never reached)."""
    return None if not np.isfinite(value) else round(float(value), 3)


def main() -> int:
    global MAX_STEPS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--algos", nargs="+", choices=("sac", "td3"), default=["sac", "td3"])
    parser.add_argument("--only", choices=("rlx", "sb3"), default=None)
    parser.add_argument(
        "--isolated", type=int, default=300, help="gradient updates per isolated timing (0: skip)"
    )
    parser.add_argument("--max-steps", type=int, default=MAX_STEPS,
                        help="env steps per run (default: the zoo's budget)")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where continuous.json goes (default benchmarks/results)")  # fmt: skip
    args = parser.parse_args()
    MAX_STEPS = args.max_steps
    results: dict[tuple[str, str], list[Curve]] = {}
    for algo in args.algos:
        for seed in args.seeds:  # interleaved, so machine load hits both alike
            if args.only in (None, "rlx"):
                curve = run_rlx(algo, seed)
                results.setdefault((algo, "rlx"), []).append(curve)
                print(f"rlx {algo} seed {seed}: {fmt_hit(curve.first_reaching())}", flush=True)
            if args.only in (None, "sb3"):
                curve = run_sb3(algo, seed)
                results.setdefault((algo, "SB3"), []).append(curve)
                print(f"SB3 {algo} seed {seed}: {fmt_hit(curve.first_reaching())}", flush=True)
    rows, figures = report(results)
    if args.isolated:
        figures["isolated_updates_per_s"] = {
            "columns": ["algorithm, hidden sizes", "SB3", "rlx", "rlx / SB3"],
            "rows": isolated_report(args.algos, args.isolated),
        }
    write_result(
        "continuous",
        title="SAC and TD3 on Pendulum-v1: rlx's presets vs Stable-Baselines3 with rl-zoo's tuning",
        columns=COLUMNS,
        rows=rows,
        seeds=args.seeds,
        figures=figures,
        notes=(
            f"Medians over the seeds of the wall time and env steps until the mean of the last "
            f"{WINDOW} training episodes first reaches {THRESHOLD:.0f} (at most {MAX_STEPS:,} "
            "env steps), and of gradient updates per second while learning; one torch thread. "
            "figures.isolated_updates_per_s: updates per second on a filled replay buffer at "
            "equal network sizes."
        ),
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
