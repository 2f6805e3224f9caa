"""Moved to :mod:`rlx.metrics`; this name stays while the tree moves over (one release)."""

from rlx.metrics import *  # noqa: F403
from rlx.metrics import ALL_METRICS, PROGRESS_METRICS  # noqa: F401
