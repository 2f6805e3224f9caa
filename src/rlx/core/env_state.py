"""The state of a running (vector) env as plain data, so a resumed run continues exactly.

A checkpoint taken in the middle of episodes must carry where each env copy is: its physics
state, its step counter under the time limit, its random generator. Gymnasium's pure-Python
envs (classic control, toy text) and its vector and wrapper classes keep all of that in
numpy arrays, numbers and ``numpy.random.Generator`` attributes, so :func:`env_state` walks
the env, its wrapper chain (``.env``) and its copies (``.envs``) and records those attributes;
:func:`restore_env_state` writes them back into a freshly built env of the same kind.

Envs whose state lives elsewhere (a physics engine's memory, subprocesses of an
``AsyncVectorEnv``) give ``None``: a resumed run then starts new episodes from a reset.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_GENERATOR = "__generator__"
_PLAIN = (bool, int, float, str, type(None))
# attributes that hold engine objects; an env with one of them is not captured
_OPAQUE = ("model", "data", "world", "sim", "_physics", "ale", "processes", "parent_pipes")


def env_state(env: Any) -> dict[str, Any] | None:
    """The plain-data state of ``env`` (nested dicts of arrays, numbers, strings), or None."""
    if _has_opaque_state(env):
        return None
    return _capture(env)


def restore_env_state(env: Any, state: dict[str, Any]) -> None:
    """Write back what :func:`env_state` recorded, into an env built the same way."""
    for name, saved in state.items():
        current: Any = getattr(env, name, None)
        if name == "env":
            restore_env_state(current, saved)
        elif name == "envs":
            if len(current) != len(saved):
                raise ValueError(
                    f"saved state has {len(saved)} env copies, this env {len(current)}."
                )
            for sub, sub_state in zip(current, saved, strict=True):
                restore_env_state(sub, sub_state)
        elif isinstance(saved, dict) and _GENERATOR in saved:
            setattr(env, name, _generator(current, saved[_GENERATOR]))
        elif isinstance(saved, np.ndarray):
            setattr(env, name, saved.copy())
        elif isinstance(current, np.generic) and saved is not None:
            setattr(env, name, type(current)(saved))
        else:
            setattr(env, name, saved)


def _capture(obj: Any) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if name == "env" and hasattr(value, "step"):
            state[name] = _capture(value)
        elif name == "envs" and isinstance(value, (list, tuple)):
            state[name] = [_capture(sub) for sub in value]
        elif isinstance(value, np.random.Generator):
            state[name] = {_GENERATOR: value.bit_generator.state}
        elif isinstance(value, np.ndarray):
            state[name] = value.copy()
        elif isinstance(value, np.generic):
            state[name] = value.item()
        elif isinstance(value, _PLAIN):
            state[name] = value
    return state


def _generator(current: Any, saved: dict[str, Any]) -> np.random.Generator:
    """``current`` set to the saved bit-generator state (a new Generator if there is none)."""
    if not isinstance(current, np.random.Generator):
        current = np.random.Generator(getattr(np.random, saved["bit_generator"])())
    current.bit_generator.state = saved
    return current


def _has_opaque_state(env: Any) -> bool:
    seen = [env]
    while seen:
        obj = seen.pop()
        attrs = vars(obj)
        if any(attrs.get(name) is not None for name in _OPAQUE):
            return True
        if type(obj).__name__ == "AsyncVectorEnv":
            return True
        if hasattr(attrs.get("env"), "step"):
            seen.append(attrs["env"])
        seen.extend(attrs.get("envs", None) or [])
    return False
