"""Seeding and random-number-generator state, so runs repeat and resumes continue.

Every source of randomness an agent uses is seeded from one integer and its state can be
saved into a checkpoint (plain numbers, strings and tensors) and restored from it.
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
