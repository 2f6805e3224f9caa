"""A run's logged metrics as time series, whichever library wrote them.

The doctor, the report and the live checks all read a :class:`RunLog`: metric name (rlx's
names, :mod:`rlx.diagnostics.metrics`) -> :class:`Series` of (step, value) pairs. An rlx run
folder is read here; TensorBoard event files, Stable-Baselines3's ``progress.csv`` and TRL's
``trainer_state.json`` are read by :mod:`rlx.diagnostics.foreign`, which maps their metric
names onto rlx's.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx.diagnostics import metrics as M
from rlx.errors import RunError

METRICS_FILE = "metrics.jsonl"
EPISODES_FILE = "episodes.csv"
CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"


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


def read_run(path: str | Path) -> RunLog:
    """The :class:`RunLog` of an rlx run folder, or of another library's logs (a TensorBoard
    folder or event file, an SB3 ``progress.csv``, a TRL ``trainer_state.json``, or folders
    holding them)."""
    path = Path(path)
    if not path.exists():
        raise RunError(f"{path} does not exist; give an rlx run folder or another library's logs.")
    if path.is_dir() and (path / METRICS_FILE).exists():
        return read_rlx_run(path)
    from rlx.diagnostics.foreign import read_foreign

    return read_foreign(path)


def read_rlx_run(run_dir: Path) -> RunLog:
    """``metrics.jsonl`` (one JSON object per log step) and ``episodes.csv`` of an rlx run."""
    points: dict[str, list[tuple[float, float]]] = {}
    with (run_dir / METRICS_FILE).open() as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                # a run killed mid-write leaves a torn last line; everything before it counts
                continue
            step = row.get("step")
            if not isinstance(step, (int, float)):
                raise RunError(f"{run_dir / METRICS_FILE}, line {number}: no numeric 'step'.")
            for key, value in row.items():
                if key in ("step", "wall_s") or not isinstance(value, (int, float)):
                    continue
                points.setdefault(key, []).append((float(step), float(value)))
    log = RunLog(run_dir, "rlx", {k: Series.from_pairs(v) for k, v in points.items()})
    log.metrics.update(_episode_series(run_dir / EPISODES_FILE, log.metrics))
    config = _read_json(run_dir / CONFIG_FILE)
    log.algo, log.env = config.get("algo"), config.get("env")
    log.config = config.get("config", {}) or {}
    log.summary = _read_json(run_dir / SUMMARY_FILE)
    return log


def _episode_series(path: Path, have: Mapping[str, Series]) -> dict[str, Series]:
    """Per-episode returns and lengths from ``episodes.csv`` (finer than the logged means)."""
    if not path.exists() or M.EPISODE_RETURN in have:
        return {}
    returns, lengths = [], []
    with path.open() as f:
        for row in csv.DictReader(f):
            try:
                step = float(row["step"])
                returns.append((step, float(row["return"])))
                lengths.append((step, float(row["length"])))
            except (KeyError, TypeError, ValueError):
                continue  # a torn last row
    if not returns:
        return {}
    return {
        M.EPISODE_RETURN: Series.from_pairs(returns),
        M.EPISODE_LENGTH: Series.from_pairs(lengths),
    }


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
