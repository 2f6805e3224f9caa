"""What REINFORCE, A2C and PPO share, written once: collect, prepare, step, checkpoint, act.

- :class:`Collector` steps ``N`` env copies with the current policy into a
  :class:`~rlx.core.buffers.RolloutBuffer` (``T`` steps each), keeps the episode statistics,
  the observation normalisation and the env state for checkpoints.
- :func:`prepare_batch` computes ``V(s)`` and ``log pi_old(a|s)`` of a whole rollout in one
  batched pass (the policy does not change while it collects), then GAE, and returns the
  valid samples as flat tensors.
- :func:`gradient_step` is ``zero_grad; backward; clip; step`` returning the gradient norm
  (with :mod:`rlx.core.optim`'s Adam and RMSprop).
- :func:`training_state` / :func:`restore_training` checkpoint everything a resumed run needs
  to continue exactly: networks, optimizer, step, normalisation statistics, RNG states, and
  the envs mid-episode (:mod:`rlx.core.env_state`).
- :class:`PolicyAgent` is what ``rlx.train`` returns and ``rlx.load(run_dir)`` restores.

Under Gymnasium's NEXT_STEP autoreset, the step after a done only resets that copy: its row in
the buffer is marked ``valid=False`` and left out of every loss. The observation a done step
produced is the true final observation, stored as the next row's observation, so
``V(s_{t+1})`` of a truncated step is the value of its real final state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from rlx.core.advantages import explained_variance, gae
from rlx.core.buffers import RolloutBuffer
from rlx.core.checks import check_runner_fields
from rlx.core.env_state import env_state, restore_env_state
from rlx.core.envs import make_vec_env
from rlx.core.normalize import ObsNormalizer, RewardScaler
from rlx.core.optim import Optimizer, clip_grad_norm
from rlx.core.policies import ACTIVATIONS, ActorCritic, describe_action_space, observation_dim
from rlx.core.seeding import rng_state, set_rng_state
from rlx.diagnostics import metrics as M
from rlx.errors import CheckpointError, ConfigError


class Episodes(NamedTuple):
    """Training episodes that finished during one collection (arrays over episodes)."""

    steps: np.ndarray  # env steps (all copies) done when each ended
    returns: np.ndarray
    lengths: np.ndarray


class Collector:
    """``num_envs`` copies of an env, stepped together by the current policy.

    Args:
        env: a Gymnasium id or env object.
        num_envs: copies stepped as one vector env (Gymnasium's native vector mode if any).
        seed: seeds the envs' first reset.
        algo: for error messages.
        env_id: for error messages.
        normalize_obs: normalise observations by running mean and std (None: for ``Box``
            actions, where observation scales vary most, as SB3's zoo does for MuJoCo).
        reward_scale_gamma: scale rewards by the running std of the discounted return with
            this gamma (None: raw rewards).

    The statistics stay fixed during a collection and are updated after it, so every row of a
    rollout, and the log-probabilities of the policy that chose its action, see one
    normalisation. Episode returns and lengths are summed once per rollout from its arrays
    (:meth:`_finished_episodes`), not per step: at 8 CartPole copies a per-step tracker cost
    half as much again as the env step itself.
    """

    def __init__(
        self,
        env: Any,
        num_envs: int,
        seed: int,
        *,
        algo: str,
        env_id: str,
        normalize_obs: bool | None = None,
        reward_scale_gamma: float | None = None,
    ) -> None:
        self.vec = make_vec_env(env, num_envs)
        self.num_envs = num_envs
        self.obs_dim = observation_dim(self.vec.single_observation_space, env_id)
        self.actions = describe_action_space(self.vec.single_action_space, algo, env_id)
        discrete = "n" in self.actions
        if normalize_obs is None:
            normalize_obs = not discrete
        self.normalizer = ObsNormalizer((self.obs_dim,)) if normalize_obs else None
        self.reward_scaler = (
            RewardScaler(num_envs, reward_scale_gamma) if reward_scale_gamma is not None else None
        )
        # the unfinished episode of each copy: return and length so far
        self.episode_return = np.zeros(num_envs, dtype=np.float64)
        self.episode_length = np.zeros(num_envs, dtype=np.int64)
        self.raw_obs, _ = self.vec.reset(seed=seed)
        self.after_done = np.zeros(num_envs, dtype=bool)
        self.last_obs = self.observe(self.raw_obs)

    def new_buffer(self, steps: int) -> RolloutBuffer:
        shape = () if "n" in self.actions else (len(self.actions["low"]),)
        dtype = np.int64 if "n" in self.actions else np.float32
        return RolloutBuffer(
            steps,
            self.num_envs,
            (self.obs_dim,),
            np.float32,
            action_shape=shape,
            action_dtype=dtype,
        )

    def observe(self, raw: np.ndarray) -> np.ndarray:
        """Observations as the policy sees them: flat float32, normalised if asked."""
        flat = np.asarray(raw).reshape(len(raw), -1)
        if self.normalizer is not None:
            return self.normalizer(flat)
        return flat.astype(np.float32, copy=False)

    def collect(
        self,
        policy: ActorCritic,
        buffer: RolloutBuffer,
        rng: np.random.Generator,
        step: int,
        *,
        until_every_copy_done: bool = False,
    ) -> tuple[int, Episodes]:
        """Fill ``buffer`` with ``T`` vector steps; returns the env-step count after them
        (``step`` is the count before) and the episodes that finished.

        With ``until_every_copy_done`` the collection stops early, once every copy has ended
        an episode in it (Monte Carlo methods need whole episodes); ``buffer.t`` says how many
        steps were filled. Env steps count transitions: the reset-only steps of NEXT_STEP
        autoreset are not counted (as Stable-Baselines3's same-step reset has none).
        """
        buffer.reset()
        raw_rows, raw_rewards = [], []
        ended = np.zeros(self.num_envs, dtype=bool)
        while not buffer.full and not (until_every_copy_done and ended.all()):
            obs = self.observe(self.raw_obs)
            raw_rows.append(self.raw_obs)
            actions = policy.sample(obs, rng)
            self.raw_obs, rewards, terminated, truncated, _ = self.vec.step(
                policy.env_action(actions)
            )
            valid = ~self.after_done  # False: this step only reset a copy that was done
            raw_rewards.append(rewards)
            if self.reward_scaler is not None:
                self.reward_scaler.update(rewards, terminated | truncated, valid)
                rewards = self.reward_scaler(rewards)
            buffer.add(
                obs=obs,
                actions=actions,
                rewards=rewards,
                terminated=terminated,
                truncated=truncated,
                valid=valid,
            )
            self.after_done = terminated | truncated
            if until_every_copy_done:
                ended |= self.after_done
        # the bootstrap observation, seen through the same statistics as the rollout
        self.last_obs = self.observe(self.raw_obs)
        if self.normalizer is not None:
            self.normalizer.update(np.concatenate(raw_rows).reshape(-1, self.obs_dim))
        T = buffer.t
        ends = (buffer.terminated[:T] | buffer.truncated[:T]) & buffer.valid[:T]
        return self._finished_episodes(np.stack(raw_rewards), buffer.valid[:T], ends, step)

    def _finished_episodes(
        self, rewards: np.ndarray, valid: np.ndarray, ends: np.ndarray, step: int
    ) -> tuple[int, Episodes]:
        """The episodes that ended in a rollout (``[T, N]`` arrays), in one vectorised pass.

        Per copy, running sums of reward and of steps start from the unfinished episode
        carried in; an episode's return is the sum at its end minus the sum at the copy's
        previous end in this rollout (or 0). What follows a copy's last end is carried out.
        """
        if not ends.any():  # common with short rollouts: only the running sums move
            self.episode_return = self.episode_return + np.where(valid, rewards, 0.0).sum(axis=0)
            self.episode_length = self.episode_length + valid.sum(axis=0)
            return step + int(valid.sum()), _NO_EPISODES
        counted = step + np.cumsum(valid.sum(axis=1))  # env steps done after each vector step
        ret = self.episode_return + np.cumsum(np.where(valid, rewards, 0.0), axis=0)
        length = self.episode_length + np.cumsum(valid, axis=0)
        t, n = np.nonzero(ends)  # in time order
        per_copy = np.lexsort((t, n))  # grouped by copy, each group in time order
        tc, nc = t[per_copy], n[per_copy]
        first = np.ones(len(nc), dtype=bool)
        first[1:] = nc[1:] != nc[:-1]
        ret_end, len_end = ret[tc, nc], length[tc, nc]
        returns = ret_end - np.where(first, 0.0, np.roll(ret_end, 1))
        lengths = len_end - np.where(first, 0, np.roll(len_end, 1))
        base_ret, base_len = np.zeros_like(self.episode_return), np.zeros_like(self.episode_length)
        base_ret[nc], base_len[nc] = ret_end, len_end  # the copy's last end wins
        self.episode_return, self.episode_length = ret[-1] - base_ret, length[-1] - base_len
        chronological_returns, chronological_lengths = (
            np.empty_like(returns),
            np.empty_like(lengths),
        )
        chronological_returns[per_copy], chronological_lengths[per_copy] = returns, lengths
        episodes = Episodes(counted[t], chronological_returns, chronological_lengths)
        return int(counted[-1]), episodes

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "env": env_state(self.vec),
            "raw_obs": np.asarray(self.raw_obs).copy(),
            "after_done": self.after_done.copy(),
            "episode_return": self.episode_return.copy(),
            "episode_length": self.episode_length.copy(),
            "normalizer": None if self.normalizer is None else self.normalizer.state_dict(),
            "reward_scaler": (
                None if self.reward_scaler is None else self.reward_scaler.state_dict()
            ),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["env"] is not None:
            restore_env_state(self.vec, state["env"])
            self.raw_obs = state["raw_obs"].copy()
            self.after_done = state["after_done"].copy()
            self.episode_return = state["episode_return"].copy()
            self.episode_length = state["episode_length"].copy()
        # else the env's state could not be saved: continue from the fresh reset
        if self.normalizer is not None:
            self.normalizer.load_state_dict(state["normalizer"])
        if self.reward_scaler is not None:
            self.reward_scaler.load_state_dict(state["reward_scaler"])
        self.last_obs = self.observe(self.raw_obs)

    def stats(self) -> dict[str, float]:
        """What the collection itself reports in an update's log row: nothing in one process
        (Ray env runners report their restarts)."""
        return {}

    def close(self) -> None:
        self.vec.close()


def make_collector(
    config: Any, env: Any, env_id: str, algo: str
) -> contextlib.AbstractContextManager[Any]:
    """The collector a config asks for, as a context manager: a :class:`Collector` in this
    process, or with ``config.runners`` Ray env runners
    (:class:`rlx.distributed.env_runners.RemoteCollector`), which stop with the context."""
    options = {
        "algo": algo,
        "env_id": env_id,
        "normalize_obs": config.normalize_obs,
        "reward_scale_gamma": config.gamma if config.normalize_rewards else None,
    }
    if getattr(config, "runners", None) is None:
        return contextlib.nullcontext(Collector(env, config.num_envs, config.seed, **options))
    from rlx.distributed.env_runners import RemoteCollector

    return RemoteCollector(
        env, config.num_envs, config.seed, runners=config.runners,
        ray_address=config.ray_address, **options,
    )  # fmt: skip


_NO_EPISODES = Episodes(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))


# ---------------------------------------------------------------------------- config checks
def check_config(config: Any) -> None:
    """The checks every on-policy config shares, on the fields it has; one clear sentence each.

    Also turns ``hidden_sizes`` into a tuple (a run's config.json stores it as a list).
    """
    name = type(config).__name__
    object.__setattr__(config, "hidden_sizes", tuple(int(h) for h in config.hidden_sizes))
    for field in ("total_steps", "num_envs", "num_steps", "num_epochs", "minibatch_size"):
        value = getattr(config, field, 1)
        if value < 1:
            raise ConfigError(f"{name}: {field}={value} must be a whole number >= 1.")
    if not 0.0 <= config.gamma <= 1.0:
        raise ConfigError(f"{name}: gamma={config.gamma} must be in [0, 1] (default 0.99).")
    lam = getattr(config, "gae_lambda", 0.0)
    if not 0.0 <= lam <= 1.0:
        raise ConfigError(
            f"{name}: gae_lambda={lam} must be in [0, 1] (0 gives the TD advantage, 1 the Monte "
            "Carlo return; default 0.95)."
        )
    if config.learning_rate <= 0:
        raise ConfigError(f"{name}: learning_rate={config.learning_rate} must be > 0.")
    for field in ("vf_coef", "ent_coef"):
        value = getattr(config, field, 0.0)
        if value < 0:
            raise ConfigError(f"{name}: {field}={value} must be >= 0.")
    for field in ("max_grad_norm", "target_kl", "clip_value"):
        value = getattr(config, field, None)
        if value is not None and value <= 0:
            raise ConfigError(f"{name}: {field}={value} must be > 0, or None to switch it off.")
    if any(h < 1 for h in config.hidden_sizes):
        raise ConfigError(
            f"{name}: hidden_sizes={list(config.hidden_sizes)} must be widths >= 1 "
            "(an empty list gives a linear policy and critic)."
        )
    if getattr(config, "activation", "tanh") not in ACTIVATIONS:
        raise ConfigError(
            f"{name}: activation={config.activation!r} is not one of {', '.join(ACTIVATIONS)}."
        )
    if config.eval_episodes < 0:
        raise ConfigError(f"{name}: eval_episodes={config.eval_episodes} must be >= 0.")
    check_runner_fields(config)


# ---------------------------------------------------------------------------- the batch
@dataclass
class Batch:
    """The valid samples of a rollout as flat tensors ``[B, ...]``, ready for minibatches."""

    obs: Tensor
    actions: Tensor
    log_probs: Tensor  # log pi_old(a|s) of the policy that collected
    values: Tensor  # V_old(s)
    advantages: Tensor
    returns: Tensor  # value targets: advantages + V_old
    explained_variance: float  # of V_old against the targets, before the update

    def __len__(self) -> int:
        return len(self.obs)

    def take(self, idx: Tensor) -> Batch:
        return Batch(
            self.obs[idx],
            self.actions[idx],
            self.log_probs[idx],
            self.values[idx],
            self.advantages[idx],
            self.returns[idx],
            self.explained_variance,
        )


def prepare_batch(
    buffer: RolloutBuffer,
    policy: ActorCritic,
    last_obs: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> Batch:
    """``V``, ``log pi_old`` and GAE advantages of a full rollout.

    One forward pass over all ``T x N`` observations plus the bootstrap ones gives ``V(s_t)``
    and ``V(s_{t+1})``; GAE (:func:`rlx.core.advantages.gae`) gives ``A_t``, and the value
    targets are ``A_t + V(s_t)`` (``lambda = 1``: Monte Carlo returns, ``0``: TD targets).
    """
    T = buffer.t
    next_values = evaluate_rollout(buffer, policy, last_obs)
    buffer.advantages[:T] = gae(
        buffer.rewards[:T],
        buffer.values[:T],
        next_values,
        buffer.terminated[:T],
        buffer.truncated[:T],
        gamma,
        gae_lambda,
    )
    buffer.returns[:T] = buffer.advantages[:T] + buffer.values[:T]
    return flat_batch(buffer, buffer.valid[:T])


def evaluate_rollout(
    buffer: RolloutBuffer, policy: ActorCritic, last_obs: np.ndarray
) -> np.ndarray:
    """Fill ``buffer.log_probs`` and ``buffer.values`` (``V = 0`` without a critic) in one
    batched pass; returns ``V(s_{t+1})`` ``[T, N]`` (the last row from ``last_obs``)."""
    T, N = buffer.t, buffer.num_envs
    obs = torch.from_numpy(buffer.obs[:T].reshape(T * N, -1))
    actions = torch.from_numpy(buffer.actions[:T].reshape(T * N, *buffer.actions.shape[2:]))
    with torch.no_grad():
        log_probs, _ = policy.log_prob_entropy(obs, actions)
        if policy.has_critic:
            values = policy.value(torch.cat([obs, torch.from_numpy(last_obs)])).numpy()
        else:
            values = np.zeros((T + 1) * N, dtype=np.float32)
    buffer.log_probs[:T] = log_probs.numpy().reshape(T, N)
    buffer.values[:T] = values[: T * N].reshape(T, N)
    return np.concatenate([buffer.values[1:T], values[None, T * N :]])


def flat_batch(buffer: RolloutBuffer, use: np.ndarray) -> Batch:
    """The rows of ``buffer`` where ``use`` ``[T, N]`` is True, as flat tensors."""
    T, N = buffer.t, buffer.num_envs
    rows = np.flatnonzero(use.reshape(-1))
    idx = None if len(rows) == T * N else torch.from_numpy(rows)

    def flat(a: np.ndarray) -> Tensor:
        whole = torch.from_numpy(a[:T].reshape(T * N, *a.shape[2:]))
        return whole if idx is None else whole[idx]

    return Batch(
        obs=flat(buffer.obs),
        actions=flat(buffer.actions),
        log_probs=flat(buffer.log_probs),
        values=flat(buffer.values),
        advantages=flat(buffer.advantages),
        returns=flat(buffer.returns),
        explained_variance=explained_variance(
            buffer.values[:T].reshape(-1)[rows], buffer.returns[:T].reshape(-1)[rows]
        ),
    )


# ---------------------------------------------------------------------------- optimisation
def annealed(value: float, step: int, total_steps: int, anneal: bool) -> float:
    """``value * (1 - step / total_steps)`` when annealing (never below 0), else ``value``."""
    if not anneal:
        return value
    return value * max(0.0, 1.0 - step / total_steps)


def gradient_step(
    optimizer: Optimizer,
    loss: Tensor | Sequence[Tensor],
    params: Sequence[nn.Parameter],
    max_grad_norm: float | None,
) -> Tensor:
    """``zero_grad; backward; clip the global norm to max_grad_norm; step``.

    ``loss`` may instead be the gradients themselves, one per parameter in the optimizer's
    order (computed without autograd, :mod:`rlx.core.manual_grad`): then there is no backward
    and ``.grad`` is left alone. Returns the gradient norm before clipping (a 0-d tensor, not
    read here).
    """
    if isinstance(loss, Tensor):
        optimizer.zero_grad()
        loss.backward()
        norm = clip_grad_norm(params, max_grad_norm)
        optimizer.step()
        return norm
    norm = clip_grad_norm(params, max_grad_norm, loss)
    optimizer.step(loss)
    return norm


def mean_metrics(rows: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Per-key means of the metric dicts of an update's minibatches (still tensors)."""
    return {key: torch.stack([row[key] for row in rows]).mean() for key in rows[0]}


@torch.no_grad()
def policy_shift(policy: ActorCritic, batch: Batch) -> Tensor:
    """``approx_kl`` between the policy that collected ``batch`` and ``policy`` now.

    For the one-step updates (REINFORCE, A2C), where the ratio inside the loss is always 1.
    """
    from rlx.core.policy_losses import approx_kl

    log_probs, _ = policy.log_prob_entropy(batch.obs, batch.actions)
    return approx_kl(log_probs - batch.log_probs)


def episode_metrics(episodes: Episodes) -> dict[str, float]:
    """Mean return and length of the episodes that finished (nothing when none did)."""
    if len(episodes.returns) == 0:
        return {}
    return {
        M.EPISODE_RETURN: float(episodes.returns.mean()),
        M.EPISODE_LENGTH: float(episodes.lengths.mean()),
    }


# ---------------------------------------------------------------------------- checkpoints
def training_state(
    step: int,
    policy: ActorCritic,
    optimizer: Optimizer,
    collector: Collector,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """Everything a resumed run needs to continue exactly, plus the agent for ``rlx.load``."""
    return {
        "step": step,
        "optimizer": optimizer.state_dict(),
        "collector": collector.state_dict(),
        "rng": rng_state(rng),
        "agent": agent_state(policy, collector),
    }


def restore_training(
    state: dict[str, Any],
    policy: ActorCritic,
    optimizer: Optimizer,
    collector: Collector,
    rng: np.random.Generator,
) -> int:
    """Load :func:`training_state` into freshly built objects; returns the step."""
    try:
        policy.load_state_dict(state["agent"]["policy"])
        optimizer.load_state_dict(state["optimizer"])
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint does not match this config ({type(exc).__name__}: {exc}); "
            "resume with the run's own config."
        ) from exc
    collector.load_state_dict(state["collector"])
    set_rng_state(state["rng"], rng)
    return int(state["step"])


def agent_state(policy: ActorCritic, collector: Collector) -> dict[str, Any]:
    """What :class:`PolicyAgent` needs: the network, its architecture, the obs statistics."""
    return {
        "policy": policy.state_dict(),
        "architecture": policy.architecture,
        "normalizer": None if collector.normalizer is None else collector.normalizer.state_dict(),
    }


def build_policy(config: Any, collector: Collector, *, critic: bool = True) -> ActorCritic:
    """The actor-critic a config describes, for the collector's spaces."""
    return ActorCritic(
        collector.obs_dim,
        collector.actions,
        config.hidden_sizes,
        activation=config.activation,
        critic=critic,
        log_std_init=config.log_std_init,
    )


# ---------------------------------------------------------------------------- the agent
class PolicyAgent:
    """A trained policy: ``act(obs)`` for one observation, ``act_batch(obs)`` for many.

    ``deterministic=True`` (the default) takes the most likely action (the Gaussian mean);
    ``False`` samples from ``pi(.|s)``. Observations are normalised with the training
    statistics, and Gaussian actions are clipped into the action box.
    """

    def __init__(self, algo: str, config: Any, env_id: str, state: dict[str, Any]) -> None:
        self.algo, self.config, self.env_id = algo, config, env_id
        try:
            self.policy = ActorCritic(**state["architecture"])
            self.policy.load_state_dict(state["policy"])
        except (KeyError, TypeError, RuntimeError) as exc:
            raise CheckpointError(
                f"this {algo} checkpoint does not hold a policy rlx can rebuild "
                f"({type(exc).__name__}: {exc}); it may come from another rlx version."
            ) from exc
        self.policy.eval()
        self.normalizer = None
        if state["normalizer"] is not None:
            self.normalizer = ObsNormalizer((self.policy.architecture["obs_dim"],))
            self.normalizer.load_state_dict(state["normalizer"])
        self.rng = np.random.default_rng(getattr(config, "seed", 0))
        self.run_dir = None

    def act_batch(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """Actions for a batch of observations ``[B, ...]``."""
        flat = np.asarray(obs).reshape(len(obs), -1)
        x = self.normalizer(flat) if self.normalizer is not None else flat.astype(np.float32)
        actions = self.policy.mode(x) if deterministic else self.policy.sample(x, self.rng)
        return self.policy.env_action(actions)

    def act(self, obs: Any, deterministic: bool = True) -> Any:
        """The action for one observation: an ``int`` (Discrete) or a float array (Box)."""
        action = self.act_batch(np.asarray(obs)[None], deterministic)[0]
        return int(action) if self.policy.discrete else action

    def __repr__(self) -> str:
        kind = "softmax" if self.policy.discrete else "gaussian"
        return f"PolicyAgent({self.algo}, env={self.env_id}, {kind} policy)"


def finish(
    run: Any, agent: PolicyAgent, env: Any, step: int, eval_episodes: int, seed: int
) -> PolicyAgent:
    """Evaluate the final policy (unless stopped early) and write the run's summary."""
    from rlx.core.evaluation import evaluate

    figures: dict[str, Any] = {}
    if eval_episodes > 0 and not run.stop_requested:
        stats = evaluate(agent, env, eval_episodes, seed=seed + 10_000)
        figures = {
            "eval_return_mean": stats.mean_return,
            "eval_return_std": stats.std_return,
            "eval_length_mean": stats.mean_length,
            "eval_episodes": stats.episodes,
        }
    run.finish(step, figures)
    return agent


def end_training(
    algo: str, run: Any, env: Any, config: Any, step: int, policy: ActorCritic, collector: Collector
) -> PolicyAgent:
    """The common end of an on-policy run: close the envs rlx made, build the agent from the
    final policy, evaluate it and write the summary."""
    if isinstance(env, str):
        collector.close()
    agent = PolicyAgent(algo, config, run.env_id, agent_state(policy, collector))
    return finish(run, agent, env, step, config.eval_episodes, config.seed)
