"""Run folders: config, metrics, episodes, summary and atomic checkpoints."""

from rlx.runs.checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint
from rlx.runs.logger import MetricLogger
from rlx.runs.run import CONFIG_FILE, SUMMARY_FILE, Run, read_json

__all__ = [
    "CONFIG_FILE",
    "SUMMARY_FILE",
    "MetricLogger",
    "Run",
    "latest_checkpoint",
    "load_checkpoint",
    "read_json",
    "save_checkpoint",
]
