"""The red team's forgeries (wrong programs that were paid), each scoring 0 beside its honest
program scoring 1, plus honest layouts the same fixes made work."""

from __future__ import annotations

import pytest

from rlx.sandbox import python_tests_reward

TIMEOUT_S = 3.0


def score(program: str, tests: str, **kw) -> float:
    kw.setdefault("timeout_s", TIMEOUT_S)
    return python_tests_reward([kw.pop("prompt", "")], [program], [tests], **kw)[0]


def pair(honest: str, wrong: str, tests: str, **kw) -> None:
    assert score(wrong, tests, **kw) == 0.0, "the wrong program was paid"
    assert score(honest, tests, **kw) == 1.0, "the honest program was not paid"


DOUBLE = "def double(x):\n    return 2 * x\n"
WRONG_DOUBLE = "def double(x):\n    return x + 1\n"


@pytest.mark.parametrize(
    "tests",
    [
        "def check(x, want):\n    assert double(x) == want\n"
        "def test_double():\n    for x, want in [(1, 2), (2, 4)]:\n"
        "        yield check, x, want\n",
        "def test_double():\n    assert double(2) == 4\n    yield\n",
        "async def test_double():\n    assert double(2) == 4\n    yield\n",
        "import unittest\nclass T(unittest.TestCase):\n"
        "    def test_double(self):\n        self.assertEqual(double(2), 4)\n        yield\n",
    ],
)
def test_a_test_that_yields_runs_nothing_and_fails(tests):
    assert score(WRONG_DOUBLE, tests) == 0.0
    assert score(DOUBLE, tests) == 0.0  # pytest errors on it; unittest's pass is closed


SORTS_RIGHT = (
    "def merge_sort(xs):\n    return sorted(xs)\ndef quick_sort(xs):\n    return sorted(xs)\n"
)
SORTS_WRONG = "def merge_sort(xs):\n    return sorted(xs)\ndef quick_sort(xs):\n    return xs\n"


@pytest.mark.parametrize(
    "tests",
    [
        "import unittest\nclass TestMerge(unittest.TestCase):\n"
        "    impl = staticmethod(merge_sort)\n"
        "    def test_basic(self):\n        self.assertEqual(self.impl([3, 1, 2]), [1, 2, 3])\n"
        "class TestQuick(TestMerge):\n    impl = staticmethod(quick_sort)\n",
        "class TestMerge:\n    impl = staticmethod(merge_sort)\n"
        "    def test_basic(self):\n        assert self.impl([3, 1, 2]) == [1, 2, 3]\n"
        "class TestQuick(TestMerge):\n    impl = staticmethod(quick_sort)\n",
        "import unittest\nclass Mixin:\n"
        "    def test_basic(self):\n        self.assertEqual(self.impl([3, 1, 2]), [1, 2, 3])\n"
        "class TestMerge(Mixin, unittest.TestCase):\n    impl = staticmethod(merge_sort)\n"
        "class TestQuick(Mixin, unittest.TestCase):\n    impl = staticmethod(quick_sort)\n",
    ],
)
def test_inherited_test_methods_are_collected(tests):
    pair(SORTS_RIGHT, SORTS_WRONG, tests)


def test_an_operator_with_the_tests_data_answered_in_plain_data_is_refused():
    wrong = (
        "class Zero:\n"
        "    def __sub__(self, other):\n        return 0.0\n"
        "    __rsub__ = __sub__\n"
        "    def __xor__(self, other):\n        return set()\n"
        "def mad(xs):\n    return Zero()\n"
        "def primes():\n    return Zero()\n"
    )
    honest = "def mad(xs):\n    return 2 / 3\ndef primes():\n    return {2, 3, 5, 7}\n"
    pair(honest, wrong, "assert abs(mad([1.0, 2.0, 3.0]) - 2 / 3) < 1e-6\n")
    pair(honest, wrong, "assert abs(2 / 3 - mad([1.0, 2.0, 3.0])) < 1e-6\n")
    pair(honest, wrong, "assert primes() ^ {2, 3, 5, 7} == set()\n")


def test_an_operator_giving_a_program_object_still_works():
    vector = (
        "class Vector:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "    def __mul__(self, k):\n        return Vector(self.x * k, self.y * k)\n"
    )
    assert score(vector, "v = Vector(1, 2) * 2\nassert (v.x, v.y) == (2, 4)\n") == 1.0


@pytest.mark.parametrize(
    "fake",
    [
        "class math:\n    @staticmethod\n    def sqrt(x):\n        return 3.0\n",
        "class _M:\n    def sqrt(self, x):\n        return 3.0\nmath = _M()\n",
    ],
)
def test_a_module_name_the_tests_use_is_the_judges_own_import(fake):
    tests = "assert math.sqrt(root(9)) == 3.0\n"
    pair("import math\ndef root(x):\n    return x\n", fake + "def root(x):\n    return 4\n", tests)


def test_a_program_function_named_like_a_module_stays_the_programs():
    program = "def copy(x):\n    return list(x) + [0]\n"
    assert score(program, "assert copy([1]) == [1, 0]\n") == 1.0


def test_the_setup_column_is_trusted_in_the_chat_layout():
    setup = (
        "def encode_shift(s):\n    return ''.join(chr(ord(c) + 1) for c in s)\n"
        "def decode_shift(s):\n    pass\n"
    )
    tests = "assert decode_shift(encode_shift('abc')) == 'abc'\n"
    wrong = "def encode_shift(s):\n    return s\ndef decode_shift(s):\n    return s\n"
    honest = setup.replace("    pass", "    return ''.join(chr(ord(c) - 1) for c in s)")
    kw = {"prompt": "<|user|> complete", "prepend_prompt": False}
    assert score(wrong, tests, **kw, setup=[setup], entry_point=["decode_shift"]) == 0.0
    assert score(honest, tests, **kw, setup=[setup], entry_point=["decode_shift"]) == 1.0


def test_a_timeout_of_the_tests_bounds_a_program_coroutine():
    slow = "import asyncio\nasync def fetch():\n    await asyncio.sleep(1.0)\n    return 1\n"
    fast = "import asyncio\nasync def fetch():\n    await asyncio.sleep(0.01)\n    return 1\n"
    tests = (
        "import asyncio\n"
        "async def main():\n    return await asyncio.wait_for(fetch(), 0.2)\n"
        "assert asyncio.run(main()) == 1\n"
    )
    pair(fast, slow, tests)


def test_a_subtest_error_counts_even_when_another_subtest_skips():
    tests = (
        "import unittest\nclass T(unittest.TestCase):\n    def test_values(self):\n"
        "        for n in (4, -1):\n            with self.subTest(n=n):\n"
        "                if n < 0:\n                    self.skipTest('unspecified')\n"
        "                self.assertEqual(isqrt(n), 2)\n"
    )
    wrong = "def isqrt(n):\n    raise NotImplementedError\n"
    pair("def isqrt(n):\n    return int(n ** 0.5)\n", wrong, tests)


def test_a_builtin_subclass_keeps_its_methods_and_compares_as_its_value():
    money = (
        "class Money(int):\n    def __add__(self, other):\n"
        "        return Money(int(self) + int(other){})\n"
    )
    tests = "m = Money(5) + Money(3)\nassert m == 8\nassert isinstance(m, Money)\n"
    pair(money.format(""), money.format(" + 1"), tests)


def test_builtin_subclasses_of_honest_programs():
    program = (
        "from collections import OrderedDict, namedtuple\nfrom enum import Enum, IntEnum\n"
        "from typing import NamedTuple\n"
        "class Stack(list):\n    def push(self, x):\n        self.append(x)\n"
        "    def peek(self):\n        return self[-1]\n"
        "class LRU(OrderedDict):\n    def __init__(self, cap):\n"
        "        super().__init__()\n        self.cap = cap\n"
        "    def put(self, k, v):\n        self[k] = v\n        self.move_to_end(k)\n"
        "        if len(self) > self.cap:\n            self.popitem(last=False)\n"
        "class Status(str, Enum):\n    A = 'a'\n    B = 'b'\n"
        "class P(IntEnum):\n    LOW = 1\n    HIGH = 2\n"
        "class Pt(namedtuple('Pt', 'x y')):\n    def norm(self):\n"
        "        return abs(self.x) + abs(self.y)\n"
        "class Q(NamedTuple):\n    x: int\n    y: int = 0\n"
    )
    tests = (
        "s = Stack()\ns.push(1)\ns.push(2)\nassert s == [1, 2] and s.peek() == 2\n"
        "s[0] = 9\nassert s == [9, 2]\n"
        "c = LRU(2)\nc.put(1, 1)\nc.put(2, 2)\nc.put(3, 3)\nassert list(c) == [2, 3]\n"
        "assert Status.A == 'a' and Status('b') is Status.B and Status.A.name == 'A'\n"
        "assert P.HIGH > P.LOW and P(2) is P.HIGH and isinstance(P.LOW, P)\n"
        "assert Pt(3, -4).norm() == 7 and Pt(3, -4) == (3, -4)\n"
        "assert Q(1) == (1, 0) and Q(1).y == 0\n"
    )
    assert score(program, tests, partial=False) == 1.0


def test_hash_of_program_objects_is_the_programs_but_salted():
    program = (
        "from dataclasses import dataclass\n@dataclass(frozen=True)\nclass Pt:\n"
        "    x: int\n    y: int\n"
    )
    assert score(program, "d = {Pt(1, 2): 'a'}\nassert d[Pt(1, 2)] == 'a'\n") == 1.0
    assert score(program, "assert hash(Pt(1, 2)) == hash((1, 2))\n") == 0.0


def test_a_program_object_is_never_none():
    program = "class Node:\n    pass\ndef make():\n    return Node()\n"
    assert score(program, "assert make() != None\nassert not (make() == None)\n") == 1.0


# --- honest programs that scored wrong (each: the sandbox agrees with plain Python) -------------


def test_a_module_the_program_names_is_imported_only_from_the_fixed_list():
    program = (
        "import types\nfake = types.ModuleType('unittest.__main__')\n"
        "def get():\n    return fake\n" + DOUBLE
    )
    tests = (
        "import sys\ntry:\n    get()\nexcept Exception:\n    pass\n"
        "assert 'unittest.__main__' not in sys.modules\nassert double(2) == 4\n"
    )
    assert score(program, tests) == 1.0
    assert score(program.replace("2 * x", "x + 1"), tests) == 0.0


def test_a_module_on_the_list_still_crosses():
    program = "import math as m\ndef lib():\n    return m\n"
    assert score(program, "assert lib().sqrt(16) == 4\n") == 1.0


ARGPARSE = (
    "import argparse, sys\n"
    "def parse(argv):\n    p = argparse.ArgumentParser()\n"
    "    p.add_argument('--n', type=int, required=True)\n    return p.parse_args(argv).n\n"
    "def leave(code):\n    sys.exit(code)\n"
)


def test_system_exit_from_a_call_is_raised_in_the_tests_and_the_program_answers_on():
    tests = (
        "import pytest\ndef test_ok():\n    assert parse(['--n', '3']) == 3\n"
        "def test_bad():\n    with pytest.raises(SystemExit):\n        parse(['--n', 'x'])\n"
        "def test_code():\n    with pytest.raises(SystemExit) as info:\n        leave(3)\n"
        "    assert info.value.code == 3\n    assert parse(['--n', '5']) == 5\n"
    )
    assert score(ARGPARSE, tests) == 1.0
    # a SystemExit the tests do not expect fails the test, as pytest fails it
    assert score(ARGPARSE, "def test_exit():\n    leave(0)\n") == 0.0
    wrong = ARGPARSE.replace("return p.parse_args(argv).n", "return 3")
    assert score(wrong, tests) == 0.0


TEST_OBJECTS_PROGRAM = (
    "def max_depth(root):\n    if root is None:\n        return 0\n"
    "    return 1 + max(max_depth(root.left), max_depth(root.right))\n"
    "def reverse(head):\n    prev = None\n    while head:\n"
    "        head.next, prev, head = prev, head, head.next\n    return prev\n"
    "def tick(clock):\n    clock.advance(5)\n    return clock.now()\n"
    "def use(m):\n    m.send('hi')\n    return len(list(iter(m.items)))\n"
    "def uniq(nodes):\n    return len(set(nodes))\n"
    "def smallest(items):\n    import heapq\n    return heapq.nsmallest(1, items)[0]\n"
)
TEST_OBJECTS_TESTS = (
    "from unittest.mock import Mock\n"
    "class TreeNode:\n    def __init__(self, val=0, left=None, right=None):\n"
    "        self.val, self.left, self.right = val, left, right\n"
    "class ListNode:\n    def __init__(self, val, next=None):\n"
    "        self.val, self.next = val, next\n"
    "class FakeClock:\n    def __init__(self):\n        self.t = 0\n"
    "    def advance(self, s):\n        self.t += s\n    def now(self):\n        return self.t\n"
    "class Item:\n    def __init__(self, k):\n        self.k = k\n"
    "    def __lt__(self, o):\n        return self.k < o.k\n"
    "assert max_depth(TreeNode(1, TreeNode(2), TreeNode(3, TreeNode(4)))) == 3\n"
    "head = ListNode(1, ListNode(2, ListNode(3)))\nnew = reverse(head)\n"
    "assert new.val == 3 and new.next.val == 2 and head.next is None\n"
    "c = FakeClock()\nassert tick(c) == 5 and c.t == 5\n"
    "m = Mock()\nm.items = [1, 2]\nassert use(m) == 2\n"
    "m.send.assert_called_once_with('hi')\n"
    "a = Item(1)\nassert uniq([a, a, Item(2)]) == 2\n"
    "assert smallest([Item(3), a, Item(2)]) is a\n"
)


def test_the_tests_objects_cross_as_handles_the_program_reads_and_changes():
    assert score(TEST_OBJECTS_PROGRAM, TEST_OBJECTS_TESTS) == 1.0
    wrong = TEST_OBJECTS_PROGRAM.replace("return 1 + max(", "return 2 + max(")
    assert score(wrong, TEST_OBJECTS_TESTS) == 0.0


def test_the_program_reaches_nothing_of_the_judge_through_the_tests_objects():
    hostile = (
        "def solve(node):\n"
        "    for reach in (lambda: node.__class__.__init__.__globals__,\n"
        "                  lambda: node.check.__globals__, lambda: node.__dict__,\n"
        "                  lambda: vars(node)):\n"
        "        try:\n            reach()['expected'] = 1\n        except Exception:\n"
        "            pass\n"
        "    try:\n        node.check.x = 1\n    except Exception:\n        pass\n"
        "    return 0\n"
    )
    tests = (
        "class Node:\n    def __init__(self):\n        self.val = 5\n"
        "    def check(self):\n        return 1\n"
        "expected = 5\nassert solve(Node()) == expected\n"
    )
    assert score(hostile, tests) == 0.0
    assert score("def solve(node):\n    return node.val\n", tests) == 1.0


def test_the_tests_read_the_programs_globals_as_they_are_now():
    counter = "counter = 0\ndef bump():\n    global counter\n    counter += 1\n"
    tests = (
        "bump(); bump()\nassert counter == 2\n"
        "def test_more():\n    bump()\n    assert counter == 3\n"
    )
    assert score(counter, tests) == 1.0
    assert score(counter.replace("+= 1", "+= 2"), tests) == 0.0
    log = "log = []\ndef record(x):\n    log.append(x)\n"
    tests = (
        "record(1)\nassert log == [1]\nlog.append(5)\nrecord(2)\nassert log == [1, 5, 2]\n"
        "def test_local(log=[7]):\n    assert log == [7]\n"
    )
    assert score(log, tests) == 1.0
    assert score(log.replace("log.append(x)", "pass"), tests) == 0.0


def test_a_system_exit_swallowed_by_tests_that_never_name_it_fails():
    tests = (
        "def test_rejects_none():\n    try:\n        add(None, 1)\n    except:\n        return\n"
        "    raise AssertionError('add accepted None')\n"
    )
    assert score("import sys\ndef add(a, b):\n    sys.exit(0)\n", tests) == 0.0
    assert score("def add(a, b):\n    return a + b\n", tests) == 1.0
