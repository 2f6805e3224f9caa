"""Metric logging for a run folder: metrics.jsonl, episodes.csv, TensorBoard, Weights & Biases,
progress bar.

Every line is flushed as it is written, so a crash loses nothing that was logged. Values may
be Python numbers, numpy scalars or 0-d tensors; they are read once here, not in hot loops.

The logs are appended without following a link (:func:`rlx.runs.files.append_file`).
TensorBoard and W&B write their own files by name: before either starts, ``RUN_DIR/tensorboard``
and ``RUN_DIR/wandb`` are checked to be real folders of the run folder, reached without a link
(:func:`rlx.runs.files.real_folder`), else one sentence. Inside them the library writes by name:
a link planted there while the run writes is the library's to follow, and rlx checks the folder.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np

from rlx.errors import ConfigError
from rlx.metrics import PROGRESS_METRICS
from rlx.runs.files import append_file, real_folder
from rlx.runs.folder import (
    EPISODE_COLUMNS,
    EPISODES_FILE,
    METRICS_FILE,
    TENSORBOARD_DIR,
    WANDB_DIR,
)


def to_float(value: Any) -> float:
    """A logged value as a plain float (numpy scalars and 0-d tensors included)."""
    if hasattr(value, "item"):
        value = value.item()
    return float(value)


class MetricLogger:
    """Appends metrics and finished episodes to a run folder, optionally to TensorBoard too."""

    def __init__(
        self,
        run_dir: Path,
        *,
        wall_offset: float = 0.0,
        tensorboard: bool = False,
        write: bool = True,
        wandb: Mapping[str, Any] | None = None,
    ):
        """``write=False``: keep the latest values and the clock, write nothing (a process
        that trains beside the one writing the run folder). ``wandb``: also log to Weights &
        Biases, with these fields (name, config) for the run."""
        self.run_dir = run_dir
        self._t0 = time.perf_counter() - wall_offset
        self._metrics = self._episodes_file = self._episodes = None
        if write:
            # kept open for the whole run and closed by close(); line-buffered so a crash loses
            # nothing
            # nothing is written through a link planted at a log's name (rlx.runs.files)
            self._metrics = append_file(run_dir / METRICS_FILE, buffering=1, encoding="utf-8")
            new_csv = not (run_dir / EPISODES_FILE).exists()
            self._episodes_file = append_file(run_dir / EPISODES_FILE, newline="", encoding="utf-8")
            self._episodes = csv.writer(self._episodes_file)
            if new_csv:
                self._episodes.writerow(EPISODE_COLUMNS)
                self._episodes_file.flush()
        self._tb = _tensorboard_writer(run_dir) if tensorboard and write else None
        self._wandb = _wandb_run(run_dir, wandb) if wandb is not None and write else None
        self.latest: dict[str, float] = {}

    @property
    def wall_s(self) -> float:
        """Seconds since training started (continued across resumes)."""
        return time.perf_counter() - self._t0

    def log(self, step: int, metrics: Mapping[str, Any]) -> dict[str, float]:
        """Write one line ``{"step", "wall_s", **metrics}``; returns the values as floats."""
        values = {k: to_float(v) for k, v in metrics.items()}
        row = {"step": int(step), "wall_s": round(self.wall_s, 4), **values}
        if self._metrics is not None:
            self._metrics.write(json.dumps(row, allow_nan=True) + "\n")
        if self._tb is not None:
            for key, value in values.items():
                self._tb.add_scalar(key, value, int(step))
        if self._wandb is not None:
            self._wandb.log(values, step=int(step))
        self.latest.update(values)
        return values

    def log_episodes(self, steps: Any, returns: Any, lengths: Any) -> None:
        """One csv row per finished episode; ``steps`` is the env-step count at its end."""
        if self._episodes is None:
            return
        assert self._episodes_file is not None  # opened with the csv writer
        steps, returns, lengths = (np.atleast_1d(np.asarray(x)) for x in (steps, returns, lengths))
        wall = round(self.wall_s, 4)
        self._episodes.writerows(
            (int(s), wall, float(r), int(n))
            for s, r, n in zip(steps, returns, lengths, strict=True)
        )
        self._episodes_file.flush()

    def close(self) -> None:
        if self._metrics is not None:
            assert self._episodes_file is not None  # both opened together
            self._metrics.close()
            self._episodes_file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def _tensorboard_writer(run_dir: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise ConfigError(
            "--tensorboard needs the tensorboard package; install it with "
            "`pip install tensorboard` (or rlx[dev])."
        ) from exc
    # TensorBoard writes by name: the folder is checked to be the run's own, not a link
    return SummaryWriter(log_dir=str(real_folder(run_dir / TENSORBOARD_DIR, root=run_dir)))


def _wandb_run(run_dir: Path, fields: Mapping[str, Any]) -> Any:
    """A Weights & Biases run beside the run folder (its files in ``RUN_DIR/wandb``), with
    rlx's metric names. Offline unless ``WANDB_MODE`` says otherwise, so it works with no
    network; ``wandb sync RUN_DIR/wandb/offline-run-*`` uploads it later."""
    import os

    try:
        import wandb
    except ImportError as exc:
        raise ConfigError(
            "--wandb needs the wandb package; install it with pip install 'rlx[wandb]'."
        ) from exc
    real_folder(run_dir / WANDB_DIR, root=run_dir)  # wandb writes by name: the run's own folder
    return wandb.init(
        dir=str(run_dir),  # wandb keeps its files in DIR/wandb
        project=os.environ.get("WANDB_PROJECT", "rlx"),
        name=str(fields.get("name", run_dir.name)),
        config=dict(fields.get("config", {})),
        # wandb checks the value (online, offline, disabled, shared)
        mode=cast(Any, os.environ.get("WANDB_MODE", "offline")),
    )


def format_metrics(latest: Mapping[str, float]) -> str:
    """The key metrics for the progress bar, e.g. ``episode_return=-12.3 epsilon=0.1``."""
    parts = [f"{k}={_short(latest[k])}" for k in PROGRESS_METRICS if k in latest]
    return " ".join(parts)


def _short(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.4g}"


class ProgressBar:
    """A rich progress bar over a training budget, with the key metrics on a line below it.

    The bar's own line (description, bar, count, elapsed, time left) fits 80 columns; the
    metrics get a line of their own and are cut with an ellipsis there, never the count or the
    time left.
    """

    def __init__(
        self,
        total: int,
        unit: str,
        description: str,
        enabled: bool | None = None,
        console: Any = None,
    ):
        if enabled is None:
            enabled = sys.stderr.isatty()
        self._progress = None
        if not enabled:
            return
        from rich.console import Console

        self._progress = _progress_with_metrics(unit, console or Console(stderr=True))
        self._task = self._progress.add_task(description, total=total, metrics="")
        self._progress.start()

    def update(self, completed: int, latest: Mapping[str, float]) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=completed, metrics=format_metrics(latest))

    def set_total(self, total: int) -> None:
        """Change the budget (a stage that sizes itself from its data knows it only later)."""
        if self._progress is not None:
            self._progress.update(self._task, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _progress_with_metrics(unit: str, console: Any) -> Any:
    """A rich ``Progress`` whose tasks show their ``metrics`` field on a second line."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.table import Column
    from rich.text import Text

    class RunProgress(Progress):
        def get_renderables(self) -> Any:
            yield self.make_tasks_table(self.tasks)
            for task in self.tasks:
                if task.fields.get("metrics"):
                    yield Text("  " + task.fields["metrics"], no_wrap=True, overflow="ellipsis")

    def fixed() -> Column:
        return Column(no_wrap=True)

    return RunProgress(
        TextColumn(
            "[bold]{task.description}",
            table_column=Column(max_width=28, no_wrap=True, overflow="ellipsis"),
        ),
        BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=6)),
        MofNCompleteColumn(table_column=fixed()),
        TextColumn(unit, table_column=fixed()),
        TimeElapsedColumn(table_column=fixed()),
        TimeRemainingColumn(table_column=fixed()),
        console=console,
        transient=False,
        expand=True,
    )
