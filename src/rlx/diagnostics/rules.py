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
GRPO groups with no reward spread, a critic that explains nothing, NaN/inf, and a return that
never moves (docs: Reference > Troubleshooting). Each :class:`Rule` names its symptom, the
:class:`Check` that tests the metric series, the cause, the fix, and the config fields that
carry the fix (:class:`Fix`): the first field the run's own config has is the one named, with
its suggested value, so every algorithm gets a change it can make.

Checks read robust statistics (medians of windows, shares of points), never one noisy point,
and stay silent when a run has too few points to judge: a false alarm costs the user's trust.
A rule may read a fallback metric where a library logs another one (Q of the actions taken,
``q_mean``, where ``q_start`` is missing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
    the first tenth's by more than noise (three standard errors of a tenth's mean, or 5% of
    the return's spread). Means, not medians, so a sparse 0/1 return that starts to succeed
    counts as learning."""
    series = _finite(log, M.EPISODE_RETURN, min_points=20)
    if series is None:
        return None
    parts = np.array_split(series.values, 10)
    tenths = [float(np.mean(part)) for part in parts]
    gain = max(tenths[1:]) - tenths[0]
    standard_error = float(np.std(series.values)) / np.sqrt(min(len(p) for p in parts))
    tolerance = max(3 * standard_error, 0.05 * _spread(series.values), 1e-6)
    if gain <= tolerance:
        return _evidence(M.EPISODE_RETURN, series, gain, tolerance, "best tenth's mean gain")
    return None


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


def overestimation(margin: float = 0.2) -> Check:
    """``q_start`` (or, where a run logs no ``q_start``, ``q_mean``: Q of the actions taken)
    above the discounted return actually observed, ``mc_return``, by more than ``margin`` of
    the return's scale, over the last half: the max operator's bias on noisy estimates."""

    def check(log: RunLog) -> Evidence | None:
        q_name = M.Q_START if log.get(M.Q_START) is not None else M.Q_MEAN
        q, g = _finite(log, q_name), _finite(log, M.MC_RETURN)
        if q is None or g is None:
            return None
        n = min(len(q), len(g))
        q_tail, g_tail = q.last(0.5), g.last(0.5)
        gap = float(np.median(q_tail.values) - np.median(g_tail.values))
        scale = max(float(np.median(np.abs(g.values[-n:]))), 1.0)
        if gap > margin * scale:
            return _evidence(q_name, q_tail, gap, margin * scale, "median Q - observed return")
        return None

    return check


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


def paid_for_length(length: str, correlation: str, growth: float = 0.1, paid: float = 0.3) -> Check:
    """``length`` (of the responses) has grown by more than ``growth`` (relative: the median
    of the last 20% against that of the first 10%, where such growth happens) while the
    reward model's score correlates with length within the steps: the median of
    ``correlation`` (Pearson, per step) above ``paid``. A direct reading of "the reward model
    rewards length", where the trend alone (:func:`grows_with`) needs much more growth."""

    def check(log: RunLog) -> Evidence | None:
        lengths, corr = _finite(log, length), _finite(log, correlation)
        if lengths is None or corr is None:
            return None
        values = lengths.values
        start = float(np.median(values[: max(1, len(values) // 10)]))
        end = float(np.median(values[-max(1, len(values) // 5) :]))
        rel = (end - start) / max(abs(start), 1e-8)
        median_corr = float(np.median(corr.values))
        if rel > growth and median_corr > paid:
            return _evidence(
                correlation, corr, median_corr, paid,
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
@dataclass(frozen=True)
class Fix:
    """A config field that carries a rule's fix, and how to pick its new value from the run's
    config (``suggest(config)``; None when the change does not apply, e.g. Double DQN already
    on)."""

    field: str
    suggest: Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Rule:
    """One row of the troubleshooting table, executable.

    ``fixes``: the config fields that carry the fix, in order of preference; a finding names
    the first one the run's config has (with a suggestion). ``lines`` are thresholds a report
    draws on the metric's plot, each with its label. ``algos``: where the rule applies (None:
    any run with the metric). ``metrics``: the metrics it reads, the first a fallback for
    nothing (a rule applies when the run logged any of them).
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

    def change_for(self, config: Mapping[str, Any]) -> tuple[str | None, Any, Any]:
        """``(field, current value, suggested value)`` of the first fix the config can take;
        ``(None, None, None)`` when it has none of the fields."""
        for option in self.fixes:
            if option.field in config:
                suggested = option.suggest(config)
                if suggested is not None:
                    return option.field, config[option.field], suggested
        return None, None, None

    @property
    def fields(self) -> tuple[str, ...]:
        """Every config field a fix of this rule can name."""
        return tuple(option.field for option in self.fixes)


def _scaled(name: str, factor: float, kind: type = float) -> Callable[[Mapping[str, Any]], Any]:
    def suggest(config: Mapping[str, Any]) -> Any:
        value = config.get(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        new = value * factor
        return max(1, round(new)) if kind is int else float(f"{new:.3g}")

    return suggest


def _raise_beta(config: Mapping[str, Any]) -> Any:
    """Double the KL coefficient; from 0 (no penalty at all), the usual low end 0.01."""
    beta = _scaled("beta", 2.0)(config)
    return None if beta is None else max(beta, 0.01)


def _constant(value: Any) -> Callable[[Mapping[str, Any]], Any]:
    return lambda config: value


def _at_least(name: str, value: float) -> Callable[[Mapping[str, Any]], Any]:
    """``value`` when the field is below it, else twice the field."""

    def suggest(config: Mapping[str, Any]) -> Any:
        current = config.get(name)
        if not isinstance(current, (int, float)) or isinstance(current, bool):
            return None
        return value if current < value else _scaled(name, 2.0)(config)

    return suggest


def _raise_fixed_alpha(config: Mapping[str, Any]) -> Any:
    """SAC with a fixed temperature: twice the entropy weight."""
    return _scaled("alpha", 2.0)(config) if config.get("autotune") is False else None


def _raise_target_entropy(config: Mapping[str, Any]) -> Any:
    """SAC with a tuned temperature: a target one nat higher (0 from the default -dim(A))."""
    if not config.get("autotune"):
        return None
    current = config.get("target_entropy")
    return 0.0 if current is None else float(current) + 1.0


def _scale_each(names: tuple[str, ...], factor: float, kind: type = float) -> tuple[Fix, ...]:
    return tuple(Fix(name, _scaled(name, factor, kind)) for name in names)


STEP_SIZES = ("learning_rate", "critic_learning_rate", "actor_learning_rate", "alpha")
"""A run's step sizes, in the order a fix names them (tabular learners call theirs alpha)."""
BUDGETS = ("total_steps", "episodes", "iterations", "steps")
"""What sizes a run, by algorithm family."""
EPOCHS = ("num_epochs",)
"""K: optimisation passes over each batch of samples."""
LOWER_STEP = _scale_each(STEP_SIZES, 0.3)


PPO_LIKE = frozenset({"ppo", "a2c", "rlhf-ppo", "grpo"})
# DQN syncs its target net less often; SAC and TD3 follow theirs more slowly (Polyak tau)
SLOWER_TARGET = (
    *_scale_each(("sync_every",), 2.0, int),
    *_scale_each(("tau",), 0.5),
    *LOWER_STEP,
)

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
        fixes=(*LOWER_STEP, *_scale_each(EPOCHS, 0.5, int)),
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
        fixes=_scale_each(STEP_SIZES, 3.0),
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
        fixes=(*_scale_each(EPOCHS, 0.5, int), *LOWER_STEP),
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
        fixes=(Fix("beta", _raise_beta),),
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
        fixes=(Fix("length_normalize", lambda c: True if not c.get("length_normalize") else None),),
    ),
    Rule(
        id="q-overestimation",
        symptom="Q values too high",
        cause="max bias on noisy Q estimates (Q above the returns actually observed)",
        fix="Double DQN",
        severity=WARNING,
        metric=M.Q_START,
        fallbacks=(M.Q_MEAN,),
        check=overestimation(),
        # Double DQN first; already on (or twin critics, SAC and TD3): a smaller step
        fixes=(Fix("double", lambda c: True if c.get("double") is False else None), *LOWER_STEP),
    ),
    Rule(
        id="dqn-diverges",
        symptom="DQN diverges (TD error or Q values running away)",
        cause="the deadly triad: bootstrapping, off-policy data and function approximation",
        fix="keep the target net and the replay buffer (sync the target less often)",
        severity=ERROR,
        metric=M.TD_ERROR,
        check=diverging(M.TD_ERROR),
        fixes=SLOWER_TARGET,
    ),
    Rule(
        id="q-diverges",
        symptom="Q values running away",
        cause="the deadly triad: bootstrapping, off-policy data and function approximation",
        fix="keep the target net and the replay buffer (sync the target less often)",
        severity=ERROR,
        metric=M.Q_MEAN,
        check=diverging(M.Q_MEAN),
        fixes=SLOWER_TARGET,
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
            Fix("ent_coef", _at_least("ent_coef", 0.01)),
            Fix(
                "alpha", lambda c: _scaled("alpha", 2.0)(c) if c.get("autotune") is False else None
            ),
            Fix("target_entropy", _raise_target_entropy),
            *_scale_each(("temperature",), 1.5),
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
        fixes=(Fix("beta", _raise_beta),),
        lines={M.KL_REF: ((5.0, "drift starts"), (10.0, "reward hacking"))},
        algos=frozenset({"rlhf-ppo", "grpo"}),
    ),
    Rule(
        id="zero-spread-groups",
        symptom="GRPO groups with no reward spread",
        cause="every sample of a group got the same reward: zero advantage, no learning signal",
        fix="more samples per group, a higher temperature, or prompts of the right difficulty",
        severity=WARNING,
        metric=M.FRAC_ZERO_STD_GROUPS,
        check=median_of_last(M.FRAC_ZERO_STD_GROUPS, 0.5, above=True),
        fixes=_scale_each(("group_size",), 2.0, int),
        lines={M.FRAC_ZERO_STD_GROUPS: ((0.5, "half the groups teach nothing"),)},
    ),
    Rule(
        id="critic-not-learning",
        symptom="Explained variance at or below 0",
        cause="the critic does not predict the returns, so advantages are mostly noise",
        fix="raise the value-loss weight c_v or the learning rate; check reward scaling",
        severity=WARNING,
        metric=M.EXPLAINED_VARIANCE,
        # at or below 0: a critic explaining a few percent can still serve an agent that learns
        check=critic_explains_nothing(0.0),
        fixes=_scale_each(("vf_coef",), 2.0),
        lines={M.EXPLAINED_VARIANCE: ((0.0, "explains nothing"),)},
        # where advantages bootstrap from the critic; REINFORCE's baseline only cuts variance.
        # Not rlhf-ppo: once every completion earns the same reward the returns barely vary
        # and the explained variance swings far below 0 on a healthy run
        algos=frozenset({"ppo", "a2c"}),
        live=False,
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
        symptom="Return flat from the start",
        cause="no learning at all: the agent behaves as it did at the start",
        fix="check the reward signal and the learning rate; train longer",
        severity=WARNING,
        metric=M.EPISODE_RETURN,
        check=flat_return,
        fixes=(*_scale_each(BUDGETS, 2.0, int), *_scale_each(STEP_SIZES, 3.0)),
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


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])
