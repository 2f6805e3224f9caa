"""DQN and Double DQN (registered as ``dqn``), read top to bottom: config, collect, targets,
update, log.

Q-learning with a neural network, a replay buffer and a target network (Mnih et al., 2015).
Each gradient step minimises, over a uniform replay minibatch,

    L(theta) = E[ (y - Q(s, a; theta))**2 ]     (or the Huber loss of y - Q, ``loss="huber"``)
    y = r + gamma * (1 - terminated) * max_a' Q(s', a'; theta^-)                  (double=False)
    y = r + gamma * (1 - terminated) * Q(s', argmax_a' Q(s', a'; theta); theta^-)  (double=True)

``theta^-`` follows ``theta`` every ``sync_every`` env steps: ``theta^- <- tau theta +
(1 - tau) theta^-`` (``tau=1``: a copy). Double DQN is the default, the cheat sheet's
production choice against "Q values too high"; the target net and the replay buffer are kept
against "DQN diverges" (the deadly triad). Exploration is epsilon-greedy, epsilon decaying
linearly from ``epsilon_start`` to ``epsilon_end`` over the first ``exploration_fraction`` of
training. A time limit (truncation) bootstraps from the true final observation; termination
does not.

Logged every ``log_every`` env steps (names from :mod:`rlx.diagnostics.metrics`):

- ``loss``, ``td_error`` (mean ``|y - Q(s, a)|``), ``q_mean`` (mean ``Q(s, a)`` of the replay
  actions), ``grad_norm`` (before clipping): means over the gradient steps since the last log;
- ``epsilon``, ``episode_return``, ``episode_length`` (training episodes finished since the
  last log);
- ``mc_return`` and ``q_start``, for measuring overestimation: for every training episode
  finished since the last log, ``q_start`` is the online network's ``Q(s_0, a_0)`` for the
  first state and the action taken there, computed when that action was chosen, and
  ``mc_return`` is the discounted return that actually followed,
  ``G_0 = sum_{t < T} gamma**t r_t`` (rewards after clipping, before scaling; ``q_start`` is
  divided by the reward scale, so both are in reward units). Both are means over those
  episodes. For an episode cut by a time limit after ``T`` steps the unobserved tail is at most
  ``gamma**T * max|Q|``. ``q_start - mc_return`` well above 0 is overestimation.

Steps count real transitions over all env copies: the reset step that follows every done
under Gymnasium's NEXT_STEP autoreset is neither stored nor counted.

A checkpoint holds the networks, the optimiser, the step (hence the epsilon and learning-rate
schedule positions), the observation statistics, the random generators and, where the env's
state is plain data (:mod:`rlx.core.env_state`), the episodes in progress; with
``save_replay_buffer`` also the replay buffer. With both, a resumed run continues exactly as
the uninterrupted one would have; without the buffer, learning resumes once it holds
``learning_starts`` new transitions.

With ``runners=K`` (extra ``ray``) K Ray env runners of ``num_envs`` copies each act
epsilon-greedy with the learner's latest network for ``runner_steps`` vector steps per round
and feed the replay buffer (:func:`train_with_runners`); the update is the same.
"""

from __future__ import annotations

import copy
import functools
import sys
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from rlx import registry
from rlx.core.buffers import ReplayBuffer, ReplaySample
from rlx.core.checks import check_runner_fields
from rlx.core.env_state import env_state, restore_env_state
from rlx.core.envs import EpisodeTracker, make_vec_env, require_discrete_actions
from rlx.core.evaluation import evaluate
from rlx.core.nets import QNetwork, is_image_space
from rlx.core.normalize import ObsNormalizer, RewardScaler
from rlx.core.schedules import LinearSchedule
from rlx.core.seeding import rng_state, seed_everything, set_rng_state
from rlx.core.targets import double_q_target, q_learning_target
from rlx.diagnostics import metrics as M
from rlx.errors import CheckpointError, ConfigError


# ============================================================================ config
@dataclass(frozen=True)
class DQNConfig:
    """DQN / Double DQN hyperparameters (defaults: the cheat sheet, then common practice)."""

    total_steps: int = 100_000
    """env steps to train for, over all env copies"""
    seed: int = 0
    """seed of the networks, the replay sampling, exploration and the envs"""
    num_envs: int = 1
    """env copies stepped together as one vector env"""
    vectorization: Literal["auto", "sync", "async"] = "auto"
    """auto: the env's native vector version if it has one, else sync; async: subprocesses"""
    lr: float = 1e-4
    """Adam learning rate"""
    gamma: float = 0.99
    """discount factor, in [0, 1]"""
    buffer_size: int = 100_000
    """replay buffer capacity in transitions"""
    batch_size: int = 64
    """transitions per gradient step"""
    learning_starts: int = 1_000
    """transitions in the replay buffer before the first gradient step"""
    train_freq: int = 4
    """env steps (over all copies) between rounds of gradient steps"""
    gradient_steps: int = 1
    """gradient steps per round"""
    sync_every: int = 1_000
    """env steps between target-network updates"""
    tau: float = 1.0
    """target update theta^- <- tau theta + (1 - tau) theta^- (1.0: copy), in (0, 1]"""
    double: bool = True
    """Double DQN target (argmax by the online net, value by the target net); False: vanilla"""
    dueling: bool = False
    """dueling head Q = V + A - mean(A)"""
    loss: Literal["huber", "mse"] = "mse"
    """TD loss: mse (the cheat sheet's squared TD error) or huber (smooth L1, robust to outliers)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the Q network's MLP"""
    epsilon_start: float = 1.0
    """exploration rate at the start"""
    epsilon_end: float = 0.01
    """exploration rate after the decay"""
    exploration_fraction: float = 0.1
    """share of total_steps over which epsilon decays linearly"""
    max_grad_norm: float = 10.0
    """gradient norm clip (0: no clipping)"""
    lr_end: float | None = None
    """learning rate reached linearly at the end of training (None: constant lr)"""
    n_step: int = 1
    """n-step returns: sum of n discounted rewards, then bootstrap"""
    reward_clip: float | None = None
    """clip rewards to [-reward_clip, reward_clip] before storing (Nature DQN: 1.0)"""
    normalize_obs: bool = False
    """normalise observations by running mean/std (saved in checkpoints)"""
    scale_rewards: bool = False
    """divide rewards by the running std of the discounted return"""
    save_replay_buffer: bool = False
    """also save the replay buffer in checkpoints (large), so a resume keeps it"""
    log_every: int = 1_000
    """env steps between metric logs"""
    eval_episodes: int = 20
    """greedy evaluation episodes after training, for summary.json (0: none)"""
    compile: bool = False
    """torch.compile the Q network (pays off on long runs; compiling takes tens of seconds)"""
    runners: int | None = None
    """Ray env runners feeding the replay buffer, num_envs copies each (None: collect in this
    process; extra ray)"""
    ray_address: str | None = None
    """with runners: join the Ray cluster at HOST:PORT (None: start a local Ray for the run)"""
    runner_steps: int = 16
    """with runners: vector steps each runner collects per round, between weight broadcasts"""

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_sizes", tuple(int(h) for h in self.hidden_sizes))
        _at_least(self, "total_steps", 1)
        _at_least(self, "num_envs", 1)
        _at_least(self, "batch_size", 1)
        _at_least(self, "learning_starts", 0)
        _at_least(self, "train_freq", 1)
        _at_least(self, "gradient_steps", 1)
        _at_least(self, "sync_every", 1)
        _at_least(self, "n_step", 1)
        _at_least(self, "log_every", 1)
        _at_least(self, "eval_episodes", 0)
        _in_range(self, "gamma", 0.0, 1.0)
        _in_range(self, "epsilon_start", 0.0, 1.0)
        _in_range(self, "epsilon_end", 0.0, 1.0)
        _in_range(self, "exploration_fraction", 0.0, 1.0)
        if self.buffer_size < self.batch_size:
            raise ConfigError(
                f"buffer_size={self.buffer_size} is smaller than batch_size={self.batch_size}; "
                f"use buffer_size >= {self.batch_size}."
            )
        if self.learning_starts > self.buffer_size:
            raise ConfigError(
                f"learning_starts={self.learning_starts} exceeds buffer_size={self.buffer_size}, "
                "so learning would never start; use learning_starts <= buffer_size."
            )
        if not 0.0 < self.tau <= 1.0:
            raise ConfigError(f"tau={self.tau} must be in (0, 1]; 1.0 copies the online net.")
        if self.lr <= 0 or (self.lr_end is not None and self.lr_end < 0):
            raise ConfigError(f"lr={self.lr} must be > 0 and lr_end={self.lr_end} >= 0.")
        if self.max_grad_norm < 0:
            raise ConfigError(f"max_grad_norm={self.max_grad_norm} must be >= 0 (0: no clip).")
        if self.reward_clip is not None and self.reward_clip <= 0:
            raise ConfigError(f"reward_clip={self.reward_clip} must be > 0 (or None: no clip).")
        if self.loss not in ("huber", "mse"):
            raise ConfigError(f"loss={self.loss!r} must be 'huber' or 'mse'.")
        if self.vectorization not in ("auto", "sync", "async"):
            raise ConfigError(
                f"vectorization={self.vectorization!r} must be 'auto', 'sync' or 'async'."
            )
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            raise ConfigError(
                f"hidden_sizes={self.hidden_sizes} needs at least one layer, each width >= 1."
            )
        check_runner_fields(self)
        _at_least(self, "runner_steps", 1)
        if self.runners is not None and self.scale_rewards:
            raise ConfigError(
                f"scale_rewards=True is not supported with runners={self.runners} (the running "
                "return is tracked per step in one process); use reward_clip, or no runners."
            )


def _at_least(config: Any, name: str, low: int) -> None:
    value = getattr(config, name)
    if value < low:
        raise ConfigError(f"{name}={value} must be >= {low}.")


def _in_range(config: Any, name: str, low: float, high: float) -> None:
    value = getattr(config, name)
    if not low <= value <= high:
        raise ConfigError(f"{name}={value} must be in [{low}, {high}].")


# Tuned per environment, as rl-baselines3-zoo keeps them; explicit flags override these.
# CartPole-v1 (tuned on seeds 0-2, see benchmarks/bench_dqn.py): 3-step returns and the MSE
# loss learn values fast (a last-20 mean of 250 after ~10k steps), normalised observations and
# a learning rate decayed to 0 keep the policy at 500 once found; 8 copies and one gradient
# step of 128 per 4 env steps keep the wall time low.
PRESETS: dict[str, dict[str, Any]] = {
    "CartPole-v1": {
        "total_steps": 80_000,
        "num_envs": 8,
        "lr": 1e-3,
        "lr_end": 0.0,
        "buffer_size": 50_000,
        "batch_size": 128,
        "learning_starts": 1_000,
        "train_freq": 4,
        "gradient_steps": 1,
        "sync_every": 1_000,
        "n_step": 3,
        "normalize_obs": True,
        "hidden_sizes": (64, 64),
    },
}


# ============================================================================ the learner
class DQNLearner:
    """The networks, optimiser and statistics of DQN, and its two operations: act, update."""

    def __init__(
        self, config: DQNConfig, obs_shape: tuple[int, ...], obs_dtype: Any, n_actions: int
    ) -> None:
        self.config, self.n_actions = config, n_actions
        self.obs_shape, self.obs_dtype = tuple(obs_shape), np.dtype(obs_dtype)
        if config.normalize_obs and is_image_space(obs_shape, obs_dtype):
            raise ConfigError("normalize_obs is for vector observations, not uint8 images.")
        self.online = QNetwork(obs_shape, obs_dtype, n_actions, config.hidden_sizes, config.dueling)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.params = list(self.online.parameters())
        self.optimizer = torch.optim.Adam(self.params, lr=config.lr, **_fast_adam())
        self.obs_norm = ObsNormalizer(obs_shape) if config.normalize_obs else None
        self.reward_scaler = (
            RewardScaler(config.num_envs, config.gamma) if config.scale_rewards else None
        )
        self.lr_schedule = LinearSchedule(
            config.lr, config.lr if config.lr_end is None else config.lr_end, config.total_steps
        )
        self._online_fn = torch.compile(self.online) if config.compile else self.online
        self._target_fn = torch.compile(self.target) if config.compile else self.target

    # ------------------------------------------------------------------ acting
    def observe(self, obs: np.ndarray) -> Tensor:
        """Observations as the network's input (normalised if configured)."""
        if self.obs_norm is not None:
            obs = self.obs_norm(obs)
        return torch.from_numpy(np.ascontiguousarray(obs))

    @torch.inference_mode()
    def act(
        self, obs: np.ndarray, epsilon: float, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Epsilon-greedy actions for a batch of observations, and ``Q(s, a)`` of those actions."""
        q = self._online_fn(self.observe(obs)).numpy()
        actions = q.argmax(axis=1)
        explore = rng.random(len(actions)) < epsilon
        actions = np.where(explore, rng.integers(0, self.n_actions, size=len(actions)), actions)
        return actions, q[np.arange(len(actions)), actions]

    # ------------------------------------------------------------------ targets and update
    def update(self, batch: dict[str, Tensor]) -> Tensor:
        """One gradient step on a minibatch; returns ``[loss, td_error, q_mean, grad_norm]``."""
        cfg = self.config
        n = batch["obs"].shape[0]
        if cfg.double:
            # one online pass over s and s' (cheaper than two small ones); s' only picks a'
            q_both = self._online_fn(torch.cat([batch["obs"], batch["next_obs"]]))
            q_all, next_q_online = q_both[:n], q_both[n:].detach()
        else:
            q_all = self._online_fn(batch["obs"])
        with torch.no_grad():
            next_q_target = self._target_fn(batch["next_obs"])
            if cfg.double:
                y = double_q_target(
                    batch["rewards"], batch["discounts"], next_q_online, next_q_target,
                    batch["terminated"],
                )  # fmt: skip
            else:
                y = q_learning_target(
                    batch["rewards"], batch["discounts"], next_q_target, batch["terminated"]
                )
        q = q_all.gather(1, batch["actions"][:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, y) if cfg.loss == "huber" else F.mse_loss(q, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = clip_grad_norm(self.params, cfg.max_grad_norm)
        self.optimizer.step()
        with torch.no_grad():
            return torch.stack([loss, (y - q).abs().mean(), q.mean(), grad_norm])

    def minibatches(self, sample: ReplaySample, rounds: int) -> list[dict[str, Tensor]]:
        """Split one large replay sample into ``rounds`` minibatch tensors (one conversion)."""
        rewards = sample.rewards
        if self.reward_scaler is not None:
            rewards = self.reward_scaler(rewards)
        whole = {
            "obs": self.observe(sample.obs),
            "next_obs": self.observe(sample.next_obs),
            "actions": torch.from_numpy(sample.actions.astype(np.int64)),
            "rewards": torch.from_numpy(rewards),
            "discounts": torch.from_numpy(sample.discounts),
            "terminated": torch.from_numpy(sample.terminated),
        }
        size = self.config.batch_size
        return [{k: v[i * size : (i + 1) * size] for k, v in whole.items()} for i in range(rounds)]

    def sync_target(self) -> None:
        """``theta^- <- tau theta + (1 - tau) theta^-``."""
        with torch.no_grad():
            online, target = list(self.online.parameters()), list(self.target.parameters())
            if self.config.tau >= 1.0:
                torch._foreach_copy_(target, online)
            else:
                torch._foreach_lerp_(target, online, self.config.tau)

    def set_lr(self, step: int) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr_schedule(step)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "online": self.online.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "spec": {
                "obs_shape": list(self.obs_shape),
                "obs_dtype": str(self.obs_dtype),
                "n_actions": self.n_actions,
            },
        }
        if self.obs_norm is not None:
            state["obs_norm"] = self.obs_norm.state_dict()
        if self.reward_scaler is not None:
            state["reward_scaler"] = self.reward_scaler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.obs_norm is not None:
            self.obs_norm.load_state_dict(state["obs_norm"])
        if self.reward_scaler is not None:
            self.reward_scaler.load_state_dict(state["reward_scaler"])


@functools.cache
def _fast_adam() -> dict[str, bool]:
    """Fused Adam where torch offers it on CPU (one kernel for all parameters), else foreach."""
    try:
        torch.optim.Adam([torch.zeros(1, requires_grad=True)], fused=True)
        return {"fused": True}
    except (RuntimeError, TypeError):
        return {"foreach": True}


def clip_grad_norm(params: list[Tensor], max_norm: float) -> Tensor:
    """Scale gradients so ``||g||_2 <= max_norm`` (0: leave them); returns ``||g||_2`` before.

    The same rule as ``torch.nn.utils.clip_grad_norm_``, minus its checks, and the norm stays a
    tensor (no host sync).
    """
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    if max_norm > 0:
        torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


# ============================================================================ the agent
class DQNAgent:
    """A trained DQN: greedy in its Q network, or epsilon_end-greedy with deterministic=False."""

    def __init__(self, learner: DQNLearner, env_id: str, seed: int = 0) -> None:
        self.learner, self.env_id, self.config = learner, env_id, learner.config
        self.rng = np.random.default_rng(seed)
        self.run_dir = None

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` for a batch of observations ``[B, *obs_shape]`` -> ``[B, A]``."""
        with torch.inference_mode():
            return self.learner.online(self.learner.observe(obs)).numpy()

    def act_batch(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """Actions for a batch of observations (one forward pass)."""
        epsilon = 0.0 if deterministic else self.config.epsilon_end
        actions, _ = self.learner.act(
            np.asarray(obs, dtype=self.learner.obs_dtype), epsilon, self.rng
        )
        return actions

    def act(self, obs: Any, deterministic: bool = True) -> int:
        """The action for one observation."""
        batch = np.asarray(obs, dtype=self.learner.obs_dtype)[None]
        return int(self.act_batch(batch, deterministic)[0])

    def __repr__(self) -> str:
        return f"DQNAgent(env={self.env_id}, double={self.config.double})"


# ============================================================================ training
def train(config: DQNConfig, env: Any, run: Any) -> DQNAgent:
    """Train DQN on ``env`` inside an open :class:`rlx.runs.Run`; returns the agent."""
    if config.runners is not None:
        return train_with_runners(config, env, run)
    envs = make_vec_env(env, config.num_envs, vectorization=config.vectorization)
    n_actions = require_discrete_actions(
        envs.single_action_space, "DQN", run.env_id, "SAC, TD3 or PPO"
    )
    obs_space = envs.single_observation_space
    rng = seed_everything(config.seed)
    learner = DQNLearner(config, obs_space.shape, obs_space.dtype, n_actions)
    buffer = ReplayBuffer(
        config.buffer_size, obs_space.shape, obs_space.dtype, num_envs=config.num_envs,
        n_step=config.n_step, gamma=config.gamma,
    )  # fmt: skip
    epsilon = LinearSchedule(
        config.epsilon_start,
        config.epsilon_end,
        int(config.exploration_fraction * config.total_steps),
    )
    step = 0
    if run.resumed_state is not None:
        step = _restore(run.resumed_state, learner, buffer, rng)
    tracker = EpisodeTracker(config.num_envs, config.gamma)
    window = _LogWindow()
    try:
        obs, _ = envs.reset(seed=config.seed + step)
        after_done = np.zeros(config.num_envs, dtype=bool)
        if run.resumed_state is not None:
            obs, after_done = _restore_collection(run.resumed_state, envs, tracker, obs, after_done)
        next_log = (step // config.log_every + 1) * config.log_every
        while step < config.total_steps and not run.stop_requested:
            # ---- collect one vector step, epsilon-greedy
            eps = epsilon(step)
            actions, q_taken = learner.act(obs, eps, rng)
            next_obs, rewards, terminated, truncated, _ = envs.step(actions)
            # NEXT_STEP autoreset: a step right after a done only resets that copy
            stored = ~after_done
            seen = _clip(rewards, config.reward_clip)
            buffer.add(obs, actions, seen, next_obs, terminated, truncated, where=stored)
            if learner.obs_norm is not None:
                learner.obs_norm.update(obs[stored])
            if learner.reward_scaler is not None:
                learner.reward_scaler.update(seen, terminated | truncated, stored)
            finished = tracker.step(rewards, terminated, truncated, stored, q_taken, seen)
            after_done = terminated | truncated
            obs = next_obs
            previous, step = step, step + int(stored.sum())
            if len(finished.envs):
                window.add(finished, learner)
                run.log_episodes(
                    np.full(len(finished.envs), step), finished.returns, finished.lengths
                )

            # ---- targets and update: gradient_steps per train_freq env steps
            rounds = step // config.train_freq - previous // config.train_freq
            if rounds and len(buffer) >= max(config.learning_starts, 1):
                learner.set_lr(step)
                n = rounds * config.gradient_steps
                sample = buffer.sample(n * config.batch_size, rng)
                for batch in learner.minibatches(sample, n):
                    window.add_update(learner.update(batch))
            if step // config.sync_every > previous // config.sync_every:
                learner.sync_target()

            # ---- log, then checkpoint: only what passed the NaN check is saved
            if step >= next_log or step >= config.total_steps or run.stop_requested:
                run.log(step, window.flush(eps))
                next_log = (step // config.log_every + 1) * config.log_every
                if run.checkpoint_due():
                    collection = _collection_state(envs, tracker, obs, after_done)
                    run.save_checkpoint(step, _state(learner, buffer, rng, step, collection))
        collection = _collection_state(envs, tracker, obs, after_done)
        run.save_checkpoint(step, _state(learner, buffer, rng, step, collection))
    finally:
        envs.close()
    agent = DQNAgent(learner, run.env_id, config.seed)
    run.finish(step, _final_figures(agent, env, config))
    return agent


def train_with_runners(config: DQNConfig, env: Any, run: Any) -> DQNAgent:
    """DQN fed by ``config.runners`` Ray env runners (:mod:`rlx.distributed.env_runners`).

    Each round the learner broadcasts its network, observation statistics and epsilon (one
    ``ray.put``); every runner acts ``runner_steps`` vector steps and returns its transitions,
    stored as replay columns ``r N .. (r + 1) N - 1``; then the learner takes the gradient steps
    those env steps call for (``gradient_steps`` per ``train_freq``), syncs the target network
    and logs, as in one process. The columns of a replaced runner end their episode
    (truncated) at their last stored transition, so no n-step return spans the cut. A
    checkpoint holds no env state; a resume may use another number of runners (the saved
    replay buffer is kept when its layout still fits).
    """
    from rlx.distributed.env_runners import TransitionCollector, env_spaces

    obs_space, action_space = env_spaces(env)
    n_actions = require_discrete_actions(action_space, "DQN", run.env_id, "SAC, TD3 or PPO")
    rng = seed_everything(config.seed)
    learner = DQNLearner(config, obs_space.shape, obs_space.dtype, n_actions)
    buffer = ReplayBuffer(
        config.buffer_size, obs_space.shape, obs_space.dtype,
        num_envs=config.runners * config.num_envs, n_step=config.n_step, gamma=config.gamma,
    )  # fmt: skip
    epsilon = LinearSchedule(
        config.epsilon_start,
        config.epsilon_end,
        int(config.exploration_fraction * config.total_steps),
    )
    step = 0
    if run.resumed_state is not None:
        step = _restore(_fitting_replay(run.resumed_state, buffer), learner, buffer, rng)
    window = _LogWindow()
    spec = {"obs_shape": obs_space.shape, "obs_dtype": obs_space.dtype, "n_actions": n_actions}
    with TransitionCollector(env, config, spec, config.runner_steps, step) as runners:
        next_log = (step // config.log_every + 1) * config.log_every
        while step < config.total_steps and not run.stop_requested:
            # ---- collect: every runner acts runner_steps vector steps, epsilon-greedy
            eps = epsilon(step)
            got = runners.collect(_acting_state(learner, eps), step)
            _end_episodes_at_cut(buffer, got.restarted)
            for t in range(len(got.stored)):
                buffer.add(got.obs[t], got.actions[t], got.rewards[t], got.next_obs[t],
                           got.terminated[t], got.truncated[t], where=got.stored[t])  # fmt: skip
            if learner.obs_norm is not None:
                learner.obs_norm.update(got.obs[got.stored])
            if len(got.episodes.envs):
                window.add(got.episodes, learner)
                run.log_episodes(got.episode_steps, got.episodes.returns, got.episodes.lengths)
            previous, step = step, got.step

            # ---- targets and update: gradient_steps per train_freq env steps
            rounds = step // config.train_freq - previous // config.train_freq
            if rounds and len(buffer) >= max(config.learning_starts, 1):
                learner.set_lr(step)
                n = rounds * config.gradient_steps
                sample = buffer.sample(n * config.batch_size, rng)
                for batch in learner.minibatches(sample, n):
                    window.add_update(learner.update(batch))
            if step // config.sync_every > previous // config.sync_every:
                learner.sync_target()

            # ---- log, then checkpoint
            if step >= next_log or step >= config.total_steps or run.stop_requested:
                run.log(step, {**window.flush(eps), **runners.stats()})
                next_log = (step // config.log_every + 1) * config.log_every
                if run.checkpoint_due():
                    run.save_checkpoint(step, _state(learner, buffer, rng, step, NO_ENV_STATE))
        run.save_checkpoint(step, _state(learner, buffer, rng, step, NO_ENV_STATE))
    agent = DQNAgent(learner, run.env_id, config.seed)
    run.finish(step, _final_figures(agent, env, config))
    return agent


NO_ENV_STATE: dict[str, Any] = {"envs": None}  # the envs live in the runners: a resume resets


def _acting_state(learner: DQNLearner, epsilon: float) -> dict[str, Any]:
    """What a runner needs to act as the learner would: the network, the statistics, epsilon."""
    norm = learner.obs_norm
    return {
        "online": learner.online.state_dict(),
        "obs_norm": None if norm is None else norm.state_dict(),
        "epsilon": epsilon,
    }


def _end_episodes_at_cut(buffer: ReplayBuffer, columns: np.ndarray) -> None:
    """Mark the last stored transition of each column truncated: what follows in the column
    comes from a new runner's new episode."""
    columns = columns[buffer.count[columns] > 0] if len(columns) else columns
    buffer.truncated[(buffer.pos[columns] - 1) % buffer.rows, columns] = True


def _fitting_replay(state: dict, buffer: ReplayBuffer) -> dict:
    """The checkpoint state, without its replay buffer when that was laid out for another
    number of env copies (a resume with other runners); learning then waits for
    ``learning_starts`` new transitions."""
    saved = state.get("replay")
    if saved is None or saved["obs"].shape == buffer.obs.shape:
        return state
    print(
        f"rlx: the saved replay buffer holds {saved['obs'].shape[1]} env columns, this run "
        f"{buffer.num_envs}; starting with an empty replay buffer.",
        file=sys.stderr,
    )
    return {k: v for k, v in state.items() if k != "replay"}


class _LogWindow:
    """What happened since the last log: update statistics as one tensor, finished episodes."""

    def __init__(self) -> None:
        self.updates: Tensor | None = None
        self.n_updates = 0
        self.episodes: list[tuple[np.ndarray, ...]] = []

    def add_update(self, stats: Tensor) -> None:
        # summed as a tensor: read once per log, never synchronised per step
        self.updates = stats if self.updates is None else self.updates + stats
        self.n_updates += 1

    def add(self, finished: Any, learner: DQNLearner) -> None:
        scale = learner.reward_scaler.scale if learner.reward_scaler is not None else 1.0
        self.episodes.append(
            (finished.returns, finished.lengths, finished.discounted_returns,
             finished.start_values / scale)
        )  # fmt: skip

    def flush(self, epsilon: float) -> dict[str, float]:
        out: dict[str, float] = {M.EPSILON: epsilon}
        if self.updates is not None:
            loss, td, q, grad = (self.updates / self.n_updates).tolist()
            out.update({M.LOSS: loss, M.TD_ERROR: td, M.Q_MEAN: q, M.GRAD_NORM: grad})
        if self.episodes:
            returns, lengths, discounted, starts = (
                np.concatenate(x) for x in zip(*self.episodes, strict=True)
            )
            out.update(
                {
                    M.EPISODE_RETURN: float(returns.mean()),
                    M.EPISODE_LENGTH: float(lengths.mean()),
                    M.MC_RETURN: float(discounted.mean()),
                    M.Q_START: float(starts.mean()),
                }
            )
        self.updates, self.n_updates, self.episodes = None, 0, []
        return out


def _clip(rewards: np.ndarray, bound: float | None) -> np.ndarray:
    rewards = np.asarray(rewards, dtype=np.float32)
    return rewards if bound is None else np.clip(rewards, -bound, bound)


def _state(
    learner: DQNLearner,
    buffer: ReplayBuffer,
    rng: np.random.Generator,
    step: int,
    collection: dict[str, Any],
) -> dict:
    state = {
        "learner": learner.state_dict(),
        "step": step,
        "rng": rng_state(rng),
        "collection": collection,
    }
    if learner.config.save_replay_buffer:
        state["replay"] = buffer.state_dict()
    return state


def _collection_state(
    envs: Any, tracker: EpisodeTracker, obs: np.ndarray, after_done: np.ndarray
) -> dict[str, Any]:
    """Where every env copy is mid-episode; ``envs`` is None when its state is not plain data."""
    return {
        "envs": env_state(envs),
        "obs": np.array(obs),
        "after_done": after_done.copy(),
        "tracker": tracker.state_dict(),
    }


def _restore_collection(
    state: dict, envs: Any, tracker: EpisodeTracker, obs: np.ndarray, after_done: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Continue the interrupted episodes where possible, else keep the fresh reset."""
    saved = state.get("collection")
    if saved is None or saved["envs"] is None:
        return obs, after_done
    restore_env_state(envs, saved["envs"])
    tracker.load_state_dict(saved["tracker"])
    return saved["obs"], saved["after_done"]


def _restore(
    state: dict, learner: DQNLearner, buffer: ReplayBuffer, rng: np.random.Generator
) -> int:
    try:
        learner.load_state_dict(state["learner"])
        set_rng_state(state["rng"], rng)
    except (KeyError, RuntimeError) as exc:
        raise CheckpointError(
            f"the checkpoint does not match this DQN config ({type(exc).__name__}: {exc}); "
            "resume with the run's own config."
        ) from exc
    if "replay" in state:
        buffer.load_state_dict(state["replay"])
    return int(state["step"])


def _final_figures(agent: DQNAgent, env: Any, config: DQNConfig) -> dict[str, Any]:
    if config.eval_episodes == 0:
        return {}
    stats = evaluate(agent, env, episodes=config.eval_episodes, seed=config.seed + 10_000)
    return {
        "eval_return_mean": stats.mean_return,
        "eval_return_std": stats.std_return,
        "eval_length_mean": stats.mean_length,
        "eval_episodes": stats.episodes,
    }


# ============================================================================ load, register
def load(config: DQNConfig, env_id: str, state: dict) -> DQNAgent:
    """The greedy agent of a checkpoint (``rlx.load(run_dir)``)."""
    spec = state["learner"]["spec"]
    learner = DQNLearner(
        config, tuple(spec["obs_shape"]), np.dtype(spec["obs_dtype"]), int(spec["n_actions"])
    )
    learner.load_state_dict(state["learner"])
    return DQNAgent(learner, env_id, config.seed)


registry.register(
    registry.Algorithm(
        name="dqn",
        config=DQNConfig,
        train=train,
        load=load,
        summary="DQN / Double DQN: y = r + gamma Q(s', argmax_a' Q(s',a'; theta); theta^-)",
        presets=PRESETS,
    )
)
