"""Shared test setup: one torch thread, fixed seeds, runs in temporary folders."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RLX_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
RLX = [sys.executable, "-m", "rlx.cli"]


@pytest.fixture(autouse=True)
def _torch_one_thread():
    import torch

    torch.set_num_threads(1)
    yield
