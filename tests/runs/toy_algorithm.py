"""A toy registered algorithm that exercises the run folder without any RL in the way."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from rlx import registry
from rlx.errors import ConfigError


@dataclass(frozen=True)
class ToyConfig:
    """Counts to total_steps, logging x = w * step."""

    total_steps: int = 100
    """steps to count"""
    w: float = 0.5
    """slope of the logged metric"""
    nan_at: int = -1
    """step at which the metric becomes NaN (-1: never)"""
    sleep_s: float = 0.0
    """pause per step, so a test can interrupt a real process"""
    seed: int = 0
    """seed"""
    approx_kl: tuple[float, ...] = ()
    """values logged as approx_kl, one per step from step 1 (none past the tuple's end)"""

    def __post_init__(self) -> None:
        if self.w < 0:
            raise ConfigError(f"w={self.w} must be >= 0.")


class ToyAgent:
    def __init__(self, total: float) -> None:
        self.total = total
        self.run_dir = None

    def act(self, obs, deterministic: bool = True) -> int:
        return 0


def _train(config: ToyConfig, env, run) -> ToyAgent:
    step, total = 0, 0.0
    if run.resumed_state is not None:
        step, total = int(run.resumed_state["step"]), float(run.resumed_state["total"])
    while step < config.total_steps and not run.stop_requested:
        step += 1
        total += config.w * step
        x = math.nan if step == config.nan_at else config.w * step
        row = {"x": x, "episode_return": total}
        if step <= len(config.approx_kl):
            row["approx_kl"] = config.approx_kl[step - 1]
        run.log(step, row)
        run.log_episodes([step], [total], [1])
        run.save_checkpoint(step, {"step": step, "total": total, "arr": np.full(3, total)})
        if config.sleep_s:
            time.sleep(config.sleep_s)
    run.finish(step, {"total": total})
    return ToyAgent(total)


def _load(config: ToyConfig, env_id: str, state: dict) -> ToyAgent:
    return ToyAgent(float(state["total"]))


TOY = registry.Algorithm(
    name="toy-counter",
    config=ToyConfig,
    train=_train,
    load=_load,
    summary="counts steps (tests only)",
)
if "toy-counter" not in registry._REGISTRY:
    registry.register(TOY)
