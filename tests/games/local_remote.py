"""A ``RemoteSelfPlay`` that plays in this process: the seam Ray's workers plug into, without
Ray."""

from __future__ import annotations

from typing import ClassVar


class LocalRemote:
    """A ``RemoteSelfPlay`` that plays every share in this process, as Ray's workers would."""

    started: ClassVar[list[LocalRemote]] = []

    def __init__(self, work, options, config):
        self.work, self.options, self.calls, self.closed = work, options, [], False
        LocalRemote.started.append(self)

    def play(self, weights, seeds, shares):
        self.calls.append(list(shares))
        return [self.work(**self.options, weights=weights, seed=seed, games=games)
                for seed, games in zip(seeds, shares, strict=True) if games]  # fmt: skip

    def stats(self):
        return {"runner_restarts": 0.0}

    def close(self):
        self.closed = True
