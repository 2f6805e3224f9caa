"""The math of off-policy continuous control (SAC, TD3), as small pure functions.

- :func:`squashed_gaussian_sample` draws SAC's tanh-squashed Gaussian action with its
  log-probability (change-of-variables correction included); :func:`squashed_sde_sample` the
  same with state-dependent exploration (gSDE, :mod:`rlx.core.sde`).
- :func:`box_action_bounds` checks the action space at the door; :class:`ActionScaler` maps
  the policy's ``[-1, 1]`` box onto the env's ``[low, high]`` and back.
- :func:`sac_target` and :func:`td3_target` build the critics' regression targets;
  :func:`smoothed_target_action` is TD3's target policy smoothing.
- :func:`twin_critic_loss` regresses every critic of an ensemble onto one target;
  :func:`sac_actor_loss`, :func:`temperature_loss` and :func:`deterministic_actor_loss` are
  the actor and entropy-temperature objectives. Losses return ``(loss, metrics)``.
- :func:`polyak_update` moves target networks toward the online ones.

Critic values come as one ``[K, B]`` tensor for ``K`` critics (twins: ``K = 2``), the shape
:class:`rlx.core.critics.EnsembleQ` produces; ``reward``, ``terminated`` and ``gamma`` are
``[B]`` (``gamma`` may be a number). As in :mod:`rlx.core.targets`, truncation is not an
argument: a time-limited transition bootstraps from its true final observation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from rlx import metrics as M
from rlx.core.sde import sde_noise, sde_scale, sde_std
from rlx.core.targets import td_target
from rlx.errors import EnvError

LOG_2 = math.log(2.0)
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


# ---------------------------------------------------------------------------- action spaces
def box_action_bounds(
    space: Any, algo: str, env_id: str, instead: str = "DQN or PPO"
) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` of a 1-d ``Box`` action space with finite bounds.

    A ``Discrete`` space (or any non-Box) raises :class:`EnvError` naming ``instead``;
    infinite bounds raise too: a squashed (tanh) policy needs a box to squash into.
    """
    import gymnasium as gym

    if not isinstance(space, gym.spaces.Box):
        raise EnvError(
            f"{algo} needs continuous (Box) actions, but {env_id} has {space}; "
            f"use {instead} for discrete actions."
        )
    if len(space.shape) != 1:
        raise EnvError(
            f"{algo} needs 1-d Box actions, but {env_id} has {space}; flatten the action "
            "space with a wrapper (gymnasium.wrappers.FlattenObservation's action twin)."
        )
    low = np.asarray(space.low, dtype=np.float64)
    high = np.asarray(space.high, dtype=np.float64)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise EnvError(
            f"{algo} squashes actions into the env's bounds, but {env_id} has unbounded "
            f"actions {space}; give the env finite bounds (e.g. a gymnasium.ActionWrapper "
            "whose action_space is Box(-1, 1, shape) and whose action() rescales to what "
            "the env expects)."
        )
    if (high <= low).any():
        raise EnvError(f"{env_id} has an empty action box {space}: every high must exceed low.")
    return low, high


class ActionScaler:
    """Maps the policy's box ``[-1, 1]^d`` onto the env's ``[low, high]`` and back.

    ``a_env = c + s * a`` with centre ``c = (high + low) / 2`` and half-width
    ``s = (high - low) / 2``. Replay stores and critics see the policy's ``[-1, 1]`` actions,
    so exploration noise, smoothing noise and the entropy target are in the same units for
    every env.
    """

    def __init__(
        self, low: Sequence[float] | np.ndarray, high: Sequence[float] | np.ndarray
    ) -> None:
        self.low = np.asarray(low, dtype=np.float32)
        self.high = np.asarray(high, dtype=np.float32)
        self.center = (self.high + self.low) / 2
        self.scale = (self.high - self.low) / 2

    def to_env(self, action: np.ndarray) -> np.ndarray:
        """``c + s * a``, clipped into ``[low, high]`` against rounding."""
        return np.clip(self.center + self.scale * action, self.low, self.high)

    def from_env(self, action: np.ndarray) -> np.ndarray:
        """``(a_env - c) / s``: an env action in the policy's ``[-1, 1]`` box."""
        return ((np.asarray(action, dtype=np.float32) - self.center) / self.scale).astype(
            np.float32
        )


# ---------------------------------------------------------------------------- squashed Gaussian
def squashed_gaussian_sample(
    mean: Tensor, log_std: Tensor, noise: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """A reparameterised action of SAC's policy in ``[-1, 1]^d`` and its log-probability.

    ``u = mu + sigma * eps`` with ``eps ~ N(0, I)`` (or the given ``noise``), ``a = tanh(u)``,
    and by the change of variables

        log pi(a|s) = sum_i [log N(u_i; mu_i, sigma_i**2) - log(1 - tanh(u_i)**2)]

    with ``log(1 - tanh(u)**2) = 2 (log 2 - u - softplus(-2u))``, stable for large ``|u|``.
    The numbers of :class:`rlx.core.distributions.TanhGaussian` on ``[-1, 1]``, written out:
    building that object costs more than this arithmetic on a minibatch, and SAC samples
    twice per gradient step.
    """
    if noise is None:
        noise = torch.randn_like(mean)
    u = mean + log_std.exp() * noise
    log_normal = -0.5 * noise.square() - log_std - HALF_LOG_2PI
    log_det = 2.0 * (LOG_2 - u - F.softplus(-2.0 * u))
    return torch.tanh(u), (log_normal - log_det).sum(dim=-1)


def squashed_sde_sample(
    mean: Tensor,
    latent: Tensor,
    log_std: Tensor,
    noise: Tensor | None = None,
    use_expln: bool = False,
    learn_features: bool = True,
) -> tuple[Tensor, Tensor]:
    """SAC's action with state-dependent exploration (gSDE, :mod:`rlx.core.sde`), in
    ``[-1, 1]^d``, and its log-probability, reparameterised.

    ``theta = sigma * xi`` with ``xi ~ N(0, 1)`` ``[latent_dim, d]`` (or the given ``noise``)
    is one exploration matrix for the whole batch (SB3 draws one per gradient step);
    ``u = mu(s) + z(s) theta``, ``a = tanh(u)``, and

        log pi(a|s) = sum_k [log N(u_k; mu_k, v_k) - log(1 - tanh(u_k)**2)],
        v_k(s) = sum_j z_j(s)**2 sigma_jk**2

    The gradient reaches ``sigma`` through ``theta`` and ``v``, the network through ``mu``
    and, with ``learn_features`` (SB3's SAC: on), through ``z`` in ``theta``'s noise and
    ``v`` too; off, ``z`` is detached.
    """
    std = sde_std(log_std, use_expln)
    if noise is None:
        noise = torch.randn_like(std)
    z = latent if learn_features else latent.detach()
    eps = sde_noise(z, std * noise)
    scale = sde_scale(latent, log_std, use_expln, learn_features)
    u = mean + eps
    log_normal = -0.5 * (eps / scale).square() - scale.log() - HALF_LOG_2PI
    log_det = 2.0 * (LOG_2 - u - F.softplus(-2.0 * u))
    return torch.tanh(u), (log_normal - log_det).sum(dim=-1)


# ---------------------------------------------------------------------------- targets
def sac_target(
    reward: Tensor,
    gamma: Any,
    terminated: Tensor,
    next_q: Tensor,
    next_log_prob: Tensor,
    alpha: Any,
) -> Tensor:
    """Soft Q target ``y = r + gamma (1 - terminated) (min_k Q_k'(s', a') - alpha log pi(a'|s'))``.

    ``next_q`` is ``[K, B]``: the target critics at ``(s', a')`` with ``a' ~ pi(.|s')``;
    ``next_log_prob`` is ``log pi(a'|s')`` ``[B]`` (Haarnoja et al., 2018, with the clipped
    double-Q minimum of Fujimoto et al., 2018).
    """
    _check_ensemble(next_q, reward)
    _check_same("next_log_prob", next_log_prob, reward)
    soft_value = next_q.amin(dim=0) - alpha * next_log_prob
    return td_target(reward, gamma, soft_value, terminated)


def td3_target(reward: Tensor, gamma: Any, terminated: Tensor, next_q: Tensor) -> Tensor:
    """Clipped double-Q target ``y = r + gamma (1 - terminated) min_k Q_k'(s', a~')``.

    ``next_q`` is ``[K, B]``: the target critics at ``s'`` and the smoothed target action
    ``a~'`` (:func:`smoothed_target_action`).
    """
    _check_ensemble(next_q, reward)
    return td_target(reward, gamma, next_q.amin(dim=0), terminated)


def smoothed_target_action(
    target_action: Tensor, noise: Tensor, noise_clip: float, low: float = -1.0, high: float = 1.0
) -> Tensor:
    """TD3's target policy smoothing ``a~' = clip(mu'(s') + clip(eps, -c, c), low, high)``.

    ``noise`` is ``eps ~ N(0, sigma**2)``, drawn by the caller (so this stays pure);
    ``c = noise_clip``. Nearby actions then share a target value, which keeps the critic from
    fitting narrow peaks the deterministic actor would exploit.
    """
    _check_same("noise", noise, target_action)
    return (target_action + noise.clamp(-noise_clip, noise_clip)).clamp(low, high)


# ---------------------------------------------------------------------------- losses
def twin_critic_loss(q: Tensor, target: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """``L(phi) = sum_k mean_B (Q_k(s, a) - y)**2``: every critic regresses on one target.

    ``q`` is ``[K, B]``, ``target`` ``[B]`` (no gradient flows into it). Metrics:
    ``critic_loss`` (the loss), ``q_mean`` (mean over critics and batch), ``td_error``
    (mean ``|y - Q_k|``).
    """
    _check_ensemble(q, target)
    error = q - target.detach()
    loss = error.square().mean(dim=1).sum()
    return loss, {
        M.CRITIC_LOSS: loss.detach(),
        M.Q_MEAN: q.detach().mean(),
        M.TD_ERROR: error.detach().abs().mean(),
    }


def sac_actor_loss(log_prob: Tensor, q_new: Tensor, alpha: Any) -> tuple[Tensor, dict[str, Tensor]]:
    """``L(theta) = mean_B [alpha log pi(a~|s) - min_k Q_k(s, a~)]``, ``a~ ~ pi(.|s)`` (rsample).

    ``q_new`` is ``[K, B]`` (critics held fixed), ``log_prob`` ``[B]``. Metrics:
    ``actor_loss`` and ``entropy`` (the estimate ``-mean log pi(a~|s)``).
    """
    _check_ensemble(q_new, log_prob)
    loss = (alpha * log_prob - q_new.amin(dim=0)).mean()
    return loss, {M.ACTOR_LOSS: loss.detach(), M.ENTROPY: -log_prob.detach().mean()}


def temperature_loss(
    log_alpha: Tensor, log_prob: Tensor, target_entropy: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """``L(alpha) = -mean_B [log alpha * (log pi(a~|s) + H_target)]``.

    Its gradient raises alpha when the policy's entropy ``-log pi`` falls below
    ``H_target`` (usually ``-dim(A)``) and lowers it above (Haarnoja et al., 2018b; written
    in ``log alpha`` as Stable-Baselines3 does, so alpha stays positive).
    """
    loss = -(log_alpha * (log_prob.detach() + target_entropy)).mean()
    return loss, {M.ALPHA: log_alpha.detach().exp()}


def deterministic_actor_loss(q_new: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """TD3's ``L(theta) = -mean_B Q_1(s, mu_theta(s))`` (the first critic, held fixed)."""
    loss = -q_new.mean()
    return loss, {M.ACTOR_LOSS: loss.detach()}


# ---------------------------------------------------------------------------- target nets
@torch.no_grad()
def polyak_update(target: Iterable[Tensor], online: Iterable[Tensor], tau: float) -> None:
    """``theta' <- tau theta + (1 - tau) theta'`` for every pair, in one foreach call."""
    torch._foreach_lerp_(list(target), list(online), tau)


# ---------------------------------------------------------------------------- checks
def _check_ensemble(q: Tensor, batch: Tensor) -> None:
    if q.ndim != 2 or q.shape[1:] != batch.shape:
        raise ValueError(
            f"expected critic values [K, B] and a batch [B], got {tuple(q.shape)} and "
            f"{tuple(batch.shape)}."
        )


def _check_same(name: str, x: Tensor, like: Tensor) -> None:
    if x.shape != like.shape:
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {tuple(like.shape)}.")
