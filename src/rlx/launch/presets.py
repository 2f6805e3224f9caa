"""Which per-env preset a new run's config starts from: rlx's own, else rl-baselines3-zoo's.

A new run's config is the algorithm's defaults, then the env's preset, then the user's
overrides (:func:`rlx.launch.plan.plan`). :func:`choose_preset` picks the preset:

1. the algorithm's own (``PRESETS`` in its module, :func:`rlx.registry.preset_for`), tuned
   and benchmarked by rlx: it always wins;
2. else, for a2c, ppo, dqn, sac and td3 on an env Gymnasium registers (classic control,
   Box2D, MuJoCo), rl-baselines3-zoo's entry for that env, translated by :mod:`rlx.launch.zoo`
   (the zoo's ``default`` and ``atari`` entries are never used);
3. else none: the defaults.

The run says which, once: ``config.json`` records ``preset`` (its key), ``preset_source``
(``"rlx"``, or the zoo's version and file, e.g. ``"rl-baselines3-zoo 2.9.2,
hyperparams/dqn.yml"``) and, for the zoo's, ``preset_unfollowed`` (one sentence per setting
rlx cannot follow); a zoo entry rlx cannot use is ``preset_refused``, its sentence. The first
lines the run prints on stderr say the same (:meth:`ChosenPreset.lines`). A resumed run keeps
the config and the record it has: no preset is applied again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlx import registry
from rlx.errors import ConfigError

RLX_SOURCE = "rlx"
"""``preset_source`` of a preset rlx keeps itself."""
RECORD_FIELDS = ("preset_source", "preset_unfollowed", "preset_refused")
"""What ``config.json`` records about the preset besides its name (``preset``)."""


@dataclass(frozen=True)
class ChosenPreset:
    """The preset a new run's config starts from, and where it came from.

    Attributes:
        name: the preset's key (the env id, or a pattern such as ``"ALE/*"``); None: none.
        values: config field -> value.
        source: :data:`RLX_SOURCE`, or the zoo's version and file; None without a preset.
        unfollowed: one sentence per zoo setting rlx cannot follow.
        refused: why the zoo's entry for the env is not used (one sentence), if it has one.
    """

    name: str | None = None
    values: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None
    unfollowed: tuple[str, ...] = ()
    refused: str | None = None

    @property
    def from_zoo(self) -> bool:
        """Whether the preset is rl-baselines3-zoo's."""
        return self.name is not None and self.source not in (None, RLX_SOURCE)

    def record(self) -> dict[str, Any]:
        """The fields ``config.json`` gets beside ``preset`` (:data:`RECORD_FIELDS`)."""
        fields: dict[str, Any] = {}
        if self.name is not None and self.source is not None:
            fields["preset_source"] = self.source
        if self.from_zoo:
            fields["preset_unfollowed"] = list(self.unfollowed)
        if self.refused is not None:
            fields["preset_refused"] = self.refused
        return fields

    def lines(self, algo: str, env_id: str) -> list[str]:
        """What a new run prints about a zoo preset (or a refused zoo entry) as it starts;
        rlx's own presets are silent, as they always were."""
        if self.from_zoo:
            return [
                f"preset for {algo} on {env_id}: {self.source} (rlx keeps none of its own for "
                "it); flags you give override it.",
                *(f"not followed: {sentence}" for sentence in self.unfollowed),
            ]
        if self.refused is not None:
            return [f"{self.refused.rstrip('.')}; {algo} starts from rlx's defaults."]
        return []

    @classmethod
    def from_record(cls, name: str | None, extra: Mapping[str, Any]) -> ChosenPreset:
        """The preset a run folder records (its ``config.json``: ``preset`` and the
        :data:`RECORD_FIELDS` in ``extra``), read as data: what is not text is left out."""
        source = extra.get("preset_source")
        unfollowed = extra.get("preset_unfollowed")
        refused = extra.get("preset_refused")
        return cls(
            name=name if isinstance(name, str) else None,
            source=source if isinstance(source, str) else None,
            unfollowed=tuple(s for s in unfollowed if isinstance(s, str))
            if isinstance(unfollowed, list)
            else (),
            refused=refused if isinstance(refused, str) else None,
        )


NO_PRESET = ChosenPreset()


def choose_preset(spec: registry.Algorithm, env_id: str) -> ChosenPreset:
    """The preset ``spec`` starts from on ``env_id``: its own, else rl-baselines3-zoo's
    (:func:`rlx.launch.zoo.zoo_preset`), else none. A zoo entry (or file) rlx cannot use is
    no preset, its sentence kept in :attr:`ChosenPreset.refused`."""
    name, values = registry.preset_for(spec, env_id)
    if name is not None:
        return ChosenPreset(name, values, RLX_SOURCE)
    from rlx.launch import zoo

    if spec.name not in zoo.ALGORITHMS or not isinstance(env_id, str):
        return NO_PRESET
    try:
        found = zoo.zoo_preset(spec.name, env_id, spec.config)
    except ConfigError as exc:
        return ChosenPreset(refused=str(exc))
    if found is None:
        return NO_PRESET
    return ChosenPreset(env_id, found.values, found.source, found.unfollowed)


def preset_listing(spec: registry.Algorithm) -> str:
    """The presets ``rlx train ALGO --help`` lists: rlx's own, then rl-baselines3-zoo's for
    the envs rlx keeps none for (``"none"`` without either)."""
    from rlx.launch import zoo

    own = ", ".join(spec.presets)
    try:
        borrowed = zoo.zoo_envs(spec.name) if spec.name in zoo.ALGORITHMS else []
        version = zoo.source_for(spec.name).version if borrowed else ""
    except ConfigError:  # a zoo file rlx cannot read: --help lists rlx's own
        borrowed, version = [], ""
    if not borrowed:
        return own or "none"
    zoo_part = f"rl-baselines3-zoo {version}'s: {', '.join(borrowed)}"
    return f"{own}; {zoo_part}" if own else zoo_part
