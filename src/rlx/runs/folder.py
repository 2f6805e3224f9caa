"""The run folder's files: their names, and the readers and writers every other part uses.

```
RUN_DIR/config.json     algorithm, full config, env, preset (and where it came from: rlx or
                        rl-baselines3-zoo, what of it is not followed), versions, creation
                        time, command, history (every start, resume and start-over: command,
                        budget, time)
RUN_DIR/metrics.jsonl   one JSON object per log step: {"step", "wall_s", <metric>: value}
RUN_DIR/episodes.csv    one row per finished training episode: step,wall_s,return,length
RUN_DIR/summary.json    final figures and how the run ended
RUN_DIR/checkpoints/    step-numbered checkpoints written atomically; `latest` is the newest
RUN_DIR/model/          language-model runs: the final model as a Hugging Face folder
RUN_DIR/tensorboard/    TensorBoard event files (--tensorboard)
RUN_DIR/report.html     `rlx report`
RUN_DIR/videos/         `rlx eval --video`: eval-step<N>.gif, a clip of the agent at step N
```

This module is the one place that knows these names. The doctor, the reports, the CLI and
``rlx.load`` read a run through :func:`read_record`, :func:`read_metrics`,
:func:`read_episodes` and :func:`read_summary`; writers live beside it in :mod:`.run` and
:mod:`.logger`. Readers tolerate what a crash leaves: a torn last line is skipped. They read
only regular files (a pipe or a device planted at a log's name is one sentence, not a hang),
of bounded size and line length (:func:`.files.open_text`, :func:`.files.bounded_lines`).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlx.errors import RunError
from rlx.runs.files import (
    JsonDepthError,
    bounded_lines,
    load_json_file,
    loads_json,
    open_text,
    write_atomic,
)

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
EPISODES_FILE = "episodes.csv"
SUMMARY_FILE = "summary.json"
CHECKPOINT_DIR = "checkpoints"
MODEL_DIR = "model"
TENSORBOARD_DIR = "tensorboard"
REPORT_FILE = "report.html"
VIDEO_DIR = "videos"
WANDB_DIR = "wandb"
ADAPTER_DIR = "adapter"
STUDY_JOURNAL = "study.journal"
"""The journal of an ``rlx tune`` study (Optuna's storage): the file that makes a folder a
study (:data:`rlx.runs.study.STORAGE_FILE`)."""
PREVIOUS_DIR = ".rlx-previous"
"""Where a run that starts over (or resumes) keeps the files it replaces until it has really
started, so that a run refused at the start leaves the folder as it was."""
RUN_FILES = (
    CONFIG_FILE, METRICS_FILE, EPISODES_FILE, SUMMARY_FILE, CHECKPOINT_DIR, MODEL_DIR,
    ADAPTER_DIR, TENSORBOARD_DIR, WANDB_DIR, REPORT_FILE, VIDEO_DIR,
)  # fmt: skip
"""Every file and folder an rlx run writes: what starting over in a run folder replaces."""
EPISODE_COLUMNS = ("step", "wall_s", "return", "length")


@dataclass(frozen=True)
class RunRecord:
    """What ``config.json`` says about a run: read once, passed to whoever needs it."""

    path: Path
    algo: str
    env: str
    config: dict[str, Any] = field(default_factory=dict)
    preset: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # versions, created, command, ...


@dataclass(frozen=True)
class FolderState:
    """What a folder holds, as far as starting a run in it goes.

    ``kind`` is one of

    - ``"new"``: absent or empty, a run may start in it;
    - ``"files"``: files but no ``config.json``: not a run folder;
    - ``"foreign"``: a ``config.json`` that is not an rlx run's (``reason`` says why);
    - ``"unstarted"``: an rlx run that ended before its first checkpoint (no checkpoint, no
      model): nothing in it can be continued, so a new run may replace it;
    - ``"run"``: an rlx run with a checkpoint or a model, to continue or to start over.
    """

    path: Path
    kind: str
    record: RunRecord | None = None
    reason: str = ""


def inspect_folder(path: str | Path) -> FolderState:
    """The :class:`FolderState` of ``path``; reads ``config.json`` and nothing else."""
    path = Path(path)
    if not path.exists() or (path.is_dir() and not any(path.iterdir())):
        return FolderState(path, "new")
    if not path.is_dir():
        return FolderState(path, "files", reason="it is a file, not a folder")
    if not (path / CONFIG_FILE).is_file():
        return FolderState(path, "files", reason=f"it holds files but no {CONFIG_FILE}")
    try:
        record = read_record(path)
    except RunError as exc:
        return FolderState(path, "foreign", reason=str(exc).rstrip("."))
    started = has_checkpoint(path) or (path / MODEL_DIR).is_dir()
    return FolderState(path, "run" if started else "unstarted", record)


def has_checkpoint(run_dir: str | Path) -> bool:
    """Whether a run folder holds a checkpoint file (a temporary one being written is none)."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    return folder.is_dir() and any(not p.name.startswith(".") for p in folder.iterdir())


def video_file(run_dir: str | Path, step: int | None) -> Path:
    """Where ``rlx eval --video`` writes the clip of a run's agent at checkpoint ``step``
    (``eval.gif`` when the step is not known): named by the step, so that a clip of a later
    checkpoint sits beside the earlier ones instead of replacing them."""
    name = "eval.gif" if step is None else f"eval-step{int(step)}.gif"
    return Path(run_dir) / VIDEO_DIR / name


def newest_video(run_dir: str | Path) -> Path | None:
    """The clip of a run folder written last (what the report shows), or None; a link is
    none (the folder's own files only)."""
    folder = Path(run_dir) / VIDEO_DIR
    real = folder.is_dir() and not folder.is_symlink()
    clips = [p for p in folder.glob("*.gif") if p.is_file() and not p.is_symlink()] if real else []
    return max(clips, key=lambda p: (p.stat().st_mtime_ns, p.name), default=None)


def is_run_folder(path: str | Path) -> bool:
    """True when ``path`` is a folder holding an rlx run's ``config.json``."""
    return (Path(path) / CONFIG_FILE).is_file()


def read_record(run_dir: str | Path) -> RunRecord:
    """The run's ``config.json``; RunError when ``run_dir`` is not an rlx run folder."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"run folder {run_dir} does not exist.")
    data = read_json(run_dir / CONFIG_FILE)
    if not isinstance(data, dict):
        raise RunError(
            f"{run_dir / CONFIG_FILE} is not an rlx run's config (a JSON {type(data).__name__}, "
            "not an object)."
        )
    if not isinstance(data.get("algo"), str) or not isinstance(data.get("config"), dict):
        raise RunError(f"{run_dir / CONFIG_FILE} is not an rlx run's config (no algo or config).")
    extra = {k: v for k, v in data.items() if k not in ("algo", "env", "config", "preset")}
    return RunRecord(
        run_dir, data["algo"], str(data.get("env")), data["config"], data.get("preset"), extra
    )


def read_summary(run_dir: str | Path) -> dict[str, Any]:
    """``summary.json``, or ``{}`` while a run has not written one (or it is unreadable)."""
    return read_json_or_empty(Path(run_dir) / SUMMARY_FILE)


def read_metrics(run_dir: str | Path) -> dict[str, list[tuple[float, float]]]:
    """Metric name -> ``[(step, value), ...]`` from ``metrics.jsonl``, in file order.

    Only numeric values are kept (``step`` and ``wall_s`` are not metrics); a line torn by a
    crash is skipped, everything before it counts. A number too large for a float is infinite;
    a line that is JSON but not an object, nests too deeply (:func:`.files.loads_json`) or has
    no numeric ``step`` is a RunError naming it.
    """
    path = Path(run_dir) / METRICS_FILE
    points: dict[str, list[tuple[float, float]]] = {}
    if not path.exists():
        return points
    with open_text(path, encoding="utf-8") as handle:  # bounded: size, lines, regular files
        for number, line in enumerate(bounded_lines(handle, path), 1):
            if not line.strip():
                continue
            try:
                row = loads_json(line)
            except JsonDepthError as exc:
                raise RunError(f"{path}, line {number}: not a metrics row ({exc}).") from exc
            except ValueError:  # torn by a crash
                continue
            if not isinstance(row, dict):
                raise RunError(f"{path}, line {number}: not a JSON object.")
            step = row.get("step")
            if not isinstance(step, (int, float)):
                raise RunError(f"{path}, line {number}: no numeric 'step'.")
            for key, value in row.items():
                if key in ("step", "wall_s") or not isinstance(value, (int, float)):
                    continue
                points.setdefault(key, []).append((as_float(step), as_float(value)))
    return points


def as_float(value: int | float) -> float:
    """``value`` as a float: an integer too large for one is infinite (with its sign)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def read_episodes(run_dir: str | Path) -> list[tuple[float, float, float]]:
    """``[(step, return, length), ...]`` from ``episodes.csv`` (a torn last row skipped)."""
    path = Path(run_dir) / EPISODES_FILE
    if not path.exists():
        return []
    rows = []
    with open_text(path, newline="", encoding="utf-8") as handle:  # bounded as read_metrics
        try:
            for row in csv.DictReader(bounded_lines(handle, path)):
                try:
                    rows.append((float(row["step"]), float(row["return"]), float(row["length"])))
                except (KeyError, TypeError, ValueError):
                    continue
        except (csv.Error, UnicodeDecodeError) as exc:
            raise RunError(f"{path} is not a readable CSV file ({exc}).") from exc
    return rows


def write_json_atomic(path: Path, data: Mapping[str, Any], *, root: Path | None = None) -> None:
    """Write ``data`` to ``path`` whole, never through a link (:func:`.files.write_atomic`;
    ``root``: the folder from which no link is followed)."""
    text = json.dumps(data, indent=2, default=_json_default, allow_nan=True) + "\n"
    write_atomic(path, text, root=root)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file, bounded (:func:`.files.load_json_file`); RunError naming the file
    when it is missing or not JSON."""
    return load_json_file(path)


def read_json_or_empty(path: Path) -> dict[str, Any]:
    """A JSON object file, or ``{}`` when it is missing, unreadable or not JSON rlx reads."""
    try:
        data = load_json_file(path)
    except RunError:
        return {}
    return data if isinstance(data, dict) else {}


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
