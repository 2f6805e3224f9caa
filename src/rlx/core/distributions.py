"""Action distributions with log-probabilities and entropies, for policy-gradient agents.

- :func:`categorical`: ``pi(a|s) = softmax(logits)_a`` for discrete actions.
- :func:`diag_gaussian`: ``N(mu, diag(sigma**2))``; log-prob and entropy summed over action dims.
- :class:`TanhGaussian`: ``a = low + (tanh(u) + 1) / 2 * (high - low)``, ``u ~ N(mu, sigma**2)``
  (SAC's squashed policy), with the change-of-variables correction in its log-prob.

The first two are torch's own distributions (argument validation off: it costs more than the
sampling on small batches); all three offer ``sample``, ``log_prob``, ``entropy`` and ``mode``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.distributions import Categorical, Independent, Normal

LOG_2 = math.log(2.0)


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
