"""Observation normalisation and reward scaling from running statistics.

Both keep their statistics as plain numpy arrays with ``state_dict`` / ``load_state_dict``,
so they travel in a checkpoint and a loaded agent sees observations exactly as in training.
Agents store raw observations and rewards in their buffers and normalise when they read them,
so the statistics can keep moving without invalidating what is stored.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class RunningMeanStd:
    """Mean and variance of a stream of batches, merged with Chan et al.'s parallel update.

    For a batch with mean ``m_b``, variance ``v_b`` and count ``n_b``::

        delta = m_b - m,  n' = n + n_b,  m' = m + delta * n_b / n'
        v' = (v * n + v_b * n_b + delta**2 * n * n_b / n') / n'
    """

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        # a tiny prior count keeps the first update well defined
        self.count = float(epsilon)

    def update(self, batch: np.ndarray) -> None:
        """Merge a batch ``[N, *shape]`` into the statistics (an empty batch changes nothing)."""
        batch = np.asarray(batch, dtype=np.float64)
        if batch.shape[0] == 0:
            return
        b_mean, b_var, b_count = batch.mean(axis=0), batch.var(axis=0), batch.shape[0]
        delta = b_mean - self.mean
        total = self.count + b_count
        self.mean = self.mean + delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / total
        self.var = m2 / total
        self.count = total

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var)

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean = np.asarray(state["mean"], dtype=np.float64)
        self.var = np.asarray(state["var"], dtype=np.float64)
        self.count = float(state["count"])


class ObsNormalizer:
    """``(obs - mean) / sqrt(var + eps)``, clipped to ``[-clip, clip]``, from running stats."""

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, eps: float = 1e-8) -> None:
        self.rms = RunningMeanStd(shape)
        self.clip, self.eps = clip, eps

    def update(self, obs: np.ndarray) -> None:
        self.rms.update(obs)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        z = (np.asarray(obs, dtype=np.float64) - self.rms.mean) / np.sqrt(self.rms.var + self.eps)
        return np.clip(z, -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        return self.rms.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state)


class RewardScaler:
    """Divides rewards by the running std of the discounted return (as Gymnasium's NormalizeReward).

    Per env, ``R <- gamma * R * (1 - done) + r`` is tracked and its variance estimated;
    rewards are scaled by ``1 / sqrt(Var[R] + eps)``. Scaling (no shift) keeps the sign of
    every reward and the optimal policy unchanged.
    """

    def __init__(self, num_envs: int, gamma: float, eps: float = 1e-8) -> None:
        self.rms = RunningMeanStd(())
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.gamma, self.eps = gamma, eps

    def update(self, rewards: np.ndarray, dones: np.ndarray, where: np.ndarray) -> None:
        """Advance the running returns by one vector step (only envs in ``where``)."""
        stepped = self.returns * self.gamma + rewards
        self.returns = np.where(where, stepped, self.returns)
        self.rms.update(self.returns[where])
        self.returns = np.where(where & dones, 0.0, self.returns)

    @property
    def scale(self) -> float:
        return float(1.0 / np.sqrt(self.rms.var + self.eps))

    def __call__(self, rewards: np.ndarray) -> np.ndarray:
        return (np.asarray(rewards) * self.scale).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        return {"rms": self.rms.state_dict(), "returns": self.returns.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state["rms"])
        self.returns = np.asarray(state["returns"], dtype=np.float64)
