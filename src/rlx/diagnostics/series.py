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


class GrowingSeries:
    """A :class:`Series` that grows as a run logs, read as often as it grows: points are
    appended to arrays of doubling capacity and :meth:`series` hands out views, so reading it
    after each point costs no copy of the history. The series it gives is the one
    :meth:`Series.from_pairs` makes of the same points (sorted by step, ties in the order
    they came)."""

    def __init__(self) -> None:
        self._steps = np.empty(16, dtype=np.float64)
        self._values = np.empty(16, dtype=np.float64)
        self._size = 0
        self._sorted = True

    def __len__(self) -> int:
        return self._size

    def append(self, step: float, value: float) -> None:
        self.extend(np.array([step], dtype=np.float64), np.array([value], dtype=np.float64))

    def extend(self, steps: Any, values: Any) -> None:
        steps = np.asarray(steps, dtype=np.float64).reshape(-1)
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        if steps.shape != values.shape:
            raise ValueError(f"steps {steps.shape} and values {values.shape} differ")
        n, end = len(steps), self._size + len(steps)
        if not n:
            return
        if end > len(self._steps):
            capacity = max(end, 2 * len(self._steps))
            self._steps = _grown(self._steps, self._size, capacity)
            self._values = _grown(self._values, self._size, capacity)
        last = self._steps[self._size - 1] if self._size else -math.inf
        if steps[0] < last or np.any(np.diff(steps) < 0):
            self._sorted = False
        self._steps[self._size : end] = steps
        self._values[self._size : end] = values
        self._size = end

    def series(self) -> Series:
        steps, values = self._steps[: self._size], self._values[: self._size]
        if self._sorted:
            return Series(steps, values)
        order = np.argsort(steps, kind="stable")
        return Series(steps[order], values[order])


def _grown(array: np.ndarray, size: int, capacity: int) -> np.ndarray:
    grown = np.empty(capacity, dtype=array.dtype)
    grown[:size] = array[:size]
    return grown


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
