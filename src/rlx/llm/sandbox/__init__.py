"""The ``python-tests`` reward: model-written Python judged against a row's tests, in a sandbox.

A completion scores 1.0 when its program passes every test of its row (or the share it passes,
with ``partial=True``), and 0.0 otherwise. Two processes take part, and only one is trusted:

1. the **program** (``prompt + completion``) runs in a sandboxed child process
   (:mod:`~rlx.llm.sandbox.server`). It only defines its functions and classes, then answers
   calls to them;
2. the **judge** (:mod:`~rlx.llm.sandbox.judge`) runs the row's test code in the launcher, a
   process the program cannot reach. The program's names are bound there to stand-ins that
   forward each call across a boundary where only plain data crosses (numbers, strings,
   bytes, lists, tuples, dicts, sets, None, bools: :mod:`~rlx.llm.sandbox.wire`), rebuilt
   on the judge's side. ``assert add(1, 2) == 3`` compares two ints built by the judge.

**The guarantee.** With the uid change (below), nothing the program can read, print, patch or
kill decides its score: the verdict is computed in the judge and written to a file descriptor
the program never holds. So these score 0: looking through frames or the heap for a secret
(there is none in the program's process, and the tests are not there either); ``os._exit(0)``,
``sys.exit(0)`` or ``raise SystemExit`` before or during the tests; ``atexit`` handlers and a
replaced ``sys.excepthook``; objects whose ``__eq__`` always answers True (they cross as
stand-ins that equal only themselves); printing a success report; killing or signalling the
supervisor; a program that never returns; floods of output or of answers. What the program
*can* still do is answer the calls it is given, so a test passes only when the program
computes what the test expects. Calls pass arguments by value: a test that relies on a
function mutating its argument, or passes it a callback, fails.

What protects the trainer (:func:`sandbox_info` says which are active on this machine):

- **time**: a wall-clock limit of ``timeout_s`` per program and its tests (interpreter start-up
  included), held by the launcher; after it the whole process tree is killed, even if the
  trainer dies. ``RLIMIT_CPU`` of ``ceil(timeout_s) + 1`` s is a second stop, and the trainer
  kills a launcher that is still there 2 s after the limit.
- **memory**: ``RLIMIT_AS`` of ``memory_mb`` MiB per process of the program. Address space is
  not memory used: each thread reserves its 8 MiB stack, so under the default 256 MiB a
  program can start about 25 threads.
- **processes** (fork bombs): the program runs in its own session; the launcher kills every
  process it started, including ones that called ``setsid``; as root everything runs in a
  private PID namespace (``unshare --pid``) whose init is the launcher, so when it exits the
  kernel kills whatever is left. As root each concurrent run also gets its own unused uid
  with ``RLIMIT_NPROC`` of 32, so a fork bomb stops at 32 processes and threads.
- **network**: as root, a private network namespace whose only interface, loopback, is down:
  every ``connect``, to ``127.0.0.1`` or to the internet, fails.
- **files**: as root the program runs as its unprivileged uid with no supplementary groups and
  ``no_new_privs``, so it cannot write anything root owns: the project, ``/etc``, other users'
  files. Its working folder (cwd, ``HOME``, ``TMPDIR``) is private (mode 0700). With
  namespaces, ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are fresh size-capped tmpfs mounts seen
  only by this run. ``RLIMIT_FSIZE`` caps any one file, and the captured output, at 10 MiB.
- **environment**: only ``PATH``, ``HOME``, ``TMPDIR``, ``LANG`` and three thread caps; no
  secrets inherited; ``python -I`` ignores ``PYTHON*`` variables and the user site.

What is *not* protected:

- reading world-readable files: with no network nothing read can leave, but a program can see,
  e.g., the project's source, or a data file with the tests' expected values if that file is
  world-readable (keep such files private to the trainer's user);
- the tests themselves run in the judge with the trainer's rights (inside the namespaces):
  test code is the data author's code, trusted like the training script;
- without root there are no namespaces and no uid change: the program runs as the trainer's
  user, could signal the judge or read its memory, and the guarantee above no longer holds.
  rlx then refuses to run model-written code (:class:`~rlx.errors.SandboxError`) unless the
  user passes ``allow_unisolated=True`` (CLI ``--allow-unisolated``), and warns once, at the
  start of the run, naming each missing protection; the run's ``summary.json`` records them and
  ``rlx doctor`` shows them.

Overhead per program is about 60 ms of process start-up; a batch runs ``max_workers`` programs
at a time, so G completions take about ``ceil(G / max_workers) * timeout_s`` in the worst case.

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
