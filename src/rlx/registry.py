"""Algorithm name -> (Config dataclass, train function, load function).

``rlx.train(name, env, **overrides)`` and ``rlx train NAME --env ID --field value`` both look
algorithms up here; the CLI flags are generated from the registered config dataclass.
A built-in algorithm registers itself when its module is imported; :data:`BUILTINS` says which
module that is, so looking up one algorithm imports only its module (a tabular run never
imports torch) and listing the names imports none.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlx.errors import ConfigError, UnknownAlgorithmError


@dataclass(frozen=True)
class Builtin:
    """Where a built-in algorithm lives, and what it is in one line (shown by ``rlx list``
    and ``--help`` without importing it)."""

    module: str
    summary: str


BUILTINS: dict[str, Builtin] = {
    "q-learning": Builtin(
        "rlx.tabular.registered",
        "Q-learning: Q(s,a) += alpha [r + gamma max_a' Q(s',a') - Q(s,a)]",
    ),
    "sarsa": Builtin(
        "rlx.tabular.registered",
        "SARSA: Q(s,a) += alpha [r + gamma Q(s',a') - Q(s,a)] (on-policy)",
    ),
    "expected-sarsa": Builtin(
        "rlx.tabular.registered",
        "Expected SARSA: bootstraps on sum_a' pi(a'|s') Q(s',a')",
    ),
    "double-q": Builtin(
        "rlx.tabular.registered",
        "Double Q-learning: two tables, argmax from one, value from the other",
    ),
    "mc": Builtin(
        "rlx.tabular.registered",
        "Monte Carlo control: epsilon-greedy, returns by the reverse sweep G = r + gamma G",
    ),
    "mc-prediction": Builtin(
        "rlx.tabular.registered",
        "Monte Carlo prediction of a policy's V (default: equiprobable)",
    ),
    "td0": Builtin(
        "rlx.tabular.registered",
        "TD(0) prediction: V(s) += alpha [r + gamma V(s') - V(s)]",
    ),
    "dqn": Builtin(
        "rlx.agents.dqn",
        "DQN / Double DQN: y = r + gamma Q(s', argmax_a' Q(s',a'; theta); theta^-)",
    ),
    "reinforce": Builtin(
        "rlx.agents.reinforce",
        "REINFORCE: grad J = E[(G_t - b(s_t)) grad log pi(a_t|s_t)], whole episodes",
    ),
    "a2c": Builtin(
        "rlx.agents.a2c",
        "A2C: one step of -A log pi + c_v (V - R)^2 / 2 - c_e H per N x T rollout",
    ),
    "ppo": Builtin(
        "rlx.agents.ppo",
        "PPO: min(r A, clip(r, 1-eps, 1+eps) A) over K epochs of minibatches, GAE",
    ),
    "sac": Builtin(
        "rlx.agents.sac",
        "SAC: y = r + gamma (min_k Q_k'(s',a') - alpha log pi(a'|s')), squashed Gaussian",
    ),
    "td3": Builtin(
        "rlx.agents.td3",
        "TD3: y = r + gamma min_k Q_k'(s', clip(mu'(s') + clip(eps))), delayed actor",
    ),
    "alphazero": Builtin(
        "rlx.games.alphazero",
        "AlphaZero: MCTS self-play and a policy/value network (tictactoe, connect4)",
    ),
    "muzero": Builtin(
        "rlx.games.muzero",
        "MuZero: MCTS in a learned model s'=g(s,a), (p,v)=f(s) (tictactoe, connect4)",
    ),
    "sft": Builtin(
        "rlx.llm.stages.sft",
        "supervised fine-tuning of a causal LM on prompt/completion rows",
    ),
    "rm": Builtin(
        "rlx.llm.stages.reward_model",
        "Bradley-Terry reward model on preference pairs (scalar head or bag of words)",
    ),
    "dpo": Builtin(
        "rlx.llm.stages.dpo",
        "Direct Preference Optimisation of a causal LM on preference pairs",
    ),
    "grpo": Builtin(
        "rlx.llm.stages.grpo",
        "GRPO: group-relative policy optimisation of a causal LM with verifier rewards",
    ),
    "rlhf-ppo": Builtin(
        "rlx.llm.stages.rlhf",
        "RLHF-PPO: PPO on a causal LM against a reward model, KL penalty to the SFT model",
    ),
    "grpo-episodes": Builtin(
        "rlx.llm.episode_grpo",
        "GRPO over multi-turn episodes: a causal LM acting in a text env, env tokens masked",
    ),
    "ppo-episodes": Builtin(
        "rlx.llm.episode_ppo",
        "PPO over multi-turn episodes: a causal LM with a value head, GAE over its own tokens",
    ),
}
"""Built-in algorithm name -> the module whose import registers it, and its summary."""

LANGUAGE_MODEL_STAGES = frozenset({"sft", "rm", "dpo", "grpo", "rlhf-ppo"})
"""Built-ins that train a language model (``rlx align``; they need the ``llm`` extra)."""

_REGISTRY: dict[str, Algorithm] = {}


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm.

    Attributes:
        name: the CLI and API name, e.g. ``"q-learning"``.
        config: its frozen config dataclass (standard defaults, docs: Reference > Defaults).
        train: ``train(config, env, run) -> agent``; ``run`` is an open :class:`rlx.runs.Run`.
        load: ``load(config, env_id, state) -> agent`` from a checkpoint's state.
        summary: one line for ``rlx list`` and ``--help`` (a built-in's comes from
            :data:`BUILTINS` when left empty).
        budget_field: the config field that sizes training (``total_steps``, ``episodes``).
        unit: what the budget counts, for the progress bar.
        presets: tuned overrides per environment id (or id pattern such as ``"ALE/*"``),
            applied before the user's overrides; where it keeps none for an env,
            rl-baselines3-zoo's may apply (:mod:`rlx.launch.presets`).
        renamed: old config field name -> new one, so a run folder written before a rename
            still loads and resumes.
        remote: which Ray workers ``runners=K`` starts for it (``"env-runners"`` or
            ``"self-play"``, built by :func:`rlx.distributed.scaled_out`); None: no runners.
    """

    name: str
    config: type
    train: Callable[..., Any]
    load: Callable[..., Any]
    summary: str = ""
    budget_field: str = "total_steps"
    unit: str = "steps"
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    renamed: Mapping[str, str] = field(default_factory=dict)
    remote: str | None = None


def register(algorithm: Algorithm) -> Algorithm:
    """Add an algorithm to the registry (a name can be registered once)."""
    known = _REGISTRY.get(algorithm.name)
    if known is not None and (known.train, known.config) != (algorithm.train, algorithm.config):
        raise ValueError(f"algorithm {algorithm.name!r} is already registered")
    if not algorithm.summary and algorithm.name in BUILTINS:
        algorithm = dataclasses.replace(algorithm, summary=BUILTINS[algorithm.name].summary)
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def _has_llm_extra() -> bool:
    return importlib.util.find_spec("transformers") is not None


def names() -> list[str]:
    """Every algorithm name, sorted: the built-ins this install can run (the language-model
    stages need the ``llm`` extra) and any registered by a plug-in. Imports nothing."""
    builtins = {n for n in BUILTINS if n not in LANGUAGE_MODEL_STAGES or _has_llm_extra()}
    return sorted(builtins | set(_REGISTRY))


def get(name: str) -> Algorithm:
    """The algorithm registered as ``name`` (importing its module on first use); an unknown
    name lists the close ones."""
    key = name.strip().lower().replace("_", "-")
    if key not in _REGISTRY and key in BUILTINS:
        if key in LANGUAGE_MODEL_STAGES and not _has_llm_extra():
            raise ConfigError(f"{key} needs the llm extra: pip install 'rlx[llm]'.")
        importlib.import_module(BUILTINS[key].module)
    if key in _REGISTRY:
        return _REGISTRY[key]
    known = names()
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownAlgorithmError(
        f"unknown algorithm {name!r}; registered: {', '.join(known)}.{hint}"
    )


def summary(name: str) -> str:
    """What an algorithm is, in one line, without importing it when it is a built-in."""
    if name in BUILTINS:
        return BUILTINS[name].summary
    return get(name).summary


def all_algorithms() -> list[Algorithm]:
    """Every algorithm of :func:`names`, imported (for the docs and the checks that need
    every config; slow: it loads torch and, with the extra, transformers)."""
    return [get(name) for name in names()]


def preset_for(algorithm: Algorithm, env_id: str) -> tuple[str | None, dict[str, Any]]:
    """The tuned overrides for ``env_id``, if the algorithm keeps a preset for it: one for
    the id itself, else one for a pattern that matches it (``"ALE/*"``: every Atari game);
    the name returned is the preset's key."""
    if env_id in algorithm.presets:
        return env_id, dict(algorithm.presets[env_id])
    for pattern, preset in algorithm.presets.items():
        if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(env_id, pattern):
            return pattern, dict(preset)
    return None, {}


def config_from_record(algorithm: Algorithm, fields: Mapping[str, Any]) -> Any:
    """The config a run folder's ``config.json`` recorded, with fields renamed since then
    (``algorithm.renamed``) under their new names and fields removed since then dropped."""
    known = {f.name for f in dataclasses.fields(algorithm.config)}
    values = {algorithm.renamed.get(key, key): value for key, value in fields.items()}
    return algorithm.config(**{key: value for key, value in values.items() if key in known})


def make_config(
    algorithm: Algorithm,
    env_id: str,
    overrides: Mapping[str, Any],
    base: Any | None = None,
    *,
    preset: tuple[str | None, Mapping[str, Any]] | None = None,
) -> tuple[Any, str | None]:
    """Build the config: ``base`` (or defaults, then the env preset), then ``overrides``.

    The env preset is ``preset`` (its name and values) when given, else the algorithm's own
    (:func:`preset_for`); :func:`rlx.launch.plan.plan` passes the one :mod:`rlx.launch.presets`
    chose, which falls back on rl-baselines3-zoo's where the algorithm keeps none. Unknown
    field names raise a :class:`ConfigError` that lists the close valid ones.
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
    preset_name, values = preset if preset is not None else preset_for(algorithm, env_id)
    return algorithm.config(**{**values, **overrides}), preset_name
