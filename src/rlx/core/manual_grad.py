"""PPO's loss and its gradient written out by hand for a softmax policy over a tanh or ReLU
MLP with an MLP critic: no autograd graph.

On CartPole's full-batch update (256 samples, two 64-64 networks) autograd's graph building
and per-node dispatch were most of a 1.3 ms gradient step; the same arithmetic as plain
tensor operations under ``torch.no_grad()`` costs a fraction of that. The gradients equal
autograd's up to float32 rounding (``tests/agents/test_policy_math.py`` checks it).

:func:`supports` says whether a policy and config can take this path; the others go through
autograd (:func:`rlx.agents.ppo.ppo_loss`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from rlx.core.nets import MLP
from rlx.diagnostics import metrics as M


def supports(policy: Any, config: Any) -> bool:
    """A discrete policy with MLP actor and critic (tanh or ReLU), no value clipping."""
    return (
        policy.discrete
        and isinstance(policy.actor, MLP)
        and isinstance(policy.critic, MLP)
        and policy.actor.activation in _BACKWARD
        and policy.critic.activation is policy.actor.activation
        and getattr(config, "clip_value", None) is None
    )


class PreparedBatch:
    """What does not change between the epochs of one (mini)batch: the one-hot actions."""

    __slots__ = ("advantages", "obs", "old_log_probs", "onehot", "returns")

    def __init__(self, mb: Any, num_actions: int) -> None:
        self.obs = mb.obs
        self.onehot = torch.zeros(len(mb.actions), num_actions, dtype=mb.obs.dtype)
        self.onehot.scatter_(1, mb.actions.long().unsqueeze(-1), 1.0)
        self.old_log_probs = mb.log_probs
        self.advantages = mb.advantages
        self.returns = mb.returns


def _tanh_(x: Tensor) -> Tensor:
    # numpy's float32 tanh, in place: 6 us on a 256 x 64 batch against torch's 43 us here
    np.tanh(x.numpy(), out=x.numpy())
    return x


def _relu_(x: Tensor) -> Tensor:
    return x.clamp_(min=0.0)


def _tanh_backward(grad: Tensor, out: Tensor) -> Tensor:
    return torch.ops.aten.tanh_backward(grad, out)


def _relu_backward(grad: Tensor, out: Tensor) -> Tensor:
    return grad.mul_(out > 0)


_BACKWARD = {torch.tanh: _tanh_backward, torch.relu: _relu_backward}
_FORWARD = {torch.tanh: _tanh_, torch.relu: _relu_}


def _forward(net: MLP, x: Tensor) -> tuple[Tensor, list[Tensor]]:
    """Output and the inputs of each layer (the activations backward needs)."""
    inputs = [x]
    act = _FORWARD[net.activation]
    layers = net.layers
    last = len(layers) - 1
    for i, layer in enumerate(layers):
        x = torch.addmm(layer.bias, x, layer.weight.t())
        if i < last:
            x = act(x)
            inputs.append(x)
    return x, inputs


def _backward(net: MLP, grad: Tensor, inputs: list[Tensor], out: list[Tensor]) -> None:
    """Append the gradients ``[W_0, b_0, W_1, b_1, ...]`` to ``out`` in parameter order."""
    back = _BACKWARD[net.activation]
    layers = net.layers
    grads: list[Tensor] = []
    for i in range(len(layers) - 1, -1, -1):
        h = inputs[i]
        grads.append(grad.sum(0))
        grads.append(grad.t().mm(h))
        if i > 0:
            grad = back(grad.mm(layers[i].weight), h)
    out.extend(reversed(grads))


@torch.no_grad()
def loss_and_grads(
    policy: Any, mb: PreparedBatch, clip_eps: float, vf_coef: float, ent_coef: float
) -> tuple[list[Tensor], dict[str, Tensor]]:
    """Gradients of ``L = L_CLIP + c_v L_V - c_e H`` for ``policy.parameters()`` in order
    (actor, then critic), and the metrics :func:`rlx.agents.ppo.ppo_loss` returns."""
    grads, terms = grads_and_terms(policy, mb, clip_eps, vf_coef, ent_coef)
    return grads, metrics_of([terms])


class LossTerms(NamedTuple):
    """Per-sample tensors of one gradient step that its metrics are read from, kept so that
    an update's steps are reduced together at its end (a handful of small reductions per
    step are several percent of a CartPole update)."""

    surrogate: Tensor  # min(r A, clip(r) A)
    was_clipped: Tensor
    log_ratio: Tensor
    value_error: Tensor  # V - R
    entropy: Tensor


def metrics_of(steps: list[LossTerms]) -> dict[str, Tensor]:
    """The mean over ``steps`` of each step's :func:`rlx.agents.ppo.ppo_loss` metrics (one
    stacked reduction each when the steps have equal sizes)."""
    if len({len(t.surrogate) for t in steps}) > 1:  # unequal minibatches: mean of the means
        rows = [metrics_of([t]) for t in steps]
        return {key: torch.stack([row[key] for row in rows]).mean() for key in rows[0]}

    def stack(name: str) -> Tensor:
        values = [getattr(t, name) for t in steps]
        return values[0] if len(values) == 1 else torch.stack(values)

    log_ratio = stack("log_ratio")
    return {
        M.POLICY_LOSS: -stack("surrogate").mean(),
        M.CLIP_FRACTION: stack("was_clipped").float().mean(),
        M.APPROX_KL: (torch.expm1(log_ratio) - log_ratio).mean(),
        M.VALUE_LOSS: 0.5 * stack("value_error").square().mean(),
        M.ENTROPY: stack("entropy").mean(),
    }


@torch.no_grad()
def grads_and_terms(
    policy: Any, mb: PreparedBatch, clip_eps: float, vf_coef: float, ent_coef: float
) -> tuple[list[Tensor], LossTerms]:
    """:func:`loss_and_grads` with the metrics left unreduced (:func:`metrics_of`)."""
    B = len(mb.obs)
    logits, actor_in = _forward(policy.actor, mb.obs)
    value, critic_in = _forward(policy.critic, mb.obs)
    value = value.squeeze(-1)
    log_p = torch.log_softmax(logits, dim=-1)
    p = log_p.exp()
    log_prob = (log_p * mb.onehot).sum(-1)
    log_ratio = log_prob - mb.old_log_probs
    ratio = log_ratio.exp()
    adv = mb.advantages
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv
    was_clipped = unclipped > clipped
    # d L_CLIP / d log pi(a|s): -r A / B where the unclipped term is the min, else 0
    d_log_prob = unclipped.masked_fill(was_clipped, 0.0).mul_(-1.0 / B)
    # through log_softmax: d/dz = g (onehot - p)
    d_logits = (mb.onehot - p).mul_(d_log_prob.unsqueeze(-1))
    neg_p_log_p = p * log_p
    entropy = -neg_p_log_p.sum(-1)
    if ent_coef > 0:
        # d(-c_e mean H)/dz_j = c_e / B * p_j (log p_j + H)
        d_logits.add_((neg_p_log_p + p * entropy.unsqueeze(-1)).mul_(ent_coef / B))
    err = value - mb.returns
    d_value = (err * (vf_coef / B)).unsqueeze(-1)
    grads: list[Tensor] = []
    _backward(policy.actor, d_logits, actor_in, grads)
    _backward(policy.critic, d_value, critic_in, grads)
    surrogate = torch.where(was_clipped, clipped, unclipped)  # the min of the two
    return grads, LossTerms(surrogate, was_clipped, log_ratio, err, entropy)
