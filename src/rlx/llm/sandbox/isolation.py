"""Which isolation this machine can give a program: uid change, namespaces, interpreter.

:func:`choose_isolation` tries the strongest setting first and keeps the first one under which
a probe program runs; :func:`missing_protections` says, in words, what a setting lacks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

SANDBOX_UIDS = tuple(range(2_000_000_000, 2_000_000_064))
"""Unused uids (no passwd entry, owning no file) for concurrent runs, one each; as root only."""

NOBODY_UIDS = (65534,)
"""The fallback when the high uids are not mapped (e.g. a rootless container): ``nobody``, one
uid for all, so runs then go one at a time (concurrent runs must not share a uid: the clean-up
after one would kill the other)."""

MAX_PROCESSES = 32
"""``RLIMIT_NPROC`` of a sandbox uid: processes and threads one program may have at once."""

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
UNSHARE_FLAGS = ("--net", "--pid", "--fork", "--kill-child", "--mount-proc")


@dataclass(frozen=True, slots=True)
class Isolation:
    """How programs are isolated on this machine."""

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
                candidate = Isolation(python, unshare, uids)
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
            "no network, PID or mount namespaces (needs root and a working `unshare`): the "
            "program can reach the network and write to the shared /tmp"
        )
    if isolation.uids is None:
        missing.append(
            "no uid change (needs root): the program runs as the trainer's user, so it can "
            "write what the trainer can and signal or inspect the trainer's processes, the "
            "judge among them"
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
