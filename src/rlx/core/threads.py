"""The torch thread count, chosen deliberately.

On a small machine a second torch thread can make a small training step many times slower
(measured here: 45x with another process on one core), so rlx uses one thread unless told
otherwise through ``RLX_NUM_THREADS``.
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
    """Set torch's intra-op thread count to ``n`` (default: :func:`torch_threads`)."""
    import torch

    n = torch_threads() if n is None else n
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
