"""AlphaZero and MuZero self-play workers on Ray, feeding the learner's replay buffer.

Each worker is a Ray actor that plays its share of an iteration's games with the weights the
learner puts in the object store once per iteration, and returns the played games (their
recorded moves, lengths and results). The learner merges the shares in worker order and
stores their targets in its replay buffer, exactly as with ``workers`` processes on one
machine: the shares and their seeds are drawn from the learner's generator the same way and
each share is played by the function the learner hands down
(:func:`rlx.games.selfplay.play_share`), so ``runners=K`` on Ray and ``workers=K`` locally play
the same games for the same run seed. Nothing here knows a game or an algorithm: the work and
its options travel through the seam.

This module wraps the self-play loop from above: :func:`remote_self_play` gives the factory
that :func:`rlx.distributed.scaled_out` hands to the algorithm's ``train`` as ``remote``, and
:class:`RaySelfPlay` has the interface the loop declares for it
(:class:`rlx.games.selfplay.RemoteSelfPlay`).

A worker that dies is replaced (:class:`~rlx.distributed.env_runners.RunnerPool`) and its
share is played again by the new one with the same seed, so a fault costs time, not data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlx.distributed.env_runners import RunnerPool
from rlx.distributed.ray_runtime import RaySession


class ShareWorker:
    """Inside a runner: plays a share of games with the weights of the round, by calling the
    ``work`` the learner handed down (:func:`rlx.games.selfplay.play_share`)."""

    def __init__(
        self, seed_seq: np.random.SeedSequence, *, work: Callable[..., Any], options: dict
    ) -> None:
        self.work, self.options = work, options

    def collect(self, weights: dict[str, Any], seed: int, games: int) -> Any:
        return self.work(**self.options, weights=weights, seed=seed, games=games)


class RaySelfPlay:
    """``config.runners`` self-play workers on Ray for one run (closes its Ray session)."""

    def __init__(self, work: Callable[..., Any], options: dict[str, Any], config: Any) -> None:
        self.count = config.runners
        self.session = RaySession(config.ray_address, self.count, f"runners={self.count}")
        self.session.start()
        try:
            self.pool = RunnerPool(ShareWorker, {"work": work, "options": options}, self.count,
                                   config.seed, label="self-play worker",
                                   note="its games are played again")  # fmt: skip
        except BaseException:
            self.session.close()
            raise

    def play(self, weights: dict[str, Any], seeds: list[int], shares: list[int]) -> list[Any]:
        """Every worker's share ``(seed, games)``, in worker order (empty shares skipped)."""
        slots = [i for i, games in enumerate(shares) if games]
        args = [(int(seed), int(games)) for seed, games in zip(seeds, shares, strict=True)]
        ref = self.pool.ray.put(weights)  # once per iteration, also for any replays
        results: dict[int, Any] = {}
        while missing := [i for i in slots if i not in results]:
            for slot, result in zip(missing, self.pool.run(ref, args, missing), strict=True):
                if result is not None:
                    results[slot] = result
        return [results[i] for i in slots]

    @property
    def restarts(self) -> int:
        """Workers replaced since the run (or its resume) began."""
        return self.pool.restarts

    def stats(self) -> dict[str, float]:
        """``runner_restarts`` and ``runner_nodes`` (the Ray nodes the workers are on)."""
        return self.pool.stats()

    def close(self) -> None:
        self.pool.close()
        self.session.close()


def remote_self_play(spec: Any) -> type[RaySelfPlay]:
    """What ``runners=K`` starts for AlphaZero or MuZero (``spec``, its registration): the
    factory its ``train`` calls with the work of a share and the run's config
    (:class:`rlx.games.selfplay.RemoteSelfPlayFactory`)."""
    return RaySelfPlay
