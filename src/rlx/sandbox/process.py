"""Running one program and its tests in the sandbox, from the trainer's side.

For each program the trainer starts two **rooms** (:mod:`rlx.sandbox.isolation`), each a
bubblewrap sandbox of its own that runs ``python -I -S -c BOOTSTRAP`` (:mod:`~rlx.sandbox.
launcher`): first the program's, whose job holds only the program, then the judge's, whose job
holds the tests. The tests are never written into the program's room. The rooms talk over
two pipes the trainer made and then closed on its side; the judge's verdict comes back on a
third, which the program never holds, and the trainer checks it (its size, its fields). Each
room's stdout and stderr go to a pipe of its own that the trainer reads, keeping a bounded tail
for people: no file is shared, so the program cannot read or rewrite what the judge printed.

The trainer holds the wall clock: at ``timeout_s`` (and a short grace for the verdict) it kills
both rooms. Killing a bubblewrap process kills its room: bubblewrap's init there has
``--die-with-parent``, and when a PID namespace's init dies the kernel kills every process in
it, so nothing a program started outlives its run, and each bubblewrap process is reaped here.
A stdin/stdout case runs in a fresh room of its own, so nothing one case leaves runs on in the
next. Where bubblewrap cannot run (an unisolated run, allowed explicitly), the same bootstrap
runs as a plain child, in a fresh host temporary folder, and the trainer kills its process
group (and, as root, every process of the sandbox uid).

What is rlx's own here and why: the split of a program from its judge, and a verdict that never
passes through the untrusted process, are the reward's design, not something a sandbox offers;
bubblewrap builds the rooms and libseccomp the filter.

Why one module past rlx's 800 lines: it is the trainer's side of one run of a program, from
starting both rooms to the checked verdict; the pipes, the clock and the killing of the rooms
are one protocol whose steps depend on each other's order, kept in one place to be read and
attacked as one.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.util
import json
import logging
import marshal
import math
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from rlx.errors import ConfigError, SandboxError
from rlx.sandbox import cgroups
from rlx.sandbox.cgroups import RoomCgroup
from rlx.sandbox.isolation import (
    HOST_ROOT_ENTRIES,
    MAX_PROCESSES,
    SAFE_PATH,
    Isolation,
    RevealedFolders,
    children_of,
    choose_isolation,
    seccomp_program,
)
from rlx.sandbox.launcher import same_output
from rlx.sandbox.testcode import NothingToCheckError, prepare

logger = logging.getLogger(__name__)

MAX_FILE_MB = 10
"""``RLIMIT_FSIZE``: the largest file a room may write, in MiB; also how much output of one room
the trainer reads before it stops reading (the room then blocks on its next write)."""

MAX_OPEN_FILES = 256
"""``RLIMIT_NOFILE``: open file descriptors per process."""

PRIVATE_TMP_MB = 64
"""Size of each room's private ``/tmp`` tmpfs (bubblewrap only); ``/var/tmp`` and ``/dev/shm``
get :data:`SMALL_TMPFS_MB` each."""

SMALL_TMPFS_MB = 8

CGROUP_SLACK_MB = 64
"""Where rooms get a cgroup (:mod:`rlx.sandbox.cgroups`), its memory budget is the room's
``memory_mb`` plus its tmpfs mounts plus this much for bubblewrap and the interpreter's own
pages, for every process of the room together."""

JUDGE_MEMORY_MB = 2048
"""``RLIMIT_AS`` of the judge by default: room for tests that import pytest or numpy, not for a
test that builds a value of gigabytes from a program's answer."""

OUTPUT_TAIL_BYTES = 4000
"""How much of the end of a program's output :class:`SandboxResult` keeps."""

_VERDICT_BYTES = 1 << 20
_GRACE_S = 0.5  # how long past the limit the trainer waits for the judge's verdict
_DRAIN_S = 0.2  # how long it reads what a killed room's pipes still hold
_SWEEP_PASSES = 1000
_KILL_GRACE_S = 1.0
_UID_POOLS: dict[tuple[int, ...], queue.Queue[tuple[int, int]]] = {}
_UID_POOLS_LOCK = threading.Lock()
_SIGNALS = {
    9: "SIGKILL: a memory or time limit",
    11: "SIGSEGV",
    24: "SIGXCPU: the CPU-time limit",
    25: "SIGXFSZ: the file-size limit",
}

# A room's script: it reads two frames from the descriptor named by its argument (the sandbox
# modules this room needs, marshalled, compiled once per trainer process, or their sources
# where the room's interpreter is another Python; then its job as JSON), loads the modules as a
# stand-in package and runs the launcher. The room's interpreter may not see the installed rlx,
# and must not import it.
_BOOTSTRAP = """\
import json, marshal, os, sys, types
_fd = int(sys.argv[1])
def _exactly(size):
    chunks = []
    while size:
        chunk = os.read(_fd, min(size, 1 << 20))
        if not chunk:
            raise SystemExit("rlx sandbox: the job ended early")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
_modules = marshal.loads(_exactly(int.from_bytes(_exactly(4), "big")))
_job = json.loads(_exactly(int.from_bytes(_exactly(4), "big")))
os.close(_fd)
for _name in ("rlx", "rlx.sandbox"):
    sys.modules[_name] = types.ModuleType(_name)
    sys.modules[_name].__path__ = []
for _name, _code in _modules:
    _module = types.ModuleType("rlx.sandbox." + _name)
    sys.modules[_module.__name__] = _module
    setattr(sys.modules["rlx.sandbox"], _name, _module)
    exec(_code, _module.__dict__)
del _modules, _name, _code, _module, _exactly, _fd
sys.modules["rlx.sandbox.launcher"].main(_job)
"""
_ROLE_MODULES = {
    "program": ("wire", "server", "launcher"),
    "judge": ("wire", "testcode", "judge", "launcher"),
    "stdio": ("launcher",),
}


@functools.cache
def sandbox_code(python: str, role: str) -> bytes:
    """The first frame of a room's job: the modules ``role`` needs, in load order, compiled once
    (as sources when ``python`` is not a Python whose bytecode this one writes)."""
    package = resources.files("rlx.sandbox")
    sources = [(name, (package / f"{name}.py").read_text(encoding="utf-8"))
               for name in _ROLE_MODULES[role]]  # fmt: skip
    if _bytecode_magic(python) == importlib.util.MAGIC_NUMBER:
        compiled = [(name, compile(text, f"<rlx sandbox {name}>", "exec"))
                    for name, text in sources]  # fmt: skip
        return _frame(marshal.dumps(compiled))
    return _frame(marshal.dumps(sources))


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
    functions that returned (see :mod:`rlx.sandbox.judge`); for stdin/stdout cases, the
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
    (:func:`rlx.sandbox.isolation.choose_isolation`). Raises ConfigError when not even an
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
    """True when a tiny program that imports common modules passes under ``isolation``, and a
    stdin/stdout case runs too."""
    program = "import collections, json, math, os, re, socket\nx = 1\n"
    try:
        result = run_sandboxed(program, "assert x == 1\n", timeout_s=10.0, isolation=isolation)
        if not result.passed:
            logger.debug("sandbox probe failed under %s: %s", isolation, result.output[-500:])
            return False
        return run_stdio("print(input())\n", [("1\n", "1\n")], timeout_s=10.0,
                         isolation=isolation).passed  # fmt: skip
    except (OSError, SandboxError) as error:
        logger.debug("sandbox probe failed under %s: %s", isolation, error)
        return False


def run_many(
    programs: Sequence[str],
    tests: Sequence[str] | None = None,
    *,
    entry_points: Sequence[str | None] | None = None,
    setups: Sequence[str] | None = None,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    judge_memory_mb: int = JUDGE_MEMORY_MB,
    max_workers: int | None = None,
    isolation: Isolation | None = None,
) -> list[SandboxResult]:
    """:func:`run_sandboxed` on each program (with its tests, entry point and set-up code),
    ``max_workers`` at a time, results in order."""
    workers = check_limits(timeout_s, memory_mb, max_workers, judge_memory_mb)
    tests = [""] * len(programs) if tests is None else list(tests)
    entry_points = [None] * len(programs) if entry_points is None else list(entry_points)
    setups = [""] * len(programs) if setups is None else list(setups)
    if not len(tests) == len(entry_points) == len(setups) == len(programs):
        raise ConfigError(
            f"got {len(programs)} programs, {len(tests)} tests, {len(entry_points)} entry "
            f"points and {len(setups)} set-ups; they must match."
        )
    if not programs:
        return []
    isolation = isolation or current_isolation()  # probe once here, not in every thread
    jobs = list(zip(programs, tests, entry_points, setups, strict=True))
    with ThreadPoolExecutor(max_workers=min(workers, len(programs))) as pool:
        return list(
            pool.map(
                lambda job: run_sandboxed(
                    job[0],
                    job[1],
                    entry_point=job[2],
                    setup=job[3],
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
    setup: str = "",
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    judge_memory_mb: int = JUDGE_MEMORY_MB,
    isolation: Isolation | None = None,
) -> SandboxResult:
    """Run the Python source ``program`` in the sandbox, then ``tests`` against it in the
    judge (itself sandboxed), and report what they found.

    ``entry_point`` names the function HumanEval's ``check(candidate)`` is called with when the
    tests define ``check`` but do not call it. ``setup`` is trusted set-up code (the prompt's
    own definitions) that goes to the judge with the tests, as the payload's ``"setup"``, never
    to the program's room. With no tests the verdict is whether the program ran to its end
    without raising or exiting. Never raises for anything the program does; raises
    :class:`~rlx.errors.SandboxError` for test code that is not Python or that checks nothing.
    Wall time is ``timeout_s`` plus the start-up and clean-up of the rooms.
    """
    check_limits(timeout_s, memory_mb, 1, judge_memory_mb)
    if not isinstance(setup, str):
        raise SandboxError(f"set-up code must be a string of Python, not {type(setup).__name__}.")
    judged = prepared_tests(tests, entry_point) if tests.strip() else None
    isolation = isolation or current_isolation()
    start = time.monotonic()
    with _sandbox_uids(isolation) as uids, _working_folders(isolation, uids) as workdirs:
        run = _Run(isolation, uids, workdirs)
        verdict = run.tests(
            program, {"tests": judged, "setup": setup}, timeout_s, memory_mb, judge_memory_mb
        )
    return _result(verdict, time.monotonic() - start, run.output())


def run_stdio(
    program: str,
    cases: Sequence[tuple[str, str]],
    *,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    isolation: Isolation | None = None,
) -> SandboxResult:
    """Run ``program`` as a script once per ``(input, expected_output)`` case, each in a fresh
    room, with the input on stdin; a case passes when its stdout equals the expected output up
    to trailing whitespace on each line and trailing empty lines
    (:func:`rlx.sandbox.launcher.same_output`, run by the trainer). ``timeout_s`` holds for
    each case."""
    check_limits(timeout_s, memory_mb, 1)
    rows = [list(case) for case in cases]
    if not rows or any(
        len(row) != 2 or not all(isinstance(text, str) for text in row) for row in rows
    ):
        raise SandboxError(
            "stdin/stdout tests must be a non-empty list of (input, expected output) strings."
        )
    isolation = isolation or current_isolation()
    start = time.monotonic()
    with _sandbox_uids(isolation) as uids, _working_folders(isolation, uids) as workdirs:
        run = _Run(isolation, uids, workdirs)
        verdict = run.cases(program, rows, timeout_s, memory_mb)
    return _result(verdict, time.monotonic() - start, run.output())


def prepared_tests(tests: str, entry_point: str | None = None) -> str:
    """The test code as the judge runs it (:func:`rlx.sandbox.testcode.prepare`);
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


# --- one run: its rooms -------------------------------------------------------------------------


@dataclass
class _Room:
    """A started room: its process and the trainer's ends of its pipes."""

    process: subprocess.Popen[bytes]
    output: int
    """Read end of the room's stdout and stderr (one pipe; for a stdio case, its stderr)."""
    job: int
    """Write end of the pipe the room reads its job from (-1 once written)."""
    pending: memoryview
    side: str
    """``"program"`` or ``"judge"``: whose output this is."""
    kept: bytearray = field(default_factory=bytearray)
    read_bytes: int = 0
    cgroup: RoomCgroup | None = None


class _Run:
    """The rooms of one run and what they printed."""

    def __init__(
        self, isolation: Isolation, uids: dict[str, int] | None, workdirs: dict[str, str] | None
    ) -> None:
        self.isolation = isolation
        self.uids = uids
        self.workdirs = workdirs
        self.tails: dict[str, bytearray] = {}

    # -- a program and its judge

    def tests(
        self, program: str, payload: dict[str, Any], timeout_s: float, memory_mb: int,
        judge_memory_mb: int,
    ) -> dict[str, Any]:  # fmt: skip
        """Start the program's room, then the judge's; wait for the verdict until the limit."""
        deadline = time.monotonic() + timeout_s
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        verdict_read, verdict_write = os.pipe()
        rooms: list[_Room] = []
        try:
            rooms.append(self._start("program", {"program": program}, timeout_s, memory_mb,
                                     {3: requests_read, 4: answers_write}))  # fmt: skip
            seconds = max(deadline - time.monotonic(), 0.001)
            judge_fds = {3: requests_write, 4: answers_read, 5: verdict_write}
            judge_job = {"payload": payload, "seconds": seconds}
            rooms.append(self._start("judge", judge_job, timeout_s, judge_memory_mb, judge_fds))
        except BaseException:
            self._close(rooms)
            os.close(verdict_read)
            raise
        finally:
            for fd in (requests_read, requests_write, answers_read, answers_write, verdict_write):
                os.close(fd)
        try:
            raw, ended = _pump(rooms, verdict_read, deadline + _GRACE_S, _VERDICT_BYTES)
        finally:
            os.close(verdict_read)
        program_status = rooms[0].process.poll()
        judge_status = _wait(rooms[1].process, 0.05 if ended else 0.0)
        self._close(rooms)
        verdict = checked_verdict(raw)
        if verdict is None:
            why = (
                "the judge did not finish within the time limit"
                if not ended
                else f"the judge ended without a verdict ({_describe_status(judge_status)})"
            )
            verdict = failed_verdict(why, timed_out=not ended)
        verdict["returncode"] = program_status
        return verdict

    # -- stdin/stdout cases

    def cases(
        self, program: str, cases: list[list[str]], timeout_s: float, memory_mb: int
    ) -> dict[str, Any]:
        """Run the program once per case, each in a fresh room; count the cases whose stdout is
        the expected output (:func:`same_output`)."""
        verdict: dict[str, Any] = {
            "passed": 0, "failed": 0, "failures": [], "failure_count": 0,
            "setup_failed": False, "defined": True, "timed_out": False,
        }  # fmt: skip
        for number, (given, expected) in enumerate(cases, start=1):
            why = self._case(program, given, expected, timeout_s, memory_mb)
            if why is None:
                verdict["passed"] += 1
                continue
            verdict["failed"] += 1
            verdict["failure_count"] += 1
            if len(verdict["failures"]) < 5:
                verdict["failures"].append(f"case {number}: {why}")
            verdict["timed_out"] = verdict["timed_out"] or why == "the time limit passed"
        return verdict

    def _case(
        self, program: str, given: str, expected: str, timeout_s: float, memory_mb: int
    ) -> str | None:
        """None when the program's output for ``given`` is ``expected``, else why not."""
        deadline = time.monotonic() + timeout_s
        stdin = _input_file(given)
        out_read, out_write = os.pipe()
        try:
            room = self._start("stdio", {"program": program}, timeout_s, memory_mb, {},
                               stdin=stdin, stdout=out_write)  # fmt: skip
        finally:
            os.close(stdin)
            os.close(out_write)
        limit = max(4 * len(expected.encode()), 1 << 16) + 4096
        try:
            output, ended = _pump([room], out_read, deadline, limit)
        finally:
            os.close(out_read)
        status = _wait(room.process, deadline - time.monotonic()) if ended else None
        self._close([room])
        if not ended and len(output) >= limit:
            return "too much output"
        if status is None:
            return "the time limit passed"
        if status != 0:
            return f"the program ended with {_describe_status(status)}"
        text = output.decode("utf-8", errors="replace")
        if same_output(text, expected):
            return None
        return f"wrong answer: expected {expected.strip()[:60]!r}, got {text.strip()[:60]!r}"

    # -- rooms

    def _start(
        self, role: str, job: dict[str, Any], timeout_s: float, memory_mb: int,
        fds: dict[int, int], stdin: int | None = None, stdout: int | None = None,
    ) -> _Room:  # fmt: skip
        """Start ``role``'s room with ``job``; ``fds`` (number in the room -> descriptor here)
        are the protocol's pipes, put at their numbers by the room's bootstrap."""
        isolation = self.isolation
        side = "judge" if role == "judge" else "program"
        uid = self.uids[side] if self.uids is not None else None
        workdir = self.workdirs[side] if self.workdirs is not None else None
        job_read, job_write = os.pipe()
        output_read, output_write = os.pipe()
        passed = [job_read, *fds.values()]
        seccomp = -1
        etc: dict[str, int] = {}
        cgroup: RoomCgroup | None = None
        try:
            job = {
                **job, "role": role, "fds": {str(k): v for k, v in fds.items()},
                "workdir": workdir, "bubblewrap": isolation.namespaces,
                "packages": _packages_path(isolation),
                "limits": _resource_limits(timeout_s, memory_mb, isolation, self.uids),
            }  # fmt: skip
            command = [isolation.python, "-I", "-S", "-c", _BOOTSTRAP, str(job_read)]
            environment = _minimal_environment(isolation.namespaces, workdir)
            user: dict[str, Any] = {}
            if isolation.namespaces:
                if isolation.seccomp:
                    seccomp = _seccomp_fd()
                    passed.append(seccomp)
                ids = (uid, uid) if uid is not None else (os.getuid(), os.getgid())
                etc = {path: _data_fd(data) for path, data in _etc_files(*ids).items()}
                passed += etc.values()
                command = _bwrap_command(isolation, environment, seccomp, etc) + command
                environment = {"PATH": SAFE_PATH}
                if uid is not None and isolation.reveal:
                    namespace = RevealedFolders.namespace_fd(
                        isolation.bwrap or "", isolation.reveal
                    )
                    passed.append(namespace)
                    command = [_nsenter(), f"--mount=/proc/self/fd/{namespace}",
                               f"--setuid={uid}", f"--setgid={uid}", "--", *command]  # fmt: skip
                elif uid is not None:
                    user = {"user": uid, "group": uid, "extra_groups": []}
            elif uid is not None:
                user = {"user": uid, "group": uid, "extra_groups": []}
            if isolation.namespaces and cgroups.available():
                budget = memory_mb + PRIVATE_TMP_MB + 2 * SMALL_TMPFS_MB + CGROUP_SLACK_MB
                cgroup = RoomCgroup(budget << 20, MAX_PROCESSES + 4, uid if user else None)
                command = cgroup.wrap(command)
            # No preexec_fn (not thread-safe). A session of its own: the room cannot signal
            # ours through its group, and we can kill its group.
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL if stdin is None else stdin,
                stdout=output_write if stdout is None else stdout,
                stderr=output_write,
                pass_fds=passed,
                env=environment,
                cwd="/",
                start_new_session=True,
                **user,
            )
        except BaseException:
            for fd in (job_read, job_write, output_read, output_write):
                os.close(fd)
            if cgroup is not None:
                cgroup.remove()
            raise
        finally:
            for fd in [seccomp, *etc.values()]:
                if fd >= 0:
                    os.close(fd)
        os.close(job_read)
        os.close(output_write)
        data = sandbox_code(isolation.python, role) + _frame(json.dumps(job).encode())
        _grow_pipe(job_write, len(data))
        os.set_blocking(job_write, False)
        return _Room(process, output_read, job_write, memoryview(data), side, cgroup=cgroup)

    def _close(self, rooms: list[_Room]) -> None:
        """Kill the rooms, read what their pipes still hold, and reap them."""
        for room in rooms:
            _kill_room(room, self.isolation)
        for room in rooms:
            if room.job >= 0:
                os.close(room.job)
                room.job = -1
            end = time.monotonic() + _DRAIN_S
            while _read_some(room) and time.monotonic() < end:
                pass
            os.close(room.output)
            room.process.wait()
            if room.cgroup is not None:
                room.cgroup.remove()
            self.tails.setdefault(room.side, bytearray()).extend(room.kept)
            del self.tails[room.side][:-OUTPUT_TAIL_BYTES]
        if self.uids is not None and not self.isolation.namespaces:
            for uid in set(self.uids.values()):
                _kill_processes_of(uid)

    def output(self) -> str:
        """The program's output tail, then the judge's (each bounded)."""
        program = bytes(self.tails.get("program", b""))
        judge = bytes(self.tails.get("judge", b""))
        if judge and len(program) + len(judge) > OUTPUT_TAIL_BYTES:
            judge = judge[-OUTPUT_TAIL_BYTES // 2 :]
            program = program[-(OUTPUT_TAIL_BYTES - len(judge)) :]
        return (program + judge).decode("utf-8", errors="replace")


def _pump(rooms: list[_Room], watched: int, deadline: float, limit: int) -> tuple[bytes, bool]:
    """Feed the rooms their jobs and read their output until ``watched`` (the verdict, or a
    case's stdout) reaches its end (True) or the deadline or ``limit`` bytes (False)."""
    result = bytearray()
    while len(result) < limit:
        wait = deadline - time.monotonic()
        if wait <= 0:
            return bytes(result), False
        readers = [watched] + [r.output for r in rooms if r.read_bytes < MAX_FILE_MB << 20]
        writers = [r.job for r in rooms if r.job >= 0]
        readable, writable, _ = select.select(readers, writers, [], wait)
        for room in rooms:
            if room.job in writable:
                _write_some(room)
            if room.output in readable:
                _read_some(room)
        if watched in readable:
            chunk = os.read(watched, min(1 << 16, limit - len(result)))
            if not chunk:
                return bytes(result), True
            result += chunk
    return bytes(result), False


def _write_some(room: _Room) -> None:
    try:
        written = os.write(room.job, room.pending[: 1 << 20])
    except BlockingIOError:
        return
    except OSError:  # the room is gone
        written = len(room.pending)
    room.pending = room.pending[written:]
    if not room.pending:
        os.close(room.job)
        room.job = -1


def _read_some(room: _Room) -> bool:
    """Read once from the room's output if it has something; False at its end or when idle."""
    if not select.select([room.output], [], [], 0.01)[0]:
        return False
    chunk = os.read(room.output, 1 << 16)
    if not chunk:
        return False
    room.read_bytes += len(chunk)
    room.kept += chunk
    del room.kept[:-OUTPUT_TAIL_BYTES]
    return True


def _kill_room(room: _Room, isolation: Isolation) -> None:
    """Kill a room and everything in it: bubblewrap's process (its PID namespace dies with it);
    without bubblewrap, the room's process group."""
    if room.process.poll() is None and isolation.namespaces:
        # the room's init first: the kernel then kills its PID namespace and bubblewrap's
        # outer process reaps it and exits (killing that one first would leave the init to be
        # reparented, a zombie until the machine's init reaps it). A room that ended by itself
        # leaves its init to the machine's init that way all the same (bubblewrap's outer
        # process does not wait for it): in a container whose PID 1 reaps nothing, start the
        # trainer under an init that does (docker run --init, tini).
        for init in children_of(room.process.pid):
            _signal(init, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            room.process.wait(timeout=_KILL_GRACE_S)
    if room.process.poll() is None:
        _signal(room.process.pid, signal.SIGKILL)
    if not isolation.namespaces:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(room.process.pid, signal.SIGKILL)


def _wait(process: subprocess.Popen[bytes], seconds: float) -> int | None:
    """The process's exit status (128 + n for signal n) once it ends, waiting up to
    ``seconds``; None if it is still running."""
    try:
        code = process.wait(timeout=max(seconds, 0.0)) if seconds > 0 else process.poll()
    except subprocess.TimeoutExpired:
        return None
    if code is None:
        return None
    return code if code >= 0 else 128 - code


def _describe_status(status: int | None) -> str:
    if status is None:
        return "no exit status"
    if status > 128:
        return f"killed by {_SIGNALS.get(status - 128, f'signal {status - 128}')}"
    return f"exit status {status}"


def _input_file(text: str) -> int:
    """A read-only descriptor of an unlinked file holding ``text`` (no pipe to keep fed)."""
    fd = os.memfd_create("rlx-input", os.MFD_CLOEXEC)  # Linux 3.17 and later
    view = memoryview(text.encode("utf-8"))
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _grow_pipe(fd: int, size: int) -> None:
    """Make the pipe hold ``size`` bytes when the system allows, so the job goes in one write."""
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(max(size, 1 << 16), 1 << 20))


# --- the verdict --------------------------------------------------------------------------------


def checked_verdict(raw: bytes) -> dict[str, Any] | None:
    """The judge's verdict if it is one well-formed JSON object of the expected fields."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    counts = ("passed", "failed", "failure_count")
    flags = ("setup_failed", "defined", "timed_out")
    if type(data) is not dict or set(data) != {*counts, *flags, "failures"}:
        return None
    if any(type(data[k]) is not int or data[k] < 0 for k in counts):
        return None
    if any(type(data[k]) is not bool for k in flags):
        return None
    failures = data["failures"]
    if type(failures) is not list or any(type(f) is not str for f in failures):
        return None
    data["failures"] = [f[:500] for f in failures[:5]]
    return data


def failed_verdict(why: str, timed_out: bool = False, total: int = 1) -> dict[str, Any]:
    return {
        "passed": 0, "failed": total, "failures": [why], "failure_count": 1,
        "setup_failed": False, "defined": False, "timed_out": timed_out,
    }  # fmt: skip


def _result(verdict: dict[str, Any], elapsed: float, output: str) -> SandboxResult:
    """The result from the verdict; a judge that failed is the sandbox's failure, not the
    program's, and is logged."""
    passed, failed = int(verdict["passed"]), int(verdict["failed"])
    failures = tuple(verdict["failures"])
    if any(f.startswith("the judge ") for f in failures):
        logger.warning("python-tests sandbox: %s; the program scores 0. Output: %s",
                       failures[0], output.strip()[-300:])  # fmt: skip
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


# --- limits, environment, folders, uids ---------------------------------------------------------


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
    timeout_s: float, memory_mb: int, isolation: Isolation, uids: dict[str, int] | None
) -> dict[str, list[int]]:
    """``{RLIMIT_name: [soft, hard]}`` for one room, set by its bootstrap before the role runs."""
    cpu_s = math.ceil(timeout_s) + 1  # soft: SIGXCPU; hard, one second later: SIGKILL
    limits = {
        "RLIMIT_AS": [memory_mb << 20] * 2,
        "RLIMIT_CPU": [cpu_s, cpu_s + 1],
        "RLIMIT_FSIZE": [MAX_FILE_MB << 20] * 2,
        "RLIMIT_NOFILE": [MAX_OPEN_FILES] * 2,
        "RLIMIT_CORE": [0, 0],
    }
    # RLIMIT_NPROC counts the tasks of a uid within a user namespace: in a room of its own
    # (bubblewrap's user namespace) that is the room's tasks, its bubblewrap init among them;
    # with a uid of its own, that uid's tasks; as the trainer's user, everything that user
    # runs now, plus a margin.
    if isolation.namespaces:
        tasks = MAX_PROCESSES + 1
    elif uids is not None:
        tasks = MAX_PROCESSES * (2 if uids["program"] == uids["judge"] else 1)
    else:
        tasks = _task_count(os.getuid()) + 64
    limits["RLIMIT_NPROC"] = [tasks] * 2
    return limits


def _minimal_environment(namespaces: bool, workdir: str | None) -> dict[str, str]:
    """The whole environment of a room: nothing inherited, so no secrets; home and temporary
    files inside the room's working folder."""
    home = "/tmp/work" if namespaces or workdir is None else workdir
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


@functools.cache
def _bwrap_base(isolation: Isolation) -> tuple[str, ...]:
    """The part of a room's bubblewrap command that is the same for every room (see
    :mod:`rlx.sandbox.isolation` for what each piece keeps out)."""
    args = [isolation.bwrap or "bwrap", "--unshare-all", "--unshare-user", "--disable-userns",
            "--die-with-parent", "--new-session", "--clearenv",
            "--ro-bind", "/usr", "/usr"]  # fmt: skip
    for entry in HOST_ROOT_ENTRIES:
        if os.path.islink(entry):
            args += ["--symlink", os.readlink(entry), entry]
        elif os.path.isdir(entry):
            args += ["--ro-bind", entry, entry]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for folder, mb in (("/tmp", PRIVATE_TMP_MB), ("/var/tmp", SMALL_TMPFS_MB),
                       ("/dev/shm", SMALL_TMPFS_MB)):  # fmt: skip
        args += ["--size", str(mb << 20), "--perms", "1777", "--tmpfs", folder]
    # after the private /tmp, so that an interpreter or a venv living under /tmp is there too
    for folder in isolation.binds:
        args += ["--ro-bind", folder, folder]
    return tuple(args)


def _bwrap_command(
    isolation: Isolation, environment: dict[str, str], seccomp: int, etc: dict[str, int]
) -> list[str]:
    args = list(_bwrap_base(isolation))
    for path, fd in etc.items():
        args += ["--ro-bind-data", str(fd), path]
    # the room's root (bubblewrap's tmpfs holding the mount points) read-only too: only the
    # size-capped tmpfs mounts can be written
    args += ["--remount-ro", "/", "--chdir", "/tmp"]
    for name, value in environment.items():
        args += ["--setenv", name, value]
    if seccomp >= 0:
        args += ["--seccomp", str(seccomp)]
    return [*args, "--"]


def _seccomp_fd() -> int:
    """A fresh descriptor holding the filter (bubblewrap reads each to its end, then closes)."""
    return _data_fd(seccomp_program() or b"")


def _etc_files(uid: int, gid: int) -> dict[str, bytes]:
    """The room's whole ``/etc``: who its one user is (so ``getpass.getuser()`` and
    ``pwd.getpwuid(os.getuid())`` answer as on any machine) and that ``localhost`` is the
    loopback; nothing of the host's."""
    return {
        "/etc/passwd": f"sandbox:x:{uid}:{gid}:sandbox:/tmp/work:/bin/sh\n".encode(),
        "/etc/group": f"sandbox:x:{gid}:\n".encode(),
        "/etc/hosts": b"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    }


def _data_fd(data: bytes) -> int:
    """A fresh pipe's reading end holding ``data`` (bubblewrap reads it to its end)."""
    program = data
    read, write = os.pipe()
    try:
        _grow_pipe(write, len(program))
        view = memoryview(program)
        while view:
            view = view[os.write(write, view) :]
    finally:
        os.close(write)
    return read


@functools.cache
def _nsenter() -> str:
    path = shutil.which("nsenter", path=SAFE_PATH)
    if path is None:
        raise SandboxError("`nsenter` (util-linux) is needed to reveal the interpreter's folders")
    return path


def _packages_path(isolation: Isolation) -> list[str]:
    """The trainer's ``sys.path`` without its standard library: where the rooms find the
    packages installed beside rlx (pytest, numpy ...); in a bubblewrap room, only the folders
    bound there."""
    stdlib = (sys.base_prefix, sys.base_exec_prefix)
    entries = [
        entry
        for entry in sys.path
        if entry and ("site-packages" in entry or not entry.startswith(stdlib))
    ]
    if isolation.namespaces:
        entries = [
            entry
            for entry in entries
            if any(
                os.path.realpath(entry) == folder
                or os.path.realpath(entry).startswith(folder + "/")
                for folder in isolation.binds
            )
        ]
    return entries


@contextlib.contextmanager
def _working_folders(
    isolation: Isolation, uids: dict[str, int] | None
) -> Iterator[dict[str, str] | None]:
    """Without bubblewrap, a fresh host temporary folder for the program and one for the judge
    (owned by their uids), deleted afterwards; with it, None (each room makes its own on its
    own tmpfs)."""
    if isolation.namespaces:
        yield None
        return
    folders = {
        role: tempfile.mkdtemp(prefix=f"rlx-sandbox-{role}-") for role in ("program", "judge")
    }
    try:
        if uids is not None:
            for role, folder in folders.items():
                os.chown(folder, uids[role], uids[role])
        yield folders
    finally:
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _sandbox_uids(isolation: Isolation) -> Iterator[dict[str, int] | None]:
    """Borrow the program's and the judge's uids, used by no other concurrent run of this
    process (a queue) nor of another trainer on the machine (a lock file per pair, see
    :func:`_lock_pair`): two rooms of one uid would share its process budget, and without
    namespaces the sweep after a run would kill the other run's processes. None without a uid
    change."""
    if isolation.uids is None:
        yield None
        return
    pool = _uid_pool(isolation.uids)
    while True:
        pair = pool.get()
        lock = _lock_pair(pair)
        if lock is not None:
            break
        pool.put(pair)  # another process holds it: try the next pair, after a moment
        time.sleep(0.002)
    try:
        yield {"program": pair[0], "judge": pair[1]}
    finally:
        os.close(lock)  # releases the lock
        pool.put(pair)


UID_LOCK_FOLDER = "/run/lock/rlx-sandbox-uids"
"""Where the trainers on one machine (as root) lock the uid pairs they lend: one file per pair,
held with ``flock`` for the length of a run and released by the kernel if the trainer dies."""


def _lock_pair(pair: tuple[int, int]) -> int | None:
    """A descriptor holding the machine-wide lock of ``pair`` (closing it releases it), or None
    when another process holds it. The folder is root's own, mode 0700, never through a link."""
    folder = (
        UID_LOCK_FOLDER
        if os.path.isdir(os.path.dirname(UID_LOCK_FOLDER))
        else ("/tmp/rlx-sandbox-uids")
    )
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    info = os.lstat(folder)
    if (
        not os.path.isdir(folder)
        or os.path.islink(folder)
        or info.st_uid != 0
        or (info.st_mode & 0o077)
    ):
        raise SandboxError(
            f"{folder} must be a folder of root's own of mode 0700 (it holds the sandbox uids' "
            "locks); remove it and run again."
        )
    fd = os.open(
        os.path.join(folder, f"{pair[0]}-{pair[1]}.lock"),
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


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


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def _kill_processes_of(uid: int) -> None:
    """Kill every process still owned by ``uid`` (no PID namespace: one may have escaped its
    group with ``setsid``), so the uid goes back to the pool clean. A fork bomb forks while its
    siblings are being killed, so this sweeps until a pass finds nothing alive."""
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
