"""TD targets as small pure functions, one formula each.

Every value-based agent builds its regression target here, so the subtle parts (termination
stops bootstrapping, truncation does not; Double DQN's argmax/value split; n-step windows that
stop at an episode's end) are written and tested once. The functions are shape-checked and
work on batches: ``reward``, ``terminated`` and ``gamma`` are ``[B]`` (``gamma`` may also be a
number), ``next_q`` is ``[B, A]``.

Truncation (a time limit) is not an argument of the one-step targets on purpose: a truncated
transition bootstraps exactly like an ordinary one, from the true final observation ``s'``.
Only ``terminated`` zeroes the bootstrap.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor


def td_target(reward: Any, gamma: Any, next_value: Any, terminated: Any) -> Any:
    """One-step TD target ``y = r + gamma * (1 - terminated) * V(s')``.

    Works on torch tensors and numpy arrays alike. ``gamma`` may be per sample (n-step
    discounts ``gamma**k``). A truncated transition passes ``terminated=False`` and so
    bootstraps from its final observation's value.
    """
    not_done = 1.0 - _as_float(terminated)
    return reward + gamma * not_done * next_value


def q_learning_target(
    reward: Tensor, gamma: Any, next_q_target: Tensor, terminated: Tensor
) -> Tensor:
    """DQN target ``y = r + gamma * (1 - terminated) * max_a' Q(s', a'; theta^-)``.

    ``next_q_target`` is ``[B, A]``: the target network's Q values at ``s'``.
    """
    _check_batch(reward, next_q_target)
    return td_target(reward, gamma, next_q_target.amax(dim=-1), terminated)


def mask_q(q: Tensor, masks: Tensor | None) -> Tensor:
    """``Q(s, .)`` with every invalid action (``masks`` False) at minus infinity, so that a max
    or an argmax over actions takes only the valid ones; None: no mask. A row without any
    valid action (a terminal state's, whose value the target does not use) stays as it is,
    so that its maximum stays finite."""
    if masks is None:
        return q
    legal = masks | ~masks.any(dim=-1, keepdim=True)
    return q.masked_fill(~legal, float("-inf"))


def double_q_target(
    reward: Tensor, gamma: Any, next_q_online: Tensor, next_q_target: Tensor, terminated: Tensor
) -> Tensor:
    """Double DQN target, argmax by the online net, value by the target net:

        y = r + gamma * (1 - terminated) * Q(s', argmax_a' Q(s', a'; theta); theta^-)

    The online network picks the action, the target network values it (van Hasselt et al.,
    2016), which removes most of the max operator's upward bias on noisy estimates.
    """
    _check_batch(reward, next_q_online)
    if next_q_online.shape != next_q_target.shape:
        raise ValueError(
            f"next_q_online {tuple(next_q_online.shape)} and next_q_target "
            f"{tuple(next_q_target.shape)} must have the same shape [B, A]."
        )
    best = next_q_online.argmax(dim=-1, keepdim=True)
    return td_target(reward, gamma, next_q_target.gather(-1, best).squeeze(-1), terminated)


def n_step_window(
    rewards: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    available: np.ndarray,
    gamma: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Truncated n-step returns over windows of consecutive transitions of one env.

    Row ``b`` holds the transitions ``t, t+1, ..., t+n-1`` that followed a sampled one
    (``[B, n]`` each); ``available[b]`` (``[B]``, >= 1) says how many of them exist yet. The
    window stops at the first transition that ends its episode (terminated or truncated) or at
    the last available one; with ``k`` the number of transitions used:

        G = sum_{j < k} gamma**j * r_{t+j},   target = G + gamma**k * (1 - terminated) * V(s_{t+k})

    Returns ``(G, k, terminated_at_end)``; the caller bootstraps from the ``next_obs`` of
    transition ``t+k-1`` with discount ``gamma**k``. A truncated end bootstraps (its
    ``terminated`` is False); a terminated end does not.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.ndim != 2:
        raise ValueError(f"rewards must be [B, n], got shape {rewards.shape}.")
    n = rewards.shape[1]
    done = np.logical_or(terminated, truncated)
    # transition j is used when j < available and no earlier transition in the window ended
    ended_before = np.concatenate(
        [np.zeros((rewards.shape[0], 1), dtype=bool), np.cumsum(done[:, :-1], axis=1) > 0], axis=1
    )
    used = ~ended_before & (np.arange(n)[None, :] < np.asarray(available)[:, None])
    k = used.sum(axis=1)
    G = (used * rewards * gamma ** np.arange(n)[None, :]).sum(axis=1)
    terminated_at_end = np.asarray(terminated)[np.arange(len(k)), k - 1]
    return G, k, terminated_at_end


def _as_float(x: Any) -> Any:
    if isinstance(x, Tensor):
        return x.to(torch.float32) if x.dtype == torch.bool else x
    return np.asarray(x, dtype=np.float64) if np.asarray(x).dtype == bool else x


def _check_batch(reward: Tensor, next_q: Tensor) -> None:
    if next_q.ndim != 2 or reward.shape != next_q.shape[:1]:
        raise ValueError(
            f"expected reward [B] and next Q values [B, A], got {tuple(reward.shape)} and "
            f"{tuple(next_q.shape)}."
        )
