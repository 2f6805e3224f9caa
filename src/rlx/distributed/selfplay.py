"""AlphaZero self-play workers on Ray, feeding the learner's replay buffer.

Each worker is a Ray actor that plays its share of an iteration's games with the weights the
learner puts in the object store once per iteration, and returns the samples ``(s, pi, z)``
with the games' lengths and results. The learner merges the shares in worker order and adds
them to its replay buffer, exactly as with ``workers`` processes on one machine: the shares
and their seeds are drawn from the learner's generator the same way
(:func:`rlx.games.alphazero._worker_self_play` plays each share), so ``runners=K`` on Ray and
``workers=K`` locally play the same games for the same run seed.

A worker that dies is replaced (:class:`~rlx.distributed.env_runners.RunnerPool`) and its
share is played again by the new one with the same seed, so a fault costs time, not data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.distributed.env_runners import RunnerPool
from rlx.distributed.ray_runtime import RaySession


class SelfPlayWorker:
    """Inside a runner: plays a share of games with the weights of the round."""

    def __init__(self, seed_seq: np.random.SeedSequence, *, game_name: str, config: Any) -> None:
        self.game_name, self.config = game_name, config

    def collect(self, weights: dict[str, Any], seed: int, games: int) -> Any:
        from rlx.games.alphazero import _worker_self_play

        return _worker_self_play(self.game_name, self.config, weights, seed, games)


class RaySelfPlay:
    """``config.runners`` self-play workers on Ray for one run (closes its Ray session)."""

    def __init__(self, game_name: str, config: Any) -> None:
        self.count = config.runners
        self.session = RaySession(config.ray_address, self.count, f"runners={self.count}")
        self.session.start()
        try:
            options = {"game_name": game_name, "config": config}
            self.pool = RunnerPool(SelfPlayWorker, options, self.count, config.seed,
                                   label="self-play worker",
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
        return self.pool.restarts

    def close(self) -> None:
        self.pool.close()
        self.session.close()
