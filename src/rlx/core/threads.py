"""The thread count of torch and of numpy's BLAS, chosen deliberately.

On a small machine a second torch thread can make a small training step many times slower
(the threads wait for each other when another process holds a core), so rlx uses one thread
unless told otherwise through ``RLX_NUM_THREADS``. numpy's BLAS gets the same count: PPO's
hand-written gradient multiplies its matrices with numpy (:mod:`rlx.core.manual_grad`), and
OpenBLAS would otherwise start a thread per core for them.
"""

from __future__ import annotations

import os

from rlx.errors import ConfigError

ENV_VAR = "RLX_NUM_THREADS"
DEFAULT_THREADS = 1


def torch_threads() -> int:
    """The thread count from ``RLX_NUM_THREADS`` (default 1)."""
    raw = os.environ.get(ENV_VAR, str(DEFAULT_THREADS))
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"{ENV_VAR}={raw!r} must be a whole number >= 1.")
    return n


def set_torch_threads(n: int | None = None) -> int:
    """Set torch's intra-op thread count and numpy's BLAS threads to ``n`` (default:
    :func:`torch_threads`)."""
    import torch
    from threadpoolctl import threadpool_limits

    n = torch_threads() if n is None else n
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    threadpool_limits(n, user_api="blas")
    return n
