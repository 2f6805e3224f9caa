"""Where the networks of a deep agent live: the ``device`` field and the one helper that
resolves it.

``device="auto"`` takes the first accelerator torch can use (CUDA, then Apple's MPS) and
the CPU otherwise, so a machine without one trains exactly as before; ``"cpu"``, ``"cuda"``,
``"cuda:N"`` and ``"mps"`` ask for one. Whatever the device, envs step on the CPU: rollouts and
replay samples move to the device once per update (one transfer of a whole batch), and
actions come back once per vector step, which acting needs anyway. Checkpoints load on any
device: they are read onto the CPU (``map_location``) and copied into networks already on
theirs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rlx.errors import ConfigError

if TYPE_CHECKING:  # torch is imported when a device is resolved, not when a config is read
    import torch

DEVICE_NAMES = ("auto", "cpu", "cuda", "cuda:N", "mps")
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check_device(config: Any, field: str = "device") -> None:
    """A config's device names one torch knows (:data:`DEVICE_NAMES`); whether this machine
    has it is asked when training starts (:func:`resolve_device`), so that a config written
    on one machine can be read on another."""
    name = getattr(config, field)
    if not isinstance(name, str) or not _DEVICE.match(name):
        raise ConfigError(
            f"{type(config).__name__}: {field}={name!r} is not a device; use one of "
            f"{', '.join(DEVICE_NAMES)}."
        )


def available_devices() -> list[str]:
    """The devices torch can use on this machine, CPU last: ``["cuda:0", ..., "cpu"]``."""
    import torch

    found = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if _has_cuda() else []
    if _has_mps():
        found.append("mps")
    return [*found, "cpu"]


def resolve_device(name: str = "auto") -> torch.device:
    """The torch device ``name`` asks for on this machine.

    ``"auto"``: CUDA if torch can use it, then MPS, then the CPU. A named accelerator this
    machine lacks raises :class:`~rlx.errors.ConfigError` naming the ones it has.
    """
    import torch

    if not _DEVICE.match(name):
        raise ConfigError(f"device={name!r} is not a device; use one of {', '.join(DEVICE_NAMES)}.")
    if name == "auto":
        if _has_cuda():
            return torch.device("cuda")
        return torch.device("mps") if _has_mps() else torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda" and not _has_cuda():
        raise _missing(name, "CUDA")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise _missing(name, f"a CUDA device {device.index}")
    if device.type == "mps" and not _has_mps():
        raise _missing(name, "MPS")
    return device


def _missing(name: str, what: str) -> ConfigError:
    return ConfigError(
        f"device={name!r} asks for {what}, which this machine does not have (available: "
        f"{', '.join(available_devices())}); use device='auto' to take what there is."
    )


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _has_mps() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


__all__ = ["DEVICE_NAMES", "available_devices", "check_device", "resolve_device"]
