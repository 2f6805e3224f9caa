"""The ``python-tests`` reward: run model-written Python against a row's tests, in a sandbox.

A completion scores 1.0 when ``prompt + completion + "\\n" + tests`` runs to its end inside the
sandbox within the time limit, and 0.0 otherwise: a failed assert, any exception, a syntax error,
an early ``exit()``, a timeout, a crash, running out of memory, or being killed.

Each program runs in a child process, never in the trainer, through two stages:

1. a *launcher*, started as the trainer's user, that prepares the sandbox, forks the program
   and supervises it: it enforces the time limit, adopts the program's orphans (as a child
   subreaper, or as init of the PID namespace) and, when the program ends, kills and reaps
   every process it left, so no stray or zombie outlives a run;
2. a *harness*, exec'd in the forked child after the limits are set and the credentials
   dropped, that runs the program and its tests in a fresh interpreter and, only when they
   finish, writes a random one-time marker to its output. A program that calls
   ``sys.exit(0)`` or ``os._exit(0)`` before the tests run exits without the marker and scores
   0, the commonest reward hack of code-RL.

What protects the trainer (:func:`sandbox_info` says which of these are active on this machine):

- **time**: a wall-clock limit of ``timeout_s`` per program (including interpreter start-up),
  enforced by the launcher, after which the whole process tree is killed; it holds even if the
  trainer dies. ``RLIMIT_CPU`` of ``ceil(timeout_s) + 1`` s is a second stop, and the trainer
  kills a launcher that is still there 2 s after the limit.
- **memory**: ``RLIMIT_AS`` of ``memory_mb`` MiB per process; a larger allocation raises
  ``MemoryError`` in the program. Address space is not memory used: each thread reserves its
  8 MiB stack, so under the default 256 MiB a program can start about 25 threads.
- **processes** (fork bombs): the child runs in its own session; the launcher kills every
  process the program started, including ones that called ``setsid``; as root everything runs
  in a private PID namespace (``unshare --pid``) whose init is the launcher, so when it exits
  the kernel kills whatever is left in the namespace. As root
  each concurrent run also gets its own unused uid (:data:`SANDBOX_UIDS`) with ``RLIMIT_NPROC``
  of 32, so a fork bomb stops at 32 processes and threads and cannot starve its neighbours.
  When a run ends, any process still owned by its uid is killed before the uid is used again.
- **network**: as root, a private network namespace (``unshare --net``) with only a loopback
  interface that is down: every ``connect``, to ``127.0.0.1`` or to the internet, fails.
- **files**: as root the program runs as its unprivileged uid with no supplementary groups and
  ``no_new_privs`` (setuid binaries cannot raise it back), so it cannot write anything that
  root owns: the project, ``/etc``, other users' files. Its working folder (its cwd, ``HOME``
  and ``TMPDIR``) is private (mode 0700). As root with namespaces, ``/tmp``, ``/var/tmp`` and
  ``/dev/shm``, the world-writable places, are fresh size-capped tmpfs mounts (64 MiB, 4096
  files) seen only by this run, and the working folder lives on that ``/tmp``: everything the
  program writes vanishes with the namespace. ``RLIMIT_FSIZE`` caps any one file (and the
  program's output) at 10 MiB.
- **environment**: only ``PATH``, ``HOME``, ``TMPDIR``, ``LANG`` and three thread caps
  (``MALLOC_ARENA_MAX``, ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``); no secrets inherited;
  ``python -I`` ignores ``PYTHON*`` variables and the user site. The interpreter is the first
  one the sandbox uid can run: the trainer's own, or the system's ``python3`` when the trainer's
  lives where that uid cannot read (e.g. under ``/root``); :func:`sandbox_info` names it.

What is *not* protected:

- reading world-readable files (with no network, nothing read can leave the sandbox, but the
  program can see, e.g., the project's source);
- without ``unshare`` (or where the kernel refuses it): no network, PID or mount namespaces, so
  the program can reach the network and leave files in the shared ``/tmp``;
- without root: no namespaces and no uid change either; the program runs as the trainer's user,
  can write wherever that user can, and ``os.kill(-1, 9)`` would kill the trainer; only the
  session, the limits and the timeout apply (``RLIMIT_NPROC`` is then the user's current task
  count + 64);
- a program written to forge the marker: it runs in the same interpreter as the harness, so
  frame introspection can find it; the marker stops accidental and lazy hacks, not an
  adversary. Likewise an ``__eq__`` that always returns True passes ``assert f(x) == y``.

Overhead per program is about 60 ms of process start-up; a batch runs ``max_workers`` programs
at a time, so G completions take about ``ceil(G / max_workers) * timeout_s`` in the worst case.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import queue
import secrets
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
from typing import Any

from rlx.errors import ConfigError

SANDBOX_UIDS = tuple(range(2_000_000_000, 2_000_000_064))
"""Unused uids (no passwd entry, owning no file) for concurrent runs, one each; as root only."""

NOBODY_UIDS = (65534,)
"""The fallback when the high uids are not mapped (e.g. a rootless container): ``nobody``, one
uid for all, so runs then go one at a time (concurrent runs must not share a uid: the clean-up
after one would kill the other)."""

MAX_PROCESSES = 32
"""``RLIMIT_NPROC`` of a sandbox uid: processes and threads one program may have at once."""

MAX_FILE_MB = 10
"""``RLIMIT_FSIZE``: the largest file, including the program's captured output, in MiB."""

MAX_OPEN_FILES = 256
"""``RLIMIT_NOFILE``: open file descriptors per process."""

PRIVATE_TMP_MB = 64
"""Size of the private ``/tmp`` tmpfs (namespaces only); ``/var/tmp`` and ``/dev/shm`` get 8."""

OUTPUT_TAIL_BYTES = 4000
"""How much of the end of a program's output :class:`SandboxResult` keeps."""

_PRIVATE_WORKDIR = "/tmp/rlx-sandbox"  # on the namespace's own tmpfs, never on the host's /tmp
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_UNSHARE_FLAGS = ("--net", "--pid", "--fork", "--kill-child", "--mount-proc")
_KILL_GRACE_S = 1.0
_BACKSTOP_S = 2.0  # the launcher enforces the time limit; this is for a launcher that hangs
_TIMEOUT_EXIT = 124
_SWEEP_PASSES = 1000
_UID_POOLS: dict[tuple[int, ...], queue.Queue[int]] = {}
_UID_POOLS_LOCK = threading.Lock()

# The launcher runs as the trainer's user (root for the namespaces and the uid change), inside
# the namespaces, where it is init. It reads its job as JSON on stdin and prepares the working
# folder; then it forks the program, which sets its limits, drops to the sandbox uid and exec's
# the harness, while the launcher stays behind as the program's supervisor: a child subreaper
# that enforces the time limit, then kills and reaps every process the program left, so no
# stray or zombie survives it even without a PID namespace. Exit status: the harness's, 128 +
# the signal that killed it, or 124 at the time limit (as timeout(1)). Standard library only:
# it runs with -I -S.
_LAUNCHER = r"""
import ctypes, json, os, resource, signal, sys, time
job = json.loads(sys.stdin.buffer.read())
deadline = time.monotonic() + job["timeout_s"]
libc = ctypes.CDLL(None, use_errno=True)

def private_tmp():
    for target, mb in (("/tmp", job["tmp_mb"]), ("/var/tmp", 8), ("/dev/shm", 8)):
        options = f"size={mb}m,nr_inodes=4096,mode=1777".encode()
        if os.path.isdir(target) and libc.mount(b"tmpfs", target.encode(), b"tmpfs", 6, options):
            sys.exit(f"rlx sandbox: cannot mount tmpfs on {target}: "
                     f"{os.strerror(ctypes.get_errno())}")

def working_folder():
    work, uid = job["workdir"], job["uid"]
    tmp, program = os.path.join(work, "tmp"), os.path.join(work, "program.py")
    os.makedirs(tmp, mode=0o700, exist_ok=True)
    with open(program, "w", encoding="utf-8") as handle:
        handle.write(job["program"])
    os.chmod(work, 0o700)
    if uid is not None:
        for path in (work, tmp, program):
            os.chown(path, uid, uid)

def start_program():
    os.setpgid(0, 0)
    for name, (soft, hard) in job["limits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: setuid binaries cannot raise it back
    uid = job["uid"]
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    read_end, write_end = os.pipe()  # the marker reaches the harness on stdin, never on disk
    os.write(write_end, (job["marker"] + "\n").encode())
    os.close(write_end)
    os.dup2(read_end, 0)
    os.close(read_end)
    os.chdir(job["workdir"])
    python = job["python"]
    os.execve(python, [python, "-I", "-c", job["harness"], "program.py"], job["env"])

def wait_for(pid):
    while True:
        reaped, status = os.waitpid(-1, os.WNOHANG)  # orphans come here too: reap them all
        if reaped == pid:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code
        if reaped == 0:
            if time.monotonic() >= deadline:
                return 124
            time.sleep(0.005)

def descendants():
    found, frontier = [], [os.getpid()]
    while frontier:
        parent = frontier.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as handle:
                    children = [int(pid) for pid in handle.read().split()]
            except OSError:
                continue
            found += children
            frontier += children
    return found

def reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass

def kill_everything(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    for _ in range(1000):  # a fork bomb forks while we kill: sweep until nothing is left
        reap()
        left = descendants()
        if not left:
            return
        for child in left:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.001)

if job["private_tmp"]:
    private_tmp()
working_folder()
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: the program's orphans come to us, not init
pid = os.fork()
if pid == 0:
    try:
        start_program()  # exec's the harness: returns only on failure
    except BaseException as error:
        os.write(2, f"rlx sandbox: cannot start the program: {error!r}\n".encode())
    os._exit(127)
status = wait_for(pid)
kill_everything(pid)
os._exit(status)
"""

# Runs as the sandbox uid: the program and its tests, then the marker only if they finished.
_HARNESS = r"""
import os, sys, traceback
def main():
    marker = sys.stdin.readline().strip()
    path = sys.argv[1]
    try:
        with open(path, encoding="utf-8") as handle:
            code = compile(handle.read(), path, "exec")
        exec(code, {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__})
    except SystemExit as stop:
        sys.stderr.write(f"rlx sandbox: exit({stop.code!r}) before the tests finished\n")
        os._exit(1)
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os.write(1, ("\n" + marker + "\n").encode())
    os._exit(0)
main()
"""


@dataclass(frozen=True, slots=True)
class Isolation:
    """How programs are isolated on this machine; chosen once by :func:`current_isolation`."""

    python: str
    """The interpreter that runs the program (readable and executable by the sandbox uid)."""
    unshare: str | None
    """Path of ``unshare`` when network, PID and mount namespaces are used, else None."""
    uids: tuple[int, ...] | None
    """Uids the program runs as, one per concurrent run; None: the trainer's own user."""

    @property
    def namespaces(self) -> bool:
        """Private network, PID and mount namespaces (and so a private ``/tmp``)."""
        return self.unshare is not None


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """What one sandboxed run did."""

    status: str
    """``"passed"`` (ran to the end), ``"failed"`` (exception, non-zero exit, killed by a limit)
    or ``"timeout"`` (killed at the wall-clock limit)."""
    returncode: int | None
    """The program's exit status: 128 + n when signal n killed it, 124 when the time limit
    stopped it (as ``timeout(1)``); None if the sandbox itself had to be killed."""
    elapsed_s: float
    """Wall time of the run, start-up and clean-up included."""
    output: str
    """The last :data:`OUTPUT_TAIL_BYTES` of stdout and stderr together, marker removed."""

    @property
    def passed(self) -> bool:
        """True when the program and its tests ran to their end."""
        return self.status == "passed"


# --- the reward ---------------------------------------------------------------------------------


def python_tests_reward(
    prompts: Sequence[str],
    completions: Sequence[str],
    tests: Sequence[str] | None = None,
    *,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    max_workers: int | None = None,
    prepend_prompt: bool = True,
    answers: Sequence[str] | None = None,
    **_: Any,
) -> list[float]:
    """1.0 per completion whose program passes its row's tests in the sandbox, else 0.0.

    The program is ``prompt + completion + "\\n" + tests``: the prompt holds the code the model
    continues (a signature, a docstring), the completion the rest, the tests are plain asserts
    run after it. With ``prepend_prompt=False`` the prompt (e.g. natural language) is left out.
    ``tests`` is one string per completion; when it is None the ``answers`` column of verifier
    rows ``{"prompt", "answer"}`` holds the test code. ``timeout_s`` is the wall-clock limit per
    program, ``memory_mb`` its address-space limit; ``max_workers`` programs (default
    ``min(4, cpu_count)``) run at once, and the scores keep the order of ``completions``.
    """
    test_code = _tests_for(prompts, completions, tests, answers)
    programs = [
        program_text(prompt if prepend_prompt else "", completion, test)
        for prompt, completion, test in zip(prompts, completions, test_code, strict=True)
    ]
    results = run_many(programs, timeout_s=timeout_s, memory_mb=memory_mb, max_workers=max_workers)
    return [float(result.passed) for result in results]


def program_text(prompt: str, completion: str, tests: str) -> str:
    """The source the sandbox runs: ``prompt + completion + "\\n" + tests``."""
    return prompt + completion + "\n" + tests + "\n"


def _tests_for(
    prompts: Sequence[str],
    completions: Sequence[str],
    tests: Sequence[str] | None,
    answers: Sequence[str] | None,
) -> Sequence[str]:
    """The test code per completion, from ``tests`` or else ``answers``, checked for length."""
    source = "tests" if tests is not None else "answers"
    test_code = tests if tests is not None else answers
    if test_code is None:
        raise ConfigError(
            "the python-tests reward needs test code: pass tests=[...] (one string of asserts "
            "per completion), or rows {'prompt', 'answer'} whose answer is the test code."
        )
    if isinstance(test_code, str):
        raise ConfigError(
            f"{source} must be a list with one string of test code per completion, not a string."
        )
    if len(prompts) != len(completions) or len(completions) != len(test_code):
        raise ConfigError(
            f"got {len(prompts)} prompts, {len(completions)} completions and {len(test_code)} "
            f"{source}; they must match, one per completion."
        )
    return test_code


# --- running programs ---------------------------------------------------------------------------


def run_many(
    programs: Sequence[str],
    *,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    max_workers: int | None = None,
    isolation: Isolation | None = None,
) -> list[SandboxResult]:
    """:func:`run_sandboxed` on each program, ``max_workers`` at a time, results in order."""
    workers = _check_limits(timeout_s, memory_mb, max_workers)
    if not programs:
        return []
    isolation = isolation or current_isolation()  # probe once here, not in every thread
    with ThreadPoolExecutor(max_workers=min(workers, len(programs))) as pool:
        return list(
            pool.map(
                lambda program: run_sandboxed(
                    program, timeout_s=timeout_s, memory_mb=memory_mb, isolation=isolation
                ),
                programs,
            )
        )


def run_sandboxed(
    program: str,
    *,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    isolation: Isolation | None = None,
) -> SandboxResult:
    """Run the Python source ``program`` in the sandbox and report how it ended.

    Never raises for anything the program does; wall time is ``timeout_s`` plus about 50 ms of
    process start-up and clean-up (at most 2 s more, should the launcher itself hang).
    """
    _check_limits(timeout_s, memory_mb, 1)
    isolation = isolation or current_isolation()
    marker = secrets.token_hex(16)
    start = time.monotonic()
    with _sandbox_uid(isolation) as uid, _working_folder(isolation) as workdir:
        job = _job(program, marker, workdir, uid, isolation, timeout_s, memory_mb)
        with tempfile.TemporaryFile() as output:
            returncode = _run_launcher(job, isolation, output, timeout_s)
            text = _output_tail(output)
        if uid is not None:
            _kill_processes_of(uid)
    status = _status(returncode, marker, text)
    return SandboxResult(status, returncode, time.monotonic() - start, text.replace(marker, ""))


def _check_limits(timeout_s: float, memory_mb: int, max_workers: int | None) -> int:
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
    marker: str,
    workdir: str,
    uid: int | None,
    isolation: Isolation,
    timeout_s: float,
    memory_mb: int,
) -> dict[str, Any]:
    """Everything the launcher needs, sent to it as JSON on stdin."""
    return {
        "program": program,
        "marker": marker,
        "timeout_s": timeout_s,
        "workdir": workdir,
        "uid": uid,
        "python": isolation.python,
        "harness": _HARNESS,
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
        "PATH": _SAFE_PATH,
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
    prefix = [isolation.unshare, *_UNSHARE_FLAGS] if isolation.unshare else []
    return [*prefix, sys.executable, "-I", "-S", "-c", _LAUNCHER]


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
        env={"PATH": _SAFE_PATH},
        start_new_session=True,
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


def _status(returncode: int | None, marker: str, output: str) -> str:
    """``passed`` needs both a clean exit and the harness's marker (the tests ran to the end)."""
    if returncode is None or returncode == _TIMEOUT_EXIT:
        return "timeout"
    return "passed" if returncode == 0 and marker in output else "failed"


# --- choosing the isolation ---------------------------------------------------------------------


@functools.cache
def current_isolation() -> Isolation:
    """The strongest isolation that works here, found once by running tiny probe programs.

    As root: a uid change to :data:`SANDBOX_UIDS`, else to ``nobody``, with the first
    interpreter that uid can run, each with namespaces when ``unshare`` works, else without.
    Raises ConfigError when not even an unisolated child can run Python.
    """
    if os.geteuid() != 0:
        return _checked(Isolation(sys.executable, None, None))
    # A uid change comes first: without it a root program could rewrite the project and the
    # checkpoints, which is worse than reaching the network.
    unshares = list(dict.fromkeys([_working_unshare(), None]))
    for uids in (SANDBOX_UIDS, NOBODY_UIDS, None):
        for unshare in unshares:
            for python in _interpreters() if uids is not None else [sys.executable]:
                candidate = Isolation(python, unshare, uids)
                if _probe(candidate):
                    return candidate
    return _checked(Isolation(sys.executable, None, None))


def sandbox_info() -> dict[str, Any]:
    """Which protections are active on this machine, and the limits each run gets."""
    isolation = current_isolation()
    uids = None if isolation.uids is None else sorted(set(isolation.uids))
    return {
        "python": isolation.python,
        "network_namespace": isolation.namespaces,
        "pid_namespace": isolation.namespaces,
        "private_tmp": isolation.namespaces,
        "uid_drop": uids is not None,
        "uids": None if uids is None else f"{uids[0]}..{uids[-1]}",
        "limits": {
            "wall_s": "timeout_s",
            "cpu_s": "ceil(timeout_s) + 1",
            "address_space_mb": "memory_mb",
            "processes": MAX_PROCESSES if isolation.uids is not None else "user's tasks + 64",
            "file_size_mb": MAX_FILE_MB,
            "open_files": MAX_OPEN_FILES,
        },
        "missing": _missing_protections(isolation),
    }


def _missing_protections(isolation: Isolation) -> list[str]:
    """One sentence per protection this machine cannot give, for logs and ``rlx doctor``."""
    missing = []
    if not isolation.namespaces:
        missing.append(
            "no network/PID/mount namespaces (needs root and a working `unshare`): programs can "
            "reach the network, write to the shared /tmp, and a process that leaves its session "
            "outlives the run unless it runs as a sandbox uid"
        )
    if isolation.uids is None:
        missing.append(
            "no uid change (needs root and an interpreter that uid can run): programs run as the "
            "trainer's user, can write what it can and signal its processes; as root "
            "RLIMIT_NPROC does not bind, so only the time limit stops a fork bomb"
        )
    return missing


def _working_unshare() -> str | None:
    """Path of ``unshare`` if it can make the namespaces here (root, and a kernel that lets it)."""
    unshare = shutil.which("unshare", path=_SAFE_PATH)
    if unshare is None:
        return None
    try:
        probe = subprocess.run(
            [unshare, *_UNSHARE_FLAGS, "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            env={"PATH": _SAFE_PATH},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return unshare if probe.returncode == 0 else None


def _interpreters() -> list[str]:
    """Interpreters to try for the sandbox uid: ours first, then the system's (ours may live
    where that uid cannot read, e.g. under ``/root``)."""
    candidates = [sys.executable, os.path.realpath(sys.executable)]
    candidates += [shutil.which(name, path=_SAFE_PATH) or "" for name in ("python3", "python")]
    unique = dict.fromkeys(path for path in candidates if path and os.path.isfile(path))
    return list(unique)


def _probe(isolation: Isolation) -> bool:
    """True when a tiny program that imports common modules passes under ``isolation``."""
    program = "import collections, json, math, os, re, socket\nassert True\n"
    result = run_sandboxed(program, timeout_s=10.0, isolation=isolation)
    return result.passed


def _checked(isolation: Isolation) -> Isolation:
    result = run_sandboxed("pass\n", timeout_s=10.0, isolation=isolation)
    if not result.passed:
        raise ConfigError(
            f"the python-tests sandbox cannot run Python here ({result.status}, exit "
            f"{result.returncode}): {result.output.strip()[-500:]!r}"
        )
    return isolation


__all__ = [
    "Isolation",
    "SandboxResult",
    "current_isolation",
    "program_text",
    "python_tests_reward",
    "run_many",
    "run_sandboxed",
    "sandbox_info",
]
