"""The study folder of ``rlx tune``: its files' names, the records it keeps, and their readers.

```
STUDY_DIR/study.journal   Optuna's JournalStorage on a file: JSON lines appended under a
                          file lock, safe for several processes (and on NFS); resumable
STUDY_DIR/.rlx-tune.lock  held while a worker decides whether to start a trial
STUDY_DIR/trial-0000/     one seed group per trial: group.json, seed-0/, seed-1/, ... (each an
                          rlx run folder: config.json, metrics, summary, ...)
STUDY_DIR/best.yaml       the best trial's config, and the held-out check as comments:
                          rlx train --config STUDY_DIR/best.yaml
STUDY_DIR/heldout.json    the held-out check: seeds, configs, each seed's value
STUDY_DIR/heldout/        its runs: defaults/ and trial-NNNN/ (the best), seed groups
STUDY_DIR/report.html     rlx report STUDY_DIR: the trials, the best one's curves, the check
```

This module is the one place that knows these names and what the journal and ``heldout.json``
hold (:class:`StudySettings`, :class:`TrialRecord`, :class:`HeldOutCheck`). The tuner
(:mod:`rlx.launch.tune`) writes a study and reads it back here; the study's page
(:mod:`rlx.diagnostics.study_report`) reads it through :func:`read_study` alone. Optuna (extra
``tune``) is imported only where the journal is read.

A study folder may have come from someone else, so everything in it is read as data. The
journal: before Optuna opens it, rlx opens it itself without following a link and without
waiting on it (made when missing), refuses anything but a regular file of at most
:data:`rlx.runs.files.MAX_LOG_BYTES` in one sentence, checks that the name still opens that
same file (:func:`rlx.runs.files.check_regular`) and that each line is one Optuna writes
(:func:`check_journal`); what its lines record for rlx is checked where it is read
(:func:`recorded_settings`, :func:`trial_attrs`, :func:`trial_folder`). What remains: Optuna
opens the journal (and makes its ``.lock`` link) by name each time it reads or appends, so a
link swapped in at that name after the check, by someone writing in the study folder while
the study runs, is followed by Optuna; nothing in the folder as it was handed over is.
``heldout.json`` is read without following a link, bounded, every field checked
(:func:`read_heldout`).

The module runs past rlx's 800 lines on purpose: it is the whole format in one place (the
file names, the records, the journal's and ``heldout.json``'s readers with their checks, and
the held-out statistic a reader recomputes rather than takes from the file), and splitting
it would put a record and the checks that guard its reading in different modules.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeGuard

from rlx.errors import ConfigError, RLXError
from rlx.runs.files import (
    MAX_INT_DIGITS,
    MAX_JSON_DEPTH,
    bounded_lines,
    check_regular,
    json_depth,
    load_json_file,
    open_text,
)
from rlx.runs.folder import CONFIG_FILE, STUDY_JOURNAL
from rlx.runs.group import seed_folder_name

STORAGE_FILE = STUDY_JOURNAL
"""Optuna's journal of the study, in the study folder (its name is :mod:`rlx.runs.folder`'s)."""
LOCK_FILE = ".rlx-tune.lock"
"""Held while a worker decides whether to start a trial (so K workers start N, not N + K - 1)."""
BEST_FILE = "best.yaml"
TRIAL_DIR = "trial-{number:04d}"
HELDOUT_FILE = "heldout.json"
"""The held-out check's record, in the study folder (:class:`HeldOutCheck`)."""
HELDOUT_DIR = "heldout"
"""The held-out check's seed groups, in the study folder: ``defaults/`` and ``trial-NNNN/``."""
HELDOUT_KIND = "rlx tune held-out check"
"""``heldout.json``'s ``kind``: what tells the record from any other JSON."""
HELDOUT_OFFSET = 10_000
"""Held-out seeds start at the study's seed plus this; a trial's seeds are the study's seed and
the ``seeds_per_trial - 1`` after it, and ``seeds_per_trial`` may not exceed this, so the two
ranges never meet."""
CONFIDENCE = 0.95
"""The coverage of the held-out check's interval."""
STUDY_NAME = "rlx"
"""The study's name in its journal (one study per folder)."""
SETTINGS_ATTR = "rlx"
"""The study's user attribute that holds its :class:`StudySettings`."""
MAX_PID = 2**31 - 1
"""The largest process id a trial's ``worker`` may record (a pid is a C int)."""
JOURNAL_OPS = frozenset(range(11))
"""The op codes of Optuna's journal (``JournalOperation``: create study 0 to discard trials 10)."""
SETTING_KINDS: dict[str, Any] = {
    "algo": str, "env": str, "trials": int, "total_steps": (int, type(None)), "seed": int,
    "evaluations": int, "eval_episodes": int, "env_kwargs": dict, "fixed": dict,
    "seeds_per_trial": int, "heldout_seeds": int,
}  # fmt: skip
"""The study settings the journal may record, and the types each may have."""


# ============================================================================ small helpers
def import_optuna() -> ModuleType:
    """Optuna (extra ``tune``), quiet but for its warnings, or a ConfigError saying how to
    install it."""
    try:
        import optuna
    except ImportError as exc:
        raise ConfigError(
            "rlx tune needs Optuna, which is not installed; install it with pip install "
            "'rlx[tune]'."
        ) from exc
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def json_default(value: Any) -> Any:
    """``json.dumps``'s ``default`` for what a study records: paths as text, numpy scalars as
    numbers, tuples and sets as lists, anything else as its text."""
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (tuple, set)):
        return list(value)
    return str(value)


def as_json(value: Any) -> Any:
    """``value`` as the journal keeps it (JSON and back: tuples become lists)."""
    return json.loads(json.dumps(value, default=json_default))


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON (tuples and lists alike)."""
    return json.dumps(a, sort_keys=True, default=json_default) == json.dumps(
        b, sort_keys=True, default=json_default
    )


def is_whole(value: Any) -> TypeGuard[int]:
    """A whole number that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[int | float]:
    """A number (int or float) that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def values_text(values: Sequence[float | None]) -> str:
    """Seeds' values on one line (``-`` for a seed without one)."""
    return " ".join("-" if v is None else f"{v:.4g}" for v in values)


def seeds_text(seeds: Sequence[int]) -> str:
    """``10000-10004`` for a run of seeds, else the seeds one by one."""
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(str(seed) for seed in seeds) or "none"


def check_seed_counts(seeds_per_trial: Any, heldout_seeds: Any) -> None:
    """``seeds_per_trial`` a whole number in 1 to :data:`HELDOUT_OFFSET`, ``heldout_seeds`` 0
    or a whole number >= 2 (None: not given); a ConfigError in one sentence otherwise."""
    if seeds_per_trial is not None and (
        not is_whole(seeds_per_trial) or not 1 <= seeds_per_trial <= HELDOUT_OFFSET
    ):
        raise ConfigError(
            f"seeds_per_trial={seeds_per_trial!r}: each trial trains on a seed group, so give a "
            f"whole number from 1 to {HELDOUT_OFFSET} (default 3)."
        )
    if heldout_seeds is not None and (not is_whole(heldout_seeds) or heldout_seeds < 0):
        raise ConfigError(
            f"heldout_seeds={heldout_seeds!r} must be a whole number >= 0 (0 skips the held-out "
            "check; default 5)."
        )
    if heldout_seeds == 1:
        raise ConfigError(
            "heldout_seeds=1 gives no interval (a spread needs two seeds a side); give 0 to "
            "skip the held-out check, or 2 or more (default 5)."
        )


# ============================================================================ the records
@dataclass(frozen=True)
class StudySettings:
    """What a study tunes, kept in its storage so that a rerun resumes the same study."""

    algo: str
    env: str
    trials: int
    total_steps: int | None = None
    seed: int = 0
    evaluations: int = 5
    eval_episodes: int = 10
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    fixed: dict[str, Any] = field(default_factory=dict)
    """config fields the user set for every trial (the space leaves them alone)"""
    seeds_per_trial: int = 3
    """the seeds each trial trains on (:meth:`trial_seeds`)"""
    heldout_seeds: int = 5
    """the seeds of the held-out check (:meth:`held_out_seeds`; 0: no check)"""

    def trial_seeds(self) -> list[int]:
        """Every trial's seeds: the study's seed and the ``seeds_per_trial - 1`` after it."""
        return [self.seed + i for i in range(self.seeds_per_trial)]

    def held_out_seeds(self) -> list[int]:
        """The held-out check's seeds, from ``seed + HELDOUT_OFFSET`` on: none a trial uses."""
        return [self.seed + HELDOUT_OFFSET + i for i in range(self.heldout_seeds)]

    def to_dict(self) -> dict[str, Any]:
        """The settings as the journal records them (:data:`SETTINGS_ATTR`)."""
        data: dict[str, Any] = as_json(dataclasses.asdict(self))
        return data


@dataclass(frozen=True)
class TrialRecord:
    """One trial as the study keeps it."""

    number: int
    state: str
    """complete, pruned, failed, running or waiting"""
    value: float | None
    params: dict[str, Any]
    """Optuna's parameters (the zoo's names)"""
    config: dict[str, Any]
    """the config fields the trial trained with (rlx's names), as best.yaml writes them"""
    run_dir: Path
    """the trial's folder: a seed group (``group.json``, ``seed-N/``), or, in a study of an
    rlx that trained one seed per trial, the run folder itself"""
    pruned_by: str | None = None
    """``"doctor"`` or ``"median"`` for a pruned trial"""
    finding: dict[str, Any] | None = None
    """the doctor's finding that pruned it (:meth:`rlx.diagnostics.doctor.Finding.to_dict`
    with its one-line text as ``line``)"""
    error: str | None = None
    intermediate: dict[int, float] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    """the seeds it trained on (in order)"""
    seed_values: list[float | None] = field(default_factory=list)
    """each seed's value (its final evaluation), None for a seed not trained or pruned"""

    def seed_runs(self) -> list[tuple[int, Path]]:
        """``(seed, run folder)`` of each seed that has a folder, in order (the trial folder
        itself for a study that trained one seed per trial)."""
        if (self.run_dir / CONFIG_FILE).is_file():
            return [(self.seeds[0] if self.seeds else 0, self.run_dir)]
        runs = [(seed, self.run_dir / seed_folder_name(seed)) for seed in self.seeds]
        return [(seed, path) for seed, path in runs if path.is_dir() and not path.is_symlink()]

    def heldout_fields(self) -> dict[str, Any]:
        """The fields the held-out check trains this trial's config with: its config without
        the seed (the check's seeds are its own)."""
        return {name: value for name, value in self.config.items() if name != "seed"}

    def pruned_text(self) -> str:
        """Who pruned it, in words: ``the doctor (rule)``, ``the median pruner`` or
        ``Optuna``."""
        if self.pruned_by == "doctor" and self.finding:
            return f"the doctor ({self.finding.get('rule')})"
        return "the median pruner" if self.pruned_by == "median" else "Optuna"


@dataclass(frozen=True)
class StudyResult:
    """What ``rlx.tune(...)`` returns (and :func:`read_study` reads): the settings, every
    trial, the best one and its config file."""

    study_dir: Path
    settings: StudySettings
    trials: list[TrialRecord]
    heldout: HeldOutCheck | None = None
    """the held-out check of the best trial (None until the study has its trials, with
    ``heldout_seeds=0``, or while ``heldout.json`` is of a trial no longer the best)"""

    @property
    def best(self) -> TrialRecord | None:
        """The completed trial with the highest value (the first one on a tie)."""
        done = [t for t in self.trials if t.state == "complete" and t.value is not None]
        return max(done, key=lambda t: (t.value, -t.number)) if done else None

    @property
    def best_file(self) -> Path:
        """``best.yaml`` in the study folder."""
        return self.study_dir / BEST_FILE

    def count(self, state: str) -> int:
        """How many trials are in ``state``."""
        return sum(t.state == state for t in self.trials)

    @property
    def finished(self) -> bool:
        """Whether the study has its ``trials`` completed or pruned."""
        return self.count("complete") + self.count("pruned") >= self.settings.trials

    def __str__(self) -> str:
        s = self.settings
        by_doctor = sum(t.pruned_by == "doctor" for t in self.trials)
        lines = [
            f"study {self.study_dir}: {s.algo} on {s.env}, {len(self.trials)} trials "
            f"({self.count('complete')} complete, {self.count('pruned')} pruned, "
            f"{by_doctor} of them by the doctor, {self.count('failed')} failed)"
        ]
        for t in self.trials:
            value = "-" if t.value is None else f"{t.value:.4g}"
            why = f" by {t.pruned_text()}" if t.state == "pruned" else ""
            seeds = f" (seeds: {values_text(t.seed_values)})" if t.seed_values else ""
            lines.append(f"  trial {t.number}: {t.state}{why}, value {value}{seeds}")
        best = self.best
        if best is not None:
            lines.append(
                f"best: trial {best.number}, value {best.value:.4g} (mean minus one standard "
                f"error of its seeds: {values_text(best.seed_values)}); train it again with "
                f"rlx train --config {self.best_file}"
            )
        if self.heldout is not None:
            lines.append(f"held out: {self.heldout.sentence()}")
        elif s.heldout_seeds == 0:
            lines.append("held out: no check (heldout_seeds=0)")
        elif best is None and self.finished:
            lines.append("held out: no check (no trial completed)")
        return "\n".join(lines)


# ============================================================================ the held-out check
@dataclass(frozen=True)
class HeldOutSide:
    """One side of the held-out check: the config fields it trained with (as ``best.yaml``
    writes them, without the seed), its seed group, and each held-out seed's value."""

    config: dict[str, Any]
    run_dir: Path
    values: list[float]

    @property
    def mean(self) -> float:
        """The mean of the held-out seeds' values."""
        return sum(self.values) / len(self.values)


@dataclass(frozen=True)
class HeldOutCheck:
    """The best trial's config against the defaults on seeds no trial trained on
    (``heldout.json``): the difference of their means, best minus defaults, with Welch's t
    interval (:func:`welch_interval`) and a verdict in words (:attr:`verdict`)."""

    seeds: list[int]
    """the held-out seeds"""
    trial_seeds: list[int]
    """every seed a trial of the study trained on (none of :attr:`seeds`)"""
    best_trial: int
    best: HeldOutSide
    defaults: HeldOutSide
    same_config: bool
    """the best trial's config is the defaults' (then the defaults trained once)"""

    @property
    def difference(self) -> float:
        """mean(best) - mean(defaults)"""
        return self.best.mean - self.defaults.mean

    @property
    def interval(self) -> tuple[float, float]:
        """Welch's t interval of :attr:`difference` at :data:`CONFIDENCE`."""
        return welch_interval(self.best.values, self.defaults.values)

    @property
    def verdict(self) -> str:
        """``"beats the defaults"`` (the interval above 0), ``"worse than the defaults"``
        (below 0), ``"no better than the defaults (interval includes 0)"``, or, when the best
        config is the defaults', ``"is the defaults' config"``."""
        if self.same_config:
            return "is the defaults' config"
        low, high = self.interval
        if low > 0:
            return "beats the defaults"
        if high < 0:
            return "worse than the defaults"
        return "no better than the defaults (interval includes 0)"

    def sentence(self) -> str:
        """The check in one sentence (``str(result)``'s line)."""
        seeds = f"{len(self.seeds)} seeds no trial trained on ({seeds_text(self.seeds)})"
        if self.same_config:
            return (
                f"the best config (trial {self.best_trial}) is the defaults' config, so there "
                f"is nothing to compare; on {seeds} it scored a mean of {self.defaults.mean:.4g}."
            )
        low, high = self.interval
        return (
            f"on {seeds}, the best config (trial {self.best_trial}) scored a mean of "
            f"{self.best.mean:.4g} and the defaults {self.defaults.mean:.4g}: difference "
            f"{self.difference:+.4g}, {CONFIDENCE:.0%} interval [{low:.4g}, {high:.4g}] "
            f"(Welch's t); verdict: {self.verdict}."
        )

    def lines(self) -> list[str]:
        """The check as ``best.yaml``'s comment lines."""
        head = (
            f"Held-out check: {len(self.seeds)} seeds no trial trained on "
            f"({seeds_text(self.seeds)}; the trials used {seeds_text(self.trial_seeds)}),"
        )
        if self.same_config:
            return [
                head,
                "this config is the defaults' config (nothing to compare); its final "
                f"evaluations: {values_text(self.defaults.values)} (mean "
                f"{self.defaults.mean:.6g}).",
            ]
        low, high = self.interval
        return [
            head,
            "final evaluations (the mean return of eval_episodes episodes at each run's end):",
            f"  this config:  {values_text(self.best.values)}  (mean {self.best.mean:.6g})",
            f"  the defaults: {values_text(self.defaults.values)}  (mean {self.defaults.mean:.6g})",
            f"difference of the means {self.difference:+.6g}, {CONFIDENCE:.0%} interval "
            f"[{low:.6g}, {high:.6g}] (Welch's t):",
            f"verdict: {self.verdict}.",
        ]

    def to_dict(self, study_dir: Path) -> dict[str, Any]:
        """``heldout.json``: what :func:`read_heldout` reads back, and the difference, interval
        and verdict for a reader (recomputed from the values when read)."""

        def side(s: HeldOutSide) -> dict[str, Any]:
            return {"config": as_json(s.config),
                    "run_dir": s.run_dir.relative_to(study_dir).as_posix(),
                    "values": list(s.values)}  # fmt: skip

        low, high = self.interval
        return {
            "kind": HELDOUT_KIND,
            "seeds": list(self.seeds),
            "trial_seeds": list(self.trial_seeds),
            "best_trial": self.best_trial,
            "same_config": self.same_config,
            "best": side(self.best),
            "defaults": side(self.defaults),
            "difference": self.difference,
            "interval": [low, high],
            "confidence": CONFIDENCE,
            "interval_method": "Welch's t",
            "verdict": self.verdict,
        }


def welch_interval(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Welch's t interval ``(low, high)`` of ``mean(a) - mean(b)``:

        d = mean(a) - mean(b),   se^2 = s_a^2 / n_a + s_b^2 / n_b   (s^2 with n - 1)
        nu = se^4 / ((s_a^2 / n_a)^2 / (n_a - 1) + (s_b^2 / n_b)^2 / (n_b - 1))
        d -/+ t_{(1 + confidence) / 2, nu} * se

    (Welch-Satterthwaite degrees of freedom); the point ``(d, d)`` when neither side varies.
    Each side needs two values or more."""
    from scipy.stats import t

    n_a, n_b = len(a), len(b)
    if n_a < 2 or n_b < 2:
        raise ValueError("Welch's interval needs two values or more on each side")
    mean_a, mean_b = sum(a) / n_a, sum(b) / n_b
    var_a = sum((x - mean_a) ** 2 for x in a) / (n_a - 1) / n_a
    var_b = sum((x - mean_b) ** 2 for x in b) / (n_b - 1) / n_b
    d = mean_a - mean_b
    se2 = var_a + var_b
    if se2 == 0:
        return d, d
    nu = se2**2 / (var_a**2 / (n_a - 1) + var_b**2 / (n_b - 1))
    half = float(t.ppf((1 + confidence) / 2, nu)) * math.sqrt(se2)
    return d - half, d + half


# ============================================================================ the journal
def is_study(path: str | Path) -> bool:
    """True when ``path`` is a study folder of ``rlx tune``."""
    return (Path(path) / STORAGE_FILE).is_file()


def _require_study(folder: Path) -> None:
    """A ConfigError unless ``folder`` holds a journal (a reader never makes one)."""
    if not is_study(folder):
        raise ConfigError(f"{folder} holds no study ({STORAGE_FILE} is missing).")


def journal_storage(folder: Path) -> Any:
    """Optuna's JournalStorage on the study's journal, made when missing, after the checks
    the module's docstring names: a link or a folder at its name, a file that is not regular
    or too large, or a line Optuna does not write, is one ConfigError sentence."""
    optuna = import_optuna()
    from optuna.storages.journal import JournalFileBackend

    journal = folder / STORAGE_FILE  # Optuna appends to what it names (its lock is a link)
    if journal.is_symlink() or journal.is_dir():
        raise ConfigError(
            f"{journal} is a link or a folder, not the study's own file; rlx tune writes a "
            "study only into a real file: remove it, or use another study folder."
        )
    # opened here without a link and without waiting (a pipe, a device or a journal too large
    # is one sentence, not a hang), made when missing, and the file its name opens now
    check_regular(journal, create=True)
    check_journal(journal)
    return optuna.storages.JournalStorage(JournalFileBackend(str(journal)))


def _journal_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of more than {MAX_INT_DIGITS} digits")
    return int(text)


def check_journal(journal: Path) -> None:
    """Refuse, in one ConfigError sentence naming the line, a journal Optuna would choke on
    (its errors are tracebacks): each line at most :data:`rlx.runs.files.MAX_LINE_CHARS` of
    UTF-8, JSON nested at most :data:`rlx.runs.files.MAX_JSON_DEPTH` levels with no integer
    of more than :data:`rlx.runs.files.MAX_INT_DIGITS` digits, an object whose ``op_code`` is
    one of :data:`JOURNAL_OPS`. A last line a crash cut short is left to Optuna, which skips
    it. What the lines record for rlx is checked where it is read (:func:`recorded_settings`,
    :func:`trial_attrs`, :func:`trial_folder`)."""

    def refused(number: int, why: str) -> ConfigError:
        return ConfigError(
            f"{journal}, line {number}: {why}; it is not a journal rlx tune writes (the study "
            "folder is damaged or was written by another program)."
        )

    pending: ConfigError | None = None
    with open_text(journal, encoding="utf-8") as handle:  # bounded: size, lines, UTF-8
        for number, line in enumerate(bounded_lines(handle, journal), 1):
            if pending is not None:
                raise pending
            if not line.strip():
                continue
            if json_depth(line) > MAX_JSON_DEPTH:
                raise refused(number, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            try:
                op = json.loads(line, parse_int=_journal_int)
            except json.JSONDecodeError as exc:
                if not line.endswith("\n"):
                    continue  # cut short by a crash: Optuna skips it (and fails on another)
                pending = refused(number, f"not JSON ({exc.msg})")
                continue
            except ValueError as exc:  # an integer Python will not convert
                raise refused(number, str(exc)) from exc
            code = op.get("op_code") if isinstance(op, dict) else None
            if isinstance(code, bool) or code not in JOURNAL_OPS:
                raise refused(number, f"op_code {code!r} is none of Optuna's (0 to 10)")


def open_study(folder: Path, *, sampler: Any = None, pruner: Any = None) -> Any:
    """The Optuna study in ``folder``'s journal (:func:`journal_storage`), with ``sampler``
    and ``pruner`` (Optuna's defaults when None: enough to read it); a ConfigError in one
    sentence when the journal holds no rlx study or one Optuna cannot read."""
    optuna = import_optuna()
    storage = journal_storage(folder)
    try:
        return optuna.load_study(
            study_name=STUDY_NAME, storage=storage, sampler=sampler, pruner=pruner
        )
    except KeyError as exc:
        raise ConfigError(f"{folder}/{STORAGE_FILE} holds no rlx study.") from exc
    except (ValueError, RecursionError) as exc:  # a journal line rlx tune did not write
        raise ConfigError(
            f"{folder}/{STORAGE_FILE} is not a journal rlx tune can read ({type(exc).__name__})."
        ) from exc


# ============================================================================ reading a study
def recorded_settings(study_dir: str | Path) -> StudySettings:
    """The settings the study's journal records, checked as data (names and types; a
    ConfigError in one sentence for any that rlx tune does not write). Every fixed field is
    returned as recorded: the tuner drops those only the user may set
    (:func:`rlx.launch.tune.read_settings`)."""
    folder = Path(study_dir)
    _require_study(folder)
    data = open_study(folder).user_attrs.get(SETTINGS_ATTR)
    where = f"{study_dir}/{STORAGE_FILE}"
    if not isinstance(data, dict):
        raise ConfigError(f"{where} is not a study written by rlx tune.")
    for name, value in data.items():
        kind = SETTING_KINDS.get(name)
        if kind is None or not isinstance(value, kind) or isinstance(value, bool):
            raise ConfigError(
                f"{where} records the study setting {name}={value!r}, which is not one rlx tune "
                "writes; the study folder is damaged or was written by another program."
            )
    missing = sorted({"algo", "env", "trials"} - set(data))
    if missing:
        raise ConfigError(
            f"{where} records no study setting {missing[0]}, which rlx tune always writes; the "
            "study folder is damaged or was written by another program."
        )
    data = {"seeds_per_trial": 1, **data}  # a study of an rlx that trained one seed per trial
    try:
        check_seed_counts(data["seeds_per_trial"], data.get("heldout_seeds"))
    except ConfigError:
        raise ConfigError(
            f"{where} records the study settings seeds_per_trial={data['seeds_per_trial']!r} and "
            f"heldout_seeds={data.get('heldout_seeds')!r}, which rlx tune does not write; the "
            "study folder is damaged or was written by another program."
        ) from None
    return StudySettings(**data)


def read_study(
    study_dir: str | Path,
    *,
    settings: StudySettings | None = None,
    defaults: Callable[[StudySettings], Mapping[str, Any]] | None = None,
) -> StudyResult:
    """Every trial of the study in ``study_dir``, as :class:`StudyResult`, with the held-out
    check when ``heldout.json`` is of the best trial, its config and the study's held-out
    seeds.

    ``settings``: the study's settings when the caller has read them (the tuner, which drops
    the fixed fields only the user sets); else :func:`recorded_settings`. ``defaults``: what
    the defaults' side of the check trains for the settings (the tuner's
    :func:`rlx.launch.tune.defaults_fields`: it knows the algorithm's config); given, a record
    of other defaults is not the check of the study as it is now, and is left out."""
    folder = Path(study_dir)
    _require_study(folder)
    study = open_study(folder)
    settings = settings if settings is not None else recorded_settings(folder)
    trials = [trial_record(t, folder) for t in study.get_trials(deepcopy=False)]
    result = StudyResult(folder, settings, trials)
    check = read_heldout(folder)
    if check is not None and _is_current(check, result, defaults):
        result = dataclasses.replace(result, heldout=check)
    return result


def _is_current(
    check: HeldOutCheck,
    result: StudyResult,
    defaults: Callable[[StudySettings], Mapping[str, Any]] | None,
) -> bool:
    """Whether ``check`` is of the study's best trial, its config and held-out seeds now (and
    of the defaults ``defaults`` gives, when given)."""
    best, s = result.best, result.settings
    return (
        best is not None
        and check.best_trial == best.number
        and check.seeds == s.held_out_seeds()
        and same_json(check.best.config, best.heldout_fields())
        and (defaults is None or same_json(check.defaults.config, dict(defaults(s))))
    )


_STATES = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed",
           "RUNNING": "running", "WAITING": "waiting"}  # fmt: skip
_ATTR_KINDS: dict[str, tuple[type, str]] = {
    "config": (dict, "an object of config fields"),
    "finding": (dict, "a doctor's finding (an object with its rule)"),
    "pruned_by": (str, "text"),
    "error": (str, "text"),
    "worker": (dict, "an object of a host and a process id"),
    "seeds": (list, "a list of whole-number seeds"),
    "seed_values": (list, "a list of numbers (or null), one per seed"),
}


def trial_attrs(trial: Any, folder: Path) -> dict[str, Any]:
    """The user attrs rlx reads of a trial (``config``, ``finding``, ``pruned_by``, ``error``,
    ``worker``, ``seeds``, ``seed_values``; ``run_dir`` is :func:`trial_folder`'s), each
    checked as data, the one place they are: a ConfigError naming the journal, the trial and
    the value when one has another type (a finding without its ``rule``, a worker whose
    ``host`` is not text or whose ``pid`` is not a whole number in 0 to :data:`MAX_PID`, a
    seed that is not a whole number >= 0, a seed's value that is not a number); None for one
    not recorded."""
    import reprlib

    attrs = trial.user_attrs
    checked: dict[str, Any] = {}
    for name, (kind, what) in _ATTR_KINDS.items():
        value = attrs.get(name)
        if value is not None and not (isinstance(value, kind) and _attr_valid(name, value)):
            raise ConfigError(
                f"{folder / STORAGE_FILE} records {name}={reprlib.repr(value)} for trial "
                f"{trial.number}, which is not {what} as rlx tune writes it; the study folder is "
                "damaged or was written by another program."
            )
        checked[name] = value
    return checked


def _attr_valid(name: str, value: Any) -> bool:
    """What a trial's user attr of the right type must also be (:func:`trial_attrs`)."""
    if name == "finding":
        return isinstance(value.get("rule"), str) and isinstance(value.get("evidence") or {}, dict)
    if name == "seeds":
        return all(is_whole(v) and v >= 0 for v in value)
    if name == "seed_values":
        return all(v is None or is_number(v) for v in value)
    if name == "worker":
        pid = value.get("pid", 0)
        host = value.get("host")
        return isinstance(host, (str, type(None))) and is_whole(pid) and 0 <= pid <= MAX_PID
    return True


def trial_record(trial: Any, folder: Path) -> TrialRecord:
    """An Optuna trial of the study in ``folder`` as a :class:`TrialRecord`, its user attrs
    checked (:func:`trial_attrs`, :func:`trial_folder`)."""
    attrs = {**trial.user_attrs, **trial_attrs(trial, folder)}
    run_dir = trial_folder(folder, trial.number, attrs.get("run_dir"))
    seeds = list(attrs.get("seeds") or [])
    values = list(attrs.get("seed_values") or [])
    return TrialRecord(
        number=trial.number,
        state=_STATES.get(trial.state.name, trial.state.name.lower()),
        value=trial.value,
        params=dict(trial.params),
        config=dict(attrs.get("config") or {}),
        run_dir=run_dir,
        pruned_by=attrs.get("pruned_by"),
        finding=attrs.get("finding"),
        error=attrs.get("error"),
        intermediate=dict(trial.intermediate_values),
        seeds=seeds,
        seed_values=[None if v is None else float(v) for v in values[: len(seeds)]],
    )


def trial_folder(folder: Path, number: int, recorded: Any) -> Path:
    """The run folder of trial ``number``, as the study's journal records it (``trial-NNNN``
    when it records none): a ConfigError unless it is a folder's name inside the study
    (relative, no ``..``, no link out of it), so a journal never points rlx elsewhere."""
    name = TRIAL_DIR.format(number=number) if recorded is None else recorded
    parts = Path(name).parts if isinstance(name, str) else ()
    run_dir = folder / name if parts else folder
    inside = (
        len(parts) == 1
        and not Path(name).is_absolute()
        and parts[0] not in ("..", ".")
        and not run_dir.is_symlink()
        and run_dir.resolve().parent == folder.resolve()
    )
    if not inside:
        raise ConfigError(
            f"{folder / STORAGE_FILE} records {name!r} as trial {number}'s run folder, which is "
            f"not a folder inside the study (a name such as {TRIAL_DIR.format(number=number)!r})."
        )
    return run_dir


def read_heldout(study_dir: str | Path) -> HeldOutCheck | None:
    """The study's ``heldout.json`` (None when there is none), read as data from a folder that
    may be someone else's: without following a link, bounded (:func:`rlx.runs.files.
    load_json_file`), every field checked; a ConfigError in one sentence for anything rlx tune
    does not write. The difference, interval and verdict it records are recomputed from the
    values, never taken from it."""
    folder = Path(study_dir)
    path = folder / HELDOUT_FILE
    if not path.exists() and not path.is_symlink():
        return None

    def refused(why: str) -> ConfigError:
        return ConfigError(
            f"{path} is not a held-out record rlx tune writes ({why}); remove it, and rlx tune "
            "on the study checks the best trial again."
        )

    try:
        data = load_json_file(path, root=folder)
    except RLXError as exc:  # its sentence names the file: said once here
        raise refused("it " + str(exc).rstrip(".").removeprefix(f"{path} ")) from None
    if not isinstance(data, dict) or data.get("kind") != HELDOUT_KIND:
        raise refused(f"no kind {HELDOUT_KIND!r}")
    seeds, trial_seeds = data.get("seeds"), data.get("trial_seeds")
    for name, value in (("seeds", seeds), ("trial_seeds", trial_seeds)):
        if not isinstance(value, list) or not all(is_whole(v) and v >= 0 for v in value):
            raise refused(f"{name} is not a list of whole numbers >= 0")
    seeds, trial_seeds = list(seeds or []), list(trial_seeds or [])
    if len(seeds) < 2 or len(set(seeds)) < len(seeds):
        raise refused("seeds are not two or more distinct seeds")
    if set(seeds) & set(trial_seeds):
        raise refused("its held-out seeds include a seed the trials trained on")
    best_trial, same = data.get("best_trial"), data.get("same_config")
    if not is_whole(best_trial) or best_trial < 0:
        raise refused("best_trial is not a trial number")
    if not isinstance(same, bool):
        raise refused("same_config is not true or false")
    sides = [_side(data.get(name), name, folder, len(seeds), refused)
             for name in ("best", "defaults")]  # fmt: skip
    return HeldOutCheck(list(seeds), list(trial_seeds), best_trial, sides[0], sides[1], same)


def _side(
    data: Any, name: str, folder: Path, count: int, refused: Callable[[str], ConfigError]
) -> HeldOutSide:
    """One side of ``heldout.json``, checked: config fields by name, a run folder in
    ``heldout/``, ``count`` finite values."""
    if not isinstance(data, dict):
        raise refused(f"{name} is not an object")
    config, run_dir, values = data.get("config"), data.get("run_dir"), data.get("values")
    if not isinstance(config, dict) or not all(isinstance(k, str) for k in config):
        raise refused(f"{name}.config is not config fields by name")
    parts = Path(run_dir).parts if isinstance(run_dir, str) else ()
    if (
        len(parts) != 2 or parts[0] != HELDOUT_DIR or parts[1] in ("..", ".")
        or Path(str(run_dir)).is_absolute()
    ):  # fmt: skip
        raise refused(f"{name}.run_dir is not a folder in {HELDOUT_DIR}/")
    if (
        not isinstance(values, list) or len(values) != count
        or not all(is_number(v) and math.isfinite(v) for v in values)
    ):  # fmt: skip
        raise refused(f"{name}.values is not {count} finite numbers, one per seed")
    return HeldOutSide(dict(config), folder / str(run_dir), [float(v) for v in values])


__all__ = [
    "BEST_FILE",
    "CONFIDENCE",
    "HELDOUT_DIR",
    "HELDOUT_FILE",
    "HELDOUT_KIND",
    "HELDOUT_OFFSET",
    "LOCK_FILE",
    "SETTINGS_ATTR",
    "STORAGE_FILE",
    "STUDY_NAME",
    "TRIAL_DIR",
    "HeldOutCheck",
    "HeldOutSide",
    "StudyResult",
    "StudySettings",
    "TrialRecord",
    "check_journal",
    "check_seed_counts",
    "is_study",
    "journal_storage",
    "open_study",
    "read_heldout",
    "read_study",
    "recorded_settings",
    "trial_attrs",
    "trial_folder",
    "trial_record",
    "welch_interval",
]
