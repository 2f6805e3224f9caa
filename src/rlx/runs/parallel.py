"""Run jobs in child processes, a few at a time, and stop them all cleanly on Ctrl-C.

A seed group trains its seeds here (:func:`rlx.launch.seed_groups.train_seeds`), and ``rlx tune
--jobs K`` runs its workers here (:func:`rlx.launch.tune.worker_main`): each job is one process
started as ``command`` with its payload on stdin (a seed's pickled plan, a worker's study
folder), one torch thread, and the parent's working folder, so its run folder is where the
parent planned it. Fresh
processes rather than :mod:`multiprocessing`: a child imports rlx, never the user's script
(the spawn start method re-runs a script's top level in every worker unless it is guarded by
``if __name__ == "__main__"``), and each child is an ordinary process whose output is read
line by line and shown prefixed with its label (``[seed 3] ...``).

Signals: the first Ctrl-C (SIGINT) or SIGTERM sent to the parent starts no further job and
sends SIGTERM to each running one, which a run reads as "save a checkpoint and stop"
(:class:`rlx.runs.Run`); a second Ctrl-C sends SIGINT, which makes a run that was already
asked to stop end at once, as a second Ctrl-C does to a single run. A Ctrl-C typed at a
terminal reaches the children too (one process group): SIGTERM never aborts a run, so the
first Ctrl-C still stops every child with its checkpoint.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

POLL_S = 0.05
TAIL_LINES = 30
"""Lines of a child's stderr kept to say why it failed."""
STOP_LINE = "rlx: stopping every seed, each saving a checkpoint (Ctrl-C again to abort now)."
"""What :func:`run_jobs` says when a stop is asked, unless its caller words it (a seed
group's; the tuner's workers say theirs)."""


@dataclass(frozen=True)
class Job:
    """One child process: ``label`` prefixes its output, ``payload`` goes to its stdin."""

    label: str
    payload: bytes
    key: Any = None
    """the caller's handle on the job (e.g. the seed)"""


@dataclass
class Outcome:
    """How a job ended: ``returncode`` None when it never started (stopped before its turn)."""

    job: Job
    returncode: int | None = None
    tail: list[str] = field(default_factory=list)
    """the last lines the child wrote on stderr"""
    stopped: bool = False
    """the child was asked to stop (Ctrl-C or SIGTERM sent to the parent)"""


@dataclass
class _Child:
    job: Job
    process: subprocess.Popen
    tail: collections.deque
    readers: list[threading.Thread]


class _Signals:
    """Counts SIGINT/SIGTERM sent to this process while jobs run (main thread only)."""

    def __init__(self) -> None:
        self.count = 0
        self.last: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.count += 1
        self.last = signum


def child_environment(threads: int = 1) -> dict[str, str]:
    """The parent's environment for a child: ``threads`` torch and BLAS threads unless the
    user set ``RLX_NUM_THREADS`` / ``OMP_NUM_THREADS``, unbuffered output, and rlx importable
    from where this process imports it."""
    env = dict(os.environ)
    env.setdefault("RLX_NUM_THREADS", str(threads))
    env.setdefault("OMP_NUM_THREADS", str(threads))
    env["PYTHONUNBUFFERED"] = "1"
    package_root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if package_root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([package_root, *paths])
    return env


def run_jobs(
    jobs: Sequence[Job],
    command: Sequence[str],
    workers: int,
    *,
    env: Mapping[str, str] | None = None,
    on_start: Callable[[Job], None] | None = None,
    on_end: Callable[[Outcome], None] | None = None,
    announce: Callable[[str], None] | None = None,
    stop_line: str = STOP_LINE,
) -> tuple[list[Outcome], bool]:
    """Run each job as ``command`` (payload on stdin), ``workers`` at a time, in order.

    Returns the outcomes (in the jobs' order) and whether a second Ctrl-C asked to abort.
    ``on_start`` and ``on_end`` are called in this thread as each job starts and ends;
    ``announce`` gets ``stop_line`` when a stop is asked.
    """
    announce = announce or (lambda line: print(line, file=sys.stderr, flush=True))
    pending = list(jobs)
    running: list[_Child] = []
    outcomes = {id(job): Outcome(job) for job in jobs}
    lock = threading.Lock()
    sent = 0  # signals forwarded to the children
    with _Signals() as signals:
        while pending or running:
            if signals.count > sent:
                sent = _forward(signals, sent, running, announce, stop_line)
            while pending and len(running) < workers and not signals.count:
                job = pending.pop(0)
                running.append(_start(job, command, env, lock))
                if on_start is not None:
                    on_start(job)
            for child in list(running):
                code = child.process.poll()
                if code is None:
                    continue
                for reader in child.readers:
                    reader.join()
                running.remove(child)
                outcome = outcomes[id(child.job)]
                outcome.returncode, outcome.tail = code, list(child.tail)
                outcome.stopped = signals.count > 0
                if on_end is not None:
                    on_end(outcome)
            if pending and signals.count:
                for job in pending:
                    outcomes[id(job)].stopped = True
                pending.clear()
            time.sleep(POLL_S)
    aborted = signals.count > 1 and signals.last == signal.SIGINT
    return [outcomes[id(job)] for job in jobs], aborted


def _forward(
    signals: _Signals, sent: int, running: list[_Child], announce: Any, stop_line: str
) -> int:
    """Pass the stop on to the running children: SIGTERM first (with ``stop_line`` said),
    SIGINT on a second Ctrl-C."""
    if sent == 0:
        announce(stop_line)
        sig = signal.SIGTERM
    else:
        sig = signal.SIGINT if signals.last == signal.SIGINT else signal.SIGTERM
    for child in running:
        if child.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(sig)
    return signals.count


def _start(job: Job, command: Sequence[str], env: Mapping[str, str] | None, lock: Any) -> _Child:
    process = subprocess.Popen(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
    )
    tail: collections.deque = collections.deque(maxlen=TAIL_LINES)
    readers = [
        _reader(process.stdout, sys.stdout, job.label, None, lock),
        _reader(process.stderr, sys.stderr, job.label, tail, lock),
    ]
    assert process.stdin is not None
    try:
        process.stdin.write(job.payload)
        process.stdin.close()
    except BrokenPipeError:  # the child ended before reading: its stderr says why
        pass
    return _Child(job, process, tail, readers)


def _reader(
    pipe: IO[bytes] | None, out: Any, label: str, tail: collections.deque | None, lock: Any
) -> threading.Thread:
    """A thread that copies ``pipe`` to ``out`` line by line, each line prefixed with
    ``[label]``, keeping the last lines in ``tail``."""

    def copy() -> None:
        assert pipe is not None
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if tail is not None and line.strip():
                tail.append(line)
            with lock, contextlib.suppress(OSError, ValueError):  # our output closed: read on
                print(f"[{label}] {line}", file=out, flush=True)
        pipe.close()

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


__all__ = ["Job", "Outcome", "child_environment", "run_jobs"]
