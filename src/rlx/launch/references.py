"""The doctor's references, from the layer that knows them: the algorithms' config defaults and
rlx's presets (:mod:`rlx.registry`), rl-baselines3-zoo's presets (:mod:`rlx.launch.zoo`) and
its published agents (:mod:`rlx.launch.zoo_agents`).

:mod:`rlx.diagnostics.references` explains why the doctor is handed them rather than importing
them; :data:`BOOK` is what the faces and the launcher install (:func:`with_references`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from rlx.diagnostics.references import using

F = TypeVar("F", bound=Callable[..., Any])


class RlxReferences:
    """rlx's registry and the zoo's files as the doctor's :class:`References`. A lookup that
    fails (another library's algorithm, an env rlx cannot look up, a file it cannot read)
    gives nothing to compare with, never an error: the doctor reads foreign logs too."""

    def default(self, algo: str, name: str) -> float | None:
        from rlx import registry

        try:
            config = registry.get(algo).config
        except Exception:  # not a registered algorithm (another library's run)
            return None
        for option in dataclasses.fields(config):
            if option.name == name and isinstance(option.default, (int, float)):
                return float(option.default)
        return None

    def presets(self, algo: str, env_id: str) -> list[tuple[str, dict[str, Any]]]:
        from rlx import registry

        found = []
        try:
            name, values = registry.preset_for(registry.get(algo), env_id)
        except Exception:  # not a registered algorithm (another library's run)
            name, values = None, {}
        if name is not None:
            found.append(("rlx's", dict(values)))
        zoo_values = self.zoo_preset(algo, env_id)
        if zoo_values:
            found.append(("rl-baselines3-zoo's", zoo_values))
        return found

    def zoo_preset(self, algo: str, env_id: str) -> dict[str, Any] | None:
        """rl-baselines3-zoo's preset for ``algo`` on ``env_id`` in rlx's fields (None where
        the zoo has none rlx can use)."""
        from rlx.launch import zoo

        if algo not in zoo.ALGORITHMS:
            return None
        try:
            found = zoo.zoo_preset(algo, env_id)
        except Exception:  # no usable entry, a file rlx cannot read, an env it cannot look up
            return None
        return None if found is None else dict(found.values)

    def published(self, env_id: str) -> Mapping[str, Any]:
        from rlx.launch import zoo_agents

        try:
            return zoo_agents.published_for(env_id)
        except Exception:  # the carried file unreadable: no reference, no finding
            return {}


BOOK = RlxReferences()
"""The references every face and the launcher install."""


def with_references(function: F) -> F:
    """``function`` with :data:`BOOK` installed while it runs."""

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with using(BOOK):
            return function(*args, **kwargs)

    return cast(F, wrapped)


__all__ = ["BOOK", "RlxReferences", "with_references"]
