"""Algorithm name -> (Config dataclass, train function, load function).

``rlx.train(name, env, **overrides)`` and ``rlx train NAME --env ID --field value`` both look
algorithms up here; the CLI flags are generated from the registered config dataclass.
Built-in algorithms register themselves when their module is imported; the modules are
imported on first look-up, so ``import rlx`` stays fast.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlx.errors import ConfigError, UnknownAlgorithmError

# Modules whose import registers built-in algorithms.
_BUILTIN_MODULES: tuple[str, ...] = (
    "rlx.tabular.registered",
    "rlx.agents.dqn",
    "rlx.agents.reinforce",
    "rlx.agents.a2c",
    "rlx.agents.ppo",
    "rlx.agents.sac",
    "rlx.agents.td3",
    "rlx.games.alphazero",
    "rlx.games.muzero",
)
# Registered only when their extra is installed (``rlx[llm]``).
_OPTIONAL_MODULES: tuple[str, ...] = (
    "rlx.llm.stages.sft",
    "rlx.llm.stages.reward_model",
    "rlx.llm.stages.dpo",
    "rlx.llm.stages.grpo",
    "rlx.llm.stages.rlhf",
)
_REGISTRY: dict[str, Algorithm] = {}
_loaded = False


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm.

    Attributes:
        name: the CLI and API name, e.g. ``"q-learning"``.
        config: its frozen config dataclass (defaults from the cheat sheet).
        train: ``train(config, env, run) -> agent``; ``run`` is an open :class:`rlx.runs.Run`.
        load: ``load(config, env_id, state) -> agent`` from a checkpoint's state.
        summary: one line for ``rlx train --help``.
        budget_field: the config field that sizes training (``total_steps``, ``episodes``).
        unit: what the budget counts, for the progress bar.
        presets: tuned overrides per environment id, applied before the user's overrides.
        renamed: old config field name -> new one, so a run folder written before a rename
            still loads and resumes.
        remote: which Ray workers ``runners=K`` starts for it (``"env-runners"`` or
            ``"self-play"``, built by :func:`rlx.distributed.scaled_out`); None: no runners.
    """

    name: str
    config: type
    train: Callable[..., Any]
    load: Callable[..., Any]
    summary: str
    budget_field: str = "total_steps"
    unit: str = "steps"
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    renamed: Mapping[str, str] = field(default_factory=dict)
    remote: str | None = None


def register(algorithm: Algorithm) -> Algorithm:
    """Add an algorithm to the registry (a name can be registered once)."""
    if algorithm.name in _REGISTRY and _REGISTRY[algorithm.name] is not algorithm:
        raise ValueError(f"algorithm {algorithm.name!r} is already registered")
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def _load_builtins() -> None:
    global _loaded
    if not _loaded:
        for module in _BUILTIN_MODULES:
            importlib.import_module(module)
        for module in _OPTIONAL_MODULES:
            if importlib.util.find_spec("transformers") is not None:
                importlib.import_module(module)
        _loaded = True


def names() -> list[str]:
    """Every registered algorithm name, sorted."""
    _load_builtins()
    return sorted(_REGISTRY)


def get(name: str) -> Algorithm:
    """The algorithm registered as ``name``; an unknown name lists the close ones."""
    _load_builtins()
    key = name.strip().lower().replace("_", "-")
    if key in _REGISTRY:
        return _REGISTRY[key]
    close = difflib.get_close_matches(key, list(_REGISTRY), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownAlgorithmError(
        f"unknown algorithm {name!r}; registered: {', '.join(sorted(_REGISTRY))}.{hint}"
    )


def preset_for(algorithm: Algorithm, env_id: str) -> tuple[str | None, dict[str, Any]]:
    """The tuned overrides for ``env_id``, if the algorithm keeps a preset for it."""
    if env_id in algorithm.presets:
        return env_id, dict(algorithm.presets[env_id])
    return None, {}


def config_from_record(algorithm: Algorithm, fields: Mapping[str, Any]) -> Any:
    """The config a run folder's ``config.json`` recorded, with fields renamed since then
    (``algorithm.renamed``) under their new names and fields removed since then dropped."""
    known = {f.name for f in dataclasses.fields(algorithm.config)}
    values = {algorithm.renamed.get(key, key): value for key, value in fields.items()}
    return algorithm.config(**{key: value for key, value in values.items() if key in known})


def make_config(
    algorithm: Algorithm, env_id: str, overrides: Mapping[str, Any], base: Any | None = None
) -> tuple[Any, str | None]:
    """Build the config: ``base`` (or defaults, then the env preset), then ``overrides``.

    Unknown field names raise a :class:`ConfigError` that lists the close valid ones.
    """
    fields = {f.name for f in dataclasses.fields(algorithm.config)}
    for key in overrides:
        if key not in fields:
            close = difflib.get_close_matches(key, sorted(fields), n=3, cutoff=0.5)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(
                f"{algorithm.name} has no config field {key!r}; valid fields: "
                f"{', '.join(sorted(fields))}.{hint}"
            )
    if base is not None:
        return dataclasses.replace(base, **overrides), None
    preset_name, preset = preset_for(algorithm, env_id)
    return algorithm.config(**{**preset, **overrides}), preset_name
