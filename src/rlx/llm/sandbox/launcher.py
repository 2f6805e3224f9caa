"""The launcher: prepares the sandbox, starts the program, judges it and cleans up.

Runs as the trainer's user (root for the namespaces and the uid change), inside the namespaces
when there are any, where it is the PID namespace's init. It reads its job as JSON on stdin,
mounts the private temporary folders and writes the program into its working folder. Then it
forks the program, which sets its limits, drops to the sandbox uid and execs the program server
(:mod:`rlx.llm.sandbox.server`) with two pipes to the judge, while the launcher stays behind as
the judge (:mod:`rlx.llm.sandbox.judge`) and the program's supervisor: a child subreaper that
holds the time limit and, when the tests are done, kills and reaps every process the program
left, so no stray or zombie survives it even without a PID namespace.

The verdict goes to a file descriptor the program never holds (``verdict_fd``), as one JSON
object; the program's output goes to the launcher's stdout, which the trainer keeps only for
people to read.

Standard library only, and no import of rlx (see :mod:`rlx.llm.sandbox.wire`).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import resource
import signal
import sys
import time

from rlx.llm.sandbox import judge, wire

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_MS_NOSUID_NODEV = 6


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    deadline = time.monotonic() + job["timeout_s"]
    os.set_inheritable(job["verdict_fd"], False)
    libc = ctypes.CDLL(None, use_errno=True)
    if job["private_tmp"]:
        private_tmp(libc, job["tmp_mb"])
    working_folder(job)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # the program's orphans come to us
    requests_read, requests_write = os.pipe()
    answers_read, answers_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            start_program(job, libc, requests_read, answers_write)  # execs: returns on failure
        except BaseException as error:
            os.write(2, f"rlx sandbox: cannot start the program: {error!r}\n".encode())
        os._exit(127)
    os.close(requests_read)
    os.close(answers_write)
    channel = judge.Channel(requests_write, answers_read, deadline)
    verdict = judge_with_alarm(job["tests"], channel, deadline)
    returncode = ended_by_itself(pid)
    kill_everything(pid)
    record = verdict.as_dict()
    record["returncode"] = returncode
    with os.fdopen(job["verdict_fd"], "w", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
    os._exit(0)


def judge_with_alarm(tests: str, channel: judge.Channel, deadline: float) -> judge.Verdict:
    """The judge's verdict; an alarm at ``deadline`` also stops tests that loop on their own."""

    def alarm(signum: int, frame: object) -> None:
        raise channel.out_of_time()

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001))
    try:
        return judge.judge(tests, channel)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def private_tmp(libc: object, tmp_mb: int) -> None:
    """Fresh size-capped tmpfs mounts on the world-writable folders, seen only by this run."""
    for target, mb in (("/tmp", tmp_mb), ("/var/tmp", 8), ("/dev/shm", 8)):
        options = f"size={mb}m,nr_inodes=4096,mode=1777".encode()
        if os.path.isdir(target) and libc.mount(
            b"tmpfs", target.encode(), b"tmpfs", _MS_NOSUID_NODEV, options
        ):
            sys.exit(
                f"rlx sandbox: cannot mount tmpfs on {target}: {os.strerror(ctypes.get_errno())}"
            )


def working_folder(job: dict[str, object]) -> None:
    """The program's private folder (mode 0700, owned by its uid) with ``program.py`` in it."""
    work, uid = job["workdir"], job["uid"]
    tmp, program = os.path.join(work, "tmp"), os.path.join(work, "program.py")
    os.makedirs(tmp, mode=0o700, exist_ok=True)
    with open(program, "w", encoding="utf-8") as handle:
        handle.write(job["program"])
    os.chmod(work, 0o700)
    if uid is not None:
        for path in (work, tmp, program):
            os.chown(path, uid, uid)


def start_program(job: dict[str, object], libc: object, requests_fd: int, answers_fd: int) -> None:
    """In the forked child: limits, no new privileges, the sandbox uid, then exec the server
    with the requests on fd 3, the answers on fd 4 and nothing on stdin."""
    os.setpgid(0, 0)
    for name, (soft, hard) in job["limits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # setuid binaries cannot raise it back
    uid = job["uid"]
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    # Move the pipes above the target numbers first: one of them may already sit on fd 3 or 4.
    sources = [os.open(os.devnull, os.O_RDONLY), requests_fd, answers_fd]
    sources = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in sources]
    for source, target in zip(sources, (0, wire.REQUESTS_FD, wire.ANSWERS_FD), strict=True):
        os.dup2(source, target)  # dup2 makes the copy inheritable; the originals are not
    os.chdir(job["workdir"])
    python = job["python"]
    os.execve(python, [python, "-I", "-c", job["server_script"], "program.py"], job["env"])


def ended_by_itself(pid: int) -> int | None:
    """The program's exit status if it has already ended (128 + n for signal n), else None."""
    try:
        reaped, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if reaped != pid:
        return None
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def descendants() -> list[int]:
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


def reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def kill_everything(pid: int) -> None:
    """Kill the program's process group, then sweep its descendants until none is left (a fork
    bomb forks while we kill)."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for _ in range(1000):
        reap()
        left = descendants()
        if not left:
            return
        for child in left:
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
        time.sleep(0.001)
