"""A collected rollout as training samples: ``V_old(s)`` and ``log pi_old(a|s)`` of every
step in one batched pass, GAE advantages and value targets, and the valid steps as flat
tensors the on-policy updates (REINFORCE, A2C, PPO) cut into minibatches.

    A_t = sum_k (gamma lambda)^k delta_{t+k},  delta_t = r_t + gamma V(s_{t+1}) - V(s_t)
    target_t = A_t + V(s_t)

Under Gymnasium's NEXT_STEP autoreset, the step after a done only resets that copy: its row is
marked ``valid=False`` and left out of every loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from rlx.core.advantages import explained_variance, gae
from rlx.core.buffers import RolloutBuffer
from rlx.core.policies import ActorCritic


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
