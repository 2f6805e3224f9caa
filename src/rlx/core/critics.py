"""Q critics for continuous actions: ``K`` MLPs ``Q_k(s, a)`` evaluated as one computation.

SAC and TD3 keep twin critics and use their minimum against overestimation. Called as two
modules, every layer costs two small matrix products and twice the Python and dispatch
overhead, which on small networks is most of the time. :class:`EnsembleQ` stacks the
critics' weights layer by layer, ``W_l`` of shape ``[K, in, out]``, and computes every layer
for all critics with one batched product,

    h_l = relu(h_{l-1} @ W_l + b_l)     (torch.baddbmm over the K critics)

so the twins cost one forward and one backward pass and one optimizer step over one set of
parameters. The last layer maps to one number per critic, ``Q_k = h_k . w_k + b_k``: a
product and a sum over the hidden units, since a batched matrix product with one output
column runs far below the speed of its arithmetic on the CPU. Critic ``k``'s numbers are
those of an ordinary MLP with weights ``W_l[k]``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class EnsembleQ(nn.Module):
    """``K`` critics ``Q_k(s, a)``: MLPs on ``concat(s, a)``, ReLU between layers.

    ``forward(obs [B, obs_dim], action [B, act_dim]) -> [K, B]``. Weights start as
    PyTorch's ``nn.Linear`` default, ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, drawn
    independently per critic (the twins must differ for their minimum to mean anything).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden_sizes: Sequence[int] = (256, 256),
        n_critics: int = 2,
    ) -> None:
        super().__init__()
        if n_critics < 1:
            raise ValueError(f"n_critics={n_critics} must be >= 1.")
        sizes = [obs_dim + act_dim, *hidden_sizes, 1]
        self.n_critics = n_critics
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in itertools.pairwise(sizes):
            bound = 1.0 / math.sqrt(fan_in)
            self.weights.append(
                nn.Parameter(torch.empty(n_critics, fan_in, fan_out).uniform_(-bound, bound))
            )
            self.biases.append(
                nn.Parameter(torch.empty(n_critics, 1, fan_out).uniform_(-bound, bound))
            )
        # a plain list of the same parameters: ParameterList indexing costs more than the
        # arithmetic on small layers (a deepcopy remaps it to the copy's parameters)
        self._layers = list(zip(self.weights, self.biases, strict=True))

    def forward(
        self, obs: Tensor, action: Tensor, *, frozen: bool = False, first: int | None = None
    ) -> Tensor:
        """``[Q_1(s, a), ..., Q_K(s, a)]`` as ``[K, B]``.

        ``frozen=True`` uses the weights without gradient (an actor's loss must move the
        actor, not the critics: no weight gradients are computed at all); ``first=k`` evaluates
        only the first ``k`` critics (TD3's actor follows ``Q_1``).
        """
        x = torch.cat([obs, action], dim=-1)
        k = self.n_critics if first is None else first
        h = x.expand(k, *x.shape)  # every critic reads the same input, no copy
        last = len(self._layers) - 1
        for i, (w, b) in enumerate(self._layers):
            if first is not None:
                w, b = w[:k], b[:k]
            if frozen:
                w, b = w.detach(), b.detach()
            if i < last:
                h = F.relu(torch.baddbmm(b, h, w))
            else:  # w: [k, hidden, 1], b: [k, 1, 1]  ->  Q: [k, B]
                h = (h * w.transpose(1, 2)).sum(-1) + b.squeeze(-1)
        return h
