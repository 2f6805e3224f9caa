"""Where a :class:`~rlx.diagnostics.series.RunLog` comes from: an rlx run folder (read through
:mod:`rlx.runs`, which owns its files) or another library's logs
(:mod:`rlx.diagnostics.foreign`: TensorBoard, Stable-Baselines3, TRL)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from rlx import metrics as M
from rlx.diagnostics.foreign import read_foreign
from rlx.diagnostics.series import RunLog, Series
from rlx.errors import RunError
from rlx.runs import folder


def read_run(path: str | Path) -> RunLog:
    """The :class:`RunLog` of an rlx run folder, or of another library's logs (a TensorBoard
    folder or event file, an SB3 ``progress.csv``, a TRL ``trainer_state.json``, or folders
    holding them)."""
    path = Path(path)
    if not path.exists():
        raise RunError(f"{path} does not exist; give an rlx run folder or another library's logs.")
    if path.is_dir() and (path / folder.METRICS_FILE).exists():
        return read_rlx_run(path)
    return read_foreign(path)


RETURN_POINTS = 20
"""Fewer logged returns than this (a tabular run logs one mean per 500 episodes) are too few
for the rules that judge the return: the run's episodes are read instead."""


def with_episodes(
    rows: Mapping[str, Series], episodes: Callable[[], Mapping[str, Series]]
) -> dict[str, Series]:
    """The series the doctor reads of an rlx run, the same during training
    (:class:`~rlx.diagnostics.doctor.LiveDoctor`) and after (:func:`read_rlx_run`): its logged
    rows', with the return and length of every finished episode (``episodes()``, asked only
    when needed: :func:`episode_series`) in place of the rows' means where the rows hold fewer
    returns than :data:`RETURN_POINTS` and the episodes are more."""
    metrics = dict(rows)
    logged = len(rows.get(M.EPISODE_RETURN, ()))
    if logged < RETURN_POINTS:
        finished = episodes()
        if len(finished.get(M.EPISODE_RETURN, ())) > logged:
            metrics.update(finished)
    return metrics


def read_rlx_run(run_dir: Path) -> RunLog:
    """An rlx run: its metrics, config and summary; its episodes (``episodes.csv``) in place of
    the logged return where :func:`with_episodes` says so."""
    points = folder.read_metrics(run_dir)
    rows = {k: Series.from_pairs(v) for k, v in points.items()}
    metrics = with_episodes(rows, lambda: episode_series(run_dir))
    log = RunLog(run_dir, "rlx", metrics)
    config = folder.read_json_or_empty(run_dir / folder.CONFIG_FILE)
    algo, env = config.get("algo"), config.get("env")
    log.algo = algo if isinstance(algo, str) else None  # a folder may hold anything
    log.env = env if isinstance(env, str) else None
    recorded = config.get("config")
    log.config = dict(recorded) if isinstance(recorded, Mapping) else {}
    log.summary = folder.read_summary(run_dir)
    return log


def episode_series(run_dir: Path) -> dict[str, Series]:
    """Per-episode returns and lengths from the run's ``episodes.csv`` ({} when it has none)."""
    rows = folder.read_episodes(run_dir)
    if not rows:
        return {}
    return {
        M.EPISODE_RETURN: Series.from_pairs((step, ret) for step, ret, _ in rows),
        M.EPISODE_LENGTH: Series.from_pairs((step, length) for step, _, length in rows),
    }
