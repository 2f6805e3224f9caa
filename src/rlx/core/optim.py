"""Adam and RMSprop for small networks, without ``torch.optim``'s fixed costs.

Both apply torch's own update kernels (Adam: the fused CPU kernel that
``torch.optim.Adam(fused=True)`` calls; RMSprop: ``torch._foreach_*`` operations) and give the
same numbers as ``torch.optim`` (tests check it step by step). What they leave out:

- the first use of any ``torch.optim`` optimizer imports ``torch._dynamo``, a fixed cost that
  is a large part of a short run;
- ``torch.optim``'s per-step Python layers, which cost several times the fused kernel itself
  on small networks, and a PPO update takes thousands of steps.

They keep the interface the agents use: ``zero_grad``, ``step``, ``lr``, ``state_dict`` and
``load_state_dict`` (a checkpoint restores the moments and the step count exactly).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, overload

import torch
from torch import Tensor

# what torch's ``_foreach_*`` and fused kernels take as a list of tensors
TensorList = list[Tensor] | tuple[Tensor, ...]


class Adam:
    """Adam (Kingma & Ba, 2015) with bias correction, one fused kernel call per step::

        m <- b1 m + (1 - b1) g,    v <- b2 v + (1 - b2) g**2
        theta <- theta - lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps)

    ``eps = 1e-5`` by default, as PPO's reference implementation and Stable-Baselines3 use.
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-5,
    ) -> None:
        self.params: list[Tensor] = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps = float(lr), betas, eps
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        # on the parameters' device: the fused step reads them there, with no host sync
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, grads: TensorList | None = None) -> None:
        """One update from the parameters' ``.grad`` (or from ``grads``, in their order)."""
        if grads is None:
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        torch._foreach_add_(self.steps, 1.0)
        torch._fused_adam_(
            self.params,
            grads,
            self.exp_avg,
            self.exp_avg_sq,
            [],
            self.steps,
            lr=self.lr,
            beta1=self.betas[0],
            beta2=self.betas[1],
            weight_decay=0.0,
            eps=self.eps,
            amsgrad=False,
            maximize=False,
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "lr": self.lr,
            "exp_avg": [t.clone() for t in self.exp_avg],
            "exp_avg_sq": [t.clone() for t in self.exp_avg_sq],
            "steps": [t.clone() for t in self.steps],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`, or ``torch.optim.Adam``'s (older DQN checkpoints)."""
        if "param_groups" in state:
            state = self._from_torch_optim(state)
        self.lr = float(state["lr"])
        _copy_into(self.exp_avg, state["exp_avg"])
        _copy_into(self.exp_avg_sq, state["exp_avg_sq"])
        _copy_into(self.steps, state["steps"])

    def _from_torch_optim(self, state: dict[str, Any]) -> dict[str, Any]:
        """``torch.optim.Adam``'s state of one parameter group in :meth:`state_dict`'s layout
        (a parameter never stepped keeps its zero moments)."""
        (group,) = state["param_groups"]
        per_param = [state["state"].get(i, {}) for i in group["params"]]
        if len(per_param) != len(self.params):
            raise ValueError(
                f"the saved optimizer state has {len(per_param)} parameters, this one "
                f"{len(self.params)}; the network must be built with the same config."
            )

        def saved(name: str, current: list[Tensor]) -> list[Any]:
            return [p.get(name, now) for p, now in zip(per_param, current, strict=True)]

        return {
            "lr": group["lr"],
            "exp_avg": saved("exp_avg", self.exp_avg),
            "exp_avg_sq": saved("exp_avg_sq", self.exp_avg_sq),
            "steps": saved("step", self.steps),
        }


class RMSprop:
    """RMSprop (Tieleman & Hinton, 2012), torch's formulation, as A2C uses it::

        v <- alpha v + (1 - alpha) g**2,    theta <- theta - lr * g / (sqrt(v) + eps)

    ``alpha = 0.99`` and ``eps = 1e-5`` by default (the A2C paper's and Stable-Baselines3's).
    """

    def __init__(
        self, params: Iterable[Tensor], lr: float, alpha: float = 0.99, eps: float = 1e-5
    ) -> None:
        self.params: list[Tensor] = [p for p in params if p.requires_grad]
        self.lr, self.alpha, self.eps = float(lr), alpha, eps
        self.square_avg = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, grads: TensorList | None = None) -> None:
        """One update from the parameters' ``.grad`` (or from ``grads``, in their order)."""
        if grads is None:
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        torch._foreach_mul_(self.square_avg, self.alpha)
        torch._foreach_addcmul_(self.square_avg, grads, grads, value=1.0 - self.alpha)
        denom = torch._foreach_sqrt(self.square_avg)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(self.params, grads, denom, value=-self.lr)

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "square_avg": [t.clone() for t in self.square_avg]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr = float(state["lr"])
        _copy_into(self.square_avg, state["square_avg"])


Optimizer = Adam | RMSprop


def clip_grad_norm(
    params: Sequence[Tensor], max_norm: float | None, grads: TensorList | None = None
) -> Tensor:
    """Scale the gradients so their global L2 norm ``sqrt(sum_p ||g_p||**2)`` is at most
    ``max_norm`` (None: leave them); returns the norm before clipping, as a 0-d tensor.

    ``torch.nn.utils.clip_grad_norm_``'s arithmetic in three kernel calls, without its checks
    (which cost as much as the arithmetic on small networks), and the norm stays a tensor (no
    host sync). ``grads`` (scaled in place) stand in for the parameters' ``.grad`` when given.
    """
    if grads is None:
        grads = [p.grad for p in params if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    if max_norm is not None:
        torch._foreach_mul_(grads, (max_norm / (norm + 1e-6)).clamp(max=1.0))
    return norm


@overload
def gradient_step(
    optimizer: Optimizer | torch.optim.Optimizer,
    loss: Tensor | TensorList,
    params: Sequence[Tensor],
    max_grad_norm: float | None = None,
) -> Tensor: ...


@overload
def gradient_step(
    optimizer: Optimizer | torch.optim.Optimizer,
    loss: Tensor | TensorList,
    params: None = None,
    max_grad_norm: float | None = None,
) -> None: ...


def gradient_step(
    optimizer: Optimizer | torch.optim.Optimizer,
    loss: Tensor | TensorList,
    params: Sequence[Tensor] | None = None,
    max_grad_norm: float | None = None,
) -> Tensor | None:
    """``zero_grad; backward; clip the global norm to max_grad_norm; step``: one gradient step
    of ``optimizer`` on ``loss``, the one every deep agent and board game takes.

    With ``params`` it returns their gradients' global norm before clipping (a 0-d tensor, not
    read here: no host sync), clipped to ``max_grad_norm`` unless that is None; without
    ``params`` no norm is taken and it returns None. ``loss`` may instead be the gradients
    themselves, one per parameter of ``params`` in the optimizer's order (computed without
    autograd, :mod:`rlx.core.manual_grad`): then there is no backward and ``.grad`` is left
    alone.
    """
    if not isinstance(loss, Tensor):
        assert params is not None, "gradients given as a list need their params"
        # only these optimizers take the gradients as an argument (torch.optim's do not)
        assert isinstance(optimizer, (Adam, RMSprop)), "gradients as a list need Adam or RMSprop"
        clipped = clip_grad_norm(params, max_grad_norm, loss)
        optimizer.step(loss)
        return clipped
    optimizer.zero_grad()  # torch.optim's too sets the gradients to None (its default)
    loss.backward()
    norm = None if params is None else clip_grad_norm(params, max_grad_norm)
    optimizer.step()
    return norm


def _copy_into(targets: list[Tensor], sources: Sequence[Any]) -> None:
    if len(targets) != len(sources):
        raise ValueError(
            f"the saved optimizer state has {len(sources)} tensors, this one {len(targets)}; "
            "the network must be built with the same config."
        )
    with torch.no_grad():
        for target, source in zip(targets, sources, strict=True):
            target.copy_(torch.as_tensor(source))


def annealed(value: float, step: int, total_steps: int, anneal: bool) -> float:
    """``value * (1 - step / total_steps)`` when annealing (never below 0), else ``value``."""
    if not anneal:
        return value
    return value * max(0.0, 1.0 - step / total_steps)
