"""Buffers: a numpy replay ring for off-policy agents, a rollout buffer for on-policy ones.

Both are filled one *vector* step at a time (all env copies in one call, no Python loop over
copies) and keep ``terminated`` and ``truncated`` apart: a time limit ends an episode but its
last transition still bootstraps from the true final observation.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from rlx.core.targets import n_step_window
from rlx.errors import ConfigError


class ReplaySample(NamedTuple):
    """A minibatch of transitions (numpy arrays, first dim the batch).

    With n-step returns, ``rewards`` is the discounted reward sum of the window, ``next_obs``
    the observation after its last transition, and ``discounts`` is ``gamma**k`` for a window
    of ``k`` transitions: the target is ``rewards + discounts * (1 - terminated) * V(next_obs)``.
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    discounts: np.ndarray
    next_masks: np.ndarray | None = None  # the valid actions at next_obs (True), if masked


class ReplayBuffer:
    """A ring buffer of transitions with uniform sampling and optional n-step returns.

    Storage is laid out ``[capacity // num_envs, num_envs, ...]``: each env copy writes its
    own column in time order, so the transitions after a sampled one (for n-step returns) are
    the next rows of the same column. When a column is full its oldest rows are overwritten.
    Only the transitions passed with ``where=True`` are written: under NEXT_STEP autoreset the
    step after a done is a reset, not a transition, and the caller leaves it out.

    ``next_obs`` is stored beside ``obs`` (twice the observation memory, but a truncated
    episode's true final observation is kept without special cases). With ``mask_size`` the
    valid actions at ``next_obs`` are stored too (:mod:`rlx.core.masks`): a target's max over
    next actions takes only those.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        obs_dtype: Any = np.float32,
        *,
        num_envs: int = 1,
        action_shape: tuple[int, ...] = (),
        action_dtype: Any = np.int64,
        n_step: int = 1,
        gamma: float = 0.99,
        mask_size: int | None = None,
    ) -> None:
        if capacity < 1 or num_envs < 1 or n_step < 1:
            raise ConfigError(
                f"ReplayBuffer needs capacity >= 1, num_envs >= 1 and n_step >= 1, got "
                f"{capacity}, {num_envs} and {n_step}."
            )
        self.rows = math.ceil(capacity / num_envs)
        self.num_envs, self.n_step, self.gamma = num_envs, n_step, gamma
        shape = (self.rows, num_envs)
        self.obs = np.zeros((*shape, *obs_shape), dtype=obs_dtype)
        self.next_obs = np.zeros((*shape, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((*shape, *action_shape), dtype=action_dtype)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.terminated = np.zeros(shape, dtype=bool)
        self.truncated = np.zeros(shape, dtype=bool)
        self.next_masks = None if mask_size is None else np.ones((*shape, mask_size), bool)
        self.pos = np.zeros(num_envs, dtype=np.int64)  # next row each column writes
        self.count = np.zeros(num_envs, dtype=np.int64)  # rows each column holds

    @property
    def capacity(self) -> int:
        return self.rows * self.num_envs

    def __len__(self) -> int:
        return int(self.count.sum())

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        where: np.ndarray | None = None,
        next_masks: np.ndarray | None = None,
    ) -> None:
        """Store one vector step ``[num_envs, ...]``; only the copies with ``where`` True."""
        envs = np.arange(self.num_envs) if where is None else np.flatnonzero(where)
        rows = self.pos[envs]
        self.obs[rows, envs] = obs[envs]
        self.next_obs[rows, envs] = next_obs[envs]
        self.actions[rows, envs] = actions[envs]
        self.rewards[rows, envs] = rewards[envs]
        self.terminated[rows, envs] = terminated[envs]
        self.truncated[rows, envs] = truncated[envs]
        if self.next_masks is not None and next_masks is not None:
            self.next_masks[rows, envs] = next_masks[envs]
        self.pos[envs] = (rows + 1) % self.rows
        self.count[envs] = np.minimum(self.count[envs] + 1, self.rows)

    def end_episodes(self, columns: np.ndarray) -> None:
        """Mark the last stored transition of each of ``columns`` truncated: what those
        columns hold next comes from other episodes (new envs), so no n-step return spans
        the cut."""
        columns = columns[self.count[columns] > 0] if len(columns) else columns
        self.truncated[(self.pos[columns] - 1) % self.rows, columns] = True

    def sample(self, batch_size: int, rng: np.random.Generator) -> ReplaySample:
        """``batch_size`` transitions drawn uniformly (with replacement) from all stored ones."""
        if len(self) == 0:
            raise ConfigError("cannot sample from an empty replay buffer.")
        env, age = self._draw(batch_size, rng)
        row = (self.pos[env] - self.count[env] + age) % self.rows
        if self.n_step == 1:
            rewards = self.rewards[row, env]
            last_row = row
            discounts = np.full(batch_size, self.gamma, dtype=np.float32)
        else:
            rewards, last_row, discounts = self._n_step(row, env, age)
        return ReplaySample(
            obs=self.obs[row, env],
            actions=self.actions[row, env],
            rewards=rewards.astype(np.float32),
            next_obs=self.next_obs[last_row, env],
            terminated=self.terminated[last_row, env],
            truncated=self.truncated[last_row, env],
            discounts=discounts.astype(np.float32),
            next_masks=None if self.next_masks is None else self.next_masks[last_row, env],
        )

    def _draw(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Uniform over stored transitions: a flat index, split into (column, age in column)."""
        flat = rng.integers(0, len(self), size=batch_size)
        ends = np.cumsum(self.count)
        env = np.searchsorted(ends, flat, side="right")
        age = flat - (ends[env] - self.count[env])
        return env, age

    def _n_step(
        self, row: np.ndarray, env: np.ndarray, age: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        steps = np.arange(self.n_step)
        window = (row[:, None] + steps[None, :]) % self.rows
        cols = env[:, None]
        available = self.count[env] - age  # this row and the newer ones of its column
        G, k, _ = n_step_window(
            self.rewards[window, cols],
            self.terminated[window, cols],
            self.truncated[window, cols],
            available,
            self.gamma,
        )
        last_row = window[np.arange(len(row)), k - 1]
        return G, last_row, self.gamma**k

    def state_dict(self) -> dict[str, Any]:
        """Everything stored, for a checkpoint (it can be large: capacity x observation size)."""
        names = ("obs", "next_obs", "actions", "rewards", "terminated", "truncated", "pos", "count")
        state = {name: getattr(self, name).copy() for name in names}
        if self.next_masks is not None:
            state["next_masks"] = self.next_masks.copy()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            current = getattr(self, name)
            if current.shape != value.shape:
                raise ConfigError(
                    f"saved replay buffer {name} has shape {value.shape}, this buffer "
                    f"{current.shape}; buffer_size and num_envs must match the saved run."
                )
            setattr(self, name, np.asarray(value, dtype=current.dtype).copy())


class RolloutBuffer:
    """``T`` vector steps of on-policy experience, ``[T, num_envs, ...]`` per field.

    ``valid`` marks real transitions (False on the reset step after a done under NEXT_STEP
    autoreset: losses and advantages must skip it). ``final_values`` holds ``V`` of the true
    final observation on truncated steps, so advantages can bootstrap through a time limit;
    ``advantages`` and ``returns`` are filled by the agent (e.g. by GAE) before minibatching.
    With ``mask_size``, ``masks`` holds each step's valid actions (:mod:`rlx.core.masks`).
    """

    def __init__(
        self,
        steps: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: Any = np.float32,
        action_shape: tuple[int, ...] = (),
        action_dtype: Any = np.int64,
        mask_size: int | None = None,
    ) -> None:
        if steps < 1 or num_envs < 1:
            raise ConfigError(
                f"RolloutBuffer needs steps >= 1 and num_envs >= 1, got {steps}, {num_envs}."
            )
        self.steps, self.num_envs = steps, num_envs
        shape = (steps, num_envs)
        self.obs = np.zeros((*shape, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((*shape, *action_shape), dtype=action_dtype)
        self.log_probs = np.zeros(shape, dtype=np.float32)
        self.values = np.zeros(shape, dtype=np.float32)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.terminated = np.zeros(shape, dtype=bool)
        self.truncated = np.zeros(shape, dtype=bool)
        self.valid = np.zeros(shape, dtype=bool)
        self.final_values = np.zeros(shape, dtype=np.float32)
        self.advantages = np.zeros(shape, dtype=np.float32)
        self.returns = np.zeros(shape, dtype=np.float32)
        # the valid actions of each step's state (None: the env gives no masks)
        self.masks = None if mask_size is None else np.ones((*shape, mask_size), dtype=bool)
        self.t = 0

    @property
    def full(self) -> bool:
        return self.t == self.steps

    def add(self, **fields: np.ndarray) -> None:
        """Store one vector step, e.g. ``add(obs=..., actions=..., rewards=..., valid=...)``."""
        if self.full:
            raise ConfigError(f"the rollout buffer is full ({self.steps} steps); call reset().")
        for name, value in fields.items():
            getattr(self, name)[self.t] = value
        self.t += 1

    def reset(self) -> None:
        self.t = 0

    def minibatches(
        self, batch_size: int, rng: np.random.Generator
    ) -> Iterator[dict[str, np.ndarray]]:
        """The valid transitions, shuffled, in minibatches of ``batch_size`` (last one smaller)."""
        idx = np.flatnonzero(self.valid[: self.t].reshape(-1))
        idx = rng.permutation(idx)
        names = ("obs", "actions", "log_probs", "values", "advantages", "returns")
        flat = {
            n: getattr(self, n)[: self.t].reshape(-1, *getattr(self, n).shape[2:]) for n in names
        }
        for start in range(0, len(idx), batch_size):
            take = idx[start : start + batch_size]
            yield {n: a[take] for n, a in flat.items()}
