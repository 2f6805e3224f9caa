"""The doctor acting on its findings: heal a run after it ended, or while it trains.

``rlx.heal(run_dir)`` and ``rlx doctor RUN --fix [--run-dir CHILD]``: every finding of the
run that names a change (a config field and the value to try, :class:`Finding`) is applied at
once to a child run, ``RUN-healed`` beside the parent by default. The child continues from the
parent's last good checkpoint: the latest one written before the findings' evidence begins at
which their rules, run on the metrics as they stood then, are silent (from scratch when there
is none); it trains for the rest of the parent's budget. The result (:class:`HealResult`) puts
before and after side by side: each finding cleared or not, the metric that carried its
evidence over the same steps, and the return (the final evaluation when both runs have one,
else the last training episodes). Two findings that name one field with different values: the
smaller value is taken (a smaller step, fewer epochs, a narrower clip: the safer way), and the
result says so. The child's ``config.json`` records its parent, the checkpoint and the
changes (``healed_from``, and a ``heal`` entry in its history); ``rlx doctor CHILD`` shows it.

``rlx.train(..., heal=True, heal_max=3)`` and ``rlx train ... --heal [--heal-max N]``
(:func:`train_healing`) do the same within one run: the live doctor watches the rules whose fix
this config can take; when one fires the run stops (checkpoint saved), rolls back to the last
good checkpoint before the evidence, takes the change and goes on, at most ``heal_max`` times.
A blow-up (an immediate rule: NaN, a KL or a probability ratio far out) is named at the row it
happens, so a run that blows up in its first updates is rolled back after them, not at its end.
Each rollback (where the rule fired, the checkpoint used, the finding, the change) goes into
``summary.json`` and ``config.json`` (``heal``, and a ``heal`` entry in its history), ``rlx
doctor`` shows a "healed" block and the report marks it on the curves. A run that heals
checkpoints before its first update, then every twentieth of its budget and keeps them all,
unless its config sets a cadence (``checkpoint_every_s``, ``checkpoint_every_steps``,
``checkpoints_kept``): a rollback needs a checkpoint from before the evidence. Its
``summary.json`` counts the whole wall time, every stretch it trained (``wall_s``), and
gives each stretch (``legs``: the step it went on from, the step it ended at, its seconds).

This module trains through :func:`rlx.launch.plan.plan` and :func:`rlx.launch.plan.train_planned`;
a run folder's files are read and written by :mod:`rlx.runs`. The parent's files a child continues
from are copied only when they are the parent's own regular files (a link in the parent, or a
``checkpoints`` folder that is one, refuses the heal in one sentence), and written into the
child through descriptors of its real folders (:func:`rlx.runs.files.copy_regular`).

Why one module past rlx's 800 lines: healing after a run and healing while it trains share
every step (which findings carry a change, the last good checkpoint before their evidence, the
child run's files, before and after), and each step is a small function; apart, the two would
each need the other's half.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from rlx import registry
from rlx.callable_module import make_callable
from rlx.core.env_recipe import IN_PYTHON, Consent
from rlx.diagnostics.doctor import (
    Diagnosis,
    Finding,
    LiveDoctor,
    check_rule_ids,
    diagnose,
    doctor,
    is_immediate,
    watches,
)
from rlx.diagnostics.group_doctor import (
    EVAL_SOURCE,
    SOURCE_WORDS,
    final_eval_return,
    training_returns,
)
from rlx.diagnostics.rules import MIN_POINTS, RULES, RULES_BY_ID
from rlx.diagnostics.series import RunLog
from rlx.diagnostics.sources import read_run
from rlx.errors import ConfigError, RLXError, RunError, TrainingError
from rlx.launch.plan import Plan, plan, recorded_config, recorded_env, train_planned, user_words
from rlx.launch.references import with_references
from rlx.runs import CONFIG_FILE, EPISODES_FILE, METRICS_FILE, SUMMARY_FILE, read_record
from rlx.runs.checkpoints import DEFAULT_KEPT, checkpoints_after, list_checkpoints
from rlx.runs.files import copy_regular
from rlx.runs.folder import CHECKPOINT_DIR, inspect_folder, read_summary
from rlx.runs.group import is_group_folder

HEAL_CHECKPOINTS = 20
"""A run that heals checkpoints this many times over its budget (unless its config sets a
cadence), so that a rollback finds one before a finding's evidence."""
CHILD_SUFFIX = "-healed"
"""The child run of ``rlx doctor RUN --fix`` is ``RUN-healed`` unless named."""


# ============================================================================ the changes
@dataclasses.dataclass(frozen=True)
class Change:
    """One config field a heal changes: from ``current`` to ``value``, because ``rules`` named
    it; ``note`` says how a conflict between them was settled."""

    field: str
    current: Any
    value: Any
    rules: tuple[str, ...]
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "from": self.current,
            "to": self.value,
            "rules": list(self.rules),
            "note": self.note,
        }

    def __str__(self) -> str:
        return f"{self.field} {self.current!r} -> {self.value!r} ({', '.join(self.rules)})"


def merged_changes(findings: Iterable[Finding]) -> list[Change]:
    """The changes the findings name, one per field. Findings that name one field with
    different values: the smaller number is taken (a lower learning rate, fewer epochs, a
    narrower clip range: the safer step), else the first finding's value (the doctor ranks
    the likeliest fix first); the change's note says which and why."""
    by_field: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.field is not None and finding.suggested is not None:
            by_field.setdefault(finding.field, []).append(finding)
    changes = []
    for name, named in by_field.items():
        rules = tuple(f.rule.id for f in named)
        values = list(dict.fromkeys(_hashable(f.suggested) for f in named))
        if len(values) == 1:
            changes.append(Change(name, named[0].current, named[0].suggested, rules))
            continue
        asked = ", ".join(f"{f.rule.id} {f.suggested!r}" for f in named)
        if all(_is_number(f.suggested) for f in named):
            chosen = min(named, key=lambda f: f.suggested)
            why = "the smaller is the safer step"
        else:
            chosen = named[0]
            why = f"{chosen.rule.id} ({chosen.severity}) comes first"
        note = f"{name}: {asked}; took {chosen.suggested!r} ({why})"
        changes.append(Change(name, named[0].current, chosen.suggested, rules, note))
    return changes


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def fixable_rules(algo: str, config: Mapping[str, Any], exclude: Iterable[str] = ()) -> list[str]:
    """The rules the live doctor checks (:func:`~rlx.diagnostics.doctor.watches`) whose fix
    ``config`` can take (a field it has, a value to try, and not the budget:
    :func:`applicable_findings`)."""
    left_out, budget = set(exclude), registry.get(algo).budget_field
    return [
        rule.id
        for rule in RULES
        if watches(rule)
        and rule.id not in left_out
        and rule.advice(config, algo).field not in (None, budget)
    ]


def applicable_findings(
    findings: Iterable[Finding], budget_field: str
) -> tuple[list[Finding], list[str]]:
    """The findings a heal applies (those that name a field and a value), and one line for
    each it leaves out because it changes the budget (``train longer``): a heal trains for the
    rest of the run's budget, so that before and after compare; resuming the run with a larger
    budget is how to train longer."""
    applied, skipped = [], []
    for finding in findings:
        if finding.field is None or finding.suggested is None:
            continue
        if finding.field == budget_field:
            skipped.append(
                f"{finding.rule.id}: {finding.field} {finding.current!r} -> "
                f"{finding.suggested!r} not applied (a heal keeps the budget; resume the run with "
                f"{finding.field}={finding.suggested!r} to train longer)"
            )
            continue
        applied.append(finding)
    return applied, skipped


# ============================================================================ the checkpoint
def log_until(log: RunLog, step: float) -> RunLog:
    """``log`` as it stood at ``step``: every series cut after it."""
    metrics = {name: series.window(-math.inf, step) for name, series in log.metrics.items()}
    return dataclasses.replace(log, metrics=metrics)


def last_good_checkpoint(
    run_dir: str | Path, log: RunLog, findings: Sequence[Finding]
) -> tuple[int, Path] | None:
    """``(step, file)`` of the latest step checkpoint written before every finding's evidence
    begins at which the doctor could vouch for the run: the findings' rules, run on ``log`` as
    it stood then, had enough points to judge (:data:`MIN_POINTS` of each evidence metric; an
    immediate rule's, :func:`~rlx.diagnostics.doctor.is_immediate`, judged every row as it
    came, so any point will do) and found nothing. The run's start checkpoint (step 0, which a
    run that heals writes before its first update) is as good as starting over, and taken when
    no later one is vouched for. None when no checkpoint is that early: a run that went wrong
    from its start is started over."""
    if not findings:
        return None
    begins = min(f.evidence.step_start for f in findings)
    rules = [f.rule for f in findings]
    counted = {f.evidence.metric for f in findings if not is_immediate(f.rule)}
    for step, path in reversed(list_checkpoints(run_dir)):
        if step >= begins:
            continue
        if step == 0:  # nothing trained yet
            return step, path
        then = log_until(log, step)
        judged = all(len(then.metrics.get(m, ())) >= MIN_POINTS for m in counted)
        if judged and not diagnose(then, rules).findings:
            return step, path
    return None


# ============================================================================ the live doctor
class HealingDoctor(LiveDoctor):
    """The live doctor of a run that heals: as :class:`LiveDoctor`, and ``summary.json`` also
    gets the run's rollbacks (``heal``), for the child of ``rlx doctor --fix`` its lineage
    (``healed_from``), and for a run that heals as it trains its stretches (``legs``: the
    earlier ones given, then this one, timed from the run's start to its summary)."""

    def __init__(
        self,
        *args: Any,
        heals: Sequence[Mapping[str, Any]] = (),
        healed_from: Mapping[str, Any] | None = None,
        legs: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.heals, self.healed_from = list(heals), healed_from
        self.legs = None if legs is None else [dict(leg) for leg in legs]
        self._leg_start: tuple[int, float] | None = None
        self._last_step: int | None = None

    def on_start(self, step: int, info: Mapping[str, Any]) -> None:
        """The run (this stretch of it) starts training at ``step``."""
        self._leg_start = (int(step), time.perf_counter())

    def observe(self, step: float, values: Mapping[str, float]) -> None:
        self._last_step = int(step)
        super().observe(step, values)

    def summary(self) -> dict[str, Any]:
        leg = self._this_leg()  # timed before the final diagnosis, as the run's wall_s is
        lineage: dict[str, Any] = {}
        if self.heals:
            lineage["heal"] = self.heals
        if self.healed_from is not None:
            lineage["healed_from"] = dict(self.healed_from)
        # the final diagnosis reads the lineage as rlx doctor reads it from summary.json
        self.log.summary = {**self.log.summary, **lineage}
        out = super().summary()
        out.update(lineage)
        if self.legs is not None:
            out["legs"] = [*self.legs, leg]
        return out

    def _this_leg(self) -> dict[str, Any]:
        """This stretch: from its step to the last it logged, its seconds from its start to
        its summary (rounded down to the millisecond: the run's clock, ``wall_s``, starts
        before and counts them all)."""
        start, began = self._leg_start or (0, time.perf_counter())
        seconds = math.floor((time.perf_counter() - began) * 1000) / 1000
        return {
            "from_step": start,
            "to_step": start if self._last_step is None else self._last_step,
            "wall_s": seconds,
            "stopped_by": None if self.stop is None else self.stop.rule.id,
        }


# ============================================================================ rlx.heal(run_dir)
@dataclasses.dataclass(frozen=True)
class FindingOutcome:
    """One finding of the parent, before and after: its metric's median over the steps its
    evidence covered, in the parent and in the child, and whether the child still has it."""

    rule: str
    symptom: str
    metric: str
    steps: tuple[float, float]
    before: float
    after: float
    cleared: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "symptom": self.symptom,
            "metric": self.metric,
            "steps": list(self.steps),
            "before": _finite_or_none(self.before),
            "after": _finite_or_none(self.after),
            "cleared": self.cleared,
        }


@dataclasses.dataclass(frozen=True)
class HealResult:
    """What :func:`heal` did: the child run (None when nothing named a change), where it
    started, the changes, and before and after side by side."""

    parent: Path
    child: Path | None
    checkpoint: str | None = None
    """the parent's checkpoint the child continued from (relative to the parent), or None:
    from scratch"""
    checkpoint_step: int = 0
    changes: tuple[Change, ...] = ()
    outcomes: tuple[FindingOutcome, ...] = ()
    new_findings: tuple[str, ...] = ()
    """rules that fire on the child and did not on the parent"""
    skipped: tuple[str, ...] = ()
    """changes the findings name that the heal left out, and why"""
    return_measure: str | None = None
    return_before: float | None = None
    return_after: float | None = None
    reason: str | None = None
    """why there is no child"""

    @property
    def cleared(self) -> bool:
        """Every finding of the parent is gone from the child."""
        return self.child is not None and all(o.cleared for o in self.outcomes)

    @property
    def better(self) -> bool | None:
        """Whether the child's return beats the parent's (None: not both known)."""
        if self.return_before is None or self.return_after is None:
            return None
        return self.return_after > self.return_before

    def to_dict(self) -> dict[str, Any]:
        """``rlx doctor RUN --fix --json``."""
        return {
            "parent": str(self.parent),
            "child": None if self.child is None else str(self.child),
            "checkpoint": self.checkpoint,
            "checkpoint_step": self.checkpoint_step,
            "changes": [c.to_dict() for c in self.changes],
            "findings": [o.to_dict() for o in self.outcomes],
            "new_findings": list(self.new_findings),
            "return": {
                "measure": self.return_measure,
                "before": self.return_before,
                "after": self.return_after,
            },
            "cleared": self.cleared,
            "skipped": list(self.skipped),
            "reason": self.reason,
        }

    def __str__(self) -> str:
        if self.child is None:
            lines = [f"rlx doctor --fix: nothing to heal in {self.parent}: {self.reason}."]
            return "\n".join([*lines, *(f"  left out: {line}" for line in self.skipped)])
        start = (
            f"its checkpoint at step {self.checkpoint_step} ({self.checkpoint})"
            if self.checkpoint is not None
            else "scratch (no checkpoint before the evidence that the doctor could vouch for)"
        )
        lines = [
            f"rlx doctor --fix: {self.parent} healed into {self.child}",
            f"  from {start}, trained for the rest of its budget",
        ]
        for change in self.changes:
            lines.append(f"  change: {change}")
            if change.note:
                lines.append(f"    conflict: {change.note}")
        lines += [f"  left out: {line}" for line in self.skipped]
        rows = [("", "before", "after", "")]
        for o in self.outcomes:
            what = f"{o.rule}: {o.metric}, steps {o.steps[0]:.0f}-{o.steps[1]:.0f}"
            rows.append((what, _number(o.before), _number(o.after),
                         "cleared" if o.cleared else "still there"))  # fmt: skip
        if self.return_measure is not None:
            verdict = {True: "better", False: "not better", None: ""}[self.better]
            rows.append(("return", _number(self.return_before), _number(self.return_after),
                         verdict))  # fmt: skip
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            cells = [row[0].ljust(widths[0]), row[1].rjust(widths[1]), row[2].rjust(widths[2]),
                     row[3]]  # fmt: skip
            lines.append(("  " + "  ".join(cells)).rstrip())
        lines.append("  (a finding: its metric's median over the steps of its evidence)")
        if self.return_measure is not None:
            lines.append(f"  (return: {self.return_measure})")
        if self.new_findings:
            lines.append(f"  new in the child: {', '.join(self.new_findings)}")
        lines.append(f"  see both: rlx report {self.parent} {self.child}")
        return "\n".join(lines)


@with_references
def heal(
    run_dir: str | Path,
    child_dir: str | Path | None = None,
    *,
    trust_env_code: bool = False,
    progress: bool | None = None,
    consent: Consent = IN_PYTHON,
) -> HealResult:
    """Train a child of the run in ``run_dir`` with every change its findings name (what ``rlx
    doctor RUN --fix`` does), and compare the two.

    Args:
        run_dir: an rlx run folder.
        child_dir: the child's folder (default ``RUN-healed`` beside the run); it must not hold
            a run yet.
        trust_env_code: let the run's recorded env be rebuilt from code its ``config.json``
            names (an entry point), as ``rlx.train(resume=True)`` needs.
        progress: show the child's progress bar (None: when stderr is a terminal).
        consent: words the errors for where the user is (Python or the command line).

    Returns:
        :class:`HealResult`; ``print`` it for the side-by-side table. Its ``child`` is None
        when no finding names a change the run's config can take.
    """
    parent = Path(run_dir)
    if is_group_folder(parent):
        raise ConfigError(
            f"{parent} is a seed group; heal one of its seeds' folders (e.g. {parent}/seed-0)."
        )
    try:
        record = read_record(parent)
    except RunError as exc:
        raise RunError(f"only an rlx run folder can be healed: {exc}") from exc
    diagnosis = doctor(parent)
    if not diagnosis.findings:
        return HealResult(parent, None, reason="the doctor has no finding")
    spec = _algorithm(record)
    applied, skipped = applicable_findings(diagnosis.findings, spec.budget_field)
    changes = merged_changes(applied)
    if not changes:
        why = "no finding names a config field of this run to change, but its budget"
        if not skipped:
            why = "no finding names a config field of this run to change"
        return HealResult(parent, None, skipped=tuple(skipped), reason=why)
    child = Path(child_dir) if child_dir is not None else default_child(parent)
    _check_child(parent, child, consent)
    existed = child.exists()
    chosen = last_good_checkpoint(parent, diagnosis.log, applied)
    lineage = {
        "parent": str(parent),
        "checkpoint": None if chosen is None else str(chosen[1].relative_to(parent)),
        "step": 0 if chosen is None else chosen[0],
        "changes": [c.to_dict() for c in changes],
        "findings": [f.to_dict() for f in applied],
    }
    history = {
        "kind": "heal",
        "parent": lineage["parent"],
        "checkpoint": lineage["checkpoint"],
        "changes": lineage["changes"],
    }
    command = " ".join(sys.argv) if consent.flags else f"rlx.heal({str(parent)!r})"
    try:
        planned = _child_plan(record, parent, child, chosen, changes, trust_env_code, consent)
        planned = dataclasses.replace(
            planned, command=command, record={"healed_from": lineage}, history=history
        )
        fields = _fields(planned.config)
        live = HealingDoctor(
            planned.spec.name, planned.env_id, fields, printer=_to_stderr, healed_from=lineage
        )
        train_planned(planned, progress=progress, live_doctor=live)
    except BaseException:
        if not (child / SUMMARY_FILE).exists():  # refused before it trained: leave nothing
            _undo_child(child, existed)
        raise
    result = compare(diagnosis, doctor(child), changes, chosen)
    return dataclasses.replace(result, skipped=tuple(skipped))


def _algorithm(record: Any) -> Any:
    """The registered algorithm of a run's record; RunError naming the file when rlx does not
    know it."""
    try:
        return registry.get(record.algo)
    except ConfigError as exc:
        raise RunError(
            f"{record.path / CONFIG_FILE} names an algorithm rlx cannot heal: {exc}"
        ) from exc


def default_child(parent: Path) -> Path:
    """``RUN-healed`` beside ``RUN`` (``RUN`` resolved when it ends in ``.`` or ``..``)."""
    base = parent if parent.name not in ("", ".", "..") else parent.resolve()
    return base.with_name(base.name + CHILD_SUFFIX)


def _check_child(parent: Path, child: Path, consent: Consent) -> None:
    """A ConfigError or RunError unless ``child`` is a new folder of its own: absent or empty,
    not the parent nor inside it, and not a symbolic link (whose writes would land where it
    points, a place the user did not name)."""
    another = f"choose another folder for it ({consent.arg('run_dir', 'DIR')})"
    if child.resolve() == parent.resolve():
        raise ConfigError(f"the healed run needs a folder of its own, not {parent}; {another}.")
    if child.resolve().is_relative_to(parent.resolve()):
        raise ConfigError(
            f"the healed run needs a folder of its own, not one inside {parent}; {another}."
        )
    if child.is_symlink():
        raise RunError(f"{child} is a symbolic link (to {os.readlink(child)}); {another}.")
    state = inspect_folder(child)
    if state.kind == "run":
        raise RunError(
            f"{child} already holds a run (a heal done before?); see it with rlx doctor "
            f"{child}, or {another}."
        )
    if state.kind != "new":
        raise RunError(f"{child} is not empty; {another}.")


def _child_plan(
    record: Any,
    parent: Path,
    child: Path,
    chosen: tuple[int, Path] | None,
    changes: Sequence[Change],
    trust_env_code: bool,
    consent: Consent,
) -> Plan:
    """The child's plan: the parent's run continued in ``child`` from ``chosen`` (its files up
    to there copied in), or started over from the parent's config, with ``changes``."""
    overrides = {c.field: c.value for c in changes}
    spec = _algorithm(record)
    if chosen is None:
        config = recorded_config(spec, record, consent=consent, warn=True)
        env, recipe = recorded_env(record, trust_env_code=trust_env_code, consent=consent)
        fields = {**_fields(config), **overrides}
        planned = plan(
            spec.name,
            env,
            run_dir=child,
            overrides=fields,
            trust_env_code=trust_env_code,
            consent=consent,
        )
        return planned if recipe is None else dataclasses.replace(planned, recipe=recipe)
    step, checkpoint = chosen
    # the env's consent asked of the parent, before a file is copied (nothing is built here)
    recorded_env(record, trust_env_code=trust_env_code, consent=consent)
    # only the parent's own regular files (a link there is refused in one sentence), written
    # as the child's own files through descriptors of its real folders (never through a link)
    for name in (CONFIG_FILE, METRICS_FILE, EPISODES_FILE):
        if (parent / name).is_file() or (parent / name).is_symlink():
            copy_regular(parent / name, child / name, source_root=parent, root=child)
    target = child / CHECKPOINT_DIR / checkpoint.name
    copy_regular(checkpoint, target, source_root=parent, root=child)
    best = parent / CHECKPOINT_DIR / "best.pt"
    if best.is_file() and best not in checkpoints_after(parent, step):
        copy_regular(best, child / CHECKPOINT_DIR / best.name, source_root=parent, root=child)
    return plan(
        spec.name,
        None,
        run_dir=child,
        resume=True,
        resume_from=checkpoint.name,
        overrides=overrides,
        trust_env_code=trust_env_code,
        consent=consent,
    )


def _undo_child(child: Path, existed: bool) -> None:
    """Leave the child's folder as it was before a heal that was refused: removed when the
    heal made it, emptied when it was an empty folder already (:func:`_check_child`)."""
    if not existed:
        shutil.rmtree(child, ignore_errors=True)
        return
    for path in child.iterdir():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def compare(
    before: Diagnosis,
    after: Diagnosis,
    changes: Sequence[Change],
    chosen: tuple[int, Path] | None,
) -> HealResult:
    """Before and after side by side: each finding of ``before`` cleared or not in ``after``,
    its metric over the steps of its evidence in both, and the two runs' returns."""
    still = {f.rule.id for f in after.findings}
    outcomes = []
    for f in before.findings:
        metric, steps = f.evidence.metric, (f.evidence.step_start, f.evidence.step_end)
        outcomes.append(
            FindingOutcome(
                f.rule.id,
                f.rule.symptom,
                metric,
                steps,
                _median_between(before.log, metric, *steps),
                _median_between(after.log, metric, *steps),
                f.rule.id not in still,
            )
        )
    had = {f.rule.id for f in before.findings}
    start = 0 if chosen is None else chosen[0]
    measure, return_before, return_after = compared_returns(before.log, after.log, start)
    parent = before.log.source
    return HealResult(
        parent,
        after.log.source,
        checkpoint=None if chosen is None else str(chosen[1].relative_to(parent)),
        checkpoint_step=0 if chosen is None else chosen[0],
        changes=tuple(changes),
        outcomes=tuple(outcomes),
        new_findings=tuple(rule for rule in still if rule not in had),
        return_measure=measure,
        return_before=return_before,
        return_after=return_after,
    )


def compared_returns(
    before: RunLog, after: RunLog, start: float
) -> tuple[str, float | None, float | None]:
    """The two runs' returns, and in what words: the final evaluation's mean return when both
    have one; else the mean return of the training episodes in the second half of the steps
    the heal trained again (from ``start``, the step the child went on from, to the end): where
    the changed run ended up, over many episodes, where the last few of a small budget would
    be a coin toss (both runs share what came before ``start``)."""
    evaluated = final_eval_return(before), final_eval_return(after)
    if None not in evaluated:
        return SOURCE_WORDS[EVAL_SOURCE], *evaluated
    series = [training_returns(log) for log in (before, after)]
    ends = [float(s.steps[-1]) for s in series if s is not None and len(s)]
    if not ends:
        return "the mean return of the training episodes", None, None
    end = min(ends)
    middle = start + (end - start) / 2
    means = []
    for returns in series:
        part = None if returns is None else returns.window(middle, math.inf).values
        means.append(float(np.mean(part)) if part is not None and len(part) else None)
    words = (
        f"the mean return of the training episodes over steps {middle:.0f}-{end:.0f}, the "
        "second half of what the heal trained again"
    )
    return words, means[0], means[1]


def _median_between(log: RunLog, metric: str, start: float, end: float) -> float:
    """The median of ``metric`` between two steps (NaN where the run has no point there)."""
    series = log.get(metric)
    if series is None:
        return math.nan
    values = series.finite().window(start, end).values
    return float(np.median(values)) if len(values) else math.nan


# ============================================================================ rlx train --heal
def train_healing(
    planned: Plan,
    *,
    heal_max: int = 3,
    progress: bool | None = None,
    tensorboard: bool = False,
    wandb: bool = False,
    stop_on: Sequence[str] = (),
    callbacks: Sequence[Any] = (),
    trust_env_code: bool = False,
) -> Any:
    """Train ``planned`` and heal it as it goes (``rlx.train(..., heal=True)``), at most
    ``heal_max`` times:

    - **while it trains**: when a live rule whose fix the config can take fires, the run stops
      with its checkpoint saved (a NaN ends it at once, before its checkpoint), goes back to
      its last good checkpoint before the evidence (:func:`last_good_checkpoint`: the start
      checkpoint, written before the first update, for a blow-up in the first updates; from
      scratch when there is none), takes the change and trains on. Each rule does this once:
      a rule that fires again after its own fix is left to the end (its fix did not hold from
      there, and stopping again would spend the budget). An immediate rule
      (:func:`~rlx.diagnostics.doctor.is_immediate`, a blow-up named at the row it happens) is
      the exception: it stops the run again, and its fix is taken again on the changed config,
      since it costs only the updates since the rollback;
    - **at its end**: the findings of the whole run (every rule, those that judge a whole run
      too) that name a change are healed as ``rlx doctor --fix`` heals them, every change at
      once, from the last good checkpoint before their evidence; the run trains on to the end
      of its budget and is judged again.

    ``summary.json``'s ``wall_s`` is the whole wall time, every stretch counted (a stretch
    rolled back included), and ``legs`` lists the stretches. Rules in ``stop_on`` end the run
    as without healing; so do a callback returning False and Ctrl-C. Returns the agent of the
    last stretch."""
    if isinstance(heal_max, bool) or not isinstance(heal_max, int) or heal_max < 0:
        raise ConfigError(
            f"heal_max={heal_max!r} is the most rollbacks a healing run makes: a whole number >= 0."
        )
    user_stops = check_rule_ids(tuple(stop_on))
    planned = with_heal_checkpoints(planned)
    heals: list[dict[str, Any]] = []
    if planned.resume is not None:  # a healed run resumed: its rollbacks so far (as data)
        recorded = planned.resume.extra.get("heal")
        heals = [h for h in recorded if isinstance(h, dict)] if isinstance(recorded, list) else []
    legs: list[dict[str, Any]] = []
    if planned.resume is not None:  # and the stretches it trained before (summary.json's)
        earlier = read_summary(planned.run_dir).get("legs")
        if isinstance(earlier, list):
            legs = [leg for leg in earlier if isinstance(leg, dict)]
    healed = len(heals)  # heal_max counts the run's rollbacks, those before a resume too
    while True:
        fields = _fields(planned.config)
        done = _healed_once(heals)
        watched = (
            fixable_rules(planned.spec.name, fields, {*user_stops, *done})
            if healed < heal_max
            else []
        )
        live = HealingDoctor(
            planned.spec.name,
            planned.env_id,
            fields,
            stop_on=(*user_stops, *watched),
            printer=_to_stderr,
            heals=heals,
            legs=legs,
        )
        if heals:
            planned = dataclasses.replace(planned, record={**(planned.record or {}), "heal": heals})
        failure: TrainingError | None = None
        try:
            agent = train_planned(
                planned,
                progress=progress,
                tensorboard=tensorboard,
                wandb=wandb,
                callbacks=callbacks,
                live_doctor=live,
            )
        except TrainingError as exc:  # a NaN: the live doctor named it as it came
            if live.stop is None or live.stop.rule.id not in watched:
                raise
            agent, failure = None, exc
        ended = time.perf_counter()
        summary = read_summary(planned.run_dir)
        step = int(summary.get("steps") or 0)
        recorded_legs = summary.get("legs")
        if isinstance(recorded_legs, list):
            legs = [leg for leg in recorded_legs if isinstance(leg, dict)]
        if live.stop is not None and live.stop.rule.id in watched:
            findings, when = [live.stop], "live"
        elif failure is None and summary.get("status") == "completed" and healed < heal_max:
            final = [f for f in doctor(planned.run_dir).findings if f.rule.id not in user_stops]
            findings, skipped = applicable_findings(final, planned.spec.budget_field)
            for line in skipped:
                _to_stderr(f"rlx heal: {line}")
            when = "end"
            if not findings:
                return agent
        else:
            return _ended(agent, failure)
        try:
            heal_entry, planned = _rolled_back(planned, findings, step, when, trust_env_code)
        except RLXError as exc:
            _to_stderr(
                f"rlx heal: cannot apply {'; '.join(f.change() for f in findings)} ({exc}); the "
                f"run ended at step {step} with its checkpoint saved."
            )
            return _ended(agent, failure)
        heals.append(heal_entry)
        healed += 1
        start = (
            f"its checkpoint at step {heal_entry['from_step']}"
            if heal_entry["checkpoint"]
            else "scratch (no checkpoint before the evidence that the doctor could vouch for)"
        )
        changes = "; ".join(
            f"{c['field']} {c['from']!r} -> {c['to']!r}" for c in heal_entry["changes"]
        )
        where = "at step" if when == "live" else "at the end, step"
        _to_stderr(
            f"rlx heal: {', '.join(heal_entry['rules'])} {where} {step}: back to {start} with "
            f"{changes} ({healed} of at most {heal_max})"
        )
        # the clock goes on: the next stretch starts at the seconds spent so far
        spent = _number_or(summary.get("wall_s"), 0.0) + (time.perf_counter() - ended)
        planned = dataclasses.replace(planned, wall_offset=spent, checkpoint_at_start=True)


def _healed_once(heals: Sequence[Mapping[str, Any]]) -> set[str]:
    """The rules a live rollback already healed, which are not watched again (immediate
    rules are: a blow-up after its fix is caught as early, and its fix taken again)."""
    return {
        rule
        for entry in heals
        if entry.get("when") == "live" and isinstance(entry.get("rules"), list)
        for rule in entry["rules"]
        if isinstance(rule, str) and not (rule in RULES_BY_ID and is_immediate(RULES_BY_ID[rule]))
    }


def _ended(agent: Any, failure: TrainingError | None) -> Any:
    """The agent of a run that ended; the error of one a NaN ended that was not healed."""
    if failure is not None:
        raise failure
    return agent


def _number_or(value: Any, default: float) -> float:
    return float(value) if _is_number(value) and math.isfinite(value) else default


def with_heal_checkpoints(planned: Plan) -> Plan:
    """``planned`` with a checkpoint before its first update (a rollback from a blow-up in the
    first updates goes back to it), and checkpoints every :data:`HEAL_CHECKPOINTS`-th of its
    budget, all kept, where its config has those fields and sets no cadence (nor a number
    kept) of its own."""
    config = planned.config
    changes: dict[str, Any] = {}
    if (
        hasattr(config, "checkpoint_every_steps")
        and config.checkpoint_every_steps is None
        and getattr(config, "checkpoint_every_s", None) is None
    ):
        budget = getattr(config, planned.spec.budget_field, None)
        if _is_number(budget) and budget > 0:
            changes["checkpoint_every_steps"] = max(1, int(budget) // HEAL_CHECKPOINTS)
    if getattr(config, "checkpoints_kept", None) == DEFAULT_KEPT:
        changes["checkpoints_kept"] = 0
    planned = dataclasses.replace(planned, checkpoint_at_start=True)
    if not changes:
        return planned
    shown = ", ".join(f"{name}={value}" for name, value in changes.items())
    _to_stderr(f"rlx heal: {shown}, so that a rollback finds a checkpoint before the evidence")
    with user_words(planned.spec):
        return dataclasses.replace(planned, config=dataclasses.replace(config, **changes))


def _rolled_back(
    planned: Plan,
    findings: Sequence[Finding],
    step: int,
    when: str,
    trust_env_code: bool,
) -> tuple[dict[str, Any], Plan]:
    """The record of one rollback (``when``: ``live`` for a rule that stopped the run, ``end``
    for the findings of the whole run), and the plan that continues the run from its last
    good checkpoint (or starts it over) with the findings' changes."""
    run_dir = planned.run_dir
    chosen = last_good_checkpoint(run_dir, read_run(run_dir), findings)
    changes = merged_changes(findings)
    heal_entry = {
        "step": step,
        "when": when,
        "rules": [f.rule.id for f in findings],
        "checkpoint": None if chosen is None else chosen[1].name,
        "from_step": 0 if chosen is None else chosen[0],
        "changes": [c.to_dict() for c in changes],
        "findings": [f.to_dict() for f in findings],
    }
    overrides = {c.field: c.value for c in changes}
    name = planned.spec.name
    if chosen is None:
        fields = {**_fields(planned.config), **overrides}
        new = plan(
            name,
            planned.env,
            run_dir=run_dir,
            overwrite=True,
            overrides=fields,
            trust_env_code=trust_env_code,
        )
        new = dataclasses.replace(new, recipe=planned.recipe)
    else:
        new = plan(
            name,
            planned.env,
            run_dir=run_dir,
            resume=True,
            resume_from=chosen[1].name,
            overrides=overrides,
            trust_env_code=trust_env_code,
        )
    history = {
        "kind": "heal",
        "rolled_back_at": step,
        "checkpoint": heal_entry["checkpoint"],
        "rules": heal_entry["rules"],
        "changes": heal_entry["changes"],
    }
    return heal_entry, dataclasses.replace(new, command=planned.command, history=history)


# ============================================================================ helpers
def _fields(config: Any) -> dict[str, Any]:
    return (
        dataclasses.asdict(config)
        if dataclasses.is_dataclass(config) and not isinstance(config, type)
        else {}
    )


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _number(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


# ============================================================================ rlx.heal(...)
make_callable(__name__, "heal")  # rlx.heal(...) calls heal

__all__ = [
    "CHILD_SUFFIX",
    "HEAL_CHECKPOINTS",
    "Change",
    "FindingOutcome",
    "HealResult",
    "HealingDoctor",
    "compare",
    "default_child",
    "fixable_rules",
    "heal",
    "last_good_checkpoint",
    "log_until",
    "merged_changes",
    "train_healing",
    "with_heal_checkpoints",
]
