"""The code reward attacked as a hostile program would attack it.

Each attack is paired with a wrong program (``add`` that returns ``a - b``), so that only the
trick could earn the point: each must score 0, with partial credit too. Beside them, the honest
programs that an over-strict judge would fail score 1.0. The first group follows the causes of
the forged verdicts found on the earlier judge (one test each, named after its cause); the
second is attacks of our own.
"""

from __future__ import annotations

import glob
import os
import uuid
from pathlib import Path

import pytest

from rlx.errors import SandboxError
from rlx.sandbox import current_isolation, python_tests_reward, run_many, run_sandboxed

TIMEOUT_S = 2.0
ISOLATION = current_isolation()
needs_namespaces = pytest.mark.skipif(
    not ISOLATION.namespaces, reason="needs bubblewrap's rooms (bwrap, user namespaces)"
)
needs_read_only_host = pytest.mark.skipif(
    ISOLATION.uids is None and not ISOLATION.namespaces,
    reason="needs bubblewrap's rooms or, as root, the uid change",
)
needs_uids = pytest.mark.skipif(ISOLATION.uids is None, reason="needs the uid change: root")

WRONG_ADD = "def add(a, b):\n    return a - b\n"
ADD_TESTS = "assert add(2, 3) == 5\nassert add(10, -4) == 6\n"


def score(program: str, tests: str = ADD_TESTS, partial: bool = True, **kw) -> float:
    """The reward of ``program`` (partial credit unless told otherwise)."""
    kw.setdefault("timeout_s", TIMEOUT_S)
    return python_tests_reward([""], [program], [tests], partial=partial, **kw)[0]


def scores(programs: list[str], tests: list[str], partial: bool = True) -> list[float]:
    return python_tests_reward(
        [""] * len(programs), programs, tests, partial=partial, timeout_s=TIMEOUT_S
    )


# --- the causes of the earlier forged verdicts --------------------------------------------------


def test_cause_1_a_module_named_by_the_program_is_never_imported_by_the_judge():
    """The earlier exploit: the program plants a package in ``/tmp`` (``__init__.py`` and a
    ``test_*.py`` module) and binds a name to a module object named ``unittest.__main__``.
    A judge that imports that name runs test discovery in its working folder, imports the
    planted module and runs it with the judge's rights; here the planted code would write a
    marker into the project. The judge imports nothing the program names: no marker, and the
    wrong ``add`` scores 0. ``this`` (whose import prints the Zen of Python) never shows."""
    marker = Path(__file__).parent / f"rlx_cause1_{uuid.uuid4().hex}"
    planted = f"open({str(marker)!r}, 'w').write('ran in the judge')\n"
    program = (
        "import os, types\n"
        "for folder in ('/tmp', '/var/tmp', '.', os.path.expanduser('~')):\n"
        "    try:\n"
        "        open(os.path.join(folder, '__init__.py'), 'w').write('')\n"
        f"        open(os.path.join(folder, 'test_forge.py'), 'w').write({planted!r})\n"
        "    except OSError:\n"
        "        pass\n"
        "runner = types.ModuleType('unittest.__main__')\n"
        "zen = types.ModuleType('this')\n" + WRONG_ADD
    )
    try:
        result = run_sandboxed(program, ADD_TESTS, timeout_s=TIMEOUT_S)
        assert not marker.exists()
        assert result.tests_passed == 0 and not result.passed
        assert "Beautiful is better than ugly" not in result.output
    finally:
        marker.unlink(missing_ok=True)


def test_cause_1_the_judge_works_in_a_folder_of_its_own_and_a_tmp_of_its_own():
    """What the program writes in its folders, the judge's tests never see (honest side: the
    tests pass only where the judge's folders are its own)."""
    program = (
        "for path in ('/tmp/rlx-planted', 'planted.py', '/var/tmp/rlx-planted'):\n"
        "    open(path, 'w').write('x')\n"
        "def add(a, b):\n    return a + b\n"
    )
    tests = (
        "import os\n"
        "assert not os.path.exists('/tmp/rlx-planted')\n"
        "assert not os.path.exists('/var/tmp/rlx-planted')\n"
        "assert os.listdir('.') in ([], ['tmp'])\n"
        "assert add(2, 3) == 5\n"
    )
    assert score(program, tests, partial=False) == 1.0


def test_cause_2_a_patched_server_cannot_shadow_builtins_or_the_tests_names():
    """The program patches the server in its own interpreter so that it announces a
    ``__builtins__`` of its own (``abs``, ``len``, ``all``, ``isinstance`` answering as the test
    would like), those names alone, dunders of the judge's and the tests' own names: the judge
    binds none of them."""
    program = (
        "import sys\n"
        "server = sys.modules['rlx.sandbox.server']\n"
        "real = server.top_level_names\n"
        "def zero(*args, **kwargs):\n    return 0\n"
        "def yes(*args, **kwargs):\n    return True\n"
        "def forged(namespace, objects):\n"
        "    names = real(namespace, objects)\n"
        "    table = names.get('values', names)  # the earlier note kept names under 'values'\n"
        "    fakes = {'abs': table['zero'], 'len': table['zero'], 'all': table['yes'],\n"
        "             'isinstance': table['yes'], 'expected': 0, 'helper': table['zero'],\n"
        "             '__rlx_assert__': table['yes']}\n"
        "    table['__builtins__'] = {'dict': [[k, v] for k, v in fakes.items()]}\n"
        "    table.update(fakes)\n"
        "    return names\n"
        "server.top_level_names = forged\n"
        "def add(a, b):\n    return 0\n"
    )
    tests = (
        "expected = 5\n"
        "def helper(x):\n    return x\n"
        "assert abs(add(2, 3) - expected) < 1e-9\n"
        "assert len([add(1, 1)]) == 1 and all([add(2, 2) == 4])\n"
        "assert isinstance(add(1, 2), int) and add(1, 2) == helper(3)\n"
    )
    assert score(program, tests) == 0.0
    honest = "def add(a, b):\n    return a + b\n"
    assert score(honest, tests, partial=False) == 1.0


@pytest.mark.parametrize(
    ("operator", "test"),
    [
        ("in", "assert 'hello' in tokens('hello there')"),
        ("not in", "assert 'z' not in tokens('x y')"),
        ("==", "assert tokens('a b') == ['a', 'b']"),
        ("!=", "assert not (tokens('a b') != ['a', 'b'])"),
        ("<", "assert tokens('a') < ['b']"),
        ("hash", "assert hash(tokens('a')) == hash(('a',))"),
        ("isinstance", "assert isinstance(tokens('a b'), list) and tokens('a b').pop() == 'b'"),
        ("sorted", "assert sorted([tokens('b'), ['a']])[0] == ['a']"),
        ("dict key", "assert {tokens('a'): 1} == {('a',): 1}"),
    ],
)
def test_cause_3_no_operator_of_the_judge_is_answered_by_the_program(operator, test):
    """``tokens`` returns an object that answers every question as the test would like (for
    ``isinstance``, its ``__class__`` claims to be a list); the judge asks it none: each such
    test fails."""
    program = (
        "class Yes:\n"
        "    def __contains__(self, item):\n        return item != 'z'\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    def __lt__(self, other):\n        return True\n"
        "    def __bool__(self):\n        return True\n"
        "    def __len__(self):\n        return 3\n"
        "    def __hash__(self):\n        return hash(('a',))\n"
        "    def pop(self):\n        return 'b'\n"
        "class Listish(Yes):\n"
        "    @property\n"
        "    def __class__(self):\n        return list\n"
        f"def tokens(text):\n    return {'Listish' if operator == 'isinstance' else 'Yes'}()\n"
    )
    assert score(program, test + "\n") == 0.0, operator
    honest = "def tokens(text):\n    return text.split()\n"
    if operator not in ("hash", "dict key", "<", "sorted"):
        assert score(honest, test + "\n", partial=False) == 1.0, operator


@pytest.mark.parametrize(
    "layout",
    [
        "for x in [1, 2, 3]:\n    assert double(x) == 2 * x\n",
        "if True:\n    assert double(2) == 4\n",
        "import contextlib\nwith contextlib.nullcontext():\n    assert double(3) == 6\n",
        "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(5) == 10\n"
        "check(double)\n",
        "try:\n    assert double(4) == 8\nfinally:\n    pass\n",
        "while True:\n    assert double(1) == 2\n    break\n",
        "def test_double():\n    for x in range(1, 4):\n        assert double(x) == 2 * x\n",
    ],
)
def test_cause_4_partial_credit_counts_every_assert_that_ran(layout):
    """``double`` returning 0 passes the one top-level assert of 0 and fails every other
    check, wherever the assert sits: at most half the credit, never all of it."""
    tests = "assert double(0) == 0\n" + layout
    assert 0.0 < score("def double(x):\n    return 0\n", tests) <= 0.5
    assert score("def double(x):\n    return 2 * x\n", tests, partial=False) == 1.0


def test_cause_4_partial_credit_is_the_share_of_tests_as_written():
    """Two tests as written: the assert of 0 and the assert in the loop, which passes only when
    every one of its executions passed (a wrong sort checked by a loop of 100,000 asserts that
    all ran once scored 0.99999 when executions were counted)."""
    tests = "assert double(0) == 0\nfor x in [1, 2, 3]:\n    assert double(x) == 2 * x\n"
    assert score("def double(x):\n    return 0\n", tests) == pytest.approx(1 / 2)
    only_small = "def double(x):\n    return 2 * x if x < 3 else 0\n"  # wrong for 3
    assert score(only_small, tests) == pytest.approx(1 / 2)
    right = "def double(x):\n    return 2 * x\n"
    assert score(right, tests) == 1.0
    setup_fails = "import no_such_module_anywhere\n" + tests
    assert score("def double(x):\n    return 2 * x\n", setup_fails) == 0.0


@pytest.mark.parametrize(
    ("layout", "tests"),
    [
        (
            "pytest class",
            "class TestAdd:\n    def test_add(self):\n        assert add(2, 3) == 5\n",
        ),
        (
            "unittest without main",
            "import unittest\nclass T(unittest.TestCase):\n"
            "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
        ),
        (
            "unittest with main(exit=False)",
            "import unittest\nclass T(unittest.TestCase):\n"
            "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
            "unittest.main(exit=False)\n",
        ),
        (
            "unittest with main()",
            "import unittest\nclass T(unittest.TestCase):\n"
            "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
            "if __name__ == '__main__':\n    unittest.main()\n",
        ),
        ("async test", "async def test_add():\n    assert add(2, 3) == 5\n"),
        (
            "pytest parametrize",
            "import pytest\n@pytest.mark.parametrize('a,b,s', [(2, 3, 5), (1, 1, 2)])\n"
            "def test_add(a, b, s):\n    assert add(a, b) == s\n",
        ),
    ],
)
def test_cause_5_every_layout_runs_its_tests(layout, tests):
    """Layouts that once ran nothing and passed every program: each now runs its tests."""
    assert score(WRONG_ADD, tests) == 0.0, layout
    assert score("def add(a, b):\n    return a + b\n", tests, partial=False) == 1.0, layout


def test_cause_5_humaneval_check_without_its_call():
    """``check`` defined but never called: with the row's entry point the judge calls it;
    without one the row checks nothing, which is an error naming the row, never a pass."""
    tests = "def check(candidate):\n    assert candidate(2, 3) == 5\n"
    right = "def add(a, b):\n    return a + b\n"
    with pytest.raises(SandboxError, match=r"row 0 .*never calls it.*entry_point"):
        python_tests_reward([""], [right], [tests])
    rewards = python_tests_reward(
        ["", ""], [right, WRONG_ADD], [tests, tests], entry_point=["add", "add"]
    )
    assert rewards == [1.0, 0.0]


@pytest.mark.parametrize(
    "tests",
    [
        "",
        "x = 1\n",
        "import unittest\n",
        "def helper():\n    assert add(1, 1) == 2\n",
        "class Helper:\n    def check(self):\n        assert add(1, 1) == 2\n",
    ],
)
def test_cause_5_test_code_that_checks_nothing_is_an_error(tests):
    with pytest.raises(SandboxError, match=r"row 0 .*checks nothing"):
        python_tests_reward([""], ["def add(a, b):\n    return a + b\n"], [tests])


@needs_namespaces
def test_cause_6_nothing_one_program_leaves_reaches_the_next():
    """The first program hides the source of ``add`` everywhere it can write and in System V
    shared memory, message queues, semaphores and POSIX queues; the second defines nothing and
    looks for it. It finds nothing, and scores 0."""
    source = "def add(a, b):\n    return a + b\n"
    key = int(uuid.uuid4().hex[:7], 16)  # a key no earlier run has used
    leave = (
        "import ctypes, os\n"
        f"SOURCE = {source!r}\n"
        "for folder in ('/tmp', '/var/tmp', '/dev/shm', '/run/lock', os.path.expanduser('~'),\n"
        "               '/dev/mqueue', '.'):\n"
        "    try:\n"
        "        open(os.path.join(folder, 'rlx-left-add.py'), 'w').write(SOURCE)\n"
        "    except OSError:\n"
        "        pass\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"segment = libc.shmget({key}, 1 << 20, 0o1666)\n"
        "if segment >= 0:\n"
        "    libc.shmat.restype = ctypes.c_void_p\n"
        "    address = libc.shmat(segment, None, 0)\n"
        "    if address not in (None, ctypes.c_void_p(-1).value):\n"
        "        ctypes.memmove(address, SOURCE.encode(), len(SOURCE))\n"
        f"libc.msgget({key}, 0o1666)\n"
        f"libc.semget({key}, 1, 0o1666)\n" + WRONG_ADD
    )
    find = (
        "import ctypes, glob, os\n"
        "found = ''\n"
        "for path in glob.glob('/*/rlx-left-add.py') + glob.glob('/*/*/rlx-left-add.py') + \\\n"
        "        glob.glob(os.path.expanduser('~') + '/rlx-left-add.py'):\n"
        "    found = found or open(path).read()\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"segment = libc.shmget({key}, 0, 0)\n"
        "if segment >= 0 and not found:\n"
        "    libc.shmat.restype = ctypes.c_void_p\n"
        "    address = libc.shmat(segment, None, 0)\n"
        "    if address not in (None, ctypes.c_void_p(-1).value):\n"
        "        found = ctypes.string_at(address).decode(errors='replace')\n"
        f"FOUND_QUEUE = libc.msgget({key}, 0) >= 0\n"
        "exec(found or 'def add(a, b):\\n    return a - b\\n')\n"
    )
    assert scores([leave, find], [ADD_TESTS, ADD_TESTS]) == [0.0, 0.0]
    probe = run_sandboxed(find, "assert FOUND_QUEUE is False\n", timeout_s=TIMEOUT_S)
    assert probe.passed, probe.failures


def _host_state() -> dict[str, object]:
    """What a run could leave on this machine: System V objects, POSIX queues, files in the
    world-writable folders."""

    def entries(table: str) -> int:
        try:
            return len(Path(f"/proc/sysvipc/{table}").read_text().splitlines()) - 1
        except OSError:
            return 0

    folders = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
    files = {path for folder in folders for path in glob.glob(f"{folder}/*rlx-left*")}
    return {"shm": entries("shm"), "msg": entries("msg"), "sem": entries("sem"), "files": files}


@needs_namespaces
def test_cause_6_a_batch_leaves_no_shared_memory_queue_semaphore_or_file():
    before = _host_state()
    first_key = int(uuid.uuid4().hex[:6], 16) << 4  # keys no earlier run has used
    leave = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"for key in range({first_key}, {first_key + 8}):\n"
        "    libc.shmget(key, 64 << 20, 0o1666)\n"
        "    libc.msgget(key, 0o1666)\n"
        "    libc.semget(key, 4, 0o1666)\n"
        "mq_open = ctypes.CDLL('librt.so.1', use_errno=True).mq_open\n"
        "mq_open(b'/rlx-left-queue', os.O_CREAT | os.O_RDWR, 0o666, None)\n"
        "for folder in ('/tmp', '/var/tmp', '/dev/shm', '/run/lock', '.'):\n"
        "    try:\n"
        "        open(os.path.join(folder, 'rlx-left-file'), 'w').write('x')\n"
        "    except OSError:\n"
        "        pass\n" + WRONG_ADD
    )
    assert scores([leave] * 4, [ADD_TESTS] * 4) == [0.0] * 4
    assert _host_state() == before


@needs_uids
@needs_namespaces
def test_cause_7_the_judge_is_sandboxed_too():
    """The tests (trusted code, run by the judge) look at the judge's own process: not root,
    not the program's uid, an empty working folder of its own, limits on memory, CPU time and
    processes, no network. The judge's limits are what keep a test that uses a program's answer
    as a size from taking the machine."""
    tests = (
        "import os, resource, socket\n"
        "assert os.getuid() != 0 and os.getuid() != PROGRAM_UID\n"
        "assert os.listdir('.') in ([], ['tmp'])\n"
        "assert os.stat('.').st_uid == os.getuid()\n"
        "assert resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY\n"
        "assert resource.getrlimit(resource.RLIMIT_CPU)[0] != resource.RLIM_INFINITY\n"
        "assert resource.getrlimit(resource.RLIMIT_NPROC)[0] != resource.RLIM_INFINITY\n"
        "try:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
        "except OSError:\n    pass\n"
        "else:\n    raise AssertionError('the judge reached the network')\n"
        "try:\n    open('/etc/rlx-judge-escape', 'w')\n"
        "except OSError:\n    pass\nelse:\n    raise AssertionError('the judge wrote to /etc')\n"
    )
    result = run_sandboxed("import os\nPROGRAM_UID = os.getuid()\n", tests, timeout_s=TIMEOUT_S)
    assert result.passed, result.failures


def test_cause_7_a_test_that_makes_the_judge_huge_scores_zero_without_crashing_anything():
    """The test uses an answer as a size: the judge meets its memory limit (a MemoryError, or
    its death) and the row scores 0; the trainer goes on."""
    program = "def width(n):\n    return 3 << 30\n"
    tests = "line = bytearray(width(3))\nassert len(line) == 3\n"
    result = run_sandboxed(program, tests, timeout_s=TIMEOUT_S, judge_memory_mb=1024)
    assert not result.passed and result.tests_passed == 0
    assert any("MemoryError" in f or "judge" in f for f in result.failures), result.failures
    honest = "def width(n):\n    return n\n"
    assert run_sandboxed(honest, tests, timeout_s=TIMEOUT_S).passed


def test_cause_7_a_judge_that_dies_is_a_zero_with_the_reason_logged(caplog):
    """Test code that kills its own process (the judge's): no verdict, a 0, and a warning
    that says the judge ended without one."""
    tests = "import os, signal\nassert add(2, 3) == 5\nos.kill(os.getpid(), signal.SIGKILL)\n"
    right = "def add(a, b):\n    return a + b\n"
    with caplog.at_level("WARNING", logger="rlx.sandbox.process"):
        result = run_sandboxed(right, tests, timeout_s=TIMEOUT_S)
    assert not result.passed
    assert any("the judge ended without a verdict" in failure for failure in result.failures)
    assert "judge" in caplog.text


def test_cause_7_a_judge_that_loops_in_c_code_is_stopped_at_the_limit():
    """An alarm cannot interrupt one long C call; the launcher's limit holds anyway."""
    program = "def size(n):\n    return 10 ** 9\n"
    tests = "total = sum(range(size(1)))\nassert total == 0\n"
    result = run_sandboxed(program, tests, timeout_s=1.0)
    assert result.status == "timeout" and result.elapsed_s < 1.0 + 3.0


# --- attacks of our own -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "attack"),
    [
        (
            "an exception class named after the test frameworks' skips and failures",
            "class SkipTest(Exception):\n    pass\n"
            "class AssertionError(Exception):\n    pass\n"
            "def add(a, b):\n    raise SkipTest('skip me')\n",
        ),
        (
            "an exception that claims to be a KeyboardInterrupt",
            "import sys\nserver = sys.modules['rlx.sandbox.server']\n"
            "server.describe = lambda error, objects: {'class': {'builtin': 'KeyboardInterrupt'},"
            " 'args': [], 'message': ''}\n"
            "def add(a, b):\n    raise ValueError\n",
        ),
        (
            "GeneratorExit and SystemExit raised during a call",
            "def add(a, b):\n    raise GeneratorExit\n",
        ),
        ("a dunder of the judge's defined by the program", "__rlx_assert__ = lambda *a: True\n"),
        (
            "test functions of the program's own",
            "def test_always():\n    pass\n"
            "import unittest\n"
            "class TestForged(unittest.TestCase):\n    def test_ok(self):\n        pass\n",
        ),
        (
            "a check() of the program's that checks nothing",
            "def check(candidate):\n    return True\n",
        ),
        (
            "a deeply nested answer",
            "def add(a, b):\n    x = []\n    for _ in range(5000):\n        x = [x]\n"
            "    return x\n",
        ),
        (
            "a forged answer frame with a nested exception class hierarchy",
            "import sys\nserver = sys.modules['rlx.sandbox.server']\n"
            "cyclic = {'handle': 7, 'name': 'Loop', 'bases': []}\n"
            "cyclic['bases'].append(cyclic)\n"
            "server.describe = lambda error, objects: {'class': {'handle': 1, 'name': 'X', "
            "'bases': [{'builtin': 'SystemExit'}] * 100}, 'args': [], 'message': ''}\n"
            "def add(a, b):\n    raise ValueError\n",
        ),
        (
            "StopIteration to end the test's generator early",
            "def add(a, b):\n    raise StopIteration\n",
        ),
        (
            "a str subclass that equals everything",
            "class Yes(str):\n    def __eq__(self, other):\n        return True\n"
            "    __hash__ = str.__hash__\n"
            "def add(a, b):\n    return Yes('no')\n",
        ),
        (
            "files planted where the judge's imports would look",
            "import os\n"
            "forge = 'import builtins\\nbuiltins.AssertionError = None\\n'\n"
            "for folder in ('.', '/tmp', os.path.expanduser('~')):\n"
            "    for name in ('pytest.py', 'sitecustomize.py', 'usercustomize.py', 'math.py'):\n"
            "        try:\n"
            "            open(os.path.join(folder, name), 'w').write(forge)\n"
            "        except OSError:\n"
            "            pass\n",
        ),
        (
            "a .pth file written beside the installed packages",
            "import site, sys\n"
            "for folder in site.getsitepackages() + sys.path:\n"
            "    try:\n"
            "        open(folder + '/rlx_forge.pth', 'w').write('import os\\n')\n"
            "    except OSError:\n"
            "        pass\n",
        ),
        (
            "signals and /proc aimed at every other process",
            "import os, signal\n"
            "for name in os.listdir('/proc'):\n"
            "    if name.isdigit() and int(name) != os.getpid():\n"
            "        for signum in (signal.SIGSTOP, signal.SIGKILL):\n"
            "            try:\n                os.kill(int(name), signum)\n"
            "            except OSError:\n                pass\n"
            "        try:\n"
            "            for fd in os.listdir(f'/proc/{name}/fd'):\n"
            "                os.write(os.open(f'/proc/{name}/fd/{fd}', os.O_WRONLY), b'{}')\n"
            "        except OSError:\n"
            "            pass\n",
        ),
        (
            "a huge integer answer",
            "def add(a, b):\n    return 10 ** 50000\n",
        ),
        (
            "an endless generator handed to list()",
            "def add(a, b):\n    return (i for i in iter(int, 1))\n",
        ),
    ],
)
def test_attack_scores_zero(name, attack):
    """Each attack comes with ``add`` wrong (unless it defines its own); the tests use the
    layouts and names each attack aims at."""
    tests = (
        "import pytest\n"
        "def test_sum():\n    assert add(2, 3) == 5\n"
        "def test_all():\n    assert all(add(a, b) == a + b for a, b in [(1, 2), (3, 4)])\n"
        "def test_list():\n    assert list(add(1, 2)) == [3] or add(1, 2) == 3\n"
        "def check(candidate):\n    assert candidate(4, 5) == 9\n"
        "check(add)\n"
    )
    program = attack if "def add" in attack else attack + WRONG_ADD
    assert score(program, tests) == 0.0, name


@needs_read_only_host
def test_attack_writing_into_the_project_or_the_installed_packages_fails():
    """The host is read-only to the sandbox: nothing a program writes reaches the project,
    the interpreter's folders or the installed packages."""
    import site

    targets = [Path(__file__).parent, *map(Path, site.getsitepackages())]
    names = [target / f"rlx_escape_{uuid.uuid4().hex}" for target in targets]
    program = "".join(f"open({str(name)!r}, 'w').write('x')\n" for name in names)
    try:
        result = run_sandboxed(program, timeout_s=TIMEOUT_S)
        assert not result.passed
        assert not any(name.exists() for name in names)
    finally:
        for name in names:
            name.unlink(missing_ok=True)


# --- honest programs ----------------------------------------------------------------------------


def test_honest_integers_past_the_string_limit_cross():
    program = "import math\ndef big(n):\n    return math.factorial(n)\n"
    tests = "import math\nassert big(2000) == math.factorial(2000)\nassert big(2000) % 10 == 0\n"
    assert score(program, tests, partial=False) == 1.0
    assert score("def big(n):\n    return 1\n", tests) == 0.0


BANK = (
    "class InsufficientFunds(Exception):\n"
    "    def __init__(self, needed):\n"
    "        super().__init__(f'needs {needed} more')\n"
    "        self.needed = needed\n"
    "class Account:\n"
    "    def __init__(self, balance):\n        self.balance = balance\n"
    "    def withdraw(self, amount):\n"
    "        if amount > self.balance:\n"
    "            raise InsufficientFunds(amount - self.balance)\n"
    "        self.balance -= amount\n"
    "    def transfer(self, other, amount):\n"
    "        self.withdraw(amount)\n        other.balance += amount\n"
)


@pytest.mark.parametrize(
    "tests",
    [
        "a = Account(10)\n"
        "try:\n    a.withdraw(15)\nexcept InsufficientFunds as error:\n"
        "    assert error.needed == 5 and str(error) == 'needs 5 more'\n"
        "else:\n    raise AssertionError('no error')\n",
        "import pytest\n"
        "def test_withdraw():\n"
        "    with pytest.raises(InsufficientFunds, match='needs 5'):\n"
        "        Account(10).withdraw(15)\n",
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_withdraw(self):\n"
        "        with self.assertRaises(InsufficientFunds):\n"
        "            Account(10).withdraw(15)\n"
        "    def test_transfer(self):\n"
        "        a, b = Account(10), Account(0)\n"
        "        a.transfer(b, 4)\n"
        "        self.assertEqual((a.balance, b.balance), (6, 4))\n"
        "unittest.main()\n",
        "try:\n    Account(1).withdraw(2)\n"
        "except ValueError:\n    raise AssertionError('wrong class')\n"
        "except Exception as error:\n    assert type(error) is InsufficientFunds\n",
    ],
)
def test_honest_programs_own_exception_classes_are_caught_by_name(tests):
    assert score(BANK, tests, partial=False) == 1.0
    wrong = BANK.replace("raise InsufficientFunds(amount - self.balance)", "raise ValueError()")
    assert score(wrong, tests) < 1.0


def test_honest_tests_may_import_the_packages_installed_beside_rlx():
    tests = (
        "import numpy as np\nimport pytest\n"
        "def test_mean():\n"
        "    assert np.isclose(mean([1, 2, 3, 4]), 2.5)\n"
        "    assert mean([1, 2]) == pytest.approx(1.5)\n"
        "    with pytest.raises(ZeroDivisionError):\n        mean([])\n"
    )
    right = "def mean(xs):\n    return sum(xs) / len(xs)\n"
    assert score(right, tests, partial=False) == 1.0
    assert score("def mean(xs):\n    return 2.0\n", tests) == 0.0


def test_honest_batch_of_every_listed_case_scores_one():
    """The honest programs of the issue together, concurrently."""
    cases = [
        ("import math\ndef f():\n    return math.factorial(2000)\n",
         "import math\nassert f() == math.factorial(2000)\n"),
        (BANK, "try:\n    Account(0).withdraw(1)\nexcept InsufficientFunds:\n    pass\n"
               "else:\n    assert False\nassert Account(3).balance == 3\n"),
        ("def f():\n    return [1, 2]\n", "import numpy\nassert numpy.array(f()).sum() == 3\n"),
        ("def f():\n    return 1\n", "import unittest\nclass T(unittest.TestCase):\n"
         "    def test(self):\n        self.assertEqual(f(), 1)\nunittest.main()\n"),
    ]  # fmt: skip
    results = run_many([p for p, _ in cases], [t for _, t in cases], timeout_s=TIMEOUT_S * 2)
    assert [r.status for r in results] == ["passed"] * len(cases), [r.failures for r in results]


def test_honest_program_objects_cross_as_arguments_and_answer_methods():
    tests = (
        "a, b = Account(10), Account(0)\na.transfer(b, 4)\n"
        "assert (a.balance, b.balance) == (6, 4)\n"
    )
    assert score(BANK, tests, partial=False) == 1.0


def test_no_file_of_the_sandbox_is_left_on_the_host():
    before = set(glob.glob("/tmp/rlx-sandbox-*")) | set(glob.glob("/dev/shm/*"))
    run_many(["x = 1\n"] * 4, ["assert x == 1\n"] * 4, timeout_s=TIMEOUT_S)
    after = set(glob.glob("/tmp/rlx-sandbox-*")) | set(glob.glob("/dev/shm/*"))
    assert after <= before
    assert os.path.isdir("/tmp")
