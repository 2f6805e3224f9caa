"""Networks of the deep agents: an MLP and a small Nature-style CNN, orthogonally initialised.

Orthogonal weights with gain ``sqrt(2)`` for ReLU layers and zero biases (Saxe et al., 2014;
the init CleanRL and Stable-Baselines3 use) keep activations at a steady scale through depth;
output layers take their own gain (1 for values, 0.01 for policy logits so a new policy starts
near uniform).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

RELU_GAIN = math.sqrt(2.0)


def orthogonal_init(module: nn.Module, gain: float = RELU_GAIN) -> nn.Module:
    """Orthogonal weights ``W W^T = gain**2 I`` (for a wide-enough layer), zero biases."""
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        nn.init.orthogonal_(module.weight, gain=gain)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    return module


class MLP(nn.Module):
    """``in_dim -> hidden_sizes... -> out_dim``, ``activation`` between layers.

    The forward pass loops over the layers' weights with ``F.linear`` instead of calling one
    module per layer: on small networks the per-module call overhead is a good part of the
    time. Hidden layers are initialised with gain ``sqrt(2)``, the last with ``out_gain``.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        hidden_sizes: Sequence[int] = (64, 64),
        *,
        activation: Callable[[Tensor], Tensor] = torch.relu,
        out_gain: float = 1.0,
    ) -> None:
        super().__init__()
        sizes = [in_dim, *hidden_sizes, out_dim]
        gains = [RELU_GAIN] * (len(sizes) - 2) + [out_gain]
        self.layers = nn.ModuleList(
            orthogonal_init(nn.Linear(a, b), gain=gain)
            for (a, b), gain in zip(itertools.pairwise(sizes), gains, strict=True)
        )
        self.activation = activation
        self.in_dim, self.out_dim = in_dim, out_dim

    def forward(self, x: Tensor) -> Tensor:
        last = len(self.layers) - 1
        for i, layer in enumerate(cast("list[nn.Linear]", self.layers)):
            x = F.linear(x, layer.weight, layer.bias)
            if i < last:
                x = self.activation(x)
        return x

    def latent_and_output(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(z, out)``: the last hidden layer's activations ``z`` (the input itself without
        hidden layers) and the output, from one pass (gSDE's features, :mod:`rlx.core.sde`)."""
        layers = cast("list[nn.Linear]", self.layers)
        for layer in layers[:-1]:
            x = self.activation(F.linear(x, layer.weight, layer.bias))
        return x, F.linear(x, layers[-1].weight, layers[-1].bias)


def mlp(
    in_dim: int,
    out_dim: int,
    hidden_sizes: Sequence[int] = (64, 64),
    *,
    activation: Callable[[Tensor], Tensor] = torch.relu,
    out_gain: float = 1.0,
) -> MLP:
    """An :class:`MLP` ``in_dim -> hidden_sizes... -> out_dim`` (orthogonal init)."""
    return MLP(in_dim, out_dim, hidden_sizes, activation=activation, out_gain=out_gain)


class NatureCNN(nn.Module):
    """The DQN Nature paper's torso (Mnih et al., 2015), for image observations.

    conv 8x8/4 (32) -> conv 4x4/2 (64) -> conv 3x3/1 (64) -> linear ``features``, ReLU
    between. Input: ``[B, C, H, W]`` or ``[B, H, W, C]`` (channels last is detected from the
    observation shape), uint8 pixels scaled to [0, 1]; H and W of at least 36.
    """

    def __init__(self, obs_shape: Sequence[int], features: int = 512) -> None:
        super().__init__()
        if len(obs_shape) != 3:
            raise ValueError(f"NatureCNN needs image observations (C, H, W), got {obs_shape}.")
        self.channels_last = obs_shape[-1] <= 4 < obs_shape[0]
        c, h, w = (obs_shape[2], obs_shape[0], obs_shape[1]) if self.channels_last else obs_shape
        if min(h, w) < 36:
            raise ValueError(f"NatureCNN needs images of at least 36x36 pixels, got {h}x{w}.")
        self.convs = nn.Sequential(
            orthogonal_init(nn.Conv2d(c, 32, 8, stride=4)),
            nn.ReLU(),
            orthogonal_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            orthogonal_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, c, h, w)).shape[1]
        self.head = nn.Sequential(orthogonal_init(nn.Linear(flat, features)), nn.ReLU())
        self.features = features

    def forward(self, x: Tensor) -> Tensor:
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return self.head(self.convs(x.float() / 255.0))


def is_image_space(obs_shape: Sequence[int], dtype: np.dtype) -> bool:
    """Images: 3-d observations of uint8 pixels."""
    return len(obs_shape) == 3 and np.dtype(dtype) == np.uint8


class QNetwork(nn.Module):
    """``Q(s, .)``: an MLP (or a Nature CNN torso for images) with one output per action.

    ``hidden_sizes`` shapes the MLP for vector observations; images use the CNN's 512 features.
    An ``encoder`` (a module with ``features`` outputs, e.g. the per-key encoder of a
    ``Dict`` observation with images, :mod:`rlx.core.observations`) reads the flat
    observation first, and the MLP its features.

    With ``dueling=True`` the head splits into a state value and advantages (Wang et al.,
    2016): ``Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')``.
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        obs_dtype: np.dtype,
        n_actions: int,
        hidden_sizes: Sequence[int] = (64, 64),
        dueling: bool = False,
        encoder: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.dueling = dueling
        outputs = n_actions + 1 if dueling else n_actions
        self.flat = not is_image_space(obs_shape, obs_dtype)
        if encoder is not None:
            features = cast(int, encoder.features)  # the encoder's outputs (an int attribute)
            self.body: nn.Module = nn.Sequential(encoder, mlp(features, outputs, hidden_sizes))
        elif self.flat:
            self.body = mlp(int(np.prod(obs_shape)), outputs, hidden_sizes)
        else:
            cnn = NatureCNN(obs_shape)
            self.body = nn.Sequential(
                cnn, orthogonal_init(nn.Linear(cnn.features, outputs), gain=1.0)
            )

    def forward(self, obs: Tensor) -> Tensor:
        out = self.body(obs.flatten(1) if self.flat else obs)
        if not self.dueling:
            return out
        value, advantage = out[:, :1], out[:, 1:]
        return value + advantage - advantage.mean(dim=1, keepdim=True)
