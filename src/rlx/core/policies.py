"""The actor-critic of the policy-gradient agents: ``pi(a|s)`` and ``V(s)`` as two MLPs.

- ``Discrete(n)`` actions: a softmax policy, ``pi(a|s) = softmax(logits(s))_a``.
- ``MultiDiscrete(nvec)`` actions: one softmax per entry, independent given the state,
  ``pi(a|s) = prod_i softmax(logits_i(s))_{a_i}``.
- ``MultiBinary(n)`` actions: one Bernoulli per entry, ``pi(a_i = 1|s) = sigmoid(z_i(s))``.
- ``Box`` actions: a diagonal Gaussian ``N(mu(s), diag(sigma**2))`` whose log std is one
  learned vector, independent of the state (as in PPO's paper); the env receives the sampled
  action clipped to the box, the log-probability is that of the unclipped sample. With
  ``use_sde`` the noise is state-dependent instead (gSDE, :mod:`rlx.core.sde`):
  ``a = mu(s) + z(s) theta_eps``, ``z(s)`` the actor's last hidden layer, ``theta_eps`` an
  exploration matrix per env copy held between :meth:`ActorCritic.reset_noise` calls, and
  ``log sigma`` a learned ``[latent_dim, act_dim]`` matrix.
- An empty ``hidden_sizes`` gives the linear case exactly: logits ``theta x`` and value
  ``w . x``, linear in the features and without bias terms
  (``docs/concepts/policy-formulas.md``).
- Observations with images (a 3-d ``uint8`` box, alone or under a ``Dict`` key) pass through
  one :class:`~rlx.core.observations.ObservationEncoder` (a Nature CNN per image) that the
  policy and the critic share; the MLPs read its features.
- Invalid actions (a mask, ``Discrete`` and ``MultiDiscrete`` only) get the logit
  :data:`~rlx.core.distributions.MASKED_LOGIT`: probability 0 in sampling, in the most likely
  action, in log-probabilities and in the entropy.

Log-probabilities and entropies are written out from their formulas
(:mod:`rlx.core.distributions`) instead of going through ``torch.distributions``: on
minibatches of a few hundred samples its argument handling is a noticeable share of a small
network's gradient step. Acting samples with the caller's numpy Generator, so one seeded
stream drives every action and its state travels in a checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rlx.core.distributions import (
    MASKED_LOGIT,
    bernoulli_log_prob_entropy,
    categorical_log_prob_entropy,
    factored_categorical_log_prob_entropy,
    gaussian_log_prob_entropy,
    mask_logits,
)
from rlx.core.nets import MLP, mlp, orthogonal_init
from rlx.core.observations import ObservationLayout, observation_encoder
from rlx.core.sde import sample_exploration_matrices, sde_log_prob_entropy, sde_noise
from rlx.errors import ConfigError, EnvError

ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}
POLICY_OUT_GAIN = 0.01  # a new policy starts near uniform (or near mean 0)
FACTORED_ACTIONS = "ppo, a2c or reinforce"
"""The algorithms that take ``MultiDiscrete`` and ``MultiBinary`` actions, for messages."""


def describe_action_space(space: Any, algo: str, env_id: str) -> dict[str, Any]:
    """What the policy needs to know of an action space, as plain data for a checkpoint.

    ``Discrete(n)`` gives ``{"n": n}``; ``MultiDiscrete`` ``{"nvec": [...], "start": [...]}``;
    ``MultiBinary(n)`` ``{"binary": n}``; a 1-d ``Box`` ``{"low": ..., "high": ...}``.
    Anything else raises :class:`EnvError`.
    """
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return {"n": int(space.n)}
    if isinstance(space, gym.spaces.MultiDiscrete) and len(space.shape) == 1:
        return {
            "nvec": [int(n) for n in space.nvec],
            "start": [int(s) for s in space.start],
        }
    if isinstance(space, gym.spaces.MultiBinary) and np.ndim(space.n) == 0:
        return {"binary": int(cast(int, space.n))}  # a scalar n, checked above
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return {
            "low": np.asarray(space.low, dtype=np.float32),
            "high": np.asarray(space.high, dtype=np.float32),
        }
    raise EnvError(
        f"{algo} takes Discrete, 1-d MultiDiscrete, 1-d MultiBinary or 1-d Box actions; "
        f"{env_id} has {space}; flatten or wrap the action space first."
    )


def action_kind(actions: dict[str, Any]) -> str:
    """``"categorical"``, ``"factored"``, ``"binary"`` or ``"gaussian"``, from
    :func:`describe_action_space`'s data."""
    if "n" in actions:
        return "categorical"
    if "nvec" in actions:
        return "factored"
    return "binary" if "binary" in actions else "gaussian"


def output_size(actions: dict[str, Any]) -> int:
    """The actor's outputs: a logit per action (per value of each entry when factored), a
    logit per binary entry, or a mean per Gaussian dimension."""
    kind = action_kind(actions)
    if kind == "categorical":
        return int(actions["n"])
    if kind == "factored":
        return int(sum(actions["nvec"]))
    return int(actions["binary"]) if kind == "binary" else len(actions["low"])


def mask_size(actions: dict[str, Any]) -> int | None:
    """The length of an action mask for these actions (one flag per value of each entry), or
    None where masks do not apply (``MultiBinary`` and ``Box``)."""
    return output_size(actions) if action_kind(actions) in ("categorical", "factored") else None


def observation_dim(space: Any, env_id: str, algo: str = "policy-gradient agents") -> int:
    """The length of a flat observation (a ``Box`` of any shape, or a ``Dict``, flattened by
    :class:`~rlx.core.observations.ObservationLayout`)."""
    return ObservationLayout.of_space(space, algo, env_id).dim


def default_init(module: nn.Module) -> None:
    """Every linear and convolutional layer of ``module`` back to PyTorch's own initialisation
    (``reset_parameters``: Kaiming-uniform weights, uniform biases), in module order."""
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            layer.reset_parameters()


class ActorCritic(nn.Module):
    """``pi(a|s)`` and, with ``critic=True``, ``V(s)``: two MLPs (after a shared image
    encoder when the observations hold images).

    Args:
        obs_dim: length of the (flattened, possibly normalised) observation.
        actions: :func:`describe_action_space` of the env's action space.
        hidden_sizes: hidden layers of both networks; ``()`` makes both linear, no bias.
        activation: ``"tanh"`` (PPO's and SB3's choice) or ``"relu"`` between hidden layers.
        critic: build the value network too (REINFORCE without a learned baseline has none).
        log_std_init: initial log standard deviation of a Gaussian policy (of every entry
            of gSDE's ``[latent_dim, act_dim]`` matrix with ``use_sde``).
        observation: :attr:`ObservationLayout.spec` of the observations (None: a plain
            vector of ``obs_dim`` numbers).
        use_sde: state-dependent exploration for ``Box`` actions (:meth:`enable_sde`).
        use_expln: with ``use_sde``, ``sigma = expln(log_std)`` instead of ``exp(log_std)``.
        ortho_init: orthogonal weights (gain ``sqrt(2)`` in hidden layers, 0.01 on the policy's
            output, 1 on the value's) and zero biases, as SB3's ``ortho_init=True``; False
            keeps PyTorch's default initialisation of every layer (SB3's ``ortho_init=False``).
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
        observation: list[dict[str, Any]] | None = None,
        use_sde: bool = False,
        use_expln: bool = False,
        ortho_init: bool = True,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is not one of {', '.join(ACTIVATIONS)}.")
        # what rebuilds this network from a checkpoint (plain data)
        self.architecture: dict[str, Any] = {
            "obs_dim": int(obs_dim),
            "actions": dict(actions),
            "hidden_sizes": [int(h) for h in hidden_sizes],
            "activation": activation,
            "critic": bool(critic),
        }
        if observation is not None:
            self.architecture["observation"] = observation
        if not ortho_init:  # recorded only when off: older checkpoints rebuild as they were
            self.architecture["ortho_init"] = False
        self.kind = action_kind(actions)
        self.discrete = self.kind == "categorical"
        self.nvec = tuple(int(n) for n in actions.get("nvec", ()))
        self.start = np.asarray(actions.get("start", ()), dtype=np.int64)
        self.action_dim = output_size(actions)  # the actor's outputs
        gaussian = self.kind == "gaussian"
        self.low = np.asarray(actions["low"], np.float32) if gaussian else None
        self.high = np.asarray(actions["high"], np.float32) if gaussian else None
        self.encoder = observation_encoder(ObservationLayout.of_spec(observation, obs_dim))
        features = obs_dim if self.encoder is None else self.encoder.features
        # gSDE's z(s): the actor's last hidden layer, or what it reads when it has none
        self.latent_dim = int(hidden_sizes[-1]) if len(hidden_sizes) else int(features)
        act = ACTIVATIONS[activation]
        self.actor = _network(features, self.action_dim, hidden_sizes, act, POLICY_OUT_GAIN)
        self.critic = _network(features, 1, hidden_sizes, act, 1.0) if critic else None
        if not ortho_init:
            default_init(self)
        self.log_std = (
            nn.Parameter(torch.full((self.action_dim,), float(log_std_init))) if gaussian else None
        )
        self._numpy_actor: NumpyForward | None = None
        self.use_sde = self.use_expln = False
        # gSDE's theta_eps, one per env copy [N, latent_dim, act_dim] (None: not drawn yet)
        self.exploration_matrices: np.ndarray | None = None
        if use_sde:
            self.enable_sde(log_std_init, use_expln=use_expln)

    def enable_sde(self, log_std_init: float, *, use_expln: bool = False) -> None:
        """Switch the Gaussian policy to state-dependent exploration (gSDE, :mod:`rlx.core.sde`):
        ``log sigma`` becomes a ``[latent_dim, act_dim]`` matrix filled with ``log_std_init``
        (call it before an optimizer takes the parameters). The architecture records it, so
        a checkpoint rebuilds the same policy."""
        if self.kind != "gaussian":
            raise ConfigError(
                f"use_sde=True (state-dependent exploration) needs continuous (Box) actions; "
                f"this policy's actions are {self.kind}; set use_sde=False."
            )
        shape = (self.latent_dim, self.action_dim)
        device = next(self.parameters()).device
        self.log_std = nn.Parameter(torch.full(shape, float(log_std_init), device=device))
        self.use_sde, self.use_expln = True, bool(use_expln)
        self.architecture.update(use_sde=True, use_expln=self.use_expln)
        self.exploration_matrices = None

    def reset_noise(self, rng: np.random.Generator, count: int) -> None:
        """gSDE: draw ``count`` new exploration matrices ``theta_eps ~ N(0, sigma**2)`` (one per
        env copy) from ``rng``; :meth:`sample` uses them until the next call."""
        assert self.log_std is not None
        self.exploration_matrices = sample_exploration_matrices(
            self.log_std, count, rng, self.use_expln
        )

    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> ActorCritic:
        # .to(), .double() and the like may move the parameters: the numpy views follow
        self._numpy_actor = None
        return super()._apply(fn, *args, **kwargs)

    @property
    def has_critic(self) -> bool:
        return self.critic is not None

    @property
    def device(self) -> torch.device:
        """Where the parameters are (:func:`rlx.core.devices.resolve_device` chose it)."""
        return next(self.parameters()).device

    def features(self, obs: Tensor) -> Tensor:
        """What the MLPs read: the observation itself, or the encoder's features of it."""
        return obs if self.encoder is None else self.encoder(obs)

    # ------------------------------------------------------------------ training (autograd)
    def evaluate(
        self, obs: Tensor, actions: Tensor, masks: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``log pi(a|s)``, ``H(pi(.|s))`` and ``V(s)``: what a loss needs (see below)."""
        if self.encoder is None:
            return (*self.log_prob_entropy(obs, actions, masks), self.value(obs))
        x = self.encoder(obs)  # once for both heads
        log_prob, entropy = self._log_prob_entropy_of_features(x, actions, masks)
        return log_prob, entropy, self._critic(x)

    def log_prob_entropy(
        self, obs: Tensor, actions: Tensor, masks: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """``log pi(a|s)`` ``[B]`` and the entropy ``H(pi(.|s))`` (``[B]``, or ``[]`` if
        Gaussian without gSDE), from the formulas of :mod:`rlx.core.distributions` and
        :mod:`rlx.core.sde`; ``masks`` ``[B, n]`` (True: a valid action) for ``Discrete`` and
        ``MultiDiscrete`` actions."""
        return self._log_prob_entropy_of_features(self.features(obs), actions, masks)

    def _log_prob_entropy_of_features(
        self, x: Tensor, actions: Tensor, masks: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        if self.use_sde:
            latent, out = self.actor_latent_and_output(x)
            return self.log_prob_entropy_of(out, actions, masks, latent=latent)
        return self.log_prob_entropy_of(self.actor(x), actions, masks)

    def actor_latent_and_output(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """gSDE's features ``z(s)`` (the actor's last hidden layer) and the actor's output,
        from the MLPs' input ``x`` in one pass."""
        if isinstance(self.actor, MLP):
            return self.actor.latent_and_output(x)
        return x, self.actor(x)

    def log_prob_entropy_of(
        self,
        out: Tensor,
        actions: Tensor,
        masks: Tensor | None = None,
        *,
        latent: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """:meth:`log_prob_entropy` from the actor's output ``out`` (and, with gSDE, its
        features ``latent``)."""
        if self.kind == "categorical":
            return categorical_log_prob_entropy(mask_logits(out, masks), actions)
        if self.kind == "factored":
            return factored_categorical_log_prob_entropy(
                mask_logits(out, masks), actions, self.nvec
            )
        if self.kind == "binary":
            return bernoulli_log_prob_entropy(out, actions)
        assert self.log_std is not None
        if self.use_sde:
            if latent is None:
                raise ValueError("a gSDE policy's log-probabilities need its features z(s).")
            return sde_log_prob_entropy(out, latent, self.log_std, actions, self.use_expln)
        return gaussian_log_prob_entropy(out, self.log_std, actions)

    def value(self, obs: Tensor) -> Tensor:
        """``V(s)`` ``[B]``."""
        return self._critic(self.features(obs))

    def _critic(self, x: Tensor) -> Tensor:
        if self.critic is None:
            raise RuntimeError("this policy was built without a critic.")
        return self.critic(x).squeeze(-1)

    # ------------------------------------------------------------------ acting (no autograd)
    def actor_output(self, obs: np.ndarray) -> np.ndarray:
        """The actor's output for a batch of observations, as numpy: in numpy itself for an
        MLP on the CPU (:class:`NumpyForward`), else one torch pass on the policy's device."""
        numpy_actor = self._numpy_forward()
        if numpy_actor is not None:
            return numpy_actor(obs)
        with torch.inference_mode():
            x = torch.from_numpy(obs).to(self.device)
            return self.actor(self.features(x)).cpu().numpy()

    def actor_latent_and_output_numpy(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`actor_latent_and_output` of a batch of observations, as numpy (as
        :meth:`actor_output` computes it)."""
        numpy_actor = self._numpy_forward()
        if numpy_actor is not None:
            return numpy_actor.latent_and_output(obs)
        with torch.inference_mode():
            x = torch.from_numpy(obs).to(self.device)
            latent, out = self.actor_latent_and_output(self.features(x))
            return latent.cpu().numpy(), out.cpu().numpy()

    def _numpy_forward(self) -> NumpyForward | None:
        if self._numpy_actor is None and self.encoder is None and self.device.type == "cpu":
            self._numpy_actor = NumpyForward(self.actor)  # until .to() moves the parameters
        return self._numpy_actor

    def sample(
        self, obs: np.ndarray, rng: np.random.Generator, masks: np.ndarray | None = None
    ) -> np.ndarray:
        """Actions ``a ~ pi(.|s)`` for a batch of observations, drawn from ``rng``.

        Softmax by the inverse CDF of one uniform per row (per entry for ``MultiDiscrete``);
        Bernoulli entries as ``u < sigmoid(z)``; Gaussian as ``mu + sigma * z``; with gSDE
        ``mu(s) + z(s) theta_eps``, row ``i`` with the exploration matrix of env copy ``i``
        (:meth:`reset_noise`; a batch of another size draws matrices of its own from ``rng``
        for this call). The Gaussian sample is returned unclipped (see :meth:`env_action`);
        ``masks`` rule out invalid actions.
        """
        if self.use_sde:
            latent, out = self.actor_latent_and_output_numpy(obs)
            matrices = self.exploration_matrices
            if matrices is None or len(matrices) != len(out):
                assert self.log_std is not None
                matrices = sample_exploration_matrices(self.log_std, len(out), rng, self.use_expln)
            return (out + sde_noise(latent, matrices)).astype(np.float32)
        out = self.actor_output(obs)
        if self.kind == "categorical":
            return _inverse_cdf(_masked(out, masks), rng.random(len(out)))
        if self.kind == "factored":
            logits, u = _masked(out, masks), rng.random((len(out), len(self.nvec)))
            parts = np.split(logits, np.cumsum(self.nvec)[:-1], axis=-1)
            return np.stack([_inverse_cdf(z, u[:, i]) for i, z in enumerate(parts)], axis=-1)
        if self.kind == "binary":
            p = 1.0 / (1.0 + np.exp(-out))
            return (rng.random(out.shape) < p).astype(np.float32)
        assert self.log_std is not None
        std = np.exp(self.log_std.detach().cpu().numpy())
        return (out + std * rng.standard_normal(out.shape)).astype(np.float32)

    def mode(self, obs: np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        """The most likely actions: ``argmax_a pi(a|s)`` (per entry when factored), or the
        Gaussian mean ``mu(s)`` (no noise, with gSDE too)."""
        with torch.inference_mode():
            x = torch.from_numpy(obs).to(self.device)
            out = self.actor(self.features(x)).cpu().numpy()
        if self.kind == "categorical":
            return _masked(out, masks).argmax(axis=-1)
        if self.kind == "factored":
            parts = np.split(_masked(out, masks), np.cumsum(self.nvec)[:-1], axis=-1)
            return np.stack([z.argmax(axis=-1) for z in parts], axis=-1)
        if self.kind == "binary":
            return (out > 0).astype(np.float32)
        return out

    def env_action(self, actions: np.ndarray) -> np.ndarray:
        """Actions as the env takes them: Gaussian samples clipped into the ``Box``,
        ``MultiDiscrete`` entries shifted by the space's start, ``MultiBinary`` as int8."""
        if self.kind == "categorical":
            return actions
        if self.kind == "factored":
            return actions + self.start
        if self.kind == "binary":
            return actions.astype(np.int8)
        return np.clip(actions, self.low, self.high)


def _masked(logits: np.ndarray, masks: np.ndarray | None) -> np.ndarray:
    """``logits`` with the invalid actions at :data:`MASKED_LOGIT` (numpy's
    :func:`~rlx.core.distributions.mask_logits`)."""
    return logits if masks is None else np.where(masks, logits, MASKED_LOGIT)


def _inverse_cdf(logits: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One draw per row of ``softmax(logits)`` from the uniforms ``u`` ``[B]``: the first
    action whose cumulative probability exceeds ``u``."""
    cdf = np.cumsum(np.exp(logits - logits.max(axis=-1, keepdims=True)), axis=-1)
    u = u * cdf[:, -1]  # < cdf[:, -1], so at most n - 1 below
    return (u[:, None] >= cdf).sum(-1)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0, out=x)


_NUMPY_ACTIVATIONS: dict[Any, Callable[[np.ndarray], np.ndarray]] = {
    torch.relu: _relu,
    F.relu: _relu,
    torch.tanh: np.tanh,
}


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

    def latent_and_output(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The last hidden layer's activations (the input without hidden layers) and the
        output: :meth:`rlx.core.nets.MLP.latent_and_output` in numpy."""
        if self.layers is None:
            with torch.inference_mode():
                t = torch.from_numpy(x)
                if isinstance(self.net, MLP):
                    latent, out = self.net.latent_and_output(t)
                    return latent.numpy(), out.numpy()
                return x, self.net(t).numpy()
        for weight_t, bias in self.layers[:-1]:
            x = x @ weight_t
            if bias is not None:
                x += bias
            assert self.activation is not None  # several layers: __init__ found it
            x = self.activation(x)
        weight_t, bias = self.layers[-1]
        out = x @ weight_t
        if bias is not None:
            out += bias
        return x, out

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
                assert self.activation is not None  # several layers: __init__ found it
                x = self.activation(x)
        return x


def _network(
    in_dim: int, out_dim: int, hidden_sizes: Sequence[int], activation: Any, out_gain: float
) -> nn.Module:
    if len(hidden_sizes) == 0:
        # the annotated linear case: logits = theta x, V = w . x, no bias terms
        return orthogonal_init(nn.Linear(in_dim, out_dim, bias=False), gain=out_gain)
    return mlp(in_dim, out_dim, hidden_sizes, activation=activation, out_gain=out_gain)
