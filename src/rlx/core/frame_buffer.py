"""A replay buffer that stores each frame of stacked image observations once.

An Atari observation is the last 4 frames, ``[4, 84, 84]`` uint8; the next observation shares
3 of them. :class:`~rlx.core.buffers.ReplayBuffer` stores ``obs`` and ``next_obs`` whole, so
each frame lies in it 8 times. :class:`FrameReplayBuffer` keeps one pool of frames per env
copy and, per transition, the indices of the frames its ``obs`` and ``next_obs`` are made of;
a sampled observation is rebuilt as ``pool[indices]``.

    a transition  (obs = frames [i-3, i-2, i-1, i], next_obs = frames [i-2, i-1, i, i+1])
    stores        its action, reward, flags, and the 8 frame indices: frame i+1 is new
    memory        ~ capacity x one frame (84 x 84 = 7,056 bytes), instead of 8 frames

Whether a frame is already in the pool is checked, not assumed: ``obs`` reuses the previous
transition's ``next_obs`` frames when it equals that observation, and a ``next_obs`` reuses
all but the newest frame of ``obs`` when they are shifted by one frame. Anything else (the
first observation of an episode, whose stack repeats its first frame) is written frame by
frame, a frame equal to the one before it in the stack written once. The buffer therefore
returns exactly what the env gave, whatever it gave, and is small for stacked frames.

The frame indices are kept in a :class:`~rlx.core.buffers.ReplayBuffer` (as its
observations), which also draws the samples and sums n-step windows, so both buffers sample
alike. An index is a frame's key, ``number x num_envs + copy``: it names its copy's pool and
the frame's place in it, so a sample needs nothing but the keys.

A pool holds ``rows + rows // POOL_MARGIN + 2 * stack`` frames per env copy: the margin covers
the extra frame each episode's first observation takes; should frames run out first (episodes
shorter than ``POOL_MARGIN`` steps on average), the oldest transitions of that copy are
dropped early.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.buffers import ReplayBuffer, ReplaySample
from rlx.errors import ConfigError

POOL_MARGIN = 16
"""extra frames per copy as a share of its rows (1/16): one more frame per episode's start"""


def stores_frames_once(obs_shape: tuple[int, ...], obs_dtype: Any) -> bool:
    """Observations :class:`FrameReplayBuffer` is for: stacks of uint8 frames, ``[S, H, W]``
    with ``S`` the smallest axis (channels first, as Atari's frame stack)."""
    return (
        len(obs_shape) == 3
        and np.dtype(obs_dtype) == np.uint8
        and obs_shape[0] < min(obs_shape[1:])
    )


class FrameReplayBuffer:
    """:class:`~rlx.core.buffers.ReplayBuffer`'s interface (same constructor, ``add``,
    ``sample``, ``end_episodes``, checkpoints) storing each frame once (module docstring)."""

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        obs_dtype: Any = np.uint8,
        *,
        num_envs: int = 1,
        action_shape: tuple[int, ...] = (),
        action_dtype: Any = np.int64,
        n_step: int = 1,
        gamma: float = 0.99,
        mask_size: int | None = None,
    ) -> None:
        if not stores_frames_once(tuple(obs_shape), obs_dtype):
            raise ConfigError(
                f"FrameReplayBuffer stores stacks of uint8 frames [S, H, W]; got observations "
                f"{tuple(obs_shape)} of {np.dtype(obs_dtype)}: use ReplayBuffer."
            )
        self.stack = int(obs_shape[0])
        self.frame_shape = tuple(int(d) for d in obs_shape[1:])
        # the transitions, with frame keys as observations: [stack] int64 each
        self.index = ReplayBuffer(
            capacity, (self.stack,), np.int64, num_envs=num_envs, action_shape=action_shape,
            action_dtype=action_dtype, n_step=n_step, gamma=gamma, mask_size=mask_size,
        )  # fmt: skip
        self.num_envs, self.n_step, self.gamma = num_envs, n_step, gamma
        self.pool_size = self.index.rows + self.index.rows // POOL_MARGIN + 2 * self.stack
        self.frames = np.zeros((self.pool_size, num_envs, *self.frame_shape), dtype=np.uint8)
        # frames are numbered per copy from 0 on; number k lies in pool row k % pool_size
        self.written = np.zeros(num_envs, dtype=np.int64)  # frames each copy has written
        self.last_next = np.full((num_envs, self.stack), -1, dtype=np.int64)  # its keys

    @property
    def rows(self) -> int:
        return self.index.rows

    @property
    def capacity(self) -> int:
        return self.index.capacity

    @property
    def pos(self) -> np.ndarray:
        return self.index.pos

    @property
    def count(self) -> np.ndarray:
        return self.index.count

    def __len__(self) -> int:
        return len(self.index)

    @property
    def nbytes(self) -> int:
        """The memory this buffer holds: the frame pools and the transitions' arrays."""
        b = self.index
        arrays = (self.frames, b.obs, b.next_obs, b.actions, b.rewards, b.terminated, b.truncated)
        masks = 0 if b.next_masks is None else b.next_masks.nbytes
        return sum(a.nbytes for a in arrays) + masks

    # ------------------------------------------------------------------ writing
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
        """Store one vector step ``[num_envs, ...]``; only the copies with ``where`` True
        (``next_masks``: the valid actions at ``next_obs``, when the buffer keeps them)."""
        envs = np.arange(self.num_envs) if where is None else np.flatnonzero(where)
        obs_ids = np.zeros((self.num_envs, self.stack), dtype=np.int64)
        next_ids = np.zeros((self.num_envs, self.stack), dtype=np.int64)
        # a loop over copies: an image env's step costs far more than this bookkeeping
        for env in envs:
            obs_ids[env] = self._frames_of(env, obs[env], self.last_next[env])
            next_ids[env] = self._frames_of(env, next_obs[env], obs_ids[env], shifted=True)
            self.last_next[env] = next_ids[env]
        self.index.add(obs_ids, actions, rewards, next_ids, terminated, truncated, where,
                       next_masks)  # fmt: skip

    def _frames_of(
        self, env: int | np.integer, stack: np.ndarray, known: np.ndarray, shifted: bool = False
    ) -> np.ndarray:
        """The frame keys of ``stack`` in copy ``env``'s pool, writing what is not there.

        ``known`` are the frame keys of a stack already stored: reused whole when ``stack``
        equals it, or all but its oldest frame when ``shifted`` and ``stack`` is it moved on
        by one frame (-1: nothing known).
        """
        if known[0] >= 0:
            stored = self._read(known)
            if np.array_equal(stack, stored):
                return known
            if shifted and np.array_equal(stack[:-1], stored[1:]):
                return np.append(known[1:], self._write(env, stack[-1]))
        keys = np.empty(self.stack, dtype=np.int64)
        for k in range(self.stack):
            if k > 0 and np.array_equal(stack[k], stack[k - 1]):
                keys[k] = keys[k - 1]  # a stack padded with its first frame
            else:
                keys[k] = self._write(env, stack[k])
        return keys

    def _write(self, env: int | np.integer, frame: np.ndarray) -> int | np.integer:
        """Put ``frame`` into copy ``env``'s pool; returns its key. The oldest transitions of
        that copy whose frames the new one would overwrite are dropped first."""
        number = int(self.written[env])
        self._release(env, oldest_kept=number - self.pool_size + 1)
        self.frames[number % self.pool_size, env] = frame
        self.written[env] = number + 1
        return number * self.num_envs + env

    def _release(self, env: int | np.integer, oldest_kept: int) -> None:
        """Drop copy ``env``'s oldest transitions while they use a frame numbered below
        ``oldest_kept``: frame numbers only grow along a column, so its oldest transition
        holds its oldest frame."""
        b = self.index
        while b.count[env] > 0:
            oldest = (b.pos[env] - b.count[env]) % b.rows
            if b.obs[oldest, env].min() // self.num_envs >= oldest_kept:
                return
            b.count[env] -= 1

    def end_episodes(self, columns: np.ndarray) -> None:
        """Mark the last stored transition of each of ``columns`` truncated (their next
        transitions come from new envs)."""
        self.index.end_episodes(columns)

    # ------------------------------------------------------------------ reading
    def _read(self, keys: np.ndarray) -> np.ndarray:
        """Frames by key: ``[..., stack]`` -> ``[..., stack, H, W]``."""
        return self.frames[(keys // self.num_envs) % self.pool_size, keys % self.num_envs]

    def sample(self, batch_size: int, rng: np.random.Generator) -> ReplaySample:
        """``batch_size`` transitions drawn uniformly (with replacement), observations rebuilt
        from their frames."""
        keys = self.index.sample(batch_size, rng)
        return keys._replace(obs=self._read(keys.obs), next_obs=self._read(keys.next_obs))

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything stored, for a checkpoint."""
        return {
            "index": self.index.state_dict(),
            "frames": self.frames.copy(),
            "written": self.written.copy(),
            "last_next": self.last_next.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "index" not in state or state["frames"].shape != self.frames.shape:
            raise ConfigError(
                "the saved replay buffer does not match this one; buffer_size, num_envs and "
                "the observation shape must match the saved run."
            )
        self.index.load_state_dict(state["index"])
        self.frames = np.asarray(state["frames"], dtype=np.uint8).copy()
        self.written = np.asarray(state["written"], dtype=np.int64).copy()
        self.last_next = np.asarray(state["last_next"], dtype=np.int64).copy()
