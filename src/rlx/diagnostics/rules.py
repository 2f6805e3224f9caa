"""The doctor's rules: the troubleshooting table as data.

    Symptom                           Cause                              Fix
    Mean KL past 0.1                  policy drifts far from the old     reduce K_EPOCHS or LR
    Clip fraction near 0              clip never triggers                raise LR or K_EPOCHS
    Clip fraction 0.5 or more         overfit to the rollout             lower LR or K_EPOCHS
    Reward climbs, human eval drops   reward hacking of the RM           stop early, raise beta
    Responses get longer              RM rewards length                  length normalized reward
    Q values too high                 max bias on noisy Q                Double DQN
    DQN diverges                      deadly triad                       keep target net, replay
    Policy stops exploring            entropy collapse                   entropy bonus c_e > 0

plus the RLHF monitor ("watch mean KL: past about 5 to 10, drift or reward hacking starts"),
GRPO groups with no reward spread, a critic that explains nothing, a critic that worked and
broke down, a return that collapses after a plateau, NaN/inf, a return that never moves, a KL
past 1 nat in a single update (a blow-up), DPO's chosen answers losing likelihood, most
sampled completions cut at their token budget (what TRL's users watch as ``clipped_ratio``), and
a return that ends far below rl-baselines3-zoo's published agent (docs: Reference >
Troubleshooting). Each :class:`Rule` names its symptom, the :class:`Check` that tests the
metric series, the cause, the fix, and the config fields that carry the fix (:class:`Fix`),
each with the fix in words that fit it: the first one that fits the run's algorithm and that
its own config can take is the one named (:meth:`Rule.advice`), with its suggested value, so
every algorithm gets a change it can make, in its own terms (no "Double DQN" for SAC, nor for
a DQN that has it on).

Where the doctor has the run itself, the advice converges (:meth:`Rule.advice_for`): a value
fitted to the run (the step a KL calls for, a target entropy the action space can reach),
"train longer" only while the return still climbs, exploration on a sparse reward, and never a
fix this run's lineage already applied for the same finding without it helping. Findings are
reported by how likely their fix is to help (:attr:`Rule.rank`, :func:`finding_order`).

Checks read robust statistics (medians of windows, shares of points), never one noisy point,
and stay silent when a run has too few points to judge: a false alarm costs the user's trust.
The one exception is a blow-up, which is one update by nature and one far beyond any healthy
one (``policy-blowup``, ``non-finite``: ``immediate``, checked on every row while training).
Nor does a rule fire on a quantity the algorithm drives to a target by design (SAC's entropy
at its target entropy). A rule may read a fallback metric where a library logs another one (Q
of the actions taken, ``q_mean``, where ``q_start`` is missing).

Why one module past rlx's 800 lines: it is the troubleshooting table, as data. Each rule's
symptom, check, cause, fixes and fitted values sit beside each other and beside the checks
they share, so a reader looks a symptom up in one place and the docs' troubleshooting page is
generated from one table; split by family, one rule's parts would live in three files.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rlx import metrics as M
from rlx.diagnostics import references
from rlx.diagnostics.series import RunLog, Series

ERROR, WARNING = "error", "warning"
MIN_POINTS = 10
"""A check needs at least this many points of its metric (updates, log steps) to say
anything: a handful of updates is not a trend."""


@dataclass(frozen=True)
class Evidence:
    """What a rule saw: ``metric`` between ``step_start`` and ``step_end``, summarised as
    ``value`` (what ``statistic`` says), against ``threshold``."""

    metric: str
    step_start: float
    step_end: float
    value: float
    threshold: float
    statistic: str

    def describe(self) -> str:
        return (
            f"{self.metric}: {self.statistic} {self.value:.4g} vs threshold {self.threshold:.4g} "
            f"over steps {self.step_start:.0f}-{self.step_end:.0f}"
        )


Check = Callable[[RunLog], "Evidence | None"]


# ============================================================================ checks
def median_of_last(metric: str, threshold: float, *, above: bool, fraction: float = 0.5) -> Check:
    """Fires when the median of the last ``fraction`` of ``metric``'s points is above (or
    below) ``threshold``: a sustained level, not a spike."""
    return _median_of_part(metric, threshold, above, fraction, first=False)


def median_of_first(metric: str, threshold: float, *, fraction: float = 0.5) -> Check:
    """Fires when the median of the first ``fraction`` of ``metric``'s points is above
    ``threshold``: a level sustained over the early run, which a later collapse (a frozen
    policy whose KL is 0) would hide from :func:`median_of_last`."""
    return _median_of_part(metric, threshold, True, fraction, first=True)


def _median_of_part(
    metric: str, threshold: float, above: bool, fraction: float, *, first: bool
) -> Check:
    where = "first" if first else "last"

    def check(log: RunLog) -> Evidence | None:
        series = _finite(log, metric)
        if series is None:
            return None
        part = series.first(fraction) if first else series.last(fraction)
        value = float(np.median(part.values))
        if (value > threshold) if above else (value < threshold):
            word = "above" if above else "below"
            return _evidence(
                metric, part, value, threshold, f"median of the {where} {fraction:.0%} ({word})"
            )
        return None

    return check


def median_overall(metric: str, threshold: float, *, above: bool, skip: float = 0.1) -> Check:
    """The median over the run (after its first ``skip`` share) above or below ``threshold``."""

    def check(log: RunLog) -> Evidence | None:
        series = _finite(log, metric)
        if series is None:
            return None
        body = series.last(1.0 - skip)
        value = float(np.median(body.values))
        if (value > threshold) if above else (value < threshold):
            return _evidence(metric, body, value, threshold, "median")
        return None

    return check


def clip_fraction_near_zero(threshold: float = 0.005, deterministic: float = 0.05) -> Check:
    """The clip fraction's median (after the first tenth) below ``threshold``, unless the
    policy has turned near-deterministic: with an entropy under ``deterministic`` of its
    highest, pi(a|s) is about 1 and so is every ratio, whatever the step size; raising the
    learning rate would be the wrong advice (entropy-collapse names that run)."""
    timid = median_overall(M.CLIP_FRACTION, threshold, above=False)

    def check(log: RunLog) -> Evidence | None:
        evidence = timid(log)
        if evidence is None:
            return None
        entropy = _finite(log, M.ENTROPY)
        if entropy is not None:
            top = float(np.max(entropy.values))
            level = float(np.median(entropy.last(0.9).values))
            if top > 0 and 0 <= level < deterministic * top:
                return None
        return evidence

    return check


def critic_explains_nothing(threshold: float = 0.05) -> Check:
    """Explained variance with median below ``threshold`` while there is something to
    explain: up to the point the return first gets within 10% of its best (or reaches the
    env's solved threshold). Once a task is solved the returns stop varying and the explained
    variance of a good critic falls to 0 or below, which is no fault."""

    def check(log: RunLog) -> Evidence | None:
        series = _finite(log, M.EXPLAINED_VARIANCE)
        if series is None:
            return None
        series = series.window(-np.inf, _learning_phase_end(log)).last(0.9)
        if len(series) < MIN_POINTS:
            return None
        value = float(np.median(series.values))
        if value < threshold:
            return _evidence(
                M.EXPLAINED_VARIANCE, series, value, threshold, "median while learning"
            )
        return None

    return check


def _learning_phase_end(log: RunLog) -> float:
    """The step where the return first reaches the env's solved threshold, or 90% of the way
    from its worst to its best; the last step when the run logged no return."""
    returns = _finite(log, M.EPISODE_RETURN)
    if returns is None:
        return np.inf
    smooth = np.convolve(returns.values, np.ones(5) / 5, mode="valid")
    target = _solved_threshold(log.env)
    if target is None or target > smooth.max():
        target = smooth.min() + 0.9 * (smooth.max() - smooth.min())
    reached = np.flatnonzero(smooth >= target)
    return float(returns.steps[reached[0] + 4]) if len(reached) else np.inf


def any_non_finite(log: RunLog) -> Evidence | None:
    """The first metric with a NaN or infinite value, at its first such step."""
    for name, series in sorted(log.metrics.items()):
        bad = ~np.isfinite(series.values)
        if bad.any():
            i = int(np.argmax(bad))
            step = float(series.steps[i])
            return Evidence(name, step, step, float(series.values[i]), 0.0, "non-finite value")
    return None


def flat_return(log: RunLog) -> Evidence | None:
    """The return never rose above its start: no later tenth of the episodes has a mean above
    the first tenth's by more than noise, three standard errors of a tenth's mean, or 5% of
    the return's scale. The scale is the larger of the return's own spread (its 5th to 95th
    percentile) and, where the env has a solved threshold (Gymnasium's ``reward_threshold``)
    above the start, the distance from the start to it: a return that creeps from -0.0025 to
    -0.0018 on an env solved at 90 has not moved, however small its own noise. Means, not
    medians, so a sparse 0/1 return that starts to succeed counts as learning."""
    series = _finite(log, M.EPISODE_RETURN, min_points=20)
    if series is None:
        return None
    parts = np.array_split(series.values, 10)
    tenths = [float(np.mean(part)) for part in parts]
    gain = max(tenths[1:]) - tenths[0]
    standard_error = float(np.std(series.values)) / np.sqrt(min(len(p) for p in parts))
    scale = _return_scale(log, series, tenths[0])
    tolerance = max(3 * standard_error, 0.05 * scale)
    if gain <= tolerance:
        return _evidence(M.EPISODE_RETURN, series, gain, tolerance, "best tenth's mean gain")
    return None


def stalled_far_below_solved(log: RunLog, band: float = 0.05, far: float = 0.5) -> Evidence | None:
    """The return stopped moving far short of solving the env: the env has a solved threshold,
    the means of the five fifths of the run's second half lie within ``band`` of the distance
    still to go (their highest minus their lowest), and their mean has covered less than
    ``far`` of the way from the first tenth's mean to the threshold. An agent that settled for
    a local optimum (SAC on MountainCarContinuous standing still at a return of about 0 where
    the flag pays 100) has learned something early, so :func:`flat_return` passes it, yet it
    has stopped learning the task."""
    series = _finite(log, M.EPISODE_RETURN, min_points=20)
    solved = _solved_threshold(log.env)
    if series is None or solved is None:
        return None
    start = float(np.mean(series.first(0.1).values))
    second_half = series.last(0.5)
    fifths = [float(np.mean(part)) for part in np.array_split(second_half.values, 5)]
    level = float(np.mean(fifths))
    to_go = solved - level
    if to_go <= 0 or level >= start + far * (solved - start):
        return None
    moved = max(fifths) - min(fifths)
    if moved < band * to_go:
        return _evidence(
            M.EPISODE_RETURN, second_half, moved, band * to_go,
            f"range of the second half's fifths (mean {level:.4g}, solved at {solved:g})",
        )  # fmt: skip
    return None


def _return_scale(log: RunLog, series: Series, start: float) -> float:
    """How large a change of the return matters: its spread, or the distance from ``start``
    to the env's solved threshold when that is larger."""
    scale = _spread(series.values)
    solved = _solved_threshold(log.env)
    if solved is not None and solved > start:
        scale = max(scale, solved - start)
    return scale


def return_plateau_below_best(log: RunLog) -> tuple[bool, float]:
    """Whether the return has stopped improving short of good: its last quarter is no better
    than the quarter before, and below the env's solved threshold (Gymnasium's
    ``reward_threshold``) when there is one, else below the best tenth of the run."""
    series = _finite(log, M.EPISODE_RETURN, min_points=20)
    if series is None:
        return False, float("nan")
    quarters = [float(np.mean(part)) for part in np.array_split(series.values, 4)]
    spread = _spread(series.values)
    stuck = quarters[3] <= quarters[2] + 0.05 * spread
    solved = _solved_threshold(log.env)
    if solved is not None:
        return stuck and quarters[3] < solved, quarters[3]
    best = max(float(np.mean(part)) for part in np.array_split(series.values, 10))
    return stuck and quarters[3] < best - 0.1 * spread, quarters[3]


def overestimation(margin: float = 0.2, closing: float = 0.0) -> Check:
    """Q above the discounted returns actually observed, and not coming down to them: the max
    operator's bias, as opposed to a critic still learning.

    The test, over the points where the run logged both ``q_start`` (Q(s_0, a_0) at each
    finished episode's start, read when the action was taken; where a run logs no
    ``q_start``, ``q_mean``, Q of the actions taken) and ``mc_return`` (the discounted return
    that followed), at least :data:`MIN_POINTS` of them:

    1. **above**: the gap ``median(Q) - median(G)`` over the last half exceeds
       ``margin * median |G| + noise + tail + soft``, where ``median |G|`` over the run is
       the return's scale; ``noise`` is twice the standard error of the gap's mean over the
       last half, ``2 sigma / sqrt(n)`` with the point-to-point noise ``sigma =
       std(diff(gap)) / sqrt(2)`` (each logged G is a mean of a few noisy episodes; a trend is
       no noise); ``tail``, where episodes end at the env's time limit ``T`` (the median
       ``episode_length`` of the last half within 5% of Gymnasium's ``max_episode_steps``), is
       ``gamma**T * max |Q|``, the most a truncated episode leaves unobserved of what Q
       counts; and ``soft``, for a soft Q that counts an entropy bonus still to come (SAC:
       ``alpha`` and ``entropy`` logged), ``max(0, alpha * entropy) * gamma / (1 - gamma)``,
       medians of the last half (``gamma`` from the run's config, 0.99 when unknown);
    2. **not converging from its start**: over the last half, Q's least-squares line does
       not fall towards the returns (by more than twice the standard error of that fall, and
       by more than ``closing`` of its starting value: Q is the network's smooth estimate, the
       returns are noisy Monte Carlo samples); or, falling or not, the gap rose at some point
       above the gap the critic started with by more than the threshold of 1 (the highest
       median of a tenth of the points against the first tenth's). A critic that starts
       above the returns (a network initialised near 0 on an env whose rewards are negative,
       such as Acrobot's -1 per step) only closes the gap as it learns, however slowly; a
       biased one holds it, widens it, or climbed above the returns before it came down (a Q
       that ran far above the returns is no critic still learning because it is now falling).
    """

    def check(log: RunLog) -> Evidence | None:
        q_name = M.Q_START if log.get(M.Q_START) is not None else M.Q_MEAN
        q, g = _finite(log, q_name), _finite(log, M.MC_RETURN)
        if q is None or g is None:
            return None
        steps = np.intersect1d(q.steps, g.steps)
        if len(steps) < MIN_POINTS:
            return None
        q_on, g_on = _at_steps(q, steps), _at_steps(g, steps)
        gap = Series(steps, q_on - g_on)
        last_half = gap.last(0.5)
        q_half, g_half = Series(steps, q_on).last(0.5), Series(steps, g_on).last(0.5)
        level = float(np.median(q_half.values) - np.median(g_half.values))
        scale = float(np.median(np.abs(g_on)))
        sigma = float(np.std(np.diff(last_half.values))) / np.sqrt(2)
        noise = 2 * sigma / np.sqrt(len(last_half))
        gamma = _number(log.config.get("gamma"), 0.99)
        threshold = (
            margin * scale + noise + _unobserved_tail(log, q_half, gamma) + _soft_bonus(log, gamma)
        )
        if not level > threshold:
            return None
        tenth = max(3, len(gap) // 10)
        start, peak = (
            float(np.median(gap.values[:tenth])),
            float(np.max(_rolling_median(gap.values, tenth))),
        )
        if _falls(q_half, closing) and peak <= start + threshold:
            return None  # Q is coming down from its start to the returns: a critic learning
        return _evidence(q_name, last_half, level, threshold, "median Q - observed return")

    return check


def _falls(series: Series, share: float) -> bool:
    """Whether ``series``' least-squares line falls, from its first step to its last, by more
    than ``share`` of its starting value's magnitude and by more than twice that fall's
    standard error."""
    x, y = series.steps - series.steps[0], series.values
    if len(x) < 3 or np.ptp(x) == 0:
        return False
    slope, intercept = np.polyfit(x, y, 1)
    residuals = y - (slope * x + intercept)
    slope_error = np.sqrt(np.sum(residuals**2) / (len(x) - 2) / np.sum((x - x.mean()) ** 2))
    fall, error = -slope * x[-1], slope_error * x[-1]
    rounding = 1e-9 * (abs(intercept) + 1)  # a constant's fitted slope is 0 up to rounding
    return bool(fall > max(share * abs(intercept), 2 * error, rounding))


def _at_steps(series: Series, steps: np.ndarray) -> np.ndarray:
    """``series``' values at ``steps`` (each one of its steps; the first point of a step)."""
    return series.values[np.searchsorted(series.steps, steps)]


def _unobserved_tail(log: RunLog, q: Series, gamma: float) -> float:
    """``gamma**T * max |Q|``: what Q counts beyond the env's time limit ``T``, where episodes
    end there (their median length in the last half within 5% of it); 0 where they end
    otherwise or the limit is unknown."""
    lengths = _finite(log, M.EPISODE_LENGTH, min_points=1)
    limit = _time_limit(log.env)
    if lengths is None or limit is None:
        return 0.0
    if float(np.median(lengths.last(0.5).values)) < 0.95 * limit:
        return 0.0
    return float(gamma**limit * np.max(np.abs(q.values)))


def _soft_bonus(log: RunLog, gamma: float) -> float:
    """``max(0, alpha * entropy) * gamma / (1 - gamma)``: the entropy bonus still to come that a
    soft Q value counts (0 where the run logs no temperature ``alpha``)."""
    alpha, entropy = log.get(M.ALPHA), log.get(M.ENTROPY)
    if alpha is None or entropy is None or gamma >= 1:
        return 0.0
    a = float(np.median(alpha.finite().last(0.5).values))
    h = float(np.median(entropy.finite().last(0.5).values))
    return max(0.0, a * h) * gamma / (1 - gamma)


def performance_collapse(near: float = 0.1, fall: float = 0.5, window: float = 0.05) -> Check:
    """After reaching a plateau, the return fell by more than ``fall`` of what it had gained,
    for a window.

    With ``w`` = ``window`` of the points (at least 5) and ``m`` the return's mean over each
    ``w`` consecutive points: ``start`` is the first such mean and ``best`` the running
    highest. A plateau is reached where ``w`` windows in a row all lie within ``near`` of the
    gain ``best - start`` from the ``best`` at the last of them (a level held, not one lucky
    window nor a climb), with a gain above nine standard errors of a window's mean (the
    point-to-point noise ``std(diff(returns)) / sqrt(2)`` over ``sqrt(w)``): losing half of it
    is then more than the noise of the lowest of the run's many windows (a noisy return has no
    plateau to fall from, DQN's on Acrobot dips by half its gain and climbs on). A
    collapse is a later window whose mean is below ``start + (1 - fall) * (plateau - start)``,
    ``plateau`` the highest such level reached before it. The
    evidence covers the collapsed stretch: from the first such window's first point to where
    the mean climbs back above that line (or the end). A run that recovers, even to a higher
    level, still collapsed: its final return hides what happened."""

    def check(log: RunLog) -> Evidence | None:
        series = _finite(log, M.EPISODE_RETURN, min_points=20)
        if series is None:
            return None
        w = max(5, round(window * len(series)))
        means = _rolling_mean(series.values, w)
        if len(means) < 2 * w:
            return None
        start = float(means[0])
        best = np.maximum.accumulate(means)
        sigma = float(np.std(np.diff(series.values))) / np.sqrt(2)  # point to point: no trend
        noise = 9 * sigma / np.sqrt(w)
        plateau = -np.inf
        for i, mean in enumerate(means):
            gain = float(best[i]) - start
            if (
                i >= w - 1
                and gain > noise
                and means[i - w + 1 : i + 1].min() >= best[i] - near * gain
            ):
                plateau = max(plateau, float(best[i]))
            line = start + (1 - fall) * (plateau - start)
            if mean >= line:
                continue
            back = np.flatnonzero(means[i:] >= line)
            last = i + int(back[0]) - 1 if len(back) else len(means) - 1
            low = float(np.min(means[i : last + 1]))
            stretch = Series(series.steps[i : last + w], series.values[i : last + w])
            return _evidence(
                M.EPISODE_RETURN, stretch, (plateau - low) / (plateau - start), fall,
                f"share of the gain lost (windows of {w} points: plateau {plateau:.4g}, "
                f"low {low:.4g}, start {start:.4g})",
            )  # fmt: skip
        return None

    return check


def value_breakdown(
    good: float = 0.5,
    bad: float = 0.0,
    window: float = 0.02,
    held: float = 0.1,
    error: float = 0.1,
) -> Check:
    """Explained variance from above ``good`` to below ``bad``, for a window, after a critic that
    worked, with an error of the size it had while it learned.

    With ``w`` = ``window`` of the points (at least 5) and ``m`` the explained variance's
    median over each ``w`` consecutive points:

    1. **a critic that worked**: ``m`` above ``good`` for ``held`` of the points in a row;
    2. **then broke**: a later window, not overlapping the last good one, with ``m`` below
       ``bad``;
    3. **with an error that matters**: that window's median ``value_loss`` is at least
       ``error`` times the largest median value loss of the good windows. Once a task is
       solved the returns barely vary, so the explained variance of a good critic swings far
       below 0 while its error shrinks to almost nothing (CartPole at 500: value loss about
       1e-6, against about 1 while it learned): no breakdown, and the value loss tells the two
       apart. A run that logs no ``value_loss`` gets no finding.
    """

    def check(log: RunLog) -> Evidence | None:
        series = _finite(log, M.EXPLAINED_VARIANCE)
        losses = _finite(log, M.VALUE_LOSS)
        if series is None or losses is None:
            return None
        w = max(5, round(window * len(series)))
        run_needed = max(w, round(held * len(series)))
        if len(series) < run_needed + 2 * w:
            return None
        medians = _rolling_median(series.values, w)
        levels = np.array([_median_in(losses, series.steps[i], series.steps[i + w - 1])
                           for i in range(len(medians))])  # fmt: skip
        in_a_row, worked, last_good, largest = 0, False, -1, -np.inf
        for i, value in enumerate(medians):
            if value > good:
                in_a_row += 1
                last_good = i
                if np.isfinite(levels[i]):
                    largest = max(largest, float(levels[i]))
                worked = worked or in_a_row >= run_needed
                continue
            in_a_row = 0
            if worked and value < bad and i >= last_good + w and levels[i] >= error * largest:
                part = Series(series.steps[i : i + w], series.values[i : i + w])
                return _evidence(
                    M.EXPLAINED_VARIANCE, part, float(value), bad,
                    f"median of {w} points, value loss {levels[i]:.3g} (at most {largest:.3g} "
                    f"while above {good:g})",
                )  # fmt: skip
        return None

    return check


def _median_in(series: Series, start: float, end: float) -> float:
    """The median of ``series`` between two steps (NaN when it has no point there)."""
    part = series.window(float(start), float(end)).values
    return float(np.median(part)) if len(part) else float("nan")


def _rolling_mean(values: np.ndarray, w: int) -> np.ndarray:
    """The mean of each ``w`` consecutive values (``len - w + 1`` of them)."""
    sums = np.cumsum(np.insert(values.astype(float), 0, 0.0))
    return (sums[w:] - sums[:-w]) / w


def _rolling_median(values: np.ndarray, w: int) -> np.ndarray:
    """The median of each ``w`` consecutive values (``len - w + 1`` of them)."""
    return np.median(np.lib.stride_tricks.sliding_window_view(values, w), axis=1)


def diverging(metric: str, factor: float = 100.0) -> Check:
    """``metric``'s magnitude in the last fifth is ``factor`` times its calmest fifth and still
    rising: values running away, not settling."""

    def check(log: RunLog) -> Evidence | None:
        series = _finite(log, metric, min_points=10)
        if series is None:
            return None
        values = np.abs(series.values)
        fifths = np.array_split(values, 5)
        calm = max(min(float(np.median(part)) for part in fifths), 1e-8)
        tail = series.last(0.2)
        level = float(np.median(np.abs(tail.values)))
        rising = (
            np.polyfit(np.arange(len(tail)), np.abs(tail.values), 1)[0] > 0
            if len(tail) > 2
            else True
        )
        if level > factor * calm and rising:
            return _evidence(metric, tail, level / calm, factor, "growth over the calmest fifth")
        return None

    return check


def beyond_returns(metric: str, factor: float = 10.0) -> Check:
    """``metric`` (a Q value) past ``factor`` times the largest discounted return actually
    observed (``mc_return``), over a tenth of its points: values no return can justify, even
    where they came back down since (a Q that ran from 0 to 1e5 against returns of 80 and
    fell to 7e3)."""

    def check(log: RunLog) -> Evidence | None:
        q, g = _finite(log, metric), _finite(log, M.MC_RETURN)
        if q is None or g is None:
            return None
        bound = factor * max(float(np.max(np.abs(g.values))), 1e-8)
        w = max(3, len(q) // 10)
        medians = _rolling_median(np.abs(q.values), w)
        worst = int(np.argmax(medians))
        if medians[worst] > bound:
            part = Series(q.steps[worst : worst + w], q.values[worst : worst + w])
            statistic = f"median |Q| of {w} points vs {factor:g}x the largest |return|"
            return _evidence(metric, part, float(medians[worst]), bound, statistic)
        return None

    return check


def entropy_collapse(share: float = 0.3, gone: float = 0.01) -> Check:
    """Entropy below ``share`` of its starting value while the return is stuck short of good:
    the policy stopped exploring before it stopped being bad. (A solved task may end nearly
    deterministic; that is not a collapse, so the return must be stuck too.) An entropy all
    but gone (below ``gone`` of its highest) while the return is still under the env's solved
    threshold is a collapse even while the return creeps up: a deterministic policy that
    improves only through its rare updates that move at all.

    Never on an entropy the algorithm drives to a target by design: SAC with a tuned
    temperature (``autotune``) holds its entropy at ``target_entropy`` (``-dim(A)`` when None),
    so an entropy at that target, or above it, or below it by less than
    :data:`TARGET_ENTROPY_BAND` nats per action dimension, is the run doing what it was told
    (:func:`sac_entropy_target`). Where that target cannot be known (no ``target_entropy`` and
    an env whose action space rlx cannot read), the rule says nothing about such a run."""

    def check(log: RunLog) -> Evidence | None:
        entropy = _finite(log, M.ENTROPY, min_points=10)
        if entropy is None:
            return None
        start = float(np.median(entropy.first(0.1).values))
        tail = entropy.last(0.25)
        level = float(np.median(tail.values))
        if start <= 0 or level > share * start:
            return None
        if tunes_entropy(log):
            target = sac_entropy_target(log)
            if target is None:
                return None
            dim = action_dim(log.env) or 1
            if level >= target - TARGET_ENTROPY_BAND * dim:
                return None
        stuck, recent = return_plateau_below_best(log)
        solved = _solved_threshold(log.env)
        top = float(np.max(entropy.values))
        frozen = level < gone * top and solved is not None and recent < solved
        if stuck or frozen:
            return _evidence(M.ENTROPY, tail, level, share * start, "median of the last 25%")
        return None

    return check


TARGET_ENTROPY_BAND = 0.25
"""Nats per action dimension below SAC's target entropy that still count as "at the target":
the temperature's controller holds the batch entropy near the target, not on it (a quarter of
a nat per dimension is e^-0.25, about 78%, of each dimension's spread)."""
TARGET_ENTROPY_ROOM = 0.2
"""Nats per action dimension kept below the largest entropy a SAC policy can have (ln 2 per
dimension, :func:`max_squashed_entropy`) when the doctor raises its target: a target there
asks for a policy that is uniform on its box, which acts at random and can never exploit (a
tanh-squashed Gaussian reaches at most about 0.68 of ln 2's 0.69)."""
TARGET_ENTROPY_NEAR = 0.1
"""Nats per action dimension: a target this close to the highest one the doctor suggests is
already there, and raising it is no fix worth a run."""


def tunes_entropy(log: RunLog) -> bool:
    """Whether the run is SAC tuning its temperature toward a target entropy (``autotune``,
    rlx's default and SB3's ``ent_coef='auto'``: on unless the config says False)."""
    return log.algo in SAC and log.config.get("autotune", True) is not False


def sac_entropy_target(log: RunLog) -> float | None:
    """The entropy SAC's temperature drives the policy to: the config's ``target_entropy``, or
    ``-dim(A)`` when None (the action space's size read from the env id); None when neither
    is known."""
    target = _number_field(log.config, "target_entropy")
    if target is not None:
        return target
    dim = action_dim(log.env)
    return None if dim is None else -float(dim)


def max_squashed_entropy(dim: int) -> float:
    """``dim * ln 2``: the largest entropy of a distribution on ``[-1, 1]^dim``, the uniform's.
    SAC's logged ``entropy`` is ``-E[log pi(a|s)]`` of the tanh-squashed action ``a`` in
    ``[-1, 1]^dim`` (the log-density carries the tanh's Jacobian, :func:`rlx.core.continuous.
    squashed_gaussian_sample`; the action is scaled to the env's box only afterwards), so no
    target above this can be reached."""
    return dim * float(np.log(2.0))


def raised_target_entropy(current: float | None, dim: int) -> float | None:
    """SAC's target entropy raised by one nat per action dimension (from the default
    ``-dim``: 0), capped at :func:`max_squashed_entropy` less :data:`TARGET_ENTROPY_ROOM` per
    dimension and rounded down to 0.01; None when the target is already within
    :data:`TARGET_ENTROPY_NEAR` per dimension of that cap (no feasible raise is left).

    dim 1: None -> 0.0, 0.0 -> 0.49 (cap ln 2 - 0.2 = 0.493), 0.4 -> None;
    dim 3: None -> 0.0, 0.0 -> 1.47 (cap 3 (ln 2 - 0.2) = 1.479), 1.2 -> None."""
    cap = dim * (float(np.log(2.0)) - TARGET_ENTROPY_ROOM)
    base = -float(dim) if current is None else float(current)
    if base >= cap - TARGET_ENTROPY_NEAR * dim:
        return None
    return float(np.floor(min(base + dim, cap) * 100 + 1e-9) / 100)


@functools.lru_cache(maxsize=64)
def action_space(env_id: str | None) -> tuple[str, int] | None:
    """``(kind, size)`` of a Gymnasium env's action space: ``("box", dim(A))`` or
    ``("discrete", n)``; None for an env rlx does not build here (not one of Gymnasium's own
    envs, an extra that is not installed). Building one of Gymnasium's own envs costs a
    millisecond (a Box2D one a tenth of a second), once per env id."""
    if not env_id:
        return None
    try:
        import gymnasium

        spec = gymnasium.spec(env_id)
        entry = spec.entry_point
        if not isinstance(entry, str) or not entry.startswith("gymnasium.envs."):
            return None  # another package's env: its code is not run to read a size
        env = gymnasium.make(env_id)
        try:
            space = env.action_space
        finally:
            env.close()
    except Exception:  # not a Gymnasium id, or its extra (Box2D, MuJoCo) is not installed
        return None
    if isinstance(space, gymnasium.spaces.Box):
        return "box", int(np.prod(space.shape))
    if isinstance(space, gymnasium.spaces.Discrete):
        return "discrete", int(space.n)
    return None


def action_dim(env_id: str | None) -> int | None:
    """``dim(A)`` of a Gymnasium env with Box actions (None otherwise)."""
    space = action_space(env_id)
    return space[1] if space is not None and space[0] == "box" else None


BLOWUP_KL = 1.0
"""A mean KL (old to new policy) above 1 nat in one update is a blow-up: PPO's usual
``target_kl`` is 0.01 to 0.02 (Stable-Baselines3's zoo, OpenAI Baselines, Spinning Up's 0.01),
the table's sustained alarm is 0.1, and 1 nat is 50 to 100 times the target, a policy whose
action probabilities moved by a factor of e on average."""
BLOWUP_CLIP = 0.9
"""A clip fraction of 0.9 or more in one update: nearly every sample's ratio left ``[1 - eps,
1 + eps]``, the policy left the trust region entirely (healthy updates clip 0.05 to 0.3)."""
KL_TARGET = 0.02
"""The KL per update a lowered step size aims at (the top of the usual ``target_kl``)."""


def policy_blowup(kl_limit: float = BLOWUP_KL, clip_limit: float = BLOWUP_CLIP) -> Check:
    """The first single update whose ``approx_kl`` is above ``kl_limit`` (:data:`BLOWUP_KL`);
    where the run logs no KL (another library's logs), the first whose ``clip_fraction`` is at
    least ``clip_limit`` (:data:`BLOWUP_CLIP`) with a clip range of 0.1 or more. The KL is the
    direct measure: a high clip fraction under a KL below 1 nat is an update that overfits its
    rollout (``clip-fraction-high``), and a clip range far below 0.1 clips most ratios of a
    healthy update. The evidence is that one row.

    One row is enough: no median, since the blow-up is a single update (a huge KL in the
    first, then a frozen policy whose KL is 0, hides from every median). The test is one
    vectorised comparison over one series, as cheap as the NaN scan the live doctor runs on
    every row; the live doctor checks it on every logged row (``immediate``)."""

    def check(log: RunLog) -> Evidence | None:
        series = log.get(M.APPROX_KL)
        metric, limit = M.APPROX_KL, kl_limit
        if series is None:
            series = log.get(M.CLIP_FRACTION)
            metric, limit = M.CLIP_FRACTION, clip_limit
            if series is None or _number(log.config.get("clip_eps"), 0.2) < 0.1:
                return None
        over = series.values > limit if metric == M.APPROX_KL else series.values >= limit
        hits = np.flatnonzero(over)
        if not len(hits):
            return None
        i = int(hits[0])
        step, value = float(series.steps[i]), float(series.values[i])
        word = "KL" if metric == M.APPROX_KL else "clip fraction"
        return Evidence(metric, step, step, value, limit, f"{word} of one update")

    return check


def likelihood_displacement(nats: float = 1.0, accuracy: float = 0.8) -> Check:
    """DPO's chosen answers losing likelihood while the pairs are separated: the median of the
    last quarter of ``chosen_reward`` (``beta (log pi(y+|x) - log pi_ref(y+|x))``) is below
    ``-nats * beta`` (the chosen answers at least e^``nats`` times less likely than under the
    reference), its least-squares line over the last half still falls by more than twice its
    standard error, and the median ``pair_accuracy`` of the last quarter is at least
    ``accuracy``. The loss is being won by pushing both answers of a pair down, the rejected
    faster (Razin et al. 2024, "likelihood displacement"; Pal et al. 2024): held-out greedy
    answers then drift away from the chosen ones. ``beta`` is the config's (0.1, DPO's and
    TRL's default, where unknown)."""

    def check(log: RunLog) -> Evidence | None:
        chosen, pairs = _finite(log, M.CHOSEN_REWARD), _finite(log, M.PAIR_ACCURACY)
        if chosen is None or pairs is None:
            return None
        beta = _number(log.config.get("beta"), 0.1)
        beta = beta if beta > 0 else 0.1
        level = float(np.median(chosen.last(0.25).values))
        if level >= -nats * beta:
            return None
        half = chosen.last(0.5)
        change, error = _line_change(half)
        separated = float(np.median(pairs.last(0.25).values))
        if change < -2 * error and separated >= accuracy:
            return _evidence(
                M.CHOSEN_REWARD, half, level, -nats * beta,
                f"median of the last 25% ({level / beta:.3g} nats of log pi/pi_ref on the "
                f"chosen answers), still falling while pair accuracy is {separated:.2f}",
            )  # fmt: skip
        return None

    return check


def _line_change(series: Series) -> tuple[float, float]:
    """How much ``series``' least-squares line rises from its first step to its last, and that
    rise's standard error (0 and infinity where fewer than 3 points or one step)."""
    x, y = series.steps - series.steps[0], series.values
    if len(x) < 3 or np.ptp(x) == 0:
        return 0.0, float("inf")
    slope, intercept = np.polyfit(x, y, 1)
    residuals = y - (slope * x + intercept)
    slope_error = np.sqrt(np.sum(residuals**2) / (len(x) - 2) / np.sum((x - x.mean()) ** 2))
    return float(slope * x[-1]), float(slope_error * x[-1])


def still_climbing(log: RunLog, part: float = 0.3, share: float = 0.05) -> bool:
    """Whether the return still climbs at the end of the run: the least-squares line over the
    last ``part`` of its points rises by more than twice its standard error and by more than
    ``share`` of the return's scale (:func:`_return_scale`). Only then is "train longer"
    advice: a return flat over the last third will be flat over a run twice as long."""
    series = _finite(log, M.EPISODE_RETURN, min_points=20)
    if series is None:
        return False
    rise, error = _line_change(series.last(part))
    start = float(np.mean(series.first(0.1).values))
    return rise > max(2 * error, share * _return_scale(log, series, start))


SPARSE_REWARD_ENVS = frozenset({"MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1",
                                "FrozenLake-v1", "FrozenLake8x8-v1"})  # fmt: skip
"""Gymnasium envs whose reward says nothing until a goal is reached (a constant -1 per step, an
action cost, 0 until the goal): a random policy rarely sees the goal, so the return sits on its
floor until exploration finds it."""


def sparse_reward(log: RunLog) -> bool:
    """Whether the run's reward is sparse: an env of :data:`SPARSE_REWARD_ENVS`, or a return
    that sat on its floor (:func:`at_floor`): every episode the same constant, the reward never
    said anything."""
    if log.env in SPARSE_REWARD_ENVS:
        return True
    returns = _finite(log, M.EPISODE_RETURN)
    return returns is not None and at_floor(returns.values)


def at_floor(values: np.ndarray, share: float = 0.9) -> bool:
    """Whether ``share`` of the returns equal their lowest (within rounding): the episodes all
    ended with the one return the env gives when nothing is reached (-200 on MountainCar)."""
    low = float(np.min(values))
    return float(np.mean(values <= low + 1e-6 * max(1.0, abs(low)))) >= share


FAR_BELOW_SIGMAS = 3.0
"""A final return below the published agent's mean by more than this many of its episodes'
standard deviations is outside what that agent's own episodes scatter over."""
FAR_BELOW_SHARE = 0.2
"""... and the gap must be more than this share of the way from the run's start to the
published mean: a run that covered four fifths of the way is close, whatever the agent's
spread (CartPole's published agents score 500 with a spread of 0)."""
ZOO_ALGOS = frozenset({"a2c", "ppo", "dqn", "sac", "td3"})
"""The algorithms rl-baselines3-zoo publishes agents and presets for (:mod:`rlx.launch.zoo`)."""


def below_published(log: RunLog) -> Evidence | None:
    """The run ended far below what rl-baselines3-zoo's published agent reached on its env
    with its algorithm, in no more env steps than the run trained.

    The published agent (:func:`rlx.launch.zoo_agents.published`) has a mean ``mu`` and a
    standard deviation ``sd`` of its evaluation returns and the steps ``n`` it trained; it
    counts when the run trained at least ``n`` steps (``summary.json``'s ``steps``, else the
    last step with a return). With the algorithm unknown (another library's logs), the lowest
    mean any published algorithm reached within the run's steps. The run's final return is the
    final evaluation's mean (its 95% interval's top where the summary has it), else the mean of
    the last tenth of the training returns (plus two standard errors). It fires when that top
    is below ``mu - 3 sd`` (:data:`FAR_BELOW_SIGMAS`) and the gap ``mu - final`` is more than
    :data:`FAR_BELOW_SHARE` of ``mu - start`` (``start``: the first tenth's mean return, or the
    final return where that is lower)."""
    returns = _finite(log, M.EPISODE_RETURN, min_points=20)
    if returns is None or not log.env:
        return None
    steps = _number(log.summary.get("steps"), float(returns.steps[-1]))
    agent = published_reference(log.algo, log.env, steps)
    if agent is None:
        return None
    final = _number(log.summary.get(M.EVAL_RETURN_MEAN), float("nan"))
    if np.isfinite(final):
        top = _number(log.summary.get(M.EVAL_RETURN_HIGH), final)
        part, source = returns.last(0.1), "final evaluation's mean"
    else:
        part = returns.last(0.1)
        final = float(np.mean(part.values))
        spread = float(np.std(part.values)) / np.sqrt(len(part)) if len(part) > 1 else 0.0
        top, source = final + 2 * spread, "last tenth's mean return"
    start = min(float(np.mean(returns.first(0.1).values)), final)
    line = agent.mean_reward - FAR_BELOW_SIGMAS * agent.std_reward
    gap = agent.mean_reward - final
    if top < line and gap > FAR_BELOW_SHARE * (agent.mean_reward - start):
        return _evidence(
            M.EPISODE_RETURN, part, final, line,
            f"{source} vs rl-baselines3-zoo's published {agent.algo} agent on {agent.env_id} "
            f"({agent.mean_reward:.4g} +- {agent.std_reward:.3g} after {agent.n_timesteps} "
            f"steps; this run trained {steps:.0f})",
        )  # fmt: skip
    return None


def published_reference(algo: str | None, env_id: str, steps: float) -> Any:
    """The published agent a run of ``algo`` on ``env_id`` that trained ``steps`` is held to:
    ``algo``'s when the zoo has one that trained no more steps; with ``algo`` unknown, the one
    with the lowest mean among those that trained no more steps; else None. (From the
    references the work in progress installed: :mod:`rlx.diagnostics.references`.)"""
    if algo is not None and algo not in ZOO_ALGOS:
        return None
    agents = references.current().published(env_id)
    candidates = [a for name, a in agents.items() if algo is None or name == algo]
    candidates = [a for a in candidates if a.n_timesteps <= steps]
    return min(candidates, key=lambda a: a.mean_reward) if candidates else None


def climbs_while_drops(rising: str, falling: str, drop: float = 0.1, noise: float = 2.0) -> Check:
    """``rising`` keeps climbing while ``falling`` (the gold or held-out measure) has dropped
    from its best level by more than ``drop`` of its range and by more than ``noise`` times
    its step-to-step noise: the proxy is being gamed.

    The best level is the mean of the points around the best one (3, or a tenth of the run),
    and the noise is ``std(diff(values)) / sqrt(2)``, so one lucky evaluation (1 of 16
    prompts right, then 0) is no finding."""

    def check(log: RunLog) -> Evidence | None:
        up, down = _finite(log, rising), _finite(log, falling)
        if up is None or down is None:
            return None
        values = down.values
        best = int(np.argmax(values))
        width = max(3, len(values) // 10)
        start = min(max(0, best - width // 2), len(values) - width)
        level = float(np.mean(values[start : start + width]))
        after = values[best:]
        fall = level - float(np.median(after[-max(1, len(after) // 4) :]))
        span = float(np.ptp(values)) + 1e-8
        sigma = float(np.std(np.diff(values))) / np.sqrt(2)
        threshold = float(max(drop * span, noise * sigma))
        up_after = up.window(float(down.steps[best]), float(up.steps[-1]))
        climbed = len(up_after) >= 2 and float(up_after.values[-1]) > float(up_after.values[0])
        if fall > threshold and climbed and best < len(down) - 1:
            tail = down.window(float(down.steps[best]), float(down.steps[-1]))
            return _evidence(
                falling, tail, fall, threshold, f"drop from its best while {rising} climbs"
            )
        return None

    return check


def grows_with(metric: str, driver: str, growth: float = 0.5, correlation: float = 0.8) -> Check:
    """``metric`` grows by more than ``growth`` (relative) and tracks ``driver`` (Spearman
    correlation above ``correlation``): e.g. responses lengthen as the reward rises."""

    def check(log: RunLog) -> Evidence | None:
        a, b = _finite(log, metric), _finite(log, driver)
        if a is None or b is None:
            return None
        b_on_a = np.interp(a.steps, b.steps, b.values)
        start = float(np.median(a.first(0.2).values))
        end = float(np.median(a.last(0.2).values))
        rel = (end - start) / max(abs(start), 1e-8)
        rho = _spearman(a.values, b_on_a)
        if rel > growth and rho > correlation:
            return _evidence(
                metric, a, rel, growth, f"relative growth (Spearman {rho:.2f} with {driver})"
            )
        return None

    return check


MIN_GROWTH_POINTS = 5
"""Logged steps of a growth that :func:`paid_for_length` needs to read a correlation over it
(fewer: the whole run's)."""


def paid_for_length(length: str, correlation: str, growth: float = 0.1, paid: float = 0.3) -> Check:
    """``length`` (of the responses) has grown by more than ``growth`` (relative: the median
    of the last 20% against that of the first 10%, where such growth happens) while the
    reward model's score correlated with length within the steps: the median of
    ``correlation`` (Pearson, per step) above ``paid`` over the steps of the growth (up to the
    first step whose length came within a tenth of the growth of its end level). A direct
    reading of "the reward model rewards length", where the trend alone (:func:`grows_with`)
    needs much more growth. Only the growth counts because once the lengths settle (at the
    cap, or where longer answers stop paying) their spread within a step is small and the
    correlation is noise around 0, which would hide the payment that drove the growth."""

    def check(log: RunLog) -> Evidence | None:
        lengths, corr = _finite(log, length), _finite(log, correlation)
        if lengths is None or corr is None:
            return None
        values = lengths.values
        start = float(np.median(values[: max(1, len(values) // 10)]))
        end = float(np.median(values[-max(1, len(values) // 5) :]))
        rel = (end - start) / max(abs(start), 1e-8)
        if rel <= growth:
            return None
        reached = np.flatnonzero(values >= start + 0.9 * (end - start))
        growing = corr
        if len(reached):
            during = corr.steps <= lengths.steps[reached[0]]
            if during.sum() >= MIN_GROWTH_POINTS:
                growing = Series(corr.steps[during], corr.values[during])
        median_corr = float(np.median(growing.values))
        if median_corr > paid:
            return _evidence(
                correlation, growing, median_corr, paid,
                f"median within-step correlation of the reward model's score with length, "
                f"while {length} grew {rel:+.0%}",
            )  # fmt: skip
        return None

    return check


def either(*checks: Check) -> Check:
    """The first of ``checks`` that finds something."""

    def check(log: RunLog) -> Evidence | None:
        for one in checks:
            found = one(log)
            if found is not None:
                return found
        return None

    return check


# ============================================================================ rules
class Suggest(Protocol):
    """How a fix picks the new value of its field from the run's config (and algorithm); None
    when the change does not apply (Double DQN already on, a step size that is not far too
    low)."""

    def __call__(self, config: Mapping[str, Any], algo: str | None = None, /) -> Any: ...


class Fitted(Protocol):
    """How a fix picks its value from the run itself (its metrics, env and lineage, and the
    finding's evidence) where the doctor has the run; None when the change does not fit this
    run ("train longer" on a return that no longer climbs, a target entropy already at the
    most a policy can have)."""

    def __call__(
        self, config: Mapping[str, Any], algo: str | None, log: RunLog, evidence: Evidence, /
    ) -> Any: ...


@dataclass(frozen=True)
class Fix:
    """A config field that carries a rule's fix, what changing it means in words, and how to
    pick its new value (:class:`Suggest`). ``algos``: the algorithms whose field of this name
    means this (SAC's ``alpha`` is a temperature, a tabular learner's a step size); None: any
    run whose config has the field. ``fit``: the value fitted to the run itself
    (:class:`Fitted`), used in place of ``suggest`` where the doctor has the run
    (:meth:`Rule.advice_for`); ``suggest`` alone where it has only a config."""

    field: str
    suggest: Suggest
    text: str
    algos: frozenset[str] | None = None
    fit: Fitted | None = None

    def applies(self, algo: str | None) -> bool:
        return self.algos is None or algo is None or algo in self.algos

    def advise(
        self,
        config: Mapping[str, Any],
        algo: str | None = None,
        log: RunLog | None = None,
        evidence: Evidence | None = None,
    ) -> Advice | None:
        """This fix for a run: its words, its field, the field's value and the value to try;
        None where it does not fit (another algorithm's field, a config without it, no value
        to try)."""
        if self.field not in config or not self.applies(algo):
            return None
        if self.fit is not None and log is not None and evidence is not None:
            value = self.fit(config, algo, log, evidence)
        else:
            value = self.suggest(config, algo)
        return None if value is None else Advice(self.text, self.field, config[self.field], value)


@dataclass(frozen=True)
class Advice:
    """What a finding tells the user to change: the fix in words, fitted to the run (``text``),
    and, where the run's config has a field that carries it, the field, its value in the run
    and the value to try."""

    text: str
    field: str | None = None
    current: Any = None
    suggested: Any = None


RANK_NUMBERS = 0
"""NaN or inf: nothing the run logged after it means anything, so it comes first."""
RANK_BLOWUP = 10
"""One update threw the policy out of its trust region: what follows (a collapsed entropy, a
critic that broke, a flat return) is its consequence, and the smaller step is all but sure to
help."""
RANK_DIVERGENCE = 20
"""Q values or TD errors running away (the deadly triad): nothing trained on them holds."""
RANK_STEP = 30
"""A step too large, measured directly: a sustained KL, a clip fraction, a critic that broke,
a return that collapsed; their fixes (a smaller step) act on the cause they measure."""
RANK_MECHANISM = 35
"""A language model's held-out quality explained by its mechanism (DPO's chosen answers losing
likelihood): its fix acts on that mechanism, before the generic ones of :data:`RANK_OBJECTIVE`."""
RANK_OBJECTIVE = 40
"""The objective optimised is not the one wanted (reward hacking, length bias, drift from the
reference, groups with no signal): fixes that change the objective."""
RANK_ESTIMATE = 50
"""Estimates biased or too slow (overestimation, a critic that explains nothing, updates too
timid to clip): they slow learning more often than they stop it."""
RANK_EXPLORATION = 60
"""Entropy collapse: often the consequence of a too-large step or a bad reward scale (ranked
above), so more entropy helps only once those are ruled out."""
RANK_OUTCOME = 70
"""The outcome alone (a return that never moved): every cause ends there, so its fixes
(defaults, exploration on sparse rewards, the budget) are the least specific."""
RANK_REFERENCE = 75
"""A return far below a published agent's: the least specific of all (the zoo's settings)."""


@dataclass(frozen=True)
class Rule:
    """One row of the troubleshooting table, executable.

    ``fix`` is the table's fix in words, for a run whose config is unknown (another library's
    logs); ``fixes``: the config fields that carry it, in order of preference, each with its
    own words: a finding names the first one that fits the run's algorithm and config
    (:meth:`advice`), and the run itself (:meth:`advice_for`). ``lines`` are thresholds a
    report draws on the metric's plot, each with its label. ``algos``: where the rule applies
    (None: any run with the metric). ``metrics``: the metrics it reads, the first a fallback
    for nothing (a rule applies when the run logged any of them).
    """

    id: str
    symptom: str
    cause: str
    fix: str
    severity: str
    metric: str
    check: Check
    fixes: tuple[Fix, ...] = ()
    lines: Mapping[str, tuple[tuple[float, str], ...]] = field(default_factory=dict)
    algos: frozenset[str] | None = None
    live: bool = True
    """checked during training too; False for rules that judge a whole run (a return that
    has not moved yet at 10% of training is no finding)"""
    fallbacks: tuple[str, ...] = ()
    """other metrics the check reads when ``metric`` is missing (another library's name)"""
    immediate: bool = False
    """checked on every logged row during training (a blow-up is named at the row it happens),
    not only on the live doctor's schedule: the live doctor shows it that row alone, so its
    check must judge one row (the whole run is judged at the end as for every rule)"""
    rank: int = RANK_ESTIMATE
    """how likely its fix is to help, against the other findings of the same run: findings are
    reported lowest rank first (:func:`finding_order`); each built-in rule sets its own
    (:data:`RANK_NUMBERS` ... :data:`RANK_REFERENCE`, each with its reason)"""

    @property
    def metrics(self) -> tuple[str, ...]:
        return (self.metric, *self.fallbacks)

    def advice(self, config: Mapping[str, Any], algo: str | None = None) -> Advice:
        """The first fix that fits ``algo`` and that ``config`` can take, with its words and
        values; the table's words alone when none does."""
        for option in self.fixes:
            found = option.advise(config, algo)
            if found is not None:
                return found
        return Advice(self.fix)

    def advice_for(self, log: RunLog, evidence: Evidence) -> Advice:
        """:meth:`advice` fitted to the run itself: each fix's value from the run where it has
        one (:attr:`Fix.fit`: the step a KL calls for, a target entropy the action space can
        reach, "train longer" only while the return climbs, the zoo's preset where the config
        differs from it), and no fix this run's lineage already applied for this rule without
        it helping (:func:`tried_without_help`): the next one instead."""
        for option in self.fixes:
            found = option.advise(log.config, log.algo, log, evidence)
            if found is not None and not tried_without_help(self.id, found, log, evidence):
                return found
        return Advice(self.fix)

    def change_for(
        self, config: Mapping[str, Any], algo: str | None = None
    ) -> tuple[str | None, Any, Any]:
        """``(field, current value, suggested value)`` of :meth:`advice`; ``(None, None,
        None)`` when the config has none of the fields."""
        advice = self.advice(config, algo)
        return advice.field, advice.current, advice.suggested

    @property
    def fields(self) -> tuple[str, ...]:
        """Every config field a fix of this rule can name."""
        return tuple(dict.fromkeys(option.field for option in self.fixes))


def finding_order(rule: Rule | str, evidence: Evidence | None = None) -> tuple[float, float]:
    """The sort key that reports a run's findings by how likely their fix is to help: the
    rule's :attr:`Rule.rank`, then the earlier evidence (of two symptoms of one rank, the one
    seen first is likelier the cause of the other). ``rule``: the rule or its id (an id the
    table does not know ranks with :data:`RANK_ESTIMATE`)."""
    if isinstance(rule, str):
        known = RULES_BY_ID.get(rule)
        rank = known.rank if known is not None else RANK_ESTIMATE
    else:
        rank = rule.rank
    return float(rank), (evidence.step_start if evidence is not None else float("inf"))


# ============================================================================ lineage
HELPED = 0.5
"""A fix helped when, the same rule firing again, its evidence has come at least this share of
the way to its threshold (a KL from 9 to 0.8 against 0.1: helped, and the same fix may go
further; a flat return's gain still 0 after a longer run: it did not)."""


def lineage_changes(log: RunLog, rule_id: str) -> list[tuple[Mapping[str, Any], Any]]:
    """``(change, evidence)`` for each change this run's lineage made for ``rule_id``, as its
    ``summary.json`` records them (:mod:`rlx.launch.heal`): the changes it was healed with from its
    parent (``healed_from``) and those of its own rollbacks (``heal``), each with the evidence
    of that rule's finding then (None where the record has none). Read as data a folder may
    hold in any shape: what is not a mapping (nor a list where one is read) is skipped."""
    entries: list[Mapping[str, Any]] = []
    origin = log.summary.get("healed_from")
    if isinstance(origin, Mapping):
        entries.append(origin)
    entries += _mappings(log.summary.get("heal"))
    found = []
    for entry in entries:
        evidence = next((f.get("evidence") for f in _mappings(entry.get("findings"))
                         if f.get("rule") == rule_id), None)  # fmt: skip
        for change in _mappings(entry.get("changes")):
            rules = change.get("rules", entry.get("rules"))
            rules = [rules] if isinstance(rules, str) else rules
            if not isinstance(rules, list) or rule_id not in rules:
                continue  # a change for other rules, or a record that does not say
            found.append((change, evidence if isinstance(evidence, Mapping) else None))
    return found


def tried_without_help(rule_id: str, advice: Advice, log: RunLog, evidence: Evidence) -> bool:
    """Whether this run's lineage already changed ``advice``'s field the same way (a number
    moved in the same direction, or any change of a setting that is not a number) for this
    rule, and the rule, firing again, shows it did not help: its evidence now is not
    :data:`HELPED` of the way closer to its threshold than when the change was made (same
    metric and statistic; where they cannot be compared, it did not help)."""
    for change, before in lineage_changes(log, rule_id):
        if change.get("field") != advice.field:
            continue
        if not _same_direction(change.get("from"), change.get("to"), advice.current,
                               advice.suggested):  # fmt: skip
            continue
        if before is not None and _came_closer(before, evidence):
            continue
        return True
    return False


def _same_direction(was: Any, became: Any, current: Any, suggested: Any) -> bool:
    numbers = [_number(v, float("nan")) for v in (was, became, current, suggested)]
    if not all(np.isfinite(numbers)):
        return True  # a setting that is not a number (or None for a default): the same field
    return bool(np.sign(numbers[1] - numbers[0]) == np.sign(numbers[3] - numbers[2]))


def _came_closer(before: Mapping[str, Any], now: Evidence) -> bool:
    if before.get("metric") != now.metric or before.get("statistic") != now.statistic:
        return False
    value = _number(before.get("value"), float("nan"))
    threshold = _number(before.get("threshold"), float("nan"))
    if not (np.isfinite(value) and np.isfinite(threshold)):
        return False
    return abs(now.value - now.threshold) <= HELPED * abs(value - threshold)


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    """The mappings of a list a folder holds (none when it holds no list)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _number_field(config: Mapping[str, Any], name: str) -> float | None:
    value = _number(config.get(name), math.nan)
    return None if math.isnan(value) else value


def _scaled(name: str, factor: float, kind: type = float) -> Suggest:
    def suggest(config: Mapping[str, Any], algo: str | None = None) -> Any:
        value = _number_field(config, name)
        if value is None:
            return None
        new = value * factor
        return max(1, round(new)) if kind is int else float(f"{new:.3g}")

    return suggest


def _raise_beta(config: Mapping[str, Any], algo: str | None = None) -> Any:
    """Double the KL coefficient; from 0 (no penalty at all), the usual low end 0.01."""
    beta = _scaled("beta", 2.0)(config, algo)
    return None if beta is None else max(beta, 0.01)


def _at_least(name: str, value: float, kind: type = float) -> Suggest:
    """``value`` when the field is below it, else twice the field."""

    def suggest(config: Mapping[str, Any], algo: str | None = None) -> Any:
        current = _number_field(config, name)
        if current is None:
            return None
        return kind(value) if current < value else _scaled(name, 2.0, kind)(config, algo)

    return suggest


def _below(name: str, limit: float, value: float) -> Suggest:
    """``value`` when the field is below ``limit``; otherwise this fix does not apply."""

    def suggest(config: Mapping[str, Any], algo: str | None = None) -> Any:
        current = _number_field(config, name)
        return value if current is not None and current < limit else None

    return suggest


def _above(name: str, limit: float, value: float) -> Suggest:
    """``value`` when the field is above ``limit``; otherwise this fix does not apply."""

    def suggest(config: Mapping[str, Any], algo: str | None = None) -> Any:
        current = _number_field(config, name)
        return value if current is not None and current > limit else None

    return suggest


def _switch(name: str, to: bool) -> Suggest:
    """``to`` when the field is the other boolean; otherwise this fix does not apply."""
    return lambda config, algo=None: to if config.get(name) is (not to) else None


def _raise_fixed_alpha(config: Mapping[str, Any], algo: str | None = None) -> Any:
    """SAC with a fixed temperature: twice the entropy weight."""
    return _scaled("alpha", 2.0)(config, algo) if config.get("autotune") is False else None


def _raise_target_entropy(config: Mapping[str, Any], algo: str | None = None) -> Any:
    """SAC with a tuned temperature: a target one nat per action dimension higher, within what
    a policy on ``[-1, 1]^dim`` can have (:func:`raised_target_entropy`). Without the run the
    action space is unknown: one dimension is assumed, whose cap is the lowest (0 from the
    default -dim(A) whatever the dimension; at most 0.49 otherwise)."""
    if not config.get("autotune"):
        return None
    return raised_target_entropy(_number_field(config, "target_entropy"), 1)


def _fit_target_entropy(
    config: Mapping[str, Any], algo: str | None, log: RunLog, evidence: Evidence
) -> Any:
    """:func:`_raise_target_entropy` with the run's own action dimension (from its env id)."""
    if not config.get("autotune"):
        return None
    dim = action_dim(log.env) or 1
    return raised_target_entropy(_number_field(config, "target_entropy"), dim)


def _never(config: Mapping[str, Any], algo: str | None = None) -> Any:
    """A fix that needs the run itself (:attr:`Fix.fit`): nothing to suggest from a config."""
    return None


def _while_climbing(suggest: Suggest) -> Fitted:
    """``suggest``, only while the run's return still climbs (:func:`still_climbing`)."""

    def fit(config: Mapping[str, Any], algo: str | None, log: RunLog, evidence: Evidence) -> Any:
        return suggest(config, algo) if still_climbing(log) else None

    return fit


def _on_sparse_reward(suggest: Suggest, box_actions: bool = False) -> Fitted:
    """``suggest``, only on a sparse reward (:func:`sparse_reward`), and with ``box_actions``
    only on an env with Box actions (:func:`action_space`)."""

    def fit(config: Mapping[str, Any], algo: str | None, log: RunLog, evidence: Evidence) -> Any:
        if not sparse_reward(log):
            return None
        if box_actions and action_dim(log.env) is None:
            return None
        return suggest(config, algo)

    return fit


def _fitted_to_kl(name: str) -> Fitted:
    """The step size ``name`` lowered by the factor that brings the run's largest KL per update
    into range: ``sqrt(KL_TARGET / KL)``, since for small steps the KL is quadratic in the step
    (``KL ~ 1/2 d'F d`` with the step ``d`` proportional to the learning rate), between 0.01
    and 0.3 (0.1 where the evidence is a clip fraction). Where the step is more than
    :data:`FAR_FROM_DEFAULT` times the value a new run would get (:func:`_reference_value`: the
    env's preset's, else the algorithm's default), no higher than that value: past the
    quadratic range a KL of tens of nats says only "far too large". For instance a step of 0.5
    and a KL of 50: ``0.5 * sqrt(0.02 / 50) = 0.01``, then no higher than a reference of 0.005;
    a step of 3e-4 and a KL of 2: ``3e-4 * 0.1 = 3e-5``."""

    def fit(config: Mapping[str, Any], algo: str | None, log: RunLog, evidence: Evidence) -> Any:
        current = _number_field(config, name)
        if current is None or current <= 0:
            return None
        factor = 0.1
        kl = _finite(log, M.APPROX_KL, min_points=1)
        if evidence.metric == M.APPROX_KL or kl is not None:
            worst = max(evidence.value if evidence.metric == M.APPROX_KL else 0.0,
                        float(np.max(kl.values)) if kl is not None else 0.0)  # fmt: skip
            if worst > 0:
                factor = float(np.clip(np.sqrt(KL_TARGET / worst), 0.01, 0.3))
        new = current * factor
        reference = _reference_value(algo, log.env, name)
        if reference is not None and 0 < reference < current / FAR_FROM_DEFAULT:
            new = min(new, reference)
        return float(f"{new:.3g}")

    return fit


def _reference_value(algo: str | None, env_id: str | None, name: str) -> float | None:
    """The number a new run of ``algo`` on ``env_id`` gets for ``name``: the env's preset's
    (rlx's own, else rl-baselines3-zoo's: :func:`env_presets`), else the algorithm's default
    (None when neither is a number)."""
    if algo is not None and env_id:
        for _, preset in env_presets(algo, env_id):
            value = _number_field(preset, name)
            if value is not None:
                return value
    return _default_of(algo, name)


BUDGET_FIELDS = ("total_steps", "episodes", "iterations", "steps")
"""Config fields that are the run's budget (a heal keeps the budget; "train longer" changes it)."""
PRESET_ORDER = ("use_sde", "normalize_rewards", "normalize_obs", "scale_rewards", "autotune",
                "alpha", "target_entropy", "ent_coef", "exploration_fraction", "epsilon_end",
                "epsilon_start", "gamma")  # fmt: skip
"""Of the settings in which a run differs from the zoo's preset, these are named first: what
the agent explores with and what scale it sees its rewards and observations at, before step
sizes and sizes (the rest follow in the preset's order)."""


@dataclass(frozen=True)
class PresetFix(Fix):
    """Train with the env's preset: rlx's own for the run's algorithm and env where it keeps
    one (:func:`rlx.registry.preset_for`), else rl-baselines3-zoo's
    (:func:`rlx.launch.zoo.zoo_preset`, which rlx applies to a new run where it keeps none of
    its own), the first of them the run's config differs from (its budget aside): a run that
    already has rlx's preset and still falls short is pointed at the zoo's. With ``when``, only
    on runs ``when`` accepts. The finding names the first setting that differs
    (:data:`PRESET_ORDER`) with the preset's value, and its words list the others: a fix of
    many fields, whose ``field`` (``preset``) is no config field."""

    when: Callable[[RunLog], bool] | None = None

    def advise(
        self,
        config: Mapping[str, Any],
        algo: str | None = None,
        log: RunLog | None = None,
        evidence: Evidence | None = None,
    ) -> Advice | None:
        if log is None or not log.env or algo is None or not self.applies(algo):
            return None
        if self.when is not None and not self.when(log):
            return None
        for who, preset in env_presets(algo, log.env):
            differ = preset_differences(config, preset, log.env)
            if not differ:
                continue
            name = differ[0]
            shown = ", ".join(f"{n}={preset[n]!r}" for n in differ[:6])
            more = f" and {len(differ) - 6} more" if len(differ) > 6 else ""
            text = (
                f"train with {who} preset for {log.env} (a new run with no overrides gets it "
                f"whole; this run differs in {shown}{more})"
            )
            return Advice(text, name, config[name], preset[name])
        return None


def env_presets(algo: str, env_id: str) -> list[tuple[str, dict[str, Any]]]:
    """``(whose, values)`` of the presets for ``algo`` on ``env_id``, in the order a new run
    takes them: rlx's own, then rl-baselines3-zoo's (from the installed references:
    :mod:`rlx.diagnostics.references`)."""
    return references.current().presets(algo, env_id)


def preset_differences(
    config: Mapping[str, Any], preset: Mapping[str, Any], env_id: str
) -> list[str]:
    """The fields the run's config sets otherwise than ``preset``, budget aside
    (:data:`BUDGET_FIELDS`), in :data:`PRESET_ORDER`. ``normalize_obs=None`` is read as what it
    means: on for Box actions only."""
    order = list(preset)
    differ = []
    for name, value in preset.items():
        if name not in config or name in BUDGET_FIELDS:
            continue
        mine = config[name]
        if name == "normalize_obs" and mine is None:
            mine = action_dim(env_id) is not None
        if not _same_setting(mine, value):
            differ.append(name)
    first = {name: i for i, name in enumerate(PRESET_ORDER)}
    return sorted(differ, key=lambda n: (first.get(n, len(first)), order.index(n)))


def _same_setting(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_setting(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return bool(np.isclose(float(a), float(b), rtol=1e-9, atol=0.0))
    return bool(a == b)


FAR_FROM_DEFAULT = 30.0
"""A step size this many times below or above its algorithm's default is far off."""


def _back_to_default(name: str) -> Suggest:
    """The algorithm's default for ``name`` when the run's value is more than
    :data:`FAR_FROM_DEFAULT` times below or above it; otherwise this fix does not apply."""

    def suggest(config: Mapping[str, Any], algo: str | None = None) -> Any:
        current, default = _number_field(config, name), _default_of(algo, name)
        if current is None or default is None or current <= 0 or default <= 0:
            return None
        if default / FAR_FROM_DEFAULT <= current <= default * FAR_FROM_DEFAULT:
            return None
        return default

    return suggest


def _default_of(algo: str | None, name: str) -> float | None:
    """The default of ``name`` in ``algo``'s config (None when unknown; from the installed
    references: :mod:`rlx.diagnostics.references`)."""
    return None if algo is None else references.current().default(algo, name)


TABULAR = frozenset({"q-learning", "sarsa", "expected-sarsa", "double-q", "mc", "mc-prediction",
                     "td0"})  # fmt: skip
"""Tabular learners: their ``alpha`` is the step size."""
SAC = frozenset({"sac"})
"""SAC's ``alpha`` is the entropy temperature."""


def _step_sizes(factor: float, verb: str) -> tuple[Fix, ...]:
    """Every algorithm's step sizes scaled by ``factor``: ``verb`` ("lower", "raise") heads the
    words, which name the step size the field is."""
    return (
        Fix("learning_rate", _scaled("learning_rate", factor), f"{verb} the learning rate"),
        Fix("critic_learning_rate", _scaled("critic_learning_rate", factor),
            f"{verb} the critic's learning rate"),
        Fix("actor_learning_rate", _scaled("actor_learning_rate", factor),
            f"{verb} the actor's learning rate"),
        Fix("alpha", _scaled("alpha", factor), f"{verb} the step size alpha", algos=TABULAR),
    )  # fmt: skip


LOWER_STEP = _step_sizes(0.3, "lower")
RAISE_STEP = _step_sizes(3.0, "raise")
FEWER_EPOCHS = (Fix("num_epochs", _scaled("num_epochs", 0.5, int), "fewer epochs K per batch"),)
MORE_EPOCHS = (Fix("num_epochs", _scaled("num_epochs", 2.0, int), "more epochs K per batch"),)
TRAIN_LONGER = tuple(
    Fix(name, _scaled(name, 2.0, int), "train longer", fit=_while_climbing(_scaled(name, 2.0, int)))
    for name in BUDGET_FIELDS
)
"""Twice the budget, only while the return still climbs (:func:`still_climbing`)."""
BLOWUP_STEP = tuple(
    dataclasses.replace(option, suggest=_scaled(option.field, 0.1), fit=_fitted_to_kl(option.field))
    for option in _step_sizes(0.1, "lower")
)
"""Every step size, lowered by the factor a blown-up KL calls for (:func:`_fitted_to_kl`)."""
EXPLORE_ON_SPARSE = (
    PresetFix("preset", _never, "train with the env's preset", algos=ZOO_ALGOS,
              when=sparse_reward),
    Fix("normalize_rewards", _never,
        "normalise the rewards: a sparse reward's constant per-step cost swamps the critic",
        fit=_on_sparse_reward(_switch("normalize_rewards", True))),
    Fix("use_sde", _never, "explore with state-dependent noise (gSDE, use_sde)",
        algos=frozenset({"ppo", "a2c", "sac"}),
        fit=_on_sparse_reward(_switch("use_sde", True), box_actions=True)),
)  # fmt: skip
"""On a sparse reward (:func:`sparse_reward`), where the return never left its floor, in order
of how likely each helps: the env's preset (rlx's, else the zoo's, whose published agents
were trained with it), normalised rewards (a constant cost per step over a long episode gives
value targets at a scale the critic fits poorly), state-dependent exploration for Box actions
(gSDE, Raffin et al. 2021: noise that holds its direction over steps carries a car up a hill
where white noise cancels itself out)."""
KEEP_TARGET = (
    # a target net synced every few steps is no target net; a Polyak tau near 1 neither
    Fix("sync_every", _at_least("sync_every", 1000, int), "sync the target net less often"),
    Fix("tau", _above("tau", 0.5, 0.005), "keep a slow target net (Polyak tau)",
        algos=frozenset({"sac", "td3"})),
    Fix("buffer_size", _below("buffer_size", 10_000, 100_000), "keep a large replay buffer"),
    Fix("tau", _scaled("tau", 0.5), "a slower target net (Polyak tau)",
        algos=frozenset({"sac", "td3"})),
)  # fmt: skip
POLICY_GRADIENT = frozenset({"ppo", "a2c", "reinforce"})
LANGUAGE_POLICIES = frozenset({"grpo", "rlhf-ppo", "grpo-episodes", "ppo-episodes"})
TWIN_CRITICS = frozenset({"sac", "td3"})

EPISODE_POLICIES = frozenset({"grpo-episodes", "ppo-episodes"})
"""The language-model policies trained over multi-turn episodes (:mod:`rlx.llm.episode_grpo`,
:mod:`rlx.llm.episode_ppo`)."""

RULES: tuple[Rule, ...] = (
    Rule(
        id="kl-too-high",
        rank=RANK_STEP,
        symptom="Mean KL past 0.1",
        cause="the policy drifts far from the old policy in each update",
        fix="reduce K_EPOCHS or LR",
        severity=WARNING,
        metric=M.APPROX_KL,
        check=either(
            median_of_last(M.APPROX_KL, 0.1, above=True),
            median_of_first(M.APPROX_KL, 0.1),
        ),
        fixes=(*LOWER_STEP, *FEWER_EPOCHS),
        lines={M.APPROX_KL: ((0.1, "too large a step"),)},
    ),
    Rule(
        id="policy-blowup",
        rank=RANK_BLOWUP,
        symptom="KL past 1 (or 90% of ratios clipped) in one update",
        cause="one update threw the policy out of its trust region (a KL of 1 nat is 50-100x "
        "the usual target_kl of 0.01-0.02): too large a step; the collapsed entropy, broken "
        "critic and flat return that follow are its consequences",
        fix="lower the learning rate (to bring the KL into 0.01-0.02), then fewer epochs",
        severity=ERROR,
        metric=M.APPROX_KL,
        fallbacks=(M.CLIP_FRACTION,),
        check=policy_blowup(),
        fixes=(*BLOWUP_STEP, *FEWER_EPOCHS),
        lines={M.APPROX_KL: ((BLOWUP_KL, "blow-up in one update"),)},
        immediate=True,
    ),
    Rule(
        id="clip-fraction-near-zero",
        rank=RANK_ESTIMATE,
        symptom="Clip fraction near 0",
        cause="the clip never triggers: updates are too timid to use the trust region",
        fix="raise LR or K_EPOCHS",
        severity=WARNING,
        metric=M.CLIP_FRACTION,
        check=clip_fraction_near_zero(),
        fixes=(*RAISE_STEP, *MORE_EPOCHS),
        lines={M.CLIP_FRACTION: ((0.005, "clip never triggers"), (0.5, "overfits its rollout"))},
        # on-policy GRPO (one pass per batch) has a ratio of exactly 1: nothing to clip
        algos=frozenset({"ppo", "rlhf-ppo"}),
    ),
    Rule(
        id="clip-fraction-high",
        rank=RANK_STEP,
        symptom="Clip fraction 0.5 or more",
        cause="each update overfits to its rollout",
        fix="lower LR or K_EPOCHS",
        severity=WARNING,
        metric=M.CLIP_FRACTION,
        check=median_of_last(M.CLIP_FRACTION, 0.5, above=True),
        # a clip range far below the cheat sheet's 0.1-0.3 clips nearly every ratio
        fixes=(
            Fix("clip_eps", _below("clip_eps", 0.05, 0.2), "widen the clip range"),
            *FEWER_EPOCHS,
            *LOWER_STEP,
        ),
        lines={M.CLIP_FRACTION: ((0.005, "clip never triggers"), (0.5, "overfits its rollout"))},
    ),
    Rule(
        id="reward-hacking",
        rank=RANK_OBJECTIVE,
        symptom="Reward (or KL to the reference) climbs, gold / held-out reward drops",
        cause="reward hacking of the reward model, or over-optimisation: the policy moves away "
        "from the reference while the quality it was meant to gain falls",
        fix="stop early, raise beta, broaden the reward model's data",
        severity=ERROR,
        metric=M.GOLD_REWARD,
        fallbacks=(M.EXACT_MATCH,),
        # the proxy that climbs: the reward, the KL to the reference (RLHF, GRPO), DPO's
        # margin (its implicit reward); the measure that drops: the gold reward of the
        # sampled answers, or the held-out greedy exact match (the sampled answers can hold
        # their gold reward while the greedy ones get worse)
        check=either(
            climbs_while_drops(M.REWARD, M.GOLD_REWARD),
            climbs_while_drops(M.REWARD, M.EXACT_MATCH),
            climbs_while_drops(M.KL_REF, M.GOLD_REWARD),
            climbs_while_drops(M.KL_REF, M.EXACT_MATCH),
            climbs_while_drops(M.REWARD_MARGIN, M.EXACT_MATCH),
        ),
        fixes=(Fix("beta", _raise_beta, "raise beta (the KL penalty) and stop early"),),
        # the stages with a reference and a beta (an SFT run's exact match has no proxy)
        algos=frozenset({"rlhf-ppo", "grpo", "dpo"}),
    ),
    Rule(
        id="likelihood-displacement",
        rank=RANK_MECHANISM,
        symptom="Chosen answers lose likelihood while pair accuracy is high",
        cause="likelihood displacement: DPO separates each pair by pushing both answers down, "
        "the rejected one faster, so the chosen answers end less likely than under the "
        "reference and greedy answers drift away from them",
        fix="an NLL term on the chosen answers (RPO, rpo_alpha > 0); then a lower learning "
        "rate or a higher beta",
        severity=WARNING,
        metric=M.CHOSEN_REWARD,
        check=likelihood_displacement(),
        fixes=(
            Fix(
                "rpo_alpha",
                _at_least("rpo_alpha", 1.0),
                "keep the chosen answers likely with an NLL term on them (RPO), which DPO's "
                "beta alone does not do",
            ),
            Fix("learning_rate", _scaled("learning_rate", 0.3), "lower the learning rate"),
            Fix(
                "beta",
                _raise_beta,
                "raise beta: the loss saturates once beta times the margin is a few nats, so "
                "the log-ratios it needs shrink as 1/beta",
            ),
        ),
        lines={M.CHOSEN_REWARD: ((0.0, "the reference's likelihood"),)},
        algos=frozenset({"dpo"}),
    ),
    Rule(
        id="length-bias",
        rank=RANK_OBJECTIVE,
        symptom="Responses get longer",
        cause="the reward model rewards length",
        fix="use a length-normalised reward",
        severity=WARNING,
        metric=M.RESPONSE_LENGTH,
        check=either(
            paid_for_length(M.RESPONSE_LENGTH, M.REWARD_LENGTH_CORR),
            grows_with(M.RESPONSE_LENGTH, M.REWARD),
        ),
        fixes=(
            Fix(
                "length_normalize",
                lambda c, algo=None: True if not c.get("length_normalize") else None,
                "use a length-normalised reward",
            ),
        ),
    ),
    Rule(
        id="q-overestimation",
        rank=RANK_ESTIMATE,
        symptom="Q values too high",
        cause="max bias on noisy Q estimates (Q above the returns actually observed, and not "
        "coming down to them)",
        fix="Double DQN",
        severity=WARNING,
        metric=M.Q_START,
        fallbacks=(M.Q_MEAN,),
        check=overestimation(),
        fixes=(
            Fix("double", _switch("double", True), "Double DQN", algos=frozenset({"dqn"})),
            Fix(
                "learning_rate",
                _scaled("learning_rate", 0.3),
                "Double DQN is already on: lower the learning rate",
                algos=frozenset({"dqn"}),
            ),
            Fix(
                "critic_learning_rate",
                _scaled("critic_learning_rate", 0.3),
                "the twin critics already take the min: lower the critic's learning rate",
                algos=TWIN_CRITICS,
            ),
            Fix("tau", _scaled("tau", 0.5), "a slower target net (Polyak tau)", algos=TWIN_CRITICS),
        ),
    ),
    Rule(
        id="dqn-diverges",
        rank=RANK_DIVERGENCE,
        symptom="DQN diverges (TD error or Q values running away)",
        cause="the deadly triad: bootstrapping, off-policy data and function approximation",
        fix="keep the target net and the replay buffer (sync the target less often)",
        severity=ERROR,
        metric=M.TD_ERROR,
        check=diverging(M.TD_ERROR),
        fixes=(*KEEP_TARGET, *LOWER_STEP),
    ),
    Rule(
        id="q-diverges",
        rank=RANK_DIVERGENCE,
        symptom="Q values running away",
        cause="the deadly triad: bootstrapping, off-policy data and function approximation",
        fix="keep the target net and the replay buffer (sync the target less often)",
        severity=ERROR,
        metric=M.Q_MEAN,
        check=either(diverging(M.Q_MEAN), beyond_returns(M.Q_MEAN)),
        fixes=(*KEEP_TARGET, *LOWER_STEP),
    ),
    Rule(
        id="entropy-collapse",
        rank=RANK_EXPLORATION,
        symptom="Policy stops exploring",
        cause="entropy collapse: the policy turned nearly deterministic while still poor",
        fix="entropy bonus with c_e > 0",
        severity=WARNING,
        metric=M.ENTROPY,
        check=entropy_collapse(),
        # policy gradients: the entropy bonus; SAC: its temperature alpha (or, tuned, a higher
        # target entropy); language models: a warmer sampling temperature
        fixes=(
            Fix(
                "ent_coef",
                _at_least("ent_coef", 0.01),
                "entropy bonus with c_e > 0",
                algos=POLICY_GRADIENT,
            ),
            Fix("alpha", _raise_fixed_alpha, "a higher entropy temperature alpha", algos=SAC),
            Fix(
                "target_entropy",
                _raise_target_entropy,
                "a higher target entropy",
                algos=SAC,
                fit=_fit_target_entropy,
            ),
            Fix(
                "temperature",
                _scaled("temperature", 1.5),
                "a warmer sampling temperature",
                algos=LANGUAGE_POLICIES,
            ),
        ),
    ),
    Rule(
        id="kl-ref-drift",
        rank=RANK_OBJECTIVE,
        symptom="KL to the reference past 5",
        cause="the policy drifts from the SFT model: past about 5 to 10, reward hacking starts",
        fix="raise beta (the KL penalty) or stop earlier",
        severity=WARNING,
        metric=M.KL_REF,
        check=median_of_last(M.KL_REF, 5.0, above=True, fraction=0.2),
        fixes=(Fix("beta", _raise_beta, "raise beta (the KL penalty)"),),
        lines={M.KL_REF: ((5.0, "drift starts"), (10.0, "reward hacking"))},
        algos=LANGUAGE_POLICIES,
    ),
    Rule(
        id="zero-spread-groups",
        rank=RANK_OBJECTIVE,
        symptom="GRPO groups with no reward spread",
        cause="every sample of a group got the same reward: zero advantage, no learning signal",
        fix="more samples per group, a higher temperature, or prompts of the right difficulty",
        severity=WARNING,
        metric=M.FRAC_ZERO_STD_GROUPS,
        check=median_of_last(M.FRAC_ZERO_STD_GROUPS, 0.5, above=True),
        fixes=(
            Fix("group_size", _scaled("group_size", 2.0, int), "more samples per group"),
            Fix("temperature", _scaled("temperature", 1.5), "a warmer sampling temperature"),
        ),
        lines={M.FRAC_ZERO_STD_GROUPS: ((0.5, "half the groups teach nothing"),)},
    ),
    Rule(
        id="truncated-completions",
        rank=RANK_OBJECTIVE,
        symptom="Most completions cut at the token budget",
        cause="the sampled completions reach max_new_tokens before their end (eos): their "
        "rewards score unfinished answers, and the policy never learns where to stop",
        fix="a larger token budget per completion (TRL: max_completion_length)",
        severity=WARNING,
        metric=M.TRUNCATED_FRACTION,
        check=median_of_last(M.TRUNCATED_FRACTION, 0.5, above=True),
        fixes=(
            Fix(
                "max_new_tokens",
                _scaled("max_new_tokens", 2.0, int),
                "a larger token budget per completion",
            ),
        ),
        lines={M.TRUNCATED_FRACTION: ((0.5, "half the completions cut"),)},
        algos=frozenset({"grpo", "rlhf-ppo", "grpo-episodes", "ppo-episodes"}),
    ),
    Rule(
        id="episodes-never-end",
        rank=RANK_OBJECTIVE,
        symptom="Most episodes cut at their turn or token budget",
        cause="the model does not reach the end of its task (an answer, the goal) before a "
        "budget cuts the episode: the reward of an ending never comes, so its groups have "
        "nothing to compare",
        fix="a larger token budget per episode or per reply, more turns, or a warm-up on "
        "episodes that end (SFT on demonstrations)",
        severity=WARNING,
        metric=M.EPISODE_TRUNCATED_FRACTION,
        check=median_of_last(M.EPISODE_TRUNCATED_FRACTION, 0.9, above=True),
        fixes=(
            Fix("max_length", _scaled("max_length", 2.0, int), "a larger token budget per episode"),
            Fix(
                "max_new_tokens",
                _scaled("max_new_tokens", 2.0, int),
                "a larger token budget per reply",
            ),
        ),
        lines={M.EPISODE_TRUNCATED_FRACTION: ((0.9, "nine episodes in ten cut"),)},
        algos=EPISODE_POLICIES,
    ),
    Rule(
        id="tool-calls-fail",
        rank=RANK_OBJECTIVE,
        symptom="Most tool calls fail",
        cause="the programs the model runs raise or run out of time: their output says nothing "
        "about the task, so the tool cannot help the model (or the sandbox's limits are too "
        "tight for honest programs)",
        fix="a warm-up on working tool calls (SFT on demonstrations), or a longer time limit for "
        "the tool (PythonToolEnv's timeout_s)",
        severity=WARNING,
        metric=M.TOOL_ERROR_RATE,
        check=median_of_last(M.TOOL_ERROR_RATE, 0.8, above=True),
        lines={M.TOOL_ERROR_RATE: ((0.8, "four calls in five fail"),)},
    ),
    Rule(
        id="critic-not-learning",
        rank=RANK_ESTIMATE,
        symptom="Explained variance at or below 0",
        cause="the critic does not predict the returns, so advantages are mostly noise",
        fix="raise the value-loss weight c_v or the learning rate; check reward scaling",
        severity=WARNING,
        metric=M.EXPLAINED_VARIANCE,
        # at or below 0 (under 1%: rewards 1000x give 1e-7): a critic explaining a few percent
        # can still serve an agent that learns
        check=critic_explains_nothing(0.01),
        fixes=(
            Fix(
                "normalize_rewards",
                _switch("normalize_rewards", True),
                "check reward scaling: normalise the rewards",
            ),
            Fix("vf_coef", _scaled("vf_coef", 2.0), "raise the value-loss weight c_v"),
        ),
        lines={M.EXPLAINED_VARIANCE: ((0.0, "explains nothing"),)},
        # where advantages bootstrap from the critic; REINFORCE's baseline only cuts variance.
        # Not rlhf-ppo: once every completion earns the same reward the returns barely vary
        # and the explained variance swings far below 0 on a healthy run
        algos=frozenset({"ppo", "a2c"}),
        live=False,
    ),
    Rule(
        id="value-breakdown",
        rank=RANK_STEP,
        symptom="Explained variance from above 0.5 to below 0",
        cause="the critic stopped predicting the returns it had learned to predict: its "
        "targets moved faster than it could follow (a policy that changed abruptly, or too "
        "large a step)",
        fix="smaller steps: lower the learning rate",
        severity=WARNING,
        metric=M.EXPLAINED_VARIANCE,
        check=value_breakdown(),
        fixes=LOWER_STEP,
        lines={M.EXPLAINED_VARIANCE: ((0.5, "critic works"), (0.0, "explains nothing"))},
        algos=frozenset({"ppo", "a2c"}),
        # "worked for a tenth of the run" needs the whole run: early on a tenth is a few updates
        live=False,
    ),
    Rule(
        id="performance-collapse",
        rank=RANK_STEP,
        symptom="Return collapses after a plateau",
        cause="a destructive update once the task was learned: too large a policy step late "
        "in training, and the agent forgets what it had",
        fix="smaller steps late in training: a narrower clip range, a learning rate annealed "
        "or lowered; keep the best checkpoint (eval_every)",
        severity=WARNING,
        metric=M.EPISODE_RETURN,
        check=performance_collapse(),
        fixes=(
            Fix(
                "clip_eps",
                _scaled("clip_eps", 0.5),
                "a narrower clip range",
                algos=frozenset({"ppo"}),
            ),
            Fix("anneal_lr", _switch("anneal_lr", True), "anneal the learning rate to 0"),
            Fix(
                "learning_rate_end",
                lambda c, algo=None: 0.0 if c.get("learning_rate_end") is None else None,
                "decay the learning rate to 0 by the end",
            ),
            *LOWER_STEP,
        ),
    ),
    Rule(
        id="non-finite",
        rank=RANK_NUMBERS,
        symptom="NaN or inf in a metric",
        cause="a numerical blow-up (learning rate too high, a log of 0, a division by 0)",
        fix="lower the learning rate, clip gradients, check rewards and observations",
        severity=ERROR,
        metric="*",
        check=any_non_finite,
        fixes=LOWER_STEP,
        immediate=True,
    ),
    Rule(
        id="no-learning",
        rank=RANK_OUTCOME,
        symptom="Return flat",
        cause="no learning: the agent behaves as it did at the start (on a sparse reward it may "
        "never have reached what pays), or it stopped improving far short of solving the task",
        fix="check the reward signal and the learning rate; on a sparse reward explore (the "
        "zoo's preset, normalised rewards, state-dependent noise); train longer only while "
        "the return climbs",
        severity=WARNING,
        metric=M.EPISODE_RETURN,
        check=either(flat_return, stalled_far_below_solved),
        fixes=(
            Fix(
                "learning_rate",
                _back_to_default("learning_rate"),
                "set the learning rate back to its default",
            ),
            Fix(
                "critic_learning_rate",
                _back_to_default("critic_learning_rate"),
                "set the critic's learning rate back to its default",
            ),
            Fix(
                "actor_learning_rate",
                _back_to_default("actor_learning_rate"),
                "set the actor's learning rate back to its default",
            ),
            Fix(
                "alpha",
                _back_to_default("alpha"),
                "set the step size alpha back to its default",
                algos=TABULAR,
            ),
            *EXPLORE_ON_SPARSE,
            *TRAIN_LONGER,
        ),
        live=False,
    ),
    Rule(
        id="below-published",
        rank=RANK_REFERENCE,
        symptom="Return ends far below a published agent's",
        cause="rl-baselines3-zoo's tuned agent of this algorithm reached a far higher return on "
        "this env in no more steps: the run's settings (or its exploration) fall short",
        fix="train with the env's rl-baselines3-zoo preset; train longer only while the return "
        "still climbs",
        severity=WARNING,
        metric=M.EPISODE_RETURN,
        check=below_published,
        fixes=(
            PresetFix("preset", _never, "train with the env's preset", algos=ZOO_ALGOS),
            *TRAIN_LONGER,
        ),
        algos=ZOO_ALGOS,
        live=False,
    ),
)
"""Every rule, in the order findings are reported."""

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}


# ============================================================================ helpers
def _finite(log: RunLog, metric: str, min_points: int = MIN_POINTS) -> Series | None:
    series = log.get(metric)
    if series is None:
        return None
    series = series.finite()
    return series if len(series) >= min_points else None


def _evidence(
    metric: str, series: Series, value: float, threshold: float, statistic: str
) -> Evidence:
    return Evidence(
        metric, float(series.steps[0]), float(series.steps[-1]), value, threshold, statistic
    )


def _spread(values: np.ndarray) -> float:
    return float(np.percentile(values, 95) - np.percentile(values, 5))


def _solved_threshold(env_id: str | None) -> float | None:
    """Gymnasium's ``reward_threshold`` of a registered env id (None when unknown)."""
    if not env_id:
        return None
    try:
        import gymnasium

        threshold = gymnasium.spec(env_id).reward_threshold
    except Exception:  # not a Gymnasium id (a data file, a GridWorld, another library's run)
        return None
    return None if threshold is None else float(threshold)


def _time_limit(env_id: str | None) -> int | None:
    """Gymnasium's ``max_episode_steps`` of a registered env id (None when unknown)."""
    if not env_id:
        return None
    try:
        import gymnasium

        limit = gymnasium.spec(env_id).max_episode_steps
    except Exception:  # not a Gymnasium id
        return None
    return None if limit is None else int(limit)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def _number(value: Any, default: float) -> float:
    """``value`` as a float, or ``default`` when it is not a number (a run folder's JSON may
    hold anything: an integer too large for a float is no number either)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    try:
        return float(value)
    except OverflowError:
        return default
