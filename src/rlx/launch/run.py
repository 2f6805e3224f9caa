"""One training request, and the one place it is dispatched.

``rlx.train(...)`` (:mod:`rlx.api`) and ``rlx train ...`` (:mod:`rlx.cli`) each build a
:class:`TrainRequest` and hand it to :func:`launch`, which decides what kind of run it is:

- a **seed group** when seeds are asked for (``seeds``/``--seeds``, ``jobs``/``--jobs``) or
  ``run_dir`` already holds one (:func:`rlx.launch.seed_groups.train_seeds`);
- a **healing run** with ``heal`` (:func:`rlx.launch.heal.train_healing`);
- else a **plain run**: planned once (:func:`rlx.launch.plan.plan`) and carried out
  (:func:`rlx.launch.plan.train_planned`).

The faces only translate their inputs (keyword arguments, flags) into the request, so both
take the same options and are refused the same combinations by :func:`check_request`, each in
its own words.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlx.core.env_recipe import IN_PYTHON, Consent
from rlx.errors import ConfigError
from rlx.launch.references import with_references

DEFAULT_HEAL_MAX = 3
"""The most rollbacks of a healing run when none is given."""


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    """What to train and how to watch it: every option of ``rlx.train`` and ``rlx train``."""

    algo: str
    env: Any = None
    """a Gymnasium id or env, an MDP, a board game, an entry point, or an LM stage's data"""
    env_kwargs: dict[str, Any] | None = None
    run_dir: str | Path | None = None
    resume: bool = False
    resume_from: str | Path | int | None = None
    overwrite: bool = False
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    """config fields"""
    seeds: Sequence[int] | None = None
    jobs: int | None = None
    heal: bool = False
    heal_max: int | None = None
    trust_env_code: bool = False
    consent: Consent = IN_PYTHON
    """how consent to run env code was given (in Python or on the command line)"""
    command: str | None = None
    """the call or command line as the user wrote it, for the run's history"""
    progress: bool | None = None
    tensorboard: bool = False
    wandb: bool = False
    stop_on: Sequence[str] = ()
    doctor: bool = True
    callbacks: Sequence[Any] = ()

    @functools.cached_property
    def is_group(self) -> bool:
        """Whether this request trains a seed group."""
        from rlx.runs.group import is_group_folder

        if self.seeds is not None or self.jobs is not None:
            return True
        return self.run_dir is not None and is_group_folder(self.run_dir)


def check_request(request: TrainRequest) -> None:
    """Refuse the combinations no run can carry out, with one sentence each, in the words of
    the face the request came from (its :class:`~rlx.core.env_recipe.Consent`: ``heal=True``
    in Python, ``--heal`` on the command line): the one place both faces are checked."""
    arg, option = request.consent.arg, request.consent.option
    group = request.is_group
    if request.heal and group:
        raise ConfigError(
            f"{arg('heal')} heals one run as it trains; heal the seeds of a group one run each."
        )
    if request.heal and not request.doctor:
        raise ConfigError(f"{arg('heal')} needs the doctor watching the run; leave "
                          f"{arg('doctor')}.")  # fmt: skip
    if request.heal_max is not None and not request.heal:
        heal_max, heal = option("heal_max", request.heal_max), arg("heal")
        raise ConfigError(f"{heal_max} caps the rollbacks of {heal}; pass {heal} too.")
    if request.jobs is not None and request.seeds is None and not request.resume:
        jobs, seeds = option("jobs", request.jobs), option("seeds")
        raise ConfigError(f"{jobs} sets how many seeds of {seeds} train at once; pass {seeds} too.")
    if request.resume_from is not None and group:
        resume_from = option("resume_from", request.resume_from)
        raise ConfigError(f"{resume_from} picks one run's checkpoint; give one seed's folder.")


@with_references
def launch(request: TrainRequest) -> Any:
    """Train what ``request`` asks for: the trained agent, or a
    :class:`rlx.launch.seed_groups.SeedGroup` for a seed group."""
    check_request(request)
    watching: dict[str, Any] = {
        "progress": request.progress,
        "tensorboard": request.tensorboard,
        "wandb": request.wandb,
        "stop_on": tuple(request.stop_on),
        "callbacks": request.callbacks,
    }
    if request.is_group:
        from rlx.launch.seed_groups import train_seeds

        return train_seeds(
            request.algo, request.env, seeds=request.seeds, jobs=request.jobs,
            run_dir=request.run_dir, resume=request.resume, overwrite=request.overwrite,
            overrides=dict(request.overrides), env_kwargs=request.env_kwargs,
            trust_env_code=request.trust_env_code, consent=request.consent,
            command=request.command, doctor=request.doctor, **watching,
        )  # fmt: skip
    from rlx.launch.plan import plan, train_planned

    planned = plan(
        request.algo, request.env, run_dir=request.run_dir, resume=request.resume,
        overwrite=request.overwrite, overrides=dict(request.overrides),
        env_kwargs=request.env_kwargs, trust_env_code=request.trust_env_code,
        consent=request.consent, resume_from=request.resume_from,
    )  # fmt: skip
    if request.command is not None:
        planned = dataclasses.replace(planned, command=request.command)
    if request.heal:
        from rlx.launch.heal import train_healing

        heal_max = DEFAULT_HEAL_MAX if request.heal_max is None else request.heal_max
        return train_healing(
            planned, heal_max=heal_max, trust_env_code=request.trust_env_code, **watching
        )
    return train_planned(planned, doctor=request.doctor, **watching)


__all__ = ["DEFAULT_HEAL_MAX", "TrainRequest", "check_request", "launch"]
