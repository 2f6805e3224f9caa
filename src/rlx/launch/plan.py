"""Resolve a run once (the algorithm, its config, its env, its folder) and carry it out.

:func:`plan` decides everything before a run starts: the algorithm, its config from defaults,
the env's preset (rlx's own, else rl-baselines3-zoo's: :mod:`rlx.launch.presets`), overrides
or the resumed run's record (``config.json``, read here once), the env and how to build it
again, and what to do with the run folder. :func:`train_planned`
carries the :class:`Plan` out. ``rlx.train`` (:mod:`rlx.api`), the CLI, seed groups
(:mod:`rlx.launch.seed_groups`) and healing (:mod:`rlx.launch.heal`) all train through these two,
so a config is resolved in one place.

A run folder can always be used again: one that holds a run with a checkpoint is continued
(``resume=True``) or started over (``overwrite=True``); one whose run ended before its first
checkpoint holds nothing to continue, so a plain rerun (or a resume) starts over in it, saying
so in one line. :func:`load` (``rlx.load``) reads a run back: the agent of its checkpoint,
with the config and the env recipe its folder records (:func:`recorded_config`,
:func:`recorded_recipe`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import sys
import time
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rlx import registry
from rlx.core.env_recipe import (
    IN_PYTHON,
    Consent,
    EnvRecipe,
    import_path,
    is_env_factory,
    recipe_of,
)
from rlx.errors import CheckpointError, ConfigError, RLXError, RunError
from rlx.launch.presets import NO_PRESET, ChosenPreset, choose_preset
from rlx.launch.references import with_references
from rlx.runs import CONFIG_FILE, SUMMARY_FILE, RunRecord, read_record
from rlx.runs.folder import has_checkpoint, inspect_folder
from rlx.runs.handle import RunHandle


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything decided before a run starts."""

    spec: registry.Algorithm
    config: Any
    env: Any
    env_id: str
    run_dir: Path
    preset: str | None = None
    resume: RunRecord | None = None
    recipe: EnvRecipe | None = None
    """how to build the env again, for config.json (see :mod:`rlx.core.env_recipe`)"""
    overwrite: bool = False
    """start over in ``run_dir``: the run it holds is replaced once this one has started"""
    note: str | None = None
    """one line for the user about the folder, printed on stderr as the run starts"""
    command: str | None = None
    """what asked for the run (the command line, or the Python call), for config.json's
    history"""
    resume_from: Path | None = None
    """with ``resume``: the step checkpoint to continue from instead of the latest (later logs
    and checkpoints are cut, :class:`rlx.runs.Run`)"""
    record: dict[str, Any] | None = None
    """more fields for config.json (a healed run's lineage, :mod:`rlx.launch.heal`)"""
    history: dict[str, Any] | None = None
    """more fields for this opening's entry in config.json's history"""
    chosen_preset: ChosenPreset | None = None
    """the preset's source, what of it rlx does not follow (config.json and the first lines
    on stderr; :mod:`rlx.launch.presets`)"""
    checkpoint_at_start: bool = False
    """a new run checkpoints before its first update (a run that heals: :mod:`rlx.launch.heal`)"""
    wall_offset: float | None = None
    """the seconds the run trained before this stretch, when the run folder's rows do not
    tell them (a healing run after a rollback; :class:`rlx.runs.Run`)"""


def env_label(env: Any) -> str:
    """A printable id for an env given as an id, an entry point, a recipe, a callable, a
    Gymnasium env, or a TabularMDP."""
    if isinstance(env, (str, Path)):
        return str(env)
    if isinstance(env, EnvRecipe):
        return env.label
    if is_env_factory(env):
        path = import_path(env)
        return path if path else getattr(env, "__name__", type(env).__name__)
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return spec.id
    return getattr(env, "name", None) or type(env).__name__


def default_run_dir(algo: str, env_id: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.-]+", "-", env_id).strip("-") or "env"
    return Path("runs") / f"{algo}-{slug}-{time.strftime('%Y%m%d-%H%M%S')}"


def plan(
    algo: str,
    env: Any = None,
    *,
    run_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    overrides: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    trust_env_code: bool = False,
    consent: Consent = IN_PYTHON,
    resume_from: str | Path | int | None = None,
) -> Plan:
    """Resolve a run once: the algorithm, the config, the env and where it is written.

    A new run's config is the defaults, then the env's preset (rlx's own, else
    rl-baselines3-zoo's: :func:`rlx.launch.presets.choose_preset`), then ``overrides``; a
    resumed run's is its ``config.json`` (read here, once; no preset is applied again), then
    ``overrides`` (e.g. a larger budget),
    and its env is the recorded one (rebuilt from its recipe) unless ``env`` is given.
    ``env_kwargs`` go to ``gymnasium.make`` or to the ``module:factory`` entry point.
    Rebuilding a recorded env from code the folder names needs ``trust_env_code``
    (:func:`recorded_env`). ``overwrite`` starts over in a folder holding an rlx run. A
    folder whose run ended before its first checkpoint is started over in, by a new run or a
    resume alike (:attr:`Plan.note` says so). ``consent`` words every refusal for where the
    user is (Python arguments or command-line flags). ``resume_from`` (with ``resume``): the
    step checkpoint to continue from, its step or file, instead of the latest.
    """
    spec = registry.get(algo)
    overrides = dict(overrides or {})
    if resume and overwrite:
        raise ConfigError(
            f"{consent.arg('resume')} continues the run and {consent.arg('overwrite')} deletes "
            "it; pass one of them."
        )
    if resume_from is not None and not resume:
        raise ConfigError(
            f"{consent.arg('resume_from', 'CHECKPOINT')} names the checkpoint a resumed run "
            f"continues from; pass {consent.arg('resume')} too."
        )
    if resume:
        planned = _resume_plan(spec, env, run_dir, overrides, env_kwargs, trust_env_code, consent)
        if resume_from is None or planned.resume is None:
            return planned
        from rlx.runs.checkpoints import step_checkpoint

        _, chosen = step_checkpoint(planned.run_dir, resume_from)  # refused before anything runs
        return dataclasses.replace(planned, resume_from=chosen)
    if env is None:
        raise ConfigError(f"{spec.name} needs an environment ({consent.name_env}).")
    if "data" not in overrides and _takes_a_data_file(spec, env):
        # language-model stages: rlx.train("sft", "sft.jsonl", model=...) trains on the file
        overrides["data"] = str(env)
    env, recipe = env_and_recipe(env, env_kwargs)
    env_id = env_label(env)
    config, preset = configured(spec, env_id, overrides)
    if run_dir is None and world_size() > 1:
        # each process would stamp its own default name at its own second
        raise RunError(
            f"Under torchrun ({world_size()} processes) every process must write to one run "
            f"folder: pass {consent.arg('run_dir', 'DIR')}."
        )
    folder = Path(run_dir) if run_dir is not None else default_run_dir(spec.name, env_id)
    replace, note = _folder_for_a_new_run(folder, overwrite, consent)
    return Plan(spec, config, env, env_id, folder, preset.name, None, recipe, replace, note,
                chosen_preset=preset)  # fmt: skip


def _resume_plan(
    spec: registry.Algorithm,
    env: Any,
    run_dir: str | Path | None,
    overrides: dict[str, Any],
    env_kwargs: dict[str, Any] | None,
    trust_env_code: bool,
    consent: Consent,
) -> Plan:
    """The plan of ``resume``: the run's record, its config with ``overrides``, its env."""
    if run_dir is None:
        raise RunError(
            f"{consent.arg('resume')} needs the run folder to continue "
            f"({consent.arg('run_dir', 'DIR')})."
        )
    state = inspect_folder(run_dir)
    if state.kind in ("new", "files"):
        raise RunError(
            f"{consent.arg('resume')} needs an existing run folder, but {run_dir} has no "
            f"{CONFIG_FILE}."
        )
    if state.record is None:
        raise RunError(f"{consent.arg('resume')} cannot continue {run_dir}: {state.reason}.")
    record = state.record
    if record.algo != spec.name:
        raise RunError(
            f"{run_dir} holds a {record.algo!r} run, not a {spec.name!r} one: continue it as "
            f"{record.algo}, or start {spec.name} in another folder."
        )
    base = recorded_config(spec, record, given=list(overrides), consent=consent, warn=True)
    config, _ = checked_config(spec, record.env, overrides, base=base)
    if env is None:
        env, recipe = recorded_env(record, trust_env_code=trust_env_code, consent=consent)
    else:
        env, recipe = env_and_recipe(env, env_kwargs)
    folder = Path(run_dir)
    recorded = ChosenPreset.from_record(record.preset, record.extra)  # kept, not applied again
    if state.kind == "unstarted":
        note = (
            f"{folder} holds a run that {_how_it_ended(folder)}, so there is nothing to "
            "resume: starting it over."
        )
        return Plan(spec, config, env, env_label(env), folder, record.preset, None, recipe,
                    overwrite=True, note=note, chosen_preset=recorded)  # fmt: skip
    return Plan(spec, config, env, env_label(env), folder, record.preset, record, recipe,
                chosen_preset=recorded)  # fmt: skip


def _folder_for_a_new_run(
    folder: Path, overwrite: bool, consent: Consent
) -> tuple[bool, str | None]:
    """Whether a new run in ``folder`` replaces the run there, and the line that says so;
    a RunError, worded by ``consent``, for a folder it may not use."""
    state = inspect_folder(folder)
    another = f"choose another folder ({consent.arg('run_dir', 'DIR')})"
    if state.kind == "run":
        if overwrite:
            return True, None
        raise RunError(
            f"{folder} already holds a run; pass {consent.arg('resume')} to continue it, "
            f"{consent.arg('overwrite')} to start over in it, or {another}."
        )
    if state.kind == "unstarted":
        note = None if overwrite else (
            f"{folder} holds a run that {_how_it_ended(folder)}; starting over in it."
        )  # fmt: skip
        return True, note
    if state.kind == "foreign":
        raise RunError(f"{folder} is not an rlx run folder ({state.reason}); {another}.")
    if state.kind == "files" and overwrite:
        raise RunError(
            f"{consent.arg('overwrite')} starts over only in an rlx run folder, and {folder} is "
            f"not one ({state.reason}); {another}."
        )
    return False, None


def _how_it_ended(folder: Path) -> str:
    """How a run without a checkpoint ended, as far as its folder tells: a run killed (SIGKILL,
    a power cut) leaves no ``summary.json``."""
    if (folder / SUMMARY_FILE).exists():
        return "ended before its first checkpoint"
    return "was killed before its first checkpoint (it left no summary.json)"


def _takes_a_data_file(spec: registry.Algorithm, env: Any) -> bool:
    """Whether ``spec`` trains on a data file (its config has ``data``) and ``env`` names one."""
    fields = {f.name for f in dataclasses.fields(spec.config)}
    return "data" in fields and isinstance(env, (str, Path))


def checked_config(
    spec: registry.Algorithm, env_id: str, overrides: dict[str, Any], base: Any | None = None
) -> tuple[Any, str | None]:
    """The config (:func:`configured`) and the name of the preset it started from."""
    config, chosen = configured(spec, env_id, overrides, base)
    return config, chosen.name


def configured(
    spec: registry.Algorithm, env_id: str, overrides: dict[str, Any], base: Any | None = None
) -> tuple[Any, ChosenPreset]:
    """The config (:func:`rlx.registry.make_config`), its overrides checked against the
    fields' names and types first, and the preset it started from
    (:func:`rlx.launch.presets.choose_preset`; none on top of ``base``). A config that a
    zoo preset's values make invalid with the overrides says which of them it set."""
    check_names(spec, overrides)
    check_types(spec, overrides, where="")
    chosen = NO_PRESET if base is not None else choose_preset(spec, env_id)
    with user_words(spec):
        try:
            config, _ = registry.make_config(
                spec, env_id, overrides, base=base, preset=(chosen.name, chosen.values)
            )
        except ConfigError as exc:
            raise _naming_the_preset(exc, chosen, env_id, overrides) from exc
    return config, chosen


def _naming_the_preset(
    exc: ConfigError, chosen: ChosenPreset, env_id: str, overrides: dict[str, Any]
) -> ConfigError:
    """``exc`` with the zoo preset's values it names (fields the user did not set), so the
    user sees where they came from and that a flag overrides them."""
    message = str(exc)
    named = [
        f"{name}={value!r}"
        for name, value in chosen.values.items()
        if name not in overrides and re.search(rf"\b{re.escape(name)}\b", message)
    ]
    if not chosen.from_zoo or not named:
        return exc
    return type(exc)(
        f"{message.rstrip('.')} (rl-baselines3-zoo's preset for {env_id} set "
        f"{', '.join(named)}; give them too to change them)."
    )


def check_names(spec: registry.Algorithm, values: dict[str, Any]) -> None:
    """Each name in ``values`` is a field of the algorithm's config; ConfigError naming the
    first that is not, with the close ones (``lr`` -> ``learning_rate``)."""
    from rlx.flags import suggest

    fields = [f.name for f in dataclasses.fields(spec.config)]
    for name in values:
        if name not in fields:
            close = suggest(name, fields)
            hint = f"; did you mean {' or '.join(close)}?" if close else "."
            raise ConfigError(
                f"{spec.name} has no config field {name!r}{hint} Its fields: {', '.join(fields)}."
            )


def check_types(spec: registry.Algorithm, values: dict[str, Any], where: str) -> None:
    """Each value in ``values`` has its config field's type (a list for a tuple, an int for a
    float); ConfigError naming the first that does not (RunError for a record, ``where``
    naming its file)."""
    import typing

    hints = typing.get_type_hints(spec.config)
    for name, value in values.items():
        if name in hints and not _has_type(value, hints[name]):
            expected = _type_name(hints[name])
            if where:
                raise RunError(
                    f"{where} records {name}={value!r}, not {expected}; the folder is damaged "
                    "or was written by another program."
                )
            raise ConfigError(f"{name}={value!r} must be {expected} (got {type(value).__name__}).")


def _has_type(value: Any, annotation: Any) -> bool:
    import numbers
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return True
    if origin is typing.Union or isinstance(annotation, types.UnionType):
        return any(_has_type(value, arg) for arg in args)
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, (str, os.PathLike))  # a path for a model or data field
    if origin is typing.Literal:
        return value in args
    if origin is tuple:  # a list where JSON or the user wrote one
        if not isinstance(value, (tuple, list)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_has_type(v, args[0]) for v in value)
        return len(value) == len(args) and all(map(_has_type, value, args))
    if isinstance(annotation, type):
        return isinstance(value, annotation) or (annotation is Path and isinstance(value, str))
    return True  # a type this check does not know: the config's own checks decide


def _type_name(annotation: Any) -> str:
    import typing

    names = {int: "a whole number", float: "a number", str: "text", bool: "True or False",
             type(None): "None"}  # fmt: skip
    plurals = {int: "whole numbers", float: "numbers", str: "texts", bool: "booleans"}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in names:
        return names[annotation]
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is tuple:
        return f"a tuple of {plurals.get(args[0], 'values')}" if args else "a tuple"
    if args:
        return " or ".join(_type_name(arg) for arg in args)
    return getattr(annotation, "__name__", str(annotation))


@contextlib.contextmanager
def user_words(spec: registry.Algorithm) -> Iterator[None]:
    """A config's own error without its class name: ``PPOConfig: gamma=1.5 must be ...`` as
    ``gamma=1.5 must be ...`` (the field checks of :mod:`rlx.core.checks` name the config
    class, which the user never wrote)."""
    try:
        yield
    except ConfigError as exc:
        prefix = f"{spec.config.__name__}: "
        message = str(exc)
        if not message.startswith(prefix):
            raise
        raise type(exc)(message[len(prefix) :]) from exc.__cause__


def world_size() -> int:
    """The number of processes of a ``torchrun`` / ``accelerate launch`` job (1 without)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_first_process() -> bool:
    """Whether this process writes the run folder: rank 0 of a data-parallel job, or the one
    process of a plain run."""
    return int(os.environ.get("RANK", "0")) == 0


def env_and_recipe(env: Any, env_kwargs: dict[str, Any] | None) -> tuple[Any, EnvRecipe]:
    """What the algorithm trains on, and how to build it again. A plain id without keywords
    reaches the algorithm as the id (games and data files are ids too); an entry point or an
    id with keywords as its recipe; an object or a callable as itself."""
    recipe = recipe_of(env, env_kwargs)
    if isinstance(env, str) and (recipe.kind == "entry_point" or env_kwargs):
        return recipe, recipe
    if isinstance(env, Path):
        return str(env), recipe
    if is_env_factory(env) and env_kwargs:
        return functools.partial(env, **env_kwargs), recipe
    return env, recipe


def recorded_env(
    record: RunRecord, *, trust_env_code: bool = False, consent: Consent = IN_PYTHON
) -> tuple[Any, EnvRecipe | None]:
    """A run folder's env, to be rebuilt from the recipe its ``config.json`` holds (runs
    written before recipes were recorded: their env id), and that recipe.

    Nothing is built or imported here. A recipe that names code (an entry point, an id
    ``"module:Env-v0"``, a Gymnasium spec that is not the registered one) needs
    ``trust_env_code``; without it, and for an env that cannot be rebuilt, an EnvError says
    what the folder would import and how to allow it (``consent``'s words), or how to pass
    the env."""
    recipe = recorded_recipe(record)
    cleared = recipe.cleared(trust_env_code, consent, source=f"the run folder {record.path}")
    has_recipe = record.extra.get("env_recipe") is not None
    return cleared.as_env, cleared if has_recipe else None


USER_ONLY_FIELDS: dict[str, Any] = {"ray_address": None, "allow_unisolated": False}
"""Config fields only the user sets, on the command (or call) that trains: joining a Ray
cluster (``ray_address``) and running model-written code without isolation
(``allow_unisolated``). A value a folder records for one (a run folder's ``config.json`` on a
resume, a heal or a load; a study's ``best.yaml`` or a run's ``config.json`` given as
``--config``) is data from whoever wrote the folder: it is dropped back to the default, with
one line naming the flag that keeps it (:func:`without_user_only`)."""


def without_user_only(
    values: dict[str, Any],
    where: str,
    *,
    given: Sequence[str] = (),
    consent: Consent = IN_PYTHON,
    warn: bool = True,
) -> dict[str, Any]:
    """``values`` (config fields ``where`` records) without what :data:`USER_ONLY_FIELDS` the
    user must set: each recorded value other than the default is left out, and, with
    ``warn``, named on stderr with the flag (in ``consent``'s words) that keeps it, unless the
    user gives that field now (``given``)."""
    kept = dict(values)
    for name, default in USER_ONLY_FIELDS.items():
        if name not in kept or kept[name] == default:
            continue
        value = kept.pop(name)
        if warn and name not in given:
            if isinstance(default, bool):
                flag = consent.arg(name)  # --allow-unisolated, allow_unisolated=True
            elif consent.flags:
                flag = consent.arg(name, str(value))  # --ray-address HOST:PORT
            else:
                flag = f"{name}={value!r}"
            print(
                f"warning: {where} records {name}={value!r}, which rlx takes only from you: it "
                f"is left at {default!r}; pass {flag} on this command to keep it.",
                file=sys.stderr,
            )
    return kept


def recorded_config(
    spec: registry.Algorithm,
    record: RunRecord,
    *,
    given: Sequence[str] = (),
    consent: Consent = IN_PYTHON,
    warn: bool = False,
) -> Any:
    """The config a run folder's ``config.json`` records, its values checked as data first:
    RunError naming the file when one is not what its field takes. What only the user sets
    (:data:`USER_ONLY_FIELDS`) is left at its default (:func:`without_user_only`: ``given``,
    ``consent`` and ``warn`` as there)."""
    where = str(record.path / CONFIG_FILE)
    known = {f.name for f in dataclasses.fields(spec.config)}
    values = {spec.renamed.get(key, key): value for key, value in record.config.items()}
    check_types(spec, {k: v for k, v in values.items() if k in known}, where=where)
    values = without_user_only(values, where, given=given, consent=consent, warn=warn)
    try:
        with user_words(spec):
            return registry.config_from_record(spec, values)
    except ConfigError as exc:
        raise RunError(f"{where} records a config rlx cannot use: {exc}") from exc


def recorded_recipe(record: RunRecord) -> EnvRecipe:
    """The recipe a run folder records, checked as hostile data and not trusted; a run
    written before recipes were recorded gets one of its env id."""
    data = record.extra.get("env_recipe")
    if data is None:
        return EnvRecipe("id", record.env, trusted=False)
    return EnvRecipe.from_record(data)


def python_call(algo: str, env: Any = None, **arguments: Any) -> str:
    """``rlx.train(...)`` as written, for a run's history (arguments left at their default
    omitted)."""
    parts = [repr(algo)]
    if env is not None:
        parts.append(repr(str(env)) if isinstance(env, (str, Path)) else env_label(env))
    for name, value in arguments.items():
        if value is None or value is False:
            continue
        parts.append(f"{name}={str(value) if isinstance(value, Path) else value!r}")
    return f"rlx.train({', '.join(parts)})"


@with_references  # the live doctor compares the run with rlx's references
def train_planned(
    planned: Plan,
    *,
    progress: bool | None = None,
    tensorboard: bool = False,
    wandb: bool = False,
    stop_on: tuple[str, ...] | list[str] = (),
    doctor: bool = True,
    callbacks: Sequence[Any] = (),
    live_doctor: Any = None,
) -> Any:
    """Carry out a :class:`Plan`: open the run folder, attach the live doctor and the
    ``callbacks`` (:mod:`rlx.callbacks`), train. ``live_doctor``: one built by the caller (a
    :class:`rlx.diagnostics.doctor.LiveDoctor`, such as :mod:`rlx.launch.heal`'s), attached instead
    of the one ``doctor`` and ``stop_on`` would make."""
    from rlx.core.threads import set_torch_threads
    from rlx.runs import Run

    spec, config = planned.spec, planned.config
    set_torch_threads()
    budget = getattr(config, spec.budget_field) or 0  # None: the algorithm sizes itself
    observers = (
        [live_doctor]
        if live_doctor is not None
        else _live_doctor(spec.name, planned.env_id, config, tuple(stop_on), doctor)
    )
    if callbacks:
        from rlx.callbacks import CallbackObserver

        observers.append(CallbackObserver(callbacks))
        takers = [c for c in callbacks if callable(getattr(c, "observe_episodes", None))]
        if takers:
            observers.append(EpisodeCallbacks(takers))
    if planned.note is not None and is_first_process():
        _to_stderr(f"rlx: {planned.note}")
    if planned.chosen_preset is not None and planned.resume is None and is_first_process():
        for line in planned.chosen_preset.lines(spec.name, planned.env_id):
            _to_stderr(f"rlx: {line}")
    with (
        Run(
            planned.run_dir,
            algo=spec.name,
            env_id=planned.env_id,
            config=config,
            total=budget,
            unit=spec.unit,
            resume=planned.resume,
            progress=progress,
            tensorboard=tensorboard,
            preset=planned.preset,
            observers=observers,
            record=_record(planned),
            wandb=wandb,
            writer=is_first_process(),
            overwrite=planned.overwrite,
            command=planned.command,
            resume_from=planned.resume_from,
            history=planned.history,
            wall_offset=planned.wall_offset,
            checkpoint_at_start=planned.checkpoint_at_start,
        ) as run,
        user_words(spec),
    ):
        handle: RunHandle = run  # what the algorithm may use of it (mypy holds Run to it)
        agent = _train_function(spec, config)(config, planned.env, handle)
    agent.run_dir = planned.run_dir
    if planned.recipe is not None:  # as rlx.load sets it: evaluate(agent) rebuilds this env
        agent.env_recipe = planned.recipe
    return agent


class EpisodeCallbacks:
    """The callbacks that read a run's finished episodes as it logs them
    (``observe_episodes(ends, returns, lengths)``: :class:`rlx.launch.tune.TrialPruner`'s doctor),
    as a :class:`rlx.runs.RunObserver`; the callbacks' other hooks reach them through
    :class:`rlx.callbacks.CallbackObserver`."""

    stop_reason: str | None = None

    def __init__(self, callbacks: Sequence[Any]) -> None:
        self.callbacks = list(callbacks)

    def attach(self, run_dir: Path, resumed: bool) -> None:
        """Nothing to prepare."""

    def observe(self, step: int, values: Any) -> None:
        """Rows reach the callbacks through :class:`rlx.callbacks.CallbackObserver`."""

    def observe_episodes(self, ends: Any, returns: Any, lengths: Any) -> None:
        for callback in self.callbacks:
            callback.observe_episodes(ends, returns, lengths)

    def summary(self) -> dict[str, Any]:
        return {}


def _record(planned: Plan) -> dict[str, Any]:
    """The fields config.json gets beside the config: where the preset came from and how to
    rebuild the env (a new run; a resumed one keeps its own), and the plan's own."""
    record: dict[str, Any] = {}
    if planned.resume is None and planned.chosen_preset is not None:
        record.update(planned.chosen_preset.record())
    if planned.recipe is not None and planned.resume is None:
        record["env_recipe"] = planned.recipe.record()
    return {**record, **(planned.record or {})}


def _live_doctor(
    algo: str, env_id: str, config: Any, stop_on: tuple[str, ...], enabled: bool
) -> list[Any]:
    """The doctor's rules on the metrics as they are logged (one line per new finding, on
    stderr); ``stop_on`` rules end the run, checkpoint saved, when they fire."""
    from rlx.diagnostics.doctor import LiveDoctor, check_rule_ids

    stop_on = check_rule_ids(stop_on)
    if not enabled and not stop_on:
        return []
    fields = (
        dataclasses.asdict(config)
        if dataclasses.is_dataclass(config) and not isinstance(config, type)
        else {}
    )
    return [LiveDoctor(algo, env_id, fields, stop_on=stop_on, printer=_to_stderr)]


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _train_function(spec: registry.Algorithm, config: Any) -> Any:
    """The algorithm's train function; with ``runners=K`` the Ray part is built by
    :mod:`rlx.distributed`, the one layer that knows a cluster, and handed in from above.
    Under ``torchrun`` (``WORLD_SIZE`` > 1) a language-model stage gets its data-parallel
    part the same way (:mod:`rlx.distributed.data_parallel`)."""
    if world_size() > 1:
        from rlx.distributed.data_parallel import data_parallel, takes_data_parallel

        if takes_data_parallel(spec):
            return data_parallel(spec)
    if getattr(config, "runners", None) is None or spec.remote is None:
        return spec.train
    from rlx.distributed import scaled_out

    return scaled_out(spec)


def load(
    run_dir: str | Path, checkpoint: str | Path | None = None, *, trust_env_code: bool = False
) -> Any:
    """The agent of a run folder, from its latest checkpoint (or the one given: ``"best"``,
    ``"latest"`` or a file): an object of the :class:`rlx.core.agent.Agent` protocol.

    Loading builds no env and imports nothing the folder names: the recorded env recipe is
    read as data into ``agent.env_recipe``, and ``rlx.evaluate(agent)`` rebuilds it later.
    ``trust_env_code=True`` consents, for this agent, to rebuilding it from code the folder
    names (an entry point, a Gymnasium spec that is not the registered one); without it that
    rebuild stops with one sentence naming what the folder would import. A folder that is
    not an rlx run, names an algorithm rlx does not know, or holds no checkpoint (or a
    damaged one) is one sentence too (RunError, CheckpointError)."""
    from rlx.runs.checkpoints import checkpoint_file, load_checkpoint

    record = read_record(run_dir)
    try:
        spec = registry.get(record.algo)
    except ConfigError as exc:
        raise RunError(
            f"{record.path / CONFIG_FILE} names an algorithm rlx cannot load: {exc}"
        ) from exc
    config = recorded_config(spec, record)
    if checkpoint is None and not has_checkpoint(record.path):
        raise CheckpointError(
            f"{record.path} holds no checkpoint to load: its run "
            + (
                "ended before saving one (summary.json says how)"
                if (record.path / SUMMARY_FILE).exists()
                else "was killed before saving one (it left no summary.json)"
            )
            + "; train it again in the same folder."
        )
    step, state = load_checkpoint(checkpoint_file(record.path, checkpoint))
    try:
        agent = spec.load(config, record.env, state)
    except RLXError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as exc:
        raise CheckpointError(
            f"the checkpoint in {record.path} does not hold a {spec.name} agent rlx can rebuild "
            f"({type(exc).__name__}: {exc}); it may be damaged or come from another rlx version."
        ) from exc
    agent.run_dir = record.path
    agent.checkpoint_step = step  # names its clips (rlx eval --video)
    recipe = recorded_recipe(record)
    agent.env_recipe = dataclasses.replace(recipe, trusted=trust_env_code)
    return agent
