"""A run's logged metrics as time series, whichever library wrote them.

The doctor, the report and the live checks all read a :class:`RunLog`: metric name (rlx's
names, :mod:`rlx.metrics`) -> :class:`Series` of (step, value) pairs.
:func:`rlx.diagnostics.sources.read_run` builds one from an rlx run folder or from another
library's logs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Series:
    """One metric over training: ``steps[i]`` (env steps, optimizer steps, or episodes, as the
    run counts them) and ``values[i]``, float arrays of equal length, steps non-decreasing."""

    steps: np.ndarray
    values: np.ndarray

    def __post_init__(self) -> None:
        if self.steps.shape != self.values.shape:
            raise ValueError(f"steps {self.steps.shape} and values {self.values.shape} differ")

    def __len__(self) -> int:
        return len(self.values)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[float, float]]) -> Series:
        pairs = sorted(pairs, key=lambda p: p[0])
        steps = np.array([p[0] for p in pairs], dtype=np.float64)
        values = np.array([p[1] for p in pairs], dtype=np.float64)
        return cls(steps, values)

    def finite(self) -> Series:
        """The points whose value is a finite number."""
        keep = np.isfinite(self.values)
        return Series(self.steps[keep], self.values[keep])

    def window(self, start: float, end: float) -> Series:
        """The points with ``start <= step <= end``."""
        keep = (self.steps >= start) & (self.steps <= end)
        return Series(self.steps[keep], self.values[keep])

    def last(self, fraction: float) -> Series:
        """The last ``fraction`` of the points (at least one, when there are any)."""
        n = max(1, math.ceil(fraction * len(self))) if len(self) else 0
        return Series(self.steps[-n:], self.values[-n:]) if n else self

    def first(self, fraction: float) -> Series:
        n = max(1, math.ceil(fraction * len(self))) if len(self) else 0
        return Series(self.steps[:n], self.values[:n])


@dataclass
class RunLog:
    """What a run logged. ``kind`` says who wrote it: ``"rlx"``, ``"tensorboard"``, ``"sb3"``
    or ``"trl"``; ``algo`` and ``config`` are known for rlx runs (and guessed elsewhere)."""

    source: Path
    kind: str
    metrics: dict[str, Series] = field(default_factory=dict)
    algo: str | None = None
    env: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Series | None:
        """The series of ``name``, or None when the run did not log it (or logged no point)."""
        series = self.metrics.get(name)
        return series if series is not None and len(series) else None

    @property
    def label(self) -> str:
        parts = [p for p in (self.algo, self.env) if p]
        return f"{' '.join(parts)} ({self.source})" if parts else str(self.source)
