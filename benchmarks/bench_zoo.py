"""rl-baselines3-zoo's envs: rlx on the zoo's hyperparameters vs the zoo's published agent vs
Stable-Baselines3 on the same hyperparameters, same budget.

For each env/algorithm pair the zoo tunes (classic control and Box2D), three runs per seed,
each in a fresh process with one torch thread (``deep_rl.py``):

1. **rlx with the zoo's preset**: ``rlx.train(algo, env, **zoo)``, the zoo's entry translated
   into rlx's fields by :func:`rlx.launch.zoo.zoo_preset` (the same translation ``rlx train``
   applies where rlx has no preset of its own; here it is applied even where rlx has one, so
   both sides run the same hyperparameters). Settings rlx cannot follow are listed per pair.
2. **SB3 with the zoo's recipe**, as the zoo builds it (``deep_rl.run_sb3``: ``lin_``
   schedules, ``policy_kwargs``, ``normalize`` as ``VecNormalize``, gSDE by SB3 itself).
3. **The zoo's published agent**: ``mean_reward`` and ``std_reward`` of its ``benchmark.md``
   (one trained agent per pair, evaluated over about 150,000 steps; the zoo says it is not a
   quantitative benchmark), as rlx carries them (:mod:`rlx.launch.zoo_agents`).

Both sides train the zoo's whole budget (``n_timesteps``) and are then evaluated on the same
number of deterministic episodes, seeded apart from training (rlx: ``seed + 10000``; SB3: an
env made from ``seed + 10000``, its normalisation statistics frozen). The clock covers
training only (rlx: the run folder's last ``wall_s``; SB3: env and model construction and
``learn``), never the final evaluation.

Seeds: 300-302. No preset, rlx's or the zoo's translation, was chosen by looking at them.

A pair **reaches** the published agent when rlx's mean final return over the seeds is at least
the published mean minus the published standard deviation (the published agent's own spread
over its episodes). Goals: rlx reaches the published agent on at least 10 pairs; rlx's median
training time is below SB3's on every pair run.

Run: ``.venv/bin/python benchmarks/bench_zoo.py [--pairs dqn:CartPole-v1 ...] [--seeds ...]``;
``--quick`` checks that it works (one seed, a tenth of each budget). The whole list takes days
on two cores, so a run of some pairs keeps the pairs of the existing record that it does not
rerun (same seeds only), each with the commit and date it was measured at (``measured``).
"""

from __future__ import annotations

import os

THREADS = 1
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from deep_rl import run_rlx, run_sb3  # noqa: E402
from results import (  # noqa: E402
    MIN_REPEATS,
    RESULTS,
    git_state,
    goal,
    ratio,
    spread,
    utc_now,
    write_result,
)
from rlx.launch.zoo_agents import SOURCE, published  # noqa: E402

EVAL_EPISODES = 20
SEEDS = (300, 301, 302)
PAIRS: tuple[tuple[str, str], ...] = (
    ("ppo", "CartPole-v1"),
    ("dqn", "CartPole-v1"),
    ("a2c", "CartPole-v1"),
    ("dqn", "MountainCar-v0"),
    ("dqn", "Acrobot-v1"),
    ("dqn", "LunarLander-v3"),
    ("sac", "Pendulum-v1"),
    ("td3", "Pendulum-v1"),
    ("sac", "MountainCarContinuous-v0"),
    ("ppo", "MountainCarContinuous-v0"),
    ("ppo", "Pendulum-v1"),
    ("a2c", "MountainCarContinuous-v0"),
    ("td3", "MountainCarContinuous-v0"),
    ("a2c", "Acrobot-v1"),
)
"""The pairs: classic-control and Box2D envs the zoo tunes and published an agent for, with an
algorithm rlx has (the agents: :mod:`rlx.launch.zoo_agents`, carried from the zoo's
``benchmark.md``)."""


def zoo_entry(algo: str, env_id: str) -> tuple[dict[str, Any], dict[str, Any], list[str], str]:
    """The zoo's raw entry (for SB3), rlx's translation of it, what rlx cannot follow, and the
    source (file and version)."""
    from rlx.launch import zoo

    preset = zoo.zoo_preset(algo, env_id)
    if preset is None:
        raise SystemExit(f"rl-baselines3-zoo has no {algo} entry for {env_id}")
    return dict(preset.entry), dict(preset.overrides), list(preset.unfollowed), preset.source


def final_return(curve: Any) -> float:
    """The mean return of a run's final evaluation."""
    value = curve.extra.get("eval_mean")
    if value is None:
        raise RuntimeError(f"{curve.row} seed {curve.seed}: no final evaluation")
    return float(value)


def run_pair(algo: str, env_id: str, seeds: list[int], scale: float) -> dict[str, Any]:
    entry, overrides, unfollowed, source = zoo_entry(algo, env_id)
    budget = max(1, int(float(entry["n_timesteps"]) * scale))
    entry = {**entry, "n_timesteps": budget}
    sides: dict[str, dict[int, Any]] = {"rlx": {}, "sb3": {}}
    for seed in seeds:  # alternated seed by seed, so a load change hits both sides alike
        sides["rlx"][seed] = run_rlx(
            "rlx", algo, env_id, seed, budget, {**overrides, "eval_episodes": EVAL_EPISODES}
        )
        sides["sb3"][seed] = run_sb3("sb3", algo, env_id, seed, entry, eval_episodes=EVAL_EPISODES)
        print(
            f"{algo} {env_id} seed {seed}: rlx {final_return(sides['rlx'][seed]):.1f}"
            f" in {sides['rlx'][seed].total_wall:.0f} s, SB3 "
            f"{final_return(sides['sb3'][seed]):.1f} in "
            f"{sides['sb3'][seed].total_wall:.0f} s",
            flush=True,
        )
    figures = {}
    for side, curves in sides.items():
        means = [final_return(c) for c in curves.values()]
        figures[side] = {
            "per_seed": {s: round(m, 2) for s, m in zip(curves, means, strict=True)},
            "mean": round(statistics.mean(means), 2),
            "train_s": spread([c.total_wall for c in curves.values()]),
        }
    agent = published(algo, env_id)
    assert agent is not None  # main() refuses pairs without one
    published_mean, published_std = agent.mean_reward, agent.std_reward
    figures["published"] = {"mean": published_mean, "std": published_std}
    figures["reaches"] = figures["rlx"]["mean"] >= published_mean - published_std
    figures["sb3_reaches"] = figures["sb3"]["mean"] >= published_mean - published_std
    figures["time_ratio"] = ratio(figures["rlx"]["train_s"]["median"],
                                  figures["sb3"]["train_s"]["median"])  # fmt: skip
    figures.update(budget=budget, source=source, unfollowed=unfollowed, overrides=overrides)
    figures["measured"] = {"commit": git_state().get("commit"), "date": utc_now()}
    return figures


def earlier_pairs(
    seeds: list[int], rerun: list[str], path: Path = RESULTS / "zoo.json"
) -> dict[str, dict[str, Any]]:
    """The pairs of the existing full record on the same seeds that this run does not rerun,
    each with the commit and date it was measured at (older records name them once, at the
    top)."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if old.get("quick") or old.get("seeds") != seeds:
        return {}
    kept = {}
    for key, figures in old.get("details", {}).items():
        if key in rerun:
            continue
        measured = figures.get("measured") or {
            "commit": old.get("git", {}).get("commit"),
            "date": old.get("date"),
        }
        kept[key] = {**figures, "measured": measured}
    return kept


def row(algo: str, env_id: str, f: dict[str, Any]) -> list[Any]:
    published = f"{f['published']['mean']:.1f} ± {f['published']['std']:.1f}"
    return [
        f"{algo} {env_id}",
        f["budget"],
        published,
        f"{f['rlx']['mean']:.1f}",
        "yes" if f["reaches"] else "no",
        f"{f['sb3']['mean']:.1f}",
        f["rlx"]["train_s"]["median"],
        f["sb3"]["train_s"]["median"],
        f["time_ratio"],
        "; ".join(f["unfollowed"]) or "none",
        f"{str(f['measured']['commit'])[:7]}, {str(f['measured']['date'])[:10]}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", nargs="+", default=[f"{a}:{e}" for a, e in PAIRS])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    scale = 1.0
    if args.quick:
        args.seeds, scale = args.seeds[:1], 0.1
    pairs = [tuple(p.split(":", 1)) for p in args.pairs]
    unknown = [p for p in pairs if published(*p) is None]
    if unknown:
        raise SystemExit(f"no published agent for {unknown}; choose from {list(PAIRS)}")
    # every earlier pair is kept until its rerun replaces it: a run stopped part-way leaves
    # the pairs it did not reach as they were, never drops them
    results = {} if args.quick else earlier_pairs(args.seeds, [])
    for done, (a, e) in enumerate(pairs, 1):  # rewritten after each pair: a long run keeps it
        results[f"{a}:{e}"] = run_pair(a, e, args.seeds, scale)
        record(results, args, pending=len(pairs) - done)


def record(results: dict[str, dict[str, Any]], args: argparse.Namespace, pending: int) -> None:
    """Write the result file for the pairs run so far (``pending``: how many remain)."""
    rows = [row(*key.split(":", 1), f) for key, f in results.items()]
    reached = sum(bool(f["reaches"]) for f in results.values())
    faster = [f["time_ratio"] for f in results.values() if f["time_ratio"] is not None]
    goals = [
        goal("rlx reaches the zoo's published agent", "on at least 10 pairs",
             f"{reached} of {len(results)} pairs run", reached >= 10),
        goal("rlx trains faster than SB3 on the same hyperparameters",
             "median time ratio rlx/SB3 < 1 on every pair run",
             {k: f["time_ratio"] for k, f in results.items()},
             bool(faster) and all(r < 1 for r in faster)),
    ]  # fmt: skip
    write_result(
        "zoo",
        title="rl-baselines3-zoo's envs: rlx and SB3 on the zoo's hyperparameters",
        columns=[
            "pair",
            "budget (steps)",
            "zoo's published agent",
            "rlx final return (mean)",
            "rlx reaches it",
            "SB3 final return (mean)",
            "rlx train s (median)",
            "SB3 train s (median)",
            "time rlx/SB3",
            "settings rlx does not follow",
            "measured at",
        ],
        rows=rows,
        libraries=["torch", "gymnasium", "stable-baselines3", "box2d", "rl_zoo3"],
        repeats=len(args.seeds),
        peer="Stable-Baselines3 with rl-baselines3-zoo's hyperparameters",
        goals=goals,
        seeds=list(args.seeds),
        notes=(
            f"Published agents: {SOURCE}, carried in rlx. Final return: mean of {EVAL_EPISODES} "
            "deterministic episodes seeded apart from training, averaged over seeds. Train "
            "seconds exclude the final evaluation."
            + f" Pairs measured: {len(results)} of {len(PAIRS)}, each at the commit it names."
            + (f" {pending} of the pairs asked for were still to run." if pending else "")
        ),
        details=results,
        quick=args.quick or len(args.seeds) < MIN_REPEATS,
    )
    if any(math.isnan(f["rlx"]["mean"]) for f in results.values()):
        raise SystemExit("a final return is NaN")


if __name__ == "__main__":
    main()
