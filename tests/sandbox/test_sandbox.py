"""The python-tests reward and its sandbox, tested with honest and hostile completions.

Hostile programs get a 1 s limit; each test also checks that the call returned within
``timeout + 3`` s, so a sandbox that hangs fails here instead of stalling training. The reward
hacks of code RL each have a test below that pairs the hack with a wrong solution: the hack
alone would have to earn the point, and it must score 0.
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

from rlx.errors import ConfigError, SandboxError
from rlx.sandbox import (
    Isolation,
    SandboxWarning,
    current_isolation,
    python_tests_reward,
    run_many,
    run_sandboxed,
    sandbox_info,
)
from rlx.sandbox.isolation import choose_isolation
from rlx.sandbox.process import _probe as probe

HOSTILE_TIMEOUT_S = 1.0
HONEST_TIMEOUT_S = 10.0  # generous: honest programs end in ~0.1 s, even on a busy machine
SLACK_S = 3.0
PROJECT_ROOT = Path(__file__).resolve().parents[2]

ISOLATION = current_isolation()
needs_namespaces = pytest.mark.skipif(
    not ISOLATION.namespaces,
    reason="needs bubblewrap's namespaces: bwrap and unprivileged user namespaces",
)
needs_uid_drop = pytest.mark.skipif(  # the host cannot be written: bubblewrap's rooms or a uid
    ISOLATION.uids is None and not ISOLATION.namespaces,
    reason="needs bubblewrap's rooms, or root for the uid change",
)
needs_process_isolation = pytest.mark.skipif(  # a PID namespace, or as root a uid change
    not (ISOLATION.namespaces or ISOLATION.uids is not None),
    reason="a fork bomb or kill(-1) without a PID namespace or uid change would hit the tests",
)


def test_ci_has_the_isolation_the_hostile_tests_need():
    """CI sets RLX_REQUIRE_ISOLATION=1: there the isolation tests below must not skip. Failing here,
    rather than running a fork bomb without a PID namespace, keeps the machine safe."""
    if os.environ.get("RLX_REQUIRE_ISOLATION") != "1":
        pytest.skip("isolation is required only where RLX_REQUIRE_ISOLATION=1 (CI)")
    assert ISOLATION.namespaces, "no bubblewrap rooms: install bwrap, allow user namespaces"
    assert ISOLATION.seccomp, "no seccomp filter: install libseccomp and pyseccomp"
    if os.geteuid() == 0:
        assert ISOLATION.uids is not None, "no uid change as root"


ADD_PROMPT = 'def add(a, b):\n    """The sum of a and b."""\n'
ADD_TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0"


def score(completion: str, tests: str = "", prompt: str = "", **kw) -> float:
    """The reward of one completion, with the hostile time limit unless told otherwise.

    With no tests, a program scores 1.0 exactly when it runs to its end without raising or
    exiting, so a 0.0 comes from what the program itself did.
    """
    kw.setdefault("timeout_s", HOSTILE_TIMEOUT_S)
    if not tests:  # no test code checks nothing, which the reward refuses; the sandbox runs it
        return float(run_sandboxed(prompt + completion + "\n", timeout_s=kw["timeout_s"]).passed)
    return python_tests_reward([prompt], [completion], [tests], **kw)[0]


def score_add(completion: str, tests: str = ADD_TESTS, **kw) -> float:
    """The reward of a completion of :data:`ADD_PROMPT`, checked by :data:`ADD_TESTS`."""
    kw.setdefault("timeout_s", HONEST_TIMEOUT_S)
    return score(completion, tests=tests, prompt=ADD_PROMPT, **kw)


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
    assert score_add("    raise ValueError('no')\n") == 0.0


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


def test_partial_credit_is_the_share_of_tests_passed_and_only_when_asked():
    tests = "assert add(2, 3) == 5\nassert add(0, 0) == 0\nassert add(-1, 1) == 0\n"
    wrong_for_negatives = "    return abs(a) + abs(b)\n"  # passes the first two of three
    assert score_add(wrong_for_negatives, tests) == 0.0
    assert score_add(wrong_for_negatives, tests, partial=True) == pytest.approx(2 / 3)
    assert score_add("    return a + b\n", tests, partial=True) == 1.0


def test_what_counts_as_a_check():
    """Every executed assert is a check, wherever it sits (the top level, a test function,
    HumanEval's check(candidate)); other code is set-up."""
    program = ADD_PROMPT + "    return a + b if a < 10 else 0\n"
    pytest_style = (
        "import math\n"
        "def helper(x):\n    return x\n"
        "def test_small():\n    assert add(1, 2) == 3\n"
        "def test_large():\n    assert add(20, 1) == 21\n"
        "assert add(2, 2) == helper(4)\n"
    )
    result = run_sandboxed(program, pytest_style, timeout_s=HONEST_TIMEOUT_S)
    assert (result.tests_passed, result.tests_total) == (2, 3), result.failures
    assert any("test_large()" in line for line in result.failures)
    humaneval = (
        "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(9, 1) == 10\n"
        "\ncheck(add)\n"
    )
    result = run_sandboxed(program, humaneval, timeout_s=HONEST_TIMEOUT_S)
    assert (result.tests_passed, result.tests_total, result.status) == (2, 2, "passed")


def test_values_of_every_plain_type_cross_intact():
    program = (
        "import collections, enum\n"
        "Pair = collections.namedtuple('Pair', 'x y')\n"
        "class Colour(enum.IntEnum):\n    RED = 1\n"
        "def values():\n"
        "    return [None, True, 3, -0.5, float('inf'), 'text', b'\\x00\\xff', bytearray(b'a'),\n"
        "            2 + 3j, (1, (2,)), {1: 'a', (2, 3): [4]}, {5, 6}, frozenset({7}),\n"
        "            Pair(1, 2), collections.Counter('aab'), Colour.RED, 10 ** 40]\n"
        "TABLE = {'k': [1, 2]}\n"
    )
    tests = (
        "v = values()\n"
        "assert v[:8] == [None, True, 3, -0.5, float('inf'), 'text', b'\\x00\\xff', b'a']\n"
        "assert type(v[7]) is bytearray and type(v[9]) is tuple and type(v[9][1]) is tuple\n"
        "assert v[8] == 2 + 3j and v[9] == (1, (2,)) and v[10] == {1: 'a', (2, 3): [4]}\n"
        "assert v[11] == {5, 6} and v[12] == frozenset({7}) and v[13] == (1, 2)\n"
        "assert v[14] == {'a': 2, 'b': 1} and v[15] == 1 and v[16] == 10 ** 40\n"
        "assert TABLE == {'k': [1, 2]} and Colour.RED == 1\n"
    )
    result = run_sandboxed(program, tests, timeout_s=HONEST_TIMEOUT_S)
    assert result.passed, result.failures


def test_classes_generators_and_expected_exceptions_work_across_the_boundary():
    program = (
        "class Stack:\n"
        "    def __init__(self):\n        self.items = []\n"
        "    def push(self, x):\n        self.items.append(x)\n"
        "    def pop(self):\n        return self.items.pop()\n"
        "    def size(self):\n        return len(self.items)\n"
        "def count(n):\n    yield from range(n)\n"
        "def root(x):\n"
        "    if x < 0:\n        raise ValueError('negative')\n"
        "    return x ** 0.5\n"
    )
    tests = (
        "s = Stack()\ns.push(1)\ns.push(2)\n"
        "assert s.size() == 2 and s.pop() == 2 and s.items == [1]\n"
        "assert list(count(3)) == [0, 1, 2]\n"
        "assert [x * 2 for x in count(2)] == [0, 2]\n"
        "try:\n    root(-1)\nexcept ValueError as error:\n    assert 'negative' in str(error)\n"
        "else:\n    raise AssertionError('no ValueError')\n"
    )
    result = run_sandboxed(program, tests, timeout_s=HONEST_TIMEOUT_S)
    assert result.passed, result.failures


def test_output_of_an_honest_program_is_kept_for_people():
    program = "print('hello from the program')\n" + ADD_PROMPT + "    return a + b\n"
    result = run_sandboxed(program, ADD_TESTS, timeout_s=HONEST_TIMEOUT_S)
    assert result.passed and "hello from the program" in result.output


def test_test_code_that_is_not_python_is_a_data_error_naming_the_row():
    with pytest.raises(SandboxError, match=r"row 0 .*test code is not valid Python"):
        score_add("    return a + b\n", tests="assert add(1, 2) ==")


def test_environment_is_minimal_and_folder_private(monkeypatch):
    monkeypatch.setenv("RLX_SANDBOX_SECRET", "hunter2")
    program = (
        "import os, stat, tempfile\n"
        "assert 'RLX_SANDBOX_SECRET' not in os.environ\n"
        "assert set(os.environ) <= {'PATH', 'HOME', 'TMPDIR', 'LANG', 'MALLOC_ARENA_MAX',\n"
        "                           'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS',\n"
        "                           'PYTHONDONTWRITEBYTECODE'}, dict(os.environ)\n"
        "assert os.getcwd() == os.environ['HOME']\n"
        "assert os.environ['TMPDIR'].startswith(os.getcwd())\n"
        "assert stat.S_IMODE(os.stat('.').st_mode) == 0o700\n"
        "open('state.txt', 'w').write('x')\n"
        "tempfile.NamedTemporaryFile(delete=False).write(b'x')\n"
    )
    result = run_sandboxed(program, timeout_s=HONEST_TIMEOUT_S)
    assert result.passed, (result.failures, result.output)


def test_threads_and_subprocesses_work():
    """An honest program may use a few threads and start a subprocess within the limits."""
    program = (
        "import subprocess, sys, threading, time\n"
        "threads = [threading.Thread(target=time.sleep, args=(0.1,)) for _ in range(8)]\n"
        "for thread in threads:\n    thread.start()\n"
        "for thread in threads:\n    thread.join()\n"
        "def answer():\n"
        "    out = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True)\n"
        "    return out.stdout.strip()\n"
    )
    result = run_sandboxed(program, "assert answer() == b'42'\n", timeout_s=HONEST_TIMEOUT_S)
    assert result.passed, (result.failures, result.output)


def test_each_run_gets_a_fresh_folder():
    write = "open('state.txt', 'w').write('left over')\n"
    assert run_sandboxed(write, timeout_s=HONEST_TIMEOUT_S).passed
    check = "import os\nexists = os.path.exists('state.txt')\n"
    assert run_sandboxed(check, "assert exists is False\n", timeout_s=HONEST_TIMEOUT_S).passed


# --- reward hacks: each scores 0 ----------------------------------------------------------------

WRONG_ADD = "def add(a, b):\n    return 0\n"


@pytest.mark.parametrize(
    ("name", "hack"),
    [
        ("exit(0) before the tests", "import sys\nsys.exit(0)\n"),
        ("os._exit(0) before the tests", "import os\nos._exit(0)\n"),
        ("SystemExit before the tests", "raise SystemExit\n"),
        ("exit() builtin", "exit()\n"),
        (
            "os._exit(0) during the tests",
            "import os\ndef add(a, b):\n    os._exit(0)\n",
        ),
        (
            "sys.exit(0) during the tests",
            "import sys\ndef add(a, b):\n    sys.exit(0)\n",
        ),
        (
            "atexit handler that exits cleanly",
            "import atexit, os\natexit.register(lambda: os._exit(0))\n",
        ),
        (
            "excepthook replaced to exit cleanly",
            "import os, sys\nsys.excepthook = lambda *a: os._exit(0)\n",
        ),
        (
            "always-equal object",
            "class Equal:\n    def __eq__(self, other):\n        return True\n"
            "    __hash__ = object.__hash__\n"
            "def add(a, b):\n    return Equal()\n",
        ),
        (
            "always-equal int subclass",
            "class Equal(int):\n    def __eq__(self, other):\n        return True\n"
            "    __hash__ = int.__hash__\n"
            "def add(a, b):\n    return Equal(0)\n",
        ),
        (
            "success report printed",
            "import sys\n"
            "for stream in (sys.stdout, sys.stderr):\n"
            '    stream.write(\'2 passed\\nOK\\n{"passed": 2, "total": 2, "failures": [],'
            ' "failure_count": 0, "defined": true, "timed_out": false, '
            '"returncode": null}\\n1.0\\n\')\n',
        ),
        (
            "verdict written to every file descriptor",
            "import os\n"
            'verdict = b\'{"passed": 2, "total": 2, "failures": [], "failure_count": 0,\'\n'
            'verdict += b\' "defined": true, "timed_out": false, "returncode": null}\\n\'\n'
            "for fd in range(256):\n"
            "    try:\n        os.write(fd, verdict)\n    except OSError:\n        pass\n",
        ),
        (
            "a forged ready note and answers",
            "import json, os, struct\n"
            "def frame(message):\n"
            "    data = json.dumps(message).encode()\n"
            "    return struct.pack('>I', len(data)) + data\n"
            "function = {'handle': 1, 'type': 'function'}\n"
            "note = frame({'ready': {'names': {'add': function}}})\n"
            "report = frame({'passed': 2, 'total': 2, 'value': 'passed'})\n"
            "os.write(4, note + report * 4)\n"
            "os._exit(0)\n",
        ),
        (
            "a shadowed builtin that answers the comparison",
            "def abs(x):\n    return 0\n",
        ),
        ("never returns", "def add(a, b):\n    while True:\n        pass\n"),
        ("never finishes defining", "while True:\n    pass\n"),
        (
            "flood of output during a call",
            "import sys\ndef add(a, b):\n    while True:\n        sys.stdout.write('x' * 10**6)\n",
        ),
        ("an answer too large to cross", "def add(a, b):\n    return 'x' * (8 << 20)\n"),
        (
            "garbage on the answer channel",
            "import os\ndef add(a, b):\n    os.write(4, b'\\xff' * 64)\n    return a + b\n",
        ),
    ],
)
def test_reward_hack_scores_zero(name, hack):
    """Each hack is paired with a wrong add, so only the hack could earn a point, even with
    partial credit; the last test is one a shadowed ``abs`` could answer."""
    tests = (
        "def test_sum():\n    assert add(2, 3) == 5\n"
        "def test_close():\n    assert abs(add(1, 2) - 3.5) < 1e-9 or add(1, 2) == 3\n"
    )
    completion = hack + WRONG_ADD if "def add" not in hack else hack
    reward, elapsed = timed_score(completion, tests=tests, partial=True)
    assert reward == 0.0, name
    assert elapsed < HOSTILE_TIMEOUT_S + SLACK_S, f"{name} took {elapsed:.1f} s"


def rejects_none_test(swallow: str) -> str:
    """One test: add must raise on None, caught by ``swallow``."""
    return (
        "def test_rejects_none():\n"
        f"    try:\n        add(None, 1)\n    {swallow}:\n        return\n"
        "    raise AssertionError('add accepted None')\n"
    )


@pytest.mark.parametrize("swallow", ["except Exception", "except"])
@pytest.mark.parametrize(
    "death",
    [
        "os._exit(0)",
        "sys.exit(0)",
        "raise SystemExit",
        "os.kill(os.getpid(), signal.SIGKILL)",
    ],
)
def test_a_program_that_dies_is_not_taken_for_one_that_raised(death, swallow):
    """A test that expects add to raise catches everything add raises, even with a bare
    ``except``: a program that exits or dies in the call must still score 0."""
    dies = f"import os, signal, sys\ndef add(a, b):\n    {death}\n"
    assert score(dies, tests=rejects_none_test(swallow), partial=True) == 0.0
    raises = "def add(a, b):\n    return a + b\n"  # None + 1 raises TypeError
    assert score(raises, tests=rejects_none_test(swallow), timeout_s=HONEST_TIMEOUT_S) == 1.0


def test_searching_frames_heap_and_raw_memory_finds_nothing_of_the_tests():
    """The tests carry a fresh token. The program looks for anything shaped like it through
    every frame and every object it can reach, and through every readable byte of its own
    memory (with ctypes: freed buffers linger there): the launcher forks it before it
    reads the tests, so no copy of them was ever there. It finds no token, and its guess of the
    expected value fails."""
    token = uuid.uuid4().hex
    hunt = (
        "import gc, re, sys\n"
        "pattern = re.compile(rb'(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])')\n"
        "found = set()\n"
        "frame = sys._getframe()\n"
        "while frame is not None:\n"
        "    found.update(repr(v).encode() for v in frame.f_locals.values())\n"
        "    frame = frame.f_back\n"
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, dict):\n"
        "        found.update(v.encode() for v in obj.values() if isinstance(v, str))\n"
        "tokens = set()\n"
        "for text in found:\n"
        "    tokens.update(pattern.findall(text))\n"
        "import ctypes\n"
        "with open('/proc/self/maps') as maps:\n"
        "    regions = [line.split() for line in maps]\n"
        "for fields in regions:\n"
        "    anonymous = len(fields) == 5 or fields[5] in ('[heap]', '[stack]')\n"
        "    if not fields[1].startswith('r') or not anonymous:\n"
        "        continue  # file-backed pages may fault (SIGBUS); the heap is what matters\n"
        "    start, end = (int(x, 16) for x in fields[0].split('-'))\n"
        "    for chunk in range(start, end, 16 << 20):\n"
        "        raw = ctypes.string_at(chunk, min(end - chunk, 16 << 20))\n"
        "        tokens.update(pattern.findall(raw))\n"
        "TOKENS = sorted(t.decode() for t in tokens)\n"
        "def add(a, b):\n"
        "    return TOKENS[0] if len(TOKENS) == 1 else 0\n"
    )
    tests = f"assert add(2, 3) == {token!r}\n"
    result = run_sandboxed(hunt, tests, timeout_s=HONEST_TIMEOUT_S, memory_mb=1024)
    assert result.status == "failed" and result.tests_passed == 0, result.failures
    leaks = run_sandboxed(hunt, f"assert {token!r} not in TOKENS\n", timeout_s=HONEST_TIMEOUT_S,
                          memory_mb=1024)  # fmt: skip
    assert leaks.passed, (leaks.failures, leaks.output)


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
    assert result.status == "timeout" and not result.passed
    assert HOSTILE_TIMEOUT_S <= result.elapsed_s < HOSTILE_TIMEOUT_S + SLACK_S


def test_tests_that_loop_on_their_own_are_stopped_at_the_limit():
    """The time limit holds the judge's side too: test code that never calls the program."""
    loops = "while True:\n    pass\nassert add(1, 2) == 3\n"
    result = run_sandboxed(WRONG_ADD, loops, timeout_s=HOSTILE_TIMEOUT_S)
    assert result.status == "timeout"
    assert result.elapsed_s < HOSTILE_TIMEOUT_S + SLACK_S


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
    """A program that defines itself only when it reaches a server listening on our loopback."""
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
        # in a room, a folder under /tmp may exist on the room's own tmpfs (on the way to a
        # venv bound there), so the write may land there: never on the host
        assert reward == 0.0 or str(target).startswith("/tmp/")
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
    """Each attack, paired with a wrong add, scores 0 whether it runs while defining or during
    a call; honest neighbours running at the same time still pass."""
    honest = "import time\ntime.sleep(0.5)\n" + ADD_PROMPT + "    return a + b\n"
    during_call = "def add(a, b):\n" + "".join(f"    {line}\n" for line in attack.splitlines())
    programs = [honest, attack + WRONG_ADD, honest, during_call, honest]
    results = run_many(programs, [ADD_TESTS] * 5, timeout_s=HONEST_TIMEOUT_S, max_workers=5)
    # reaching this line means the test process survived
    assert [result.passed for result in results] == [True, False, True, False, True]


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
    results = run_many(["while True: pass\n"] * 4, timeout_s=HOSTILE_TIMEOUT_S, max_workers=4)
    assert [result.status for result in results] == ["timeout"] * 4
    assert time.monotonic() - start < 2 * HOSTILE_TIMEOUT_S + SLACK_S


def test_fallback_without_namespaces_still_isolates_and_cleans_up():
    """The path taken where bubblewrap cannot run: a host temporary folder, deleted after."""
    fallback = choose_isolation(lambda option: option.bwrap is None and probe(option))
    before = set(Path(tempfile.gettempdir()).glob("rlx-sandbox-*"))
    write = "open('state.txt', 'w').write('x')\n"
    assert run_sandboxed(write, timeout_s=HONEST_TIMEOUT_S, isolation=fallback).passed
    loop = run_sandboxed("while True: pass\n", timeout_s=HOSTILE_TIMEOUT_S, isolation=fallback)
    assert loop.status == "timeout" and loop.elapsed_s < HOSTILE_TIMEOUT_S + SLACK_S
    assert set(Path(tempfile.gettempdir()).glob("rlx-sandbox-*")) <= before


def test_unisolated_path_judges_honest_and_forged_programs_alike():
    """The path taken without root (allowed explicitly): limits and timeout, the same judge."""
    unisolated = Isolation(sys.executable, None, None)
    honest = ADD_PROMPT + "    return a + b\n"
    assert run_sandboxed(honest, ADD_TESTS, timeout_s=HONEST_TIMEOUT_S, isolation=unisolated).passed
    forged = "import os\nos._exit(0)\n"
    result = run_sandboxed(forged, ADD_TESTS, timeout_s=HONEST_TIMEOUT_S, isolation=unisolated)
    assert not result.passed


# --- no silent fallback -------------------------------------------------------------------------


@pytest.fixture
def without_isolation(monkeypatch):
    """Simulate a machine without root: no namespaces and no uid change."""
    import rlx.sandbox.process as process
    import rlx.sandbox.reward as reward

    unisolated = Isolation(sys.executable, None, None)
    monkeypatch.setattr(process, "current_isolation", lambda: unisolated)
    monkeypatch.setattr(reward, "current_isolation", lambda: unisolated)
    monkeypatch.setattr(reward, "_warned", __import__("threading").Event())
    return unisolated


def test_missing_isolation_refuses_to_run_model_code(without_isolation):
    with pytest.raises(SandboxError) as refused:
        score_add("    return a + b\n")
    message = str(refused.value)
    assert "no network, PID, IPC or mount namespaces" in message
    assert "no uid change" in message
    assert "allow_unisolated=True" in message and "--allow-unisolated" in message


def test_allow_unisolated_runs_and_warns_once_naming_what_is_missing(without_isolation):
    with pytest.warns(SandboxWarning) as caught:
        first = score_add("    return a + b\n", allow_unisolated=True)
        second = score_add("    return a - b\n", allow_unisolated=True)
    assert (first, second) == (1.0, 0.0)
    assert len(caught) == 1
    assert "namespaces" in str(caught[0].message) and "uid change" in str(caught[0].message)


# --- validation and reporting -------------------------------------------------------------------


def test_mismatched_lengths_raise():
    with pytest.raises(ConfigError, match="must match"):
        python_tests_reward(["a", "b"], ["x"], ["assert x == 1"])
    with pytest.raises(ConfigError, match="must match"):
        python_tests_reward(["a"], ["x"], ["assert x == 1", "assert x == 1"])


def test_missing_or_malformed_tests_raise():
    with pytest.raises(ConfigError, match="needs test code"):
        python_tests_reward(["a"], ["x"])
    with pytest.raises(ConfigError, match="one string of test code per completion"):
        python_tests_reward(["a"], ["x"], "assert x == 1")


@pytest.mark.parametrize(
    "bad",
    [{"timeout_s": 0}, {"memory_mb": 8}, {"max_workers": 0}, {"memory_mb": 1.5},
     {"judge_memory_mb": 16}],
)  # fmt: skip
def test_bad_limits_raise(bad):
    with pytest.raises(ConfigError):
        python_tests_reward(["a"], ["x"], ["assert x == 1"], **bad)


def test_sandbox_info_reports_the_protections():
    info = sandbox_info()
    keys = ("network_namespace", "pid_namespace", "ipc_namespace", "private_tmp",
            "read_only_host", "uid_drop", "judge_uid", "judge_sandboxed", "seccomp")  # fmt: skip
    for key in keys:
        assert isinstance(info[key], bool)
    assert info["network_namespace"] == ISOLATION.namespaces
    assert info["uid_drop"] == (ISOLATION.uids is not None)
    assert info["seccomp"] == ISOLATION.seccomp
    assert Path(info["python"]).is_file()
    assert isinstance(info["missing"], list)
    if os.geteuid() == 0 and info["network_namespace"] and info["uid_drop"]:
        assert info["missing"] == []
