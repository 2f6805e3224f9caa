"""The actor-critic of the policy-gradient agents: ``pi(a|s)`` and ``V(s)`` as two MLPs.

- ``Discrete(n)`` actions: a softmax policy, ``pi(a|s) = softmax(logits(s))_a``.
- ``Box`` actions: a diagonal Gaussian ``N(mu(s), diag(sigma**2))`` whose log std is one
  learned vector, independent of the state (as in PPO's paper); the env receives the sampled
  action clipped to the box, the log-probability is that of the unclipped sample.
- An empty ``hidden_sizes`` gives the linear case exactly: logits ``theta x`` and value
  ``w . x``, linear in the features and without bias terms
  (``docs/concepts/policy-formulas.md``).

Log-probabilities and entropies are written out from their formulas instead of going through
``torch.distributions`` (:mod:`rlx.core.distributions`): on minibatches of a few hundred
samples its argument handling is a noticeable share of a small network's gradient step. Acting
samples with the caller's numpy Generator, so one seeded stream drives every action and its
state travels in a checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rlx.core.nets import mlp, orthogonal_init
from rlx.errors import EnvError

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}
POLICY_OUT_GAIN = 0.01  # a new policy starts near uniform (or near mean 0)


def describe_action_space(space: Any, algo: str, env_id: str) -> dict[str, Any]:
    """What the policy needs to know of an action space, as plain data for a checkpoint.

    ``Discrete(n)`` gives ``{"n": n}``; a 1-d ``Box`` gives ``{"low": ..., "high": ...}``.
    Anything else raises :class:`EnvError`.
    """
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return {"n": int(space.n)}
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return {
            "low": np.asarray(space.low, dtype=np.float32),
            "high": np.asarray(space.high, dtype=np.float32),
        }
    raise EnvError(
        f"{algo} needs Discrete or 1-d Box actions, but {env_id} has {space}; "
        "flatten or wrap the action space first."
    )


def observation_dim(space: Any, env_id: str) -> int:
    """The length of a flat vector observation (``Box`` of any shape, flattened)."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, gym.spaces.Discrete):
        raise EnvError(
            f"{env_id} has Discrete({space.n}) observations; policy-gradient agents need "
            "vector (Box) observations. Use a tabular method (rlx train q-learning), or "
            "one-hot encode the observation with a wrapper."
        )
    raise EnvError(f"{env_id} has {space} observations; policy-gradient agents need a Box.")


class ActorCritic(nn.Module):
    """``pi(a|s)`` and, with ``critic=True``, ``V(s)``: two MLPs.

    Args:
        obs_dim: length of the (flattened, possibly normalised) observation.
        actions: :func:`describe_action_space` of the env's action space.
        hidden_sizes: hidden layers of both networks; ``()`` makes both linear, no bias.
        activation: ``"tanh"`` (PPO's and SB3's choice) or ``"relu"`` between hidden layers.
        critic: build the value network too (REINFORCE without a learned baseline has none).
        log_std_init: initial log standard deviation of a Gaussian policy.
    """

    def __init__(
        self,
        obs_dim: int,
        actions: dict[str, Any],
        hidden_sizes: Sequence[int] = (64, 64),
        *,
        activation: str = "tanh",
        critic: bool = True,
        log_std_init: float = 0.0,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is not one of {', '.join(ACTIVATIONS)}.")
        # what rebuilds this network from a checkpoint (plain data)
        self.architecture = {
            "obs_dim": int(obs_dim),
            "actions": dict(actions),
            "hidden_sizes": [int(h) for h in hidden_sizes],
            "activation": activation,
            "critic": bool(critic),
        }
        self.discrete = "n" in actions
        self.action_dim = int(actions["n"]) if self.discrete else len(actions["low"])
        self.low = None if self.discrete else np.asarray(actions["low"], np.float32)
        self.high = None if self.discrete else np.asarray(actions["high"], np.float32)
        act = ACTIVATIONS[activation]
        self.actor = _network(obs_dim, self.action_dim, hidden_sizes, act, POLICY_OUT_GAIN)
        self.critic = _network(obs_dim, 1, hidden_sizes, act, 1.0) if critic else None
        self.log_std = (
            None
            if self.discrete
            else nn.Parameter(torch.full((self.action_dim,), float(log_std_init)))
        )
        self._numpy_actor: NumpyForward | None = None

    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> ActorCritic:
        # .to(), .double() and the like may move the parameters: the numpy views follow
        self._numpy_actor = None
        return super()._apply(fn, *args, **kwargs)

    @property
    def has_critic(self) -> bool:
        return self.critic is not None

    # ------------------------------------------------------------------ training (autograd)
    def evaluate(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``log pi(a|s)``, ``H(pi(.|s))`` and ``V(s)``: what a loss needs (see below)."""
        return (*self.log_prob_entropy(obs, actions), self.value(obs))

    def log_prob_entropy(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """``log pi(a|s)`` ``[B]`` and the entropy ``H(pi(.|s))`` (``[B]``, or ``[]`` if Gaussian).

        Softmax: ``log pi(a|s) = log_softmax(logits)_a``, ``H = -sum_a pi_a log pi_a``.
        Gaussian: ``log pi(a|s) = sum_i [-(a_i - mu_i)**2 / (2 sigma_i**2) - log sigma_i
        - log(2 pi) / 2]``, ``H = sum_i [log sigma_i + (1 + log(2 pi)) / 2]`` (state-independent).
        """
        out = self.actor(obs)
        if self.discrete:
            log_p = F.log_softmax(out, dim=-1)
            log_prob = log_p.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
            entropy = -(log_p.exp() * log_p).sum(-1)
            return log_prob, entropy
        assert self.log_std is not None
        z = (actions - out) * torch.exp(-self.log_std)
        log_prob = (-0.5 * z.square() - self.log_std - HALF_LOG_2PI).sum(-1)
        entropy = (self.log_std + 0.5 + HALF_LOG_2PI).sum()
        return log_prob, entropy

    def value(self, obs: Tensor) -> Tensor:
        """``V(s)`` ``[B]``."""
        if self.critic is None:
            raise RuntimeError("this policy was built without a critic.")
        return self.critic(obs).squeeze(-1)

    # ------------------------------------------------------------------ acting (no autograd)
    def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Actions ``a ~ pi(.|s)`` for a batch of observations, drawn from ``rng``.

        Softmax by the inverse CDF of one uniform per row; Gaussian as ``mu + sigma * z``.
        The Gaussian sample is returned unclipped (see :meth:`env_action`).
        """
        if self._numpy_actor is None:
            self._numpy_actor = NumpyForward(self.actor)
        out = self._numpy_actor(obs)
        if self.discrete:
            cdf = np.cumsum(np.exp(out - out.max(axis=-1, keepdims=True)), axis=-1)
            u = rng.random(len(out)) * cdf[:, -1]  # < cdf[:, -1], so at most n - 1 below
            return (u[:, None] >= cdf).sum(-1)  # the first action whose cdf exceeds u
        assert self.log_std is not None
        std = np.exp(self.log_std.detach().numpy())
        return (out + std * rng.standard_normal(out.shape)).astype(np.float32)

    @torch.inference_mode()
    def mode(self, obs: np.ndarray) -> np.ndarray:
        """The most likely actions: ``argmax_a pi(a|s)``, or the Gaussian mean ``mu(s)``."""
        out = self.actor(torch.from_numpy(obs)).numpy()
        return out.argmax(axis=-1) if self.discrete else out

    def env_action(self, actions: np.ndarray) -> np.ndarray:
        """Actions as the env takes them: Gaussian samples clipped into the ``Box``."""
        if self.discrete:
            return actions
        return np.clip(actions, self.low, self.high)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0, out=x)


_NUMPY_ACTIVATIONS = {torch.relu: _relu, F.relu: _relu, torch.tanh: np.tanh}


class NumpyForward:
    """A network's forward pass in numpy, on views of its own parameters, for acting.

    The views share memory with the parameters (no copy; optimizer steps and
    ``load_state_dict`` update them in place), so the output is torch's up to float rounding.
    On the few observations of one vector step torch's per-call dispatch costs more than the
    arithmetic, which numpy does without it. Networks
    other than an :class:`MLP` or a ``Linear`` go through torch.
    """

    def __init__(self, net: nn.Module) -> None:
        self.net = net
        layers = [net] if isinstance(net, nn.Linear) else getattr(net, "layers", None)
        self.activation = _NUMPY_ACTIVATIONS.get(getattr(net, "activation", None))
        self.layers = None
        if layers is not None and (len(layers) == 1 or self.activation is not None):
            self.layers = [
                (
                    layer.weight.detach().numpy().T,
                    None if layer.bias is None else layer.bias.detach().numpy(),
                )
                for layer in layers
            ]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.layers is None:
            with torch.inference_mode():
                return self.net(torch.from_numpy(x)).numpy()
        last = len(self.layers) - 1
        for i, (weight_t, bias) in enumerate(self.layers):
            x = x @ weight_t
            if bias is not None:
                x += bias
            if i < last:
                x = self.activation(x)
        return x


def _network(
    in_dim: int, out_dim: int, hidden_sizes: Sequence[int], activation: Any, out_gain: float
) -> nn.Module:
    if len(hidden_sizes) == 0:
        # the annotated linear case: logits = theta x, V = w . x, no bias terms
        return orthogonal_init(nn.Linear(in_dim, out_dim, bias=False), gain=out_gain)
    return mlp(in_dim, out_dim, hidden_sizes, activation=activation, out_gain=out_gain)
