"""Shared test setup: one torch thread, fixed seeds, runs in temporary folders.

Tests that train and assert on learning take their training seed from the ``train_seed``
fixture, so one command reruns all of them on another seed:

    pytest --rlx-seed 1 -m 'not slow and not ray' tests/...

``--training-only`` keeps just those tests (every test whose fixtures reach ``train_seed``), so
the seed and kernel matrix reruns what can change with them and nothing else:

    for s in 0 1 2; do pytest --training-only --rlx-seed $s; \
        ATEN_CPU_CAPABILITY=avx2 pytest --training-only --rlx-seed $s; done

Without ``--rlx-seed`` each such test trains on its own seed (0, the seed every one of them
used before the option existed). The CPU kernel path is chosen by PyTorch from the CPU
(AVX-512 where it has it); ``ATEN_CPU_CAPABILITY=avx2 pytest ...`` runs the AVX2 kernels
instead, whose float rounding differs. A learning test must pass on seeds 0-2 under both.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# One thread for every library, set before any of them loads: numba fixes its pool size when
# the pool first starts and refuses a different NUMBA_NUM_THREADS afterwards, and the
# benchmark scripts the tests import set it to 1 as they load.
for _var in ("OMP_NUM_THREADS", "RLX_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parents[1]
RLX = [sys.executable, "-m", "rlx.cli"]

DEFAULT_TRAIN_SEED = 0
"""The seed of a learning test run without ``--rlx-seed``."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--rlx-seed",
        type=int,
        default=None,
        metavar="N",
        help="train every learning test on seed N (default: each test's own seed, 0)",
    )
    parser.addoption(
        "--training-only",
        action="store_true",
        help="run only the tests that train on the seed of --rlx-seed (the seed matrix)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``--training-only``, deselect every test that does not train on ``train_seed``."""
    if not config.getoption("--training-only"):
        return
    trains = ["train_seed" in getattr(item, "fixturenames", ()) for item in items]
    kept = [item for item, keep in zip(items, trains, strict=True) if keep]
    dropped = [item for item, keep in zip(items, trains, strict=True) if not keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def train_seed(request: pytest.FixtureRequest) -> int:
    """The seed a learning test trains on: ``--rlx-seed N``, else :data:`DEFAULT_TRAIN_SEED`.

    Session-scoped, so module-scoped fixtures that train (shared models) can use it too."""
    seed = request.config.getoption("--rlx-seed")
    return DEFAULT_TRAIN_SEED if seed is None else seed


def pytest_report_header(config: pytest.Config) -> str:
    import torch

    seed = config.getoption("--rlx-seed")
    chosen = "each test's own" if seed is None else seed
    kernels = torch.backends.cpu.get_cpu_capability()
    return f"rlx: training seed {chosen}; torch CPU kernels {kernels}"


@pytest.fixture(autouse=True)
def _torch_one_thread():
    import torch

    torch.set_num_threads(1)
    yield
