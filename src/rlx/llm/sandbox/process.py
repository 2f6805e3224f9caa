"""Running one program and its tests in the sandbox, from the trainer's side.

The trainer starts the launcher (``[unshare ...] python -I -S -c SCRIPT``), hands it the job on
stdin, and reads two things back: the verdict, from a file only the launcher holds, and the
program's output, kept for people. It lends each concurrent run its own sandbox uid, gives it a
fresh working folder, and kills a launcher that outlives its time limit.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from typing import Any

from rlx.errors import ConfigError
from rlx.llm.sandbox.isolation import (
    MAX_PROCESSES,
    SAFE_PATH,
    UNSHARE_FLAGS,
    Isolation,
    choose_isolation,
)
from rlx.llm.sandbox.judge import test_units

MAX_FILE_MB = 10
"""``RLIMIT_FSIZE``: the largest file, including the program's captured output, in MiB."""

MAX_OPEN_FILES = 256
"""``RLIMIT_NOFILE``: open file descriptors per process."""

PRIVATE_TMP_MB = 64
"""Size of the private ``/tmp`` tmpfs (namespaces only); ``/var/tmp`` and ``/dev/shm`` get 8."""

OUTPUT_TAIL_BYTES = 4000
"""How much of the end of a program's output :class:`SandboxResult` keeps."""

_PRIVATE_WORKDIR = "/tmp/rlx-sandbox"  # on the namespace's own tmpfs, never on the host's /tmp
_KILL_GRACE_S = 1.0
_BACKSTOP_S = 2.0  # the launcher holds the time limit; this is for a launcher that hangs
_SWEEP_PASSES = 1000
_UID_POOLS: dict[tuple[int, ...], queue.Queue[int]] = {}
_UID_POOLS_LOCK = threading.Lock()

# The scripts the launcher and the program run, built from this package's modules (bootstrap
# below): the sandbox's interpreters may not see the installed rlx, and must not import it.
_BOOTSTRAP = """\
import sys, types
for _name in ("rlx", "rlx.llm", "rlx.llm.sandbox"):
    sys.modules[_name] = types.ModuleType(_name)
    sys.modules[_name].__path__ = []
for _name, _source in {sources!r}.items():
    _module = types.ModuleType("rlx.llm.sandbox." + _name)
    sys.modules[_module.__name__] = _module
    setattr(sys.modules["rlx.llm.sandbox"], _name, _module)
    exec(compile(_source, "<rlx sandbox " + _name + ">", "exec"), _module.__dict__)
sys.modules["rlx.llm.sandbox.{entry}"].main()
"""


@functools.cache
def script(entry: str, *modules: str) -> str:
    """Source for ``python -c``: ``modules`` of this package loaded in order as a stand-in
    package, then ``entry``'s ``main()``."""
    package = resources.files("rlx.llm.sandbox")
    sources = {name: (package / f"{name}.py").read_text(encoding="utf-8") for name in modules}
    return _BOOTSTRAP.format(sources=sources, entry=entry)


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """What one sandboxed run of a program and its tests found."""

    status: str
    """``"passed"`` (every test passed), ``"failed"`` (a test failed, the program raised, exited
    or crashed) or ``"timeout"`` (the time limit passed)."""
    tests_passed: int
    """Tests that passed (see :mod:`rlx.llm.sandbox.judge` for what a test is)."""
    tests_total: int
    """Tests in the test code (with no assert and no ``test_*`` function: 1, the whole code)."""
    failures: tuple[str, ...]
    """Why tests failed, one line each (the first few)."""
    returncode: int | None
    """The program's exit status when it ended before the judge was done with it (128 + n when
    signal n killed it), else None: an honest program is still answering when the tests end."""
    elapsed_s: float
    """Wall time of the run, start-up and clean-up included."""
    output: str
    """The last :data:`OUTPUT_TAIL_BYTES` of the program's stdout and stderr together."""

    @property
    def passed(self) -> bool:
        """True when every test passed."""
        return self.status == "passed"

    @property
    def share_passed(self) -> float:
        """The share of tests that passed (partial credit)."""
        return self.tests_passed / self.tests_total if self.tests_total else 0.0


@functools.cache
def current_isolation() -> Isolation:
    """The strongest isolation that works here, found once by running tiny probe programs
    (:func:`rlx.llm.sandbox.isolation.choose_isolation`). Raises ConfigError when not even an
    unisolated child can run Python."""
    isolation = choose_isolation(_probe)
    if isolation.uids is None and not isolation.namespaces:
        result = run_sandboxed("pass\n", timeout_s=10.0, isolation=isolation)
        if not result.passed:
            raise ConfigError(
                f"the python-tests sandbox cannot run Python here ({result.status}; "
                f"{'; '.join(result.failures)}): {result.output.strip()[-500:]!r}"
            )
    return isolation


def _probe(isolation: Isolation) -> bool:
    """True when a tiny program that imports common modules passes under ``isolation``."""
    program = "import collections, json, math, os, re, socket\n"
    return run_sandboxed(program, "assert True\n", timeout_s=10.0, isolation=isolation).passed


def run_many(
    programs: Sequence[str],
    tests: Sequence[str] | None = None,
    *,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    max_workers: int | None = None,
    isolation: Isolation | None = None,
) -> list[SandboxResult]:
    """:func:`run_sandboxed` on each program (with its tests), ``max_workers`` at a time,
    results in order."""
    workers = check_limits(timeout_s, memory_mb, max_workers)
    tests = [""] * len(programs) if tests is None else list(tests)
    if len(tests) != len(programs):
        raise ConfigError(f"got {len(programs)} programs and {len(tests)} tests; they must match.")
    if not programs:
        return []
    isolation = isolation or current_isolation()  # probe once here, not in every thread
    with ThreadPoolExecutor(max_workers=min(workers, len(programs))) as pool:
        return list(
            pool.map(
                lambda pair: run_sandboxed(
                    pair[0], pair[1], timeout_s=timeout_s, memory_mb=memory_mb, isolation=isolation
                ),
                zip(programs, tests, strict=True),
            )
        )


def run_sandboxed(
    program: str,
    tests: str = "",
    *,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    isolation: Isolation | None = None,
) -> SandboxResult:
    """Run the Python source ``program`` in the sandbox, then ``tests`` against it in the
    judge, and report what they found.

    With no tests the verdict is whether the program ran to its end without raising or
    exiting. Never raises for anything the program does (a ConfigError for test code that is
    not Python); wall time is ``timeout_s`` plus about 60 ms of start-up and clean-up (at most
    2 s more, should the launcher itself hang).
    """
    check_limits(timeout_s, memory_mb, 1)
    check_test_code(tests)
    isolation = isolation or current_isolation()
    start = time.monotonic()
    with _sandbox_uid(isolation) as uid, _working_folder(isolation) as workdir:
        job = _job(program, tests, workdir, uid, isolation, timeout_s, memory_mb)
        with tempfile.TemporaryFile() as output, tempfile.TemporaryFile() as verdict_file:
            job["verdict_fd"] = verdict_file.fileno()
            returncode = _run_launcher(job, isolation, output, timeout_s)
            text = _output_tail(output)
            verdict = _read_verdict(verdict_file) if returncode == 0 else None
        if uid is not None:
            _kill_processes_of(uid)
    return _result(verdict, returncode, time.monotonic() - start, text, tests)


def check_test_code(tests: str) -> None:
    """ConfigError when the test code is not a string of Python (a problem of the data, not
    of the program being judged)."""
    if not isinstance(tests, str):
        raise ConfigError(f"test code must be a string of Python, not {type(tests).__name__}.")
    try:
        compile(tests, "<tests>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise ConfigError(
            f"the test code is not valid Python ({exc.msg} at line {exc.lineno}): "
            f"{tests.strip()[:80]!r}"
        ) from None


def _result(
    verdict: dict[str, Any] | None, launcher_status: int | None, elapsed: float, output: str,
    tests: str,
) -> SandboxResult:  # fmt: skip
    """The result from the judge's verdict; without one (the launcher failed or was killed)
    every test failed."""
    if verdict is None:
        status = "timeout" if launcher_status is None else "failed"
        why = (
            "the sandbox was killed at its time limit"
            if launcher_status is None
            else f"the sandbox ended without a verdict (exit {launcher_status})"
        )
        total = sum(unit.is_test for unit in test_units(tests))
        return SandboxResult(status, 0, total, (why,), None, elapsed, output)
    passed, total = int(verdict["passed"]), int(verdict["total"])
    if verdict["timed_out"]:
        status = "timeout"
    else:
        status = "passed" if passed == total and not verdict["failure_count"] else "failed"
    return SandboxResult(
        status, passed, total, tuple(verdict["failures"]), verdict["returncode"], elapsed, output
    )


def _read_verdict(handle: Any) -> dict[str, Any] | None:
    handle.seek(0)
    try:
        verdict = json.loads(handle.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return verdict if isinstance(verdict, dict) else None


def check_limits(timeout_s: float, memory_mb: int, max_workers: int | None) -> int:
    """The number of workers, after checking the limits; ConfigError names a bad value."""
    if not timeout_s > 0:
        raise ConfigError(f"timeout_s={timeout_s!r} must be > 0 seconds.")
    if not isinstance(memory_mb, int) or memory_mb < 64:
        raise ConfigError(f"memory_mb={memory_mb!r} must be a whole number >= 64 (MiB).")
    if max_workers is None:
        return min(4, os.cpu_count() or 1)
    if not isinstance(max_workers, int) or max_workers < 1:
        raise ConfigError(f"max_workers={max_workers!r} must be a whole number >= 1.")
    return max_workers


def _job(
    program: str,
    tests: str,
    workdir: str,
    uid: int | None,
    isolation: Isolation,
    timeout_s: float,
    memory_mb: int,
) -> dict[str, Any]:
    """Everything the launcher needs, sent to it as JSON on stdin."""
    return {
        "program": program,
        "tests": tests,
        "timeout_s": timeout_s,
        "workdir": workdir,
        "uid": uid,
        "python": isolation.python,
        "server_script": script("server", "wire", "server"),
        "private_tmp": isolation.namespaces,
        "tmp_mb": PRIVATE_TMP_MB,
        "limits": _resource_limits(timeout_s, memory_mb, uid),
        "env": _minimal_environment(workdir),
    }


def _resource_limits(timeout_s: float, memory_mb: int, uid: int | None) -> dict[str, list[int]]:
    """``{RLIMIT_name: [soft, hard]}`` for the program, set by the launcher before it execs."""
    cpu_s = math.ceil(timeout_s) + 1  # soft: SIGXCPU; hard, one second later: SIGKILL
    limits = {
        "RLIMIT_AS": [memory_mb << 20] * 2,
        "RLIMIT_CPU": [cpu_s, cpu_s + 1],
        "RLIMIT_FSIZE": [MAX_FILE_MB << 20] * 2,
        "RLIMIT_NOFILE": [MAX_OPEN_FILES] * 2,
        "RLIMIT_CORE": [0, 0],
    }
    # RLIMIT_NPROC counts every task of the *user*: with a uid of its own the program gets a
    # fixed budget; as the trainer's user it gets what that user runs now plus a margin.
    tasks = MAX_PROCESSES if uid is not None else _task_count(os.getuid()) + 64
    limits["RLIMIT_NPROC"] = [tasks] * 2
    return limits


def _minimal_environment(workdir: str) -> dict[str, str]:
    """The program's whole environment: nothing inherited, so no secrets; home and temp files
    inside its working folder."""
    return {
        "PATH": SAFE_PATH,
        "HOME": workdir,
        "TMPDIR": os.path.join(workdir, "tmp"),
        "LANG": "C.UTF-8",
        # RLIMIT_AS counts reserved address space: glibc reserves 64 MiB per thread's malloc
        # arena and BLAS libraries start a thread pool each, so without these a program with a
        # few threads, or one importing numpy, would run out of memory_mb it never used.
        "MALLOC_ARENA_MAX": "2",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }


@contextlib.contextmanager
def _working_folder(isolation: Isolation) -> Iterator[str]:
    """A fresh, private working folder for one run, gone afterwards.

    With namespaces the launcher makes it on the run's own tmpfs ``/tmp``, which disappears with
    the namespace; otherwise it is a new host temporary folder, deleted here.
    """
    if isolation.namespaces:
        yield _PRIVATE_WORKDIR
        return
    folder = tempfile.mkdtemp(prefix="rlx-sandbox-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _sandbox_uid(isolation: Isolation) -> Iterator[int | None]:
    """Borrow a uid no other concurrent run uses (None without a uid change)."""
    if isolation.uids is None:
        yield None
        return
    pool = _uid_pool(isolation.uids)
    uid = pool.get()
    try:
        yield uid
    finally:
        pool.put(uid)


def _uid_pool(uids: tuple[int, ...]) -> queue.Queue[int]:
    """The shared queue of free uids for ``uids``, made once (under a lock: threads race here)."""
    with _UID_POOLS_LOCK:
        if uids not in _UID_POOLS:
            pool: queue.Queue[int] = queue.Queue()
            for uid in uids:
                pool.put(uid)
            _UID_POOLS[uids] = pool
        return _UID_POOLS[uids]


def _launcher_command(isolation: Isolation) -> list[str]:
    """``[unshare --net --pid ...] python -I -S -c LAUNCHER``."""
    prefix = [isolation.unshare, *UNSHARE_FLAGS] if isolation.unshare else []
    launcher = script("launcher", "wire", "judge", "launcher")
    return [*prefix, sys.executable, "-I", "-S", "-c", launcher]


def _run_launcher(
    job: dict[str, Any], isolation: Isolation, output: Any, timeout_s: float
) -> int | None:
    """Start the launcher, feed it the job and wait; its exit status, or None when it outlived
    its own time limit by :data:`_BACKSTOP_S` and had to be killed from here."""
    # No preexec_fn (not thread-safe); start_new_session gives the child its own process group
    # and session, so it cannot signal ours through them and we can kill its group.
    with subprocess.Popen(
        _launcher_command(isolation),
        stdin=subprocess.PIPE,
        stdout=output,
        stderr=subprocess.STDOUT,
        cwd="/",
        env={"PATH": SAFE_PATH},
        start_new_session=True,
        pass_fds=(job["verdict_fd"],),
    ) as child:
        try:
            child.communicate(json.dumps(job).encode(), timeout=timeout_s + _BACKSTOP_S)
            return child.returncode
        except subprocess.TimeoutExpired:
            _kill_tree(child, isolation)
            return None


def _kill_tree(child: subprocess.Popen[bytes], isolation: Isolation) -> None:
    """Kill the child and everything it started, and reap it.

    With a PID namespace, killing the namespace's init (the child of ``unshare``) makes the
    kernel kill every process in it, and ``unshare`` reaps it, so no zombie is left. Otherwise,
    and as a last resort, the whole process group is killed.
    """
    namespace_inits = _children_of(child.pid) if isolation.namespaces else []
    for pid in namespace_inits:
        _signal(pid, signal.SIGKILL)
    if namespace_inits:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=_KILL_GRACE_S)
            return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _children_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            return [int(token) for token in handle.read().split()]
    except OSError:
        return []


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def _kill_processes_of(uid: int) -> None:
    """Kill every process still owned by ``uid``, e.g. one that escaped with ``setsid`` when
    there is no PID namespace, so the uid goes back to the pool clean.

    A fork bomb forks while its siblings are being killed, so this sweeps until a pass finds
    nothing alive (at most 32 processes exist at once; a zombie is already dead).
    """
    for _ in range(_SWEEP_PASSES):
        alive = [pid for pid in _processes_of(uid) if not _is_zombie(pid)]
        if not alive:
            return
        for pid in alive:
            _signal(pid, signal.SIGKILL)


def _processes_of(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
    return pids


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # gone already
    return state == b"Z"


def _task_count(uid: int) -> int:
    """Processes and threads of ``uid`` now: what ``RLIMIT_NPROC`` counts."""
    count = 0
    for pid in _processes_of(uid):
        with contextlib.suppress(OSError):
            count += len(os.listdir(f"/proc/{pid}/task"))
    return count


def _output_tail(output: Any) -> str:
    output.seek(0, os.SEEK_END)
    output.seek(max(0, output.tell() - OUTPUT_TAIL_BYTES))
    return output.read().decode("utf-8", errors="replace")
