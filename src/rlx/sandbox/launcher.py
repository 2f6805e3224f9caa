"""The bootstrap of a room: the first code that runs in the program's, the judge's or a
stdin/stdout case's room, before anything untrusted.

The trainer starts each room as ``[nsenter ...] [bwrap ...] python -I -S -c BOOTSTRAP FD``
(:mod:`rlx.sandbox.process`); the bootstrap reads one frame from descriptor ``FD``: the
sandbox modules this room needs (compiled once per trainer process) and its job. It loads the
modules as a stand-in package (no import of the installed rlx), then :func:`main`:

1. puts the room's pipes at the numbers the protocol fixes (the program: 3 = requests from the
   judge, 4 = answers to it; the judge: 3 = requests, 4 = answers, 5 = the verdict) and closes
   every other inherited descriptor;
2. makes its working folder (inside the room's own tmpfs ``/tmp`` with bubblewrap), writes
   ``program.py`` there for tracebacks, and enters it;
3. sets the room's limits (``RLIMIT_AS``, ``CPU``, ``FSIZE``, ``NOFILE``, ``NPROC``, ``CORE``),
   so they hold before the program's first line;
4. runs the role: :func:`rlx.sandbox.server.main` for the program,
   :func:`rlx.sandbox.judge.main` for the judge, or the program as a script
   (``__name__ == "__main__"``) for a stdin/stdout case.

The comparison of a case's output with the expected one (:func:`same_output`) runs in the
trainer, outside the program's reach.

Standard library only, and no import of rlx at module level (see :mod:`rlx.sandbox.wire`).
"""

from __future__ import annotations

import os
import resource
import sys

_WORKDIR = "/tmp/work"  # inside the room's own /tmp (bubblewrap)
_PR_SET_NO_NEW_PRIVS = 38


def main(job: dict) -> None:
    """Set the room up (descriptors, folder, limits), then run its role; never returns."""
    role = job["role"]
    try:
        enter(job)
    except BaseException as error:
        os.write(2, f"rlx sandbox: the {role} failed to start: {error!r}\n".encode())
        os._exit(127)
    if role == "program":
        from rlx.sandbox import server

        server.main(job["program"])
    elif role == "judge":
        from rlx.sandbox import judge

        judge.main(job["payload"], job["seconds"])
    else:
        run_script(job["program"])
        return  # the interpreter exits as a script's does (status 0, or the exception's)
    os._exit(127)


def enter(job: dict) -> None:
    """Descriptors, working folder, limits, packages: the room before the untrusted code."""
    fds = {int(target): source for target, source in job["fds"].items()}
    copies = {target: _dup_high(source) for target, source in fds.items()}
    for target, copy in copies.items():
        os.dup2(copy, target)  # dup2 makes the copy inheritable; the originals are not
    os.closerange(max(fds, default=2) + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    workdir = job["workdir"] or _WORKDIR
    for folder in (workdir, os.path.join(workdir, "tmp")):
        os.makedirs(folder, mode=0o700, exist_ok=True)
    if "program" in job:  # the program's own source, for its tracebacks
        with open(os.path.join(workdir, "program.py"), "w", encoding="utf-8") as handle:
            handle.write(job["program"])
    os.chdir(workdir)
    os.environ.pop("PWD", None)  # bubblewrap's, of its own folder; the room's environment is fixed
    if not job["bubblewrap"]:
        # bubblewrap sets no_new_privs itself; without it, setuid binaries must not raise
        # the program's privileges either
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    for name, (soft, hard) in job["limits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    sys.path.extend(entry for entry in job["packages"] if entry not in sys.path)
    sys.argv[:] = ["program.py" if job["role"] != "judge" else "judge"]
    import site  # with -S only its helpers: exit() and quit(), as a plain interpreter has

    site.setquit()


def _dup_high(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64)


def run_script(source: str) -> None:
    """Run ``source`` as the interpreter runs a script: a fresh ``__main__`` module."""
    import types

    module = types.ModuleType("__main__")
    module.__file__ = "program.py"
    sys.modules["__main__"] = module
    exec(compile(source, "program.py", "exec"), module.__dict__)


def same_output(actual: str, expected: str) -> bool:
    """The usual judges' rule: equal line by line after trailing whitespace is cut from each
    line and trailing empty lines are dropped (so ``\\r\\n`` and a missing final newline do not
    matter); inner whitespace and letter case do."""

    def lines(text: str) -> list[str]:
        rows = [row.rstrip() for row in text.replace("\r\n", "\n").split("\n")]
        while rows and not rows[-1]:
            rows.pop()
        return rows

    return lines(actual) == lines(expected)
