"""A toy registered algorithm whose logged KL the doctor reads: it drifts once ``onset`` steps
have passed, by the square of the learning rate (``kl-too-high`` fires past 0.1 and lowers the
learning rate to 0.3 of itself), and its return climbs with the steps, the less the more the KL
drifts; it checkpoints as its config's cadence says. Heal and the
checkpoint cadence are tested on it in milliseconds, without any RL in the way."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rlx import registry
from rlx.core.fields import CheckpointFields

QUIET_KL = 0.01
"""approx_kl before the onset"""


@dataclass(frozen=True)
class DriftConfig(CheckpointFields):
    """Logs approx_kl = learning_rate ** kl_power from step ``onset`` on (0.01 before)."""

    total_steps: int = 100
    """steps to count"""
    learning_rate: float = 1.0
    """the step size whose square the KL becomes after the onset"""
    onset: int = 40
    """the first step with the drifting KL"""
    kl_power: float = 2.0
    """the power of the learning rate the drifting KL is (1: a cut of the learning rate cuts
    the KL as much, so a KL below 1, no one-update blow-up, can take two cuts to clear)"""
    sleep_s: float = 0.0
    """pause per step, so a test can kill a real process"""
    seed: int = 0
    """seed"""


class DriftAgent:
    def __init__(self, step: int) -> None:
        self.step = step
        self.run_dir = None

    def act(self, obs, deterministic: bool = True) -> int:
        return 0


def kl_at(config: DriftConfig, step: int) -> float:
    if step < config.onset:
        return QUIET_KL
    return config.learning_rate**config.kl_power


def _train(config: DriftConfig, env, run) -> DriftAgent:
    step = 0
    if run.resumed_state is not None:
        step = int(run.resumed_state["step"])
    while step < config.total_steps and not run.stop_requested:
        step += 1
        kl = kl_at(config, step)
        run.log(step, {"approx_kl": kl, "episode_return": step / (1.0 + 10.0 * kl)})
        if run.checkpoint_due():
            run.save_checkpoint(step, {"step": step})
        if config.sleep_s:
            time.sleep(config.sleep_s)
    run.save_checkpoint(step, {"step": step})
    run.finish(step, {})
    return DriftAgent(step)


def _load(config: DriftConfig, env_id: str, state: dict) -> DriftAgent:
    return DriftAgent(int(state["step"]))


DRIFT = registry.Algorithm(
    name="toy-drift",
    config=DriftConfig,
    train=_train,
    load=_load,
    summary="logs a KL that drifts with the learning rate (tests only)",
)
registry.register(DRIFT)
