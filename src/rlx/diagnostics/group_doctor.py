"""The doctor over a seed group: every seed diagnosed, then the seeds that behave differently.

``rlx doctor GROUP`` (a folder written by ``rlx train ALGO --seeds ...``, or run folders given
with ``--group``) runs :func:`~rlx.diagnostics.doctor.doctor` on every seed, then compares the
seeds in one block:

- a seed whose final return lies outside the group's **Tukey fences**,
  ``[Q1 - 1.5 IQR, Q3 + 1.5 IQR]`` over the seeds' final returns (``IQR = Q3 - Q1``), is named
  with its value and the fence it crossed (at least three seeds with a final return; when the
  quartiles nearly coincide, a fence stays at least :data:`FENCE_FLOOR` of their magnitude
  away from them, so that five seeds at 500 and one at 499.5 flag nothing);
- a rule that fires on some seeds only is named with the seeds on the smaller side (it fires on
  seed 3 only; or on every seed but 3);
- a seed that failed, or never started, is named with why.

A seed's **final return** is its final evaluation (``eval_return_mean`` in ``summary.json``)
when every seed of the group has one, else the mean return of its last
:data:`FINAL_FRACTION` of training episodes (``episodes.csv``): one measure for the whole group.
The report of a group (:mod:`rlx.diagnostics.group_report`) shows the same final returns with
their interquartile mean and its bootstrap interval (:mod:`rlx.diagnostics.stats`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx import metrics as M
from rlx.diagnostics import stats
from rlx.diagnostics.doctor import Diagnosis, doctor
from rlx.diagnostics.series import RunLog, Series
from rlx.diagnostics.sources import episode_series
from rlx.errors import ConfigError
from rlx.runs.folder import CONFIG_FILE, read_json_or_empty
from rlx.runs.group import is_group_folder, read_group

FINAL_FRACTION = 0.1
"""A seed's final training return: the mean over this last share of its episodes."""
FENCE_FLOOR = 0.05
"""A Tukey fence lies at least this share of the quartiles' magnitude beyond them."""
MIN_SEEDS_FOR_FENCES = 3
"""Fewer seeds with a final return have no quartiles worth the name."""
EVAL_SOURCE = "eval_return_mean"
TRAINING_SOURCE = "training"
SOURCE_WORDS = {
    EVAL_SOURCE: "the final evaluation's mean return (summary.json)",
    TRAINING_SOURCE: f"the mean return of the last {FINAL_FRACTION:.0%} of training episodes",
}


# ============================================================================ the group's runs
@dataclass(frozen=True)
class Member:
    """One seed of a group: its label (``seed 3``), run folder, and what ``group.json`` says of
    it (None for run folders grouped with ``--group``)."""

    label: str
    run_dir: Path
    seed: int | None = None
    status: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class GroupRuns:
    """A seed group as read: its folder (None for run folders given one by one), its label
    (legends), and its seeds."""

    label: str
    members: tuple[Member, ...]
    path: Path | None = None
    algo: str | None = None
    env: str | None = None


GroupInput = str | Path | Sequence[str | Path]
"""A group folder, or a sequence of run folders taken as the seeds of one group."""


def read_group_runs(group: GroupInput) -> GroupRuns:
    """A group folder's seeds (from ``group.json``), or run folders as the seeds of one group
    (each labelled by the seed its ``config.json`` records, else by its folder name)."""
    if isinstance(group, (str, Path)):
        if not is_group_folder(group):
            raise ConfigError(
                f"{group} is not a seed group (no group.json): give a folder written by "
                "rlx train --seeds, or run folders to compare as one group."
            )
        record = read_group(group)
        members = tuple(
            Member(f"seed {e.seed}", record.path / e.run_dir, e.seed, e.status, e.error)
            for e in record.runs
        )
        return GroupRuns(record.path.name or str(record.path), members, record.path,
                         record.algo, record.env)  # fmt: skip
    folders = [Path(p) for p in group]
    if not folders:
        raise ConfigError("a group needs at least one run folder.")
    listed: list[Member] = []
    for folder in folders:
        seed = read_json_or_empty(folder / CONFIG_FILE).get("seed")
        label = f"seed {seed}" if isinstance(seed, int) and not isinstance(seed, bool) else ""
        listed.append(Member(label or folder.name, folder, seed if label else None))
    if len({m.label for m in listed}) < len(listed):  # two runs of one seed: by folder
        listed = [Member(str(m.run_dir), m.run_dir, m.seed) for m in listed]
    parent = {f.parent for f in folders}
    label = parent.pop().name if len(parent) == 1 and folders[0].parent.name else "group"
    return GroupRuns(label or "group", tuple(listed))


# ============================================================================ final returns
def training_returns(log: RunLog) -> Series | None:
    """Each training episode's return: ``episodes.csv`` for an rlx run (finer than the logged
    means), else the logged ``episode_return``."""
    if log.kind == "rlx" and log.source.is_dir():
        series = episode_series(log.source).get(M.EPISODE_RETURN)
        if series is not None and len(series):
            return series.finite()
    series = log.get(M.EPISODE_RETURN)
    return series.finite() if series is not None else None


def final_training_return(log: RunLog, fraction: float = FINAL_FRACTION) -> float | None:
    """The mean return of the last ``fraction`` of the run's training episodes (at least
    one); None without episodes."""
    series = training_returns(log)
    if series is None or not len(series):
        return None
    return float(np.mean(series.last(fraction).values))


def final_eval_return(log: RunLog) -> float | None:
    """``eval_return_mean`` of the run's ``summary.json`` (its final evaluation), if finite."""
    value = log.summary.get(EVAL_SOURCE)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def final_returns(logs: Mapping[str, RunLog]) -> tuple[dict[str, float], str]:
    """Each run's final return, and which measure it is (:data:`SOURCE_WORDS`): the final
    evaluation when every run that has a final return has one, else the end of training (a
    run with neither, such as one that failed at its start, is left out)."""
    evaluated = {label: final_eval_return(log) for label, log in logs.items()}
    trained = {label: final_training_return(log) for label, log in logs.items()}
    having = [label for label in logs if evaluated[label] is not None or trained[label] is not None]
    if having and all(evaluated[label] is not None for label in having):
        return {k: v for k in having if (v := evaluated[k]) is not None}, EVAL_SOURCE
    return {k: v for k, v in trained.items() if v is not None}, TRAINING_SOURCE


@dataclass(frozen=True)
class FinalReturns:
    """The seeds' final returns with their interquartile mean, mean, and 95% bootstrap
    intervals (NaN with fewer than two seeds)."""

    values: dict[str, float]
    source: str
    iqm: float
    iqm_ci: tuple[float, float]
    mean: float
    mean_ci: tuple[float, float]

    @classmethod
    def of(cls, values: Mapping[str, float], source: str) -> FinalReturns:
        data = np.array(list(values.values()), dtype=float)
        if not len(data):
            nan = float("nan")
            return cls(dict(values), source, nan, (nan, nan), nan, (nan, nan))
        iqm_ci = stats.bootstrap_ci(data, statistic=stats.iqm)
        mean_ci = stats.bootstrap_ci(data, statistic=stats.mean)
        return cls(dict(values), source, float(stats.iqm(data)),
                   (float(iqm_ci[0]), float(iqm_ci[1])), float(np.mean(data)),
                   (float(mean_ci[0]), float(mean_ci[1])))  # fmt: skip

    def line(self) -> str:
        """``IQM -85.3 (95% CI -90.1 to -82.0) over 5 seeds``."""
        n = len(self.values)
        if not n:
            return "no seed has a final return yet"
        if n < 2:
            return f"one seed has a final return, {self.iqm:.4g} (an interval needs two or more)"
        low, high = self.iqm_ci
        return (f"IQM of final returns {self.iqm:.4g} (95% bootstrap CI {low:.4g} to "
                f"{high:.4g}) over {n} seeds; mean {self.mean:.4g}")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "values": self.values, "iqm": self.iqm,
                "iqm_ci": list(self.iqm_ci), "mean": self.mean, "mean_ci": list(self.mean_ci),
                "confidence": stats.CONFIDENCE}  # fmt: skip


def read_logs(group: GroupRuns) -> dict[str, RunLog]:
    """The logs of the group's seeds that have any (a seed not started has none)."""
    from rlx.diagnostics.sources import read_run
    from rlx.errors import RLXError

    logs = {}
    for member in group.members:
        try:
            logs[member.label] = read_run(member.run_dir)
        except RLXError:
            continue
    return logs


def final_returns_line(group: GroupInput) -> str:
    """One line on a group's final returns (what ``rlx train --seeds`` prints at its end)."""
    runs = read_group_runs(group)
    values, source = final_returns(read_logs(runs))
    finals = FinalReturns.of(values, source)
    return f"{finals.line()}; final return: {SOURCE_WORDS[source]}"


# ============================================================================ the comparison
@dataclass(frozen=True)
class Difference:
    """Seeds that behave differently from the rest of their group, and how."""

    seeds: tuple[str, ...]
    kind: str
    """``final-return`` (outside Tukey's fences), ``finding`` (a rule on some seeds only),
    ``failed`` or ``not-started``"""
    reason: str
    rule: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"seeds": list(self.seeds), "kind": self.kind, "reason": self.reason,
                "rule": self.rule}  # fmt: skip


def fences(values: Sequence[float], k: float = stats.TUKEY_K) -> tuple[float, float]:
    """Tukey's fences of ``values`` (:func:`rlx.diagnostics.stats.tukey_fences`), each at
    least :data:`FENCE_FLOOR` of the quartiles' magnitude beyond its quartile."""
    q1, q3 = np.percentile(np.asarray(values, dtype=float), [25, 75])
    low, high = stats.tukey_fences(values, k)
    floor = FENCE_FLOOR * max(abs(q1), abs(q3))
    return min(low, float(q1) - floor), max(high, float(q3) + floor)


def seeds_that_differ(
    finals: Mapping[str, float],
    fired: Mapping[str, Collection[str]],
    k: float = stats.TUKEY_K,
) -> list[Difference]:
    """The seeds that behave differently: a final return outside the fences (:func:`fences`)
    and the rules (``fired``: seed -> rule ids) that fire on some seeds only. Pure: seeds are
    labels, the values are given."""
    found = []
    if len(finals) >= MIN_SEEDS_FOR_FENCES:
        low, high = fences(list(finals.values()), k)
        for seed, value in finals.items():
            if value < low or value > high:
                side, fence = ("below", low) if value < low else ("above", high)
                found.append(Difference((seed,), "final-return", (
                    f"{seed}: final return {value:.4g} is {side} the group's "
                    f"{'lower' if value < low else 'upper'} fence {fence:.4g} "
                    f"(Tukey: {'Q1 -' if value < low else 'Q3 +'} {k:g} IQR)")))  # fmt: skip
    every = list(fired)
    rules = sorted({rule for ids in fired.values() for rule in ids})
    for rule in rules:
        having = [seed for seed in every if rule in fired[seed]]
        if len(having) == len(every):
            continue
        without = [seed for seed in every if seed not in having]
        odd, words = (having, "only") if len(having) <= len(without) else (without, "not")
        if words == "only":
            reason = f"{rule} fires on {_and(odd)} only ({len(having)} of {len(every)} seeds)"
        else:
            reason = f"{rule} fires on every seed but {_and(odd)} ({len(having)} of {len(every)})"
        found.append(Difference(tuple(odd), "finding", reason, rule))
    return found


def _and(labels: Sequence[str]) -> str:
    """``seed 1``, ``seeds 1 and 3``, ``seeds 1, 2 and 3``."""
    numbers = [label.removeprefix("seed ") for label in labels]
    plain = all(label.startswith("seed ") for label in labels)
    if len(labels) == 1:
        return labels[0]
    listed = ", ".join(numbers[:-1]) + f" and {numbers[-1]}"
    return f"seeds {listed}" if plain else listed


# ============================================================================ the diagnosis
@dataclass
class SeedDiagnosis:
    """One seed's diagnosis (None when it has no logs) and its final return."""

    member: Member
    diagnosis: Diagnosis | None
    final: float | None = None


@dataclass
class GroupDiagnosis:
    """The doctor's answer for a seed group: each seed's diagnosis, the seeds' final returns,
    and the seeds that behave differently. Print it, or ``to_dict()`` for JSON."""

    group: GroupRuns
    seeds: list[SeedDiagnosis]
    finals: FinalReturns
    differences: list[Difference] = field(default_factory=list)

    @property
    def errors(self) -> list[Any]:
        """Every seed's error findings (``rlx doctor --strict``)."""
        return [f for s in self.seeds if s.diagnosis is not None for f in s.diagnosis.errors]

    @property
    def title(self) -> str:
        what = " ".join(p for p in (self.group.algo, self.group.env) if p)
        where = self.group.path if self.group.path is not None else self.group.label
        return f"seed group {what + ' ' if what else ''}({where}), {len(self.seeds)} seeds"

    def block(self) -> str:
        """The comparison of the seeds, as printed after their diagnoses."""
        lines = [f"rlx doctor: {self.title}"]
        if len(self.finals.values) >= MIN_SEEDS_FOR_FENCES:
            low, high = fences(list(self.finals.values.values()))
            lines.append(f"{self.finals.line()}; Tukey's fences {low:.4g} to {high:.4g}")
        else:
            lines.append(self.finals.line() + f" (fewer than {MIN_SEEDS_FOR_FENCES} seeds: "
                         "no fences)")  # fmt: skip
        lines.append(f"final return: {SOURCE_WORDS[self.finals.source]}")
        if not self.differences:
            lines.append("no seed behaves differently: every final return within the fences, "
                         "every finding on all seeds or on none.")  # fmt: skip
            return "\n".join(lines)
        lines.append("seeds that behave differently:")
        lines += [f"  {difference.reason}" for difference in self.differences]
        return "\n".join(lines)

    def __str__(self) -> str:
        parts = []
        for seed in self.seeds:
            if seed.diagnosis is not None:
                parts.append(str(seed.diagnosis))
        parts.append(self.block())
        return "\n\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        seeds = []
        for seed in self.seeds:
            entry: dict[str, Any] = {"seed": seed.member.seed, "label": seed.member.label,
                     "run_dir": str(seed.member.run_dir), "status": seed.member.status,
                     "error": seed.member.error, "final_return": seed.final}  # fmt: skip
            if seed.diagnosis is not None:
                entry["diagnosis"] = seed.diagnosis.to_dict()
            seeds.append(entry)
        return {
            "group": str(self.group.path) if self.group.path is not None else None,
            "label": self.group.label,
            "algo": self.group.algo,
            "env": self.group.env,
            "seeds": seeds,
            "final_returns": self.finals.to_dict(),
            "differing_seeds": [d.to_dict() for d in self.differences],
        }


def doctor_group(group: GroupInput) -> GroupDiagnosis:
    """Diagnose every seed of ``group`` (a group folder, or run folders as one group) and
    name the seeds that behave differently (:func:`seeds_that_differ`)."""
    runs = read_group_runs(group)
    logs = read_logs(runs)
    diagnoses = {label: doctor(log) for label, log in logs.items()}
    values, source = final_returns(logs)
    seeds = [SeedDiagnosis(m, diagnoses.get(m.label), values.get(m.label)) for m in runs.members]
    fired = {label: {f.rule.id for f in d.findings} for label, d in diagnoses.items()}
    differences = []
    for member in runs.members:
        if member.status == "failed":
            why = f": {member.error}" if member.error else ""
            differences.append(Difference((member.label,), "failed",
                                          f"{member.label} failed{why}"))  # fmt: skip
        elif member.label not in logs:
            status = member.status or "no logs"
            differences.append(Difference((member.label,), "not-started",
                                          f"{member.label} has no logs ({status})"))  # fmt: skip
    differences += seeds_that_differ(values, fired)
    if runs.algo is None and logs:
        first = next(iter(logs.values()))
        runs = GroupRuns(runs.label, runs.members, runs.path, first.algo, first.env)
    return GroupDiagnosis(runs, seeds, FinalReturns.of(values, source), differences)


__all__ = [
    "FENCE_FLOOR",
    "FINAL_FRACTION",
    "Difference",
    "FinalReturns",
    "GroupDiagnosis",
    "GroupRuns",
    "Member",
    "SeedDiagnosis",
    "doctor_group",
    "fences",
    "final_returns",
    "final_returns_line",
    "read_group_runs",
    "seeds_that_differ",
]
