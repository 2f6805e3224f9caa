"""What SAC and TD3 share, written once: collect into replay, minibatches, logs, checkpoints.

- :class:`ReplayCollector` steps ``num_envs`` copies of a continuous-action env, rescales the
  policy's ``[-1, 1]`` actions to the env's bounds, stores each vector step in a
  :class:`~rlx.core.buffers.ReplayBuffer` and tracks episodes (``mc_return`` against
  ``Q(s_0, a_0)``).
- :func:`replay_batches` turns one large replay sample into ``n`` minibatch tensors;
  :func:`descend` is one optimizer step on a loss.
- :class:`LogWindow` keeps what happened since the last log: the update metrics as tensors
  (stacked and read once per log, never synchronised per step) and the finished episodes.
- :func:`training_state` / :func:`restore_training` checkpoint what a resumed run needs.
- :class:`ContinuousAgent` is what ``rlx.train`` returns and ``rlx.load(run_dir)`` restores.

Under Gymnasium's NEXT_STEP autoreset the step after a done only resets that copy: it is
neither stored nor counted as an env step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor

from rlx.core.buffers import ReplayBuffer, ReplaySample
from rlx.core.continuous import ActionScaler, box_action_bounds
from rlx.core.env_state import env_state, restore_env_state
from rlx.core.envs import EpisodeTracker, FinishedEpisodes, make_vec_env
from rlx.core.policies import observation_dim
from rlx.core.seeding import rng_state, seed_everything, set_rng_state
from rlx.diagnostics import metrics as M
from rlx.errors import CheckpointError, ConfigError


class Learner(Protocol):
    """The two networks-and-optimisers objects (SAC's, TD3's) the shared parts rely on."""

    def act(self, obs: np.ndarray, deterministic: bool, rng: np.random.Generator) -> np.ndarray: ...

    def start_value(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


# ---------------------------------------------------------------------------- config checks
def check_config(config: Any) -> None:
    """The checks SAC's and TD3's configs share; one clear sentence each.

    Also turns ``hidden_sizes`` into a tuple (a run's config.json stores it as a list).
    """
    name = type(config).__name__
    object.__setattr__(config, "hidden_sizes", tuple(int(h) for h in config.hidden_sizes))
    for field in ("total_steps", "num_envs", "batch_size", "buffer_size", "train_freq",
                  "gradient_steps", "log_every"):  # fmt: skip
        value = getattr(config, field)
        if value < 1:
            raise ConfigError(f"{name}: {field}={value} must be a whole number >= 1.")
    for field in ("learning_starts", "eval_episodes"):
        if getattr(config, field) < 0:
            raise ConfigError(f"{name}: {field}={getattr(config, field)} must be >= 0.")
    if not 0.0 <= config.gamma <= 1.0:
        raise ConfigError(f"{name}: gamma={config.gamma} must be in [0, 1] (default 0.99).")
    if not 0.0 < config.tau <= 1.0:
        raise ConfigError(
            f"{name}: tau={config.tau} must be in (0, 1]: the Polyak step toward the online "
            "critics (0.005 is usual, 1 copies them)."
        )
    for field in ("actor_lr", "critic_lr"):
        if getattr(config, field) <= 0:
            raise ConfigError(f"{name}: {field}={getattr(config, field)} must be > 0.")
    if not config.hidden_sizes or min(config.hidden_sizes) < 1:
        raise ConfigError(
            f"{name}: hidden_sizes={list(config.hidden_sizes)} needs at least one layer, "
            "each width >= 1."
        )
    if config.buffer_size < config.batch_size:
        raise ConfigError(
            f"{name}: buffer_size={config.buffer_size} is smaller than "
            f"batch_size={config.batch_size}; use buffer_size >= {config.batch_size}."
        )
    if config.vectorization not in ("auto", "sync", "async"):
        raise ConfigError(
            f"{name}: vectorization={config.vectorization!r} must be 'auto', 'sync' or 'async'."
        )


# ---------------------------------------------------------------------------- collecting
class ReplayCollector:
    """``num_envs`` copies of a continuous-action env, stepped together into a replay buffer.

    The policy works in ``[-1, 1]^d``; :attr:`scaler` maps its actions onto the env's box.
    Replay stores the ``[-1, 1]`` actions and flat float32 observations.
    """

    def __init__(self, env: Any, config: Any, *, algo: str, env_id: str) -> None:
        self.vec = make_vec_env(env, config.num_envs, vectorization=config.vectorization)
        try:
            low, high = box_action_bounds(self.vec.single_action_space, algo, env_id)
            self.obs_dim = observation_dim(self.vec.single_observation_space, env_id)
        except Exception:
            self.vec.close()
            raise
        self.scaler = ActionScaler(low, high)
        self.act_dim = len(low)
        self.num_envs = config.num_envs
        self.buffer = ReplayBuffer(
            config.buffer_size, (self.obs_dim,), np.float32, num_envs=config.num_envs,
            action_shape=(self.act_dim,), action_dtype=np.float32, gamma=config.gamma,
        )  # fmt: skip
        self.tracker = EpisodeTracker(config.num_envs, config.gamma)
        self.obs = self._flat(self.vec.reset(seed=config.seed)[0])
        self.after_done = np.zeros(config.num_envs, dtype=bool)

    def _flat(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, dtype=np.float32).reshape(self.num_envs, self.obs_dim)

    def random_actions(self, rng: np.random.Generator) -> np.ndarray:
        """Uniform actions over the whole box, for the warm-up before learning starts."""
        return rng.uniform(-1.0, 1.0, (self.num_envs, self.act_dim)).astype(np.float32)

    def episode_starts(self) -> np.ndarray:
        """Copies whose next step is the first of an episode (where ``Q(s_0, a_0)`` is read)."""
        return ~self.after_done & (self.tracker.lengths == 0)

    def step(
        self, actions: np.ndarray, start_values: np.ndarray | None = None
    ) -> tuple[int, FinishedEpisodes]:
        """Step every copy with ``actions`` (``[num_envs, d]`` in ``[-1, 1]``) and store it.

        Returns the number of transitions stored (the env steps that count) and the episodes
        that ended. ``start_values`` are recorded for copies starting an episode.
        """
        next_obs, rewards, terminated, truncated, _ = self.vec.step(self.scaler.to_env(actions))
        next_obs = self._flat(next_obs)
        stored = ~self.after_done  # False: this step only reset a copy that was done
        self.buffer.add(self.obs, actions, rewards, next_obs, terminated, truncated, where=stored)
        finished = self.tracker.step(rewards, terminated, truncated, stored, start_values)
        self.after_done = terminated | truncated
        self.obs = next_obs
        return int(stored.sum()), finished

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, with_replay: bool) -> dict[str, Any]:
        state = {
            "env": env_state(self.vec),
            "obs": self.obs.copy(),
            "after_done": self.after_done.copy(),
            "tracker": {
                k: v.copy() for k, v in vars(self.tracker).items() if isinstance(v, np.ndarray)
            },
        }
        if with_replay:
            state["replay"] = self.buffer.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # without the env's own state (physics engines) the run goes on from the fresh reset
        if state["env"] is not None:
            restore_env_state(self.vec, state["env"])
            self.obs = state["obs"].copy()
            self.after_done = state["after_done"].copy()
            for name, value in state["tracker"].items():
                setattr(self.tracker, name, value.copy())
        if "replay" in state:
            self.buffer.load_state_dict(state["replay"])

    def close(self) -> None:
        self.vec.close()


class Batch(NamedTuple):
    """A replay minibatch as tensors; ``discounts`` is ``gamma`` per sample."""

    obs: Tensor
    actions: Tensor
    rewards: Tensor
    next_obs: Tensor
    terminated: Tensor
    discounts: Tensor


def replay_batches(sample: ReplaySample, n: int, batch_size: int) -> list[Batch]:
    """Split one replay sample of ``n * batch_size`` transitions into ``n`` minibatches.

    One numpy-to-torch conversion for all of them (views, no copies).
    """
    whole = Batch(
        torch.from_numpy(sample.obs),
        torch.from_numpy(sample.actions),
        torch.from_numpy(sample.rewards),
        torch.from_numpy(sample.next_obs),
        torch.from_numpy(sample.terminated.astype(np.float32)),
        torch.from_numpy(sample.discounts),
    )
    if n == 1:
        return [whole]
    parts = [t.split(batch_size) for t in whole]
    return [Batch(*fields) for fields in zip(*parts, strict=True)]


def descend(optimizer: Any, loss: Tensor) -> None:
    """``zero_grad; backward; step``: one gradient step of ``optimizer`` on ``loss``."""
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


# ---------------------------------------------------------------------------- logging
class LogWindow:
    """The update metrics and finished episodes since the last log."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Tensor]] = []
        self.episodes: list[FinishedEpisodes] = []
        self.gradient_steps = 0

    def add_update(self, metrics: dict[str, Tensor]) -> None:
        # kept as tensors: stacked and read once per log, never synchronised per step
        self.updates.append(metrics)
        self.gradient_steps += 1

    def add_episodes(self, finished: FinishedEpisodes) -> None:
        if len(finished.envs):
            self.episodes.append(finished)

    def flush(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.updates:
            keys = {k for row in self.updates for k in row}
            for key in sorted(keys):
                values = [row[key] for row in self.updates if key in row]
                out[key] = float(torch.stack(values).mean())
        if self.episodes:
            cat = lambda field: np.concatenate([getattr(e, field) for e in self.episodes])  # noqa: E731
            out.update({
                M.EPISODE_RETURN: float(cat("returns").mean()),
                M.EPISODE_LENGTH: float(cat("lengths").mean()),
                M.MC_RETURN: float(cat("discounted_returns").mean()),
                M.Q_START: float(cat("start_values").mean()),
            })  # fmt: skip
        self.updates, self.episodes = [], []
        return out


# ---------------------------------------------------------------------------- checkpoints
def training_state(
    step: int,
    learner: Learner,
    collector: ReplayCollector,
    rng: np.random.Generator,
    gradient_steps: int,
    with_replay: bool,
) -> dict[str, Any]:
    """Networks, optimisers, step, RNG, env and (optionally) replay; plus the agent's spec."""
    return {
        "step": step,
        "gradient_steps": gradient_steps,
        "learner": learner.state_dict(),
        "collector": collector.state_dict(with_replay),
        "rng": rng_state(rng),
        "spec": agent_spec(collector),
    }


def restore_training(
    state: dict[str, Any],
    learner: Learner,
    collector: ReplayCollector,
    rng: np.random.Generator,
    algo: str,
) -> tuple[int, int]:
    """Load :func:`training_state` into freshly built objects; returns (step, gradient steps)."""
    try:
        learner.load_state_dict(state["learner"])
        collector.load_state_dict(state["collector"])
        set_rng_state(state["rng"], rng)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint does not match this {algo} config ({type(exc).__name__}: {exc}); "
            "resume with the run's own config."
        ) from exc
    return int(state["step"]), int(state.get("gradient_steps", 0))


def agent_spec(collector: ReplayCollector) -> dict[str, Any]:
    """What building the agent again needs: observation size and the action box."""
    return {
        "obs_dim": collector.obs_dim,
        "low": collector.scaler.low.tolist(),
        "high": collector.scaler.high.tolist(),
    }


def final_figures(agent: Any, env: Any, run: Any, eval_episodes: int, seed: int) -> dict[str, Any]:
    """Greedy evaluation for summary.json (skipped when stopped early or not asked)."""
    from rlx.core.evaluation import evaluate

    if eval_episodes == 0 or run.stop_requested:
        return {}
    stats = evaluate(agent, env, episodes=eval_episodes, seed=seed + 10_000)
    return {
        "eval_return_mean": stats.mean_return,
        "eval_return_std": stats.std_return,
        "eval_length_mean": stats.mean_length,
        "eval_episodes": stats.episodes,
    }


# ---------------------------------------------------------------------------- the agent
class ContinuousAgent:
    """A trained SAC or TD3 policy: ``act(obs)`` for one observation, ``act_batch`` for many.

    ``deterministic=True`` (the default) takes the policy's mean action (SAC: ``tanh(mu)``;
    TD3: ``mu(s)``); ``False`` samples as in training. Actions come in the env's bounds.
    """

    def __init__(
        self, algo: str, learner: Learner, scaler: ActionScaler, env_id: str, config: Any
    ) -> None:
        self.algo, self.learner, self.scaler = algo, learner, scaler
        self.env_id, self.config = env_id, config
        self.rng = np.random.default_rng(getattr(config, "seed", 0))
        self.run_dir = None

    def act_batch(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """Env actions ``[B, d]`` for observations ``[B, ...]``."""
        flat = np.asarray(obs, dtype=np.float32).reshape(len(obs), -1)
        return self.scaler.to_env(self.learner.act(flat, deterministic, self.rng))

    def act(self, obs: Any, deterministic: bool = True) -> np.ndarray:
        """The env action for one observation (a float array of the action box's shape)."""
        return self.act_batch(np.asarray(obs)[None], deterministic)[0]

    def __repr__(self) -> str:
        fields = dataclasses.asdict(self.config) if dataclasses.is_dataclass(self.config) else {}
        return (
            f"ContinuousAgent({self.algo}, env={self.env_id}, hidden={fields.get('hidden_sizes')})"
        )


# ============================================================================ the training loop
def train_off_policy(algo: str, learner_cls: type, config: Any, env: Any, run: Any) -> Any:
    """The off-policy loop SAC and TD3 share, inside an open :class:`rlx.runs.Run`.

    Collect one vector step (uniform actions before ``learning_starts``, then the learner's
    exploring policy); every ``train_freq`` env steps do ``gradient_steps`` updates on replay
    minibatches (the learner's own targets, critic, actor and Polyak steps); log; checkpoint
    only what passed the NaN check. Returns the trained :class:`ContinuousAgent`.
    """
    name = algo.upper()
    collector = ReplayCollector(env, config, algo=name, env_id=run.env_id)
    rng = seed_everything(config.seed)
    learner = learner_cls(config, collector.obs_dim, collector.act_dim)
    window = LogWindow()
    step = gradient_steps = 0
    if run.resumed_state is not None:
        step, gradient_steps = restore_training(run.resumed_state, learner, collector, rng, name)

    def state() -> dict:
        return training_state(
            step, learner, collector, rng, gradient_steps, config.save_replay_buffer
        )

    try:
        next_log = (step // config.log_every + 1) * config.log_every
        while step < config.total_steps and not run.stop_requested:
            if step < config.learning_starts:
                actions = collector.random_actions(rng)
            else:
                actions = learner.act(collector.obs, False, rng)
            starts = collector.episode_starts()
            q_start = learner.start_value(collector.obs, actions) if starts.any() else None
            previous = step
            stored, finished = collector.step(actions, q_start)
            step += stored
            if len(finished.envs):
                window.add_episodes(finished)
                run.log_episodes(
                    np.full(len(finished.envs), step), finished.returns, finished.lengths
                )

            rounds = step // config.train_freq - previous // config.train_freq
            if rounds and len(collector.buffer) >= max(config.learning_starts, 1):
                n = rounds * config.gradient_steps
                sample = collector.buffer.sample(n * config.batch_size, rng)
                for batch in replay_batches(sample, n, config.batch_size):
                    window.add_update(learner.update(batch))
                gradient_steps += n

            if step >= next_log or step >= config.total_steps or run.stop_requested:
                run.log(step, {**window.flush(), M.GRADIENT_STEPS: gradient_steps})
                next_log = (step // config.log_every + 1) * config.log_every
                if run.checkpoint_due():
                    run.save_checkpoint(step, state())
        run.save_checkpoint(step, state())
    finally:
        collector.close()
    agent = ContinuousAgent(algo, learner, collector.scaler, run.env_id, config)
    run.finish(step, final_figures(agent, env, run, config.eval_episodes, config.seed))
    return agent


def load_off_policy(
    algo: str, learner_cls: type, config: Any, env_id: str, state: dict
) -> ContinuousAgent:
    """The agent of a checkpoint (``rlx.load``), acting deterministically by default."""
    spec = state["spec"]
    learner = learner_cls(config, int(spec["obs_dim"]), len(spec["low"]))
    learner.load_state_dict(state["learner"])
    return ContinuousAgent(algo, learner, ActionScaler(spec["low"], spec["high"]), env_id, config)
