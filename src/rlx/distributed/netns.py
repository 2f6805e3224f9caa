"""Keeping Ray off the network when it runs on one machine for tests and benchmarks.

Ray's processes listen on every interface even when told to use 127.0.0.1, and may connect
to the machine's own non-loopback address. Tests and benchmarks that start Ray therefore run
inside a private network namespace whose only interface is the loopback: as root,
``unshare --net sh -c 'ip link set lo up && CMD'``. :func:`only_loopback` says whether this
process is in such a namespace; :func:`isolated` wraps a command to run in a fresh one.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
from collections.abc import Sequence


def only_loopback() -> bool:
    """True when this process's network namespace has no interface but ``lo``.

    Asks the kernel for the interfaces of the calling process (``if_nameindex``), not
    ``/sys/class/net``, which shows those of the namespace that mounted ``/sys``.
    """
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return False
    return names == ["lo"]


def why_not_isolatable() -> str | None:
    """None when :func:`isolated` can run a command here, else the reason in a few words."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "a private network namespace (unshare --net) needs root"
    missing = [tool for tool in ("unshare", "ip") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found (util-linux, iproute2)"
    if subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode != 0:
        return "this machine refuses a new network namespace (unshare --net failed)"
    return None


def isolated(argv: Sequence[str]) -> list[str]:
    """``argv`` as a command that runs in a new network namespace with only ``lo`` up."""
    command = " ".join(shlex.quote(arg) for arg in argv)
    return ["unshare", "--net", "sh", "-c", f"ip link set lo up && exec {command}"]
