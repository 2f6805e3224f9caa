"""rl-baselines3-zoo's published agents: what the zoo's tuned settings reached, per env and
algorithm, as its ``benchmark.md`` reports (carried as ``zoo_hyperparams/benchmark.csv``, with
its source in the README beside it).

``rlx recommend`` cites them where rlx has no measurement of its own (a method the zoo's
settings, which rlx applies as its preset, took to a stated return on that env), and
``benchmarks/bench_zoo.py`` measures rlx against them. Each is one trained agent evaluated over
its own episodes (the zoo says so): a sign of what the settings can reach, not a distribution
over seeds.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

PUBLISHED_FILE = Path(__file__).with_name("zoo_hyperparams") / "benchmark.csv"
SOURCE = "rl-baselines3-zoo's benchmark.md (published agents)"


@dataclass(frozen=True)
class PublishedAgent:
    """One published agent: its algorithm, env, mean and std of the return over its
    evaluation episodes, and the env steps it trained."""

    algo: str
    env_id: str
    mean_reward: float
    std_reward: float
    n_timesteps: int


@functools.cache
def published_agents() -> tuple[PublishedAgent, ...]:
    """Every carried row (the file ships with rlx; it is not user input)."""
    with PUBLISHED_FILE.open(newline="") as f:
        return tuple(
            PublishedAgent(
                row["algo"],
                row["env_id"],
                float(row["mean_reward"]),
                float(row["std_reward"]),
                int(row["n_timesteps"]),
            )
            for row in csv.DictReader(f)
        )


def published_for(env_id: str | None) -> dict[str, PublishedAgent]:
    """``algo -> agent`` of the published agents on ``env_id`` (empty for an env the zoo has
    none for)."""
    return {a.algo: a for a in published_agents() if a.env_id == env_id}


def published(algo: str, env_id: str) -> PublishedAgent | None:
    """The published agent of ``algo`` on ``env_id``, if the zoo has one."""
    return published_for(env_id).get(algo)
