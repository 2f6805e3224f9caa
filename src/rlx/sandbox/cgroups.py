"""A control group for each room, where this machine lets rlx make one: memory and processes
counted for the room as a whole, not per process.

``RLIMIT_AS`` bounds one process's address space; a room of many processes (a program that
forks) could hold that many times ``memory_mb``, and memory that is never mapped (tmpfs files,
socket buffers) is not counted at all. A memory control group counts every page a room's
processes charge, tmpfs pages included, and its ``pids`` sibling every task, so the kernel
holds the room to one budget.

Where: as root, under the trainer's own cgroup of the v1 ``memory`` and ``pids`` hierarchies
(``/sys/fs/cgroup/memory``, ``/sys/fs/cgroup/pids``), a folder per room, removed when the room
is gone. The room joins before its first process starts: its command is wrapped in a shell
that writes its own pid into the groups and then ``exec``s bubblewrap (:meth:`RoomCgroup.wrap`),
so every process the room makes is born inside. A unified (v2) hierarchy with the ``memory``
controller delegated to the trainer is not used yet: none of the machines rlx is tested on
offers one to test it against. Without a cgroup (no root, or no writable hierarchy) the limits
are the per-process ones of :mod:`rlx.sandbox.process` and what :mod:`rlx.sandbox.isolation`
refuses; :func:`available` says which holds and ``sandbox_info`` reports it.

Written here rather than taken from a library: the cgroup file interface is a handful of
writes, and no maintained Python package creates per-process-tree groups without systemd
(``systemd-run --scope``), which containers and CI machines usually lack.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading

ROOT = "/sys/fs/cgroup"
CONTROLLERS = ("memory", "pids")
_COUNTER = itertools.count()
_LOCK = threading.Lock()
_BUSY: list[str] = []  # folders whose last task was not yet reaped when their room closed
_JOIN = (
    'for f in "$@"; do case "$f" in --) shift; break;; esac; echo $$ > "$f"; shift; done; exec "$@"'
)


@functools.cache
def available() -> bool:
    """Whether rooms get a cgroup here: root, and a writable folder of the trainer's own cgroup
    in both v1 hierarchies (memory and pids)."""
    if os.geteuid() != 0:
        return False
    return all(_own_folder(controller) is not None for controller in CONTROLLERS)


def _own_folder(controller: str) -> str | None:
    """The folder of this process's cgroup in the v1 hierarchy of ``controller``, if writable."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            folder = os.path.join(ROOT, controller, path.lstrip("/"))
            if os.path.isfile(os.path.join(folder, "cgroup.procs")) and os.access(folder, os.W_OK):
                return folder
    return None


class RoomCgroup:
    """One room's groups: made with its limits, joined by the room's first process, removed
    when the room is gone."""

    def __init__(self, memory_bytes: int, tasks: int, uid: int | None) -> None:
        with _LOCK:
            name = f"rlx-room-{os.getpid()}-{next(_COUNTER)}"
            busy, _BUSY[:] = list(_BUSY), []
        _remove_all(busy)
        self.folders: list[str] = []
        try:
            for controller in CONTROLLERS:
                parent = _own_folder(controller)
                if parent is None:
                    raise OSError(f"no writable {controller} cgroup")
                folder = os.path.join(parent, name)
                os.mkdir(folder, 0o755)
                self.folders.append(folder)
                if controller == "memory":
                    _write(folder, "memory.limit_in_bytes", memory_bytes)
                    with contextlib.suppress(OSError):  # no swap accounting: nothing to cap
                        _write(folder, "memory.memsw.limit_in_bytes", memory_bytes)
                else:
                    _write(folder, "pids.max", tasks)
                if uid is not None:  # the wrapper runs as the room's uid when it is not root
                    os.chown(os.path.join(folder, "cgroup.procs"), uid, -1)
        except BaseException:
            self.remove()
            raise

    def wrap(self, command: list[str]) -> list[str]:
        """``command`` run by a shell that first moves itself into the room's groups."""
        procs = [os.path.join(folder, "cgroup.procs") for folder in self.folders]
        return ["/bin/sh", "-c", _JOIN, "sh", *procs, "--", *command]

    def remove(self) -> None:
        """Remove the groups once their processes are gone. A room's namespace init may still
        await its reaping by the host's init for a moment: such a folder is removed by the next
        room's start."""
        with _LOCK:
            _BUSY.extend(_remove_all(self.folders))
        self.folders = []


def _remove_all(folders: list[str]) -> list[str]:
    """Remove ``folders`` (innermost first); the ones still busy."""
    busy = []
    for folder in reversed(folders):
        for attempt in range(20):
            try:
                os.rmdir(folder)
                break
            except FileNotFoundError:
                break
            except OSError:  # the kernel is still releasing the last task
                if attempt == 19:
                    busy.append(folder)
                else:
                    threading.Event().wait(0.0005)
    return busy


def _write(folder: str, name: str, value: int) -> None:
    with open(os.path.join(folder, name), "w", encoding="ascii") as handle:
        handle.write(str(value))
