"""Confidence intervals for the headline figures of a run: the mean return of its evaluation
episodes and the exact-match share of its held-out rows.

A figure from 10 episodes or 20 prompts is a sample, and its summary says how large the
sample was and how far the figure could be from the policy's true value:

- :func:`mean_interval`: Student's t interval of a mean,
  ``x_bar +/- t_{(1+c)/2, n-1} * s / sqrt(n)`` with ``s`` the sample standard deviation
  (``ddof=1``). Episode returns of a fixed policy are independent draws from the episodes'
  start states, and the t interval is the textbook one for their mean; with identical returns
  (``s = 0``, a deterministic policy on a deterministic env) it is the point itself.
- :func:`proportion_interval`: Wilson's score interval of a share of hits,
  ``(p + z^2/2n +/- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``. Unlike the normal (Wald)
  interval it stays inside [0, 1] and does not collapse to a point at 0 or n hits, which is
  where small evaluation sets of a language model usually are.

Both are a few lines over :mod:`scipy.stats` (the quantiles); rliable's bootstrap
(:func:`rlx.diagnostics.stats.bootstrap_ci`) is for statistics over seeds, a layer above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

CONFIDENCE = 0.95
"""The coverage of every headline interval."""


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student's t interval ``(low, high)`` of the mean of ``values``; NaNs with fewer than
    two values (no spread to estimate)."""
    from scipy.stats import t

    n = len(values)
    if n < 2:
        return math.nan, math.nan
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


def proportion_interval(hits: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson's score interval ``(low, high)`` of the share ``hits / n``; NaNs for ``n = 0``."""
    from scipy.stats import norm

    if n <= 0:
        return math.nan, math.nan
    if not 0 <= hits <= n:
        raise ValueError(f"hits={hits} must be between 0 and n={n}")
    z = float(norm.ppf((1 + confidence) / 2))
    p = hits / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - half) / scale), min(1.0, (centre + half) / scale)
