"""Which isolation this machine can give a program and its judge: uid change, namespaces,
interpreter.

:func:`choose_isolation` tries the strongest setting first and keeps the first one under which
a probe program runs; :func:`missing_protections` says, in words, what a setting lacks;
:func:`folders_to_reveal` finds the folders the sandbox uids could not enter on the way to the
interpreter and its packages (a pyenv under a ``/root`` of mode 0700), which the launcher then
makes reachable, read-only, inside the namespaces only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

SANDBOX_UIDS = tuple(range(2_000_000_000, 2_000_000_064))
"""Unused uids (no passwd entry, owning no file), two per concurrent run (the program's and the
judge's); as root only."""

NOBODY_UIDS = (65534,)
"""The fallback when the high uids are not mapped (e.g. a rootless container): ``nobody``, one
uid for all, so runs then go one at a time and the judge shares the program's uid (a missing
protection, reported)."""

MAX_PROCESSES = 32
"""``RLIMIT_NPROC`` of a sandbox uid: processes and threads one program may have at once."""

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
UNSHARE_FLAGS = ("--net", "--pid", "--ipc", "--fork", "--kill-child", "--mount-proc")


@dataclass(frozen=True, slots=True)
class Isolation:
    """How programs are isolated on this machine."""

    python: str
    """The interpreter that runs the program (readable and executable by the sandbox uid)."""
    unshare: str | None
    """Path of ``unshare`` when network, PID and mount namespaces are used, else None."""
    uids: tuple[int, ...] | None
    """Uids the program and the judge run as, two per concurrent run; None: the trainer's own
    user."""
    reveal: tuple[tuple[str, str], ...] = ()
    """``(folder, entry)`` pairs the launcher makes reachable inside the namespaces, outermost
    first (:func:`folders_to_reveal`)."""

    @property
    def namespaces(self) -> bool:
        """Private network, PID, IPC and mount namespaces (and so private ``/tmp`` folders and a
        read-only host)."""
        return self.unshare is not None

    @property
    def separate_judge_uid(self) -> bool:
        """Whether the judge runs as a uid other than the program's."""
        return self.uids is not None and len(set(self.uids)) >= 2


def choose_isolation(works: Callable[[Isolation], bool]) -> Isolation:
    """The strongest isolation under which ``works`` (a probe run) succeeds.

    As root: a uid change to :data:`SANDBOX_UIDS`, else to ``nobody``, with the first
    interpreter that uid can run, each with namespaces when ``unshare`` works, else without.
    Without root, or when nothing else works: the trainer's own user and interpreter.
    """
    unisolated = Isolation(sys.executable, None, None)
    if os.geteuid() != 0:
        return unisolated
    # A uid change comes first: without it a root program could rewrite the project and the
    # checkpoints, which is worse than reaching the network.
    unshares = list(dict.fromkeys([working_unshare(), None]))
    for uids in (SANDBOX_UIDS, NOBODY_UIDS):
        for unshare in unshares:
            for python in interpreters():
                reveal = folders_to_reveal(needed_paths(python)) if unshare else ()
                candidate = Isolation(python, unshare, uids, reveal)
                if works(candidate):
                    return candidate
    for unshare in unshares:
        candidate = Isolation(sys.executable, unshare, None)
        if unshare is not None and works(candidate):
            return candidate
    return unisolated


def missing_protections(isolation: Isolation) -> list[str]:
    """One phrase per protection ``isolation`` lacks, for errors, warnings and run summaries."""
    missing = []
    if not isolation.namespaces:
        missing.append(
            "no network, PID, IPC or mount namespaces (needs root and a working `unshare`): the "
            "program can reach the network, write to the shared /tmp and leave files and "
            "shared memory behind for later runs"
        )
    if isolation.uids is None:
        missing.append(
            "no uid change (needs root): the program runs as the trainer's user, so it can "
            "write what the trainer can and signal or inspect the trainer's processes, the "
            "judge among them"
        )
    elif not isolation.separate_judge_uid:
        missing.append(
            "no second sandbox uid (only `nobody` works here): the judge runs as the "
            "program's uid, so the program could signal or inspect it"
        )
    return missing


def working_unshare() -> str | None:
    """Path of ``unshare`` if it can make the namespaces here (root, and a kernel that lets it)."""
    unshare = shutil.which("unshare", path=SAFE_PATH)
    if unshare is None:
        return None
    try:
        probe = subprocess.run(
            [unshare, *UNSHARE_FLAGS, "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            env={"PATH": SAFE_PATH},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return unshare if probe.returncode == 0 else None


def interpreters() -> list[str]:
    """Interpreters to try for the sandbox uid: ours first, then the system's (ours may live
    where that uid cannot read, e.g. under ``/root``)."""
    candidates = [sys.executable, os.path.realpath(sys.executable)]
    candidates += [shutil.which(name, path=SAFE_PATH) or "" for name in ("python3", "python")]
    unique = dict.fromkeys(path for path in candidates if path and os.path.isfile(path))
    return list(unique)


def needed_paths(python: str) -> list[str]:
    """The folders the interpreter ``python`` and the packages beside it live in: what the
    sandbox uids must be able to enter to run it (the trainer's own interpreter: its prefix,
    its base prefix and every existing folder of its ``sys.path``)."""
    paths = [os.path.dirname(python), os.path.dirname(os.path.realpath(python))]
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        paths += [sys.prefix, sys.base_prefix, sys.exec_prefix]
        paths += [entry for entry in sys.path if entry and os.path.isdir(entry)]
    return list(dict.fromkeys(os.path.realpath(path) for path in paths))


def folders_to_reveal(paths: list[str]) -> tuple[tuple[str, str], ...]:
    """``(folder, entry)`` for every folder on the way to ``paths`` that other users cannot
    enter (no ``o+x``), with the entry below it that leads on, outermost first."""
    found: dict[tuple[str, str], None] = {}
    for path in paths:
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts)):
            folder = "/" + "/".join(parts[:depth])
            try:
                mode = os.stat(folder).st_mode
            except OSError:
                break
            if not mode & 0o001:
                found[(folder, parts[depth])] = None
    return tuple(sorted(found, key=lambda pair: pair[0].count("/") + (pair[0] != "/")))
