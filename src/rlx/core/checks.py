"""Config checks several algorithms share, each failing with one sentence that names the
field, its value and what is valid (raised as :class:`~rlx.errors.ConfigError`).

Written once here so that every config says the same thing about the same mistake; the Ray
fields are checked here too, as plain data: nothing in this module knows a cluster.
"""

from __future__ import annotations

from typing import Any

from rlx.errors import ConfigError


def _owner(config: Any) -> str:
    return type(config).__name__


def at_least(config: Any, name: str, low: float) -> None:
    """``config.<name> >= low``."""
    value = getattr(config, name)
    if value < low:
        raise ConfigError(f"{_owner(config)}: {name}={value} must be >= {low}.")


def positive(config: Any, name: str) -> None:
    """``config.<name> > 0`` (step sizes, temperatures)."""
    value = getattr(config, name)
    if not value > 0:
        raise ConfigError(f"{_owner(config)}: {name}={value} must be > 0.")


def in_range(config: Any, name: str, low: float, high: float) -> None:
    """``low <= config.<name> <= high``."""
    value = getattr(config, name)
    if not low <= value <= high:
        raise ConfigError(f"{_owner(config)}: {name}={value} must be in [{low}, {high}].")


def one_of(config: Any, name: str, choices: tuple[Any, ...]) -> None:
    """``config.<name>`` is one of ``choices``."""
    value = getattr(config, name)
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ConfigError(f"{_owner(config)}: {name}={value!r} must be one of {options}.")


def check_runner_fields(config: Any) -> None:
    """Validate a config's ``runners`` and ``ray_address`` fields, one clear sentence each.

    ``runners`` is None (collect in this process, no Ray) or a whole number >= 1; 0 is an error
    rather than a silent "no Ray", so ``--runners 0`` never quietly does something else.
    """
    name = _owner(config)
    runners = getattr(config, "runners", None)
    address = getattr(config, "ray_address", None)
    if runners is not None and runners < 1:
        raise ConfigError(
            f"{name}: runners={runners} is not valid; use a whole number >= 1 of Ray workers, or "
            "leave runners out (None) to run in this process without Ray."
        )
    if address is not None:
        if runners is None:
            raise ConfigError(
                f"{name}: ray_address={address!r} needs runners >= 1 (the Ray workers to start "
                "on that cluster); add --runners N."
            )
        parse_address(address, name)


def parse_address(address: str, owner: str = "ray_address") -> tuple[str, int] | None:
    """``(host, port)`` of ``HOST:PORT`` or ``ray://HOST:PORT``; None for ``auto``."""
    text = address.strip()
    if text == "auto":
        return None
    bare = text.removeprefix("ray://")
    host, sep, port = bare.rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"{owner}: ray_address={address!r} is not an address; use HOST:PORT of the head "
            "node (its GCS port, 6379 by default), ray://HOST:PORT for Ray Client, or auto."
        )
    return host, int(port)


def check_on_policy_fields(config: Any) -> None:
    """The checks of the hyperparameters the on-policy algorithms share, on the fields a
    config has (its run and runner fields check themselves, :mod:`rlx.core.fields`).

    Also turns ``hidden_sizes`` into a tuple (a run's config.json stores it as a list).
    """
    from rlx.core.policies import ACTIVATIONS  # here: torch only when a config checks

    name = type(config).__name__
    object.__setattr__(config, "hidden_sizes", tuple(int(h) for h in config.hidden_sizes))
    for field in ("num_steps", "num_epochs", "minibatch_size"):
        if hasattr(config, field):
            at_least(config, field, 1)
    in_range(config, "gamma", 0, 1)
    if hasattr(config, "gae_lambda"):
        in_range(config, "gae_lambda", 0, 1)
    positive(config, "learning_rate")
    for field in ("vf_coef", "ent_coef"):
        if hasattr(config, field):
            at_least(config, field, 0)
    for field in ("max_grad_norm", "target_kl", "clip_value"):
        value = getattr(config, field, None)
        if value is not None and value <= 0:
            raise ConfigError(f"{name}: {field}={value} must be > 0, or None to switch it off.")
    if any(h < 1 for h in config.hidden_sizes):
        raise ConfigError(
            f"{name}: hidden_sizes={list(config.hidden_sizes)} must be widths >= 1 "
            "(an empty list gives a linear policy and critic)."
        )
    if getattr(config, "activation", "tanh") not in ACTIVATIONS:
        raise ConfigError(
            f"{name}: activation={config.activation!r} is not one of {', '.join(ACTIVATIONS)}."
        )


def check_off_policy_fields(config: Any) -> None:
    """The checks of the hyperparameters every off-policy config has besides its replay
    fields: ``gamma``, ``tau``, ``hidden_sizes``. Turns ``hidden_sizes`` into a tuple (a
    run's config.json stores it as a list)."""
    name = type(config).__name__
    object.__setattr__(config, "hidden_sizes", tuple(int(h) for h in config.hidden_sizes))
    in_range(config, "gamma", 0.0, 1.0)
    if not 0.0 < config.tau <= 1.0:
        raise ConfigError(
            f"{name}: tau={config.tau} must be in (0, 1]: the step of the target networks "
            "toward the online ones (1 copies them)."
        )
    if not config.hidden_sizes or min(config.hidden_sizes) < 1:
        raise ConfigError(
            f"{name}: hidden_sizes={list(config.hidden_sizes)} needs at least one layer, "
            "each width >= 1."
        )
