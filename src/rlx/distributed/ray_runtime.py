"""Ray's lifetime for one run: join a cluster, or start a small local instance and stop it.

``--ray-address ADDR`` joins an existing cluster (``HOST:PORT`` of the head node, or
``ray://HOST:PORT`` for Ray Client, or ``auto`` for the one ``ray start`` began on this
machine). The address is first checked with a plain TCP connect of a few seconds, so a wrong or
unreachable address fails fast with one clear sentence instead of Ray's long retries. Without
an address rlx starts a local instance for the run, with no dashboard, a small object store and
no usage reporting, and shuts it down at the end. A Ray instance that the caller already
started (``ray.init()`` before ``rlx.train``) is used as it is and left running.

Ray is an optional dependency (extra ``ray``): it is imported only when a run asks for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from rlx.core.checks import parse_address
from rlx.errors import ConfigError

CONNECT_TIMEOUT_S = 3.0
"""How long the TCP check of ``--ray-address`` waits for the head node to answer."""
LOCAL_OBJECT_STORE_BYTES = 200 * 1024**2
"""Object store of a local instance: fragments and weights are small, memory is not."""
RAY_HINT = "install it with pip install 'rlx[ray]'"


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """A TCP connect to the address's host and port; raises :class:`ConfigError` in at most
    ``timeout`` seconds when nothing answers there."""
    target = parse_address(address)
    if target is None:
        return
    t0 = time.monotonic()
    try:
        with socket.create_connection(target, timeout=timeout):
            pass
    except OSError as exc:
        waited = time.monotonic() - t0
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"cannot reach the Ray cluster at ray_address={address!r} ({reason} after "
            f"{waited:.1f} s); check the address and that the head node runs (ray start "
            "--head), or leave --ray-address out to start a local Ray instance."
        ) from exc


# ---------------------------------------------------------------------------- the session
def require_ray(what: str) -> ModuleType:
    """The ``ray`` module, or a :class:`ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"{what} needs Ray, which is not installed; {RAY_HINT}.") from exc
    return ray


class RaySession:
    """Ray for the length of a run: ``with RaySession(address, num_cpus): ...``.

    Args:
        address: a cluster to join (see the module docstring); None starts a local instance.
        num_cpus: logical CPUs of a local instance (at least the machine's count, so that
            more workers than cores can still be placed on one machine).
        what: names the run in error messages, e.g. ``"runners=2"``.
    """

    def __init__(self, address: str | None, num_cpus: int, what: str) -> None:
        self.address, self.num_cpus, self.what = address, num_cpus, what
        self.owned = False
        self.ray: ModuleType | None = None

    def start(self) -> RaySession:
        if self.address is not None:
            check_reachable(self.address)
        ray = self.ray = require_ray(self.what)
        if ray.is_initialized():  # the caller's own Ray: use it, leave it running
            return self
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        options = (
            local_options(self.num_cpus)
            if self.address is None
            else {"address": self.address, "log_to_driver": False, "configure_logging": False}
        )
        try:
            with _keeping_sigterm_handler():
                ray.init(**options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = "a local Ray instance" if self.address is None else repr(self.address)
            raise ConfigError(f"{self.what}: could not start Ray at {where}: {exc}") from exc
        self.owned = True
        return self

    def close(self) -> None:
        if self.owned and self.ray is not None:
            self.ray.shutdown()
        self.owned = False

    def __enter__(self) -> RaySession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def _keeping_sigterm_handler() -> Iterator[None]:
    """``ray.init`` installs a SIGTERM handler that exits at once; the run's own one (save a
    checkpoint, then stop) is put back after it."""
    main = threading.current_thread() is threading.main_thread()
    saved = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if saved is not None:
            signal.signal(signal.SIGTERM, saved)


def local_options(num_cpus: int) -> dict[str, Any]:
    """``ray.init`` settings of a local instance (``address="local"``: never the cluster that
    ``RAY_ADDRESS`` names): loopback address, no dashboard, a small object store."""
    return {
        "address": "local",
        "num_cpus": max(num_cpus, os.cpu_count() or 1),
        "include_dashboard": False,
        "object_store_memory": LOCAL_OBJECT_STORE_BYTES,
        "log_to_driver": False,
        "configure_logging": False,
        "_node_ip_address": "127.0.0.1",
    }
