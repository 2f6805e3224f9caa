"""Env runners as Ray actors: collect in parallel, learn in one place.

:func:`remote_collection` is what ``runners=K`` hands an algorithm's train function as
``remote=`` (through :func:`rlx.distributed.scaled_out`): a :class:`RayEnvRunners`, the Ray
side of the seam :mod:`rlx.core.runners` declares. The training loop asks it to start K
runners of a worker class written on the core side (the on-policy
:class:`~rlx.core.rollouts.RolloutWorker`, the off-policy
:class:`~rlx.core.transitions.TransitionWorker`) and lays their fragments side by side in its
buffer; nothing here knows an algorithm.

Each runner is a Ray actor holding its worker (a vector env of ``num_envs`` copies and a copy
of the policy). Once per round the learner's payload (its weights) goes into Ray's object
store once (``ray.put``) and every runner gets the reference, collects a fragment and returns
it. Steps are exact: only valid transitions count, and an episode's step is the learner's
count at the vector step it ended, over all runners' copies, as in one process.

**Seeds.** Runner ``i`` gets child ``i`` of ``numpy.random.SeedSequence((seed, start_step))``
(:func:`rlx.core.seeding.seed_root`): its env seed and its action generator come from that
child, so no two runners collect the same episodes and the same run seed repeats the same data.
A resumed run (``start_step > 0``) draws a fresh family, so it does not replay the episodes of
the run's start.

**Faults.** A runner that dies (``RayActorError``: killed, out of memory, node lost) is
replaced by a new actor seeded with the next child of the same sequence; its partial fragment
is dropped (the loop leaves its columns out of that round), one line goes to stderr and the
learner logs the run's ``runner_restarts`` so far. A runner that dies more than
:data:`MAX_CONSECUTIVE_DEATHS` times in a row ends the run with a :class:`TrainingError`.
"""

from __future__ import annotations

import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.core.seeding import seed_root
from rlx.core.threads import set_torch_threads
from rlx.distributed.ray_runtime import RaySession, require_ray
from rlx.errors import ConfigError, TrainingError

RUNNER_RESTARTS = "runner_restarts"
"""Metric: runners restarted since the run (or its resume) began."""
RUNNER_NODES = "runner_nodes"
"""Metric: the Ray nodes the runners are on now (1 on one machine; more on a cluster)."""
MAX_CONSECUTIVE_DEATHS = 3
READY_TIMEOUT_S = 120.0
"""How long new runners may take to be placed and started before the run gives up."""


# ============================================================================ the pool
class RunnerActor:
    """What runs inside each Ray actor: a worker built from its seed, called once per update."""

    def __init__(self, worker_class: type, kwargs: dict[str, Any], seed_seq: Any) -> None:
        set_torch_threads(1)  # a runner is one core's work
        self.worker = worker_class(seed_seq, **kwargs)

    def ready(self) -> str:
        """The id of the Ray node this runner was placed on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def collect(self, boxed: list[Any], *args: Any) -> tuple[Any, float, float]:
        """The worker's result for the payload whose reference is ``boxed[0]`` (fetched here,
        so that the fetch can be timed), the fetch's seconds and the work's seconds."""
        import ray

        t0 = time.perf_counter()
        payload = ray.get(boxed[0])
        t1 = time.perf_counter()
        result = self.worker.collect(payload, *args)
        return result, t1 - t0, time.perf_counter() - t1


@dataclass
class RoundTiming:
    """Where the wall time of one round went (seconds; runner figures: the slowest one's)."""

    put_s: float = 0.0  # ray.put of the payload by the learner
    fetch_s: float = 0.0  # the runners' fetch of it from the object store
    work_s: float = 0.0  # the runners' own collection
    round_s: float = 0.0  # from the calls until every result is back

    @property
    def broadcast_s(self) -> float:
        """The weight broadcast: put once, fetched by every runner."""
        return self.put_s + self.fetch_s

    @property
    def return_s(self) -> float:
        """The calls and the fragments' return: dispatch, serialisation and transfer."""
        return max(self.round_s - self.fetch_s - self.work_s, 0.0)


class RunnerPool:
    """``count`` Ray actors, each running ``worker_class(seed_seq, **kwargs)``.

    :meth:`run` puts the payload in the object store once, calls every runner's worker with
    its reference and returns the results in runner order; a runner that died gives None and
    is replaced (see the module docstring). ``note`` says on stderr what became of the dead
    runner's work.
    """

    def __init__(
        self,
        worker_class: type,
        kwargs: dict[str, Any],
        count: int,
        seed: int,
        *,
        start_step: int = 0,
        label: str = "env runner",
        note: str = "its partial fragment was dropped",
    ) -> None:
        self.ray = require_ray(f"{label}s")
        self.worker_class, self.kwargs, self.label, self.note = worker_class, kwargs, label, note
        self.root = seed_root(seed, start_step)
        self.remote_class = self.ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(RunnerActor)
        self.actors = [self._start(child) for child in self.root.spawn(count)]
        self.nodes = self._await_ready(self.actors)
        self.deaths = [0] * count
        self.restarts = 0
        self.timing = RoundTiming()

    def _start(self, seed_seq: np.random.SeedSequence) -> Any:
        try:
            return self.remote_class.remote(self.worker_class, self.kwargs, seed_seq)
        except (TypeError, AttributeError, pickle.PicklingError) as exc:
            raise ConfigError(
                f"cannot send the env to Ray {self.label}s ({type(exc).__name__}: {exc}); give "
                "the env as a Gymnasium id, or an env object that can be pickled."
            ) from exc

    def _await_ready(self, actors: Sequence[Any]) -> list[str]:
        """Wait for ``actors`` to start; the ids of the nodes they run on."""
        pending = [actor.ready.remote() for actor in actors]
        ready, late = self.ray.wait(pending, num_returns=len(pending), timeout=READY_TIMEOUT_S)
        if late:
            cpus = self.ray.cluster_resources().get("CPU", 0)
            self.close()
            raise ConfigError(
                f"only {len(ready)} of {len(pending)} Ray {self.label}s started within "
                f"{READY_TIMEOUT_S:.0f} s; each needs one CPU and the cluster has {cpus:g}: use "
                "fewer --runners, or add nodes."
            )
        try:
            return self.ray.get(pending)
        except self.ray.exceptions.RayError as exc:
            self.close()
            raise TrainingError(f"a Ray {self.label} could not start: {exc}") from exc

    def run(
        self,
        payload: Any,
        args: Sequence[tuple[Any, ...]] | None = None,
        slots: Sequence[int] | None = None,
    ) -> list[Any | None]:
        """Every runner's (or those in ``slots``) result for ``payload`` (an object or a
        reference from an earlier round) and its own ``args``; None where a runner died."""
        t0 = time.perf_counter()
        ref = payload if isinstance(payload, self.ray.ObjectRef) else self.ray.put(payload)
        t1 = time.perf_counter()
        slots = range(len(self.actors)) if slots is None else slots
        calls = [self.actors[i].collect.remote([ref], *(args[i] if args else ())) for i in slots]
        results: list[Any | None] = []
        fetch, work = [0.0], [0.0]
        for slot, call in zip(slots, calls, strict=True):
            try:
                result, fetch_s, work_s = self.ray.get(call)
            except self.ray.exceptions.RayActorError as exc:
                self._restart(slot, exc)
                results.append(None)
                continue
            self.deaths[slot] = 0
            results.append(result)
            fetch.append(fetch_s)
            work.append(work_s)
        self.timing = RoundTiming(t1 - t0, max(fetch), max(work), time.perf_counter() - t1)
        return results

    def _restart(self, slot: int, exc: Exception) -> None:
        self.deaths[slot] += 1
        self.restarts += 1
        self.ray.kill(self.actors[slot], no_restart=True)
        if self.deaths[slot] > MAX_CONSECUTIVE_DEATHS:
            raise TrainingError(
                f"Ray {self.label} {slot} died {self.deaths[slot]} times in a row (last: "
                f"{type(exc).__name__}); the last checkpoint is kept. Check the env and the "
                "nodes' memory."
            ) from exc
        self.actors[slot] = self._start(self.root.spawn(1)[0])
        self.nodes[slot] = self._await_ready([self.actors[slot]])[0]
        print(
            f"rlx: Ray {self.label} {slot} died ({type(exc).__name__}); restarted it with a "
            f"fresh seed ({self.restarts} restart(s) so far); {self.note}.",
            file=sys.stderr,
            flush=True,
        )

    def run_some(self, payload: Any) -> tuple[list[Any | None], set[int]]:
        """:meth:`run`, again while no runner at all came back (each round replaces the dead
        ones); also returns the runners replaced on the way."""
        results = self.run(payload)
        dropped = {i for i, r in enumerate(results) if r is None}
        while all(r is None for r in results):
            results = self.run(payload)
            dropped |= {i for i, r in enumerate(results) if r is None}
        return results, dropped

    def stats(self) -> dict[str, float]:
        """``runner_restarts`` so far and ``runner_nodes`` (distinct nodes of the runners)."""
        return {RUNNER_RESTARTS: float(self.restarts), RUNNER_NODES: float(len(set(self.nodes)))}

    def kill(self, slot: int) -> None:
        """Kill runner ``slot`` now, as a crash would (for tests and drills)."""
        self.ray.kill(self.actors[slot], no_restart=True)

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []


# ============================================================================ the seam
class RayEnvRunners:
    """:class:`rlx.core.runners.EnvRunners` on Ray: each :meth:`start` joins (or starts) the
    Ray instance of ``address`` and places the runners."""

    def start(
        self,
        worker: type,
        options: dict[str, Any],
        *,
        count: int,
        seed: int,
        start_step: int,
        address: str | None,
    ) -> RayRunnerGroup:
        session = RaySession(address, count, f"runners={count}").start()
        try:
            pool = RunnerPool(worker, options, count, seed, start_step=start_step)
        except BaseException:
            session.close()
            raise
        return RayRunnerGroup(pool, session)


class RayRunnerGroup:
    """Started runners and the Ray session they run in (:class:`rlx.core.runners.RunnerGroup`);
    :meth:`close` stops both."""

    def __init__(self, pool: RunnerPool, session: RaySession) -> None:
        self.pool, self.session = pool, session

    def run_some(self, payload: Any) -> tuple[list[Any | None], set[int]]:
        return self.pool.run_some(payload)

    def stats(self) -> dict[str, float]:
        return self.pool.stats()

    @property
    def timing(self) -> RoundTiming:
        """Where the last round's wall time went (for benchmarks)."""
        return self.pool.timing

    def close(self) -> None:
        self.pool.close()
        self.session.close()


def remote_collection(spec: Any) -> RayEnvRunners:
    """What ``runners=K`` hands ``spec.train`` as ``remote=``: env runners on Ray (Ray itself
    starts with the run's first round)."""
    return RayEnvRunners()
