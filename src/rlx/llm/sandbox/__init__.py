"""The ``python-tests`` and ``stdio-tests`` rewards: model-written code judged against a row's
tests, in a sandbox.

A completion scores 1.0 when its program passes its row's tests (or the share of checks it
passes, with ``partial=True``), and 0.0 otherwise. Three processes take part:

1. the **launcher** (:mod:`~rlx.llm.sandbox.launcher`), the trainer's process in fresh network,
   PID, IPC and mount namespaces: it makes the host read-only, forks the other two into rooms of
   their own and supervises them; it runs neither the program nor the tests;
2. the **program** (``prompt + completion``, :mod:`~rlx.llm.sandbox.server`), forked before the
   launcher reads the tests: it only defines its names, then answers calls to them;
3. the **judge** (:mod:`~rlx.llm.sandbox.judge`), forked with the tests into a second room as a
   second uid: it runs them with the program's names bound to plain data and to handles that
   can only be called, read, iterated or printed (:mod:`~rlx.llm.sandbox.wire`). Every question
   a test asks (``==``, ``in``, ``bool``, ``len``, ``isinstance``) the judge answers itself, on
   plain data. The verdict goes to the launcher on a pipe the program never holds.

**The guarantee.** With the namespaces and uids (as root), nothing the program can read, print,
patch, leave behind or kill decides its score: these score 0 (each is a test in
``tests/llm/test_sandbox*.py``): module objects named after the standard library, a patched
server announcing builtins or the tests' names, objects that answer comparisons and
membership, asserts hidden from partial credit, test layouts that would run nothing, state left
for a later run, a judge made to exhaust its memory, exits before or during the tests,
``atexit`` and ``excepthook`` tricks, printed or forged verdicts, frame, heap and raw-memory
searches (the tests were never in the program's process), kills of the trainer or of other
runs, programs that never return or flood. What the program *can* do is answer the calls it
is given, so a test passes only when the program computes what the test expects. Calls pass
arguments by value (program objects by handle): a test that relies on a function mutating a
plain argument, or passes a callback, fails.

What protects the trainer (:func:`sandbox_info` says which are active on this machine):

- **time**: a wall-clock limit of ``timeout_s`` per program and its tests, held by the launcher
  (the judge's own alarm first); ``RLIMIT_CPU`` of ``ceil(timeout_s) + 1`` s is a second stop,
  and the trainer kills a launcher still there 2 s after the limit.
- **memory**: ``RLIMIT_AS`` of ``memory_mb`` MiB for the program, ``judge_memory_mb`` for the
  judge. Address space is not memory used: each thread reserves its 8 MiB stack.
- **processes**: as root, a PID namespace whose init is the launcher, so when it exits the
  kernel kills whatever is left; each side's own uid with ``RLIMIT_NPROC`` of 32.
- **network**: as root, a private network namespace whose only interface, loopback, is down.
- **files and state**: as root, every host mount read-only; fresh size-capped tmpfs mounts on
  ``/tmp``, ``/var/tmp``, ``/dev/shm`` and ``/run/lock`` for each side, its own IPC namespace
  (System V and POSIX queues), a ``/proc`` that shows only its own processes; all gone with
  the run. ``RLIMIT_FSIZE`` caps any one file, and the captured output, at 10 MiB.
- **environment**: only ``PATH``, ``HOME``, ``TMPDIR``, ``LANG`` and thread caps; no secrets
  inherited; ``python -I`` ignores ``PYTHON*`` variables and the user site.

What is *not* protected: both sides can read world-readable files (with no network nothing
read can leave; keep a data file of expected values private to the trainer's user). Without
root there are no namespaces and no uid change: the program runs as the trainer's user and
could signal the judge. rlx then refuses to run model-written code
(:class:`~rlx.errors.SandboxError`) unless the user passes ``allow_unisolated=True`` (CLI
``--allow-unisolated``), and warns once, at the start of the run, naming each missing
protection; the run's ``summary.json`` records them and ``rlx doctor`` shows them.

Written here rather than taken from a library: a test runner that keeps the verdict outside the
untrusted process, with Linux namespaces and uid isolation and no container engine, is not
something a maintained Python package offers.
"""

from __future__ import annotations

from rlx.llm.sandbox.isolation import Isolation
from rlx.llm.sandbox.process import (
    SandboxResult,
    current_isolation,
    run_many,
    run_sandboxed,
    run_stdio,
)
from rlx.llm.sandbox.reward import (
    SandboxWarning,
    check_isolation,
    prepare_for_run,
    python_tests_reward,
    sandbox_info,
    stdio_cases,
    stdio_tests_reward,
    warn_unisolated,
)

__all__ = [
    "Isolation",
    "SandboxResult",
    "SandboxWarning",
    "check_isolation",
    "current_isolation",
    "prepare_for_run",
    "python_tests_reward",
    "run_many",
    "run_sandboxed",
    "run_stdio",
    "sandbox_info",
    "stdio_cases",
    "stdio_tests_reward",
    "warn_unisolated",
]
