"""How to build a run's env again: the recipe ``config.json`` records, so that ``rlx eval`` and
``--resume`` rebuild the very env the run trained on, or say plainly that they cannot.

``rlx.train(algo, env, env_kwargs=...)`` takes an env as

- a Gymnasium id (``"CartPole-v1"``), made with ``gymnasium.make(id, **env_kwargs)``;
- an entry point ``"package.module:factory"`` (``--env package.module:factory`` on the command
  line), a function or class called with ``env_kwargs`` that returns a Gymnasium env;
- a callable that returns an env: recorded by its import path when it has one (a module-level
  function or class), else the run trains but cannot be rebuilt;
- an env object: recorded as Gymnasium's own spec of it (``env.spec``, its wrappers included)
  when that spec can be written as JSON, else (a wrapper holding a lambda, an env class that is
  not registered) the run trains but cannot be rebuilt.

A run that cannot be rebuilt records why; evaluating or resuming it without an env then fails
with one sentence that says how to pass the env, never silently using another one (e.g. the
registered id without the run's reward-scaling wrapper).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlx.errors import EnvError

KINDS = ("id", "entry_point", "gymnasium_spec", "unrebuildable")


@dataclass(frozen=True)
class EnvRecipe:
    """One way to build an env again (see the module docstring for the kinds)."""

    kind: str
    target: str = ""
    """the id, the ``module:factory`` entry point, or the JSON of Gymnasium's spec"""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """keyword arguments of ``gymnasium.make`` or of the factory"""
    reason: str = ""
    """why the env cannot be rebuilt (``kind == "unrebuildable"``)"""

    @property
    def rebuildable(self) -> bool:
        return self.kind != "unrebuildable"

    @property
    def label(self) -> str:
        """A short printable name (the id, the entry point, or the spec's id)."""
        if self.kind == "gymnasium_spec":
            return str(json.loads(self.target).get("id", "env"))
        return self.target or "env"

    def make(self) -> Any:
        """A fresh env built by this recipe; EnvError when it cannot be rebuilt."""
        import gymnasium as gym

        if self.kind == "id":
            try:
                return gym.make(self.target, **self.kwargs)
            except gym.error.Error as exc:
                raise EnvError(f"cannot make Gymnasium env {self.target!r}: {exc}") from exc
        if self.kind == "entry_point":
            return _checked_env(load_entry_point(self.target)(**self.kwargs), self.target)
        if self.kind == "gymnasium_spec":
            return gym.make(gym.envs.registration.EnvSpec.from_json(self.target))
        raise EnvError(
            f"this run's env cannot be built again ({self.reason}); pass it: "
            "rlx.evaluate(agent, env) or rlx.train(..., resume=True, env=env) in Python, or "
            "--env package.module:factory [--env-kwargs KEY=VALUE ...] on the command line."
        )

    def record(self) -> dict[str, Any]:
        """The recipe as ``config.json`` keeps it."""
        return {"kind": self.kind, "target": self.target, "kwargs": dict(self.kwargs),
                "reason": self.reason}  # fmt: skip

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> EnvRecipe:
        kind = data.get("kind")
        if kind not in KINDS:
            raise EnvError(f"a recorded env recipe of unknown kind {kind!r}; kinds: {KINDS}.")
        return cls(kind, str(data.get("target", "")), dict(data.get("kwargs") or {}),
                   str(data.get("reason", "")))  # fmt: skip


def is_entry_point(text: str) -> bool:
    """``"package.module:factory"``: a module path, a colon, an attribute path."""
    module, sep, attribute = text.partition(":")
    return bool(sep) and _dotted(module) and _dotted(attribute)


def _dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def load_entry_point(entry_point: str) -> Callable[..., Any]:
    """The object ``"package.module:factory"`` names; EnvError saying what is missing."""
    if not is_entry_point(entry_point):
        raise EnvError(
            f"{entry_point!r} is not an entry point; use package.module:factory (a function or "
            "class that returns a Gymnasium env), or a registered Gymnasium id."
        )
    module_name, _, attribute = entry_point.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise EnvError(f"cannot import {module_name!r} for env {entry_point!r}: {exc}") from exc
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise EnvError(f"module {module_name!r} has no {attribute!r} (env {entry_point!r}).")
        target = getattr(target, part)
    if not callable(target):
        raise EnvError(f"{entry_point!r} is not callable; it must return a Gymnasium env.")
    return target


def _checked_env(env: Any, where: str) -> Any:
    if not all(hasattr(env, name) for name in ("reset", "step", "action_space")):
        raise EnvError(f"{where} returned a {type(env).__name__}, not a Gymnasium env.")
    return env


def import_path(obj: Any) -> str | None:
    """``"module:qualname"`` of a module-level function or class, when importing it gives the
    same object back (not a lambda, not a local function)."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not name or "<" in name or module == "__main__":
        return None
    try:
        return f"{module}:{name}" if load_entry_point(f"{module}:{name}") is obj else None
    except EnvError:
        return None


def is_env_factory(env: Any) -> bool:
    """Whether ``env`` builds envs when called (a function or an env class) rather than being
    an env itself (a class has ``step`` too, as an unbound method)."""
    return callable(env) and (isinstance(env, type) or not hasattr(env, "step"))


def recipe_of(env: Any, env_kwargs: Mapping[str, Any] | None = None) -> EnvRecipe:
    """How to build ``env`` again (see the module docstring)."""
    kwargs = dict(env_kwargs or {})
    if isinstance(env, str):
        kind = "entry_point" if is_entry_point(env) else "id"
        return EnvRecipe(kind, env, kwargs)
    if kwargs and not is_env_factory(env):
        raise EnvError("env_kwargs apply to an id, an entry point or a callable, not to an env "
                       "object that is already made.")  # fmt: skip
    if not is_env_factory(env) and hasattr(env, "step"):
        return _recipe_of_object(env)
    if is_env_factory(env):
        path = import_path(env)
        if path is not None:
            return EnvRecipe("entry_point", path, kwargs)
        return EnvRecipe("unrebuildable", reason=f"the callable {env!r} has no import path")
    # an MDP object, a game, a language-model stage's data: the algorithm reads it as it is
    return EnvRecipe("unrebuildable", reason=f"a {type(env).__name__} is not built from a recipe")


def _recipe_of_object(env: Any) -> EnvRecipe:
    spec = getattr(env, "spec", None)
    if spec is None:
        return EnvRecipe("unrebuildable", reason=f"{type(env).__name__} carries no Gymnasium spec")
    try:
        return EnvRecipe("gymnasium_spec", spec.to_json())
    except (TypeError, ValueError) as exc:
        return EnvRecipe(
            "unrebuildable",
            reason=f"Gymnasium cannot write the spec of {env} as JSON ({exc})",
        )


__all__ = [
    "EnvRecipe",
    "import_path",
    "is_entry_point",
    "is_env_factory",
    "load_entry_point",
    "recipe_of",
]
