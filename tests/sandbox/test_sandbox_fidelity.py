"""The sandbox judges honest programs as plain Python does, and refuses the forgeries of issue
#46 that plain Python (or the judge before it) let pass.

Plain execution runs the program and its tests in one namespace, a module of its own
(``exec(program + "\\n" + tests)``, plus ``check(entry_point)`` for HumanEval rows), in a fresh
interpreter whose working folder holds the program as ``solution.py``; it passes when it exits
0. Each honest case must pass both ways; each forgery must score 0 in the sandbox, and where
plain Python passes it the test says so (these are the judge's only intended disagreements
with plain Python, listed in :mod:`rlx.sandbox.judge`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlx.sandbox import python_tests_reward, run_sandboxed

TIMEOUT_S = 10.0

RUNNER = """\
import sys, types
module = types.ModuleType("plain_run")
sys.modules["plain_run"] = module
source = open("run.py").read()
exec(compile(source, "run.py", "exec"), module.__dict__)
"""


def plain(program: str, tests: str, folder: Path, entry_point: str | None = None) -> bool:
    """Whether ``program`` and ``tests`` pass when run together, plainly."""
    source = program + "\n" + tests
    if entry_point:
        source += f"\ncheck({entry_point})\n"
    (folder / "solution.py").write_text(program)
    (folder / "run.py").write_text(source)
    (folder / "runner.py").write_text(RUNNER)
    done = subprocess.run(
        [sys.executable, "runner.py"], cwd=folder, capture_output=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return done.returncode == 0


def sandbox(program: str, tests: str, entry_point: str | None = None):
    return run_sandboxed(program, tests, entry_point=entry_point, timeout_s=TIMEOUT_S)


def code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# --- honest programs: they pass in the sandbox as in plain Python --------------------------------

HONEST = {
    "dataclass": (
        """
        from dataclasses import dataclass

        @dataclass
        class Point:
            x: int
            y: int

        def midpoint(a, b):
            return Point((a.x + b.x) // 2, (a.y + b.y) // 2)
        """,
        """
        assert midpoint(Point(0, 0), Point(2, 4)) == Point(1, 2)
        assert midpoint(Point(0, 0), Point(2, 4)) != Point(1, 3)
        assert midpoint(Point(0, 0), Point(2, 2)).x == 1
        """,
    ),
    "pickle": (
        """
        import pickle

        class Node:
            def __init__(self, value):
                self.value = value

        def clone(node):
            return pickle.loads(pickle.dumps(node))
        """,
        """
        original = Node(3)
        copy = clone(original)
        assert copy.value == 3 and copy is not original
        """,
    ),
    "main block": (
        """
        def solve(n):
            return n * 2

        if __name__ == "__main__":
            print(solve(int(input())))
        """,
        "assert solve(4) == 8\n",
    ),
    "BaseException name": (
        """
        import asyncio
        from asyncio import CancelledError

        def answer():
            return 42

        def cancel():
            raise CancelledError()
        """,
        """
        import asyncio
        import pytest
        assert answer() == 42
        with pytest.raises(asyncio.CancelledError):
            cancel()
        """,
    ),
    "threads": (
        """
        def square(x):
            return x * x
        """,
        """
        from concurrent.futures import ThreadPoolExecutor
        import threading
        with ThreadPoolExecutor(max_workers=8) as pool:
            assert list(pool.map(square, range(50))) == [x * x for x in range(50)]
        seen = []
        threads = [threading.Thread(target=lambda i=i: seen.append(square(i))) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(seen) == [x * x for x in range(8)]
        """,
    ),
    "redirect_stdout": (
        """
        import sys

        def greet(name):
            print(f"hello {name}")
            print("warning", file=sys.stderr)
            return len(name)
        """,
        """
        import contextlib, io
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            assert greet("ada") == 3
        assert out.getvalue() == "hello ada\\n" and err.getvalue() == "warning\\n"
        """,
    ),
    "capsys": (
        """
        def greet(name):
            print(f"hello {name}")
        """,
        """
        def test_greet(capsys):
            greet("bob")
            assert capsys.readouterr().out == "hello bob\\n"
        """,
    ),
    "isinstance and type": (
        """
        class Shape:
            pass

        class Square(Shape):
            def __init__(self, side):
                self.side = side

        class Stack:
            def __init__(self):
                self.items = []

            def push(self, item):
                self.items.append(item)

            def __len__(self):
                return len(self.items)

        def make(side):
            return Square(side)
        """,
        """
        square = make(2)
        assert isinstance(square, Square) and isinstance(square, Shape)
        assert type(square) == Square and type(square) is Square
        assert type(square).__name__ == "Square" and issubclass(Square, Shape)
        assert not issubclass(Shape, Square) and not isinstance(square, Stack)
        stack = Stack()
        assert isinstance(stack, Stack) and hasattr(stack, "push") and not hasattr(stack, "pop")
        assert not callable(stack) and callable(Stack) and callable(stack.push)
        assert hasattr(stack, "__len__") and not hasattr(square, "__len__")
        """,
    ),
    "async": (
        """
        import asyncio

        async def double(x):
            await asyncio.sleep(0)
            return 2 * x

        async def countdown(n):
            while n:
                yield n
                n -= 1
        """,
        """
        import asyncio
        assert asyncio.run(double(3)) == 6

        async def collect():
            return [x async for x in countdown(3)]

        assert asyncio.run(collect()) == [3, 2, 1]

        async def test_double():
            assert await double(5) == 10
        """,
    ),
    "library values": (
        """
        import collections, datetime, decimal, enum, fractions

        Pair = collections.namedtuple("Pair", "left right")

        class Color(enum.Enum):
            RED = 1
            GREEN = 2

        def pair():
            return Pair(1, 2)

        def counts(text):
            return collections.Counter(text)

        def ordered():
            return collections.OrderedDict([("b", 1), ("a", 2)])

        def grouped():
            groups = collections.defaultdict(list)
            groups["x"].append(1)
            return groups

        def queue():
            return collections.deque([1, 2, 3], maxlen=5)

        def money():
            return decimal.Decimal("1.10") + decimal.Decimal("2.20")

        def third():
            return fractions.Fraction(1, 3)

        def moment():
            return datetime.datetime(2024, 2, 29, 12, 30), datetime.date(2024, 1, 1)

        def gap():
            return datetime.timedelta(days=1, seconds=5)

        def favourite():
            return Color.RED
        """,
        """
        import collections, datetime, decimal, fractions
        p = pair()
        assert p == (1, 2) and p.left == 1 and p._fields == ("left", "right")
        assert type(p).__name__ == "Pair" and isinstance(p, Pair) and p == Pair(1, 2)
        assert counts("aab") == collections.Counter("aab")
        assert type(counts("a")) is collections.Counter
        assert counts("aab").most_common(1) == [("a", 2)]
        assert list(ordered()) == ["b", "a"] and type(ordered()) is collections.OrderedDict
        assert grouped()["y"] == [] and type(grouped()) is collections.defaultdict
        assert queue().popleft() == 1 and queue().maxlen == 5
        assert money() == decimal.Decimal("3.30") and str(money()) == "3.30"
        assert third() == fractions.Fraction(1, 3) and third().denominator == 3
        when, day = moment()
        assert when.year == 2024
        assert when - datetime.timedelta(hours=12, minutes=30) == datetime.datetime(2024, 2, 29)
        assert day == datetime.date(2024, 1, 1) and gap().total_seconds() == 86405
        assert favourite() is Color.RED and favourite() == Color.RED and favourite() != Color.GREEN
        assert favourite().name == "RED" and isinstance(favourite(), Color)
        assert [c.name for c in Color] == ["RED", "GREEN"]
        """,
    ),
    "numpy": (
        """
        import numpy as np

        def grid():
            return np.arange(6, dtype=np.int64).reshape(2, 3)

        def total(a):
            return int(a.sum())
        """,
        """
        import numpy as np
        assert np.array_equal(grid(), np.arange(6).reshape(2, 3))
        assert grid().shape == (2, 3) and grid().dtype == np.int64
        assert total(np.ones(4)) == 4
        assert np.allclose(grid() * 0.5, [[0, 0.5, 1], [1.5, 2, 2.5]])
        """,
    ),
    "import solution": (
        """
        def add(a, b):
            return a + b
        """,
        """
        from solution import add as plus
        import solution
        assert plus(1, 2) == 3 and solution.add(2, 2) == 4
        """,
    ),
    "identity": (
        """
        class Config:
            pass

        class Node:
            def __init__(self, value):
                self.value = value
                self.next = None
        """,
        """
        assert Config() is not Config()
        a, b = Node(1), Node(2)
        a.next = b
        assert a.next is b and a.next.value == 2 and a.next is not a
        """,
    ),
    "generator": (
        """
        def upto(n):
            yield from range(n)
        """,
        """
        assert list(upto(3)) == [0, 1, 2]
        it = upto(2)
        assert next(it) == 0 and next(it) == 1 and next(it, "end") == "end"
        assert all(x < 5 for x in upto(5))
        """,
    ),
    "arguments changed in place": (
        """
        def add_item(items, x):
            items.append(x)

        def fill(grid, value):
            for row in grid:
                row[:] = [value] * len(row)
            grid.append(grid[0])

        def sort_in_place(xs):
            xs.sort()
            return xs

        def record(counts, seen, buffer, queue):
            counts["a"] = counts.get("a", 0) + 1
            seen.add(3)
            buffer.extend(b"yz")
            queue.append(2)

        def link(xs):
            xs.append(xs)
        """,
        """
        import collections
        basket = []
        add_item(basket, "apple")
        add_item(basket, "pear")
        assert basket == ["apple", "pear"]
        grid = [[0, 0], [0, 0]]
        row = grid[0]
        fill(grid, 7)
        assert row == [7, 7] and grid[2] is row and len(grid) == 3
        xs = [3, 1, 2]
        assert sort_in_place(xs) is xs and xs == [1, 2, 3]
        counts, seen, buffer, queue = {}, {1}, bytearray(b"x"), collections.deque([1])
        record(counts, seen, buffer, queue)
        assert counts == {"a": 1} and seen == {1, 3} and buffer == bytearray(b"xyz")
        assert list(queue) == [1, 2]
        looped = [1]
        link(looped)
        assert looped[1] is looped
        """,
    ),
    "containers of a program object": (
        """
        class Recorder:
            log = []

            def __init__(self):
                self.events = []
                self.tags = {"a": 1}
                self.seen = set()

            def __enter__(self):
                self.events.append("enter")
                return self

            def __exit__(self, *exc):
                self.events.append("exit")
                return False
        """,
        """
        r = Recorder()
        with r as inside:
            inside.events.append("body")
        assert r.events == ["enter", "body", "exit"]
        r.events.extend(x for x in ["x", "y"])
        r.events.insert(0, "first")
        assert r.events.pop() == "y" and r.events[0] == "first"
        r.events.sort()
        assert r.events == sorted(["first", "enter", "body", "exit", "x"])
        r.tags["b"] = 2
        r.tags.update(c=3)
        del r.tags["a"]
        assert r.tags == {"b": 2, "c": 3}
        r.seen.add(1)
        r.seen |= {2}
        assert r.seen == {1, 2}
        Recorder.log.append("class")
        assert Recorder.log == ["class"]
        """,
    ),
    "callbacks": (
        """
        from concurrent.futures import ThreadPoolExecutor

        handlers = []

        def apply_twice(f, x):
            return f(f(x))

        def sort_by(xs, key):
            return sorted(xs, key=key)

        def register(handler):
            handlers.append(handler)

        def fire(event):
            return [handler(event) for handler in handlers]

        def parallel_map(f, xs):
            with ThreadPoolExecutor(max_workers=4) as pool:
                return list(pool.map(f, xs))

        def safely(f, x):
            try:
                return f(x)
            except ZeroDivisionError:
                return "caught"

        def make(kind, value):
            return kind(value)

        def named(f):
            return f.__name__

        def talk(f):
            print("a")
            f()
            print("c")
        """,
        """
        import contextlib, io
        assert apply_twice(lambda v: v + 1, 3) == 5
        assert apply_twice(str.upper, "a") == "A"
        assert sort_by([3, 1, 2], key=lambda x: -x) == [3, 2, 1]
        assert sort_by(["bb", "a"], key=len) == ["a", "bb"]
        seen = []
        def on_event(event):
            seen.append(event)
            return event * 2
        register(on_event)
        assert fire(4) == [8] and seen == [4] and named(on_event) == "on_event"
        class Scale:
            def __init__(self, k):
                self.k = k
            def times(self, x):
                return self.k * x
        assert apply_twice(Scale(3).times, 1) == 9
        assert apply_twice(lambda y: apply_twice(lambda z: z * 2, y), 1) == 16
        assert parallel_map(lambda v: v * v, range(10)) == [v * v for v in range(10)]
        assert safely(lambda v: 1 / v, 0) == "caught"
        try:
            safely(lambda v: int("x"), 0)
        except ValueError:
            pass
        else:
            raise AssertionError("no ValueError")
        assert make(int, "5") == 5 and make(tuple, [1]) == (1,)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            talk(lambda: print("b"))
        assert out.getvalue() == "a\\nb\\nc\\n"
        """,
    ),
    "len and bool": (
        """
        class Playlist:
            def __init__(self, *songs):
                self.songs = list(songs)

            def __len__(self):
                return len(self.songs)

        class Flag:
            def __init__(self, on):
                self.on = on

            def __bool__(self):
                return self.on
        """,
        """
        assert len(Playlist("a", "b", "c")) == 3
        assert Playlist("a") and not Playlist()
        assert Flag(True) and not Flag(False)
        assert [len(Playlist(*"ab"))] == [2]
        """,
    ),
    "pickle and copy in the tests": (
        """
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class Token:
            kind: str
            text: str

        class Bag:
            def __init__(self):
                self.items = []

        def tokenize(s):
            return [Token("num" if w.isdigit() else "word", w) for w in s.split()]
        """,
        """
        import copy, pickle
        tokens = tokenize("add 2 3")
        copied = pickle.loads(pickle.dumps(tokens))
        assert [t.kind for t in copied] == ["word", "num", "num"]
        assert copied[0] == tokens[0] and copied[0] is not tokens[0]
        bag = Bag()
        bag.items.append(1)
        deep, shallow = copy.deepcopy(bag), copy.copy(bag)
        deep.items.append(2)
        assert bag.items == [1] and deep.items == [1, 2] and shallow.items == [1]
        assert copy.copy(tokens[1]).text == "2"
        """,
    ),
    "dataclasses functions": (
        """
        from dataclasses import dataclass, field

        @dataclass
        class Point:
            x: int
            tags: list = field(default_factory=list)

        def origin():
            return Point(0)
        """,
        """
        import dataclasses
        from dataclasses import asdict, astuple, fields, replace
        p = Point(1, ["a"])
        assert asdict(p) == {"x": 1, "tags": ["a"]} and astuple(p) == (1, ["a"])
        assert [f.name for f in fields(Point)] == ["x", "tags"]
        assert replace(p, x=5).x == 5 and dataclasses.is_dataclass(origin())
        """,
    ),
    "unbound test imports": (
        """
        import math

        def area(r):
            return math.pi * r * r
        """,
        "assert math.isclose(area(1), 3.14159, rel_tol=1e-4)\n",
    ),
}


@pytest.mark.parametrize("case", list(HONEST))
def test_an_honest_program_passes_in_the_sandbox_as_in_plain_python(case, tmp_path):
    program, tests = (code(text) for text in HONEST[case])
    assert plain(program, tests, tmp_path), "plain Python fails it: the case is wrong"
    result = sandbox(program, tests)
    assert result.passed, (result.failures, result.output[-500:])


def test_the_program_is_imported_as_a_real_module_named_solution():
    program = "import sys\nNAME = __name__\nIN_MODULES = sys.modules[__name__].NAME == NAME\n"
    result = sandbox(program, "assert NAME == 'solution' and IN_MODULES\n")
    assert result.passed, result.failures


# --- forgeries: they score 0 ---------------------------------------------------------------------


def test_stop_iteration_from_a_call_does_not_end_the_tests_loop(tmp_path):
    program = "def is_prime(n):\n    raise StopIteration\n"
    for tests in (
        "assert all(map(is_prime, [2, 3, 5, 7]))\n",
        "assert list(filter(is_prime, [4])) == []\n",
        "assert list(zip([1], map(is_prime, [2]))) == [(1, True)] or True\n",
    ):
        if "zip" not in tests:
            assert plain(program, tests, tmp_path)  # plain Python passes it
        result = sandbox(program, tests)
        assert not result.passed and "StopIteration" in " ".join(result.failures)
    honest = "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))\n"
    assert sandbox(honest, "assert all(map(is_prime, [2, 3, 5, 7]))\n").passed


def test_stop_async_iteration_from_a_call_is_a_runtime_error(tmp_path):
    """So that it cannot end an ``async for`` of the tests' early either (plain Python lets it
    escape as itself)."""
    program = "async def fetch():\n    raise StopAsyncIteration\n"
    tests = code(
        """
        import asyncio
        try:
            asyncio.run(fetch())
        except RuntimeError as error:
            assert isinstance(error.__cause__, StopAsyncIteration)
        else:
            assert False, "no RuntimeError"
        """
    )
    assert not plain(program, tests, tmp_path)
    result = sandbox(program, tests)
    assert result.passed, result.failures


CYCLIC_PROMPT = code(
    '''
    def encode_cyclic(s: str):
        """Cycle each group of three characters."""
        groups = [s[(3 * i):min((3 * i + 3), len(s))] for i in range((len(s) + 2) // 3)]
        groups = [(group[1:] + group[0]) if len(group) == 3 else group for group in groups]
        return "".join(groups)


    def decode_cyclic(s: str):
        """Take a string encoded with encode_cyclic and return the decoded string."""
    '''
)
CYCLIC_TESTS = code(
    """
    def check(candidate):
        for text in ["abc", "hello world", "abcdefg"]:
            assert candidate(encode_cyclic(text)) == text
    """
)


@pytest.mark.filterwarnings("ignore::rlx.sandbox.SandboxWarning")
def test_a_completion_cannot_redefine_the_prompts_helpers(tmp_path):
    """HumanEval 38: the completion redefines ``encode_cyclic`` as the identity, so that a
    ``decode_cyclic`` returning its input passes ``check``."""
    forged = "    return s\n\n\nencode_cyclic = lambda s: s\n"
    honest = "    return encode_cyclic(encode_cyclic(s))\n"
    program = CYCLIC_PROMPT + forged
    assert plain(program, CYCLIC_TESTS, tmp_path, "decode_cyclic")  # plain Python passes it
    scores = python_tests_reward(
        [CYCLIC_PROMPT] * 2, [forged, honest], [CYCLIC_TESTS] * 2,
        entry_point=["decode_cyclic", "decode_cyclic"], timeout_s=TIMEOUT_S,
        allow_unisolated=True,  # the verdict is what is tested here, not the isolation
    )  # fmt: skip
    assert scores == [0.0, 1.0]
    # with no entry point given, the prompt's last function is the one the completion finishes
    scores = python_tests_reward(
        [CYCLIC_PROMPT] * 2, [forged, honest], [CYCLIC_TESTS + "check(decode_cyclic)\n"] * 2,
        timeout_s=TIMEOUT_S, allow_unisolated=True,
    )  # fmt: skip
    assert scores == [0.0, 1.0]


@pytest.mark.parametrize(
    "program",
    [
        "import math\nmath.isclose = lambda *a, **k: True\ndef area(r):\n    return 3.0\n",
        "import types\nmath = types.ModuleType('math')\nmath.isclose = lambda *a, **k: True\n"
        "def area(r):\n    return 3.0\n",
    ],
    ids=["patched", "fake"],
)
def test_names_the_tests_use_unbound_are_the_judges_own_modules(program, tmp_path):
    tests = "assert math.isclose(area(1), 3.14159, rel_tol=1e-4)\n"
    assert plain(program, tests, tmp_path)  # plain Python passes it
    assert not sandbox(program, tests).passed


def test_partial_credit_counts_tests_as_written():
    """A wrong sort returning zeros passes every run of a loop of asserts: the loop is one
    test, as each assert statement is (plain Python's count of executed asserts would give
    nearly 1)."""
    program = "def sort_list(xs):\n    return [0] * len(xs)\n"
    tests = code(
        """
        data = list(range(2000, 0, -1))
        out = sort_list(data)
        assert len(out) == len(data)
        for a, b in zip(out, out[1:]):
            assert a <= b
        assert out == sorted(data)
        """
    )
    result = sandbox(program, tests)
    assert not result.passed
    assert (result.tests_passed, result.tests_total) == (2, 3)
    honest = "def sort_list(xs):\n    return sorted(xs)\n"
    assert sandbox(honest, tests).share_passed == 1.0


def test_a_loop_of_asserts_fails_as_one_test_even_when_later_runs_pass():
    program = "def double(x):\n    return 0 if x == 1 else 2 * x\n"
    tests = code(
        """
        for x in [0, 1, 2, 3]:
            try:
                assert double(x) == 2 * x
            except AssertionError:
                pass
        """
    )
    result = sandbox(program, tests)
    assert (result.tests_passed, result.tests_total) == (0, 1)


def test_a_test_function_is_one_test_however_many_asserts_it_runs():
    program = "def double(x):\n    return 2 * x if x < 3 else 0\n"
    tests = code(
        """
        def test_small():
            for x in range(3):
                assert double(x) == 2 * x

        def test_large():
            for x in range(10):
                assert double(x) == 2 * x
        """
    )
    result = sandbox(program, tests)
    assert (result.tests_passed, result.tests_total) == (1, 2)


def test_callable_answers_from_the_objects_real_type(tmp_path):
    program = "class Yes:\n    pass\ndef make_adder(n):\n    return Yes()\n"
    tests = "assert callable(make_adder(1))\n"
    assert not plain(program, tests, tmp_path)  # plain Python fails it too
    assert not sandbox(program, tests).passed
    honest = "def make_adder(n):\n    return lambda x: x + n\n"
    assert sandbox(honest, tests + "assert make_adder(2)(3) == 5\n").passed


def test_an_object_that_equals_everything_still_scores_zero():
    """(``assert solve(1)`` is not among these: ``bool`` of a program object is the program's
    answer, as returning ``True`` would be; it tells the program nothing about the tests.)"""
    program = code(
        """
        class Yes:
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False
            def __bool__(self):
                return True
            def __iter__(self):
                return iter([])
            def __contains__(self, item):
                return True

        def solve(x):
            return Yes()
        """
    )
    for tests in (
        "assert solve(1) == 2\n",
        "assert not (solve(1) != 2)\n",
        "assert 2 in solve(1)\n",
        "assert [solve(1)] == [2]\n",
        "assert solve(1) == solve(2) and solve(3) == 3\n",
    ):
        assert not sandbox(program, tests).passed, tests


def test_in_on_a_container_of_the_program_agrees_with_its_own_contains(tmp_path):
    """`x in obj` for a program class with `__iter__` and `__contains__`: plain Python asks
    `__contains__`, so a wrong one fails there and must fail here (the judge once answered from
    the items alone and passed it); an honest one passes; one answering True for anything
    still finds nothing its items do not hold."""
    cls = "class Bag:\n    def __init__(self, *xs):\n        self.xs = list(xs)\n"
    cls += "    def __iter__(self):\n        return iter(self.xs)\n"
    honest = cls + "    def __contains__(self, x):\n        return x in self.xs\n"
    wrong = cls + "    def __contains__(self, x):\n        return x not in self.xs\n"
    anything = cls + "    def __contains__(self, x):\n        return True\n"
    tests = "b = Bag('a', 'b')\nassert 'b' in b\nassert 'z' not in b\n"
    assert plain(honest, tests, tmp_path) and sandbox(honest, tests).passed
    assert not plain(wrong, tests, tmp_path) and not sandbox(wrong, tests).passed
    forged = "b = Bag('a')\nassert 'z' in b\n"
    assert plain(anything, forged, tmp_path)  # plain Python pays it
    assert not sandbox(anything, forged).passed


# --- pytest fixtures: as pytest gives them -------------------------------------------------------


def plain_pytest(program: str, tests: str, folder: Path) -> bool:
    """Whether ``tests`` pass under pytest itself, beside the program as ``solution.py``."""
    (folder / "solution.py").write_text(program)
    (folder / "test_case.py").write_text("from solution import *\n" + tests)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_case.py"],
        cwd=folder, capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return done.returncode == 0


def test_pytest_fixtures_are_given_as_pytest_gives_them(tmp_path):
    program = "def word_count(text):\n    return len(text.split())\n"
    tests = code(
        """
        import os
        import pytest

        torn_down = []

        @pytest.fixture
        def sentence():
            return "the quick brown fox"

        @pytest.fixture
        def saved(sentence, tmp_path):
            path = tmp_path / "text"
            path.write_text(sentence)
            yield path.read_text()
            torn_down.append(True)

        @pytest.fixture(params=[1, 2])
        def n(request):
            return request.param

        def test_counts(sentence):
            assert word_count(sentence) == 4

        def test_saved(saved, monkeypatch, capsys):
            monkeypatch.setenv("RLX_FIXTURE", "1")
            print(word_count(saved))
            assert os.environ["RLX_FIXTURE"] == "1" and capsys.readouterr().out == "4\\n"

        def test_teardown_ran():
            assert torn_down == [True] and "RLX_FIXTURE" not in os.environ

        @pytest.mark.parametrize("extra", ["a", "a b"])
        def test_parametrized(extra, sentence, n):
            assert word_count(sentence + " " + extra) == 4 + len(extra.split()) and n in (1, 2)

        class TestInAClass:
            @pytest.fixture
            def words(self):
                return ["x", "y"]

            def test_words(self, words):
                assert word_count(" ".join(words)) == 2
        """
    )
    assert plain_pytest(program, tests, tmp_path), "pytest fails it: the case is wrong"
    result = sandbox(program, tests)
    assert result.passed and result.tests_total == 8, (result.failures, result.tests_total)
    wrong = "def word_count(text):\n    return len(text)\n"
    assert not sandbox(wrong, tests).passed


# --- the new channels, attacked: each verdict is the one plain Python gives, or a 0 --------------


def test_a_program_cannot_call_back_a_function_the_tests_never_gave_it():
    """A forged callback number (written straight to the channel) breaks the program's channel:
    the judge runs nothing but the tests' own functions, by the numbers it gave them."""
    program = code(
        """
        import json, os, struct

        def attack(f):
            message = json.dumps({"callback": 99, "args": [], "kwargs": []}).encode()
            os.write(4, struct.pack(">I", len(message)) + message)
            return os.read(3, 100)
        """
    )
    result = sandbox(program, "assert attack(lambda: 1) is not None\nassert 1 + 1 == 2\n")
    assert not result.passed and result.tests_passed <= 1
    assert "never gave it" in " ".join(result.failures), result.failures


def test_a_program_that_calls_back_without_end_meets_the_time_limit():
    program = "def spam(f):\n    for i in range(10**6):\n        f(i)\n    return 1\n"
    result = run_sandboxed(program, "assert spam(lambda i: i) == 1\n", timeout_s=2.0)
    assert result.status == "timeout" and not result.passed


def test_recursion_through_callbacks_is_bounded_as_plain_python_bounds_it(tmp_path):
    program = "def bounce(f, x):\n    return f(x)\n"
    tests = code(
        """
        def again(x):
            return bounce(again, x)

        def down(n):
            return bounce(down, n - 1) if n else "done"

        assert down(30) == "done"
        try:
            bounce(again, 1)
        except RecursionError:
            pass
        else:
            raise AssertionError("no RecursionError")
        """
    )
    assert plain(program, tests, tmp_path)
    result = sandbox(program, tests)
    assert result.passed, result.failures


@pytest.mark.parametrize(
    ("body", "tests"),
    [
        ("def __len__(self):\n        return '3'", "assert len(make()) == 3\n"),
        ("def __len__(self):\n        return -1", "assert len(make()) == -1\n"),
        ("def __len__(self):\n        return 2**70", "assert len(make()) > 0\n"),
        ("def __bool__(self):\n        return 1", "assert make()\n"),
    ],
    ids=["len-str", "len-negative", "len-huge", "bool-int"],
)
def test_len_and_bool_answers_of_the_wrong_type_fail_as_in_plain_python(body, tests, tmp_path):
    program = f"class Odd:\n    {body}\n\ndef make():\n    return Odd()\n"
    assert not plain(program, tests, tmp_path)
    result = sandbox(program, tests)
    assert not result.passed and result.tests_passed == 0, result.failures


@pytest.mark.parametrize(
    "body",
    [
        "xs.extend(range(2_000_000))",  # over the wire's message size
        "for _ in range(500):\n        xs.append([])\n        xs = xs[-1]",  # over its depth
    ],
    ids=["huge", "deep"],
)
def test_an_argument_changed_past_the_wires_caps_fails_the_call(body):
    program = f"def grow(xs):\n    {body}\n"
    result = sandbox(program, "a = []\ngrow(a)\nassert a\n")
    assert not result.passed and result.tests_passed == 0, result.failures


def test_an_argument_changed_into_a_program_object_is_a_handle_and_answers_nothing():
    program = code(
        """
        class Yes:
            def __eq__(self, other):
                return True

        def fill(xs):
            xs.append(Yes())
        """
    )
    result = sandbox(program, "a = []\nfill(a)\nassert a == [5]\n")
    assert not result.passed and result.tests_passed == 0, result.failures


def test_a_program_object_that_pickles_into_another_object_is_judged_as_that_object(tmp_path):
    """Its pickle round trip is the program's; what comes back is plain data (judged like a
    return value, as plain Python judges it) or a handle (whose ``==`` is refused)."""
    liar = "class Liar:\n    def __reduce__(self):\n        return (list, ([1, 2],))\n"
    tests = "import pickle\nassert pickle.loads(pickle.dumps(make())) == [1, 2]\n"
    program = liar + "def make():\n    return Liar()\n"
    assert plain(program, tests, tmp_path) and sandbox(program, tests).passed
    yes = (
        "class Yes:\n    def __eq__(self, other):\n        return True\n"
        "class Liar:\n    def __reduce__(self):\n        return (Yes, ())\n"
        "def make():\n    return Liar()\n"
    )
    tests = "import pickle\nassert pickle.loads(pickle.dumps(make())) == 5\n"
    assert plain(yes, tests, tmp_path)  # plain Python passes it: the forgery is closed
    result = sandbox(yes, tests)
    assert not result.passed and result.tests_passed == 0
