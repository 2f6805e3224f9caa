"""Returns and advantages of on-policy rollouts, as small pure functions on ``[T, N]`` arrays
(:func:`masked_gae`: on padded ``[B, T]`` sequences, such as a language model's completions).

A rollout is ``T`` steps of ``N`` env copies, time first. Every function keeps the two ways an
episode ends apart (STYLE.md, rule 5):

- ``terminated[t]``: the episode really ended, nothing follows, so nothing is bootstrapped;
- ``truncated[t]``: a time limit cut it; the state had a future, so the return bootstraps from
  ``V`` of the *true final observation* (``next_values[t]``), not from the reset one.

Either way the sum stops at step ``t``: what follows in that column is another episode.
``next_values[t]`` is ``V(s_{t+1})`` of the observation that step ``t`` produced: the next state
inside an episode, the true final observation at a done step, and the bootstrap at ``T - 1``.
The sweeps run over ``T`` in Python with numpy operations over the ``N`` copies; ``T`` is at
most a few hundred per update, so this costs well under a millisecond.
"""

from __future__ import annotations

import numpy as np


def discounted_returns(
    rewards: np.ndarray,
    gamma: float,
    *,
    terminated: np.ndarray | None = None,
    truncated: np.ndarray | None = None,
    next_values: np.ndarray | None = None,
) -> np.ndarray:
    """Monte Carlo returns by the reverse sweep ``G_t = r_t + gamma * G_{t+1}``, per env copy.

    ``G_t = r_t + gamma * G_{t+1}`` inside an episode; at a terminated step ``G_t = r_t``; at a
    truncated step, or at the last step ``T - 1`` of an unfinished episode,
    ``G_t = r_t + gamma * next_values_t`` (pass zeros to treat a time limit as the end).

    All arguments are ``[T, N]`` (``[T]`` works too); returns float64 ``[T, N]``. Left out,
    ``terminated`` and ``truncated`` are all False and ``next_values`` all 0: the returns of
    one whole episode, ``G_T = 0``.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    no_end = np.zeros(rewards.shape, dtype=bool)
    rewards, terminated, truncated, next_values = _check(
        rewards,
        no_end if terminated is None else terminated,
        no_end if truncated is None else truncated,
        np.zeros(rewards.shape) if next_values is None else next_values,
    )
    returns = np.empty_like(rewards)
    following = next_values[-1]  # the bootstrap of an episode still running at T - 1
    for t in range(rewards.shape[0] - 1, -1, -1):
        # a time limit bootstraps from the final observation; a termination from nothing
        tail = np.where(truncated[t], next_values[t], following)
        returns[t] = rewards[t] + gamma * np.where(terminated[t], 0.0, tail)
        following = returns[t]
    return returns


def td_residuals(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    gamma: float,
) -> np.ndarray:
    """The TD advantage ``delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)``.

    A truncated step bootstraps like any other, from its true final observation's value.
    """
    rewards, values, next_values = (
        np.asarray(x, dtype=np.float64) for x in (rewards, values, next_values)
    )
    not_terminal = 1.0 - np.asarray(terminated, dtype=np.float64)
    return rewards + gamma * not_terminal * next_values - values


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    gamma: float,
    lam: float,
) -> np.ndarray:
    """Generalised advantage estimation, ``A_t = sum_l (gamma lambda)^l delta_{t+l}``.

    The sum runs to the end of the episode (a terminated or truncated step) or of the rollout,
    computed by the reverse sweep ``A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}``
    with ``delta`` from :func:`td_residuals`. ``lam = 0`` gives the TD advantage ``delta_t``;
    ``lam = 1`` gives the Monte Carlo return minus ``V(s_t)`` (:func:`discounted_returns`
    minus ``values``). The value targets are ``advantages + values``.

    All arguments are ``[T, N]`` (``[T]`` works too); returns float64 ``[T, N]``.
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam={lam} must be in [0, 1].")
    rewards, terminated, truncated, next_values = _check(
        rewards, terminated, truncated, next_values
    )
    delta = td_residuals(rewards, values, next_values, terminated, gamma)
    carry = gamma * lam * (1.0 - (terminated | truncated))
    advantages = np.empty_like(delta)
    following = np.zeros_like(delta[0])
    for t in range(delta.shape[0] - 1, -1, -1):
        following = delta[t] + carry[t] * following
        advantages[t] = following
    return advantages


def masked_gae(
    rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, gamma: float, lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gae` over padded sequences: ``[B, T]`` rows, ``mask`` True on each row's steps.

    Each row's steps (one contiguous run of True, e.g. a completion's tokens) are one episode
    that terminates at its last step, so the value after it is 0:
    ``delta_t = r_t + gamma V_{t+1} - V_t`` with ``V_{T+1} = 0``, and
    ``A_t = sum_l (gamma lambda)^l delta_{t+l}`` to the row's last step. Padding is cut off by
    the same termination and contributes nothing.

    Returns ``(advantages, returns = advantages + values)``, float64 ``[B, T]``, 0 off the mask.
    """
    mask = np.asarray(mask, dtype=bool)
    rewards = np.asarray(rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    shapes = {rewards.shape, values.shape, mask.shape}
    if len(shapes) != 1 or mask.ndim != 2:
        raise ValueError(
            f"rewards, values and mask must share one shape [B, T], got {sorted(shapes)}."
        )
    rewards, values = np.where(mask, rewards, 0.0), np.where(mask, values, 0.0)
    # a step whose successor is not in the row ends the episode: nothing is bootstrapped past it
    ends = ~np.concatenate([mask[:, 1:], np.zeros_like(mask[:, :1])], axis=1)
    next_values = np.concatenate([values[:, 1:], np.zeros_like(values[:, :1])], axis=1)
    terminated = ends | ~mask  # padding: one-step episodes of its own, zeroed below
    advantages = gae(
        rewards.T, values.T, next_values.T, terminated.T, np.zeros_like(mask.T), gamma, lam
    ).T
    advantages = np.where(mask, advantages, 0.0)
    return advantages, np.where(mask, advantages + values, 0.0)


def explained_variance(predicted: np.ndarray, target: np.ndarray) -> float:
    """``1 - Var[target - predicted] / Var[target]``: 1 is perfect, 0 no better than the mean.

    0 when the targets do not vary: there is nothing to explain, and a NaN would stop the run
    (the run folder treats a NaN metric as a diverged run).
    """
    predicted, target = np.asarray(predicted, np.float64), np.asarray(target, np.float64)
    var = target.var()
    if var == 0.0:
        return 0.0
    return float(1.0 - (target - predicted).var() / var)


def _check(
    rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, next_values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rewards = np.asarray(rewards, dtype=np.float64)
    terminated = np.asarray(terminated, dtype=bool)
    truncated = np.asarray(truncated, dtype=bool)
    next_values = np.asarray(next_values, dtype=np.float64)
    shapes = {x.shape for x in (rewards, terminated, truncated, next_values)}
    if len(shapes) != 1 or rewards.ndim not in (1, 2) or rewards.shape[0] == 0:
        raise ValueError(
            "rewards, terminated, truncated and next_values must share one shape [T, N] "
            f"(or [T]) with T >= 1, got {sorted(shapes)}."
        )
    return rewards, terminated, truncated, next_values
