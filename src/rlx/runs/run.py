"""A training run as a context manager that writes the run folder (:mod:`.folder`).

A :class:`Run` wraps a training loop. Inside it, the first Ctrl-C (SIGINT) or SIGTERM only sets
:attr:`Run.stop_requested`; the loop sees it, saves a checkpoint and ends cleanly. A second
Ctrl-C aborts at once. Whatever happens, ``summary.json`` is written and the metrics and
checkpoints already on disk stay intact.

Observers (:class:`RunObserver`, e.g. the live doctor of :mod:`rlx.diagnostics.doctor`, or a
user's callbacks, :mod:`rlx.callbacks`) are attached from above by whoever opens the run: they
see every logged row and every finished episode (and the hooks a loop sends with
:meth:`Run.notify`), may ask the run to end, and add fields to its summary. This module
imports none of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import platform
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from rlx.errors import RLXError, RunError, TrainingError
from rlx.runs.checkpoints import (
    CheckpointCadence,
    checkpoints_after,
    latest_checkpoint,
    load_checkpoint,
    point_latest,
    save_best_checkpoint,
    save_checkpoint,
    step_checkpoint,
)
from rlx.runs.files import (
    bounded_lines,
    copy_regular,
    loads_json,
    move_within,
    open_text,
    remove_entry,
    write_atomic,
)
from rlx.runs.folder import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    EPISODES_FILE,
    METRICS_FILE,
    PREVIOUS_DIR,
    RUN_FILES,
    SUMMARY_FILE,
    TENSORBOARD_DIR,
    RunRecord,
    as_float,
    inspect_folder,
    read_json_or_empty,
    write_json_atomic,
)
from rlx.runs.logger import MetricLogger, ProgressBar
from rlx.version import VERSION

CHECKPOINT_EVERY_S = 30.0
"""Seconds between checkpoints of a run whose config sets no cadence
(:class:`rlx.runs.checkpoints.CheckpointCadence`)."""
HISTORY_KINDS = ("start", "resume", "overwrite", "heal")
"""How a run was opened, as ``config.json``'s ``history`` records it (``heal``: continued from
a checkpoint with a doctor's fix applied, :mod:`rlx.launch.heal`)."""
RESUME_REWRITES = (CONFIG_FILE, SUMMARY_FILE, METRICS_FILE, EPISODES_FILE)
"""The files a resume rewrites before it trains (kept aside until it has started)."""


class RunObserver(Protocol):
    """Something attached to a run from above: it sees each logged row, may ask the run to
    end (``stop_reason``), and adds fields to ``summary.json`` at the end."""

    stop_reason: str | None

    def attach(self, run_dir: Path, resumed: bool) -> None:
        """Called once the folder is ready (a resumed run's logs cut back to its checkpoint)."""

    def observe(self, step: int, values: Mapping[str, float]) -> None:
        """One logged row."""

    def summary(self) -> dict[str, Any]:
        """Fields for ``summary.json``, however the run ended."""

    # optional: ``observe_episodes(ends, returns, lengths)``, the episodes of episodes.csv as
    # they are logged (Run.log_episodes); ``on_summary(steps, summary)``, the summary before
    # the observers add to it (Run.finish); ``on_start``, ``on_step``, ``on_config``,
    # ``on_end`` ... ``(step, payload)``, see Run.notify


def library_versions() -> dict[str, str]:
    """The versions of rlx, Python and the libraries a run's numbers depend on, as installed
    (read from the package metadata: nothing is imported for this)."""
    from importlib import metadata

    versions = {"rlx": VERSION, "python": platform.python_version()}
    for name in ("numpy", "torch", "gymnasium", "transformers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


class Run:
    """Creates (or continues, with ``resume``) a run folder and logs a run into it.

    Args:
        run_dir: the folder. A new run needs a folder without a ``config.json``.
        algo: registered algorithm name.
        env_id: environment id or description.
        config: the algorithm's config dataclass.
        total: the training budget for the progress bar (in ``unit``).
        resume: the record of the run to continue from its latest checkpoint (read once by
            the caller with :func:`rlx.runs.folder.read_record`), or None for a new run.
        resume_from: with ``resume``, continue from this step checkpoint of the folder (its
            step, file name or path) instead of the latest: the metrics and episodes logged
            after its step are cut, as a resume cuts those after the latest, and the
            checkpoints written after it (``best.pt`` too, when later) go once the run has
            started (put back if it is refused before).
        overwrite: start over in a folder that holds an rlx run: its files are set aside,
            deleted once the new run has started (its first checkpoint, or its end) and put
            back if the new run is refused before it starts.
        command: what started this run (the command line, or the Python call), for
            ``config.json``'s ``history``.
        progress: show a progress bar (None: when stderr is a terminal).
        tensorboard: also write TensorBoard event files to ``RUN_DIR/tensorboard``.
        preset: name of the per-environment preset the config came from, if any.
        observers: attached from above (the live doctor); see :class:`RunObserver`.
        writer: False for a process that trains alongside the one writing the folder (the
            ranks other than 0 of a data-parallel run): it reads a resumed checkpoint, logs
            to nowhere and writes no file.
        record: more fields for ``config.json`` (e.g. how to rebuild the env); a resumed
            run adds them to its record.
        history: more fields for this opening's entry in ``config.json``'s ``history`` (a
            ``kind`` among :data:`HISTORY_KINDS` replaces the one the run would write).
        wandb: also log to Weights & Biases (``RUN_DIR/wandb``, offline unless ``WANDB_MODE``
            says otherwise), with the same metric names.
        wall_offset: the seconds this run has trained before this opening, where the caller
            knows better than the resumed checkpoint's rows (a healing run continued after a
            rollback, :mod:`rlx.launch.heal`: its earlier stretches count); None: 0 for a new run,
            the wall time of the checkpoint's last row for a resumed one.
        checkpoint_at_start: a new run saves a checkpoint before its first update (the loops
            ask :meth:`start_checkpoint_due`), so that a rollback from a blow-up in the first
            updates finds one (a run that heals, :mod:`rlx.launch.heal`).
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        algo: str,
        env_id: str,
        config: Any,
        total: int,
        unit: str = "steps",
        resume: RunRecord | None = None,
        progress: bool | None = None,
        tensorboard: bool = False,
        preset: str | None = None,
        observers: Sequence[RunObserver] = (),
        writer: bool = True,
        record: Mapping[str, Any] | None = None,
        wandb: bool = False,
        overwrite: bool = False,
        command: str | None = None,
        resume_from: str | Path | int | None = None,
        history: Mapping[str, Any] | None = None,
        wall_offset: float | None = None,
        checkpoint_at_start: bool = False,
    ) -> None:
        self.dir = Path(run_dir)
        self.algo, self.env_id, self.config = algo, env_id, config
        self.total, self.unit = int(total), unit
        self.stop_requested = False
        self.status = "running"
        self.last_step = 0
        self.resumed_step: int | None = None
        self.resumed_state: dict[str, Any] | None = None
        self.observers = list(observers)
        self.writer = writer
        self._extra_record = dict(record or {})
        self._progress_enabled = progress if writer else False
        self._signals: dict[int, Any] = {}
        self._interrupts = 0
        self._last_checkpoint_t = time.monotonic()
        self._last_checkpoint_step = 0
        self._resume_from = resume_from
        self._history_extra = dict(history or {})
        self._summary_written = False
        self._summary_fields: dict[str, Any] = {}
        self._created: list[Path] = []  # folders this run made, removed if it never starts
        self._record: dict[str, Any] = {}  # config.json as written, kept to rewrite it
        self.overwrite, self.command = overwrite, command if command is not None else _cli_command()
        self._aside: tuple[str, ...] = ()  # files set aside in PREVIOUS_DIR, put back if refused
        self._checkpointed = False
        self.checkpoint_at_start = checkpoint_at_start
        if resume is not None:
            self._record = {"algo": resume.algo, "env": resume.env, "config": resume.config,
                            "preset": resume.preset, **resume.extra}  # fmt: skip
        self._writing = False  # whether this run has changed the folder yet
        try:
            resumed_wall = self._prepare_folder(resume, preset)
            if wall_offset is None:
                wall_offset = resumed_wall
            wandb_fields = None
            if wandb:
                wandb_fields = {"name": f"{algo} {env_id} {self.dir.name}", "config": self._record}
            self.logger = MetricLogger(
                self.dir,
                wall_offset=wall_offset,
                tensorboard=tensorboard and writer,
                write=writer,
                wandb=wandb_fields,
            )
        except BaseException:  # e.g. --tensorboard without tensorboard: the run never started
            self._undo_start()
            raise
        self.progress: ProgressBar | None = None
        for observer in self.observers:
            observer.attach(self.dir, resume is not None)

    # ------------------------------------------------------------------ folder lifecycle
    def _prepare_folder(self, resume: RunRecord | None, preset: str | None) -> float:
        """Check the folder, then write: everything that can refuse the run does so before a
        file changes."""
        config_path = self.dir / CONFIG_FILE
        if resume is not None:
            if resume.algo != self.algo:
                raise RunError(
                    f"{self.dir} holds a {resume.algo!r} run; cannot resume it as {self.algo!r}."
                )
            if self.writer:
                _refuse_links(self.dir)
            chosen = None
            if self._resume_from is not None:
                _, chosen = step_checkpoint(self.dir, self._resume_from)
            step, state = load_checkpoint(chosen if chosen is not None else self.dir)
            self.last_step = self._last_checkpoint_step = step
            self.resumed_step, self.resumed_state = step, state
            if not self.writer:
                return 0.0
            self._writing = True
            later = checkpoints_after(self.dir, step) if chosen is not None else []
            latest = self.dir / CHECKPOINT_DIR / "latest"
            if later and latest.is_symlink():
                later.append(latest)
            self._set_aside(
                RESUME_REWRITES, copy=True, moved=[str(p.relative_to(self.dir)) for p in later]
            )
            if later:
                assert chosen is not None  # later is empty without a chosen checkpoint
                point_latest(chosen)
            wall = _truncate_logs_after(self.dir, step)
            self._record.update(self._extra_record)
            self._record["config"] = _fields(self.config)
            self._record["history"] = [*_history(self._record), self._history_entry("resume")]
            write_json_atomic(config_path, self._record)
            return wall
        if not self.writer:
            return 0.0
        history: list[dict[str, Any]] = []
        if self.overwrite:
            folder = inspect_folder(self.dir)
            if folder.kind in ("files", "foreign"):
                raise RunError(
                    f"{self.dir} is not an rlx run folder ({folder.reason}), so starting over "
                    "in it would delete what it holds; choose another folder."
                )
            history = _history(read_json_or_empty(config_path))
        elif config_path.exists():
            raise RunError(
                f"{self.dir} already holds a run; open it with resume=<its record> to continue "
                "it, or overwrite=True to start over in it."
            )
        else:
            _refuse_links(self.dir)  # starting over sets them aside; a new run writes in them
        self._created = _missing_folders(self.dir)
        self._writing = True
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.overwrite:
            self._set_aside(RUN_FILES, copy=False)
        for stale in (METRICS_FILE, EPISODES_FILE, SUMMARY_FILE):
            (self.dir / stale).unlink(missing_ok=True)
        kind = (
            "overwrite"
            if self._aside and (self.dir / PREVIOUS_DIR / CONFIG_FILE).exists()
            else "start"
        )
        self._record = self._config_record(preset, [*history, self._history_entry(kind)])
        write_json_atomic(config_path, self._record)
        return 0.0

    def _config_record(self, preset: str | None, history: list[dict[str, Any]]) -> dict[str, Any]:
        config = _fields(self.config)
        # where the preset came from (preset_source, ...: rlx.launch.presets) beside its name
        about_preset = {k: v for k, v in self._extra_record.items() if k.startswith("preset_")}
        return {
            "algo": self.algo,
            "env": self.env_id,
            "seed": config.get("seed"),
            "preset": preset,
            **about_preset,
            "config": config,
            **self._extra_record,
            "versions": library_versions(),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": self.command,
            "history": history,
        }

    def _history_entry(self, kind: str) -> dict[str, Any]:
        """One start, resume or start-over of this folder, for ``config.json``'s history
        (with the fields the opener gave, ``history``)."""
        return {
            "kind": kind,
            "command": self.command,
            "budget": self.total or None,
            "unit": self.unit,
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "rlx": VERSION,
            **self._history_extra,
        }

    def _set_aside(self, names: Sequence[str], *, copy: bool, moved: Sequence[str] = ()) -> None:
        """Keep the run files ``names`` in PREVIOUS_DIR (moved, or copied where the run only
        rewrites them), and move the files ``moved`` there too (paths inside the folder, such
        as checkpoints a rollback leaves behind), to put back if this run is refused before
        it starts."""
        aside = self.dir / PREVIOUS_DIR
        remove_entry(aside)  # left by a run killed before it started (a link: the link only)
        aside.mkdir()
        self._aside = ()  # what is aside so far: put back if what follows fails
        # copies read only the folder's own regular files and write, as the moves rename,
        # through descriptors of real folders (never through a link planted meanwhile)
        for name in names:
            source = self.dir / name
            if not (source.exists() or source.is_symlink()):
                continue
            if copy:
                copy_regular(source, aside / name, source_root=self.dir, root=self.dir)
            else:
                move_within(source, aside / name, root=self.dir)
            self._aside = (*self._aside, name)
        for name in moved:
            move_within(self.dir / name, aside / name, root=self.dir)
            self._aside = (*self._aside, name)
        self._aside = (*names, *moved)

    def _discard_aside(self) -> None:
        """The new run has started: what it replaced goes."""
        if self._aside:
            shutil.rmtree(self.dir / PREVIOUS_DIR, ignore_errors=True)
            self._aside = ()

    def _undo_start(self) -> None:
        """Leave the folder as it was before this run: the files set aside back in place, or
        a folder this run made removed (nothing, when it changed nothing yet)."""
        if not self._writing:
            return
        if not self._aside:
            if self.resumed_step is None:  # a resume changes nothing before it sets files aside
                self._remove_new_folder()
            return
        aside = self.dir / PREVIOUS_DIR
        for name in self._aside:
            remove_entry(self.dir / name)
            if (aside / name).exists() or (aside / name).is_symlink():
                with contextlib.suppress(RunError):  # a link planted in the way: left aside
                    move_within(aside / name, self.dir / name, root=self.dir)
        shutil.rmtree(aside, ignore_errors=True)
        self._aside = ()

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> Run:
        self._install_signal_handlers()
        self.progress = ProgressBar(
            self.total, self.unit, f"{self.algo} {self.env_id}", self._progress_enabled
        )
        resumed = self.resumed_step is not None
        try:
            self.notify("on_start", self.last_step, {"run_dir": self.dir, "resumed": resumed})
        except BaseException as exc:  # a with-block's __exit__ runs only once __enter__ returns
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._restore_signal_handlers()
        if self.progress is not None:
            self.progress.close()
        if self._rejected_before_training(exc):
            self.logger.close()
            if self.writer:
                self._undo_start()
            return
        self._discard_aside()
        if exc_type is not None and not self._summary_written:
            self.status = "interrupted" if exc_type is KeyboardInterrupt else "failed"
            extra = {} if exc is None else {"error": f"{exc_type.__name__}: {exc}"}
            self.finish(self.last_step, extra)
        self.logger.close()

    def _rejected_before_training(self, exc: BaseException | None) -> bool:
        """A user error (bad env, bad setting) raised before anything was logged or saved.

        Such a run never started: it leaves the folder as it was (none, for a new one), so the
        same folder can be used again once the input is fixed.
        """
        return (
            isinstance(exc, RLXError)
            and not isinstance(exc, TrainingError)
            and self.last_step == (self.resumed_step or 0)
            and not self._checkpointed
            and (self.resumed_step is not None or latest_checkpoint(self.dir) is None)
        )

    def _remove_new_folder(self) -> None:
        for name in (CONFIG_FILE, METRICS_FILE, EPISODES_FILE, SUMMARY_FILE):
            (self.dir / name).unlink(missing_ok=True)
        shutil.rmtree(self.dir / TENSORBOARD_DIR, ignore_errors=True)
        for folder in [self.dir, *self.dir.parents]:
            if folder not in self._created:
                break
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when nothing else is in it

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._signals[sig] = signal.signal(sig, self._on_signal)

    def _restore_signal_handlers(self) -> None:
        for sig, handler in self._signals.items():
            signal.signal(sig, handler)
        self._signals.clear()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._interrupts += 1
        if self._interrupts > 1 and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.stop_requested = True
        print(
            f"\nrlx: {signal.Signals(signum).name} received: saving a checkpoint and stopping "
            "(Ctrl-C again to abort now).",
            file=sys.stderr,
        )

    def record_config(self, config: Any, total: int | None = None) -> None:
        """Rewrite ``config.json`` with a config completed during training (values chosen
        from the data or the model), and move the progress bar's budget to ``total``."""
        self.config = config
        self._record["config"] = dataclasses.asdict(config)
        if total is not None and self._record.get("history"):
            self._record["history"][-1]["budget"] = int(total) or None
        if self.writer:
            write_json_atomic(self.dir / CONFIG_FILE, self._record)
        self.notify("on_config", self.last_step, self._record["config"])
        if total is not None:
            self.total = int(total)
            if self.progress is not None:
                self.progress.set_total(self.total)

    # ------------------------------------------------------------------ logging
    def log(self, step: int, metrics: Mapping[str, Any]) -> dict[str, float]:
        """Log metrics at ``step``; a NaN or infinite value raises :class:`TrainingError`."""
        values = self.logger.log(step, metrics)
        self.last_step = step
        if self.unit == "steps":
            self.update_progress(step)
        for observer in self.observers:
            observer.observe(step, values)
            self._heed(observer)
        bad = [k for k, v in values.items() if not math.isfinite(v)]
        if bad:
            raise TrainingError(
                f"{bad[0]} became {values[bad[0]]} at step {step}; training stopped and the last "
                f"good checkpoint in {self.dir / 'checkpoints'} is kept. Lower the learning "
                "rate or check the rewards."
            )
        return values

    def notify(self, hook: str, step: int, payload: Any) -> None:
        """Call ``hook(step, payload)`` on each observer that has it (``on_start``; ``on_step``
        after each collection of a deep agent's loop; ``on_end`` with the summary); one that
        then asks to stop ends the run as in :meth:`log`."""
        for observer in self.observers:
            method = getattr(observer, hook, None)
            if method is not None:
                method(step, payload)
                self._heed(observer)

    def _heed(self, observer: RunObserver) -> None:
        if observer.stop_reason is not None and not self.stop_requested:
            self.stop_requested = True
            _to_stderr(f"{observer.stop_reason}; a checkpoint is saved.")

    def log_episodes(self, steps: Any, returns: Any, lengths: Any) -> None:
        """Log finished episodes (``steps``: the env-step count at each one's end) to
        ``episodes.csv``, and show them to each observer that has ``observe_episodes``."""
        self.logger.log_episodes(steps, returns, lengths)
        for observer in self.observers:
            method = getattr(observer, "observe_episodes", None)
            if method is not None:
                method(steps, returns, lengths)

    def update_progress(self, completed: int) -> None:
        """Move the progress bar to ``completed`` units of the budget (automatic for steps)."""
        if self.progress is not None:
            self.progress.update(completed, self.logger.latest)

    # ------------------------------------------------------------------ checkpoints
    @property
    def cadence(self) -> CheckpointCadence:
        """When this run checkpoints: its config's cadence, read each time (a config completed
        during training may set it), every ``CHECKPOINT_EVERY_S`` seconds without one."""
        return CheckpointCadence.of(self.config, default_s=CHECKPOINT_EVERY_S)

    def checkpoint_due(self) -> bool:
        """True when the cadence says so (every ``checkpoint_every_s`` seconds of wall time,
        or every ``checkpoint_every_steps`` steps since the last checkpoint, counted to the
        step last logged), and when a stop is asked."""
        if self.stop_requested:
            return True
        since = self.last_step - self._last_checkpoint_step
        return self.cadence.due(time.monotonic() - self._last_checkpoint_t, since)

    def start_checkpoint_due(self) -> bool:
        """Whether the loop saves a checkpoint before its first update: asked for
        (``checkpoint_at_start``) and a new run (a resumed one starts from its checkpoint)."""
        return self.checkpoint_at_start and self.resumed_step is None

    def save_checkpoint(self, step: int, state: dict[str, Any]) -> Path:
        """Write the checkpoint of ``step``, keeping the newest ``checkpoints_kept`` (a
        non-writer only notes the time)."""
        keep = self.cadence.keep
        path = save_checkpoint(self.dir, step, state, keep=keep) if self.writer else self.dir
        self._checkpointed = True
        self._discard_aside()
        self._last_checkpoint_t = time.monotonic()
        self._last_checkpoint_step = step
        self.last_step = step
        return path

    def save_best(self, step: int, state: dict[str, Any]) -> None:
        """Write the state whose evaluation is the best so far as ``checkpoints/best.pt``
        (a non-writer writes nothing)."""
        if self.writer:
            save_best_checkpoint(self.dir, step, state)

    # ------------------------------------------------------------------ the end
    def add_to_summary(self, **fields: Any) -> None:
        """Fields ``summary.json`` holds however the run ends (e.g. the sandbox's protections)."""
        self._summary_fields.update(fields)

    def finish(self, steps: int, figures: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Write ``summary.json`` with the final figures and how the run ended."""
        if self.status == "running":
            if any(observer.stop_reason is not None for observer in self.observers):
                self.status = "stopped"
            else:
                self.status = "interrupted" if self.stop_requested else "completed"
        summary = {
            "algo": self.algo,
            "env": self.env_id,
            "seed": getattr(self.config, "seed", None),
            "steps": int(steps),
            "wall_s": round(self.logger.wall_s, 3),
            "status": self.status,
            **self._summary_fields,
            **(figures or {}),
        }
        for observer in self.observers:  # the summary so far, for an observer that judges it
            if hasattr(observer, "on_summary"):
                observer.on_summary(int(steps), dict(summary))
        for observer in self.observers:
            summary.update(observer.summary())
        if self.writer:
            write_json_atomic(self.dir / SUMMARY_FILE, summary)
        self._summary_written = True
        for observer in self.observers:  # the run has ended: what on_end returns is not heeded
            if hasattr(observer, "on_end"):
                observer.on_end(int(steps), summary)
        return summary


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _truncate_logs_after(run_dir: Path, step: int) -> float:
    """Drop metric and episode rows logged after the checkpoint we resume from.

    Returns the wall time at that point, so wall_s continues where the checkpoint left it.
    """
    wall = 0.0
    metrics = run_dir / METRICS_FILE
    if metrics.exists():
        kept = []
        with open_text(metrics, encoding="utf-8") as handle:
            lines = [line.rstrip("\n") for line in bounded_lines(handle, metrics)]
        for line in lines:
            try:
                row = loads_json(line)
            except ValueError:
                continue  # a line cut short by a crash (or not rlx's: nested too deeply)
            logged = row.get("step", 0) if isinstance(row, dict) else None
            if not _real(logged):
                continue  # not a row rlx wrote
            if logged <= step:
                kept.append(line)
                wall_s = row.get("wall_s", 0.0)
                if _real(wall_s) and math.isfinite(as_float(wall_s)):
                    wall = max(wall, float(wall_s))
        write_atomic(metrics, "".join(k + "\n" for k in kept), root=run_dir)
    episodes = run_dir / EPISODES_FILE
    if episodes.exists():
        with open_text(episodes, encoding="utf-8") as handle:
            lines = [line.rstrip("\n") for line in bounded_lines(handle, episodes)]
        kept = lines[:1] + [ln for ln in lines[1:] if (_csv_step(ln) or 0) <= step]
        write_atomic(episodes, "".join(k + "\n" for k in kept), root=run_dir)
    return wall


def _fields(config: Any) -> dict[str, Any]:
    return (
        dataclasses.asdict(config)
        if dataclasses.is_dataclass(config) and not isinstance(config, type)
        else {}
    )


def _real(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _refuse_links(run_dir: Path) -> None:
    """RunError when one of a run's files (or folders) is a symbolic link: a run writes to
    them (appends to the logs, prunes and writes checkpoints, ...), and a link would take
    those writes outside the run folder."""
    for name in RUN_FILES:
        path = run_dir / name
        if path.is_symlink():
            raise RunError(
                f"{path} is a symbolic link (to {os.readlink(path)}); a run writes to its "
                "files, and rlx writes only inside the run folder: replace the link with a copy "
                "of what it points to, then run again."
            )


def _history(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A ``config.json``'s history; for a run written before rlx kept one, its start as far
    as the record says."""
    history = record.get("history")
    if isinstance(history, list):
        return [entry for entry in history if isinstance(entry, dict)]
    if not record.get("created"):
        return []
    versions = record.get("versions")
    rlx = versions.get("rlx") if isinstance(versions, dict) else None
    return [{"kind": "start", "command": record.get("command"), "budget": None,
             "time": record.get("created"), "rlx": rlx}]  # fmt: skip


def _cli_command() -> str | None:
    """The command line, when this process is the ``rlx`` command."""
    return " ".join(sys.argv) if sys.argv and sys.argv[0].endswith("rlx") else None


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, innermost first."""
    missing = []
    for candidate in [folder, *folder.parents]:
        if candidate.exists():
            break
        missing.append(candidate)
    return missing


def _csv_step(line: str) -> int | None:
    try:
        return int(line.split(",", 1)[0])
    except ValueError:
        return None
