"""Action distributions with log-probabilities and entropies, for policy-gradient agents.

- :func:`categorical`: ``pi(a|s) = softmax(logits)_a`` for discrete actions.
- :func:`diag_gaussian`: ``N(mu, diag(sigma**2))``; log-prob and entropy summed over action dims.
- :class:`TanhGaussian`: ``a = low + (tanh(u) + 1) / 2 * (high - low)``, ``u ~ N(mu, sigma**2)``
  (SAC's squashed policy), with the change-of-variables correction in its log-prob.

The first two are torch's own distributions (argument validation off: it costs more than the
sampling on small batches); all three offer ``sample``, ``log_prob``, ``entropy`` and ``mode``.

The actor-critic's policies (:class:`rlx.core.policies.ActorCritic`) take their
log-probabilities and entropies from the ``*_log_prob_entropy`` functions below, the formulas
written out (a distribution object costs more to build than this arithmetic on a minibatch):

- :func:`categorical_log_prob_entropy`: ``Discrete(n)``;
- :func:`factored_categorical_log_prob_entropy`: ``MultiDiscrete``, one softmax per entry;
- :func:`bernoulli_log_prob_entropy`: ``MultiBinary``, one sigmoid per entry;
- :func:`gaussian_log_prob_entropy`: a ``Box``, the diagonal Gaussian above.

State-dependent exploration (gSDE) for ``Box`` actions, whose Gaussian's variance depends on
the state's features, is :mod:`rlx.core.sde`'s.

A factored policy's entries are independent given the state, so
``log pi(a|s) = sum_i log pi_i(a_i|s)`` and ``H(pi) = sum_i H(pi_i)``. Invalid actions are
masked in the logits (:func:`mask_logits`) before any of it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.distributions import Categorical, Independent, Normal

LOG_2 = math.log(2.0)
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
MASKED_LOGIT = -1e8
"""The logit of an invalid action: its probability ``exp(-1e8 - logsumexp)`` is exactly 0 in
float32, while every product stays finite (a logit of minus infinity would make the entropy's
``p log p``, and its gradient, NaN)."""


def categorical(logits: Tensor) -> Categorical:
    """``pi(a|s) = exp(logits_a) / sum_b exp(logits_b)``; entropy ``-sum_a pi_a log pi_a``."""
    return Categorical(logits=logits, validate_args=False)


def diag_gaussian(mean: Tensor, log_std: Tensor) -> Independent:
    """``N(mean, diag(exp(log_std)**2))`` over the last dim.

    ``log pi(a) = sum_i [-(a_i - mu_i)**2 / (2 sigma_i**2) - log sigma_i - log(2 pi) / 2]``,
    entropy ``sum_i [log sigma_i + (1 + log(2 pi)) / 2]``.
    """
    std = log_std.exp().expand_as(mean)
    return Independent(Normal(mean, std, validate_args=False), 1, validate_args=False)


class TanhGaussian:
    """A Gaussian squashed by tanh into ``[low, high]`` (SAC's policy distribution).

    With ``u ~ N(mu, sigma**2)``, ``a = c + s * tanh(u)`` where ``c = (high + low) / 2`` and
    ``s = (high - low) / 2``. By the change of variables,

        log pi(a) = log N(u; mu, sigma**2) - sum_i [log(1 - tanh(u_i)**2) + log s_i]

    computed stably as ``log(1 - tanh(u)**2) = 2 (log 2 - u - softplus(-2u))``. The entropy
    has no closed form; :meth:`entropy` is the Monte Carlo estimate ``-mean log pi(a)`` over
    reparameterised samples, so it is differentiable.
    """

    def __init__(
        self,
        mean: Tensor,
        log_std: Tensor,
        low: Tensor | float = -1.0,
        high: Tensor | float = 1.0,
    ) -> None:
        self.base = Normal(mean, log_std.exp().expand_as(mean), validate_args=False)
        low_t = torch.as_tensor(low, dtype=mean.dtype)
        high_t = torch.as_tensor(high, dtype=mean.dtype)
        self.center, self.scale = (high_t + low_t) / 2, (high_t - low_t) / 2

    def _squash(self, u: Tensor) -> Tensor:
        return self.center + self.scale * torch.tanh(u)

    def _log_prob_pre_tanh(self, u: Tensor) -> Tensor:
        log_det = 2.0 * (LOG_2 - u - F.softplus(-2.0 * u)) + torch.log(self.scale)
        return (self.base.log_prob(u) - log_det).sum(dim=-1)

    def rsample_with_log_prob(self) -> tuple[Tensor, Tensor]:
        """A reparameterised action and its log-prob (from ``u``, no ``atanh`` round trip)."""
        u = self.base.rsample()
        return self._squash(u), self._log_prob_pre_tanh(u)

    def sample(self) -> Tensor:
        with torch.no_grad():
            return self._squash(self.base.sample())

    def log_prob(self, action: Tensor, eps: float = 1e-6) -> Tensor:
        """``log pi(a)`` of a given action (``atanh`` of the action, clamped off +-1)."""
        y = ((action - self.center) / self.scale).clamp(-1.0 + eps, 1.0 - eps)
        return self._log_prob_pre_tanh(torch.atanh(y))

    def entropy(self, samples: int = 1) -> Tensor:
        """Monte Carlo estimate ``H = -E[log pi(a)]`` from ``samples`` reparameterised draws."""
        u = self.base.rsample((samples,))
        return -self._log_prob_pre_tanh(u).mean(dim=0)

    @property
    def mode(self) -> Tensor:
        """The deterministic action ``c + s * tanh(mu)`` (the squashed Gaussian mean)."""
        return self._squash(self.base.mean)


# ---------------------------------------------------------------------------- the policies' terms
def mask_logits(logits: Tensor, mask: Tensor | None) -> Tensor:
    """``logits`` with every invalid action (``mask`` False) at :data:`MASKED_LOGIT`, so that
    ``pi(a|s) = 0`` there and the valid actions share the probability; None: no mask."""
    return logits if mask is None else logits.masked_fill(~mask, MASKED_LOGIT)


def categorical_log_prob_entropy(logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
    """``log pi(a|s) = log_softmax(logits)_a`` and ``H = -sum_a pi_a log pi_a``, ``[B]`` each."""
    log_p = F.log_softmax(logits, dim=-1)
    log_prob = log_p.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    return log_prob, entropy


def factored_categorical_log_prob_entropy(
    logits: Tensor, actions: Tensor, nvec: tuple[int, ...]
) -> tuple[Tensor, Tensor]:
    """A ``MultiDiscrete(nvec)`` policy: one softmax per entry over its ``n_i`` logits.

    ``logits`` ``[B, sum(nvec)]`` hold the entries' logits side by side, ``actions`` ``[B, F]``
    the entries' values. ``log pi(a|s) = sum_i log_softmax(z_i)_{a_i}`` and
    ``H = sum_i -sum_k pi_ik log pi_ik``.
    """
    if len(set(nvec)) == 1:  # equal entries: one softmax over a [B, F, n] view
        log_p = F.log_softmax(logits.unflatten(-1, (len(nvec), nvec[0])), dim=-1)
        log_prob = log_p.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1).sum(-1)
        return log_prob, -(log_p.exp() * log_p).sum((-2, -1))
    terms = [
        categorical_log_prob_entropy(z, a)
        for z, a in zip(logits.split(list(nvec), dim=-1), actions.unbind(-1), strict=True)
    ]
    return sum(t[0] for t in terms), sum(t[1] for t in terms)  # type: ignore[return-value]


def bernoulli_log_prob_entropy(logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
    """A ``MultiBinary`` policy: entry ``i`` is 1 with probability ``p_i = sigmoid(z_i)``.

    ``log pi(a|s) = sum_i [a_i log p_i + (1 - a_i) log(1 - p_i)] = sum_i [a_i z_i - softplus(z_i)]``
    and ``H = sum_i -[p_i log p_i + (1 - p_i) log(1 - p_i)] = sum_i [softplus(z_i) - p_i z_i]``.
    """
    softplus = F.softplus(logits)
    log_prob = (actions * logits - softplus).sum(-1)
    entropy = (softplus - torch.sigmoid(logits) * logits).sum(-1)
    return log_prob, entropy


def gaussian_log_prob_entropy(
    mean: Tensor, log_std: Tensor, actions: Tensor
) -> tuple[Tensor, Tensor]:
    """``N(mu, diag(sigma**2))`` with a state-independent ``log sigma``:
    ``log pi(a|s) = sum_i [-(a_i - mu_i)**2 / (2 sigma_i**2) - log sigma_i - log(2 pi) / 2]``
    ``[B]`` and ``H = sum_i [log sigma_i + (1 + log(2 pi)) / 2]`` (a scalar: the same for every
    state)."""
    z = (actions - mean) * torch.exp(-log_std)
    log_prob = (-0.5 * z.square() - log_std - HALF_LOG_2PI).sum(-1)
    entropy = (log_std + 0.5 + HALF_LOG_2PI).sum()
    return log_prob, entropy
