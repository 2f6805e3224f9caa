"""``rlx.train``, ``rlx.load``: the one way every algorithm is trained and restored.

Training is planned once (:func:`plan`: the algorithm, its config from defaults, preset,
overrides or the resumed run's record, and the run folder), then carried out
(:func:`train_planned`). The CLI builds its flags from the same plan, so a config is resolved
in one place and ``config.json`` is read once.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import sys
import time
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
from rlx.errors import ConfigError, RunError
from rlx.runs import CONFIG_FILE, RunRecord, is_run_folder, read_record


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
    overrides: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    trust_env_code: bool = False,
    consent: Consent = IN_PYTHON,
) -> Plan:
    """Resolve a run once: the algorithm, the config, the env and where it is written.

    A new run's config is the defaults, then the env's preset, then ``overrides``; a resumed
    run's is its ``config.json`` (read here, once), then ``overrides`` (e.g. a larger budget),
    and its env is the recorded one (rebuilt from its recipe) unless ``env`` is given.
    ``env_kwargs`` go to ``gymnasium.make`` or to the ``module:factory`` entry point.
    Rebuilding a recorded env from code the folder names needs ``trust_env_code``
    (:func:`recorded_env`); ``consent`` words the refusal for where the user is.
    """
    spec = registry.get(algo)
    overrides = dict(overrides or {})
    if resume:
        if run_dir is None:
            raise RunError("resume=True needs the run_dir of the run to continue.")
        if not is_run_folder(run_dir):
            raise RunError(
                f"--resume needs an existing run folder, but {run_dir} has no {CONFIG_FILE}."
            )
        record = read_record(run_dir)
        base = registry.config_from_record(spec, record.config)
        config, _ = registry.make_config(spec, record.env, overrides, base=base)
        if env is None:
            env, recipe = recorded_env(record, trust_env_code=trust_env_code, consent=consent)
        else:
            env, recipe = env_and_recipe(env, env_kwargs)
        return Plan(spec, config, env, env_label(env), Path(run_dir), record.preset, record,
                    recipe)  # fmt: skip
    if env is None:
        raise ConfigError(f"{spec.name} needs an environment (env=..., --env ID).")
    if "data" not in overrides and _takes_a_data_file(spec, env):
        # language-model stages: rlx.train("sft", "sft.jsonl", model=...) trains on the file
        overrides["data"] = str(env)
    env, recipe = env_and_recipe(env, env_kwargs)
    env_id = env_label(env)
    config, preset = registry.make_config(spec, env_id, overrides)
    if run_dir is None and world_size() > 1:
        # each process would stamp its own default name at its own second
        raise RunError(
            f"Under torchrun ({world_size()} processes) every process must write to one run "
            "folder: pass run_dir=... (--run-dir DIR)."
        )
    folder = Path(run_dir) if run_dir is not None else default_run_dir(spec.name, env_id)
    return Plan(spec, config, env, env_id, folder, preset, None, recipe)


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
    progress: bool | None = None,
    tensorboard: bool = False,
    wandb: bool = False,
    stop_on: tuple[str, ...] | list[str] = (),
    doctor: bool = True,
    trust_env_code: bool = False,
    **overrides: Any,
) -> Any:
    """Train ``algo`` on ``env`` and return the trained agent.

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
            may raise its budget (e.g. ``episodes`` or ``total_steps``).
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
        **overrides: config fields, e.g. ``total_steps=100_000, seed=0, alpha=0.2``.
    """
    planned = plan(
        algo,
        env,
        run_dir=run_dir,
        resume=resume,
        overrides=overrides,
        env_kwargs=env_kwargs,
        trust_env_code=trust_env_code,
    )
    return train_planned(
        planned,
        progress=progress,
        tensorboard=tensorboard,
        wandb=wandb,
        stop_on=stop_on,
        doctor=doctor,
    )


def train_planned(
    planned: Plan,
    *,
    progress: bool | None = None,
    tensorboard: bool = False,
    wandb: bool = False,
    stop_on: tuple[str, ...] | list[str] = (),
    doctor: bool = True,
) -> Any:
    """Carry out a :class:`Plan`: open the run folder, attach the live doctor, train."""
    from rlx.core.threads import set_torch_threads
    from rlx.runs import Run

    spec, config = planned.spec, planned.config
    set_torch_threads()
    budget = getattr(config, spec.budget_field) or 0  # None: the algorithm sizes itself
    observers = _live_doctor(spec.name, planned.env_id, config, tuple(stop_on), doctor)
    with Run(
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
        record={} if planned.recipe is None else {"env_recipe": planned.recipe.record()},
        wandb=wandb,
        writer=is_first_process(),
    ) as run:
        agent = _train_function(spec, config)(config, planned.env, run)
    agent.run_dir = planned.run_dir
    if planned.recipe is not None:  # as rlx.load sets it: evaluate(agent) rebuilds this env
        agent.env_recipe = planned.recipe
    return agent


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
    """The agent of a run folder, from its latest checkpoint (or the one given): an object
    of the :class:`rlx.core.agent.Agent` protocol.

    Loading builds no env and imports nothing the folder names: the recorded env recipe is
    read as data into ``agent.env_recipe``, and ``rlx.evaluate(agent)`` rebuilds it later.
    ``trust_env_code=True`` consents, for this agent, to rebuilding it from code the folder
    names (an entry point, a Gymnasium spec that is not the registered one); without it that
    rebuild stops with one sentence naming what the folder would import."""
    from rlx.runs import load_checkpoint

    record = read_record(run_dir)
    spec = registry.get(record.algo)
    config = registry.config_from_record(spec, record.config)
    _, state = load_checkpoint(checkpoint if checkpoint is not None else record.path)
    agent = spec.load(config, record.env, state)
    agent.run_dir = record.path
    recipe = recorded_recipe(record)
    agent.env_recipe = dataclasses.replace(recipe, trusted=trust_env_code)
    return agent


def _takes_a_data_file(spec: registry.Algorithm, env: Any) -> bool:
    """Whether ``spec`` trains on a data file (its config has ``data``) and ``env`` names one."""
    fields = {f.name for f in dataclasses.fields(spec.config)}
    return "data" in fields and isinstance(env, (str, Path))
