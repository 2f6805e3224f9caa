"""Observations as the networks read them: one flat vector each, and the encoder that reads
the vector back into its parts.

A ``Box`` is flattened, ``[B, *shape] -> [B, prod(shape)]``. A ``Dict`` is flattened key by key,
in the space's order, and the pieces concatenated: a ``Box`` key by its numbers, a
``MultiBinary`` key by its 0/1 entries, a ``Discrete(n)`` key as a one-hot vector of length
``n`` (a ``MultiDiscrete`` key as one one-hot vector per entry). Buffers, running statistics
and the MLPs then hold one float array whatever the space.

Images (3-d ``uint8`` boxes, alone or under a ``Dict`` key) are not for an MLP:
:class:`ObservationEncoder` cuts the flat vector back into its parts and computes

    features(o) = concat(vector parts of o, CNN_1(image_1), CNN_2(image_2), ...)

with a Nature CNN per image (:class:`rlx.core.nets.NatureCNN`); the policy's and the
critic's MLPs read ``features(o)``. An observation without images needs no encoder: the MLPs
read the flat vector itself, as they always have. The flat vector of a ``Dict`` is float32,
image keys included, so a replay buffer holds a ``Dict``'s images at four bytes a pixel; a lone
stack of uint8 frames (Atari's) stays uint8 and goes to the buffer that stores each frame once
(:mod:`rlx.core.frame_buffer`).

:class:`ObservationLayout` says how one space is flattened; its :attr:`~ObservationLayout.spec`
is plain data, kept in checkpoints so a loaded agent reads observations as in training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

from rlx.core.nets import NatureCNN, is_image_space
from rlx.errors import EnvError

PartKind = Literal["vector", "image", "onehot"]
DICT_IMAGE_FEATURES = 256
"""CNN features of each image of a ``Dict`` (a lone image gets the Nature CNN's 512): several
images side by side would otherwise make the MLP's input wide."""


@dataclass(frozen=True)
class ObservationPart:
    """One piece of the flat vector: a ``Box`` (``vector`` or ``image``) or a one-hot encoded
    ``Discrete`` / ``MultiDiscrete`` (``onehot``, ``categories`` per entry)."""

    key: str | None  # the Dict key; None for a plain Box
    kind: PartKind
    shape: tuple[int, ...]  # as the env gives it
    size: int  # its length in the flat vector
    categories: tuple[int, ...] = ()  # onehot: the number of values of each entry
    starts: tuple[int, ...] = ()  # onehot: the first value of each entry (Gymnasium's start)

    def spec(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "shape": list(self.shape),
            "size": self.size,
            "categories": list(self.categories),
            "starts": list(self.starts),
        }


class ObservationLayout:
    """How observations of one space become flat vectors ``[B, dim]`` (module docstring)."""

    def __init__(self, parts: Sequence[ObservationPart], *, is_dict: bool) -> None:
        self.parts = tuple(parts)
        self.is_dict = is_dict
        self.dim = sum(p.size for p in self.parts)

    # ------------------------------------------------------------------ building
    @classmethod
    def of_space(cls, space: Any, algo: str, env_id: str) -> ObservationLayout:
        """The layout of a Gymnasium observation space; a space the networks cannot read
        raises :class:`~rlx.errors.EnvError` naming it."""
        import gymnasium as gym

        if isinstance(space, gym.spaces.Box):
            return cls([_box_part(None, space)], is_dict=False)
        if isinstance(space, gym.spaces.Dict):
            parts = [_dict_part(key, sub, algo, env_id) for key, sub in space.items()]
            return cls(parts, is_dict=True)
        if isinstance(space, gym.spaces.Discrete):
            raise EnvError(
                f"{env_id} has Discrete({space.n}) observations; {algo} needs vector (Box) or "
                "Dict observations. Use a tabular method (rlx train q-learning), or one-hot "
                "encode the observation with a wrapper."
            )
        raise EnvError(
            f"{algo} takes Box or Dict observations; {env_id} has {space}; flatten it with "
            "gymnasium.wrappers.FlattenObservation."
        )

    @classmethod
    def of_spec(cls, spec: Sequence[dict[str, Any]] | None, dim: int) -> ObservationLayout:
        """The layout :attr:`spec` describes; None (checkpoints written before layouts) is a
        plain vector of ``dim`` numbers."""
        if spec is None:
            return cls([ObservationPart(None, "vector", (dim,), dim)], is_dict=False)
        parts = [
            ObservationPart(
                p["key"],
                p["kind"],
                tuple(p["shape"]),
                int(p["size"]),
                tuple(p["categories"]),
                tuple(p["starts"]),
            )
            for p in spec
        ]
        return cls(parts, is_dict=any(p.key is not None for p in parts))

    @property
    def spec(self) -> list[dict[str, Any]] | None:
        """Plain data for a checkpoint; None for a plain vector ``Box`` (nothing to rebuild)."""
        if not self.has_images and not self.is_dict:
            return None
        return [p.spec() for p in self.parts]

    @property
    def has_images(self) -> bool:
        return any(p.kind == "image" for p in self.parts)

    def image_keys(self) -> list[str]:
        """The image parts' names, for messages (``"observation"`` for a plain image Box)."""
        return [p.key or "observation" for p in self.parts if p.kind == "image"]

    # ------------------------------------------------------------------ flattening
    def flatten(self, obs: Any) -> np.ndarray:
        """A batch of observations ``[B, ...]`` (a dict of such arrays for a ``Dict``) as
        ``[B, dim]``: a plain ``Box`` keeps its dtype (a view where it can), a ``Dict``
        becomes float32."""
        if not self.is_dict:
            obs = np.asarray(obs)
            return obs.reshape(len(obs), -1)
        pieces = [_flat_part(part, np.asarray(obs[part.key])) for part in self.parts]
        return np.concatenate(pieces, axis=1)

    def batch_of_one(self, obs: Any) -> Any:
        """One observation (no batch dimension) as a batch of one, as :meth:`flatten` takes."""
        if not self.is_dict:
            return np.asarray(obs)[None]
        return {key: np.asarray(value)[None] for key, value in obs.items()}


def _box_part(key: str | None, space: Any) -> ObservationPart:
    shape = tuple(int(s) for s in space.shape)
    kind: PartKind = "image" if is_image_space(shape, space.dtype) else "vector"
    return ObservationPart(key, kind, shape, int(np.prod(shape)))


def _dict_part(key: str, space: Any, algo: str, env_id: str) -> ObservationPart:
    import gymnasium as gym

    if isinstance(space, gym.spaces.Box):
        return _box_part(key, space)
    if isinstance(space, gym.spaces.MultiBinary):
        shape = tuple(int(s) for s in np.atleast_1d(space.n))
        return ObservationPart(key, "vector", shape, int(np.prod(shape)))
    if isinstance(space, gym.spaces.Discrete):
        n = int(space.n)
        return ObservationPart(key, "onehot", (), n, (n,), (int(space.start),))
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = tuple(int(n) for n in np.asarray(space.nvec).reshape(-1))
        starts = tuple(int(s) for s in np.asarray(space.start).reshape(-1))
        return ObservationPart(key, "onehot", tuple(space.shape), sum(nvec), nvec, starts)
    raise EnvError(
        f"{algo} reads Dict observations whose keys are Box, MultiBinary, Discrete or "
        f"MultiDiscrete; {env_id}'s key {key!r} is {space}; flatten it with a wrapper."
    )


def _flat_part(part: ObservationPart, values: np.ndarray) -> np.ndarray:
    n = len(values)
    if part.kind != "onehot":
        return values.reshape(n, -1).astype(np.float32, copy=False)
    entries = values.reshape(n, -1).astype(np.int64) - np.asarray(part.starts)
    offsets = np.concatenate([[0], np.cumsum(part.categories)[:-1]])
    out = np.zeros((n, part.size), dtype=np.float32)
    out[np.arange(n)[:, None], offsets[None, :] + entries] = 1.0
    return out


# ---------------------------------------------------------------------------- the encoder
class ObservationEncoder(nn.Module):
    """``features(o) = concat(vector parts of o, CNN(image) for each image part)``, from the
    flat vector of an :class:`ObservationLayout` with images.

    A lone image gets the Nature CNN's 512 features, each image of a ``Dict``
    :data:`DICT_IMAGE_FEATURES`; vector and one-hot parts pass as they are (the MLP after the
    encoder is their network).
    """

    def __init__(self, layout: ObservationLayout) -> None:
        super().__init__()
        self.sizes = [p.size for p in layout.parts]
        width = DICT_IMAGE_FEATURES if len(layout.parts) > 1 else 512
        self.cnns = nn.ModuleDict()
        self.image_shapes: dict[int, tuple[int, ...]] = {}
        self.features = 0
        for i, part in enumerate(layout.parts):
            if part.kind == "image":
                self.cnns[str(i)] = NatureCNN(part.shape, width)
                self.image_shapes[i] = part.shape
                self.features += width
            else:
                self.features += part.size

    def forward(self, x: Tensor) -> Tensor:
        pieces = []
        for i, piece in enumerate(x.split(self.sizes, dim=1)):
            if i in self.image_shapes:
                piece = self.cnns[str(i)](piece.reshape(len(piece), *self.image_shapes[i]))
            pieces.append(piece)
        return torch.cat(pieces, dim=1) if len(pieces) > 1 else pieces[0]


def observation_encoder(layout: ObservationLayout) -> ObservationEncoder | None:
    """The encoder a layout needs, or None when the MLPs read its flat vector directly (no
    images)."""
    return ObservationEncoder(layout) if layout.has_images else None


__all__ = [
    "DICT_IMAGE_FEATURES",
    "ObservationEncoder",
    "ObservationLayout",
    "ObservationPart",
    "observation_encoder",
]
