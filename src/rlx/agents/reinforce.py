"""REINFORCE (Williams, 1992) with a baseline: Monte Carlo policy gradient on whole episodes.

    N parallel envs, stepped until every copy has ended an episode
    returns by the reverse sweep  G = r + gamma * G  (a time limit bootstraps from V, if learned)
    weights  Psi_t = G_t - b(s_t),  b = V(s) (learned), the batch mean of G, or 0
    L = -E[Psi_t log pi(a_t|s_t)] (+ c_v 1/2 E[(V(s_t) - G_t)^2] for a learned baseline)
    one Adam step per batch; diagnostics once per update.

The policy gradient is ``grad J = E[sum_t G_t grad log pi(a_t|s_t)]``; subtracting a baseline
keeps it unbiased and cuts its variance. Only steps whose episode ends inside the batch have
a Monte Carlo return; the steps of each copy after its last episode end are left out (the
copy continues that episode in the next batch). The loop (collection, checkpoints,
evaluation) is :func:`rlx.core.on_policy.train_on_policy`, collecting whole episodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from torch import Tensor

from rlx import metrics as M
from rlx import registry
from rlx.core.advantages import discounted_returns
from rlx.core.buffers import RolloutBuffer
from rlx.core.checks import at_least, check_on_policy_fields
from rlx.core.fields import RunFields
from rlx.core.on_policy import OnPolicyMethod, Rollout, train_on_policy
from rlx.core.optim import Adam, gradient_step
from rlx.core.policies import ActorCritic
from rlx.core.policy_agent import PolicyAgent
from rlx.core.policy_losses import entropy_bonus, normalize, policy_gradient_loss, value_loss
from rlx.core.rollout_batch import RolloutBatch, evaluate_rollout, flat_batch, policy_shift
from rlx.errors import ConfigError
from rlx.runs.handle import RunHandle

BASELINES = ("learned", "mean", "none")


# ============================================================================ config
@dataclass(frozen=True)
class ReinforceConfig(RunFields):
    """REINFORCE's knobs; gamma 0.99 and c_v 0.5 (``docs/reference/defaults.md``). Each batch
    holds at least one whole episode of every env copy."""

    total_steps: int = 200_000
    num_envs: int = 8
    max_steps: int = 1000
    """cap on the steps per copy in one batch (episodes still running then wait)"""
    gamma: float = 0.99
    """discount"""
    baseline: Literal["learned", "mean", "none"] = "learned"
    """b(s): a learned V(s), the batch mean of the returns, or none"""
    normalize_returns: bool = True
    """standardise the weights G - b per batch to zero mean and unit std"""
    vf_coef: float = 0.5
    """c_v: weight of the baseline's value loss"""
    ent_coef: float = 0.0
    """c_e: weight of an entropy bonus (0: plain REINFORCE)"""
    max_grad_norm: float | None = None
    """clip the global gradient norm (None: no clipping)"""
    learning_rate: float = 1e-3
    """Adam's step size"""
    anneal_lr: bool = False
    """decay the learning rate linearly to 0 over total_steps"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of the policy and the baseline; () for linear ones"""
    activation: str = "tanh"
    """between hidden layers: tanh or relu"""
    normalize_obs: bool | None = None
    """normalise observations by running statistics (None: for Box actions only)"""
    log_std_init: float = 0.0
    """initial log std of a Gaussian policy"""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_on_policy_fields(self)
        if self.baseline not in BASELINES:
            raise ConfigError(
                f"ReinforceConfig: baseline={self.baseline!r} is not one of {', '.join(BASELINES)}."
            )
        at_least(self, "max_steps", 1)


# ============================================================================ returns, loss
def monte_carlo_batch(
    buffer: RolloutBuffer, policy: ActorCritic, last_obs: np.ndarray, config: ReinforceConfig
) -> RolloutBatch:
    """Returns ``G_t`` by the reverse sweep and weights ``Psi_t = G_t - b``, of whole episodes.

    ``buffer.returns`` gets ``G_t`` and ``buffer.advantages`` gets ``Psi_t``; the batch keeps the
    valid steps up to each copy's last episode end.
    """
    T = buffer.t
    next_values = evaluate_rollout(buffer, policy, last_obs)
    G = discounted_returns(
        buffer.rewards[:T], config.gamma, terminated=buffer.terminated[:T],
        truncated=buffer.truncated[:T], next_values=next_values,
    )  # fmt: skip
    ended = buffer.terminated[:T] | buffer.truncated[:T]
    # steps at or before a copy's last episode end have their whole future in the batch
    complete = np.flip(np.logical_or.accumulate(np.flip(ended, 0), axis=0), 0)
    use = buffer.valid[:T] & complete
    buffer.returns[:T] = G
    if config.baseline == "learned":
        buffer.advantages[:T] = G - buffer.values[:T]
    elif config.baseline == "mean":
        buffer.advantages[:T] = G - (G[use].mean() if use.any() else 0.0)
    else:
        buffer.advantages[:T] = G
    return flat_batch(buffer, use, policy.device)


def reinforce_loss(
    policy: ActorCritic, batch: RolloutBatch, config: ReinforceConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """``L = -E[Psi log pi(a|s)] - c_e H`` (``+ c_v L_V`` when the baseline is learned)."""
    log_prob, entropy = policy.log_prob_entropy(batch.obs, batch.actions, batch.masks)
    weights = normalize(batch.advantages) if config.normalize_returns else batch.advantages
    loss, metrics = policy_gradient_loss(log_prob, weights)
    ent_loss, ent_metrics = entropy_bonus(entropy)
    loss = loss + config.ent_coef * ent_loss
    if policy.has_critic:
        v_loss, v_metrics = value_loss(policy.value(batch.obs), batch.returns)
        loss = loss + config.vf_coef * v_loss
        metrics.update(v_metrics)
    return loss, {**metrics, **ent_metrics}


# ============================================================================ one update
def learn(
    policy: ActorCritic,
    optimizer: Adam,
    rollout: Rollout,
    config: ReinforceConfig,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """REINFORCE's part of each update of :func:`rlx.core.on_policy.train_on_policy`: Monte
    Carlo returns and baseline-subtracted weights, then one policy-gradient step (and the
    baseline's regression); ``approx_kl`` between the policy before and after it."""
    batch = monte_carlo_batch(rollout.buffer, policy, rollout.last_obs, config)
    loss, loss_metrics = reinforce_loss(policy, batch, config)
    metrics: dict[str, Any] = loss_metrics  # tensors, and the explained variance (a float)
    metrics[M.GRAD_NORM] = gradient_step(optimizer, loss, optimizer.params, config.max_grad_norm)
    metrics[M.APPROX_KL] = policy_shift(policy, batch)
    if policy.has_critic:
        metrics[M.EXPLAINED_VARIANCE] = batch.explained_variance
    return metrics


def optimizer(policy: ActorCritic, config: ReinforceConfig) -> Adam:
    """Adam over the policy (and the learned baseline), at ``learning_rate``."""
    return Adam(policy.parameters(), config.learning_rate)


METHOD = OnPolicyMethod(
    name="reinforce",
    optimizer=optimizer,
    learn=learn,
    rollout_steps="max_steps",
    whole_episodes=True,
    critic=lambda config: config.baseline == "learned",
)


def train(config: ReinforceConfig, env: Any, run: RunHandle) -> PolicyAgent:
    """Train REINFORCE on ``env`` inside an open :class:`rlx.runs.Run`; returns the agent."""
    return train_on_policy(METHOD, config, env, run)


# ============================================================================ load, register
def load(config: ReinforceConfig, env_id: str, state: dict) -> PolicyAgent:
    """The trained policy of a checkpoint (``rlx.load(run_dir)``)."""
    return PolicyAgent("reinforce", config, env_id, state["agent"])


registry.register(
    registry.Algorithm(
        name="reinforce",
        config=ReinforceConfig,
        train=train,
        load=load,
        presets={},
    )
)
