"""Policy-gradient losses as small pure functions: each returns ``(loss, metrics)``.

The metrics are 0-d tensors named from :mod:`rlx.metrics`, computed without
gradient; callers keep them as tensors inside the minibatch loop and read them once per update
(no host round trip per minibatch).

Inputs are ``[B]`` tensors of one minibatch, one value per sample. With ``mask`` they are padded
``[B, T]`` tensors instead, one row per sequence (a language model's completion tokens, say),
and ``mask`` marks the real entries: every mean becomes :func:`masked_mean` over them, so
padding never counts, and a per-sequence ``[B]`` advantage is shared by all its row's entries.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlx import metrics as M

AGGREGATIONS = ("token", "sequence")
"""How a masked mean weighs the entries of padded rows: ``token`` every real entry the same,
``sequence`` every row the same (the mean of each row's real entries, then over rows)."""


def masked_mean(x: Tensor, mask: Tensor | None = None, aggregation: str = "token") -> Tensor:
    """The mean of ``x`` over the entries where ``mask`` is True.

    ``token``: ``sum_{b,t} m_bt x_bt / sum_{b,t} m_bt``; ``sequence``:
    ``(1/B) sum_b [sum_t m_bt x_bt / sum_t m_bt]``. Without a mask, the plain mean. A row (or
    a whole mask) without a True entry contributes 0, never a NaN.
    """
    if mask is None:
        return x.mean()
    weights = mask.to(x.dtype)
    if aggregation == "token":
        return (x * weights).sum() / weights.sum().clamp(min=1)
    if aggregation == "sequence":
        return ((x * weights).sum(-1) / weights.sum(-1).clamp(min=1)).mean()
    raise ValueError(f"aggregation={aggregation!r} must be one of {', '.join(AGGREGATIONS)}.")


def normalize(x: Tensor, eps: float = 1e-8) -> Tensor:
    """``(x - mean(x)) / (std(x) + eps)``: advantages at zero mean and unit std per batch."""
    return (x - x.mean()) / (x.std() + eps)


def k3(log_ratio: Tensor) -> Tensor:
    """Schulman's k3 terms ``(r - 1) - log r`` with ``log r = log_ratio = log q(x) - log p(x)``.

    Each term is >= 0, with equality only at ``r = 1``; their mean over samples ``x ~ p`` is an
    unbiased estimate of ``KL(p || q)``.
    """
    return torch.expm1(log_ratio) - log_ratio


def approx_kl(log_ratio: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean KL between the old and the new policy from sampled actions, ``KL(old || new)``.

    ``KL ~ mean((r - 1) - log r)`` with ``r = pi_new(a|s) / pi_old(a|s)`` and ``a ~ pi_old``
    (:func:`k3`): unbiased, and exactly 0 for identical policies, positive otherwise.
    ``log_ratio`` is ``log pi_new(a|s) - log pi_old(a|s)``; ``mask``: a per-token mean over the
    real entries of padded rows.
    """
    with torch.no_grad():
        return masked_mean(k3(log_ratio), mask)


def clipped_surrogate(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    clip_eps: float,
    *,
    clip_eps_high: float | None = None,
    mask: Tensor | None = None,
    aggregation: str = "token",
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO's clipped surrogate, ``L = -E_t[min(r_t A_t, clip(r_t, 1 - eps, 1 + eps_high) A_t)]``.

    ``r_t = exp(log_new - log_old)`` (the ratio from log-probabilities, for stability);
    ``eps_high`` is ``clip_eps`` unless ``clip_eps_high`` raises it (DAPO's clip-higher). A
    sample is *clipped*, and contributes zero gradient, exactly when
    ``(A > 0 and r > 1 + eps_high) or (A < 0 and r < 1 - eps)``; otherwise its gradient is the
    unclipped ``-r_t A_t grad log pi / B``.

    With ``mask`` the log-probabilities are padded ``[B, T]`` rows (tokens of ``B``
    sequences); ``advantages`` is ``[B, T]``, or ``[B]``, one per sequence shared by its
    tokens; ``E_t`` is :func:`masked_mean` with ``aggregation`` (``token`` or ``sequence``).

    Metrics: ``policy_loss``, ``clip_fraction`` (share of clipped samples or tokens) and
    ``approx_kl`` (:func:`approx_kl` of this minibatch).
    """
    _check_shapes(log_prob, old_log_prob, advantages, mask)
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    if mask is not None and advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + high) * advantages
    loss = -masked_mean(torch.min(unclipped, clipped), mask, aggregation)
    with torch.no_grad():
        # min() picks the constant clipped term exactly when r A > clip(r) A, which is
        # (A > 0 and r > 1 + eps_high) or (A < 0 and r < 1 - eps), in one comparison
        was_clipped = unclipped > clipped
        metrics = {
            M.POLICY_LOSS: loss.detach(),
            M.CLIP_FRACTION: masked_mean(was_clipped.float(), mask),
            M.APPROX_KL: approx_kl(log_ratio, mask),
        }
    return loss, metrics


def policy_gradient_loss(log_prob: Tensor, weights: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """The score-function loss ``L = -E_t[log pi(a_t|s_t) * Psi_t]``.

    Its gradient is the policy gradient ``-E[Psi_t grad log pi(a_t|s_t)]`` with ``Psi_t`` the
    return minus a baseline (REINFORCE) or an advantage (A2C); ``weights`` carry no gradient.
    """
    _same_shape(log_prob, weights)
    loss = -(log_prob * weights.detach()).mean()
    return loss, {M.POLICY_LOSS: loss.detach()}


def value_loss(
    values: Tensor,
    returns: Tensor,
    old_values: Tensor | None = None,
    clip_eps: float | None = None,
    *,
    mask: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The critic's regression loss ``L_V = 1/2 E[(V(s) - R)^2]``.

    With ``clip_eps`` (PPO's optional value clipping) the new value may move at most
    ``clip_eps`` from the rollout's ``V_old`` before its error stops counting:
    ``L_V = 1/2 E[max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2)]``. With
    ``mask``, ``E`` is the mean over the real entries of padded ``[B, T]`` rows.
    """
    if mask is None:
        _same_shape(values, returns)
    else:
        _same_padded_shape(mask, values, returns)
    squared = (values - returns).square()
    if clip_eps is not None:
        if old_values is None:
            raise ValueError("value clipping needs old_values, the values of the rollout.")
        moved = old_values + (values - old_values).clamp(-clip_eps, clip_eps)
        squared = torch.max(squared, (moved - returns).square())
    loss = 0.5 * masked_mean(squared, mask)
    return loss, {M.VALUE_LOSS: loss.detach()}


def entropy_bonus(entropy: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """``L_H = -E[H(pi(.|s))]``: minimising it (times ``c_e > 0``) keeps the policy exploring."""
    mean = entropy.mean()
    return -mean, {M.ENTROPY: mean.detach()}


def _check_shapes(
    log_prob: Tensor, old_log_prob: Tensor, advantages: Tensor, mask: Tensor | None
) -> None:
    if mask is None:
        _same_shape(log_prob, old_log_prob, advantages)
        return
    _same_padded_shape(mask, log_prob, old_log_prob)
    if advantages.shape not in (mask.shape, mask.shape[:1]):
        raise ValueError(
            f"advantages {tuple(advantages.shape)} must be [B, T] like the mask "
            f"{tuple(mask.shape)} or [B], one per sequence."
        )


def _same_shape(*tensors: Tensor) -> None:
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"expected [B] tensors of one shape, got {sorted(shapes)}.")


def _same_padded_shape(mask: Tensor, *tensors: Tensor) -> None:
    shapes = {tuple(t.shape) for t in (mask, *tensors)}
    if len(shapes) != 1 or mask.dim() != 2:
        raise ValueError(f"expected [B, T] tensors of the mask's shape, got {sorted(shapes)}.")
