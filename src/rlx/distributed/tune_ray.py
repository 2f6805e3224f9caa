"""``rlx tune --jobs K --ray ADDRESS``: the study's workers as Ray tasks.

Each task runs the same worker as a local ``--jobs`` process (:func:`rlx.launch.tune.work`, handed
in from above: nothing here imports the tuner): it opens the study from its storage in the study
folder, starts trials until the study has enough, and writes every trial beside the storage. A
task runs whole trials, one at a time: a trial's seed group (``trial-NNNN/seed-N/``, one rlx
run folder per seed) trains one seed after another inside the task, so the median pruner and
the doctor watch every seed from the process that reports to the study. The held-out check is
not the tasks': it runs once, after them, in the process that called ``rlx tune``. The study
lives on disk as Optuna's journal file, appended under a file lock, so the tasks need no other
channel between them; across machines the study folder must be on a filesystem they all mount
at the same path (NFS, a cluster's shared disk). Ray places the tasks, one CPU each;
``ADDRESS`` is ``local`` (a Ray instance started here for the study, shut down at its end) or
a cluster's (:class:`rlx.distributed.ray_runtime.RaySession`).

Ctrl-C cancels the tasks: each one's trial stops as after Ctrl-C in a local worker (the trial
is marked failed, its seed group kept) and ``rlx tune`` on the same folder resumes the study.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from rlx.distributed.ray_runtime import RaySession


def run_workers_on_ray(
    work: Callable[..., tuple[str, str]],
    study_dir: str,
    jobs: int,
    address: str | None,
    **options: Any,
) -> list[tuple[str, str]]:
    """Run ``work(study_dir, i, **options)`` for ``i < jobs`` as Ray tasks; their
    ``(status, message)`` outcomes (an interrupted wait adds ``("interrupted", "")``)."""
    with RaySession(address, jobs, f"rlx tune --jobs {jobs} --ray") as session:
        ray: Any = session.ray
        remote = ray.remote(num_cpus=1, max_retries=0)(work)
        refs = [remote.remote(study_dir, i, **options) for i in range(jobs)]
        try:
            return list(ray.get(refs))
        except KeyboardInterrupt:
            for ref in refs:
                ray.cancel(ref)
            outcomes: list[tuple[str, str]] = []
            for ref in refs:
                with contextlib.suppress(Exception):  # a cancelled task has no outcome
                    outcomes.append(ray.get(ref))
            return [*outcomes, ("interrupted", "")]


__all__ = ["run_workers_on_ray"]
