"""Run folders: config, metrics, episodes, summary and atomic checkpoints.

:mod:`rlx.runs.folder` owns the folder's file names and readers; :class:`Run` writes a run as
it trains; :mod:`rlx.runs.checkpoints` saves and loads training states.
"""

from rlx.runs.checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint
from rlx.runs.folder import (
    CONFIG_FILE,
    EPISODES_FILE,
    METRICS_FILE,
    MODEL_DIR,
    SUMMARY_FILE,
    RunRecord,
    is_run_folder,
    read_episodes,
    read_json,
    read_metrics,
    read_record,
    read_summary,
    write_json_atomic,
)
from rlx.runs.logger import MetricLogger
from rlx.runs.run import Run, RunObserver

__all__ = [
    "CONFIG_FILE",
    "EPISODES_FILE",
    "METRICS_FILE",
    "MODEL_DIR",
    "SUMMARY_FILE",
    "MetricLogger",
    "Run",
    "RunObserver",
    "RunRecord",
    "is_run_folder",
    "latest_checkpoint",
    "load_checkpoint",
    "read_episodes",
    "read_json",
    "read_metrics",
    "read_record",
    "read_summary",
    "save_checkpoint",
    "write_json_atomic",
]
