"""Env runners as the training loops see them: the seam that :mod:`rlx.distributed` fills.

With ``runners=K`` an algorithm's train function receives ``remote=``, an :class:`EnvRunners`
built above it (``rlx.distributed.env_runners.remote_collection``). Its training loop asks
it to :meth:`~EnvRunners.start` K runners, each building ``worker(seed_seq, **options)`` in
its own process from a worker class written on the core side (the on-policy
:class:`~rlx.core.rollouts.RolloutWorker`, the off-policy
:class:`~rlx.core.transitions.TransitionWorker`). Once per round the loop sends a payload (the
policy's weights and what else acting needs) and gets every runner's fragment back, in runner
order, with None where a runner died and was replaced; how the fragments are laid side by
side in the learner's buffer is the loop's own business.

Nothing here knows a cluster: the loops only ever see these protocols. Payloads cross
process boundaries as plain numpy arrays (:func:`numpy_state`), which travel without
pickling; workers turn them back into tensors (:func:`torch_state`).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class RunnerWorker(Protocol):
    """What one runner holds: built as ``worker(seed_seq, **options)``, called once a round."""

    def collect(self, payload: Any) -> Any:
        """This runner's fragment for the round's ``payload``."""
        ...


class RunnerGroup(Protocol):
    """``K`` started runners of one worker class."""

    def run_some(self, payload: Any) -> tuple[list[Any | None], set[int]]:
        """Every runner's fragment for ``payload`` in runner order (None where a runner died),
        again until at least one came back; also the runners replaced on the way."""
        ...

    def stats(self) -> dict[str, float]:
        """What the runners report in a log row (their restarts, their nodes)."""
        ...

    def close(self) -> None:
        """Stop the runners (and what was started for them)."""
        ...


class EnvRunners(Protocol):
    """What a train function receives as ``remote=``: starts groups of env runners."""

    def start(
        self,
        worker: type,
        options: dict[str, Any],
        *,
        count: int,
        seed: int,
        start_step: int,
        address: str | None,
    ) -> RunnerGroup:
        """``count`` runners of ``worker(seed_seq, **options)``; runner ``i`` gets child ``i``
        of :func:`rlx.core.seeding.seed_root` ``(seed, start_step)``. ``address``: a cluster
        to join (None: start one on this machine for the run)."""
        ...


def numpy_state(state: dict[str, Any]) -> dict[str, np.ndarray]:
    """A network's state as numpy arrays, for a payload."""
    return {name: value.detach().cpu().numpy() for name, value in state.items()}


def torch_state(state: dict[str, Any]) -> dict[str, Any]:
    """:func:`numpy_state` back to tensors (copies: a payload's arrays may be read-only)."""
    import torch

    return {name: torch.tensor(value) for name, value in state.items()}


__all__ = ["EnvRunners", "RunnerGroup", "RunnerWorker", "numpy_state", "torch_state"]
