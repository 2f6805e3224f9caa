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

A run folder is data. Run folders travel (papers, model hubs, colleagues), so a recipe read from
one (:meth:`EnvRecipe.from_record`) is hostile input: it is checked strictly, and it builds only
what needs no code of the folder's choosing, as ``transformers`` asks ``trust_remote_code=True``.
A registered Gymnasium id builds freely, and so does a Gymnasium spec whose entry point is the
registered id's own and whose wrappers are Gymnasium's. Everything else that names code (an
entry point, an id naming a module to import, ``"module:Env-v0"``, any other spec) builds only
with the user's consent (``trust_env_code=True``, ``--trust-env-code``), or the user names the
env again. Refusing says, in one sentence, exactly what the folder would import and how to
allow it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rlx.errors import CheckpointError, EnvError
from rlx.runs.files import loads_json

KINDS = ("id", "entry_point", "gymnasium_spec", "unrebuildable")
GYMNASIUM_WRAPPERS = "gymnasium.wrappers"
"""the package of the wrappers a recorded Gymnasium spec may apply without consent"""


@dataclass(frozen=True)
class Consent:
    """The user's own words for what they may pass, where they are: Python arguments or
    command-line flags. Every message that tells a user what to pass (consent to a run
    folder's env code, the env, resuming or starting over, another run folder) is worded by
    one of these, so Python never hears of ``--resume`` nor the command line of
    ``resume=True``."""

    allow: str
    """the argument or flag that gives consent to a run folder's env code"""
    name_env: str
    """how to name the env instead"""
    flags: bool = False
    """True on the command line (``--run-dir DIR``), False in Python (``run_dir=...``)"""

    def arg(self, name: str, value: str | None = None) -> str:
        """How the user passes the argument ``name``: a switch (``value`` None) as
        ``--resume`` or ``resume=True``, else as ``--run-dir DIR`` or ``run_dir=...``
        (``value`` is the command line's placeholder)."""
        if self.flags:
            flag = "--" + name.replace("_", "-")
            return flag if value is None else f"{flag} {value}"
        return f"{name}=True" if value is None else f"{name}=..."

    def option(self, name: str, value: object = None) -> str:
        """The option ``name`` as the user wrote it: ``--heal-max`` on the command line, and in
        Python ``heal_max=2`` with the ``value`` given (``heal_max=`` without one)."""
        if self.flags:
            return "--" + name.replace("_", "-")
        return f"{name}=" if value is None else f"{name}={value!r}"


IN_PYTHON = Consent("trust_env_code=True", "env=...")
ON_THE_COMMAND_LINE = Consent(
    "--trust-env-code", "--env ID or --env package.module:factory", flags=True
)


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
    trusted: bool = field(default=True, compare=False)
    """whether the code this recipe names may run: True for a recipe made in this process from
    the user's own env, False for one read from a run folder until the user consents"""

    @property
    def rebuildable(self) -> bool:
        return self.kind != "unrebuildable"

    @property
    def label(self) -> str:
        """A short printable name (the id, the entry point, or the spec's id)."""
        if self.kind == "gymnasium_spec":
            return str(loads_json(self.target).get("id", "env"))
        return self.target or "env"

    def make(self) -> Any:
        """A fresh env built by this recipe; EnvError when it cannot be rebuilt, or when it
        would run code a run folder names without the user's consent."""
        import gymnasium as gym

        if self.kind != "unrebuildable" and not self.trusted:
            self.cleared()  # raises when the recipe names code
        if self.kind == "id":
            try:
                return gym.make(self.target, **self.kwargs)
            except gym.error.Error as exc:
                raise EnvError(f"cannot make Gymnasium env {self.target!r}: {exc}") from exc
            except KWARG_ERRORS as exc:
                raise kwargs_error(self.target, self.kwargs, exc) from exc
        if self.kind == "entry_point":
            factory = load_entry_point(self.target)
            try:
                env = factory(**self.kwargs)
            except KWARG_ERRORS as exc:
                raise kwargs_error(self.target, self.kwargs, exc, factory) from exc
            return _checked_env(env, self.target)
        if self.kind == "gymnasium_spec":
            return gym.make(gym.envs.registration.EnvSpec.from_json(self.target))
        raise EnvError(
            f"this run's env cannot be built again ({self.reason}); pass it: "
            "rlx.evaluate(agent, env) or rlx.train(..., resume=True, env=env) in Python, or "
            "--env package.module:factory [--env-kwargs KEY=VALUE ...] on the command line."
        )

    @property
    def as_env(self) -> Any:
        """What training and evaluation take: a plain id without keywords as the id itself (so
        that it gets the env's native vector version, and Atari's preprocessing), else the
        recipe."""
        return self.target if self.kind == "id" and not self.kwargs else self

    def code(self) -> list[str]:
        """What building this env would import and call that is not Gymnasium's own registered
        env, one phrase each (empty: a registered id, or a spec the registered id's own spec
        agrees with)."""
        if self.kind == "entry_point":
            return [f"import and call {self.target!r} with {dict(self.kwargs)!r}"]
        module = module_of_id(self.target) if self.kind == "id" else None
        if module is not None:
            return [f"import the module {module!r} that the Gymnasium id {self.target!r} names"]
        if self.kind == "gymnasium_spec":
            return _spec_code(loads_json(self.target))
        return []

    def cleared(
        self,
        trust_env_code: bool = False,
        consent: Consent = IN_PYTHON,
        source: str = "this run folder",
    ) -> EnvRecipe:
        """This recipe, cleared to build: as it is when it names no code (or is trusted
        already), trusted when the user consents (``trust_env_code``); else an EnvError that
        names what ``source`` would import and how to allow it, in ``consent``'s words. An
        env that cannot be rebuilt raises its own error, which says how to pass it."""
        if not self.rebuildable:
            self.make()  # raises, saying how to pass the env
        if self.trusted:
            return self
        code = self.code()
        if code and not trust_env_code:
            raise EnvError(
                f"{source} would {' and '.join(code)} to build its env, code that rlx runs "
                f"only with your consent: pass {consent.allow} if you trust the folder, or "
                f"name the env yourself ({consent.name_env})."
            )
        return replace(self, trusted=True)

    def record(self) -> dict[str, Any]:
        """The recipe as ``config.json`` keeps it."""
        return {"kind": self.kind, "target": self.target, "kwargs": dict(self.kwargs),
                "reason": self.reason}  # fmt: skip

    @classmethod
    def from_record(cls, data: Any) -> EnvRecipe:
        """The recipe a run folder's ``config.json`` records, checked as hostile data (kinds,
        types, the shape of a Gymnasium spec) and not trusted: building it runs no code the
        folder names until :meth:`cleared` with the user's consent. CheckpointError when the
        record is malformed. Nothing is imported here."""
        if not isinstance(data, Mapping):
            raise _malformed(f"is a {type(data).__name__}, not a JSON object")
        kind = data.get("kind")
        if not isinstance(kind, str) or kind not in KINDS:
            raise _malformed(f"has the unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
        target, kwargs, reason = data.get("target", ""), data.get("kwargs"), data.get("reason", "")
        kwargs = {} if kwargs is None else kwargs
        for name, value in (("target", target), ("reason", reason)):
            if not isinstance(value, str):
                raise _malformed(f"has a {name} of type {type(value).__name__}, not text")
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise _malformed(f"has kwargs of type {type(kwargs).__name__}, not a JSON object")
        if kind in ("id", "entry_point", "gymnasium_spec") and not target:
            raise _malformed(f"of kind {kind!r} has no target")
        if kind == "entry_point" and not is_entry_point(target):
            raise _malformed(f"names the entry point {target!r}, not package.module:factory")
        if kind == "gymnasium_spec":
            _check_spec(target)
            if kwargs:
                raise _malformed("of kind 'gymnasium_spec' has kwargs; they belong in the spec")
        return cls(kind, target, dict(kwargs), reason, trusted=False)


def _malformed(what: str) -> CheckpointError:
    return CheckpointError(
        f"the env recipe in this run folder's config.json {what}; the folder is damaged or was "
        "not written by rlx: pass the env yourself (env=..., --env)."
    )


def module_of_id(env_id: str) -> str | None:
    """The module a Gymnasium id ``"module:Env-v0"`` makes ``gymnasium.make`` import (None for
    a plain id, and for ``openspiel:<game>``, which names a board game, not a module)."""
    if ":" not in env_id or _is_game_id(env_id):
        return None
    return env_id.split(":", 1)[0]


def _is_game_id(env_id: str) -> bool:
    """``openspiel:<game>``: a board game :func:`rlx.games.make` loads by name."""
    return env_id.strip().lower().startswith("openspiel:")


def _check_spec(target: str) -> None:
    """A recorded Gymnasium spec is a JSON object of the shape ``EnvSpec.to_json`` writes."""
    from gymnasium.envs.registration import EnvSpec

    try:
        spec = loads_json(target)
    except ValueError:
        raise _malformed("holds a Gymnasium spec that is not JSON") from None
    if not isinstance(spec, dict):
        raise _malformed("holds a Gymnasium spec that is not a JSON object")
    checks = (("id", str), ("entry_point", str), ("kwargs", dict), ("additional_wrappers", list))
    for name, kind in checks:
        if not isinstance(spec.get(name), kind):
            raise _malformed(f"holds a Gymnasium spec whose {name} is not a {kind.__name__}")
    if spec.get("vector_entry_point") is not None and not isinstance(
        spec["vector_entry_point"], str
    ):
        raise _malformed("holds a Gymnasium spec whose vector_entry_point is not text")
    for wrapper in spec["additional_wrappers"]:
        if not (
            isinstance(wrapper, dict)
            and isinstance(wrapper.get("entry_point"), str)
            and isinstance(wrapper.get("kwargs") or {}, dict)
        ):
            raise _malformed("holds a Gymnasium spec with a wrapper that is not "
                             "{name, entry_point, kwargs}")  # fmt: skip
    try:
        EnvSpec.from_json(target)  # parses only: nothing is imported
    except Exception as exc:  # any malformed field: the message says which
        raise _malformed(f"holds a Gymnasium spec Gymnasium cannot read ({exc})") from None


def _spec_code(spec: dict[str, Any]) -> list[str]:
    """What a recorded Gymnasium spec would import and call beyond the registered id's own
    spec and Gymnasium's wrappers."""
    import gymnasium as gym

    env_id = spec["id"]
    registered = gym.envs.registry.get(env_id)  # a lookup: gym.spec would import "module:"
    code = []
    if registered is None or registered.entry_point != spec["entry_point"]:
        known = (
            "an id not registered here"
            if registered is None
            else f"registered as {registered.entry_point!r}"
        )
        code.append(
            f"import and call {spec['entry_point']!r} with {spec['kwargs']!r} (the entry point "
            f"its Gymnasium spec records for {env_id!r}, {known})"
        )
    vector = spec.get("vector_entry_point")
    if vector is not None and (registered is None or registered.vector_entry_point != vector):
        code.append(f"import {vector!r} (the vector entry point its Gymnasium spec records)")
    for wrapper in spec["additional_wrappers"]:
        entry_point = wrapper["entry_point"]
        module = entry_point.partition(":")[0]
        if module != GYMNASIUM_WRAPPERS and not module.startswith(GYMNASIUM_WRAPPERS + "."):
            kwargs = wrapper.get("kwargs") or {}
            code.append(
                f"import and call {entry_point!r} with {kwargs!r} (a wrapper its Gymnasium spec "
                "records)"
            )
    return code


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


KWARG_ERRORS = (TypeError, ValueError, KeyError, AssertionError)
"""What an env's constructor raises for keyword arguments it does not take or values it
refuses (an unexpected keyword, a map name it does not know, a failed check)."""
MAKE_KEYWORDS = ("max_episode_steps", "disable_env_checker")
"""Keyword arguments ``gymnasium.make`` takes itself, whatever the env."""


def kwargs_error(
    target: str, kwargs: Mapping[str, Any], exc: BaseException, factory: Any = None
) -> EnvError:
    """The EnvError for an env that ``kwargs`` could not build: the keyword it does not take
    (with the ones it does), or the value it refused, naming the env.

    Only for an env given keyword arguments: the same error without them is the env's own
    bug, not the user's mistake, and is left as it is."""
    given = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
    accepted = _keywords(target, factory)
    unknown = [key for key in kwargs if accepted is not None and key not in accepted]
    if unknown:
        valid = ", ".join(accepted) if accepted else "none"
        return EnvError(
            f"{target} takes no keyword argument {unknown[0]!r} (given {given}); its keyword "
            f"arguments are: {valid}."
        )
    reason = str(exc).strip() or type(exc).__name__
    if isinstance(exc, KeyError):
        reason = f"no such choice {reason}"
    return EnvError(f"{target} cannot be made with {given} ({reason}).")


def _keywords(target: str, factory: Any = None) -> list[str] | None:
    """The keyword arguments ``target`` (a Gymnasium id, or the ``factory`` of an entry
    point) takes, or None when its signature does not say (it takes ``**kwargs``)."""
    import inspect

    extra: tuple[str, ...] = ()
    if factory is None:
        import gymnasium as gym
        from gymnasium.envs.registration import load_env_creator

        try:
            spec = gym.spec(target)
            factory = spec.entry_point
            factory = load_env_creator(factory) if isinstance(factory, str) else factory
        except Exception:  # no such id, or an entry point that does not import: say nothing
            return None
        extra = MAKE_KEYWORDS
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return [*named, *extra]


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
        # "openspiel:<game>" reads as an entry point but names a board game (rlx.games.make)
        kind = "entry_point" if is_entry_point(env) and not _is_game_id(env) else "id"
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
    "IN_PYTHON",
    "KWARG_ERRORS",
    "ON_THE_COMMAND_LINE",
    "Consent",
    "EnvRecipe",
    "import_path",
    "is_entry_point",
    "is_env_factory",
    "kwargs_error",
    "load_entry_point",
    "module_of_id",
    "recipe_of",
]
