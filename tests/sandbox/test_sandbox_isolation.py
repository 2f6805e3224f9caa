"""The rooms' isolation (bubblewrap, the seccomp filter, the limits), tested as an attacker would.

Each hostile program sits beside an honest one, and each verdict is asserted. A hostile program
usually defines ``add`` correctly only when its attack worked, so a working attack would score
1; it must score 0 (or report, through a plain value the tests check, that it was refused).
Where a protection is not available here the test skips, and with ``RLX_REQUIRE_ISOLATION=1``
(CI) a skip is a failure.
"""

from __future__ import annotations

import errno
import os
import platform
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from rlx.sandbox import current_isolation, run_sandboxed, run_stdio
from rlx.sandbox.isolation import (
    SANDBOX_UIDS,
    Isolation,
    blocked_folders,
    missing_protections,
)
from tests.sandbox.test_sandbox import processes_with

TIMEOUT_S = 10.0
ISOLATION = current_isolation()
REQUIRED = os.environ.get("RLX_REQUIRE_ISOLATION") == "1"
ADD_TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"
HONEST_ADD = "def add(a, b):\n    return a + b\n"

# system call numbers for the ctypes attacks
SYSCALLS = {
    "x86_64": {"add_key": 248, "request_key": 249, "keyctl": 250, "ptrace": 101, "unshare": 272,
               "mount": 165, "shmget": 29, "clone": 56, "clone3": 435, "memfd_create": 319,
               "msgget": 68},
    "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219, "ptrace": 117, "unshare": 97,
                "mount": 40, "shmget": 194, "clone": 220, "clone3": 435, "memfd_create": 279,
                "msgget": 186},
}  # fmt: skip
NUMBERS = SYSCALLS.get(platform.machine(), {})


def need(condition: bool, reason: str) -> None:
    """Skip unless ``condition``; under ``RLX_REQUIRE_ISOLATION=1`` fail instead."""
    if condition:
        return
    if REQUIRED:
        pytest.fail(f"RLX_REQUIRE_ISOLATION=1 but {reason}")
    pytest.skip(reason)


def need_rooms() -> None:
    need(
        ISOLATION.namespaces,
        "no bubblewrap rooms here: " + "; ".join(missing_protections(ISOLATION)),
    )


def need_seccomp() -> None:
    need_rooms()
    need(ISOLATION.seccomp, "no seccomp filter here (libseccomp or pyseccomp missing)")
    need(bool(NUMBERS), f"no system call numbers for {platform.machine()}")


def syscall_program(calls: dict[str, str]) -> str:
    """A program that makes raw system calls with ctypes and binds ``ERRNOS[name]`` to the
    errno each got (0: it succeeded)."""
    lines = ["import ctypes, os", "libc = ctypes.CDLL(None, use_errno=True)",
             "libc.syscall.restype = ctypes.c_long", "ERRNOS = {}"]  # fmt: skip
    for name, args in calls.items():
        lines += [
            "ctypes.set_errno(0)",
            f"result = libc.syscall({NUMBERS[name.split(':')[0]]}, {args})",
            f"ERRNOS[{name!r}] = ctypes.get_errno() if result == -1 else 0",
        ]
    return "\n".join(lines) + "\n"


def zombie_children() -> list[int]:
    """Children of this process that are zombies (exited, never reaped)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] == b"Z" and int(fields[1]) == os.getpid():
                found.append(int(entry))
    return found


# --- honest programs still pass -----------------------------------------------------------------


def test_an_honest_program_passes_and_its_tests_may_import_installed_packages():
    tests = "import pytest\n" + ADD_TESTS + "assert add(0.5, 0.25) == pytest.approx(0.75)\n"
    result = run_sandboxed(HONEST_ADD, tests, timeout_s=TIMEOUT_S)
    assert result.passed, (result.failures, result.output)
    wrong = run_sandboxed("def add(a, b):\n    return a * b\n", tests, timeout_s=TIMEOUT_S)
    assert not wrong.passed


def test_setup_code_goes_to_the_judge_only():
    """``setup`` is carried to the judge's payload; the program's room never holds it."""
    marker = f"SETUP_{uuid.uuid4().hex}"
    program = (
        "import gc\n"
        f"SEEN = any({marker!r} in repr(o) for o in gc.get_objects() if isinstance(o, str))\n"
        + HONEST_ADD
    )
    result = run_sandboxed(
        program, "assert SEEN is False\n" + ADD_TESTS, setup=f"# {marker}\n", timeout_s=TIMEOUT_S
    )
    assert result.passed, (result.failures, result.output)


# --- the kernel keyring -------------------------------------------------------------------------

KEY_SPEC_SESSION_KEYRING = -3
KEYCTL_GET_KEYRING_ID, KEYCTL_DESCRIBE, KEYCTL_SEARCH = 0, 6, 10


def test_keyring_calls_are_refused_and_leave_no_state_between_runs():
    need_seccomp()
    marker = f"rlx-{uuid.uuid4().hex}".encode()
    plant = syscall_program({
        "add_key": f"b'user', {marker!r}, b'secret', 6, {KEY_SPEC_SESSION_KEYRING}",
        "keyctl": f"{KEYCTL_GET_KEYRING_ID}, {KEY_SPEC_SESSION_KEYRING}, 1",
    })  # fmt: skip
    look = syscall_program({
        "request_key": f"b'user', {marker!r}, None, 0",
        "keyctl": f"{KEYCTL_SEARCH}, {KEY_SPEC_SESSION_KEYRING}, b'user', {marker!r}, 0",
    })  # fmt: skip
    tests = f"assert ERRNOS == {{k: {errno.EPERM} for k in ERRNOS}}, ERRNOS\n"
    for program in (plant, look):
        result = run_sandboxed(program, tests, timeout_s=TIMEOUT_S)
        assert result.passed, (result.failures, result.output)
    # the hostile reading: a program that defines add only if it found the planted key
    hostile = look + "if ERRNOS['keyctl'] == 0:\n    " + HONEST_ADD.replace("\n", "\n    ")
    assert not run_sandboxed(hostile, ADD_TESTS, timeout_s=TIMEOUT_S).passed
    assert run_sandboxed(look + HONEST_ADD, ADD_TESTS, timeout_s=TIMEOUT_S).passed


def test_the_trainers_session_keyring_is_unreadable():
    need_seccomp()
    program = syscall_program({
        "keyctl:describe": f"{KEYCTL_DESCRIBE}, {KEY_SPEC_SESSION_KEYRING}, None, 0",
        "keyctl:id": f"{KEYCTL_GET_KEYRING_ID}, {KEY_SPEC_SESSION_KEYRING}, 0",
    })  # fmt: skip
    result = run_sandboxed(
        program, f"assert set(ERRNOS.values()) == {{{errno.EPERM}}}, ERRNOS\n", timeout_s=TIMEOUT_S
    )
    assert result.passed, (result.failures, result.output)


# --- privileged calls ---------------------------------------------------------------------------

CLONE_NEWUSER, SIGCHLD = 0x10000000, 17


def test_ptrace_unshare_mount_and_namespace_clones_are_refused():
    need_seccomp()
    program = syscall_program({
        "ptrace": "16, 1, 0, 0",  # PTRACE_ATTACH to the room's init
        "unshare": f"{CLONE_NEWUSER}",
        "mount": "b'none', b'/tmp', b'tmpfs', 0, None",
        "clone": f"{CLONE_NEWUSER | SIGCHLD}, 0, 0, 0, 0",
        "clone3": "0, 0",
    })  # fmt: skip
    tests = (
        f"assert ERRNOS.pop('clone3') == {errno.ENOSYS}\n"
        f"assert set(ERRNOS.values()) == {{{errno.EPERM}}}, ERRNOS\n"
    )
    result = run_sandboxed(program, tests, timeout_s=TIMEOUT_S)
    assert result.passed, (result.failures, result.output)
    # the honest neighbour: threads and subprocesses (plain clone) still work
    honest = (
        "import subprocess, sys, threading\n"
        "threading.Thread(target=print).start()\n"
        "OUT = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True).stdout\n"
    )
    assert run_sandboxed(honest, "assert OUT == b'42\\n'\n", timeout_s=TIMEOUT_S).passed


# --- memory RLIMIT_AS does not count ------------------------------------------------------------


def test_memfd_of_400_mib_with_64_mib_of_memory_fails():
    """The regression: memfd pages are not address space, so RLIMIT_AS never saw them."""
    need_rooms()
    hold = (
        "import os\n"
        "fd = os.memfd_create('hoard')\n"
        "for _ in range(400):\n"
        "    os.write(fd, b'x' * (1 << 20))\n"
        "HELD_MB = os.fstat(fd).st_size >> 20\n"
    )
    result = run_sandboxed(hold, "assert HELD_MB == 400\n", memory_mb=64, timeout_s=TIMEOUT_S)
    assert not result.passed
    assert "PermissionError" in result.output or "OSError" in result.output, result.output


@pytest.mark.parametrize("folder", ["/dev/shm", "/tmp", "/var/tmp"])
def test_tmpfs_hoards_stop_at_the_size_cap(folder):
    need_rooms()
    hoard = (
        "import os\n"
        "HELD = 0\n"
        f"with open(os.path.join({folder!r}, 'hoard'), 'wb') as handle:\n"
        "    try:\n"
        "        for _ in range(400):\n"
        "            handle.write(b'x' * (1 << 20))\n"
        "            handle.flush()\n"
        "            HELD += 1\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result = run_sandboxed(hoard, "assert HELD < 100, HELD\n", memory_mb=64, timeout_s=TIMEOUT_S)
    assert result.passed, (result.failures, result.output)


def test_sysv_shared_memory_is_refused():
    need_seccomp()
    program = syscall_program({"shmget": f"0, {400 << 20}, 0o1600"})  # IPC_PRIVATE | IPC_CREAT
    result = run_sandboxed(program, f"assert ERRNOS == {{'shmget': {errno.EPERM}}}\n",
                           memory_mb=64, timeout_s=TIMEOUT_S)  # fmt: skip
    assert result.passed, (result.failures, result.output)


def test_an_honest_program_may_use_a_little_tmp():
    need_rooms()
    honest = (
        "open('/tmp/data', 'wb').write(b'x' * (1 << 20))\n"
        "SIZE = len(open('/tmp/data', 'rb').read())\n"
    )
    assert run_sandboxed(honest, "assert SIZE == 1 << 20\n", timeout_s=TIMEOUT_S).passed


# --- host sockets and the network ---------------------------------------------------------------


def _unix_server(path: str) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    return server


def connect_or_not(address: str) -> str:
    """A program that defines ``add`` only if it reaches the Unix socket ``address``."""
    return (
        "import socket\n"
        "client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "client.settimeout(2)\n"
        f"client.connect({address!r})\n" + HONEST_ADD
    )


def test_host_unix_sockets_are_unreachable(tmp_path):
    need_rooms()
    folder = tmp_path / "sockets"
    folder.mkdir()
    folder.chmod(0o777)
    paths = [str(folder / "host.sock")]
    run_dir = Path("/run")
    if os.access(run_dir, os.W_OK):
        paths.append(str(run_dir / f"rlx-test-{uuid.uuid4().hex[:8]}.sock"))
    abstract = f"\0rlx-test-{uuid.uuid4().hex}"
    servers = [_unix_server(path) for path in paths] + [_unix_server(abstract)]
    try:
        for path in paths:
            os.chmod(path, 0o777)
        # our own client reaches each socket: the attack would work without the rooms
        for address in [*paths, abstract]:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(address)
        for address in [*paths, abstract]:
            result = run_sandboxed(connect_or_not(address), ADD_TESTS, timeout_s=TIMEOUT_S)
            assert not result.passed, address
            assert "Error" in result.output
    finally:
        for server in servers:
            server.close()
        for path in paths:
            Path(path).unlink(missing_ok=True)
    assert run_sandboxed(HONEST_ADD, ADD_TESTS, timeout_s=TIMEOUT_S).passed


def test_no_network_interface_but_loopback():
    need_rooms()
    program = "import socket\nNAMES = [name for _, name in socket.if_nameindex()]\n"
    result = run_sandboxed(program, "assert NAMES == ['lo']\n", timeout_s=TIMEOUT_S)
    assert result.passed, (result.failures, result.output)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        hostile = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 1)\n" + HONEST_ADD
        )
        assert not run_sandboxed(hostile, ADD_TESTS, timeout_s=TIMEOUT_S).passed


# --- output pipes of their own ------------------------------------------------------------------


def test_the_program_cannot_read_what_the_judge_printed():
    marker = f"JUDGE_PRINTED_{uuid.uuid4().hex}"
    program = (
        "import os\n"
        "def peek():\n"
        "    found = b''\n"
        "    for fd in (1, 2):\n"
        "        try:\n"
        "            found += os.pread(fd, 1 << 20, 0)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return found.decode(errors='replace')\n"
    )
    tests = f"print({marker!r}, flush=True)\nassert {marker!r} not in peek()\n"
    result = run_sandboxed(program, tests, timeout_s=TIMEOUT_S)
    need(ISOLATION.namespaces or ISOLATION.uids is not None, "no rooms")
    assert result.passed, (result.failures, result.output)
    assert marker in result.output  # the judge did print it; the trainer read it


# --- processes, uids, files ---------------------------------------------------------------------


def test_a_process_left_by_a_stdio_case_does_not_live_into_the_next():
    need_rooms()
    marker = f"rlx-stdio-leftover-{uuid.uuid4().hex}"
    sleeper = "import time\ntime.sleep(60)\n"
    program = (
        "import os, subprocess, sys, time\n"
        "if input() == 'first':\n"
        f"    subprocess.Popen([sys.executable, '-c', {sleeper!r}, {marker!r}],\n"
        "                     start_new_session=True, stdout=subprocess.DEVNULL)\n"
        "else:\n"
        "    time.sleep(2.0)\n"
        "print('ok')\n"
    )
    seen: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if processes_with(marker):
                seen.append(time.monotonic())
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run_stdio(
            program, [("first\n", "ok\n"), ("second\n", "ok\n")], timeout_s=TIMEOUT_S
        )
        end = time.monotonic()
    finally:
        done.set()
        watcher.join()
    assert result.passed, (result.failures, result.output)
    assert processes_with(marker) == []
    if seen:  # it lived at most through its own case, not through the 2 s of the second
        assert end - seen[-1] > 1.0


def test_no_zombie_and_no_leftover_after_a_timeout():
    need_rooms()
    marker = f"rlx-timeout-leftover-{uuid.uuid4().hex}"
    program = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'while True: pass', {marker!r}],"
        " start_new_session=True)\n"
        "while True:\n    pass\n"
    )
    result = run_sandboxed(program, ADD_TESTS, timeout_s=1.0)
    assert result.status == "timeout"
    assert result.elapsed_s < 1.0 + 3.0
    time.sleep(0.1)
    assert processes_with(marker) == []
    assert zombie_children() == []


def test_the_program_is_never_host_root():
    """As root the rooms run as a sandbox uid, without root as the trainer's user: a process the
    program starts is seen from the host under that uid, never 0, with no capabilities."""
    need_rooms()
    marker = f"rlx-uid-probe-{uuid.uuid4().hex}"
    program = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(5)', {marker!r}])\n"
        "time.sleep(1.5)\n"
        "UID = os.getuid()\n"
        "CAPS = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')]\n"
    )
    host_uids: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in processes_with(marker):
                try:
                    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
                except OSError:
                    continue
                for line in lines:
                    if line.startswith("Uid:"):
                        host_uids.update(int(value) for value in line.split()[1:])
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run_sandboxed(
            program, "assert UID != 0 and CAPS == ['0' * 16]\n", timeout_s=TIMEOUT_S
        )
    finally:
        done.set()
        watcher.join()
    assert result.passed, (result.failures, result.output)
    assert host_uids and 0 not in host_uids, host_uids
    if os.geteuid() == 0:
        assert ISOLATION.uids is not None and host_uids <= set(ISOLATION.uids)
    else:
        assert host_uids == {os.getuid()}


def test_the_host_cannot_be_written(tmp_path):
    need_rooms()
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    targets = [open_folder / "escaped", Path(sys.prefix) / f"rlx_escape_{uuid.uuid4().hex}"]
    program = "".join(
        f"try:\n    open({str(t)!r}, 'w').write('x')\nexcept OSError:\n    pass\n" for t in targets
    )
    program += "import os\nWROTE = [os.path.exists(p) for p in %r]\n" % [str(t) for t in targets]
    program += "open('mine.txt', 'w').write('fine')\nMINE = open('mine.txt').read()\n"
    result = run_sandboxed(program, "assert MINE == 'fine'\n", timeout_s=TIMEOUT_S)
    assert result.passed, (result.failures, result.output)
    assert not any(target.exists() for target in targets)


def test_the_room_holds_no_host_home_run_or_etc():
    """No /run, /home or /root of the host; an /etc of the room's own three files (who its
    user is, that localhost is the loopback), so honest programs asking get an answer."""
    need_rooms()
    program = (
        "import getpass, os, socket\n"
        "PRESENT = [p for p in ('/run', '/var/run', '/home', '/root/.ssh') if os.path.exists(p)]\n"
        "ETC = sorted(os.listdir('/etc'))\n"
        "USER = getpass.getuser()\n"
        "LOCALHOST = socket.gethostbyname('localhost')\n"
        "ETC_PASSWD = open('/etc/passwd').read()\n"
    )
    tests = (
        "assert PRESENT == []\n"
        "assert ETC == ['group', 'hosts', 'passwd']\n"
        "assert USER == 'sandbox' and LOCALHOST == '127.0.0.1'\n"
        "assert ETC_PASSWD.count('\\n') == 1 and 'root' not in ETC_PASSWD\n"
    )
    result = run_sandboxed(program, tests, timeout_s=TIMEOUT_S)
    assert result.passed, (result.failures, result.output)


# --- a folder the sandbox uid cannot enter ------------------------------------------------------


def test_a_folder_behind_a_0700_parent_is_revealed_to_the_sandbox_uid(tmp_path):
    """As root, an interpreter or packages under a folder of mode 0700 (a venv under /root)
    reach the rooms through the revealed mount namespace, and nothing else of that folder."""
    if os.geteuid() != 0:
        pytest.skip("the uid change, and so the reveal, is root's: without root nothing to reveal")
    need_rooms()
    private = tmp_path / "private"
    packages = private / "inner" / "site-packages"
    packages.mkdir(parents=True)
    (packages / "rlx_revealed_probe.py").write_text("VALUE = 42\n")
    (private / "secret.txt").write_text("not for the sandbox\n")
    private.chmod(0o700)
    assert blocked_folders([str(packages)], SANDBOX_UIDS[0]) == (str(packages),)
    isolation = Isolation(
        ISOLATION.python, ISOLATION.bwrap, ISOLATION.uids, ISOLATION.seccomp,
        (*ISOLATION.binds, str(packages)), (*ISOLATION.reveal, str(packages)),
    )  # fmt: skip
    program = (
        "import os, sys\n"
        f"sys.path.append({str(packages)!r})\n"
        "import rlx_revealed_probe\n"
        "VALUE = rlx_revealed_probe.VALUE\n"
        f"SECRET = os.path.exists({str(private / 'secret.txt')!r})\n"
    )
    result = run_sandboxed(program, "assert VALUE == 42 and SECRET is False\n",
                           timeout_s=TIMEOUT_S, isolation=isolation)  # fmt: skip
    assert result.passed, (result.failures, result.output)


def test_a_uid_pair_another_trainer_holds_is_not_lent():
    """As root, two trainers on one machine must not lend the same sandbox uids at once (their
    rooms would share one process budget, and without namespaces the sweep after a run would
    kill the other's processes): a pair locked elsewhere is skipped; honest and with the
    machine-wide lock in place."""
    from rlx.sandbox import process

    need_rooms()
    if ISOLATION.uids is None or len(set(ISOLATION.uids)) < 4:
        pytest.skip("uid pairs are lent as root only")
    program = "import os\nUID = os.getuid()\n"
    pairs = list(zip(ISOLATION.uids[0::2], ISOLATION.uids[1::2], strict=True))
    held = [process._lock_pair(pair) for pair in pairs]
    free = [(pair, fd) for pair, fd in zip(pairs, held, strict=True) if fd is not None]
    try:
        need(len(free) >= 2, "other processes lend nearly every sandbox uid pair now")
        # as if another trainer held every pair but one (each lock is its own open file, as
        # another process's would be): only that one may be lent now
        last, last_fd = free[-1]
        os.close(last_fd)
        result = run_sandboxed(program, f"assert UID == {last[0]}\n", timeout_s=TIMEOUT_S)
        assert result.passed, (result.failures, result.output)
    finally:
        for _, fd in free[:-1]:
            os.close(fd)


def test_socket_families_past_the_network_namespace_are_refused():
    """AF_VSOCK is not network-namespaced (the room would share the machine's vsock ports, the
    hypervisor's among them), and a path-bound AF_UNIX socket in a read-only bound folder can
    still be connected to: both refused; IPv4/IPv6 in the room's own namespace and socketpair
    (asyncio, multiprocessing) still work."""
    need_seccomp()
    program = (
        "import asyncio, errno, socket\n"
        "def opens(family):\n"
        "    try:\n"
        "        socket.socket(family, socket.SOCK_STREAM).close()\n"
        "        return 0\n"
        "    except OSError as error:\n"
        "        return error.errno\n"
        "FAMILIES = {name: opens(f) for name, f in (('unix', 1), ('vsock', 40), ('alg', 38),"
        " ('inet', 2), ('inet6', 10))}\n"
        "a, b = socket.socketpair()\n"
        "a.sendall(b'x')\n"
        "PAIR = b.recv(1)\n"
        "async def seven():\n"
        "    return 7\n"
        "LOOP = asyncio.run(seven())\n"
    )
    tests = (
        "import errno\n"
        "assert FAMILIES['unix'] == FAMILIES['vsock'] == FAMILIES['alg'] == errno.EPERM\n"
        "assert FAMILIES['inet'] == FAMILIES['inet6'] == 0\n"
        "assert PAIR == b'x' and LOOP == 7\n"
    )
    result = run_sandboxed(program, tests, timeout_s=TIMEOUT_S)
    assert result.passed, (result.failures, result.output)


def test_the_page_cache_cannot_be_probed_or_watched_between_runs():
    """Every room reads the host's /usr: evicting a page and asking whether it is cached
    (posix_fadvise, RWF_NOWAIT reads; mincore and cachestat too), or watching what is opened
    (inotify), would carry a bit from one run to the next. Each probe is refused; plain reads
    still work."""
    need_seccomp()
    program = (
        "import ctypes, errno, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "R = {}\n"
        "fd = os.open('/usr/bin/env', os.O_RDONLY)\n"
        "def probe(name, call):\n"
        "    try:\n"
        "        call()\n"
        "        R[name] = 0\n"
        "    except OSError as error:\n"
        "        R[name] = error.errno\n"
        "probe('fadvise', lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED))\n"
        "probe('nowait', lambda: os.preadv(fd, [bytearray(16)], 0, os.RWF_NOWAIT))\n"
        "ctypes.set_errno(0)\n"
        "R['inotify'] = ctypes.get_errno() if libc.inotify_init1(0) < 0 else 0\n"
        "READ = os.pread(fd, 4, 0)\n"
    )
    tests = (
        "import errno\n"
        "assert R == {'fadvise': errno.EPERM, 'nowait': errno.EPERM, 'inotify': errno.EPERM}\n"
        "assert READ == b'\\x7fELF'\n"
    )
    result = run_sandboxed(program, tests, timeout_s=TIMEOUT_S)
    assert result.passed, (result.failures, result.output)


def test_system_v_message_queues_are_refused():
    """Kernel memory RLIMIT_AS never counts: a queue of messages per call."""
    need_seccomp()
    program = syscall_program({"msgget": "0, 0o1000 | 0o600"}) if "msgget" in NUMBERS else ""
    if not program:
        pytest.skip(f"no msgget number for {platform.machine()}")
    result = run_sandboxed(program, "import errno\nassert ERRNOS['msgget'] == errno.EPERM\n",
                           timeout_s=TIMEOUT_S)  # fmt: skip
    assert result.passed, (result.failures, result.output)


def test_a_room_of_many_processes_is_held_to_one_memory_budget():
    """RLIMIT_AS bounds each process: a program forking children of 100 MiB each, with
    memory_mb=128, held that many times more. Where rooms get a cgroup, the room as a whole is
    held to its budget (memory_mb, its tmpfs mounts and a little for the interpreter): the
    children past it are killed. What is counted is what the room holds at once: the children
    alive at the end that had their 100 MiB (each reports its pid once it has). A child that
    reached its 100 MiB may be the one the kernel kills to make room for another (it picks the
    largest), so how many ever reached it says nothing of the budget. An honest program that
    forks a little still passes."""
    from rlx.sandbox import cgroups
    from rlx.sandbox.process import CGROUP_SLACK_MB, PRIVATE_TMP_MB, SMALL_TMPFS_MB

    need_rooms()
    need(cgroups.available(), "no writable memory and pids cgroups here (root and cgroup v1)")
    program = (
        "import os, time\n"
        "read, write = os.pipe()\n"
        "children = []\n"
        "for i in range(10):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        block = bytearray(100 << 20)\n"
        "        for j in range(0, len(block), 4096):\n"
        "            block[j] = 1\n"
        "        os.write(write, os.getpid().to_bytes(4, 'little'))\n"
        "        time.sleep(20)\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "time.sleep(4)\n"
        "os.set_blocking(read, False)\n"
        "try:\n"
        "    told = os.read(read, 4096)\n"
        "except BlockingIOError:\n"
        "    told = b''\n"
        "full = {int.from_bytes(told[i:i + 4], 'little') for i in range(0, len(told), 4)}\n"
        "alive = {pid for pid in children if os.waitpid(pid, os.WNOHANG) == (0, 0)}\n"
        "HELD = len(full & alive)\n"
    )
    budget = 128 + PRIVATE_TMP_MB + 2 * SMALL_TMPFS_MB + CGROUP_SLACK_MB
    result = run_sandboxed(program, f"assert 0 < HELD * 100 <= {budget}\n", timeout_s=15.0,
                           memory_mb=128)  # fmt: skip
    assert result.passed, (result.failures, result.output)
    honest = (
        "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\nx = 1\n"
    )
    assert run_sandboxed(honest, "assert x == 1\n", timeout_s=TIMEOUT_S, memory_mb=128).passed


def test_an_interpreter_named_through_dot_dot_still_gets_the_rooms(tmp_path):
    """`python benchmarks/../.venv/bin/python` names a folder the room does not hold: the rooms
    must start all the same (they fell back to weaker isolation, silently, in a benchmark)."""
    import subprocess
    import sys

    need_rooms()
    detour = tmp_path / "detour"  # on the host's /tmp, not in the room's
    detour.mkdir()
    roundabout = os.path.relpath(sys.executable, detour)  # relative: run from the detour
    probe = "from rlx.sandbox import current_isolation as c; print(c().namespaces)"
    done = subprocess.run([roundabout, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=detour)  # fmt: skip
    assert done.stdout.strip() == "True", done.stderr[-2000:]
