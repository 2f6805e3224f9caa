"""The on-policy loop REINFORCE, A2C and PPO share, written once, and what it is made of.

    every update:
        collect T vector steps of N env copies with the current policy (here, or on K Ray
            env runners of N copies each, side by side as one rollout of K x N copies)
        the algorithm's update on that rollout (V, log pi_old, advantages, gradient steps)
        log the update's diagnostics and the episodes that ended (and, every eval_every env
            steps, a deterministic evaluation); checkpoint when due
    evaluate the final policy; write the run's summary

The loop tells the run's observers (``rlx.train``'s ``callbacks``) ``on_step`` after each
collection; evaluations during training are :mod:`rlx.core.training_evaluation`'s.

- :mod:`rlx.core.rollouts` collects: a :class:`~rlx.core.rollouts.Collector` steps ``N`` env
  copies in this process, a :class:`~rlx.core.rollouts.RunnerCollector` gathers Ray env
  runners' fragments as one collector; :func:`make_collector` picks the one a config asks for.
- :func:`prepare_batch` computes ``V(s)`` and ``log pi_old(a|s)`` of a whole rollout in one
  batched pass (the policy does not change while it collects), then GAE, and returns the
  valid samples as flat tensors.
- :func:`on_policy_state` / :func:`restore_on_policy_state` checkpoint everything a resumed
  run needs to continue exactly: networks, optimizer, step, normalisation statistics, RNG
  states, and the envs mid-episode (:mod:`rlx.core.env_state`).
- :class:`OnPolicyMethod` is what an algorithm adds to the loop (its optimizer, its update);
  :func:`train_on_policy` is the loop.
- :class:`PolicyAgent` is what ``rlx.train`` returns and ``rlx.load(run_dir)`` restores.

Under Gymnasium's NEXT_STEP autoreset, the step after a done only resets that copy: its row in
the buffer is marked ``valid=False`` and left out of every loss. The observation a done step
produced is the true final observation, stored as the next row's observation, so
``V(s_{t+1})`` of a truncated step is the value of its real final state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import torch
from torch import Tensor

from rlx import metrics as M
from rlx.core.advantages import explained_variance, gae
from rlx.core.buffers import RolloutBuffer
from rlx.core.checks import at_least, in_range, positive
from rlx.core.devices import resolve_device
from rlx.core.evaluation import final_evaluation
from rlx.core.normalize import ObsNormalizer
from rlx.core.observations import ObservationLayout
from rlx.core.optim import Optimizer
from rlx.core.policies import (
    ACTIVATIONS,
    ActorCritic,
)
from rlx.core.rollouts import Collector, Episodes, RunnerCollector
from rlx.core.runners import EnvRunners
from rlx.core.seeding import rng_state, seed_everything, set_rng_state
from rlx.core.training_evaluation import TrainingEvaluation
from rlx.errors import CheckpointError, ConfigError


# ---------------------------------------------------------------------------- collection
def make_collector(
    config: Any, env: Any, env_id: str, algo: str, remote: EnvRunners | None = None
) -> contextlib.AbstractContextManager[Any]:
    """The collector a config asks for, as a context manager: a :class:`Collector` in this
    process, or with ``config.runners`` a :class:`RunnerCollector` on the env runners
    ``remote`` starts (they stop with the context)."""
    options = {
        "algo": algo,
        "env_id": env_id,
        "normalize_obs": config.normalize_obs,
        "reward_scale_gamma": config.gamma if getattr(config, "normalize_rewards", False) else None,
    }
    if getattr(config, "runners", None) is None:
        return contextlib.nullcontext(Collector(env, config.num_envs, config.seed, **options))
    if remote is None:
        raise ConfigError(
            f"{algo}: runners={config.runners} needs the Ray env runners that rlx.train builds "
            "(rlx.distributed); train through rlx.train or rlx train, or leave runners out."
        )
    return RunnerCollector(
        remote, env, config.num_envs, config.seed, runners=config.runners,
        address=config.ray_address, **options,
    )  # fmt: skip


# ---------------------------------------------------------------------------- config checks
def check_learner_fields(config: Any) -> None:
    """The checks of the hyperparameters the on-policy algorithms share, on the fields a
    config has (its run and runner fields check themselves, :mod:`rlx.core.fields`).

    Also turns ``hidden_sizes`` into a tuple (a run's config.json stores it as a list).
    """
    name = type(config).__name__
    object.__setattr__(config, "hidden_sizes", tuple(int(h) for h in config.hidden_sizes))
    for field in ("num_steps", "num_epochs", "minibatch_size"):
        if hasattr(config, field):
            at_least(config, field, 1)
    in_range(config, "gamma", 0, 1)
    if hasattr(config, "gae_lambda"):
        in_range(config, "gae_lambda", 0, 1)
    positive(config, "learning_rate")
    for field in ("vf_coef", "ent_coef"):
        if hasattr(config, field):
            at_least(config, field, 0)
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


# ---------------------------------------------------------------------------- the batch
@dataclass
class RolloutBatch:
    """The valid samples of a rollout as flat tensors ``[B, ...]``, ready for minibatches."""

    obs: Tensor
    actions: Tensor
    log_probs: Tensor  # log pi_old(a|s) of the policy that collected
    values: Tensor  # V_old(s)
    advantages: Tensor
    returns: Tensor  # value targets: advantages + V_old
    explained_variance: float  # of V_old against the targets, before the update
    masks: Tensor | None = None  # the valid actions (True), where the env gives masks

    def __len__(self) -> int:
        return len(self.obs)

    def take(self, idx: Tensor) -> RolloutBatch:
        return RolloutBatch(
            self.obs[idx],
            self.actions[idx],
            self.log_probs[idx],
            self.values[idx],
            self.advantages[idx],
            self.returns[idx],
            self.explained_variance,
            None if self.masks is None else self.masks[idx],
        )


def prepare_batch(
    buffer: RolloutBuffer,
    policy: ActorCritic,
    last_obs: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> RolloutBatch:
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
    return flat_batch(buffer, buffer.valid[:T], policy.device)


def evaluate_rollout(
    buffer: RolloutBuffer, policy: ActorCritic, last_obs: np.ndarray
) -> np.ndarray:
    """Fill ``buffer.log_probs`` and ``buffer.values`` (``V = 0`` without a critic) in one
    batched pass; returns ``V(s_{t+1})`` ``[T, N]`` (the last row from ``last_obs``)."""
    T, N = buffer.t, buffer.num_envs
    device = policy.device
    obs = torch.from_numpy(buffer.obs[:T].reshape(T * N, -1)).to(device)
    actions = torch.from_numpy(buffer.actions[:T].reshape(T * N, *buffer.actions.shape[2:]))
    masks = None if buffer.masks is None else buffer.masks[:T].reshape(T * N, -1)
    with torch.no_grad():
        log_probs, _ = policy.log_prob_entropy(
            obs, actions.to(device), None if masks is None else torch.from_numpy(masks).to(device)
        )
        if policy.has_critic:
            last = torch.from_numpy(last_obs).to(device)
            values = policy.value(torch.cat([obs, last])).cpu().numpy()
        else:
            values = np.zeros((T + 1) * N, dtype=np.float32)
    buffer.log_probs[:T] = log_probs.cpu().numpy().reshape(T, N)
    buffer.values[:T] = values[: T * N].reshape(T, N)
    return np.concatenate([buffer.values[1:T], values[None, T * N :]])


def flat_batch(
    buffer: RolloutBuffer, use: np.ndarray, device: torch.device | None = None
) -> RolloutBatch:
    """The rows of ``buffer`` where ``use`` ``[T, N]`` is True, as flat tensors on ``device``
    (the CPU by default): one transfer per field for the whole update."""
    T, N = buffer.t, buffer.num_envs
    rows = np.flatnonzero(use.reshape(-1))
    idx = None if len(rows) == T * N else torch.from_numpy(rows)

    def flat(a: np.ndarray) -> Tensor:
        whole = torch.from_numpy(a[:T].reshape(T * N, *a.shape[2:]))
        whole = whole if idx is None else whole[idx]
        return whole if device is None else whole.to(device)

    return RolloutBatch(
        obs=flat(buffer.obs),
        actions=flat(buffer.actions),
        log_probs=flat(buffer.log_probs),
        values=flat(buffer.values),
        advantages=flat(buffer.advantages),
        returns=flat(buffer.returns),
        explained_variance=explained_variance(
            buffer.values[:T].reshape(-1)[rows], buffer.returns[:T].reshape(-1)[rows]
        ),
        masks=None if buffer.masks is None else flat(buffer.masks),
    )


# ---------------------------------------------------------------------------- optimisation
def annealed(value: float, step: int, total_steps: int, anneal: bool) -> float:
    """``value * (1 - step / total_steps)`` when annealing (never below 0), else ``value``."""
    if not anneal:
        return value
    return value * max(0.0, 1.0 - step / total_steps)


def mean_metrics(rows: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Per-key means of the metric dicts of an update's minibatches (still tensors)."""
    return {key: torch.stack([row[key] for row in rows]).mean() for key in rows[0]}


@torch.no_grad()
def policy_shift(policy: ActorCritic, batch: RolloutBatch) -> Tensor:
    """``approx_kl`` between the policy that collected ``batch`` and ``policy`` now.

    For the one-step updates (REINFORCE, A2C), where the ratio inside the loss is always 1.
    """
    from rlx.core.policy_losses import approx_kl

    log_probs, _ = policy.log_prob_entropy(batch.obs, batch.actions, batch.masks)
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
def on_policy_state(
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


def restore_on_policy_state(
    state: dict[str, Any],
    policy: ActorCritic,
    optimizer: Optimizer,
    collector: Collector,
    rng: np.random.Generator,
) -> int:
    """Load :func:`on_policy_state` into freshly built objects; returns the step."""
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


def build_policy(
    config: Any, collector: Collector, *, critic: bool = True, device: torch.device | None = None
) -> ActorCritic:
    """The actor-critic a config describes, for the collector's spaces, on ``device``."""
    policy = ActorCritic(
        collector.obs_dim,
        collector.actions,
        config.hidden_sizes,
        activation=config.activation,
        critic=critic,
        log_std_init=config.log_std_init,
        observation=collector.layout.spec,
    )
    return policy if device is None else policy.to(device)


# ---------------------------------------------------------------------------- the agent
class PolicyAgent:
    """A trained policy: ``act(obs)`` for one observation, ``act_batch(obs)`` for many.

    ``deterministic=True`` (the default) takes the most likely action (the Gaussian mean);
    ``False`` samples from ``pi(.|s)``. Observations are flattened as in training (a
    ``Dict`` key by key) and normalised with the training statistics; Gaussian actions are
    clipped into the action box. ``action_mask`` (True: valid; ``[B, n]`` for a batch) rules
    out invalid actions. The agent acts on the CPU, whatever device trained it.
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
        self.layout = ObservationLayout.of_spec(
            state["architecture"].get("observation"), self.policy.architecture["obs_dim"]
        )
        self.normalizer = None
        if state["normalizer"] is not None:
            self.normalizer = ObsNormalizer((self.policy.architecture["obs_dim"],))
            self.normalizer.load_state_dict(state["normalizer"])
        self.rng = np.random.default_rng(getattr(config, "seed", 0))
        self.run_dir = None

    def act_batch(
        self, obs: Any, deterministic: bool = True, action_mask: np.ndarray | None = None
    ) -> np.ndarray:
        """Actions for a batch of observations ``[B, ...]`` (a dict of such arrays for a
        ``Dict`` space)."""
        flat = self.layout.flatten(obs)
        x = self.normalizer(flat) if self.normalizer is not None else flat.astype(np.float32)
        mask = None if action_mask is None else np.asarray(action_mask, dtype=bool)
        if deterministic:
            actions = self.policy.mode(x, mask)
        else:
            actions = self.policy.sample(x, self.rng, mask)
        return self.policy.env_action(actions)

    def act(
        self, obs: Any, deterministic: bool = True, action_mask: np.ndarray | None = None
    ) -> Any:
        """The action for one observation: an ``int`` (Discrete) or an array (the others)."""
        mask = None if action_mask is None else np.asarray(action_mask, dtype=bool)[None]
        action = self.act_batch(self.layout.batch_of_one(obs), deterministic, mask)[0]
        return int(action) if self.policy.discrete else action

    def __repr__(self) -> str:
        kind = {"categorical": "softmax", "factored": "factored softmax"}.get(
            self.policy.kind, self.policy.kind
        )
        return f"PolicyAgent({self.algo}, env={self.env_id}, {kind} policy)"


def end_training(
    algo: str, run: Any, env: Any, config: Any, step: int, policy: ActorCritic, collector: Any
) -> PolicyAgent:
    """The common end of an on-policy run: close the envs rlx made, build the agent from the
    final policy, evaluate it (:func:`rlx.core.evaluation.final_evaluation`) and write the
    summary."""
    if isinstance(env, str):
        collector.close()
    agent = PolicyAgent(algo, config, run.env_id, agent_state(policy, collector))
    run.finish(step, final_evaluation(agent, env, run, config.eval_episodes, config.seed))
    return agent


# ============================================================================ the training loop
@dataclass(frozen=True)
class Rollout:
    """What one collection hands the algorithm's update."""

    buffer: RolloutBuffer  # T x N steps, filled
    last_obs: np.ndarray  # the bootstrap observations [N, obs_dim]
    step: int  # env steps done before it (where annealed settings are read)


OptimizerT = TypeVar("OptimizerT", bound=Optimizer)
"""The optimizer an on-policy algorithm builds and its update takes."""


@dataclass(frozen=True)
class OnPolicyMethod(Generic[OptimizerT]):
    """What an on-policy algorithm adds to :func:`train_on_policy`.

    Attributes:
        name: the registered name (``"ppo"``), for the agent and error messages.
        optimizer: ``optimizer(policy, config)``, with the config's ``learning_rate``.
        learn: ``learn(policy, optimizer, rollout, config, rng)``: the algorithm's update on
            one rollout (advantages, losses, gradient steps); returns the log row's metrics.
        rollout_steps: the config field giving ``T``, the vector steps of a rollout.
        whole_episodes: collect until every copy has ended an episode (at most ``T`` steps).
        critic: whether the policy learns ``V(s)``, from the config (None: always).
    """

    name: str
    optimizer: Callable[[ActorCritic, Any], OptimizerT]
    learn: Callable[[ActorCritic, OptimizerT, Rollout, Any, np.random.Generator], dict[str, Any]]
    rollout_steps: str = "num_steps"
    whole_episodes: bool = False
    critic: Callable[[Any], bool] | None = None


def train_on_policy(
    method: OnPolicyMethod[Any], config: Any, env: Any, run: Any, remote: EnvRunners | None = None
) -> PolicyAgent:
    """The on-policy loop, inside an open :class:`rlx.runs.Run`; returns the trained agent.

    Each update: the learning rate (annealed if asked), one rollout with the current policy
    (in this process, or on ``config.runners`` env runners started by ``remote``), the
    algorithm's ``learn`` on it, one log row (its metrics, ``lr``, the episodes that ended,
    what the runners report, an evaluation when due); a checkpoint when due. The run ends at
    the budget, at a stop (Ctrl-C, the doctor, a callback) or once an evaluation reaches
    ``stop_at_return``; then the last checkpoint, the final evaluation and the summary.
    """
    rng = seed_everything(config.seed)
    algo = method.name.upper()
    device = resolve_device(config.device)
    evaluation = TrainingEvaluation(config, env, run)
    with make_collector(config, env, run.env_id, algo, remote) as collector:
        critic = True if method.critic is None else method.critic(config)
        policy = build_policy(config, collector, critic=critic, device=device)
        optimizer = method.optimizer(policy, config)
        buffer = collector.new_buffer(getattr(config, method.rollout_steps))
        step = 0
        if run.resumed_state is not None:
            step = restore_on_policy_state(run.resumed_state, policy, optimizer, collector, rng)
            evaluation.load_state_dict(run.resumed_state.get("evaluation"), step)

        def state() -> dict[str, Any]:
            return {
                **on_policy_state(step, policy, optimizer, collector, rng),
                "evaluation": evaluation.state_dict(),
            }

        def agent() -> PolicyAgent:
            return PolicyAgent(method.name, config, run.env_id, agent_state(policy, collector))

        collect_options = {"until_every_copy_done": True} if method.whole_episodes else {}
        while step < config.total_steps and not run.stop_requested and not evaluation.reached:
            lr = annealed(config.learning_rate, step, config.total_steps, config.anneal_lr)
            optimizer.lr = lr
            before = step
            step, episodes = collector.collect(policy, buffer, rng, step, **collect_options)
            if len(episodes.returns):  # logged as they end, before the update
                run.log_episodes(episodes.steps, episodes.returns, episodes.lengths)
            ended = {"episode_returns": episodes.returns, "episode_lengths": episodes.lengths}
            run.notify("on_step", step, ended)
            rollout = Rollout(buffer, collector.last_obs, before)
            metrics = method.learn(policy, optimizer, rollout, config, rng)
            row = {**metrics, M.LR: lr, **episode_metrics(episodes), **collector.stats()}
            if evaluation.due(step):
                row.update(evaluation.evaluate(step, agent, state))
            run.log(step, row)
            if run.checkpoint_due():
                run.save_checkpoint(step, state())
        run.save_checkpoint(step, state())
        return end_training(method.name, run, env, config, step, policy, collector)
