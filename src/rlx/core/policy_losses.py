"""Policy-gradient losses as small pure functions: each returns ``(loss, metrics)``.

The metrics are 0-d tensors named from :mod:`rlx.diagnostics.metrics`, computed without
gradient; callers keep them as tensors inside the minibatch loop and read them once per update
(no host round trip per minibatch). Inputs are ``[B]`` tensors of one minibatch.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlx.diagnostics import metrics as M


def normalize(x: Tensor, eps: float = 1e-8) -> Tensor:
    """``(x - mean(x)) / (std(x) + eps)``: advantages at zero mean and unit std per batch."""
    return (x - x.mean()) / (x.std() + eps)


def approx_kl(log_ratio: Tensor) -> Tensor:
    """Mean KL between the old and the new policy from sampled actions, ``KL(old || new)``.

    ``KL ~ mean((r - 1) - log r)`` with ``r = pi_new(a|s) / pi_old(a|s)`` and ``a ~ pi_old``
    (Schulman's k3 estimator): unbiased, and every term is >= 0 with equality only at
    ``r = 1``, so it is exactly 0 for identical policies and positive otherwise.
    ``log_ratio`` is ``log pi_new(a|s) - log pi_old(a|s)``.
    """
    with torch.no_grad():
        return (torch.expm1(log_ratio) - log_ratio).mean()


def clipped_surrogate(
    log_prob: Tensor, old_log_prob: Tensor, advantages: Tensor, clip_eps: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO's clipped surrogate, ``L = -E_t[min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)]``.

    ``r_t = exp(log_new - log_old)`` (the ratio from log-probabilities, for stability). A sample
    is *clipped*, and contributes zero gradient, exactly when
    ``(A > 0 and r > 1 + eps) or (A < 0 and r < 1 - eps)``; otherwise its gradient is the
    unclipped ``-r_t A_t grad log pi / B``.

    Metrics: ``policy_loss``, ``clip_fraction`` (share of clipped samples) and ``approx_kl``
    (:func:`approx_kl` of this minibatch).
    """
    _same_shape(log_prob, old_log_prob, advantages)
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * advantages
    loss = -torch.min(unclipped, clipped).mean()
    with torch.no_grad():
        # min() picks the constant clipped term exactly when r A > clip(r) A, which is the
        # cheat sheet's (A > 0 and r > 1 + eps) or (A < 0 and r < 1 - eps), in one comparison
        was_clipped = unclipped > clipped
        metrics = {
            M.POLICY_LOSS: loss.detach(),
            M.CLIP_FRACTION: was_clipped.float().mean(),
            M.APPROX_KL: approx_kl(log_ratio),
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
) -> tuple[Tensor, dict[str, Tensor]]:
    """The critic's regression loss ``L_V = 1/2 E[(V(s) - R)^2]``.

    With ``clip_eps`` (PPO's optional value clipping) the new value may move at most
    ``clip_eps`` from the rollout's ``V_old`` before its error stops counting:
    ``L_V = 1/2 E[max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2)]``.
    """
    _same_shape(values, returns)
    squared = (values - returns).square()
    if clip_eps is not None:
        if old_values is None:
            raise ValueError("value clipping needs old_values, the values of the rollout.")
        moved = old_values + (values - old_values).clamp(-clip_eps, clip_eps)
        squared = torch.max(squared, (moved - returns).square())
    loss = 0.5 * squared.mean()
    return loss, {M.VALUE_LOSS: loss.detach()}


def entropy_bonus(entropy: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """``L_H = -E[H(pi(.|s))]``: minimising it (times ``c_e > 0``) keeps the policy exploring."""
    mean = entropy.mean()
    return -mean, {M.ENTROPY: mean.detach()}


def _same_shape(*tensors: Tensor) -> None:
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"expected [B] tensors of one shape, got {sorted(shapes)}.")
