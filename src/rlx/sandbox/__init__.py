"""The ``python-tests`` and ``stdio-tests`` rewards: model-written code judged against a row's
tests, in a sandbox.

A completion scores 1.0 when its program passes its row's tests (or the share of checks it
passes, with ``partial=True``), and 0.0 otherwise. Two sandboxed processes take part, each in a
**room** of its own (:mod:`~rlx.sandbox.isolation`), started and supervised by the trainer
(:mod:`~rlx.sandbox.process`), which runs neither the program nor the tests:

1. the **program** (``prompt + completion``, :mod:`~rlx.sandbox.server`), whose room is
   given only the program: it defines its names, then answers calls to them;
2. the **judge** (:mod:`~rlx.sandbox.judge`), whose room is given the tests (and the row's
   trusted set-up code): it runs them with the program's names bound to plain data and to
   handles (:mod:`~rlx.sandbox.wire`). A comparison of a program object with the tests' own
   data (``==``, ``<``, ``in``, an operator that would answer plain data) is never asked of the
   program: the judge answers it on plain data. The verdict goes to the trainer on a pipe the
   program never holds.

**The guarantee.** With the rooms, nothing the program can read, print, patch, leave behind or
kill decides its score: these score 0 (each is a test in ``tests/sandbox/test_sandbox*.py``):
module objects named after the standard library, a patched server announcing builtins or the
tests' names, objects that answer comparisons and membership, asserts hidden from partial
credit, test layouts that would run nothing, state left for a later run, a judge made to exhaust
its memory, exits before or during the tests, ``atexit`` and ``excepthook`` tricks, printed or
forged verdicts, frame, heap and raw-memory searches (the tests were never in the program's
room), kills of the trainer or of other runs, programs that never return or flood. What the
program *can* do is answer the calls it is given, so a test passes only when the program
computes what the test expects. Honest Python behaves as it does in one interpreter (arguments
changed in place, callbacks, fixtures, pickling, ``isinstance`` with the program's classes ...);
where the judge departs from plain Python, it closes a forgery (:mod:`~rlx.sandbox.judge`
lists them).

What protects the trainer (:func:`sandbox_info` says which are active on this machine), and
whose it is:

- **the rooms** (bubblewrap's): fresh user, PID, network, IPC, UTS and cgroup namespaces per
  room; a root file system of read-only ``/usr``, ``/lib*``, ``/bin``, ``/sbin`` and the
  interpreter's folders only, and an ``/etc`` of the room's own (a ``passwd`` and ``group``
  naming its one user, a ``hosts`` naming ``localhost``): no ``/run``, ``/home``, ``/root`` or
  host ``/etc``, and the network namespace has only its own loopback; size-capped tmpfs mounts
  on ``/tmp``, ``/var/tmp`` and ``/dev/shm``; no capabilities, no new privileges, a session of
  its own; the room dies with its bubblewrap process. As root, bubblewrap runs as a sandbox uid
  per side (pairs locked machine-wide), so no process of a room is ever host uid 0; without
  root it runs as the trainer's user, who in the room owns nothing but the room's tmpfs.
- **the system calls** (libseccomp's filter, rlx's list after Docker's default profile,
  :data:`~rlx.sandbox.isolation.DENIED_SYSCALLS`): no kernel keyring (no state across runs, no
  access to the trainer's session keyring), ptrace, other processes' memory, mounts, new
  namespaces, bpf, perf, userfaultfd, io_uring, kernel modules, ``memfd_create``, System V IPC;
  no socket of a family that reaches past the network namespace (``AF_VSOCK``) or through a
  read-only folder (a path-bound ``AF_UNIX``; ``socketpair`` stays); no probe of the host's page
  cache (``posix_fadvise``, ``mincore``, ``cachestat``, ``RWF_NOWAIT`` reads, ``madvise`` that
  pages out) and no watch of the shared files (inotify, fanotify, ``flock``).
- **time**: a wall-clock limit of ``timeout_s`` per program and its tests, held by the trainer,
  which kills both rooms at the limit (the judge's own alarm comes first); ``RLIMIT_CPU`` of
  ``ceil(timeout_s) + 1`` s is a second stop. Each stdin/stdout case runs in a fresh room.
- **memory and processes**: where the machine lets rlx make one (root, and the v1 ``memory``
  and ``pids`` hierarchies: :mod:`~rlx.sandbox.cgroups`), a control group per room holds all
  its processes together to ``memory_mb`` plus its tmpfs mounts and a little slack
  (:data:`~rlx.sandbox.process.CGROUP_SLACK_MB`), tmpfs pages and socket buffers counted, and
  to a number of tasks. Besides, and alone elsewhere: ``RLIMIT_AS`` of ``memory_mb`` MiB for
  each process of the program (``judge_memory_mb`` for the judge; address space, not memory
  used: each thread reserves its stack) and ``RLIMIT_NPROC`` per room, so without a cgroup a
  room that forks may hold up to that many times ``memory_mb``, plus its tmpfs mounts; memory
  that is never mapped is closed another way (memfd and System V IPC refused, the tmpfs mounts
  size-capped). ``RLIMIT_FSIZE`` caps any one file, and the output read, at 10 MiB.
- **environment**: only ``PATH``, ``HOME``, ``TMPDIR``, ``LANG`` and thread caps; no secrets
  inherited; ``python -I`` ignores ``PYTHON*`` variables and the user site.

rlx's own part, and why no library does it: the split of the program from its judge, the
plain-data boundary between them, and a verdict that never passes through the untrusted
process are the reward's design; a sandbox confines a process, it does not judge one.

What is *not* protected: both rooms can read the interpreter's folders and ``/usr``, and they
share the host's page cache of those files: a program can still tell by timing whether a file
was read lately, a signal one run can set and a later one read (the probes that could also
clear it are refused above; only a private copy of every file, or a virtual machine, would close
it). Where
bubblewrap cannot run (no ``bwrap``, or unprivileged user namespaces disabled) there are no
rooms: rlx then refuses to run model-written code (:class:`~rlx.errors.SandboxError`) unless
the user passes ``allow_unisolated=True`` (CLI ``--allow-unisolated``), and warns once, at the
start of the run, naming each missing protection; the run's ``summary.json`` records them and
``rlx doctor`` shows them.
"""

from __future__ import annotations

from rlx.sandbox.isolation import Isolation
from rlx.sandbox.process import (
    SandboxResult,
    current_isolation,
    run_many,
    run_sandboxed,
    run_stdio,
)
from rlx.sandbox.reward import (
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
