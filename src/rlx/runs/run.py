"""The run folder: one training run as files a person or pandas can read.

```
RUN_DIR/config.json     algorithm, full config, env id, versions, seed
RUN_DIR/metrics.jsonl   one JSON object per log step: {"step", "wall_s", <metric>: value}
RUN_DIR/episodes.csv    one row per finished training episode: step,wall_s,return,length
RUN_DIR/summary.json    final figures and how the run ended ("completed", "stopped" by a
                        doctor rule of ``stop_on``, "interrupted", "failed")
RUN_DIR/checkpoints/    step-numbered checkpoints written atomically; `latest` is the newest
```

A :class:`Run` is a context manager around a training loop. Inside it, the first Ctrl-C
(SIGINT) or SIGTERM only sets :attr:`Run.stop_requested`; the loop sees it, saves a checkpoint
and ends cleanly. A second Ctrl-C aborts at once. Whatever happens, ``summary.json`` is written
and the metrics and checkpoints already on disk stay intact.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import platform
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rlx.errors import RLXError, RunError, TrainingError
from rlx.runs.checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint
from rlx.runs.logger import EPISODES_FILE, METRICS_FILE, MetricLogger, ProgressBar

CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
CHECKPOINT_EVERY_S = 30.0


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_text(json.dumps(data, indent=2, default=_json_default, allow_nan=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise RunError(f"{path} does not exist; is {path.parent} an rlx run folder?") from exc
    except json.JSONDecodeError as exc:
        raise RunError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}).") from exc


def library_versions() -> dict[str, str]:
    import gymnasium
    import numpy
    import torch

    from rlx import __version__

    return {
        "rlx": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "torch": torch.__version__,
        "gymnasium": gymnasium.__version__,
    }


class Run:
    """Creates (or continues, with ``resume=True``) a run folder and logs a run into it.

    Args:
        run_dir: the folder. A new run needs a folder without a ``config.json``.
        algo: registered algorithm name.
        env_id: environment id or description.
        config: the algorithm's config dataclass.
        total: the training budget for the progress bar (in ``unit``).
        resume: continue from the latest checkpoint of an existing run folder.
        progress: show a progress bar (None: when stderr is a terminal).
        tensorboard: also write TensorBoard event files to ``RUN_DIR/tensorboard``.
        preset: name of the per-environment preset the config came from, if any.
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
        resume: bool = False,
        progress: bool | None = None,
        tensorboard: bool = False,
        preset: str | None = None,
        stop_on: tuple[str, ...] = (),
        doctor: bool = True,
    ) -> None:
        self.dir = Path(run_dir)
        self.algo, self.env_id, self.config = algo, env_id, config
        self.total, self.unit = int(total), unit
        self.stop_requested = False
        self.status = "running"
        self.last_step = 0
        self.resumed_step: int | None = None
        self.resumed_state: dict[str, Any] | None = None
        self._progress_enabled = progress
        self._signals: dict[int, Any] = {}
        self._interrupts = 0
        self._last_checkpoint_t = time.monotonic()
        self._summary_written = False
        self._summary_fields: dict[str, Any] = {}
        wall_offset = self._prepare_folder(resume, preset)
        self.logger = MetricLogger(self.dir, wall_offset=wall_offset, tensorboard=tensorboard)
        self.progress: ProgressBar | None = None
        self.live = self._live_doctor(doctor, stop_on)

    # ------------------------------------------------------------------ folder lifecycle
    def _prepare_folder(self, resume: bool, preset: str | None) -> float:
        config_path = self.dir / CONFIG_FILE
        if resume:
            if not config_path.exists():
                raise RunError(
                    f"--resume needs an existing run folder, but {self.dir} has no {CONFIG_FILE}."
                )
            previous = read_json(config_path)
            if previous.get("algo") != self.algo:
                raise RunError(
                    f"{self.dir} holds a {previous.get('algo')!r} run; cannot resume it as "
                    f"{self.algo!r}."
                )
            step, state = load_checkpoint(self.dir)
            self.last_step = step
            self.resumed_step, self.resumed_state = step, state
            return _truncate_logs_after(self.dir, step)
        if config_path.exists():
            raise RunError(
                f"{self.dir} already holds a run; pass --resume to continue it, "
                "or choose another --run-dir."
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in (METRICS_FILE, EPISODES_FILE, SUMMARY_FILE):
            (self.dir / stale).unlink(missing_ok=True)
        write_json_atomic(config_path, self._config_record(preset))
        return 0.0

    def _config_record(self, preset: str | None) -> dict[str, Any]:
        config = dataclasses.asdict(self.config) if dataclasses.is_dataclass(self.config) else {}
        return {
            "algo": self.algo,
            "env": self.env_id,
            "seed": config.get("seed"),
            "preset": preset,
            "config": config,
            "versions": library_versions(),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv) if sys.argv and sys.argv[0].endswith("rlx") else None,
        }

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> Run:
        self._install_signal_handlers()
        self.progress = ProgressBar(
            self.total, self.unit, f"{self.algo} {self.env_id}", self._progress_enabled
        )
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._restore_signal_handlers()
        if self.progress is not None:
            self.progress.close()
        if self._rejected_before_training(exc):
            self.logger.close()
            self._remove_new_folder()
            return
        if exc_type is not None and not self._summary_written:
            self.status = "interrupted" if exc_type is KeyboardInterrupt else "failed"
            extra = {} if exc is None else {"error": f"{exc_type.__name__}: {exc}"}
            self.finish(self.last_step, extra)
        self.logger.close()

    def _rejected_before_training(self, exc: BaseException | None) -> bool:
        """A user error (bad env, bad setting) raised before anything was logged or saved.

        Such a run never started: it leaves no folder behind, so the same ``--run-dir`` can
        be used again once the input is fixed.
        """
        return (
            isinstance(exc, RLXError)
            and not isinstance(exc, TrainingError)
            and self.resumed_step is None
            and self.last_step == 0
            and latest_checkpoint(self.dir) is None
        )

    def _remove_new_folder(self) -> None:
        for name in (CONFIG_FILE, METRICS_FILE, EPISODES_FILE, SUMMARY_FILE):
            (self.dir / name).unlink(missing_ok=True)
        shutil.rmtree(self.dir / "tensorboard", ignore_errors=True)
        with contextlib.suppress(OSError):
            self.dir.rmdir()  # only when nothing else was in it

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

    def _live_doctor(self, enabled: bool, stop_on: tuple[str, ...]) -> Any:
        """The doctor's rules on the metrics as they are logged (one line per new finding, on
        stderr); ``stop_on`` rules end the run, checkpoint saved, when they fire."""
        from rlx.diagnostics.doctor import LiveDoctor, check_rule_ids

        stop_on = check_rule_ids(stop_on)
        if not enabled and not stop_on:
            return None
        config = dataclasses.asdict(self.config) if dataclasses.is_dataclass(self.config) else {}
        live = LiveDoctor(self.algo, self.env_id, config, stop_on=stop_on, printer=_to_stderr)
        if self.resumed_step is not None:  # a resumed run is judged whole, not from the resume
            from rlx.diagnostics.series import read_rlx_run

            live.preload(read_rlx_run(self.dir).metrics)
        return live

    def record_config(self, config: Any, total: int | None = None) -> None:
        """Rewrite ``config.json`` with a config completed during training (values chosen
        from the data or the model), and move the progress bar's budget to ``total``."""
        self.config = config
        record = read_json(self.dir / CONFIG_FILE)
        record["config"] = self._config_record(record.get("preset"))["config"]
        write_json_atomic(self.dir / CONFIG_FILE, record)
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
        if self.live is not None:
            self.live.observe(step, values)
            if self.live.stop is not None and not self.stop_requested:
                self.stop_requested = True
                _to_stderr(
                    f"rlx doctor: stopping the run (stop_on {self.live.stop.rule.id}); "
                    "a checkpoint is saved."
                )
        bad = [k for k, v in values.items() if not math.isfinite(v)]
        if bad:
            raise TrainingError(
                f"{bad[0]} became {values[bad[0]]} at step {step}; training stopped and the last "
                f"good checkpoint in {self.dir / 'checkpoints'} is kept. Lower the learning "
                "rate or check the rewards."
            )
        return values

    def log_episodes(self, steps: Any, returns: Any, lengths: Any) -> None:
        self.logger.log_episodes(steps, returns, lengths)

    def update_progress(self, completed: int) -> None:
        """Move the progress bar to ``completed`` units of the budget (automatic for steps)."""
        if self.progress is not None:
            self.progress.update(completed, self.logger.latest)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_due(self) -> bool:
        """True every ``CHECKPOINT_EVERY_S`` seconds of wall time, and when a stop is asked."""
        return self.stop_requested or (
            time.monotonic() - self._last_checkpoint_t >= CHECKPOINT_EVERY_S
        )

    def save_checkpoint(self, step: int, state: dict[str, Any]) -> Path:
        path = save_checkpoint(self.dir, step, state)
        self._last_checkpoint_t = time.monotonic()
        self.last_step = step
        return path

    # ------------------------------------------------------------------ the end
    def add_to_summary(self, **fields: Any) -> None:
        """Fields ``summary.json`` holds however the run ends (e.g. the sandbox's protections)."""
        self._summary_fields.update(fields)

    def finish(self, steps: int, figures: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Write ``summary.json`` with the final figures and how the run ended."""
        if self.status == "running":
            if self.live is not None and self.live.stop is not None:
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
        if self.live is not None:
            # every rule over the whole run; live findings that did not last are not kept
            summary["doctor"] = [f.rule.id for f in self.live.final().findings]
            if self.live.stop is not None:
                summary["stopped_by"] = self.live.stop.rule.id
        write_json_atomic(self.dir / SUMMARY_FILE, summary)
        self._summary_written = True
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
        for line in metrics.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
            if row.get("step", 0) <= step:
                kept.append(line)
                wall = max(wall, float(row.get("wall_s", 0.0)))
        metrics.write_text("".join(k + "\n" for k in kept))
    episodes = run_dir / EPISODES_FILE
    if episodes.exists():
        lines = episodes.read_text().splitlines()
        kept = lines[:1] + [ln for ln in lines[1:] if (_csv_step(ln) or 0) <= step]
        episodes.write_text("".join(k + "\n" for k in kept))
    return wall


def _csv_step(line: str) -> int | None:
    try:
        return int(line.split(",", 1)[0])
    except ValueError:
        return None


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    return str(value)
