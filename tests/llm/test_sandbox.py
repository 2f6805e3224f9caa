"""The python-tests reward and its sandbox, tested with honest and hostile completions.

Hostile programs get a 1 s limit; each test also checks that the call returned within
``timeout + 3`` s, so a sandbox that hangs fails here instead of stalling training.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from rlx.errors import ConfigError
from rlx.llm.sandbox import (
    Isolation,
    current_isolation,
    python_tests_reward,
    run_many,
    run_sandboxed,
    sandbox_info,
)

HOSTILE_TIMEOUT_S = 1.0
HONEST_TIMEOUT_S = 10.0  # generous: honest programs end in ~0.1 s, even on a busy machine
SLACK_S = 3.0
PROJECT_ROOT = Path(__file__).resolve().parents[2]

ISOLATION = current_isolation()
needs_namespaces = pytest.mark.skipif(
    not ISOLATION.namespaces,
    reason="needs network/PID/mount namespaces: run as root with a working `unshare`",
)
needs_uid_drop = pytest.mark.skipif(
    ISOLATION.uids is None,
    reason="needs the uid change: run as root, with an interpreter an unprivileged uid can run",
)
needs_process_isolation = pytest.mark.skipif(
    not (ISOLATION.namespaces or ISOLATION.uids is not None),
    reason="a fork bomb or kill(-1) without a PID namespace or uid change would hit the tests",
)


def test_ci_has_the_isolation_the_hostile_tests_need():
    """CI sets RLX_REQUIRE_ISOLATION=1: there the isolation tests below must not skip. Failing here,
    rather than running a fork bomb without a PID namespace, keeps the machine safe."""
    if os.environ.get("RLX_REQUIRE_ISOLATION") != "1":
        pytest.skip("isolation is required only where RLX_REQUIRE_ISOLATION=1 (CI)")
    assert ISOLATION.namespaces, "no network/PID/mount namespaces: run as root with `unshare`"
    assert ISOLATION.uids is not None, "no uid change: run as root"


ADD_PROMPT = 'def add(a, b):\n    """The sum of a and b."""\n'
ADD_TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0"


def score(completion: str, tests: str = "", prompt: str = "", **kw) -> float:
    """The reward of one completion, with the hostile time limit unless told otherwise.

    With no tests, a program scores 1.0 exactly when it runs to its end, so a 0.0 comes from
    what the program itself did.
    """
    kw.setdefault("timeout_s", HOSTILE_TIMEOUT_S)
    return python_tests_reward([prompt], [completion], [tests], **kw)[0]


def score_add(completion: str) -> float:
    """The reward of a completion of :data:`ADD_PROMPT`, checked by :data:`ADD_TESTS`."""
    return score(completion, tests=ADD_TESTS, prompt=ADD_PROMPT, timeout_s=HONEST_TIMEOUT_S)


def timed_score(completion: str, **kw) -> tuple[float, float]:
    start = time.monotonic()
    reward = score(completion, **kw)
    return reward, time.monotonic() - start


def processes_with(marker: str) -> list[int]:
    """Pids whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


# --- honest programs ----------------------------------------------------------------------------


def test_correct_solution_scores_one():
    reward = python_tests_reward(
        [ADD_PROMPT], ["    return a + b\n"], [ADD_TESTS], timeout_s=HONEST_TIMEOUT_S
    )
    assert reward == [1.0]


def test_wrong_solution_scores_zero():
    assert score_add("    return a - b\n") == 0.0


def test_syntax_error_scores_zero():
    assert score_add("    return a +\n") == 0.0


def test_exception_scores_zero():
    completion = "    raise ValueError('no')\n"
    assert score_add(completion) == 0.0


def test_prompt_is_left_out_when_asked():
    completion = "def add(a, b):\n    return a + b\n"
    prompt = "Write add(a, b) in Python."  # natural language: a syntax error if prepended
    kw = {"prompt": prompt, "tests": ADD_TESTS, "timeout_s": HONEST_TIMEOUT_S}
    assert score(completion, **kw) == 0.0
    assert score(completion, prepend_prompt=False, **kw) == 1.0


def test_answers_column_holds_the_tests_when_tests_is_none():
    rewards = python_tests_reward(
        [ADD_PROMPT, ADD_PROMPT],
        ["    return a + b\n", "    return 5\n"],
        answers=[ADD_TESTS, ADD_TESTS],
        timeout_s=HONEST_TIMEOUT_S,
    )
    assert rewards == [1.0, 0.0]


@pytest.mark.parametrize(
    "completion",
    ["import sys\nsys.exit(0)\n", "import os\nos._exit(0)\n", "exit()\n", "raise SystemExit\n"],
)
def test_exiting_before_the_tests_scores_zero(completion):
    """Exit status 0 is not enough: the tests must run to their end."""
    assert score(completion, timeout_s=HONEST_TIMEOUT_S) == 0.0


def test_environment_is_minimal_and_folder_private(monkeypatch):
    monkeypatch.setenv("RLX_SANDBOX_SECRET", "hunter2")
    program = (
        "import os, stat, tempfile\n"
        "assert 'RLX_SANDBOX_SECRET' not in os.environ\n"
        "assert set(os.environ) <= {'PATH', 'HOME', 'TMPDIR', 'LANG', 'MALLOC_ARENA_MAX',\n"
        "                           'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS'}, dict(os.environ)\n"
        "assert os.getcwd() == os.environ['HOME']\n"
        "assert os.environ['TMPDIR'].startswith(os.getcwd())\n"
        "assert stat.S_IMODE(os.stat('.').st_mode) == 0o700\n"
        "open('state.txt', 'w').write('x')\n"
        "tempfile.NamedTemporaryFile(delete=False).write(b'x')\n"
    )
    assert run_sandboxed(program, timeout_s=HONEST_TIMEOUT_S).passed


def test_threads_and_subprocesses_work():
    """An honest program may use a few threads and start a subprocess within the limits."""
    program = (
        "import subprocess, sys, threading, time\n"
        "threads = [threading.Thread(target=time.sleep, args=(0.1,)) for _ in range(8)]\n"
        "for thread in threads:\n    thread.start()\n"
        "for thread in threads:\n    thread.join()\n"
        "out = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True)\n"
        "assert out.stdout.strip() == b'42'\n"
    )
    result = run_sandboxed(program, timeout_s=HONEST_TIMEOUT_S)
    assert result.passed, result.output


def test_each_run_gets_a_fresh_folder():
    write = "open('state.txt', 'w').write('left over')\n"
    assert run_sandboxed(write, timeout_s=HONEST_TIMEOUT_S).passed
    check = "import os\nassert not os.path.exists('state.txt')\n"
    assert run_sandboxed(check, timeout_s=HONEST_TIMEOUT_S).passed


# --- hostile programs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "completion"),
    [
        ("infinite loop", "while True:\n    pass\n"),
        ("sleep", "import time\ntime.sleep(60)\n"),
        ("memory hog", "x = bytearray(10**10)\n"),
        ("slow memory hog", "x = []\nwhile True:\n    x.append(bytearray(10**7))\n"),
        ("huge output", "import sys\nwhile True:\n    sys.stdout.write('x' * 10**6)\n"),
        (
            "huge file",
            "with open('big', 'wb') as f:\n    while True:\n        f.write(b'x' * 10**6)\n",
        ),
        ("recursion", "def f():\n    f()\nf()\n"),
        ("segfault", "import ctypes\nctypes.string_at(0)\n"),
    ],
)
def test_hostile_program_scores_zero_in_bounded_time(name, completion):
    reward, elapsed = timed_score(completion)
    assert reward == 0.0, name
    assert elapsed < HOSTILE_TIMEOUT_S + SLACK_S, f"{name} took {elapsed:.1f} s"


def test_timeout_is_reported_as_timeout():
    result = run_sandboxed("while True:\n    pass\n", timeout_s=HOSTILE_TIMEOUT_S)
    assert result.status == "timeout" and result.returncode == 124
    assert HOSTILE_TIMEOUT_S <= result.elapsed_s < HOSTILE_TIMEOUT_S + SLACK_S


def test_memory_hog_meets_memory_error():
    result = run_sandboxed("x = bytearray(10**10)\n", timeout_s=HONEST_TIMEOUT_S)
    assert result.status == "failed" and "MemoryError" in result.output


@needs_process_isolation
def test_fork_bomb_scores_zero_and_leaves_no_process():
    """Children fork on, leave the session with setsid, and outlive their parent's failures."""
    marker = f"rlx-fork-bomb-{uuid.uuid4().hex}"
    bomb = (
        "import os, time\n"
        "while True:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os.setsid()\n"
        "    except OSError:\n"
        "        time.sleep(0.01)\n"
    )
    # exec so that every process of the bomb carries the marker in its command line
    completion = (
        f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', {bomb!r}, {marker!r}])\n"
    )
    reward, elapsed = timed_score(completion)
    assert reward == 0.0
    assert elapsed < HOSTILE_TIMEOUT_S + SLACK_S
    assert processes_with(marker) == []


@needs_process_isolation
def test_escaped_sleeper_does_not_outlive_the_run():
    marker = f"rlx-sleeper-{uuid.uuid4().hex}"
    sleeper = "import os, time\nos.setsid()\ntime.sleep(60)\n"
    completion = (
        "import os, sys\n"
        f"if os.fork() == 0:\n    os.execv(sys.executable, [sys.executable, '-c', {sleeper!r}, "
        f"{marker!r}])\n"
    )
    run_sandboxed(completion, timeout_s=HONEST_TIMEOUT_S)
    assert processes_with(marker) == []


@needs_namespaces
def test_network_is_unreachable():
    """A program that exits cleanly only when it reaches a server listening on our loopback."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        program = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        result = run_sandboxed(program, timeout_s=HONEST_TIMEOUT_S)
    assert not result.passed
    assert "Network is unreachable" in result.output or "Errno" in result.output


@needs_namespaces
def test_internet_is_unreachable():
    program = "import socket\nsocket.create_connection(('8.8.8.8', 53), timeout=1)\n"
    reward, elapsed = timed_score(program)
    assert reward == 0.0 and elapsed < HOSTILE_TIMEOUT_S + SLACK_S


@needs_uid_drop
@pytest.mark.parametrize("where", ["root-owned temporary folder", "project folder"])
def test_writing_outside_the_folder_fails(tmp_path, where):
    if where == "project folder":
        folder = PROJECT_ROOT
    else:
        folder = tmp_path / "root_owned"
        folder.mkdir(mode=0o755)
    target = folder / f"rlx_escape_{uuid.uuid4().hex}"
    try:
        reward = score(f"open({str(target)!r}, 'w').write('escaped')\n")
        assert reward == 0.0
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


@needs_namespaces
def test_shared_tmp_is_private():
    """``/tmp`` is world-writable, so the program may write there, but only to its own copy."""
    target = Path("/tmp", f"rlx_escape_{uuid.uuid4().hex}")
    try:
        program = f"open({str(target)!r}, 'w').write('escaped')\n"
        assert score(program, timeout_s=HONEST_TIMEOUT_S) == 1.0
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


@needs_uid_drop
@pytest.mark.parametrize(
    "attack",
    [
        "import os\nos.kill(os.getppid(), 9)\n",
        "import os\nos.killpg(os.getpgid(0), 9)\n",
        "import os\nos.kill(-1, 9)\n",
        "import os, signal\nos.kill(-1, signal.SIGTERM)\nos.kill(1, 9)\n",
    ],
)
def test_kill_attempts_hit_neither_the_trainer_nor_other_runs(attack):
    honest = "import time\ntime.sleep(0.5)\n" + ADD_PROMPT + "    return a + b\n"
    programs = [honest + ADD_TESTS, attack + ADD_TESTS, honest + ADD_TESTS]
    results = run_many(programs, timeout_s=HONEST_TIMEOUT_S, max_workers=3)
    # reaching this line means the test process survived
    assert [result.passed for result in results] == [True, False, True]


# --- batches ------------------------------------------------------------------------------------


def test_order_is_preserved_under_concurrency():
    right, wrong, loop = "    return a + b\n", "    return a * b\n", "    while True: pass\n"
    completions = [right, wrong, loop, right, wrong, right]
    rewards = python_tests_reward(
        [ADD_PROMPT] * 6,
        completions,
        [ADD_TESTS] * 6,
        timeout_s=HOSTILE_TIMEOUT_S,
        max_workers=3,
    )
    assert rewards == [1.0, 0.0, 0.0, 1.0, 0.0, 1.0]


def test_timeouts_run_concurrently():
    """Four infinite loops on four workers cost about one time limit, not four."""
    start = time.monotonic()
    rewards = python_tests_reward(
        [""] * 4, ["while True: pass\n"] * 4, [""] * 4, timeout_s=HOSTILE_TIMEOUT_S, max_workers=4
    )
    assert rewards == [0.0] * 4
    assert time.monotonic() - start < 2 * HOSTILE_TIMEOUT_S + SLACK_S


def test_fallback_without_namespaces_still_isolates_and_cleans_up():
    """The path taken where ``unshare`` is missing: a host temporary folder, deleted after."""
    fallback = Isolation(ISOLATION.python, None, ISOLATION.uids)
    before = set(Path(tempfile.gettempdir()).glob("rlx-sandbox-*"))
    write = "open('state.txt', 'w').write('x')\n"
    assert run_sandboxed(write, timeout_s=HONEST_TIMEOUT_S, isolation=fallback).passed
    loop = run_sandboxed("while True: pass\n", timeout_s=HOSTILE_TIMEOUT_S, isolation=fallback)
    assert loop.status == "timeout" and loop.elapsed_s < HOSTILE_TIMEOUT_S + SLACK_S
    assert set(Path(tempfile.gettempdir()).glob("rlx-sandbox-*")) <= before


def test_unisolated_fallback_runs_honest_programs():
    """The path taken without root: the trainer's own user, limits and timeout only."""
    unisolated = Isolation(sys.executable, None, None)
    program = ADD_PROMPT + "    return a + b\n" + ADD_TESTS
    assert run_sandboxed(program, timeout_s=HONEST_TIMEOUT_S, isolation=unisolated).passed


# --- validation and reporting -------------------------------------------------------------------


def test_mismatched_lengths_raise():
    with pytest.raises(ConfigError, match="must match"):
        python_tests_reward(["a", "b"], ["x"], ["assert True"])
    with pytest.raises(ConfigError, match="must match"):
        python_tests_reward(["a"], ["x"], ["assert True", "assert True"])


def test_missing_or_malformed_tests_raise():
    with pytest.raises(ConfigError, match="needs test code"):
        python_tests_reward(["a"], ["x"])
    with pytest.raises(ConfigError, match="one string of test code per completion"):
        python_tests_reward(["a"], ["x"], "assert True")


@pytest.mark.parametrize(
    "bad", [{"timeout_s": 0}, {"memory_mb": 8}, {"max_workers": 0}, {"memory_mb": 1.5}]
)
def test_bad_limits_raise(bad):
    with pytest.raises(ConfigError):
        python_tests_reward(["a"], ["x"], ["assert True"], **bad)


def test_sandbox_info_reports_the_protections():
    info = sandbox_info()
    for key in ("network_namespace", "pid_namespace", "private_tmp", "uid_drop"):
        assert isinstance(info[key], bool)
    assert info["network_namespace"] == ISOLATION.namespaces
    assert info["uid_drop"] == (ISOLATION.uids is not None)
    assert Path(info["python"]).is_file()
    assert isinstance(info["missing"], list)
    if os.geteuid() == 0 and info["network_namespace"] and info["uid_drop"]:
        assert info["missing"] == []
