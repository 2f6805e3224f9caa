"""Statistics over seeds, as ``rliable`` recommends (Agarwal et al. 2021, "Deep Reinforcement
Learning at the Edge of the Statistical Precipice"): few runs, so report an interval, not a
bare mean, and prefer the interquartile mean to the mean or the median.

Small pure functions of arrays, each tested against hand-worked numbers:

- :func:`iqm`: the interquartile mean, the mean of the middle 50% of the runs;
- :func:`bootstrap_ci`: a percentile bootstrap interval of any statistic over runs, stratified
  when the runs come in several groups (tasks);
- :func:`tukey_fences`: the fences ``Q1 - k IQR`` and ``Q3 + k IQR`` outside which a run is an
  outlier (Tukey's rule, ``k = 1.5``);
- :func:`moving_average`, :func:`align_curves` and :func:`mean_curve`: learning curves of
  several seeds, smoothed, interpolated onto one step grid, and their mean with a bootstrap
  band (the seeds resampled, each keeping its whole curve).

The bootstrap is :func:`scipy.stats.bootstrap` with ``method="percentile"``: rliable's own
choice, and the one that stays defined with five seeds, where the default bias-corrected
(BCa) interval needs a jackknife that degenerates when runs tie.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

CONFIDENCE = 0.95
"""The interval's coverage."""
RESAMPLES = 10_000
"""Bootstrap resamples of a scalar statistic (rliable draws 50,000 for a paper's figures)."""
CURVE_RESAMPLES = 2_000
"""Bootstrap resamples of a curve (one statistic per grid point: kept smaller)."""
CURVE_POINTS = 100
"""Grid points of a curve aligned over seeds."""
TUKEY_K = 1.5
"""Tukey's multiple of the interquartile range for an outlier's fence."""

Statistic = Callable[..., float | np.ndarray]


def iqm(values: ArrayLike, axis: int | None = None) -> float | np.ndarray:
    """The interquartile mean: the mean of the middle 50% of ``values``.

    ``IQM(x) = mean(x_(k+1), ..., x_(n-k))`` over the sorted ``x``, with ``k = floor(n / 4)``
    values cut from each end: :func:`scipy.stats.trim_mean` with ``proportiontocut=0.25``, as
    rliable computes it. Robust to one diverged seed like the median, yet it averages half
    the runs, so its interval is narrower than the median's. ``axis=None`` pools every value.
    """
    from scipy.stats import trim_mean

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("iqm of no values")
    result = trim_mean(data, 0.25, axis=axis)
    return float(result) if np.ndim(result) == 0 else np.asarray(result)


def mean(values: ArrayLike, axis: int | None = None) -> float | np.ndarray:
    """The plain mean, in the shape :func:`bootstrap_ci` calls a statistic."""
    result = np.mean(np.asarray(values, dtype=float), axis=axis)
    return float(result) if np.ndim(result) == 0 else np.asarray(result)


def bootstrap_ci(
    *samples: ArrayLike,
    statistic: Statistic = iqm,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
    axis: int = 0,
) -> tuple[float | np.ndarray, float | np.ndarray]:
    """The percentile bootstrap interval ``(low, high)`` of ``statistic`` over runs.

    Each of ``resamples`` resamples draws the runs with replacement; the statistic of the
    pooled resample gives the bootstrap distribution ``T*``, and the interval is its
    ``(1 - c) / 2`` and ``(1 + c) / 2`` quantiles for ``c = confidence``.

    One sample is the plain bootstrap over its runs (along ``axis``: a seed's whole curve
    stays together when ``samples[0]`` is ``[seed, point]``). Several samples are strata (one
    per task): the stratified bootstrap of rliable resamples the runs of each stratum within
    it, so every resample keeps each stratum's share of the runs. ``statistic(x, axis=...)``
    takes the pooled array (:func:`iqm`, :func:`mean`, or any function of that shape).

    With fewer than two runs in a stratum there is nothing to resample: both ends are NaN.
    """
    from scipy.stats import bootstrap

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    arrays = [np.asarray(sample, dtype=float) for sample in samples]
    if not arrays:
        raise ValueError("bootstrap_ci needs at least one sample")
    if any(array.shape[axis] < 2 for array in arrays):
        shape = np.delete(arrays[0].shape, axis)
        nan = np.full(shape, np.nan) if len(shape) else float("nan")
        return nan, nan

    def pooled(*resampled: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(statistic(np.concatenate(resampled, axis=axis), axis=axis))

    result = bootstrap(
        tuple(arrays),
        pooled,
        n_resamples=resamples,
        vectorized=True,
        axis=axis,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval
    if np.ndim(low) == 0:
        return float(low), float(high)
    return np.asarray(low), np.asarray(high)


def tukey_fences(values: ArrayLike, k: float = TUKEY_K) -> tuple[float, float]:
    """``(Q1 - k IQR, Q3 + k IQR)`` with ``IQR = Q3 - Q1``: a value outside is an outlier by
    Tukey's rule (quartiles by linear interpolation, numpy's default)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("tukey_fences of no values")
    q1, q3 = np.percentile(data, [25, 75])
    spread = q3 - q1
    return float(q1 - k * spread), float(q3 + k * spread)


def moving_average(values: ArrayLike, window: int) -> np.ndarray:
    """The trailing mean of ``window`` values at each point, over the values so far where
    fewer than ``window`` precede it: ``y_i = mean(x_max(0, i-w+1), ..., x_i)``. Same length
    as ``values``."""
    data = np.asarray(values, dtype=float)
    if window <= 1 or data.size == 0:
        return data.copy()
    sums = np.cumsum(np.insert(data, 0, 0.0))
    index = np.arange(1, data.size + 1)
    start = np.maximum(index - window, 0)
    return (sums[index] - sums[start]) / (index - start)


def align_curves(
    curves: Sequence[tuple[ArrayLike, ArrayLike]], points: int = CURVE_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Curves ``(steps, values)`` of several seeds on one step grid: ``(grid, matrix)``.

    The grid is ``points`` evenly spaced steps over the span every curve covers, from the
    latest first step to the earliest last step (no seed is extrapolated), and
    ``matrix[i] = interp(grid, steps_i, values_i)`` (linear between a seed's points). A seed
    whose curve ends before another's starts leaves no common span: ValueError.
    """
    if not curves:
        raise ValueError("align_curves needs at least one curve")
    pairs = []
    for steps, values in curves:
        x, y = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
        keep = np.isfinite(x) & np.isfinite(y)
        x, y = x[keep], y[keep]
        if x.size == 0:
            raise ValueError("a curve has no finite point")
        order = np.argsort(x, kind="stable")
        pairs.append((x[order], y[order]))
    start = max(x[0] for x, _ in pairs)
    end = min(x[-1] for x, _ in pairs)
    if end < start:
        raise ValueError(f"the curves share no span of steps (latest start {start:g}, "
                         f"earliest end {end:g})")  # fmt: skip
    grid = np.linspace(start, end, points) if end > start else np.array([start])
    matrix = np.stack([np.interp(grid, x, y) for x, y in pairs])
    return grid, matrix


@dataclass(frozen=True)
class CurveBand:
    """The mean curve over seeds and its bootstrap band, on one step grid."""

    steps: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    seeds: int
    """how many seeds the mean is over"""
    per_seed: np.ndarray
    """``[seed, point]``: each seed's curve on the grid"""


def mean_curve(
    curves: Sequence[tuple[ArrayLike, ArrayLike]],
    points: int = CURVE_POINTS,
    *,
    confidence: float = CONFIDENCE,
    resamples: int = CURVE_RESAMPLES,
    seed: int = 0,
) -> CurveBand:
    """The mean of several seeds' curves on a common grid (:func:`align_curves`), with the
    ``confidence`` percentile bootstrap band at each step: ``mean_t = (1/n) sum_i y_i(t)``,
    the seeds resampled with replacement, a resampled seed keeping its whole curve. One
    seed: its curve, and a NaN band."""
    grid, matrix = align_curves(curves, points)
    low, high = bootstrap_ci(
        matrix, statistic=mean, confidence=confidence, resamples=resamples, seed=seed, axis=0
    )
    return CurveBand(grid, matrix.mean(axis=0), np.asarray(low), np.asarray(high),
                     len(matrix), matrix)  # fmt: skip


__all__ = [
    "CONFIDENCE",
    "CURVE_POINTS",
    "CURVE_RESAMPLES",
    "RESAMPLES",
    "TUKEY_K",
    "CurveBand",
    "align_curves",
    "bootstrap_ci",
    "iqm",
    "mean",
    "mean_curve",
    "moving_average",
    "tukey_fences",
]
