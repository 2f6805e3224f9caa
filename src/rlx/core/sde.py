"""Generalized state-dependent exploration (gSDE) for ``Box`` actions, as pure functions.

Raffin et al., 2021, "Smooth exploration for robotic reinforcement learning"; defined as
Stable-Baselines3's ``StateDependentNoiseDistribution`` (``full_std``):

    z(s)      the policy network's last hidden layer (its latent features); detached for
              PPO and A2C (the noise never trains the features, only the mean does), not
              for SAC (``learn_features``, as SB3's SAC actor sets it: the entropy bonus can
              then widen the noise through the features too, not through sigma alone)
    theta_eps ~ N(0, sigma**2), a [latent_dim, act_dim] exploration matrix, one sigma_jk per
              entry: sigma = exp(log_std), or expln(log_std) with ``use_expln``
    eps(s)    = z(s) theta_eps                     the action noise, a function of the state
    a         = mu(s) + eps(s)

For a fixed ``theta_eps`` the noise is a deterministic function of the state, so nearby
states get nearby actions: exploration is smooth in time instead of white noise on every
step. ``theta_eps`` is drawn again at the start of every rollout (on-policy) or collection
phase (off-policy), and every ``sde_sample_freq`` steps within it when that is > 0. Over
the draws of ``theta_eps`` each action dim is Gaussian,

    a_k ~ N(mu_k(s), v_k(s)),   v_k(s) = sum_j z_j(s)**2 sigma_jk**2

which gives the log-probabilities and entropies the losses use (:func:`sde_log_prob_entropy`;
``SDE_EPSILON`` is added to ``v`` so that a state whose features are all 0 keeps a finite
log-probability). SAC squashes ``a`` with tanh and corrects its log-probability as usual
(:func:`rlx.core.continuous.squashed_sde_sample`). Deterministic actions are ``mu(s)``.

One exploration matrix per env copy (``[N, latent_dim, act_dim]``), as SB3 does, so that the
copies explore independently; a batch of another size draws its own matrices
(:func:`sde_noise` takes either a single matrix or one per row).
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import numpy as np
import torch
from torch import Tensor

from rlx.errors import ConfigError

SDE_EPSILON = 1e-6
"""Added to the variance ``sum_j z_j**2 sigma_jk**2`` (SB3's epsilon)."""
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

ArrayT = TypeVar("ArrayT", np.ndarray, Tensor)


def expln(log_std: Tensor) -> Tensor:
    """gSDE's ``expln``: ``exp(x)`` for ``x <= 0``, ``log1p(x) + 1`` for ``x > 0``.

    Equal to ``exp`` below 0 and continuous with a continuous slope at 0, it grows only
    logarithmically above, so the noise's scale cannot run away (each branch is evaluated on
    its own side only, so neither gives a NaN gradient)."""
    below = torch.exp(log_std.clamp(max=0.0))
    above = torch.log1p(log_std.clamp(min=0.0)) + 1.0
    return torch.where(log_std <= 0, below, above)


def sde_std(log_std: Tensor, use_expln: bool = False) -> Tensor:
    """``sigma`` ``[latent_dim, act_dim]``: ``exp(log_std)``, or :func:`expln` of it."""
    return expln(log_std) if use_expln else log_std.exp()


def sde_scale(
    latent: Tensor, log_std: Tensor, use_expln: bool = False, learn_features: bool = False
) -> Tensor:
    """The per-dim standard deviation ``sqrt(sum_j z_j**2 sigma_jk**2 + SDE_EPSILON)``
    ``[B, act_dim]`` of ``latent`` ``z`` ``[B, latent_dim]``, detached from the features
    unless ``learn_features``."""
    z = latent if learn_features else latent.detach()
    variance = z.square() @ sde_std(log_std, use_expln).square()
    return (variance + SDE_EPSILON).sqrt()


def sde_log_prob_entropy(
    mean: Tensor, latent: Tensor, log_std: Tensor, actions: Tensor, use_expln: bool = False
) -> tuple[Tensor, Tensor]:
    """``log pi(a|s)`` and ``H(pi(.|s))``, ``[B]`` each, of ``N(mu(s), diag(v(s)))`` with
    ``v_k(s) = sum_j z_j(s)**2 sigma_jk**2`` (:func:`sde_scale`):

        log pi(a|s) = sum_k [-(a_k - mu_k)**2 / (2 v_k) - log(v_k) / 2 - log(2 pi) / 2]
        H           = sum_k [log(v_k) / 2 + (1 + log(2 pi)) / 2]

    The gradient reaches ``log_std`` through ``v`` and the network through ``mu`` only
    (``z`` is detached)."""
    scale = sde_scale(latent, log_std, use_expln)
    log_scale = scale.log()
    z = (actions - mean) / scale
    log_prob = (-0.5 * z.square() - log_scale - HALF_LOG_2PI).sum(-1)
    entropy = (log_scale + 0.5 + HALF_LOG_2PI).sum(-1)
    return log_prob, entropy


def sde_noise(latent: ArrayT, matrices: ArrayT) -> ArrayT:
    """The action noise ``eps(s) = z(s) theta_eps`` ``[B, act_dim]`` for ``latent``
    ``[B, latent_dim]``: one matrix ``[latent_dim, act_dim]`` for every row, or one per row
    ``[B, latent_dim, act_dim]``. numpy arrays or tensors (detach ``z`` before, for a
    gradient that reaches ``sigma`` only)."""
    if matrices.ndim == 2:
        return latent @ matrices
    return (latent[:, None, :] @ matrices)[:, 0, :]


def sample_exploration_matrices(
    log_std: Tensor, count: int, rng: np.random.Generator, use_expln: bool = False
) -> np.ndarray:
    """``count`` exploration matrices ``theta_eps = sigma * xi``, ``xi ~ N(0, 1)`` from
    ``rng``, as float32 ``[count, latent_dim, act_dim]`` (for acting, no gradient)."""
    with torch.no_grad():
        std = sde_std(log_std, use_expln).cpu().numpy()
    return (std * rng.standard_normal((count, *std.shape))).astype(np.float32)


def check_sde_fields(config: Any) -> None:
    """``sde_sample_freq`` is -1 or >= 1; ``sde_sample_freq`` and ``use_expln`` are gSDE's and
    ask for ``use_sde``. One sentence each, as :class:`~rlx.errors.ConfigError`."""
    name = type(config).__name__
    freq = config.sde_sample_freq
    if freq == 0 or freq < -1:
        raise ConfigError(
            f"{name}: sde_sample_freq={freq} is not valid; use -1 (a new exploration matrix "
            "only at the start of each collection) or a whole number >= 1 (also every that "
            "many steps of each env copy)."
        )
    if not config.use_sde:
        for field, default in (("sde_sample_freq", -1), ("use_expln", False)):
            if getattr(config, field) != default:
                raise ConfigError(
                    f"{name}: {field}={getattr(config, field)} shapes state-dependent "
                    f"exploration, which is off; set use_sde=True too, or leave {field} at "
                    f"{default}."
                )


def refuse_discrete_sde(action_kind: str, algo: str, env_id: str, space: Any) -> None:
    """gSDE perturbs continuous actions: :class:`~rlx.errors.ConfigError` for any action
    space but a ``Box`` (``action_kind`` is :func:`rlx.core.policies.action_kind`'s)."""
    if action_kind != "gaussian":
        raise ConfigError(
            f"{algo}: use_sde=True (state-dependent exploration) needs continuous (Box) "
            f"actions, but {env_id} has {space}; set use_sde=False for this env."
        )


__all__ = [
    "SDE_EPSILON",
    "check_sde_fields",
    "expln",
    "refuse_discrete_sde",
    "sample_exploration_matrices",
    "sde_log_prob_entropy",
    "sde_noise",
    "sde_scale",
    "sde_std",
]
