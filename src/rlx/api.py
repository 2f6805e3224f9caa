"""``rlx.train``, ``rlx.load``: the one way every algorithm is trained and restored."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import Any

from rlx import registry
from rlx.core.threads import set_torch_threads
from rlx.errors import RunError
from rlx.runs import CONFIG_FILE, Run, load_checkpoint, read_json


def env_label(env: Any) -> str:
    """A printable id for an env given as an id, a Gymnasium env, or a TabularMDP."""
    if isinstance(env, str):
        return env
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return spec.id
    return getattr(env, "name", None) or type(env).__name__


def default_run_dir(algo: str, env_id: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.-]+", "-", env_id).strip("-") or "env"
    return Path("runs") / f"{algo}-{slug}-{time.strftime('%Y%m%d-%H%M%S')}"


def train(
    algo: str,
    env: Any,
    *,
    run_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool | None = None,
    tensorboard: bool = False,
    stop_on: tuple[str, ...] | list[str] = (),
    doctor: bool = True,
    **overrides: Any,
) -> Any:
    """Train ``algo`` on ``env`` and return the trained agent.

    Args:
        algo: a registered name (``rlx.registry.names()``), e.g. ``"q-learning"``.
        env: a Gymnasium id, a Gymnasium env, or an ``rlx.mdp.TabularMDP``; a board game
            (``"tictactoe"``, ``"connect4"``) for alphazero and muzero; the JSONL data file
            for a language-model stage (``sft``, ``rm``, ``dpo``, ``grpo``, ``rlhf-ppo``).
        run_dir: the run folder (default ``runs/<algo>-<env>-<time>``).
        resume: continue the run in ``run_dir`` from its latest checkpoint; ``overrides``
            may raise its budget (e.g. ``episodes`` or ``total_steps``).
        progress: show a progress bar (None: when stderr is a terminal).
        tensorboard: also log to ``run_dir/tensorboard``.
        stop_on: doctor rule ids (``rlx.diagnostics.rules.RULES_BY_ID``) that end the run,
            checkpoint saved, when they fire, e.g. ``["kl-too-high", "non-finite"]``.
        doctor: run the doctor's rules on the metrics as they are logged; a new finding
            prints one line, and the final findings go into ``summary.json``.
        **overrides: config fields, e.g. ``total_steps=100_000, seed=0, alpha=0.2``.
    """
    spec = registry.get(algo)
    set_torch_threads()
    env_id = env_label(env)
    base = None
    if resume:
        if run_dir is None:
            raise RunError("resume=True needs the run_dir of the run to continue.")
        if not (Path(run_dir) / CONFIG_FILE).exists():
            raise RunError(
                f"--resume needs an existing run folder, but {run_dir} has no {CONFIG_FILE}."
            )
        previous = read_json(Path(run_dir) / CONFIG_FILE)
        base = registry.config_from_record(spec, previous["config"])
    if base is None and "data" not in overrides and _takes_a_data_file(spec, env):
        # language-model stages: rlx.train("sft", "sft.jsonl", model=...) trains on the file
        overrides = {**overrides, "data": str(env)}
    config, preset = registry.make_config(spec, env_id, overrides, base=base)
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(spec.name, env_id)
    budget = getattr(config, spec.budget_field) or 0  # None: the algorithm sizes itself
    with Run(
        run_dir,
        algo=spec.name,
        env_id=env_id,
        config=config,
        total=budget,
        unit=spec.unit,
        resume=resume,
        progress=progress,
        tensorboard=tensorboard,
        preset=preset,
        stop_on=tuple(stop_on),
        doctor=doctor,
    ) as run:
        agent = _train_function(spec, config)(config, env, run)
    agent.run_dir = run_dir
    return agent


def _train_function(spec: registry.Algorithm, config: Any) -> Any:
    """The algorithm's train function; with ``runners=K`` the Ray part is built by
    :mod:`rlx.distributed`, the one layer that knows a cluster, and handed in from above."""
    if getattr(config, "runners", None) is None or spec.remote is None:
        return spec.train
    from rlx.distributed import scaled_out

    return scaled_out(spec)


def load(run_dir: str | Path, checkpoint: str | Path | None = None) -> Any:
    """The agent of a run folder, from its latest checkpoint (or the one given)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"run folder {run_dir} does not exist.")
    record = read_json(run_dir / CONFIG_FILE)
    spec = registry.get(record["algo"])
    config = registry.config_from_record(spec, record["config"])
    _, state = load_checkpoint(checkpoint if checkpoint is not None else run_dir)
    agent = spec.load(config, record["env"], state)
    agent.run_dir = run_dir
    return agent


def _takes_a_data_file(spec: registry.Algorithm, env: Any) -> bool:
    """Whether ``spec`` trains on a data file (its config has ``data``) and ``env`` names one."""
    fields = {f.name for f in dataclasses.fields(spec.config)}
    return "data" in fields and isinstance(env, (str, Path))
