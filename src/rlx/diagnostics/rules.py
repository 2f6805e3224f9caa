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
broke down, a return that collapses after a plateau, NaN/inf, and a return that never moves
(docs: Reference > Troubleshooting). Each :class:`Rule` names its symptom, the :class:`Check`
that tests the metric series, the cause, the fix, and the config fields that carry the fix
(:class:`Fix`), each with the fix in words that fit it: the first one that fits the run's
algorithm and that its own config can take is the one named (:meth:`Rule.advice`), with its
suggested value, so every algorithm gets a change it can make, in its own terms (no "Double
DQN" for SAC, nor for a DQN that has it on).

Checks read robust statistics (medians of windows, shares of points), never one noisy point,
and stay silent when a run has too few points to judge: a false alarm costs the user's trust.
A rule may read a fallback metric where a library logs another one (Q of the actions taken,
``q_mean``, where ``q_start`` is missing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rlx import metrics as M
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
    improves only through its rare updates that move at all."""

    def check(log: RunLog) -> Evidence | None:
        entropy = _finite(log, M.ENTROPY, min_points=10)
        if entropy is None:
            return None
        start = float(np.median(entropy.first(0.1).values))
        tail = entropy.last(0.25)
        level = float(np.median(tail.values))
        if start <= 0 or level > share * start:
            return None
        stuck, recent = return_plateau_below_best(log)
        solved = _solved_threshold(log.env)
        top = float(np.max(entropy.values))
        frozen = level < gone * top and solved is not None and recent < solved
        if stuck or frozen:
            return _evidence(M.ENTROPY, tail, level, share * start, "median of the last 25%")
        return None

    return check


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


@dataclass(frozen=True)
class Fix:
    """A config field that carries a rule's fix, what changing it means in words, and how to
    pick its new value (:class:`Suggest`). ``algos``: the algorithms whose field of this name
    means this (SAC's ``alpha`` is a temperature, a tabular learner's a step size); None: any
    run whose config has the field."""

    field: str
    suggest: Suggest
    text: str
    algos: frozenset[str] | None = None

    def applies(self, algo: str | None) -> bool:
        return self.algos is None or algo is None or algo in self.algos


@dataclass(frozen=True)
class Advice:
    """What a finding tells the user to change: the fix in words, fitted to the run (``text``),
    and, where the run's config has a field that carries it, the field, its value in the run
    and the value to try."""

    text: str
    field: str | None = None
    current: Any = None
    suggested: Any = None


@dataclass(frozen=True)
class Rule:
    """One row of the troubleshooting table, executable.

    ``fix`` is the table's fix in words, for a run whose config is unknown (another library's
    logs); ``fixes``: the config fields that carry it, in order of preference, each with its
    own words: a finding names the first one that fits the run's algorithm and config
    (:meth:`advice`). ``lines`` are thresholds a report draws on the metric's plot, each with
    its label. ``algos``: where the rule applies (None: any run with the metric).
    ``metrics``: the metrics it reads, the first a fallback for nothing (a rule applies when
    the run logged any of them).
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

    @property
    def metrics(self) -> tuple[str, ...]:
        return (self.metric, *self.fallbacks)

    def advice(self, config: Mapping[str, Any], algo: str | None = None) -> Advice:
        """The first fix that fits ``algo`` and that ``config`` can take, with its words and
        values; the table's words alone when none does."""
        for option in self.fixes:
            if option.field in config and option.applies(algo):
                suggested = option.suggest(config, algo)
                if suggested is not None:
                    return Advice(option.text, option.field, config[option.field], suggested)
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


def _number_field(config: Mapping[str, Any], name: str) -> float | None:
    value = config.get(name)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return float(value)


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
    """SAC with a tuned temperature: a target one nat higher (0 from the default -dim(A))."""
    if not config.get("autotune"):
        return None
    current = config.get("target_entropy")
    return 0.0 if current is None else float(current) + 1.0


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
    """The default of ``name`` in ``algo``'s config dataclass (None when unknown)."""
    if algo is None:
        return None
    import dataclasses

    from rlx import registry

    try:
        config = registry.get(algo).config
    except Exception:  # not a registered algorithm (another library's run)
        return None
    for option in dataclasses.fields(config):
        if option.name == name and isinstance(option.default, (int, float)):
            return float(option.default)
    return None


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
TRAIN_LONGER = (
    Fix("total_steps", _scaled("total_steps", 2.0, int), "train longer"),
    Fix("episodes", _scaled("episodes", 2.0, int), "train longer"),
    Fix("iterations", _scaled("iterations", 2.0, int), "train longer"),
    Fix("steps", _scaled("steps", 2.0, int), "train longer"),
)
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
LANGUAGE_POLICIES = frozenset({"grpo", "rlhf-ppo"})
TWIN_CRITICS = frozenset({"sac", "td3"})

RULES: tuple[Rule, ...] = (
    Rule(
        id="kl-too-high",
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
        id="clip-fraction-near-zero",
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
        symptom="Reward climbs, gold / held-out reward drops",
        cause="reward hacking of the reward model",
        fix="stop early, raise beta, broaden the reward model's data",
        severity=ERROR,
        metric=M.GOLD_REWARD,
        # the gold reward of the sampled answers, or the held-out greedy exact match: the
        # sampled answers can hold their gold reward while the greedy ones get worse
        check=either(
            climbs_while_drops(M.REWARD, M.GOLD_REWARD),
            climbs_while_drops(M.REWARD, M.EXACT_MATCH),
        ),
        fixes=(Fix("beta", _raise_beta, "raise beta (the KL penalty) and stop early"),),
    ),
    Rule(
        id="length-bias",
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
            Fix("target_entropy", _raise_target_entropy, "a higher target entropy", algos=SAC),
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
        id="critic-not-learning",
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
        symptom="NaN or inf in a metric",
        cause="a numerical blow-up (learning rate too high, a log of 0, a division by 0)",
        fix="lower the learning rate, clip gradients, check rewards and observations",
        severity=ERROR,
        metric="*",
        check=any_non_finite,
        fixes=LOWER_STEP,
    ),
    Rule(
        id="no-learning",
        symptom="Return flat",
        cause="no learning: the agent behaves as it did at the start, or it stopped improving "
        "far short of solving the task",
        fix="check the reward signal and the learning rate; train longer",
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
            *TRAIN_LONGER,
        ),
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
    """``value`` as a float, or ``default`` when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return float(value)
