"""What a training loop may do with its run: the members of :class:`rlx.runs.Run` that
algorithms use, as a protocol.

Every ``train(config, env, run)`` (agents, games, language-model stages, tabular learners) and
the loops they share receive a :class:`RunHandle`, so mypy checks each use against this list
and a loop cannot reach into the folder's bookkeeping (its files, signals, history) that
:class:`~rlx.runs.Run` keeps to itself. A test double only needs these members.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol


class RunHandle(Protocol):
    """The open run a loop trains into (:class:`rlx.runs.Run` is the one implementation)."""

    dir: Path
    """the run folder"""
    env_id: str
    """the env's id or description, as ``config.json`` records it"""
    stop_requested: bool
    """set by Ctrl-C, a callback or a ``stop_on`` rule: the loop saves a checkpoint and ends"""
    last_step: int
    """the step of the newest logged row"""
    resumed_step: int | None
    """the step a resumed run continues from (None: a new run)"""
    resumed_state: dict[str, Any] | None
    """the training state of the checkpoint a resumed run continues from"""
    writer: bool
    """False in a process that trains beside the one writing the folder"""

    def record_config(self, config: Any, total: int | None = None) -> None:
        """Write ``config.json`` with the final config (fields resolved at train time)."""

    def log(self, step: int, metrics: Mapping[str, Any]) -> dict[str, float]:
        """Append one metrics row; the observers (the live doctor) read it."""

    def log_episodes(self, steps: Any, returns: Any, lengths: Any) -> None:
        """Append finished episodes to ``episodes.csv``."""

    def notify(self, hook: str, step: int, payload: Any) -> None:
        """Call the user's callbacks' ``hook``; one that returns False stops the run."""

    def update_progress(self, completed: int) -> None:
        """Move the progress bar to ``completed`` units of the budget."""

    def checkpoint_due(self) -> bool:
        """Whether the checkpoint cadence asks for a checkpoint now."""

    def start_checkpoint_due(self) -> bool:
        """Whether a new run should save its checkpoint before the first update."""

    def save_checkpoint(self, step: int, state: dict[str, Any]) -> Path:
        """Save ``state`` atomically as the step's checkpoint."""

    def save_best(self, step: int, state: dict[str, Any]) -> None:
        """Save ``state`` as ``checkpoints/best.pt``."""

    def add_to_summary(self, **fields: Any) -> None:
        """Fields for ``summary.json``."""

    def finish(self, steps: int, figures: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Write ``summary.json``: the run completed ``steps``."""


__all__ = ["RunHandle"]
