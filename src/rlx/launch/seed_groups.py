"""Seed groups: one run per seed, trained in parallel processes, listed in ``group.json``.

``rlx.train(..., seeds=[0, 1, 2])`` and ``rlx train ALGO --seeds 0 1 2`` (:func:`train_seeds`)
plan every seed first (:func:`rlx.launch.plan.plan`), then train them, each in a process of its own
(:func:`seed_worker`, :mod:`rlx.runs.parallel`) or one after another in this process, and
return a :class:`SeedGroup`; the group's file is read and written by :mod:`rlx.runs.group`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlx import registry
from rlx.core.env_recipe import IN_PYTHON, Consent
from rlx.errors import ConfigError, RLXError, RunError
from rlx.launch.plan import (
    Plan,
    default_run_dir,
    env_label,
    load,
    plan,
    recorded_env,
    train_planned,
    without_user_only,
)
from rlx.launch.references import with_references
from rlx.runs import RunRecord
from rlx.runs.folder import has_checkpoint, inspect_folder

SEED_WORKER = "import sys; from rlx.launch.seed_groups import seed_worker; sys.exit(seed_worker())"
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
    ``group.load(seed)`` loads one (:func:`rlx.launch.plan.load`), ``group.agents()`` every seed
    that has a checkpoint. ``group.report()`` writes the group's page (mean curve with its 95%
    bootstrap band, IQM of the final returns), ``group.doctor()`` diagnoses every seed and names
    those that behave differently. ``SeedGroup.read(path)`` opens a group trained before.
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

    @with_references
    def doctor(self) -> Any:
        """Every seed diagnosed, and the seeds that behave differently
        (:func:`rlx.diagnostics.group_doctor.doctor_group`)."""
        from rlx.diagnostics.group_doctor import doctor_group

        return doctor_group(self.path)

    @with_references
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

    Every seed is planned first (:func:`rlx.launch.plan.plan`, the config being ``overrides`` with
    ``seed=<seed>``), so a mistake stops the group before anything trains. The seeds then
    train ``jobs`` at a time (default: one per seed, up to the cores this process may use),
    each in a process of its own with one torch thread (:mod:`rlx.runs.parallel`), or one
    after another in this process when ``jobs`` is 1, when ``callbacks`` are given, or when
    the env given cannot be sent to another process (an object or a function of your
    script: pass an id or a ``module:factory`` entry point to run them in parallel). A seed
    that fails is recorded in ``group.json`` with why; the others go on. The first Ctrl-C
    stops every seed with its checkpoint saved (seeds not started yet stay ``pending``).

    A callback with an ``on_seed_end(seed, status)`` method (besides the hooks of
    :mod:`rlx.callbacks`) hears as each seed ends, with the status ``group.json`` records for
    it; returning False leaves the seeds after it pending, untrained (what a tuner does with a
    trial it has pruned: :mod:`rlx.launch.tune`).

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
    """Plans every seed of a group (:func:`rlx.launch.plan.plan`) before anything trains."""

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
    ) -> tuple[Any, Sequence[tuple[int, Plan | None]]]:
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
    ) -> tuple[Any, Sequence[tuple[int, Plan | None]]]:
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
        recorded: dict[str, Any] | None = None
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
                if recorded is None:  # named once, however many seeds start
                    recorded = self._recorded_overrides(record)
                given = {**recorded, **self.overrides}
                planned.append((seed, self._fresh(env, env_kwargs, folder, seed, given, False)))
        return record, planned

    def _recorded_overrides(self, record: Any) -> dict[str, Any]:
        """The config fields ``group.json`` records for every seed, checked as data: the
        fields only the user sets (:data:`rlx.launch.plan.USER_ONLY_FIELDS`) are dropped with a
        warning unless given now (:func:`rlx.launch.plan.without_user_only`)."""
        from rlx.runs.group import GROUP_FILE

        where = record.path / GROUP_FILE
        overrides = record.extra.get("overrides") or {}
        if not isinstance(overrides, dict) or not all(isinstance(k, str) for k in overrides):
            raise RunError(
                f"{where} records overrides={overrides!r}, which is not config fields by name "
                "(an object of FIELD: VALUE); the group's file is damaged."
            )
        return without_user_only(
            overrides, str(where), given=list(self.overrides), consent=self.consent
        )

    def _group_env(self, record: Any) -> tuple[Any, Any]:
        """The env a seed the group never started trains on: the one given now, else the
        group's recorded recipe (rebuilt as a run folder's is,
        :func:`rlx.launch.plan.recorded_env`)."""
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
        planned: Sequence[tuple[int, Plan | None]],
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
                # spec=None only in the pickle: the worker puts registry.get(name) back
                pickle.dumps((p.spec.name, dataclasses.replace(p, spec=None), options))  # type: ignore[arg-type]
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
                if not self._heard(seed, self._ended(seed, message)):
                    break
                continue
            status = self._ended(seed, None)
            if status == "interrupted" or not self._heard(seed, status):
                break  # Ctrl-C, or a callback's stop: the seeds after it stay pending
        return errors

    def _heard(self, seed: int, status: str) -> bool:
        """Tell the callbacks with ``on_seed_end`` how ``seed`` ended; False when one of them
        stops the group there."""
        going = True
        for callback in self.callbacks:
            hook = getattr(callback, "on_seed_end", None)
            if callable(hook) and hook(seed, status) is False:
                going = False
        return going

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
    options)`` pickled on stdin by the group's own process, trains it
    (:func:`rlx.launch.plan.train_planned`). Exit codes as the CLI's: 2 a user error (its sentence
    on stderr), 130 aborted."""
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


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)
