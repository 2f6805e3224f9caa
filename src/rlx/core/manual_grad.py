"""The clipped-surrogate loss ``L = L_CLIP + c_v L_V - c_e H`` and its gradient written out by
hand for a softmax policy over a tanh or ReLU MLP with an MLP critic: no autograd graph.

On small networks and minibatches of a few hundred samples, autograd's graph building and
per-node dispatch are most of a gradient step; the same arithmetic written out in numpy, on
views of the parameters, skips them (the optimizer and the gradient clipping stay torch's).
The gradients equal autograd's up to float rounding (``tests/agents/test_policy_math.py``
checks it).

:func:`supports` says whether a policy and config can take this path (:func:`unsupported`
why not); PPO's ``gradient`` field picks it or autograd (the losses of
:mod:`rlx.core.policy_losses`) once per run, in :func:`rlx.agents.ppo.gradient_backend`.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import numpy as np
import torch
from torch import Tensor, nn

from rlx import metrics as M
from rlx.core.nets import MLP


def supports(policy: Any, config: Any) -> bool:
    """A discrete policy with MLP actor and critic (tanh or ReLU) on the CPU (the gradients
    are computed in numpy on the parameters' memory), no image encoder, no value clipping."""
    return unsupported(policy, config) is None


def unsupported(policy: Any, config: Any) -> str | None:
    """Why this gradient does not apply to ``policy`` and ``config``, as the first condition
    of :func:`supports` that fails (a clause for an error message); None where it applies."""
    actor, critic = policy.actor, policy.critic
    if not policy.discrete:
        return "the actions are not discrete (it is written for a softmax policy)"
    if policy.encoder is not None:
        return "the observations go through an image encoder (it is written for MLPs only)"
    if policy.device.type != "cpu":
        return f"the policy is on {policy.device.type}, not the CPU (it computes in numpy)"
    if not isinstance(actor, MLP) or not isinstance(critic, MLP):
        return "the actor or the critic is not an MLP"
    if actor.activation not in _BACKWARD or critic.activation is not actor.activation:
        return "the activation is not tanh or relu throughout (it has only their derivatives)"
    if getattr(config, "clip_value", None) is not None:
        return f"clip_value={config.clip_value} asks for value clipping, which it does not do"
    return None


class PreparedBatch:
    """What does not change between the epochs of one (mini)batch, as numpy arrays sharing
    the tensors' memory: observations, one-hot actions, old log-probs, advantages, returns."""

    __slots__ = ("advantages", "obs", "old_log_probs", "onehot", "returns")

    def __init__(self, mb: Any, num_actions: int) -> None:
        self.obs = _array(mb.obs)
        self.onehot = np.zeros((len(mb.actions), num_actions), dtype=self.obs.dtype)
        self.onehot[np.arange(len(mb.actions)), _array(mb.actions).astype(np.int64)] = 1.0
        self.old_log_probs = _array(mb.log_probs)
        self.advantages = _array(mb.advantages)
        self.returns = _array(mb.returns)


def _array(t: Tensor) -> np.ndarray:
    return t.detach().numpy()


# numpy (OpenBLAS) over torch for these shapes, one thread: at a few hundred rows torch's
# per-call dispatch costs more than the products and the elementwise calls themselves
def _tanh_(x: np.ndarray) -> np.ndarray:
    return np.tanh(x, out=x)


def _relu_(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0, out=x)


def _tanh_backward_(grad: np.ndarray, out: np.ndarray) -> np.ndarray:
    # d tanh(x)/dx = 1 - tanh(x)^2, from the layer's output
    slope = np.multiply(out, out)
    np.subtract(1.0, slope, out=slope)
    return np.multiply(grad, slope, out=grad)


def _relu_backward_(grad: np.ndarray, out: np.ndarray) -> np.ndarray:
    return np.multiply(grad, out > 0, out=grad)


_BACKWARD = {torch.tanh: _tanh_backward_, torch.relu: _relu_backward_}
_FORWARD = {torch.tanh: _tanh_, torch.relu: _relu_}


Weights = list[tuple[np.ndarray, np.ndarray]]


def weights_of(policy: Any) -> tuple[Weights, Weights]:
    """The actor's and the critic's ``(W, b)`` per layer as numpy views of the parameters.

    The optimizer updates the parameters in place, so one call serves a whole update (making
    the views once, not at each of its steps).
    """
    return _views(policy.actor), _views(policy.critic)


def _views(net: MLP) -> Weights:
    return [
        (_array(layer.weight), _array(layer.bias)) for layer in cast("list[nn.Linear]", net.layers)
    ]


def _forward(
    weights: Weights, activation: Any, x: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Output and the inputs of each layer (the activations backward needs)."""
    inputs = [x]
    act = _FORWARD[activation]
    last = len(weights) - 1
    for i, (w, b) in enumerate(weights):
        x = x @ w.T
        x += b
        if i < last:
            inputs.append(act(x))
    return x, inputs


def _backward(
    weights: Weights,
    activation: Any,
    grad: np.ndarray,
    inputs: list[np.ndarray],
    out: list[Tensor],
) -> None:
    """Append the gradients ``[W_0, b_0, W_1, b_1, ...]`` to ``out`` in parameter order."""
    back = _BACKWARD[activation]
    grads: list[np.ndarray] = []
    for i in range(len(weights) - 1, -1, -1):
        h = inputs[i]
        grads.append(grad.sum(0))
        grads.append(grad.T @ h)
        if i > 0:
            grad = back(grad @ weights[i][0], h)
    out.extend(torch.from_numpy(g) for g in reversed(grads))


@torch.no_grad()
def loss_and_grads(
    policy: Any, mb: PreparedBatch, clip_eps: float, vf_coef: float, ent_coef: float
) -> tuple[list[Tensor], dict[str, Tensor]]:
    """Gradients of ``L = L_CLIP + c_v L_V - c_e H`` for ``policy.parameters()`` in order
    (actor, then critic), and the metrics of the same loss through autograd
    (:mod:`rlx.core.policy_losses`)."""
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
    """The mean over ``steps`` of each step's loss metrics (one
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


def grads_and_terms(
    policy: Any,
    mb: PreparedBatch,
    clip_eps: float,
    vf_coef: float,
    ent_coef: float,
    weights: tuple[Weights, Weights] | None = None,
) -> tuple[list[Tensor], LossTerms]:
    """:func:`loss_and_grads` with the metrics left unreduced (:func:`metrics_of`);
    ``weights``: :func:`weights_of` the policy, made once for many steps."""
    B = len(mb.obs)
    actor, critic = weights or weights_of(policy)
    logits, actor_in = _forward(actor, policy.actor.activation, mb.obs)
    value, critic_in = _forward(critic, policy.critic.activation, mb.obs)
    value = value[:, 0]
    # log_softmax, shifted by the row max against overflow
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    p = np.exp(log_p)
    log_prob = (log_p * mb.onehot).sum(axis=1)
    log_ratio = log_prob - mb.old_log_probs
    ratio = np.exp(log_ratio)
    adv = mb.advantages
    unclipped = ratio * adv
    clipped = np.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv
    was_clipped = unclipped > clipped
    # d L_CLIP / d log pi(a|s): -r A / B where the unclipped term is the min, else 0
    d_log_prob = np.where(was_clipped, 0.0, unclipped).astype(adv.dtype, copy=False)
    d_log_prob *= -1.0 / B
    # through log_softmax: d/dz = g (onehot - p)
    d_logits = mb.onehot - p
    d_logits *= d_log_prob[:, None]
    neg_p_log_p = p * log_p
    entropy = -neg_p_log_p.sum(axis=1)
    if ent_coef > 0:
        # d(-c_e mean H)/dz_j = c_e / B * p_j (log p_j + H)
        d_entropy = neg_p_log_p + p * entropy[:, None]
        d_entropy *= ent_coef / B
        d_logits += d_entropy
    err = value - mb.returns
    d_value = (err * (vf_coef / B))[:, None]
    grads: list[Tensor] = []
    _backward(actor, policy.actor.activation, d_logits, actor_in, grads)
    _backward(critic, policy.critic.activation, d_value, critic_in, grads)
    surrogate = np.where(was_clipped, clipped, unclipped)  # the min of the two
    terms = (surrogate, was_clipped, log_ratio, err, entropy)
    return grads, LossTerms(*(torch.from_numpy(t) for t in terms))
