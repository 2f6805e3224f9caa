"""The doctor: every rule of :mod:`rlx.diagnostics.rules` over a run's metric series.

``rlx.doctor(run_dir)`` and ``rlx doctor RUN_DIR [--strict] [--json]`` read an rlx run
folder, or another library's logs (TensorBoard, Stable-Baselines3, TRL), and report each
finding with its evidence (metric, steps, value, threshold), its cause, and the fix: which
config field to change and to what value. :class:`LiveDoctor` runs the same rules on the
metrics of a run in progress.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx import metrics as M
from rlx.diagnostics.rules import (
    ERROR,
    RULES,
    RULES_BY_ID,
    Advice,
    Evidence,
    Rule,
    finding_order,
)
from rlx.diagnostics.series import GrowingSeries, RunLog, Series
from rlx.diagnostics.sources import read_run, with_episodes
from rlx.errors import ConfigError


@dataclass(frozen=True)
class Finding:
    """A rule that fired on a run: what was seen, why it happens, what to change."""

    rule: Rule
    evidence: Evidence
    field: str | None = None  # the run's config field that carries the fix, when it has one
    current: Any = None  # its value in the run
    suggested: Any = None  # the value to try
    advice: str | None = None  # the fix in words, fitted to the run's algorithm and settings

    @classmethod
    def of(cls, rule: Rule, evidence: Evidence, advice: Advice) -> Finding:
        return cls(rule, evidence, advice.field, advice.current, advice.suggested, advice.text)

    @property
    def severity(self) -> str:
        return self.rule.severity

    @property
    def fix(self) -> str:
        """The fix in words for this run (the rule's table words when nothing fitted it)."""
        return self.advice or self.rule.fix

    def change(self) -> str:
        """``"lower the learning rate: learning_rate 0.001 -> 0.0003"``, or the fix in words
        when the run's config is unknown (another library's logs)."""
        if self.field is None or self.suggested is None:
            return self.fix
        return f"{self.fix}: {self.field} {self.current!r} -> {self.suggested!r}"

    def line(self) -> str:
        """One line, as the live doctor prints it."""
        return f"{self.severity}: {self.rule.symptom} ({self.evidence.describe()}); {self.change()}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.id,
            "severity": self.severity,
            "symptom": self.rule.symptom,
            "cause": self.rule.cause,
            "fix": self.fix,
            "table_fix": self.rule.fix,
            "config_field": self.field,
            "current": self.current,
            "suggested": self.suggested,
            "evidence": {
                "metric": self.evidence.metric,
                "step_start": self.evidence.step_start,
                "step_end": self.evidence.step_end,
                "value": self.evidence.value,
                "threshold": self.evidence.threshold,
                "statistic": self.evidence.statistic,
            },
        }


@dataclass
class Diagnosis:
    """The doctor's answer for one run: iterate it (or read ``findings``) for the findings,
    print it for the report."""

    log: RunLog
    findings: list[Finding] = field(default_factory=list)

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def healthy(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": str(self.log.source),
            "kind": self.log.kind,
            "algo": self.log.algo,
            "env": self.log.env,
            "metrics": sorted(self.log.metrics),
            "sandbox": self.log.summary.get("sandbox"),
            "healed": healed_lines(self.log.summary),
            "findings": [f.to_dict() for f in self.findings],
        }

    def __str__(self) -> str:
        head = f"rlx doctor: {self.log.label}"
        sandbox = sandbox_line(self.log.summary.get("sandbox"))
        if sandbox:
            head += f"\n{sandbox}"
        head += "".join(f"\nhealed: {line}" for line in healed_lines(self.log.summary))
        if self.healthy:
            return f"{head}\nno findings {checked_what(self.log)}."
        lines = [head]
        for f in self.findings:
            lines += [
                f"[{f.severity}] {f.rule.symptom}",
                f"  evidence: {f.evidence.describe()}",
                f"  cause:    {f.rule.cause}",
                f"  fix:      {f.change()}",
            ]
        return "\n".join(lines)


def sandbox_line(record: Any) -> str:
    """The run summary's line on the code sandbox: the protections that were on, and any
    that were missing (a run allowed to run model-written code unisolated)."""
    if not isinstance(record, dict):
        return ""
    on = ", ".join(str(p).replace("_", " ") for p in record.get("protections", [])) or "none"
    missing = record.get("missing") or []
    if not missing:
        return f"sandbox: model-written code ran isolated ({on})"
    return f"sandbox: UNISOLATED, allowed by allow_unisolated (on: {on}; missing: " + (
        "; ".join(str(m) for m in missing) + ")"
    )


MAX_HEALS_SHOWN = 50
"""A run's rollbacks the doctor lists and the report marks, at most (a healing run makes
``heal_max``, 3 by default; a folder can claim any number)."""
MAX_LABEL = 200
"""Characters of a rollback's changes shown on the report's curve."""


def healed_lines(summary: Mapping[str, Any]) -> list[str]:
    """A healed run's lineage from its ``summary.json`` (:mod:`rlx.launch.heal`), one line each: the
    parent it was healed from (``healed_from``), and each rollback while it trained
    (``heal``), the first :data:`MAX_HEALS_SHOWN`. Read as data a folder may hold in any
    shape: what is not a mapping (nor a list where one is read) is skipped."""
    lines = []
    origin = summary.get("healed_from")
    if isinstance(origin, Mapping):
        start = (
            f"its checkpoint at step {origin.get('step')} ({origin.get('checkpoint')})"
            if origin.get("checkpoint")
            else "scratch"
        )
        words = [f"{_change_words(c)} ({', '.join(_strings(c.get('rules')))})"
                 for c in _changes(origin)]  # fmt: skip
        lines.append(
            f"a child of {origin.get('parent')} from {start}, with "
            + ("; ".join(words) or "no change")
        )
    heals = _entries(summary.get("heal"))
    for entry in heals[:MAX_HEALS_SHOWN]:
        start = (
            f"its checkpoint at step {entry.get('from_step')}"
            if entry.get("checkpoint")
            else "scratch"
        )
        when = "as it trained" if entry.get("when") == "live" else "at its end"
        rules = ", ".join(_strings(entry.get("rules")))
        lines.append(
            f"at step {entry.get('step')} ({when}) {rules}: back to {start} with "
            + "; ".join(_change_words(c) for c in _changes(entry))
        )
    if len(heals) > MAX_HEALS_SHOWN:
        lines.append(f"... and {len(heals) - MAX_HEALS_SHOWN} more rollbacks (summary.json)")
    return lines


def heal_markers(summary: Mapping[str, Any]) -> list[tuple[float, str]]:
    """``(step, label)`` where a healed run changed course: each rollback's checkpoint step,
    and the step a child of ``rlx doctor --fix`` started from (for the report's curves)."""
    marks = []
    entries = _entries([summary.get("healed_from"), *_entries(summary.get("heal"))])
    for entry in entries[: MAX_HEALS_SHOWN + 1]:
        step = entry.get("from_step", entry.get("step"))
        if isinstance(step, (int, float)) and not isinstance(step, bool):
            if isinstance(step, int) and abs(step) > 2**1000:  # no float holds it
                continue
            if math.isfinite(step):
                label = "; ".join(_change_words(c) for c in _changes(entry))
                marks.append((float(step), label[:MAX_LABEL]))
    return marks


def _entries(value: Any) -> list[Mapping[str, Any]]:
    """The mappings of a list a folder holds (none when it holds no list)."""
    return [e for e in value if isinstance(e, Mapping)] if isinstance(value, list) else []


def _changes(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return _entries(entry.get("changes"))


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _change_words(change: Mapping[str, Any]) -> str:
    return f"{change.get('field')} {change.get('from')!r} -> {change.get('to')!r}"


def applicable(rule: Rule, log: RunLog) -> bool:
    """A rule applies when the run logged its metric (and, for algorithm-specific rules, the
    run's algorithm is one of them; another library's run of unknown algorithm passes)."""
    if rule.algos is not None and log.algo is not None and log.algo not in rule.algos:
        return False
    return rule.metric == "*" or any(log.get(metric) is not None for metric in rule.metrics)


def checked_what(log: RunLog) -> str:
    """What the rules looked at in a run, after "no findings": the metrics a rule of the
    troubleshooting table read, and that every logged metric was checked for NaN or inf (the
    one rule for metrics no other rule knows, such as a board game's losses and arena
    results)."""
    read = sorted(applicable_metrics(log))
    logged = sorted(log.metrics)
    if not logged:
        return "(the run has logged no metric yet)"
    if read:
        return f"(checked {', '.join(read)}, and all {len(logged)} logged metrics for NaN or inf)"
    shown = ", ".join(logged[:6]) + (", ..." if len(logged) > 6 else "")
    return (
        f"(checked the {len(logged)} logged metrics for NaN or inf: {shown}; no other rule of "
        "the troubleshooting table reads these metrics)"
    )


def applicable_metrics(log: RunLog) -> set[str]:
    return {
        metric
        for rule in RULES
        if rule.metric != "*" and applicable(rule, log)
        for metric in rule.metrics
        if log.get(metric) is not None
    }


def diagnose(log: RunLog, rules: Iterable[Rule] = RULES) -> Diagnosis:
    """Every applicable rule over ``log``, each finding with its fix fitted to the run
    (:meth:`~rlx.diagnostics.rules.Rule.advice_for`); findings ranked by how likely their fix
    is to help (:func:`~rlx.diagnostics.rules.finding_order`: a blow-up before what follows
    from it, the outcome alone last)."""
    findings = []
    for rule in rules:
        if not applicable(rule, log):
            continue
        evidence = rule.check(log)
        if evidence is None:
            continue
        findings.append(Finding.of(rule, evidence, rule.advice_for(log, evidence)))
    findings.sort(key=lambda f: finding_order(f.rule, f.evidence))
    return Diagnosis(log, findings)


def doctor(run: str | Path | RunLog) -> Diagnosis:
    """Diagnose a run folder (rlx's, or another library's logs): ``print(rlx.doctor(path))``.
    A seed group's folder is diagnosed by :class:`rlx.SeedGroup` (``rlx doctor GROUP``)."""
    from rlx.runs.group import is_group_folder

    if not isinstance(run, RunLog) and is_group_folder(run):
        raise ConfigError(
            f"{run} is a seed group: rlx.SeedGroup.read({str(run)!r}) opens it, and its doctor() "
            "and report() compare the seeds."
        )
    log = run if isinstance(run, RunLog) else read_run(run)
    return diagnose(log)


def check_rule_ids(ids: Sequence[str]) -> tuple[str, ...]:
    """``ids`` validated against the rule table (for ``stop_on``)."""
    unknown = [i for i in ids if i not in RULES_BY_ID]
    if unknown:
        raise ConfigError(
            f"stop_on: unknown rule {unknown[0]!r}; rules are {', '.join(RULES_BY_ID)}."
        )
    return tuple(ids)


def is_immediate(rule: Rule) -> bool:
    """Whether the live doctor checks ``rule`` on every logged row (:attr:`Rule.immediate`): a
    blow-up (NaN, a KL or a probability ratio far out in the first updates) is named at the
    row it happens."""
    return rule.immediate


def watches(rule: Rule) -> bool:
    """Whether the live doctor checks ``rule`` during training (on its schedule, or on every
    row)."""
    return rule.live or is_immediate(rule)


class LiveDoctor:
    """The rules on the metrics of a run in progress, fed one logged row at a time, and every
    finished episode as the run logs it.

    It reads what ``rlx doctor`` reads of the run folder (:func:`~rlx.diagnostics.sources.
    with_episodes`: the rows, and the episodes in place of too few logged returns), so
    :meth:`final`, ``summary.json``'s ``doctor``, equals ``rlx.doctor(run_dir)``. Immediate
    rules (:func:`is_immediate`) are checked on every row, so a blow-up is named at its step;
    the other live rules every ``every`` rows (every tenth of the rows so far once that is
    more), and all rules at the end. A rule that fires prints one line, once per run. Rules in
    ``stop_on`` set :attr:`stop` when they fire, and the training loop ends the run with its
    checkpoint saved. It is a :class:`rlx.runs.RunObserver`: ``rlx.train`` attaches it to the
    run from above.
    """

    def __init__(
        self,
        algo: str | None,
        env: str | None,
        config: Mapping[str, Any],
        *,
        stop_on: Sequence[str] = (),
        every: int = 10,
        printer: Any = print,
    ) -> None:
        self.log = RunLog(Path("."), "rlx", algo=algo, env=env, config=dict(config))
        self.stop_on = set(check_rule_ids(stop_on))
        self.every, self.printer = max(1, every), printer
        self.rows: dict[str, GrowingSeries] = {}
        self.episodes = {M.EPISODE_RETURN: GrowingSeries(), M.EPISODE_LENGTH: GrowingSeries()}
        self.fired: dict[str, Finding] = {}
        self.stop: Finding | None = None
        self.immediate = [rule for rule in RULES if is_immediate(rule)]
        self.scheduled = [rule for rule in RULES if rule.live and not is_immediate(rule)]
        self._rows = 0
        self._next_check = self.every

    # ------------------------------------------------------------------ RunObserver
    @property
    def stop_reason(self) -> str | None:
        """Set once a ``stop_on`` rule fired: the run ends with its checkpoint saved."""
        if self.stop is None:
            return None
        return f"rlx doctor: stopping the run (stop_on {self.stop.rule.id})"

    def attach(self, run_dir: Path, resumed: bool) -> None:
        """A resumed run is judged whole: start from the rows and the episodes logged before
        its checkpoint."""
        if resumed:
            from rlx.runs import read_episodes, read_metrics

            self.preload(
                {k: Series.from_pairs(v) for k, v in read_metrics(run_dir).items()},
                read_episodes(run_dir),
            )

    def summary(self) -> dict[str, Any]:
        """``doctor``: every rule over the whole run (live findings that did not last are not
        kept); ``stopped_by``: the rule that ended it."""
        out: dict[str, Any] = {"doctor": [f.rule.id for f in self.final().findings]}
        if self.stop is not None:
            out["stopped_by"] = self.stop.rule.id
        return out

    def on_summary(self, step: int, summary: Mapping[str, Any]) -> None:
        """The run's ``summary.json`` as written so far (its steps, the final evaluation): the
        rules that read it judge it at the end as ``rlx doctor`` will from the file."""
        self.log.summary = dict(summary)

    def on_config(self, step: int, config: Mapping[str, Any]) -> None:
        """The run's config completed during training (:meth:`rlx.runs.Run.record_config`):
        the fixes are fitted to it, as ``rlx doctor`` reads it from ``config.json``."""
        self.log.config = dict(config)

    # ------------------------------------------------------------------ feeding rows
    def preload(
        self,
        metrics: Mapping[str, Series],
        episodes: Sequence[tuple[float, float, float]] = (),
    ) -> None:
        """Start from series already logged (a resumed run's rows before the checkpoint) and
        its episodes, ``(step, return, length)`` each."""
        for key, series in metrics.items():
            self.rows.setdefault(key, GrowingSeries()).extend(series.steps, series.values)
        if episodes:
            ends, returns, lengths = np.asarray(episodes, dtype=np.float64).T
            self.observe_episodes(ends, returns, lengths)

    def observe(self, step: float, values: Mapping[str, float]) -> None:
        """One logged row: the immediate rules now, the other live rules on their schedule."""
        for key, value in values.items():
            self.rows.setdefault(key, GrowingSeries()).append(float(step), float(value))
        self._rows += 1
        if self.immediate:  # on this row alone: the cost does not grow with the run
            self._report(self._diagnose(self.immediate, self._row_log(step, values)))
        # every `every` rows early on, then every tenth of the rows so far: the rules read the
        # whole history, so checking at a fixed rate would cost quadratic time on long runs
        if self._rows >= self._next_check:
            self._report(self._diagnose(self.scheduled))
            self._next_check = self._rows + max(self.every, self._rows // 10)

    def observe_episodes(self, ends: Any, returns: Any, lengths: Any) -> None:
        """Finished episodes as the run logs them: the env step each ended at, its return and
        its length, each read as ``episodes.csv`` holds it (whole steps and lengths)."""
        ends, returns, lengths = (np.asarray(x).reshape(-1) for x in (ends, returns, lengths))
        steps = ends.astype(np.int64).astype(np.float64)
        self.episodes[M.EPISODE_RETURN].extend(steps, returns.astype(np.float64))
        self.episodes[M.EPISODE_LENGTH].extend(steps, lengths.astype(np.int64).astype(np.float64))

    def check(self) -> list[Finding]:
        """Run the live rules now; returns the findings that fired for the first time."""
        return self._report(self._diagnose([*self.immediate, *self.scheduled]))

    def final(self) -> Diagnosis:
        """Every rule over the whole run, at its end (what ``summary.json`` records)."""
        self._refresh()
        return diagnose(self.log)

    def _diagnose(self, rules: Sequence[Rule], log: RunLog | None = None) -> list[Finding]:
        """The findings of ``rules`` not fired before (a rule that fired is not run again), on
        ``log`` (default: everything logged so far)."""
        rules = [rule for rule in rules if rule.id not in self.fired]
        if not rules:
            return []
        if log is None:
            self._refresh()
            log = self.log
        return diagnose(log, rules).findings

    def _row_log(self, step: float, values: Mapping[str, float]) -> RunLog:
        """One logged row as a run of one point per metric, with the run's algorithm, env,
        config and summary: what an immediate rule judges (a blow-up is one row; the rows
        before it were judged as they came, and the final diagnosis reads them all)."""
        at = np.array([float(step)])
        metrics = {k: Series(at, np.array([float(v)])) for k, v in values.items()}
        return RunLog(self.log.source, "rlx", metrics, algo=self.log.algo, env=self.log.env,
                      config=self.log.config, summary=self.log.summary)  # fmt: skip

    def _report(self, new: list[Finding]) -> list[Finding]:
        """Print each new finding once; a ``stop_on`` rule among them stops the run."""
        for finding in new:
            self.fired[finding.rule.id] = finding
            self.printer(f"rlx doctor: {finding.line()}")
            if finding.rule.id in self.stop_on and self.stop is None:
                self.stop = finding
        return new

    def _refresh(self) -> None:
        rows = {k: v.series() for k, v in self.rows.items()}
        self.log.metrics = with_episodes(rows, self._episode_series)

    def _episode_series(self) -> dict[str, Series]:
        if not len(self.episodes[M.EPISODE_RETURN]):
            return {}
        return {k: v.series() for k, v in self.episodes.items()}


def to_json(diagnosis: Diagnosis) -> str:
    return json.dumps(diagnosis.to_dict(), indent=2, default=str)
