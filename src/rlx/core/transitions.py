"""Transitions for a replay buffer, collected in this process or by env runners.

- :class:`ReplayLayout` is how an algorithm's transitions look: observations, actions, the
  n-step window, the map from the policy's actions to the env's, the rewards it learns from.
- :class:`VectorCollector` steps ``num_envs`` copies of an env with an :class:`Explorer` (the
  learner's exploring policy), one vector step per call, and tracks the episodes.
- :class:`TransitionWorker` is a :class:`VectorCollector` inside an env runner
  (:mod:`rlx.core.runners`), acting with an :class:`ActingCopy` of the learner's policy for
  ``steps`` vector steps a round; :class:`RunnerTransitions` lays the runners' fragments side
  by side, as one collector of ``runners x num_envs`` copies.

Either way a collection is a :class:`Collected`: a block of :class:`Transitions`
``[T, N, ...]`` to store, the episodes that ended and the env-step count. Steps count real
transitions over all env copies: under Gymnasium's NEXT_STEP autoreset the step after a done
only resets that copy, and is neither stored nor counted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from rlx.core.buffers import ReplayBuffer
from rlx.core.continuous import ActionScaler
from rlx.core.env_state import env_state, restore_env_state
from rlx.core.envs import EpisodeTracker, FinishedEpisodes, make_vec_env
from rlx.core.frame_buffer import FrameReplayBuffer, stores_frames_once
from rlx.core.masks import MASK_KEY, masks_from_infos, masks_from_method
from rlx.core.runners import EnvRunners, RunnerGroup
from rlx.core.seeding import env_seed

AnyReplayBuffer = ReplayBuffer | FrameReplayBuffer
"""The two replay buffers (same interface; :meth:`ReplayLayout.replay_buffer` picks one)."""


# ---------------------------------------------------------------------------- what is stored
@dataclass(frozen=True)
class ReplayLayout:
    """How an algorithm's transitions look in the replay buffer, and how it steps the env.

    Attributes:
        obs_shape: one observation as stored and as the learner reads it.
        obs_dtype: its dtype (uint8 images stay uint8).
        action_shape: one action (``()`` for a discrete action).
        action_dtype: its dtype.
        n_step: transitions summed into one n-step return when sampled.
        action_scaler: maps the policy's ``[-1, 1]`` box onto the env's (None: the env takes
            the policy's actions as they are).
        rewards: what the learner stores and discounts instead of the env's rewards, e.g.
            clipped (None: the env's rewards as they come).
        spec: what rebuilding the trained agent needs, kept in every checkpoint.
        flatten: turns a vector env's observations into the stored ones (a ``Dict``'s keys
            into one vector, :class:`~rlx.core.observations.ObservationLayout`); None: they
            are stored as they come, reshaped.
        mask_size: the length of the env's action masks (:mod:`rlx.core.masks`), stored with
            each transition's next observation; None: the env gives none.
    """

    obs_shape: tuple[int, ...]
    obs_dtype: Any
    action_shape: tuple[int, ...] = ()
    action_dtype: Any = np.int64
    n_step: int = 1
    action_scaler: ActionScaler | None = None
    rewards: Callable[[np.ndarray], np.ndarray] | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    flatten: Callable[[Any], np.ndarray] | None = None
    mask_size: int | None = None

    def observations(self, obs: Any) -> np.ndarray:
        """A vector env's observations ``[N, ...]`` in the stored shape and dtype."""
        if self.flatten is not None:
            obs = self.flatten(obs)
        return np.asarray(obs, dtype=self.obs_dtype).reshape(len(obs), *self.obs_shape)

    def replay_buffer(self, capacity: int, columns: int, gamma: float) -> AnyReplayBuffer:
        """An empty replay buffer of this layout with ``columns`` env copies; stacked uint8
        frames go to one that stores each frame once (:mod:`rlx.core.frame_buffer`)."""
        frames = stores_frames_once(self.obs_shape, self.obs_dtype)
        return (FrameReplayBuffer if frames else ReplayBuffer)(
            capacity, self.obs_shape, self.obs_dtype, num_envs=columns,
            action_shape=self.action_shape, action_dtype=self.action_dtype,
            n_step=self.n_step, gamma=gamma, mask_size=self.mask_size,
        )  # fmt: skip


def clipped_rewards(rewards: np.ndarray, bound: float | None) -> np.ndarray:
    """Rewards as float32, clipped into ``[-bound, bound]`` when ``bound`` is given (the
    Nature DQN's reward clipping uses 1)."""
    rewards = np.asarray(rewards, dtype=np.float32)
    return rewards if bound is None else np.clip(rewards, -bound, bound)


class Transitions(NamedTuple):
    """``T`` vector steps of ``N`` env copies, ``[T, N, ...]`` each, as the replay stores
    them; ``stored`` False marks a reset-only step after a done (not a transition)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    stored: np.ndarray
    next_masks: np.ndarray | None = None  # the valid actions at next_obs, if the env masks

    def store_in(self, buffer: AnyReplayBuffer) -> None:
        """Add every vector step to ``buffer``, in time order, the stored transitions only."""
        for t in range(len(self.stored)):
            masks = None if self.next_masks is None else self.next_masks[t]
            buffer.add(self.obs[t], self.actions[t], self.rewards[t], self.next_obs[t],
                       self.terminated[t], self.truncated[t], where=self.stored[t],
                       next_masks=masks)  # fmt: skip


class Collected(NamedTuple):
    """What one collection gave: transitions to store, the episodes that ended (``envs``:
    their replay column), the env-step count at each one's end and after the collection,
    and the replay columns whose runner was replaced (their episodes were cut)."""

    transitions: Transitions
    episodes: FinishedEpisodes
    episode_steps: np.ndarray
    step: int
    restarted: np.ndarray


NO_EPISODES = FinishedEpisodes(
    np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), np.zeros(0), np.zeros(0),
    np.zeros(0, bool),
)  # fmt: skip
NO_COLUMNS = np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------------------- who acts
class Explorer(Protocol):
    """The exploring policy an off-policy learner collects with."""

    def explore(
        self,
        obs: np.ndarray,
        starts: np.ndarray,
        rng: np.random.Generator,
        masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Actions for a batch of observations (only valid ones where ``masks`` says which),
        and the value estimate ``Q(s, a)`` of those actions where ``starts`` (copies starting
        an episode), or None when it has none."""
        ...


class ActingCopy(Explorer, Protocol):
    """An env runner's copy of the learner's exploring policy, loaded every round."""

    def load_acting_state(self, state: dict[str, Any]) -> None:
        """Take the learner's :meth:`acting_state` (weights, statistics, exploration)."""
        ...


# ---------------------------------------------------------------------------- in this process
class VectorCollector:
    """``num_envs`` copies of an env as one vector env, one vector step per :meth:`collect`.

    Call :meth:`start` (then :meth:`load_state_dict` to resume) before the first collection.
    """

    def __init__(self, vec: Any, layout: ReplayLayout, gamma: float) -> None:
        self.vec, self.layout = vec, layout
        self.num_envs = vec.num_envs
        self.tracker = EpisodeTracker(self.num_envs, gamma)
        self.after_done = np.zeros(self.num_envs, dtype=bool)
        self.obs: np.ndarray | None = None
        self.masks: np.ndarray | None = None  # the valid actions at self.obs, if masked

    def start(self, seed: int, step: int = 0) -> None:
        """Reset every copy from ``seed + step``: a run resumed at ``step`` whose envs could
        not be saved starts other episodes than the run's first ones."""
        obs, infos = self.vec.reset(seed=seed + step)
        self.obs = self.layout.observations(obs)
        self.masks = self.read_masks(infos)

    def read_masks(self, infos: dict[str, Any]) -> np.ndarray | None:
        """The copies' action masks after a reset or step (None: the layout has none)."""
        if self.layout.mask_size is None:
            return None
        if MASK_KEY in infos:
            return masks_from_infos(infos, self.num_envs, self.layout.mask_size)
        return masks_from_method(self.vec, self.layout.mask_size)

    def collect(self, explorer: Explorer, step: int, rng: np.random.Generator) -> Collected:
        """One vector step with the explorer's actions; ``step`` is the count before it."""
        assert self.obs is not None, "start() resets the envs first"
        starts = ~self.after_done & (self.tracker.lengths == 0)
        masked = {} if self.masks is None else {"masks": self.masks}
        actions, start_values = explorer.explore(self.obs, starts, rng, **masked)
        scaler = self.layout.action_scaler
        env_actions = actions if scaler is None else scaler.to_env(actions)
        next_obs, rewards, terminated, truncated, infos = self.vec.step(env_actions)
        next_obs = self.layout.observations(next_obs)
        self.masks = self.read_masks(infos)
        stored = ~self.after_done  # False: this step only reset a copy that was done
        seen = rewards if self.layout.rewards is None else self.layout.rewards(rewards)
        ended = self.tracker.step(rewards, terminated, truncated, stored, start_values, seen)
        block = Transitions(
            self.obs, actions, seen, next_obs, terminated, truncated, stored, self.masks
        )
        self.after_done = terminated | truncated
        self.obs = next_obs
        step += int(stored.sum())
        one_step = Transitions._make(None if x is None else np.asarray(x)[None] for x in block)
        return Collected(one_step, ended, np.full(len(ended.envs), step), step, NO_COLUMNS)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Where every copy is mid-episode; ``env`` is None when its state is not plain data."""
        return {
            "env": env_state(self.vec),
            "obs": np.array(self.obs),
            "masks": None if self.masks is None else self.masks.copy(),
            "after_done": self.after_done.copy(),
            "tracker": self.tracker.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the interrupted episodes where their state was saved, else keep the fresh
        reset (a physics engine's state is not plain data)."""
        if state.get("env") is None:
            return
        restore_env_state(self.vec, state["env"])
        self.obs = np.array(state["obs"])
        if state.get("masks") is not None:
            self.masks = np.array(state["masks"])
        self.after_done = np.array(state["after_done"])
        self.tracker.load_state_dict(state["tracker"])

    def fitting_replay(self, saved: dict[str, Any] | None, buffer: AnyReplayBuffer) -> Any:
        """The saved replay buffer to restore (its layout must match: the run's own config)."""
        return saved

    def stats(self) -> dict[str, float]:
        """What the collection reports in a log row: nothing in one process."""
        return {}

    def close(self) -> None:
        self.vec.close()


# ---------------------------------------------------------------------------- in env runners
class TransitionFragment(NamedTuple):
    """What one env runner returns: its ``[T, N, ...]`` transitions, the episodes that ended
    (``envs``: the runner's copy) and the vector step each ended on."""

    transitions: Transitions
    episodes: FinishedEpisodes
    ended_at: np.ndarray


class TransitionWorker:
    """Inside an env runner: a :class:`VectorCollector` of ``num_envs`` copies acting with a
    copy of the learner's exploring policy (``actor()`` builds it), ``steps`` vector steps a
    round; episodes in progress carry over from one round to the next."""

    def __init__(
        self,
        seed_seq: np.random.SeedSequence,
        *,
        env: Any,
        num_envs: int,
        vectorization: str,
        gamma: float,
        layout: ReplayLayout,
        actor: Callable[[], ActingCopy],
        steps: int,
    ) -> None:
        vec = make_vec_env(env, num_envs, vectorization=vectorization)
        self.collector = VectorCollector(vec, layout, gamma)
        self.actor, self.steps = actor(), steps
        self.rng = np.random.default_rng(seed_seq)
        self.collector.start(env_seed(seed_seq))

    def collect(self, acting_state: dict[str, Any]) -> TransitionFragment:
        """``steps`` vector steps acting as the learner's ``acting_state`` says."""
        self.actor.load_acting_state(acting_state)
        steps = [self.collector.collect(self.actor, 0, self.rng) for _ in range(self.steps)]
        blocks = [got.transitions for got in steps]
        transitions = Transitions._make(
            None if a[0] is None else np.concatenate(a) for a in zip(*blocks, strict=True)
        )
        ended = [got.episodes for got in steps if len(got.episodes.envs)] or [NO_EPISODES]
        episodes = FinishedEpisodes(*(np.concatenate(a) for a in zip(*ended, strict=True)))
        ended_at = np.concatenate(
            [np.full(len(got.episodes.envs), t, np.int64) for t, got in enumerate(steps)]
        )
        return TransitionFragment(transitions, episodes, ended_at)


class RunnerTransitions:
    """``runners`` env runners of ``num_envs`` copies each, as one collector of
    ``runners x num_envs`` copies: runner ``r``'s fragment fills replay columns
    ``r N .. (r + 1) N - 1``.

    Each round the learner's :meth:`acting_state` goes to every runner once, and every runner
    acts ``steps`` vector steps. The columns of a replaced runner are reported in
    ``restarted``: the learner ends their episodes at the last stored transition, so no
    n-step return spans the cut. A checkpoint holds no env state (the envs live in the
    runners); a resume may use another number of runners, and then starts with an empty
    replay buffer when the saved one was laid out for other columns. :meth:`start` starts the
    runners.
    """

    def __init__(
        self,
        remote: EnvRunners,
        env: Any,
        config: Any,
        layout: ReplayLayout,
        actor: Callable[[], ActingCopy],
        steps: int,
    ) -> None:
        self.remote, self.address = remote, config.ray_address
        self.runners, self.envs_per_runner = config.runners, config.num_envs
        self.num_envs = config.runners * config.num_envs
        self.options = {
            "env": env, "num_envs": config.num_envs, "vectorization": config.vectorization,
            "gamma": config.gamma, "layout": layout, "actor": actor, "steps": steps,
        }  # fmt: skip
        self.group: RunnerGroup | None = None

    def start(self, seed: int, step: int = 0) -> None:
        """Start the runners, seeded from the run's ``seed`` and the ``step`` it starts at
        (:func:`rlx.core.seeding.seed_root`: a resume draws a fresh family)."""
        self.group = self.remote.start(
            TransitionWorker, self.options, count=self.runners, seed=seed, start_step=step,
            address=self.address,
        )  # fmt: skip

    def collect(self, learner: Any, step: int, rng: np.random.Generator) -> Collected:
        """One round: every runner acts with the learner's ``acting_state()``; ``step`` is
        the count before it (``rng`` is unused: runners draw from their own generators)."""
        assert self.group is not None, "start() starts the runners"
        fragments, dropped = self.group.run_some(learner.acting_state())
        N = self.envs_per_runner
        kept = [(r, f) for r, f in enumerate(fragments) if f is not None]
        template = kept[0][1].transitions
        arrays: list[np.ndarray | None] = []
        for i, like in enumerate(template):
            if like is None:  # no masks (the runners' envs give none)
                arrays.append(None)
                continue
            full = np.zeros((like.shape[0], self.num_envs, *like.shape[2:]), dtype=like.dtype)
            for r, fragment in kept:
                full[:, r * N : (r + 1) * N] = fragment.transitions[i]
            arrays.append(full)
        transitions = Transitions._make(arrays)
        counted = step + np.cumsum(transitions.stored.sum(axis=1))
        episodes = FinishedEpisodes(
            *(np.concatenate([getattr(f.episodes, k) + (r * N if k == "envs" else 0)
                              for r, f in kept]) for k in FinishedEpisodes._fields)
        )  # fmt: skip
        ended_at = np.concatenate([f.ended_at for _, f in kept]).astype(np.int64)
        order = np.lexsort((episodes.envs, ended_at))  # in time order, as one process logs them
        episodes = FinishedEpisodes(*(np.asarray(a)[order] for a in episodes))
        restarted = np.asarray([r * N + j for r in sorted(dropped) for j in range(N)], np.int64)
        return Collected(
            transitions, episodes, counted[ended_at[order]], int(counted[-1]), restarted
        )

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """No env state: the envs live in the runners, a resume starts fresh episodes."""
        return {"env": None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore (see :meth:`state_dict`)."""

    def fitting_replay(self, saved: dict[str, Any] | None, buffer: AnyReplayBuffer) -> Any:
        """The saved replay buffer, or None when it was laid out for another number of env
        copies (a resume with other runners); learning then waits for ``learning_starts``
        new transitions. A frame buffer (stacked uint8 frames) is laid out by its frame
        pool, a plain one by its observations: ``[rows, env columns, ...]`` both."""
        key = "frames" if isinstance(buffer, FrameReplayBuffer) else "obs"
        if saved is None or np.shape(saved[key]) == getattr(buffer, key).shape:
            return saved
        print(
            f"rlx: the saved replay buffer holds {np.shape(saved[key])[1]} env columns, this "
            f"run {buffer.num_envs}; starting with an empty replay buffer.",
            file=sys.stderr,
        )
        return None

    def stats(self) -> dict[str, float]:
        """What the runners report in a log row (their restarts, their nodes)."""
        return {} if self.group is None else self.group.stats()

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
            self.group = None


__all__ = [
    "ActingCopy",
    "AnyReplayBuffer",
    "Collected",
    "Explorer",
    "ReplayLayout",
    "RunnerTransitions",
    "TransitionWorker",
    "Transitions",
    "VectorCollector",
    "clipped_rewards",
]
