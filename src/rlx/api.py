"""``rlx.train``, ``rlx.load``: the one way every algorithm is trained and restored.

Training is planned once (:func:`plan`: the algorithm, its config from defaults, preset,
overrides or the resumed run's record, and what to do with the run folder), then carried out
(:func:`train_planned`). The CLI parses its flags once and hands the values given to the same
plan, so a config is resolved in one place and ``config.json`` is read once.

A run folder can always be used again: one that holds a run with a checkpoint is continued
(``resume=True``) or started over (``overwrite=True``); one whose run ended before its first
checkpoint holds nothing to continue, so a plain rerun (or a resume) starts over in it, saying
so in one line. :func:`evaluate_run` evaluates a run folder whatever it trained (an env, a
board game, a language model): what ``rlx eval`` prints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
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
from rlx.runs import CONFIG_FILE, SUMMARY_FILE, RunRecord, read_record
from rlx.runs.folder import has_checkpoint, inspect_folder


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
    """more fields for config.json (a healed run's lineage, :mod:`rlx.heal`)"""
    history: dict[str, Any] | None = None
    """more fields for this opening's entry in config.json's history"""


def env_label(env: Any) -> str:
    """A printable id for an env given as an id, an entry point, a recipe, a callable, a
    Gymnasium env, or a TabularMDP."""
    if isinstance(env, (str, Path)):
        return str(env)
    if isinstance(env, EnvRecipe):
        return env.label
    if is_env_factory(env):
        return import_path(env) or getattr(env, "__name__", type(env).__name__)
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

    A new run's config is the defaults, then the env's preset, then ``overrides``; a resumed
    run's is its ``config.json`` (read here, once), then ``overrides`` (e.g. a larger budget),
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
    config, preset = _config(spec, env_id, overrides)
    if run_dir is None and world_size() > 1:
        # each process would stamp its own default name at its own second
        raise RunError(
            f"Under torchrun ({world_size()} processes) every process must write to one run "
            f"folder: pass {consent.arg('run_dir', 'DIR')}."
        )
    folder = Path(run_dir) if run_dir is not None else default_run_dir(spec.name, env_id)
    replace, note = _folder_for_a_new_run(folder, overwrite, consent)
    return Plan(spec, config, env, env_id, folder, preset, None, recipe, replace, note)


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
    config, _ = _config(spec, record.env, overrides, base=recorded_config(spec, record))
    if env is None:
        env, recipe = recorded_env(record, trust_env_code=trust_env_code, consent=consent)
    else:
        env, recipe = env_and_recipe(env, env_kwargs)
    folder = Path(run_dir)
    if state.kind == "unstarted":
        note = (
            f"{folder} holds a run that {_how_it_ended(folder)}, so there is nothing to "
            "resume: starting it over."
        )
        return Plan(spec, config, env, env_label(env), folder, record.preset, None, recipe,
                    overwrite=True, note=note)  # fmt: skip
    return Plan(spec, config, env, env_label(env), folder, record.preset, record, recipe)


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


def _config(
    spec: registry.Algorithm, env_id: str, overrides: dict[str, Any], base: Any | None = None
) -> tuple[Any, str | None]:
    """The config (:func:`rlx.registry.make_config`), its overrides checked against the
    fields' names and types first."""
    check_names(spec, overrides)
    check_types(spec, overrides, where="")
    with user_words(spec):
        return registry.make_config(spec, env_id, overrides, base=base)


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


def recorded_config(spec: registry.Algorithm, record: RunRecord) -> Any:
    """The config a run folder's ``config.json`` records, its values checked as data first:
    RunError naming the file when one is not what its field takes."""
    where = str(record.path / CONFIG_FILE)
    known = {f.name for f in dataclasses.fields(spec.config)}
    values = {spec.renamed.get(key, key): value for key, value in record.config.items()}
    check_types(spec, {k: v for k, v in values.items() if k in known}, where=where)
    try:
        with user_words(spec):
            return registry.config_from_record(spec, record.config)
    except ConfigError as exc:
        raise RunError(f"{where} records a config rlx cannot use: {exc}") from exc


def recorded_recipe(record: RunRecord) -> EnvRecipe:
    """The recipe a run folder records, checked as hostile data and not trusted; a run
    written before recipes were recorded gets one of its env id."""
    data = record.extra.get("env_recipe")
    if data is None:
        return EnvRecipe("id", record.env, trusted=False)
    return EnvRecipe.from_record(data)


def train(
    algo: str,
    env: Any = None,
    *,
    env_kwargs: dict[str, Any] | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
    tensorboard: bool = False,
    wandb: bool = False,
    stop_on: tuple[str, ...] | list[str] = (),
    doctor: bool = True,
    trust_env_code: bool = False,
    callbacks: Sequence[Any] = (),
    seeds: Sequence[int] | None = None,
    jobs: int | None = None,
    resume_from: str | Path | int | None = None,
    heal: bool = False,
    heal_max: int = 3,
    **overrides: Any,
) -> Any:
    """Train ``algo`` on ``env`` and return the trained agent (with ``seeds``, a
    :class:`SeedGroup`).

    Args:
        algo: a registered name (``rlx.registry.names()``), e.g. ``"q-learning"``.
        env: a Gymnasium id, a Gymnasium env, or an ``rlx.mdp.TabularMDP``; a board game
            (``"tictactoe"``, ``"connect4"``) for alphazero and muzero; the JSONL data file
            for a language-model stage (``sft``, ``rm``, ``dpo``, ``grpo``, ``rlhf-ppo``).
            Also an entry point ``"package.module:factory"``, a callable that returns an env,
            or any Gymnasium env object; ``config.json`` records how to build it again
            (:mod:`rlx.core.env_recipe`). With ``resume``, None means the run's own env.
        env_kwargs: keyword arguments for ``gymnasium.make`` or the entry point.
        run_dir: the run folder (default ``runs/<algo>-<env>-<time>``).
        resume: continue the run in ``run_dir`` from its latest checkpoint; ``overrides``
            may raise its budget (e.g. ``episodes`` or ``total_steps``). A run that ended
            before its first checkpoint has nothing to continue: it starts over, saying so.
        overwrite: start over in ``run_dir``, which holds an rlx run: its files are deleted
            once the new run has started (kept if the new one is refused before it starts).
            A folder that is not an rlx run folder is refused.
        progress: show a progress bar (None: when stderr is a terminal).
        tensorboard: also log to ``run_dir/tensorboard``.
        wandb: also log to Weights & Biases (extra ``wandb``; offline in ``run_dir/wandb``
            unless ``WANDB_MODE`` says otherwise).
        stop_on: doctor rule ids (``rlx.diagnostics.rules.RULES_BY_ID``) that end the run,
            checkpoint saved, when they fire, e.g. ``["kl-too-high", "non-finite"]``.
        doctor: run the doctor's rules on the metrics as they are logged; a new finding
            prints one line, and the final findings go into ``summary.json``.
        trust_env_code: with ``resume`` and no ``env``, let the run folder's recorded env be
            rebuilt from code it names (an entry point, or a Gymnasium spec's entry point that
            is not the registered one). A run folder is data, so without this such a run
            stops with one sentence naming what it would import; a registered id needs none.
        callbacks: objects with any of ``on_start``, ``on_step``, ``on_update``, ``on_eval``,
            ``on_end`` (each ``(step, payload)``; False stops the run): :mod:`rlx.callbacks`.
        seeds: train one run per seed, e.g. ``[0, 1, 2, 3, 4]``, into
            ``run_dir/seed-<seed>``, listed in ``run_dir/group.json``, and return a
            :class:`SeedGroup` (:func:`train_seeds`): the seeds train in parallel processes,
            a failed one is recorded and the others go on; ``resume`` continues every seed.
        jobs: with ``seeds``, how many train at once (default: one per seed, up to the CPU
            cores; 1: one after another in this process).
        resume_from: with ``resume``, the step checkpoint to continue from (its step, or its
            file in ``run_dir/checkpoints``) instead of the latest: what was logged after it
            is cut, and the checkpoints written after it are removed once the run has started.
        heal: when a doctor rule that names a change fires, roll back to the last checkpoint
            before its evidence, apply the change and go on (:func:`rlx.heal.train_healing`;
            checkpoints every twentieth of the budget, all kept, unless the config sets a
            cadence); each rollback is recorded in ``summary.json`` and ``config.json``.
        heal_max: with ``heal``, the most rollbacks.
        **overrides: config fields, e.g. ``total_steps=100_000, seed=0, alpha=0.2``.

    ``config.json`` keeps the history of the folder: every start, resume and start-over with
    its call, budget, time and rlx version.
    """
    if heal and (seeds is not None or jobs is not None):
        raise ConfigError(
            "heal=True heals one run as it trains; train the seeds of seeds=[...] one call each "
            "to heal them."
        )
    if seeds is not None or jobs is not None:
        if seeds is None and not resume:
            raise ConfigError("jobs= runs the seeds of seeds=[...] in parallel; pass seeds too.")
        call = python_call(algo, env, run_dir=run_dir, resume=resume, overwrite=overwrite,
                           env_kwargs=env_kwargs, seeds=seeds, jobs=jobs, **overrides)  # fmt: skip
        return train_seeds(
            algo, env, seeds=seeds, jobs=jobs, run_dir=run_dir, resume=resume,
            overwrite=overwrite, overrides=overrides, env_kwargs=env_kwargs,
            trust_env_code=trust_env_code, command=call, progress=progress,
            tensorboard=tensorboard, wandb=wandb, stop_on=stop_on, doctor=doctor,
            callbacks=callbacks,
        )  # fmt: skip
    planned = plan(
        algo,
        env,
        run_dir=run_dir,
        resume=resume,
        overwrite=overwrite,
        overrides=overrides,
        env_kwargs=env_kwargs,
        trust_env_code=trust_env_code,
        resume_from=resume_from,
    )
    call = python_call(algo, env, run_dir=run_dir, resume=resume, overwrite=overwrite,
                       env_kwargs=env_kwargs, resume_from=resume_from, heal=heal,
                       **overrides)  # fmt: skip
    planned = dataclasses.replace(planned, command=call)
    if heal:
        # rlx.heal trains through plan and train_planned, so it imports this module; this
        # one reaches it by name when asked, as the package's face reaches every module
        healing = importlib.import_module("rlx.heal")
        return healing.train_healing(
            planned, heal_max=heal_max, progress=progress, tensorboard=tensorboard,
            wandb=wandb, stop_on=stop_on, callbacks=callbacks, trust_env_code=trust_env_code,
        )  # fmt: skip
    return train_planned(
        planned,
        progress=progress,
        tensorboard=tensorboard,
        wandb=wandb,
        stop_on=stop_on,
        doctor=doctor,
        callbacks=callbacks,
    )


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
    :class:`rlx.diagnostics.doctor.LiveDoctor`, such as :mod:`rlx.heal`'s), attached instead of
    the one ``doctor`` and ``stop_on`` would make."""
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
    if planned.note is not None and is_first_process():
        _to_stderr(f"rlx: {planned.note}")
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
        ) as run,
        user_words(spec),
    ):
        agent = _train_function(spec, config)(config, planned.env, run)
    agent.run_dir = planned.run_dir
    if planned.recipe is not None:  # as rlx.load sets it: evaluate(agent) rebuilds this env
        agent.env_recipe = planned.recipe
    return agent


def _record(planned: Plan) -> dict[str, Any]:
    """The fields config.json gets beside the config: how to rebuild the env (a new run; a
    resumed one keeps its own) and the plan's own."""
    record = {}
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
    fields = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else {}
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


@dataclasses.dataclass(frozen=True)
class RunEvaluation:
    """What evaluating a run folder gave (:func:`evaluate_run`): one of

    - an agent of an env (``stats``, on the env ``env`` describes);
    - a board-game agent (``games``: opponent name -> its arena result);
    - a language model (``exact_match`` on ``data``).
    """

    run_dir: Path
    stats: Any = None
    env: Any = None
    game: str | None = None
    games: dict[str, Any] | None = None
    exact_match: float | None = None
    data: str | None = None
    video: Path | None = None
    """the clip written (``video=``): episodes, or a board game's replay"""

    def to_dict(self) -> dict[str, Any]:
        """The result as one JSON object (``rlx eval --json``)."""
        video = {} if self.video is None else {"video": str(self.video)}
        if self.games is not None:
            opponents = {name: {"games": r.games, "win": r.win_rate, "draw": r.draw_rate,
                                "loss": r.loss_rate} for name, r in self.games.items()}  # fmt: skip
            return {"game": self.game, "opponents": opponents, **video}
        if self.exact_match is not None:
            return {"exact_match": self.exact_match, "data": self.data}
        stats = self.stats
        return {"mean": stats.mean_return, "std": stats.std_return, "episodes": stats.episodes,
                "mean_length": stats.mean_length, "env": self.env, **video}  # fmt: skip

    def __str__(self) -> str:
        if self.games is not None:
            return "\n".join(
                [f"{self.run_dir} against {name} over {result.games} games: {result}"
                 for name, result in self.games.items()]
                + ([] if self.video is None else [f"replay: {self.video}"])
            )  # fmt: skip
        if self.exact_match is not None:
            return f"{self.run_dir}: exact match {self.exact_match:.3f} on {self.data}"
        return f"{self.run_dir}: {self.stats}"


def evaluate_run(
    run_dir: str | Path,
    *,
    episodes: int = 20,
    seed: int = 0,
    env: Any = None,
    env_kwargs: dict[str, Any] | None = None,
    data: str | Path | None = None,
    trust_env_code: bool = False,
    consent: Consent = IN_PYTHON,
    video: bool | str | Path | None = None,
    video_options: Any = None,
    checkpoint: str | Path | None = None,
) -> RunEvaluation:
    """Evaluate the agent of a run folder (its latest checkpoint, or ``checkpoint``: ``"best"``,
    the best evaluation's, or a checkpoint file, as :func:`load` takes) as what it is: ``episodes``
    deterministic episodes on its env (rebuilt from the recipe ``config.json`` records, or
    ``env`` with ``env_kwargs``), as many games against the run's arena opponents for a board
    game, or exact match on ``data`` (rows ``{prompt, answer}``) for a language model.
    ``consent`` words the errors for where the user is.

    ``video`` (True, or a ``.gif`` file) also records the agent, by
    ``video_options`` (:class:`rlx.core.video.VideoOptions`): episodes drawn by its env, or
    the boards of a board game's replay (:mod:`rlx.games.replay`); True writes
    ``RUN_DIR/videos/eval-step<N>.gif``."""
    from rlx.core.agent import GameAgent, TextAgent
    from rlx.core.evaluation import evaluate

    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        raise ConfigError(
            f"evaluating takes a whole number >= 1 of episodes ({consent.arg('episodes', 'N')}), "
            f"not {episodes!r}."
        )
    agent = load(run_dir, checkpoint, trust_env_code=trust_env_code)
    folder = agent.run_dir
    if isinstance(agent, GameAgent):
        from rlx.games.evaluation import arena

        replay = None
        if video is not None and video is not False:
            from rlx.games.replay import record_replay

            replay = record_replay(agent, video, video_options, seed=seed).path
        games = arena(agent.game, agent, agent.config.eval_opponents, episodes, seed)
        return RunEvaluation(folder, game=agent.game.name, games=games, video=replay)
    if isinstance(agent, TextAgent):
        if video is not None and video is not False:
            raise ConfigError(
                f"{folder} holds a language model, which has no video "
                f"({consent.arg('video')}): evaluate it without one."
            )
        if data is None:
            raise ConfigError(
                f"{folder} holds a language model: give its data ({consent.arg('data', 'FILE')}, "
                "rows {prompt, answer}), or evaluate its model folder with rlx.llm.exact_match "
                f"(rlx align eval --model {folder}/model --data FILE)."
            )
        from rlx import llm

        accuracy = llm.exact_match((agent.model, agent.tokenizer), str(data))
        return RunEvaluation(folder, exact_match=accuracy, data=str(data))
    if env is not None:
        made, recipe = env_and_recipe(env, env_kwargs)
    else:
        recipe = agent.env_recipe.cleared(
            trust_env_code, consent, source=f"the run folder {folder}"
        )
        made = recipe.as_env
    stats = evaluate(
        agent, made, episodes=episodes, seed=seed, video=video, video_options=video_options
    )
    return RunEvaluation(folder, stats=stats, env=recipe.record(), video=stats.video)


def _takes_a_data_file(spec: registry.Algorithm, env: Any) -> bool:
    """Whether ``spec`` trains on a data file (its config has ``data``) and ``env`` names one."""
    fields = {f.name for f in dataclasses.fields(spec.config)}
    return "data" in fields and isinstance(env, (str, Path))


# ---------------------------------------------------------------------------- seed groups
SEED_WORKER = "import sys; from rlx.api import seed_worker; sys.exit(seed_worker())"
"""What a seed's process runs (``python -c``): :func:`seed_worker`."""
FINAL_STATUSES = ("completed", "stopped", "interrupted", "failed")


@dataclasses.dataclass(frozen=True)
class SeedRun:
    """One seed of a :class:`SeedGroup`: its run folder and how its run ended (``status`` as
    its ``summary.json`` says, or ``pending`` for a seed not started; ``error`` says why a
    failed seed failed)."""

    seed: int
    run_dir: Path
    status: str
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class SeedGroup:
    """What ``rlx.train(..., seeds=[...])`` returns: the group folder and one run per seed.

    The agents trained in other processes, so the group holds folders, not agents:
    ``group.load(seed)`` loads one (:func:`load`), ``group.agents()`` every seed that has a
    checkpoint. ``group.report()`` writes the group's page (mean curve with its 95% bootstrap
    band, IQM of the final returns), ``group.doctor()`` diagnoses every seed and names those
    that behave differently. ``SeedGroup.read(path)`` opens a group trained before.
    """

    path: Path
    algo: str
    env: str
    runs: tuple[SeedRun, ...]

    @classmethod
    def read(cls, path: str | Path) -> SeedGroup:
        """The group in ``path`` (its ``group.json``)."""
        from rlx.runs.group import read_group

        record = read_group(path)
        runs = tuple(
            SeedRun(e.seed, record.path / e.run_dir, e.status, e.error) for e in record.runs
        )
        return cls(record.path, record.algo, record.env, runs)

    @property
    def seeds(self) -> list[int]:
        return [run.seed for run in self.runs]

    @property
    def failed(self) -> list[SeedRun]:
        """The seeds whose run failed (``error`` says why)."""
        return [run for run in self.runs if run.status == "failed"]

    def run_dir(self, seed: int) -> Path:
        for run in self.runs:
            if run.seed == seed:
                return run.run_dir
        raise ConfigError(f"{self.path} has no seed {seed}; its seeds: {self.seeds}.")

    def load(self, seed: int, checkpoint: str | Path | None = None) -> Any:
        """The agent of ``seed`` (its latest checkpoint, or ``checkpoint``)."""
        return load(self.run_dir(seed), checkpoint)

    def agents(self) -> dict[int, Any]:
        """Seed -> agent, for every seed whose run has a checkpoint."""
        return {run.seed: load(run.run_dir) for run in self.runs if has_checkpoint(run.run_dir)}

    def doctor(self) -> Any:
        """Every seed diagnosed, and the seeds that behave differently
        (:func:`rlx.diagnostics.group_doctor.doctor_group`)."""
        from rlx.diagnostics.group_doctor import doctor_group

        return doctor_group(self.path)

    def report(self, out: str | Path | None = None, *, title: str | None = None) -> Path:
        """Write the group's HTML page (default ``GROUP/report.html``) and return its path
        (:func:`rlx.diagnostics.group_report.report_groups`)."""
        from rlx.diagnostics.group_report import report_groups

        return report_groups([self.path], out, title=title)

    def __str__(self) -> str:
        from rlx.diagnostics.group_doctor import final_returns_line
        from rlx.runs import read_summary

        width = max(len(str(run.run_dir)) for run in self.runs)
        lines = [
            f"seed group {self.path}: {self.algo} on {self.env}, {len(self.runs)} seeds",
            f"  {'seed':>4}  {'status':<11}  {'steps':>9}  {'eval return':>11}  "
            f"{'folder':<{width}}",
        ]
        for run in self.runs:
            summary = read_summary(run.run_dir)
            steps = summary.get("steps", "")
            value = summary.get("eval_return_mean")
            shown = f"{value:.4g}" if isinstance(value, (int, float)) else "-"
            lines.append(
                f"  {run.seed:>4}  {run.status:<11}  {steps!s:>9}  {shown:>11}  "
                f"{run.run_dir!s:<{width}}"
            )
            if run.error:
                lines.append(f"        {run.error}")
        lines.append(final_returns_line(self.path))
        return "\n".join(lines)


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def train_seeds(
    algo: str,
    env: Any = None,
    *,
    seeds: Sequence[int] | None = None,
    jobs: int | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    overrides: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    trust_env_code: bool = False,
    consent: Consent = IN_PYTHON,
    command: str | None = None,
    progress: bool | None = None,
    tensorboard: bool = False,
    wandb: bool = False,
    stop_on: tuple[str, ...] | list[str] = (),
    doctor: bool = True,
    callbacks: Sequence[Any] = (),
) -> SeedGroup:
    """Train one run per seed into ``run_dir/seed-<seed>`` and list them in
    ``run_dir/group.json`` (:mod:`rlx.runs.group`); what ``rlx.train(..., seeds=[...])`` and
    ``rlx train ALGO --seeds ...`` do.

    Every seed is planned first (:func:`plan`, the config being ``overrides`` with
    ``seed=<seed>``), so a mistake stops the group before anything trains. The seeds then
    train ``jobs`` at a time (default: one per seed, up to the cores this process may use),
    each in a process of its own with one torch thread (:mod:`rlx.runs.parallel`), or one
    after another in this process when ``jobs`` is 1, when ``callbacks`` are given, or when
    the env given cannot be sent to another process (an object or a function of your
    script: pass an id or a ``module:factory`` entry point to run them in parallel). A seed
    that fails is recorded in ``group.json`` with why; the others go on. The first Ctrl-C
    stops every seed with its checkpoint saved (seeds not started yet stay ``pending``).

    ``resume`` continues the group in ``run_dir``: each seed from its latest checkpoint
    (``overrides`` may raise the budget), a seed that never started from its beginning, a
    completed seed only when ``overrides`` are given; ``seeds`` adds seeds to it.
    ``overwrite`` starts the group over.
    """
    from rlx.runs.group import group_folder_state, read_group

    spec = registry.get(algo)
    overrides = dict(overrides or {})
    seeds = _checked_seeds(seeds, consent)
    jobs = _checked_jobs(jobs, consent)
    if "seed" in overrides:
        raise ConfigError(
            f"{consent.arg('seed', 'S')} trains one run and {_seeds_arg(consent)} "
            "one run per seed; pass one of them."
        )
    if resume and overwrite:
        raise ConfigError(
            f"{consent.arg('resume')} continues the seed group and {consent.arg('overwrite')} "
            "starts it over; pass one of them."
        )
    if run_dir is None:
        if resume:
            raise RunError(
                f"{consent.arg('resume')} needs the seed group's folder "
                f"({consent.arg('run_dir', 'DIR')})."
            )
        run_dir = default_run_dir(spec.name, env_label(env) if env is not None else "env")
    folder = Path(run_dir)
    state = group_folder_state(folder)
    another = f"choose another folder ({consent.arg('run_dir', 'DIR')})"
    if state == "run":
        raise RunError(f"{folder} holds a single run, not a seed group; {another}.")
    if state == "files":
        raise RunError(
            f"{folder} is not a seed group (it holds files but no group.json); {another}."
        )
    previous = read_group(folder) if state == "group" else None
    planner = _GroupPlanner(spec, env, env_kwargs, trust_env_code, consent, overrides)
    if resume:
        if previous is None:
            raise RunError(
                f"{consent.arg('resume')} needs a seed group to continue, but {folder} holds "
                "no group.json."
            )
        record, planned = planner.resume(previous, seeds or [], command)
    else:
        if seeds is None:
            raise RunError(
                f"{folder} holds a seed group; pass {consent.arg('resume')} to continue its "
                f"seeds, {consent.arg('overwrite')} with {_seeds_arg(consent)} to "
                f"start over in it, or {another}."
            )
        record, planned = planner.start(folder, previous, seeds, overwrite, jobs, command)
    options = {
        "progress": progress,
        "tensorboard": tensorboard,
        "wandb": wandb,
        "stop_on": tuple(stop_on),
        "doctor": doctor,
    }
    runner = _GroupRunner(record, previous, planned, options, callbacks)
    runner.run(jobs)
    return SeedGroup.read(folder)


def _checked_seeds(seeds: Sequence[int] | None, consent: Consent) -> list[int] | None:
    """``seeds`` as a list of distinct whole numbers >= 0 (None stays None)."""
    if seeds is None:
        return None
    name = _seeds_arg(consent)
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise ConfigError(f"{name} takes a list of whole numbers, not {seeds!r}.")
    if not seeds:
        raise ConfigError(f"{name} needs at least one seed, e.g. 0 1 2 3 4.")
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"{name}: each seed is a whole number >= 0, not {seed!r}.")
    repeated = sorted({s for s in seeds if list(seeds).count(s) > 1})
    if repeated:
        raise ConfigError(f"{name} names seed {repeated[0]} twice; each seed trains once.")
    return [int(s) for s in seeds]


def _seeds_arg(consent: Consent) -> str:
    return "--seeds" if consent.flags else "seeds=[...]"


def _checked_jobs(jobs: int | None, consent: Consent) -> int | None:
    if jobs is None:
        return None
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(
            f"{consent.arg('jobs', 'N')} is how many seeds train at once: a whole number >= 1, "
            f"not {jobs!r}."
        )
    return jobs


class _GroupPlanner:
    """Plans every seed of a group (:func:`plan`) before anything trains."""

    def __init__(
        self,
        spec: registry.Algorithm,
        env: Any,
        env_kwargs: Any,
        trust_env_code: bool,
        consent: Consent,
        overrides: dict[str, Any],
    ) -> None:
        self.spec, self.env, self.env_kwargs = spec, env, env_kwargs
        self.trust, self.consent, self.overrides = trust_env_code, consent, overrides

    def _fresh(
        self,
        env: Any,
        env_kwargs: Any,
        folder: Path,
        seed: int,
        overrides: dict[str, Any],
        overwrite: bool,
    ) -> Plan:
        return plan(
            self.spec.name,
            env,
            run_dir=folder,
            overwrite=overwrite,
            overrides={**overrides, "seed": seed},
            env_kwargs=env_kwargs,
            trust_env_code=self.trust,
            consent=self.consent,
        )

    def start(
        self,
        folder: Path,
        previous: Any,
        seeds: list[int],
        overwrite: bool,
        jobs: int | None,
        command: str | None,
    ) -> tuple[Any, list[tuple[int, Plan | None]]]:
        """A new group in ``folder`` (over ``previous`` with ``overwrite``, or over a group
        none of whose seeds started)."""
        from rlx.runs.group import new_group, seed_folder_name

        kind = "start"
        if previous is not None:
            started = [
                s for s in previous.seeds if inspect_folder(previous.folder(s)).kind == "run"
            ]
            if started and not overwrite:
                raise RunError(
                    f"{folder} already holds a seed group; pass {self.consent.arg('resume')} to "
                    f"continue its seeds, {self.consent.arg('overwrite')} to start over in it, "
                    f"or choose another folder ({self.consent.arg('run_dir', 'DIR')})."
                )
            if not started:
                _to_stderr(
                    f"rlx: {folder} holds a seed group none of whose seeds started; "
                    "starting over in it."
                )
            kind = "overwrite"
        planned = [
            (
                seed,
                self._fresh(
                    self.env,
                    self.env_kwargs,
                    folder / seed_folder_name(seed),
                    seed,
                    self.overrides,
                    overwrite,
                ),
            )
            for seed in seeds
        ]
        first = planned[0][1]
        recipe = first.recipe.record() if first.recipe is not None else None
        history = list(previous.extra.get("history", [])) if previous is not None else []
        record = new_group(
            folder,
            self.spec.name,
            first.env_id,
            seeds,
            command=command,
            kind=kind,
            history=history,
            jobs=jobs,
            overrides=self.overrides,
            env_recipe=recipe,
        )
        return record, planned

    def resume(
        self, previous: Any, more: list[int], command: str | None
    ) -> tuple[Any, list[tuple[int, Plan | None]]]:
        """The group ``previous`` continued: each seed resumed, started (never started, or
        new in ``more``) or left as it is (completed, when no override raises its budget)."""
        from rlx.runs import read_summary
        from rlx.runs.group import SeedEntry, history_entry, seed_folder_name

        if previous.algo != self.spec.name:
            raise RunError(
                f"{previous.path} holds a seed group of {previous.algo!r}, not {self.spec.name!r}:"
                f" continue it as {previous.algo}, or start {self.spec.name} in another folder."
            )
        record = previous
        for seed in more:
            if seed not in record.seeds:
                record = record.with_entry(SeedEntry(seed, seed_folder_name(seed)))
        history = [*record.extra.get("history", []), history_entry("resume", command)]
        record = dataclasses.replace(record, extra={**record.extra, "history": history})
        planned: list[tuple[int, Plan | None]] = []
        for seed in record.seeds:
            folder = record.folder(seed)
            kind = inspect_folder(folder).kind
            if (
                kind == "run"
                and read_summary(folder).get("status") == "completed"
                and not self.overrides
            ):
                planned.append((seed, None))  # done: nothing to continue
            elif kind in ("run", "unstarted"):
                planned.append(
                    (
                        seed,
                        plan(
                            self.spec.name,
                            self.env,
                            run_dir=folder,
                            resume=True,
                            overrides=self.overrides,
                            env_kwargs=self.env_kwargs,
                            trust_env_code=self.trust,
                            consent=self.consent,
                        ),
                    )
                )
            else:  # never started (stopped before its turn, or added now): from the start
                env, env_kwargs = self._group_env(record)
                given = {**record.extra.get("overrides", {}), **self.overrides}
                planned.append((seed, self._fresh(env, env_kwargs, folder, seed, given, False)))
        return record, planned

    def _group_env(self, record: Any) -> tuple[Any, Any]:
        """The env a seed the group never started trains on: the one given now, else the
        group's recorded recipe (rebuilt as a run folder's is, :func:`recorded_env`)."""
        if self.env is not None:
            return self.env, self.env_kwargs
        extra = {"env_recipe": record.extra["env_recipe"]} if record.extra.get("env_recipe") else {}
        recorded = RunRecord(record.path, record.algo, record.env, extra=extra)
        env, _ = recorded_env(recorded, trust_env_code=self.trust, consent=self.consent)
        return env, None


class _GroupRunner:
    """Trains a planned group and keeps ``group.json`` up to date as each seed ends."""

    def __init__(
        self,
        record: Any,
        previous: Any,
        planned: list[tuple[int, Plan | None]],
        options: dict[str, Any],
        callbacks: Sequence[Any],
    ) -> None:
        self.record, self.previous = record, previous
        self.planned = [(seed, p) for seed, p in planned if p is not None]
        self.options, self.callbacks = options, callbacks
        self.started_at: dict[int, float] = {}
        self.created = not record.path.exists()

    def run(self, jobs: int | None) -> None:
        from rlx.runs.group import SeedEntry, write_group

        for seed, _ in self.planned:
            self._set(SeedEntry(seed, self._relative(seed), "pending"))
        write_group(self.record)
        if not self.planned:
            _to_stderr(
                f"rlx: every seed of {self.record.path} has completed; raise the budget "
                "to continue them."
            )
            return
        workers = min(len(self.planned), jobs or available_cores())
        payloads = self._payloads() if workers > 1 else None
        if workers > 1 and payloads is None:
            workers = 1
        errors = (
            self._in_processes(payloads, workers)
            if workers > 1 and payloads
            else self._in_this_process()
        )
        self._end(errors)

    def _payloads(self) -> list[bytes] | None:
        """Each seed's plan, pickled for its process; None (and one line saying so) when the
        seeds must train in this process."""
        import pickle

        if self.callbacks:
            _to_stderr("rlx: callbacks run in this process, so the seeds train one after another.")
            return None
        options = {**self.options, "progress": False}
        try:  # the algorithm by name: its functions may be closures pickle cannot copy
            payloads = [
                pickle.dumps((p.spec.name, dataclasses.replace(p, spec=None), options))
                for _, p in self.planned
            ]
        except Exception:  # an env object or a setting pickle cannot copy
            payloads = None
        if payloads is None or any(b"__main__" in payload for payload in payloads):
            _to_stderr(
                "rlx: the env, the algorithm or a setting given is defined in your script "
                "and cannot be sent to other processes, so the seeds train one after another; "
                "pass an env id or a module:factory entry point to train them in parallel."
            )
            return None
        return payloads

    def _relative(self, seed: int) -> str:
        entry = self.record.entry(seed)
        return entry.run_dir if entry is not None else f"seed-{seed}"

    def _set(self, entry: Any) -> None:
        self.record = self.record.with_entry(entry)

    def _started(self, seed: int) -> None:
        from rlx.runs.group import SeedEntry, write_group

        self.started_at[seed] = time.time()
        self._set(SeedEntry(seed, self._relative(seed), "running"))
        write_group(self.record)
        _to_stderr(f"rlx: seed {seed} started in {self.record.folder(seed)}")

    def _ended(self, seed: int, error: str | None, stopped: bool = False) -> str:
        """Record how ``seed`` ended (its summary's status, or ``error``); returns the status."""
        from rlx.runs import SUMMARY_FILE, read_summary
        from rlx.runs.group import SeedEntry, write_group

        folder = self.record.folder(seed)
        summary_file = folder / SUMMARY_FILE
        fresh = summary_file.exists() and summary_file.stat().st_mtime >= (
            self.started_at.get(seed, 0.0) - 1.0
        )
        summary = read_summary(folder) if fresh else {}
        status = summary.get("status")
        if status not in FINAL_STATUSES:
            status = "interrupted" if stopped and error is None else "failed"
        if status == "failed":
            error = summary.get("error") or error or "it ended without saying why"
        else:
            error = None
        self._set(SeedEntry(seed, self._relative(seed), status, error))
        write_group(self.record)
        _to_stderr(f"rlx: seed {seed} {status}" + (f": {error}" if error else "") + f" ({folder})")
        return status

    def _in_this_process(self) -> list[BaseException]:
        """The seeds one after another; a Ctrl-C ends the seed training (checkpoint saved) and
        starts no other."""
        import traceback

        errors: list[BaseException] = []
        for seed, planned in self.planned:
            self._started(seed)
            try:
                train_planned(planned, callbacks=self.callbacks, **self.options)
            except KeyboardInterrupt:
                self._ended(seed, None, stopped=True)
                raise
            except Exception as exc:  # a failed seed does not lose the others
                if not isinstance(exc, RLXError):
                    traceback.print_exc()
                errors.append(exc)
                message = str(exc) if isinstance(exc, RLXError) else f"{type(exc).__name__}: {exc}"
                self._ended(seed, message)
                continue
            if self._ended(seed, None) == "interrupted":
                break  # Ctrl-C: the seeds after it stay pending
        return errors

    def _in_processes(self, payloads: list[bytes], workers: int) -> list[BaseException]:
        from rlx.runs.parallel import Job, child_environment, run_jobs

        jobs = [
            Job(f"seed {seed}", payload, key=seed)
            for (seed, _), payload in zip(self.planned, payloads, strict=True)
        ]
        errors: list[BaseException] = []

        def ended(outcome: Any) -> None:
            error = _failure_reason(outcome.tail, outcome.returncode)
            status = self._ended(outcome.job.key, error, stopped=outcome.stopped)
            if status == "failed" and outcome.returncode == RLXError.exit_code:
                errors.append(RLXError(error))

        _to_stderr(f"rlx: training {len(jobs)} seeds, {workers} at a time, one process each")
        command = [sys.executable, "-c", SEED_WORKER]
        _, aborted = run_jobs(
            jobs,
            command,
            workers,
            env=child_environment(),
            on_start=lambda job: self._started(job.key),
            on_end=ended,
        )
        if aborted:
            raise KeyboardInterrupt
        return errors

    def _end(self, errors: list[BaseException]) -> None:
        """A group whose every seed was refused before it trained leaves its folder as it was
        and raises the first refusal; old seeds of a group started over go."""
        from rlx.runs.group import GROUP_FILE, write_group

        statuses = [e.status for e in self.record.runs if e.seed in dict(self.planned)]
        nothing = not any(
            inspect_folder(self.record.folder(s)).kind != "new" for s, _ in self.planned
        )
        if errors and all(status == "failed" for status in statuses) and nothing:
            if self.previous is not None:
                write_group(self.previous)
            else:
                (self.record.path / GROUP_FILE).unlink(missing_ok=True)
                if self.created:
                    with contextlib.suppress(OSError):
                        self.record.path.rmdir()
            raise errors[0]
        if self.previous is not None:
            import shutil

            kept = set(self.record.seeds)
            for seed in self.previous.seeds:
                old = self.previous.folder(seed)
                if seed not in kept and inspect_folder(old).kind in ("run", "unstarted"):
                    shutil.rmtree(old, ignore_errors=True)


def _failure_reason(tail: Sequence[str], returncode: int | None) -> str | None:
    """Why a seed's process failed, from the last lines it wrote: its ``rlx: error:``
    sentence, else its last line (a traceback's exception); None when it exited 0."""
    if returncode == 0:
        return None
    for line in reversed(tail):
        if line.startswith("rlx: error: "):
            return line[len("rlx: error: ") :]
    for line in reversed(tail):
        if line.strip() and not line.startswith((" ", "rlx: ")):
            return line.strip()
    return f"its process exited with code {returncode}" if returncode is not None else None


def seed_worker() -> int:
    """One seed's process (:mod:`rlx.runs.parallel`): reads ``(algorithm name, plan,
    options)`` pickled on stdin by the group's own process, trains it (:func:`train_planned`).
    Exit codes as the CLI's: 2 a user error (its sentence on stderr), 130 aborted."""
    import pickle

    try:
        name, planned, options = pickle.load(sys.stdin.buffer)  # from the group's process
        planned = dataclasses.replace(planned, spec=registry.get(name))
        train_planned(planned, **options)
    except RLXError as exc:
        print(f"rlx: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("rlx: interrupted", file=sys.stderr)
        return 130
    return 0
