"""What the doctor compares a run with, handed in from above.

Some rules need more than the run's own logs: the value a new run would get for a field (its
algorithm's default, or the env's preset: rlx's own, else rl-baselines3-zoo's) to fit a fix,
and rl-baselines3-zoo's published agent to judge a final return. That knowledge lives above
the doctor (the algorithms' configs in the registry, the zoo's files in :mod:`rlx.launch`),
and the doctor sits below them: it never imports them. Instead the faces and the launcher
install a :class:`References` for the work they carry out (:func:`using`:
``rlx.train``, ``rlx.doctor``, ``rlx.report``, every ``rlx`` command), and the rules ask
:func:`current` for it. Called bare (``rlx.diagnostics.doctor.doctor`` with nothing
installed), the doctor has :data:`NO_REFERENCES`: every rule that needs a reference stays
silent, and a fix is fitted to the run alone.

A context variable rather than an argument threaded through every rule and fix: the
references are one fact about the work being done, set where it starts, and a variable of
:mod:`contextvars` is set per thread and per task, so two doctors in one process never see
each other's.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any, Protocol


class References(Protocol):
    """What a run is compared with."""

    def default(self, algo: str, name: str) -> float | None:
        """The default of the numeric config field ``name`` of ``algo`` (None: unknown)."""

    def presets(self, algo: str, env_id: str) -> list[tuple[str, dict[str, Any]]]:
        """``(whose, values)`` of the presets a new run of ``algo`` on ``env_id`` takes, in
        the order it takes them (rlx's own, then rl-baselines3-zoo's), in rlx's fields."""

    def published(self, env_id: str) -> Mapping[str, Any]:
        """rl-baselines3-zoo's published agents on ``env_id``, by algorithm: each with
        ``algo``, ``env_id``, ``mean_reward``, ``std_reward`` and ``n_timesteps``."""


class NoReferences:
    """Nothing to compare with: the rules that need a reference stay silent."""

    def default(self, algo: str, name: str) -> float | None:
        return None

    def presets(self, algo: str, env_id: str) -> list[tuple[str, dict[str, Any]]]:
        return []

    def published(self, env_id: str) -> Mapping[str, Any]:
        return {}


NO_REFERENCES: References = NoReferences()

_CURRENT: contextvars.ContextVar[References] = contextvars.ContextVar(
    "rlx_doctor_references", default=NO_REFERENCES
)


def current() -> References:
    """The references installed for the work in progress (:data:`NO_REFERENCES` if none)."""
    return _CURRENT.get()


@contextlib.contextmanager
def using(references: References) -> Iterator[References]:
    """Install ``references`` for what runs inside the ``with`` block (nested blocks restore
    the outer one on leaving)."""
    token = _CURRENT.set(references)
    try:
        yield references
    finally:
        _CURRENT.reset(token)


__all__ = ["NO_REFERENCES", "NoReferences", "References", "current", "using"]
