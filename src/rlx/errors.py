"""Errors for people.

Every error a user can cause is an :class:`RLXError`: one sentence that names the bad value and
what would be valid. The CLI prints it on one line and exits with code 2, without a traceback.
"""

from __future__ import annotations

import re


class RLXError(Exception):
    """Base class of every user-facing rlx error."""

    exit_code = 2


class ConfigError(RLXError):
    """A configuration value is out of range or inconsistent with another."""


class EnvError(RLXError):
    """An environment or MDP cannot be used as asked (unknown id, wrong space, no model)."""


class RenderError(EnvError):
    """An env cannot draw the frames a video needs (no ``rgb_array`` render mode, or the
    library that draws them is not installed)."""


class MDPError(EnvError):
    """The five-tuple (S, A, P, R, gamma) is malformed: shapes, probabilities, gamma."""


class CheckpointError(RLXError):
    """A run folder or checkpoint is missing, corrupt, or belongs to something else."""


class RunError(RLXError):
    """A run folder cannot be created or continued as asked."""


class TrainingError(RLXError):
    """Training cannot go on, e.g. a loss became NaN; the last good checkpoint is kept."""


class SandboxError(RLXError):
    """Model-written code cannot run with the isolation the sandbox promises on this machine."""


class UnknownAlgorithmError(ConfigError):
    """The algorithm name is not registered."""


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` safe for a terminal: each control character (C0 and C1, DEL; newline and tab
    kept) written as its escape (``\\x1b``), so text from a folder (an env id, a path, a
    finding's evidence) never moves the cursor, retitles the window or fakes a line. ``rlx``
    passes all it prints to stdout, and its error sentence, through this one function."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


__all__ = [
    "CheckpointError",
    "ConfigError",
    "EnvError",
    "MDPError",
    "RLXError",
    "RunError",
    "SandboxError",
    "TrainingError",
    "UnknownAlgorithmError",
    "printable",
]
