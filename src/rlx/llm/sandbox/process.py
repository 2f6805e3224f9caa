"""Running one program and its tests in the sandbox, from the trainer's side.

The trainer starts the launcher (``[unshare ...] python -I -S -c BOOTSTRAP``) and writes three
frames to its stdin: the sandbox's code (compiled once per trainer process), the job without
the tests, and the tests (or stdin/stdout cases), which the launcher reads only after it has
forked the program. It reads two things back: the verdict, from a file only the launcher holds,
and the program's (and the judge's) output, kept for people. It lends each concurrent run a
pair of sandbox uids and kills a launcher that outlives its time limit.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import logging
import marshal
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

from rlx.errors import ConfigError, SandboxError
from rlx.llm.sandbox.isolation import (
    MAX_PROCESSES,
    SAFE_PATH,
    UNSHARE_FLAGS,
    Isolation,
    choose_isolation,
)
from rlx.llm.sandbox.testcode import NothingToCheckError, prepare

logger = logging.getLogger(__name__)

MAX_FILE_MB = 10
"""``RLIMIT_FSIZE``: the largest file, including the program's captured output, in MiB."""

MAX_OPEN_FILES = 256
"""``RLIMIT_NOFILE``: open file descriptors per process."""

PRIVATE_TMP_MB = 64
"""Size of each room's private ``/tmp`` tmpfs (namespaces only); ``/var/tmp`` and ``/dev/shm``
get 8, ``/run/lock`` 1."""

JUDGE_MEMORY_MB = 2048
"""``RLIMIT_AS`` of the judge by default: room for tests that import pytest or numpy, not for a
test that builds a value of gigabytes from a program's answer."""

OUTPUT_TAIL_BYTES = 4000
"""How much of the end of a program's output :class:`SandboxResult` keeps."""

_KILL_GRACE_S = 1.0
_BACKSTOP_S = 2.0  # the launcher holds the time limit; this is for a launcher that hangs
_SWEEP_PASSES = 1000
_UID_POOLS: dict[tuple[int, ...], queue.Queue[tuple[int, int]]] = {}
_UID_POOLS_LOCK = threading.Lock()

# The launcher's script: it reads the sandbox's modules from its stdin (the first frame: a
# marshalled list of (name, code) pairs, compiled once per trainer process, or their sources
# where the sandbox's interpreter is another Python), loads them as a stand-in package and runs
# the launcher. The interpreters of the sandbox may not see the installed rlx, and must not
# import it; the program and the judge are forked from the launcher with the code loaded.
_BOOTSTRAP = """\
import marshal, os, sys, types
def _exactly(size):
    chunks = []
    while size:
        chunk = os.read(0, min(size, 1 << 20))
        if not chunk:
            raise SystemExit("rlx sandbox: the job ended early")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
_modules = marshal.loads(_exactly(int.from_bytes(_exactly(4), "big")))
for _name in ("rlx", "rlx.llm", "rlx.llm.sandbox"):
    sys.modules[_name] = types.ModuleType(_name)
    sys.modules[_name].__path__ = []
for _name, _code in _modules:
    _module = types.ModuleType("rlx.llm.sandbox." + _name)
    sys.modules[_module.__name__] = _module
    setattr(sys.modules["rlx.llm.sandbox"], _name, _module)
    exec(_code, _module.__dict__)
del _modules, _name, _code, _module
sys.modules["rlx.llm.sandbox.launcher"].main()
"""
_SANDBOX_MODULES = ("wire", "testcode", "judge", "server", "launcher")


@functools.cache
def sandbox_code(python: str) -> bytes:
    """The first frame of every launcher's stdin: the sandbox's modules, in load order,
    compiled once (as sources when ``python`` is not a Python whose bytecode this one writes,
    so that it compiles them itself)."""
    package = resources.files("rlx.llm.sandbox")
    sources = [(name, (package / f"{name}.py").read_text(encoding="utf-8"))
               for name in _SANDBOX_MODULES]  # fmt: skip
    if _bytecode_magic(python) == importlib.util.MAGIC_NUMBER:
        compiled = [(name, compile(text, f"<rlx sandbox {name}>", "exec"))
                    for name, text in sources]  # fmt: skip
        return marshal.dumps(compiled)
    return marshal.dumps(sources)


@functools.cache
def _bytecode_magic(python: str) -> bytes:
    """The bytecode magic number of the interpreter ``python``."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return importlib.util.MAGIC_NUMBER
    try:
        probe = subprocess.run(
            [python, "-I", "-S", "-c",
             "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"],
            capture_output=True, timeout=30, env={"PATH": SAFE_PATH},
        )  # fmt: skip
        return bytes.fromhex(probe.stdout.decode())
    except (OSError, ValueError, subprocess.SubprocessError):
        return b""


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """What one sandboxed run of a program and its tests found."""

    status: str
    """``"passed"`` (no check failed and at least one passed), ``"failed"`` (a check failed, a
    set-up statement failed, the program raised, exited or crashed, the judge crashed) or
    ``"timeout"`` (the time limit passed)."""
    tests_passed: int
    """Checks that passed: executed asserts, unittest assertions, ``pytest.raises``, test
    functions that returned (see :mod:`rlx.llm.sandbox.judge`); for stdin/stdout cases, the
    cases whose output was right."""
    tests_total: int
    """Checks that ran or could not run: passed and failed together."""
    failures: tuple[str, ...]
    """Why checks failed, one line each (the first few)."""
    returncode: int | None
    """The program's exit status when it ended before the judge was done with it (128 + n when
    signal n killed it), else None: an honest program is still answering when the tests end."""
    elapsed_s: float
    """Wall time of the run, start-up and clean-up included."""
    output: str
    """The last :data:`OUTPUT_TAIL_BYTES` of the program's (and the judge's) stdout and
    stderr."""
    setup_failed: bool = False
    """A set-up statement of the tests (an import, a definition) failed: the row fails."""

    @property
    def passed(self) -> bool:
        """True when every check passed (and at least one ran)."""
        return self.status == "passed"

    @property
    def share_passed(self) -> float:
        """The share of checks that passed (partial credit); 0 when a set-up statement failed."""
        if self.setup_failed or not self.tests_total:
            return 0.0
        return self.tests_passed / self.tests_total


@functools.cache
def current_isolation() -> Isolation:
    """The strongest isolation that works here, found once by running tiny probe programs
    (:func:`rlx.llm.sandbox.isolation.choose_isolation`). Raises ConfigError when not even an
    unisolated child can run Python."""
    isolation = choose_isolation(_probe)
    if isolation.uids is None and not isolation.namespaces:
        result = run_sandboxed("x = 1\n", "assert x == 1\n", timeout_s=10.0, isolation=isolation)
        if not result.passed:
            raise ConfigError(
                f"the python-tests sandbox cannot run Python here ({result.status}; "
                f"{'; '.join(result.failures)}): {result.output.strip()[-500:]!r}"
            )
    return isolation


def _probe(isolation: Isolation) -> bool:
    """True when a tiny program that imports common modules passes under ``isolation``."""
    program = "import collections, json, math, os, re, socket\nx = 1\n"
    result = run_sandboxed(program, "assert x == 1\n", timeout_s=10.0, isolation=isolation)
    return result.passed


def run_many(
    programs: Sequence[str],
    tests: Sequence[str] | None = None,
    *,
    entry_points: Sequence[str | None] | None = None,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    judge_memory_mb: int = JUDGE_MEMORY_MB,
    max_workers: int | None = None,
    isolation: Isolation | None = None,
) -> list[SandboxResult]:
    """:func:`run_sandboxed` on each program (with its tests and entry point),
    ``max_workers`` at a time, results in order."""
    workers = check_limits(timeout_s, memory_mb, max_workers, judge_memory_mb)
    tests = [""] * len(programs) if tests is None else list(tests)
    entry_points = [None] * len(programs) if entry_points is None else list(entry_points)
    if not len(tests) == len(entry_points) == len(programs):
        raise ConfigError(
            f"got {len(programs)} programs, {len(tests)} tests and {len(entry_points)} entry "
            "points; they must match."
        )
    if not programs:
        return []
    isolation = isolation or current_isolation()  # probe once here, not in every thread
    jobs = list(zip(programs, tests, entry_points, strict=True))
    with ThreadPoolExecutor(max_workers=min(workers, len(programs))) as pool:
        return list(
            pool.map(
                lambda job: run_sandboxed(
                    job[0],
                    job[1],
                    entry_point=job[2],
                    timeout_s=timeout_s,
                    memory_mb=memory_mb,
                    judge_memory_mb=judge_memory_mb,
                    isolation=isolation,
                ),
                jobs,
            )
        )


def run_sandboxed(
    program: str,
    tests: str = "",
    *,
    entry_point: str | None = None,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    judge_memory_mb: int = JUDGE_MEMORY_MB,
    isolation: Isolation | None = None,
) -> SandboxResult:
    """Run the Python source ``program`` in the sandbox, then ``tests`` against it in the
    judge (itself sandboxed), and report what they found.

    ``entry_point`` names the function HumanEval's ``check(candidate)`` is called with when the
    tests define ``check`` but do not call it. With no tests the verdict is whether the program
    ran to its end without raising or exiting. Never raises for anything the program does;
    raises :class:`~rlx.errors.SandboxError` for test code that is not Python or that checks
    nothing. Wall time is ``timeout_s`` plus the start-up and clean-up of the processes (at
    most 2 s more, should the launcher itself hang).
    """
    check_limits(timeout_s, memory_mb, 1, judge_memory_mb)
    judged = prepared_tests(tests, entry_point) if tests.strip() else None
    job = {"mode": "tests"}, {"tests": judged}
    return _run(program, job, timeout_s, memory_mb, judge_memory_mb, isolation, tests)


def run_stdio(
    program: str,
    cases: Sequence[tuple[str, str]],
    *,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    isolation: Isolation | None = None,
) -> SandboxResult:
    """Run ``program`` as a script once per ``(input, expected_output)`` case, in the sandbox,
    with the input on stdin; a case passes when its stdout equals the expected output up to
    trailing whitespace on each line and trailing empty lines
    (:func:`rlx.llm.sandbox.launcher.same_output`). ``timeout_s`` holds for each case."""
    check_limits(timeout_s, memory_mb, 1)
    rows = [list(case) for case in cases]
    if not rows or any(
        len(row) != 2 or not all(isinstance(text, str) for text in row) for row in rows
    ):
        raise SandboxError(
            "stdin/stdout tests must be a non-empty list of (input, expected output) strings."
        )
    job = {"mode": "stdio"}, {"cases": rows}
    return _run(
        program, job, timeout_s * len(rows), memory_mb, JUDGE_MEMORY_MB, isolation, "", timeout_s
    )


def prepared_tests(tests: str, entry_point: str | None = None) -> str:
    """The test code as the judge runs it (:func:`rlx.llm.sandbox.testcode.prepare`);
    SandboxError when it is not Python or checks nothing."""
    if not isinstance(tests, str):
        raise SandboxError(f"test code must be a string of Python, not {type(tests).__name__}.")
    try:
        return prepare(tests, entry_point)
    except SyntaxError as exc:
        raise SandboxError(
            f"the test code is not valid Python ({exc.msg} at line {exc.lineno}): "
            f"{tests.strip()[:80]!r}"
        ) from None
    except NothingToCheckError as exc:
        raise SandboxError(f"the test code checks nothing: {exc}: {tests.strip()[:80]!r}") from None


def check_test_code(tests: str, entry_point: str | None = None) -> None:
    """SandboxError when the test code is not Python or checks nothing (a problem of the data,
    not of the program being judged)."""
    prepared_tests(tests, entry_point)


def _run(
    program: str, job_and_judged: tuple[dict[str, Any], dict[str, Any]], timeout_s: float,
    memory_mb: int, judge_memory_mb: int, isolation: Isolation | None, tests: str,
    case_timeout_s: float | None = None,
) -> SandboxResult:  # fmt: skip
    """Run one job: ``job_and_judged`` is what the launcher may know before the program starts,
    and what it reads only once the program has started (the tests or the cases)."""
    job, judged = job_and_judged
    isolation = isolation or current_isolation()
    start = time.monotonic()
    with _sandbox_uids(isolation) as uids, _working_folders(isolation) as workdirs:
        job.update(
            program=program,
            timeout_s=case_timeout_s or timeout_s,
            namespaces=isolation.namespaces,
            reveal=[list(pair) for pair in isolation.reveal],
            uids=uids,
            workdirs=workdirs,
            python=isolation.python,
            packages=_packages_path(),
            tmp_mb=PRIVATE_TMP_MB,
            limits={
                "program": _resource_limits(
                    case_timeout_s or timeout_s, memory_mb, uids, "program"
                ),
                "judge": _resource_limits(timeout_s, judge_memory_mb, uids, "judge"),
            },
            env={
                role: _minimal_environment(isolation.namespaces, workdirs, role)
                for role in ("program", "judge")
            },
        )
        with tempfile.TemporaryFile() as output, tempfile.TemporaryFile() as verdict_file:
            job["verdict_fd"] = verdict_file.fileno()
            stdin = b"".join(
                [_frame(sandbox_code(isolation.python)), _frame(json.dumps(job).encode()),
                 _frame(json.dumps(judged).encode())]
            )  # fmt: skip
            returncode = _run_launcher(stdin, job["verdict_fd"], isolation, output, timeout_s)
            text = _output_tail(output)
            verdict = _read_verdict(verdict_file) if returncode == 0 else None
        if uids is not None:
            for uid in set(uids.values()):
                _kill_processes_of(uid)
    return _result(verdict, returncode, time.monotonic() - start, text)


def _result(
    verdict: dict[str, Any] | None, launcher_status: int | None, elapsed: float, output: str
) -> SandboxResult:
    """The result from the verdict; without one (the launcher failed or was killed) it fails,
    and the reason is logged: that is the sandbox's failure, not the program's."""
    if verdict is None:
        status = "timeout" if launcher_status is None else "failed"
        why = (
            "the sandbox was killed at its time limit"
            if launcher_status is None
            else f"the sandbox ended without a verdict (exit {launcher_status})"
        )
        logger.warning("python-tests sandbox: %s; the program scores 0. Output: %s", why,
                       output.strip()[-300:])  # fmt: skip
        return SandboxResult(status, 0, 1, (why,), None, elapsed, output)
    passed, failed = int(verdict["passed"]), int(verdict["failed"])
    failures = tuple(verdict["failures"])
    if any(f.startswith("the judge ") for f in failures):
        logger.warning("python-tests sandbox: %s; the program scores 0.", failures[0])
    if verdict["timed_out"]:
        status = "timeout"
    elif failed == 0 and passed > 0 and not verdict["setup_failed"]:
        status = "passed"
    else:
        status = "failed"
    return SandboxResult(
        status, passed, passed + failed, failures, verdict.get("returncode"), elapsed, output,
        bool(verdict["setup_failed"]),
    )  # fmt: skip


def _read_verdict(handle: Any) -> dict[str, Any] | None:
    handle.seek(0)
    try:
        verdict = json.loads(handle.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return verdict if isinstance(verdict, dict) else None


def check_limits(
    timeout_s: float, memory_mb: int, max_workers: int | None, judge_memory_mb: int = 2048
) -> int:
    """The number of workers, after checking the limits; ConfigError names a bad value."""
    if not timeout_s > 0:
        raise ConfigError(f"timeout_s={timeout_s!r} must be > 0 seconds.")
    if not isinstance(memory_mb, int) or memory_mb < 64:
        raise ConfigError(f"memory_mb={memory_mb!r} must be a whole number >= 64 (MiB).")
    if not isinstance(judge_memory_mb, int) or judge_memory_mb < 256:
        raise ConfigError(f"judge_memory_mb={judge_memory_mb!r} must be a whole number >= 256.")
    if max_workers is None:
        return min(4, os.cpu_count() or 1)
    if not isinstance(max_workers, int) or max_workers < 1:
        raise ConfigError(f"max_workers={max_workers!r} must be a whole number >= 1.")
    return max_workers


def _resource_limits(
    timeout_s: float, memory_mb: int, uids: dict[str, int] | None, role: str
) -> dict[str, list[int]]:
    """``{RLIMIT_name: [soft, hard]}`` for one role, set in its room before it execs."""
    cpu_s = math.ceil(timeout_s) + 1  # soft: SIGXCPU; hard, one second later: SIGKILL
    limits = {
        "RLIMIT_AS": [memory_mb << 20] * 2,
        "RLIMIT_CPU": [cpu_s, cpu_s + 1],
        "RLIMIT_FSIZE": [MAX_FILE_MB << 20] * 2,
        "RLIMIT_NOFILE": [MAX_OPEN_FILES] * 2,
        "RLIMIT_CORE": [0, 0],
    }
    # RLIMIT_NPROC counts every task of the *user*: with a uid of its own each role gets a
    # fixed budget; as the trainer's user it gets what that user runs now plus a margin.
    tasks = MAX_PROCESSES if uids is not None else _task_count(os.getuid()) + 64
    if uids is not None and uids["program"] == uids["judge"]:
        tasks *= 2
    limits["RLIMIT_NPROC"] = [tasks] * 2
    return limits


def _minimal_environment(
    namespaces: bool, workdirs: dict[str, str] | None, role: str
) -> dict[str, str]:
    """The whole environment of the program or the judge: nothing inherited, so no secrets;
    home and temporary files inside the room's working folder."""
    home = "/tmp/work" if namespaces or workdirs is None else workdirs[role]
    return {
        "PATH": SAFE_PATH,
        "HOME": home,
        "TMPDIR": os.path.join(home, "tmp"),
        "LANG": "C.UTF-8",
        # RLIMIT_AS counts reserved address space: glibc reserves 64 MiB per thread's malloc
        # arena and BLAS libraries start a thread pool each, so without these a program with a
        # few threads, or one importing numpy, would run out of memory_mb it never used.
        "MALLOC_ARENA_MAX": "2",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


@contextlib.contextmanager
def _working_folders(isolation: Isolation) -> Iterator[dict[str, str] | None]:
    """Without namespaces, a fresh host temporary folder for the program and one for the judge,
    deleted afterwards; with them, None (each room makes its own on its own tmpfs)."""
    if isolation.namespaces:
        yield None
        return
    folders = {
        role: tempfile.mkdtemp(prefix=f"rlx-sandbox-{role}-") for role in ("program", "judge")
    }
    try:
        yield folders
    finally:
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _sandbox_uids(isolation: Isolation) -> Iterator[dict[str, int] | None]:
    """Borrow the program's and the judge's uids, used by no other concurrent run (None
    without a uid change)."""
    if isolation.uids is None:
        yield None
        return
    pool = _uid_pool(isolation.uids)
    pair = pool.get()
    try:
        yield {"program": pair[0], "judge": pair[1]}
    finally:
        pool.put(pair)


def _uid_pool(uids: tuple[int, ...]) -> queue.Queue[tuple[int, int]]:
    """The shared queue of free uid pairs for ``uids``, made once (under a lock: threads race
    here). With one uid (``nobody``) the pair is that uid twice."""
    with _UID_POOLS_LOCK:
        if uids not in _UID_POOLS:
            pool: queue.Queue[tuple[int, int]] = queue.Queue()
            if len(uids) == 1:
                pool.put((uids[0], uids[0]))
            for index in range(0, len(uids) - 1, 2):
                pool.put((uids[index], uids[index + 1]))
            _UID_POOLS[uids] = pool
        return _UID_POOLS[uids]


def _launcher_command(isolation: Isolation) -> list[str]:
    """``[unshare --net --pid --ipc ...] python -I -S -c BOOTSTRAP``, with the interpreter the
    sandbox uids can run: the program and the judge are forked from the launcher, and go on
    importing from that interpreter's standard library once they run as their uids."""
    prefix = [isolation.unshare, *UNSHARE_FLAGS] if isolation.unshare else []
    return [*prefix, isolation.python, "-I", "-S", "-c", _BOOTSTRAP]


def _packages_path() -> list[str]:
    """The trainer's ``sys.path`` without its standard library: where the judge finds the
    packages installed beside rlx (pytest, numpy ...) for the tests to import."""
    stdlib = (sys.base_prefix, sys.base_exec_prefix)
    return [
        entry
        for entry in sys.path
        if entry and ("site-packages" in entry or not entry.startswith(stdlib))
    ]


def _run_launcher(
    stdin: bytes, verdict_fd: int, isolation: Isolation, output: Any, timeout_s: float
) -> int | None:
    """Start the launcher, feed it its code and the job and wait; its exit status, or None
    when it outlived its own time limit by :data:`_BACKSTOP_S` and had to be killed here."""
    # No preexec_fn (not thread-safe); start_new_session gives the child its own process group
    # and session, so it cannot signal ours through them and we can kill its group.
    with subprocess.Popen(
        _launcher_command(isolation),
        stdin=subprocess.PIPE,
        stdout=output,
        stderr=subprocess.STDOUT,
        cwd="/",
        # glibc reads MALLOC_ARENA_MAX once, at start: the program and the judge are forked
        # from the launcher, so it must be the launcher's (see _minimal_environment)
        env={"PATH": SAFE_PATH, "MALLOC_ARENA_MAX": "2"},
        start_new_session=True,
        pass_fds=(verdict_fd,),
    ) as child:
        try:
            child.communicate(stdin, timeout=timeout_s + _BACKSTOP_S)
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
