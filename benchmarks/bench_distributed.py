"""PPO collection with Ray env runners against one process's vector env, and Ray's overhead.

Protocol (one torch thread per process, CartPole-v1, the PPO CartPole preset's policy of two
64-unit tanh layers and rollouts of ``num_steps = 32`` vector steps):

- **0 runners**: :class:`rlx.core.rollouts.Collector` in this process, Gymnasium's native
  vector CartPole with 8 copies (the preset), and with ``8 x 4 = 32`` copies (as wide as 4
  runners together).
- **K = 1, 2, 4 runners**: :class:`rlx.core.rollouts.RunnerCollector` over
  :class:`rlx.distributed.env_runners.RayEnvRunners` on a local Ray instance, each runner with
  the same 8-copy vector env: a round is one ``ray.put`` of the weights, a fragment from every
  runner, and their assembly into the learner's buffer.

Per configuration: 5 warm-up rounds, then ``--rounds`` timed ones. Reported: env steps per
second of collection (valid transitions / wall time of the rounds), and per update, in
milliseconds (medians): the weight broadcast (the learner's one ``ray.put`` plus the slowest
runner's fetch of it), the fragment return (the calls' dispatch, the fragments' serialisation
and transfer: a round's wall time minus the fetch and the slowest runner's own collection,
plus the assembly into the learner's buffer) and the runners' own work. "round ms" is the
whole collect call, learner side included. The learner's PPO update of one 8 x 32 rollout
is timed too (the preset's epochs), for the projection printed at the end.

Ray starts only in a private network namespace with no interface but the loopback: run as
root, the script re-runs itself under ``unshare --net`` (``ip link set lo up``); without root
it prints why it skips and exits 0.

The table goes to ``benchmarks/results/distributed.json`` (``--out-dir`` elsewhere).

Run: ``.venv/bin/python benchmarks/bench_distributed.py [--rounds 60] [--runners 1 2 4]``;
``--quick`` checks that it works (3 rounds, 1 runner). The projection printed at the end is a
model fed with the measured figures, not a measurement, and is not written to the result.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from results import goal, ratio, write_result  # noqa: E402  (benchmarks/results.py)
from rlx.distributed.netns import isolated, only_loopback, why_not_isolatable  # noqa: E402

ENV_ID = "CartPole-v1"
NUM_ENVS, NUM_STEPS, WARMUP = 8, 32, 5


@dataclass
class Row:
    label: str
    copies: int
    steps_per_s: float
    broadcast_ms: float | None = None
    return_ms: float | None = None
    work_ms: float | None = None
    round_ms: float | None = None


def main() -> int:
    args = parse_args()
    if not only_loopback():
        return rerun_isolated()
    import torch

    from rlx.distributed.ray_runtime import RaySession

    torch.set_num_threads(1)
    print(f"machine: {os.cpu_count()} CPUs; {ENV_ID}; {NUM_ENVS} copies x {NUM_STEPS} steps "
          f"per runner per round; {args.rounds} timed rounds", flush=True)  # fmt: skip
    rows = [local_row(NUM_ENVS, args.rounds), local_row(NUM_ENVS * 4, args.rounds)]
    update_ms = ppo_update_ms(args.rounds)
    with RaySession(None, max(args.runners), "the benchmark"):
        rows += [ray_row(k, args.rounds) for k in args.runners]
    print_table(rows, update_ms)
    print_projection(rows, update_ms)
    columns = ["runners", "env copies", "env steps/s", "broadcast ms", "return ms",
               "runner work ms", "round ms"]  # fmt: skip
    table = [[r.label, r.copies, round(r.steps_per_s), _ms(r.broadcast_ms), _ms(r.return_ms),
              _ms(r.work_ms), _ms(r.round_ms)] for r in rows]  # fmt: skip
    local_best = max(r.steps_per_s for r in rows if r.broadcast_ms is None)
    widest = rows[-1]
    share = ratio(widest.steps_per_s, local_best)
    write_result(
        "distributed",
        title="PPO's collection on Ray env runners against one process's vector env",
        columns=columns,
        rows=table,
        libraries=("torch", "gymnasium", "ray"),
        repeats=args.rounds,
        goals=[
            goal(
                f"{widest.label} collect at least as fast as one process's widest vector env "
                "(on this machine's cores)",
                "ratio >= 1",
                share,
                share is not None and share >= 1.0,
            )
        ],
        peer="one process",
        figures={"ppo_update_ms": round(update_ms, 2)},
        quick=args.quick,
        notes=(
            f"CartPole-v1, {NUM_ENVS} copies x {NUM_STEPS} steps per runner per round, "
            f"{args.rounds} timed rounds after {WARMUP} warm-up ones (medians per round); one "
            "torch thread per process; Ray in a loopback-only network namespace. The rounds "
            "are the repeats; each row's figure is the median over them."
        ),
        out_dir=args.out_dir,
    )
    return 0


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--runners", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--quick", action="store_true",
                        help="3 rounds, 1 runner: checks that it works")  # fmt: skip
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="where distributed.json goes (default: benchmarks/results, --quick: "
        "benchmarks/results/quick)",
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.runners = 3, [1]
    return args


def rerun_isolated() -> int:
    reason = why_not_isolatable()
    if reason is not None:
        print(f"bench_distributed: SKIPPED: Ray runs only in a private network namespace, and "
              f"{reason}.")  # fmt: skip
        return 0
    return subprocess.call(isolated([sys.executable, *sys.argv]))


# ---------------------------------------------------------------------------- measurements
def policy_and_config(num_envs: int, runners: int | None = None):
    from rlx.agents.ppo import PRESETS, PPOConfig

    preset = {**PRESETS[ENV_ID], "num_envs": num_envs, "minibatch_size": num_envs * NUM_STEPS}
    return PPOConfig(**preset, runners=runners, eval_episodes=0)


def local_row(num_envs: int, rounds: int) -> Row:
    from rlx.core.policy_agent import build_policy
    from rlx.core.rollouts import Collector

    config = policy_and_config(num_envs)
    collector = Collector(ENV_ID, num_envs, 0, algo="PPO", env_id=ENV_ID)
    policy = build_policy(config, collector)
    buffer, rng = collector.new_buffer(NUM_STEPS), np.random.default_rng(0)
    step = 0
    for _ in range(WARMUP):
        step, _ = collector.collect(policy, buffer, rng, step)
    t0, start = time.perf_counter(), step
    for _ in range(rounds):
        step, _ = collector.collect(policy, buffer, rng, step)
    seconds = time.perf_counter() - t0
    collector.close()
    return Row(f"0 (this process, {num_envs} copies)", num_envs, (step - start) / seconds)


def ray_row(runners: int, rounds: int) -> Row:
    from rlx.core.policy_agent import build_policy
    from rlx.core.rollouts import RunnerCollector
    from rlx.distributed.env_runners import RayEnvRunners

    config = policy_and_config(NUM_ENVS, runners)
    with RunnerCollector(RayEnvRunners(), ENV_ID, NUM_ENVS, 0, runners=runners, address=None,
                         algo="PPO", env_id=ENV_ID) as collector:  # fmt: skip
        policy = build_policy(config, collector)
        buffer, rng = collector.new_buffer(NUM_STEPS), np.random.default_rng(0)
        step = 0
        for _ in range(WARMUP):  # the first round also starts the runners
            step, _ = collector.collect(policy, buffer, rng, step)
        timings, assembly = [], []
        t0, start = time.perf_counter(), step
        for _ in range(rounds):
            step, _ = collector.collect(policy, buffer, rng, step)
            timings.append(collector.group.timing)
            assembly.append(collector.assemble_s)
        seconds = time.perf_counter() - t0

    def median_ms(values) -> float:
        return 1000 * statistics.median(values)

    return Row(
        f"{runners} Ray runner{'s' if runners > 1 else ''}", runners * NUM_ENVS,
        (step - start) / seconds,
        broadcast_ms=median_ms(t.broadcast_s for t in timings),
        return_ms=median_ms(t.return_s + a for t, a in zip(timings, assembly, strict=True)),
        work_ms=median_ms(t.work_s for t in timings),
        round_ms=1000 * seconds / rounds,
    )  # fmt: skip


def ppo_update_ms(rounds: int) -> float:
    """The learner's share of a PPO update: V, log pi_old and GAE of one 8 x 32 rollout and
    the preset's full-batch epochs (median milliseconds)."""
    from rlx.agents.ppo import update
    from rlx.core.optim import Adam
    from rlx.core.policy_agent import build_policy
    from rlx.core.rollout_batch import prepare_batch
    from rlx.core.rollouts import Collector

    config = policy_and_config(NUM_ENVS)
    collector = Collector(ENV_ID, NUM_ENVS, 0, algo="PPO", env_id=ENV_ID)
    policy = build_policy(config, collector)
    optimizer = Adam(policy.parameters(), config.learning_rate)
    buffer, rng = collector.new_buffer(NUM_STEPS), np.random.default_rng(0)
    times = []
    for i in range(WARMUP + rounds // 2):
        collector.collect(policy, buffer, rng, 0)
        t0 = time.perf_counter()
        batch = prepare_batch(buffer, policy, collector.last_obs, config.gamma, config.gae_lambda)
        update(policy, optimizer, batch, config, rng)
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
    collector.close()
    return 1000 * statistics.median(times)


# ---------------------------------------------------------------------------- report
def print_table(rows: list[Row], update_ms: float) -> None:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    header = ("runners", "env copies", "env steps/s", "broadcast ms", "return ms",
              "runner work ms", "round ms")  # fmt: skip
    lines = [header] + [
        (r.label, str(r.copies), f"{r.steps_per_s:,.0f}", ms(r.broadcast_ms), ms(r.return_ms),
         ms(r.work_ms), ms(r.round_ms))
        for r in rows
    ]  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    print()
    for n, line in enumerate(lines):
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)) + " |")
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    from rlx.agents.ppo import PRESETS

    epochs = PRESETS[ENV_ID]["num_epochs"]
    print(f"\nlearner: one PPO update of an 8 x 32 rollout ({epochs} epochs, full batch): "
          f"{update_ms:.1f} ms")  # fmt: skip


CALL_MS = 0.65  # the model's dispatch cost of one more small Ray actor call per round
PROJECTED_RUNNERS = (1, 4, 16, 64)


def print_projection(rows: list[Row], update_ms: float) -> None:
    """A model of a multi-node cluster fed with the measured figures (printed, not measured).

    With a core per runner the runners collect in parallel, so a synchronous round costs one
    runner's work ``W`` plus the overhead measured at one runner ``O`` (broadcast + return)
    plus one call's dispatch per further runner: ``K x 256 / (W + O + (K - 1) x 0.65 ms)``
    env steps per second. The learner's update grows with the batch, ``K x U``, and runs while
    the runners wait.
    """
    one = next(r for r in rows if r.label.startswith("1 Ray"))
    steps = NUM_ENVS * NUM_STEPS
    overhead = (one.broadcast_ms or 0.0) + (one.return_ms or 0.0)
    env_costs = {"CartPole (measured)": (one.work_ms or 0.0) / steps, "1 ms env step": 1.0}
    print(
        f"\nprojection (a model fed with the figures above, not a measurement): a round costs "
        f"one runner's work + {overhead:.1f} ms + {CALL_MS} ms per further runner; "
        "collection env steps/s (and with the learner's PPO update, training env steps/s):"
    )
    print("| env step cost | " + " | ".join(f"K = {k}" for k in PROJECTED_RUNNERS) + " |")
    print("|---|" + "---|" * len(PROJECTED_RUNNERS))
    local_best = max(r.steps_per_s for r in rows if r.broadcast_ms is None)
    passes = None
    for name, cost_ms in env_costs.items():
        cells = []
        for k in PROJECTED_RUNNERS:
            round_ms = steps * cost_ms + overhead + CALL_MS * (k - 1)
            collect = k * steps / round_ms * 1000
            train = k * steps / (round_ms + k * update_ms) * 1000
            cells.append(f"{collect:,.0f} ({train:,.0f})")
            if passes is None and cost_ms < 0.1 and collect > local_best:
                passes = k
        print(f"| {name} ({cost_ms:.3f} ms) | " + " | ".join(cells) + " |")
    crossover = f"from about K = {passes}" if passes else "at none of these K"
    print(
        f"\nReading: on CartPole one process with a wide vector env ({local_best:,.0f} steps/s "
        f"here) beats the runners on this machine; a cluster passes it {crossover}, and PPO's "
        f"training rate stays bounded by the learner's update (256 samples per {update_ms:.1f} "
        "ms) whatever K is. When an env step costs milliseconds the round is almost all runner "
        "work, so K runners on K cores collect close to K times as fast until the per-runner "
        "dispatch and the update catch up; the network's latency between nodes adds to the "
        "overhead term once per round."
    )


if __name__ == "__main__":
    sys.exit(main())
