"""Beyond one machine: Ray-backed env runners and self-play workers (extra ``ray``).

rlx does not grow a scheduler of its own: when a run outgrows one process it runs on Ray, the
engine RLlib, OpenRLHF and veRL use.

- ``runners=K`` (``--runners K``) on PPO, A2C and DQN collects with ``K`` env runners, Ray
  actors of ``num_envs`` env copies each (:mod:`rlx.distributed.env_runners`); on AlphaZero and
  MuZero it plays self-play with ``K`` Ray workers (:mod:`rlx.distributed.selfplay`). Leaving
  ``runners`` out (None) keeps everything in this process; ``0`` is an error.
- ``ray_address="HOST:PORT"`` (``--ray-address``) joins an existing cluster; without it a local
  Ray instance is started for the run and shut down at its end
  (:mod:`rlx.distributed.ray_runtime`).
- Tests and benchmarks that start Ray run in a private network namespace with only the
  loopback interface (:mod:`rlx.distributed.netns`).

Nothing here imports Ray until a run asks for runners.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from rlx.core.checks import check_runner_fields
from rlx.distributed.ray_runtime import RaySession, check_reachable
from rlx.errors import ConfigError

# registry.Algorithm.remote -> (module, function) that builds what ``runners=K`` starts
_REMOTES = {
    "env-runners": ("rlx.distributed.env_runners", "remote_collection"),
    "self-play": ("rlx.distributed.selfplay", "remote_self_play"),
}


def scaled_out(spec: Any) -> Callable[..., Any]:
    """``spec.train`` with its Ray part, built here from above: the algorithm's training loop
    receives it as ``remote=`` and never imports this package."""
    if spec.remote not in _REMOTES:
        raise ConfigError(f"{spec.name} does not take runners; leave --runners out.")
    module, name = _REMOTES[spec.remote]
    build = getattr(importlib.import_module(module), name)
    return functools.partial(spec.train, remote=build(spec))


__all__ = ["RaySession", "check_reachable", "check_runner_fields", "scaled_out"]
