"""Seeding and random-number-generator state, so runs repeat and resumes continue.

Every source of randomness an agent uses is seeded from one integer and its state can be
saved into a checkpoint (plain numbers, strings and tensors) and restored from it.

Parallel runners (env runners, self-play workers) each get a child of one
``numpy.random.SeedSequence`` of the run's seed (:func:`runner_seeds`): no two runners collect
the same episodes, and the same run seed repeats the same data.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python's ``random``, torch's CPU generator, and return a numpy Generator.

    Agents draw from the returned Generator (not numpy's global state), so two agents in one
    process do not disturb each other's streams.
    """
    random.seed(seed)
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """The state of ``rng``, torch's CPU generator and Python's ``random``, for a checkpoint."""
    version, internal, gauss = random.getstate()
    return {
        "numpy": rng.bit_generator.state,
        "torch": torch.get_rng_state(),
        "python": [version, list(internal), gauss],
    }


def set_rng_state(state: dict[str, Any], rng: np.random.Generator) -> None:
    """Restore what :func:`rng_state` saved (``rng`` is restored in place)."""
    rng.bit_generator.state = state["numpy"]
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def seed_root(seed: int, start_step: int = 0) -> np.random.SeedSequence:
    """The seed sequence whose children seed a run's runners. ``start_step`` is the step the
    run (or its resume) starts at: a resumed run draws a fresh family, so it does not replay
    the episodes of the run's start."""
    return np.random.SeedSequence((seed % 2**64, start_step))


def runner_seeds(seed: int, count: int, start_step: int = 0) -> list[np.random.SeedSequence]:
    """The seeds of runners ``0 .. count - 1`` of a run, one independent child each."""
    return seed_root(seed, start_step).spawn(count)


def env_seed(seed_seq: np.random.SeedSequence) -> int:
    """The integer a runner's envs are reset with, from its seed sequence."""
    return int(seed_seq.generate_state(1)[0])
