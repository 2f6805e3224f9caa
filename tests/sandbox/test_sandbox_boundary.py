"""The judge's side of the boundary, in-process: the wire codec rebuilds only built-in values
and refuses malformed ones, handles never let the program answer a test's question, exception
classes are rebuilt from built-in bases only, and the test code is read as the verdict counts
it."""

from __future__ import annotations

import ast
import json
import math
import os
import struct

import pytest

from rlx.sandbox import judge, testcode, wire

PLAIN = [
    None, True, False, 0, -7, 10**40, -(10**5000), 2**63, 1.5, -0.0, "text", "", b"\x00\xff",
    bytearray(b"ab"), 2 - 3j, [1, [2, [3]]], (1, (2,)), {"a": 1, 2: "b", (3, 4): [5]}, {1, 2},
    frozenset({"x"}),
]  # fmt: skip


def no_handles(obj):
    raise AssertionError(f"a plain value became a handle: {obj!r}")


@pytest.mark.parametrize(
    "value", PLAIN, ids=[f"{type(v).__name__}-{i}" for i, v in enumerate(PLAIN)]
)
def test_plain_values_cross_intact_with_their_exact_types(value):
    data = json.loads(json.dumps(wire.encode(value, no_handles)))
    back = wire.decode(data, lambda number, name: pytest.fail("no handle expected"))
    assert back == value and type(back) is type(value)


def test_nan_and_infinities_cross():
    back = wire.decode(json.loads(json.dumps(wire.encode([math.nan, -math.inf], no_handles))), None)
    assert math.isnan(back[0]) and back[1] == -math.inf


def test_other_objects_become_handles_and_subclasses_their_base_type():
    class Point:
        pass

    point, seen = Point(), []
    data = wire.encode({"p": point, "flag": True}, lambda obj: seen.append(obj) or 7)
    assert seen == [point]
    assert data == {"dict": [["p", {"handle": 7}], ["flag", True]]}
    described = wire.encode(point, lambda obj: 7, 0, lambda kind: {"handle": 8})
    assert described == {"handle": 7, "class": {"handle": 8}}

    class Sneaky(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    assert (
        wire.encode(Sneaky(3), no_handles) == 3 and type(wire.encode(Sneaky(3), no_handles)) is int
    )


@pytest.mark.parametrize(
    "data",
    [
        {"list": [1], "extra": 2},
        {"tuple": "not a list"},
        {"dict": [[{"list": []}, 1]]},  # a list as a dict key
        {"set": [{"dict": []}]},  # a dict in a set
        {"complex": [1, "2"]},
        {"bytes": "zz"},
        {"handle": "1", "type": "f"},
        {"evil": []},
        [1, 2],  # an untagged JSON array
        {"list": [{"list": [{"list": []}]}]},  # fine on its own; made too deep below
    ],
)
def test_malformed_values_are_refused(data):
    if data == {"list": [{"list": [{"list": []}]}]}:
        for _ in range(wire.MAX_DEPTH):
            data = {"list": [data]}
    with pytest.raises(wire.BoundaryError):
        wire.decode(data, lambda number, name: object())


def test_messages_are_framed_capped_and_end_cleanly():
    read, write = os.pipe()
    try:
        wire.send(write, {"value": [1, 2]})
        assert wire.receive(read) == {"value": [1, 2]}
        os.write(write, struct.pack(">I", wire.MAX_MESSAGE_BYTES + 1))
        with pytest.raises(wire.BoundaryError, match="over"):
            wire.receive(read)
        os.write(write, struct.pack(">I", 5) + b"[1,2]")
        with pytest.raises(wire.BoundaryError, match="not a JSON object"):
            wire.receive(read)
        with pytest.raises(TimeoutError):
            wire.receive(read, deadline=0.0)
    finally:
        os.close(write)
    assert wire.receive(read) is None  # end of file before a message: the program is gone
    os.close(read)


class Recorder:
    """A channel that records what the judge asks the program."""

    broken = None

    def __init__(self) -> None:
        self.asked: list[str] = []

    def request(self, op, target, *args, **kwargs):
        self.asked.append(op)
        if op == "iter":
            return handle(self, 9, "iterator", {"__iter__", "__next__"})
        return True


YES_SUPPORTS = {"__eq__", "__ne__", "__lt__", "__contains__", "__bool__", "__len__", "__hash__"}


def handle(channel, number: int, name: str, supports: set[str]):
    """A judge's handle to a program object of class ``name`` with the special methods
    ``supports`` (as the program's class description says)."""
    classes = channel.__dict__.setdefault("classes", {})
    if name not in classes:
        classes[name] = judge._make_program_class(channel, 100 + len(classes), name, (), supports)
    kind = classes[name]
    made = object.__new__(kind)
    object.__setattr__(made, "_channel", channel)
    object.__setattr__(made, "_handle", number)
    return made


@pytest.mark.parametrize(
    "question",
    [
        lambda a, b: a == 1,
        lambda a, b: a != [1],
        lambda a, b: a < 2,
        lambda a, b: a >= 1,
        lambda a, b: 1 in a,
        lambda a, b: a in [1, 2],  # list.__contains__ compares with ==
        lambda a, b: sorted([a, 1]),
        lambda a, b: 5 == a,  # noqa: SIM300 (the reflected comparison, int's then ours)
    ],
)
def test_a_handle_refuses_every_question_about_plain_data_and_never_asks_the_program(question):
    channel = Recorder()
    a = handle(channel, 1, "Yes", YES_SUPPORTS)
    b = handle(channel, 2, "Yes", YES_SUPPORTS)
    with pytest.raises(TypeError, match="not judged"):
        question(a, b)
    assert channel.asked == []
    assert a is a and a is not b and type(a) is type(b) and type(a).__name__ == "Yes"


def test_len_and_bool_are_asked_of_the_program_and_checked():
    """``len`` and ``bool`` of an object whose class defines them are the program's answers
    (they tell the program nothing about the tests' expected values), of the types Python
    requires: an int >= 0, a bool; anything else is a TypeError."""

    class Answers(Recorder):
        def __init__(self, answer):
            super().__init__()
            self.answer = answer

        def request(self, op, target, *args, **kwargs):
            self.asked.append(op)
            return self.answer

    for answer, ok in ((3, True), (0, True), (-1, False), ("3", False), (True, False)):
        channel = Answers(answer)
        sized = handle(channel, 1, "Sized", {"__len__"})
        if ok:
            assert len(sized) == answer and channel.asked == ["len"]
        else:
            with pytest.raises(TypeError):
                len(sized)
    for answer, ok in ((True, True), (False, True), (1, False), (None, False)):
        channel = Answers(answer)
        truth = handle(channel, 1, "Truth", {"__bool__"})
        if ok:
            assert bool(truth) is answer and channel.asked == ["bool"]
        else:
            with pytest.raises(TypeError):
                bool(truth)


def test_introspection_answers_from_the_objects_class_and_asks_nothing():
    channel = Recorder()
    plain = handle(channel, 1, "Plain", set())
    function = handle(channel, 2, "function", {"__call__"})
    assert not callable(plain) and callable(function)
    assert isinstance(plain, type(plain)) and not isinstance(plain, int)
    assert not isinstance(plain, type(function)) and type(plain).__name__ == "Plain"
    assert bool(plain)  # no __bool__ or __len__ in its class: true, as in Python
    with pytest.raises(TypeError, match="not iterable"):
        iter(plain)
    with pytest.raises(TypeError, match="has no len"):
        len(plain)
    with pytest.raises(TypeError, match="unhashable"):
        hash(plain)  # its class defines no __hash__ (a dataclass with eq)
    assert not hasattr(plain, "__len__") and not hasattr(plain, "__iter__")
    assert channel.asked == []


def test_two_program_objects_compare_as_the_program_says():
    channel = Recorder()
    a = handle(channel, 1, "Point", {"__eq__"})
    b = handle(channel, 2, "Point", {"__eq__"})
    assert a == b
    assert channel.asked == ["operator"]
    assert a < b and channel.asked == ["operator", "operator"]


def test_a_handle_forwards_calls_attributes_items_iteration_and_text():
    channel = Recorder()
    thing = handle(channel, 1, "Thing", {"__call__", "__getitem__", "__iter__", "__next__"})
    thing(1), thing.method, thing[0], iter(thing), next(thing)
    assert channel.asked == ["call", "getattr", "getitem", "iter", "next"]
    with pytest.raises(AttributeError):
        getattr(thing, "__await__")  # noqa: B009 (protocols are the judge's, never the program's)
    with pytest.raises(TypeError, match="gave a bool, not a str"):
        str(thing)  # the recorder answers True: text must be a str
    channel.asked.clear()
    # iterable: ``in`` is the judge's, comparing the items the program yields (True == 1)
    found = 1 in thing
    assert found and channel.asked[0] == "iter" and channel.asked[-1] == "next"


def test_exception_classes_are_rebuilt_from_built_in_exception_bases_only():
    channel = judge.Channel(-1, -1, 0.0)
    classes = channel.classes
    mine = {"handle": 3, "name": "Mine", "bases": [{"builtin": "ValueError"}]}
    child = {"handle": 4, "name": "Child", "bases": [mine]}
    kind = classes.rebuild(child)
    assert issubclass(kind, ValueError) and kind.__name__ == "Child"
    assert classes.rebuild(child) is kind and classes.rebuild(mine) is kind.__bases__[0]
    assert classes.rebuild({"builtin": "SystemExit"}) is SystemExit  # sys.exit() in a call
    for forged in (
        {"builtin": "KeyboardInterrupt"},
        {"builtin": "open"},
        {"handle": 5, "name": "not a name", "bases": []},
        {"handle": 0, "name": "Zero", "bases": []},
        {"handle": 6, "name": "Extra", "bases": [], "more": 1},
        {"handle": 7, "name": "Deep", "bases": [{"builtin": "ValueError"}] * 17},
    ):
        with pytest.raises(wire.BoundaryError):
            classes.rebuild(forged)
    deep: dict = {"builtin": "Exception"}
    for level in range(40):
        deep = {"handle": 100 + level, "name": f"L{level}", "bases": [deep]}
    with pytest.raises(wire.BoundaryError):
        classes.rebuild(deep)


def test_a_raised_exception_keeps_its_class_message_and_arguments():
    channel = judge.Channel(-1, -1, 0.0)
    description = {
        "class": {"handle": 3, "name": "Broke", "bases": [{"builtin": "KeyError"}]},
        "args": ["key", {"int": hex(10**30)}],
        "message": "Broke: key",
        "handle": 9,
    }
    error = channel.exception(description)
    assert type(error).__name__ == "Broke" and isinstance(error, KeyError)
    assert error.args == ("key", 10**30) and str(error) == "Broke: key"
    refused = channel.exception({"class": {"builtin": "GeneratorExit"}})
    assert type(refused) is judge.ProgramError
    assert isinstance(channel.exception("garbage"), judge.ProgramGone)


def test_test_code_bindings_are_never_shadowed():
    tree = ast.parse(
        "import os.path\nfrom math import sqrt as root\nexpected = 3\n"
        "for i, (j, k) in []:\n    pass\n"
        "with open('x') as handle:\n    pass\n"
        "def helper():\n    global counter\n    local = 1\n"
        "class Case:\n    attribute = 1\n"
        "try:\n    pass\nexcept ValueError as error:\n    pass\n"
        "values = [item for item in range(3)]\n"
    )
    assert testcode.module_bindings(tree) == {
        "os", "root", "expected", "i", "j", "k", "handle", "helper", "counter", "Case",
        "error", "values",
    }  # fmt: skip


def test_set_up_and_test_statements():
    tree = ast.parse(
        "import math\nx = add(1, 2)\nassert x == 3\ncheck(add)\n"
        "for a in [1]:\n    assert add(a, 0) == a\nif True:\n    y = 2\n"
    )
    assert [testcode.is_setup(s) for s in tree.body] == [True, True, False, False, False, True]


@pytest.mark.parametrize(
    ("source", "entry", "checks"),
    [
        ("assert add(1, 2) == 3\n", None, True),
        ("def test_add():\n    assert add(1, 2) == 3\n", None, True),
        ("class TestAdd:\n    def test_one(self):\n        pass\n", None, True),
        ("import unittest\nclass Case(unittest.TestCase):\n    def test_x(self):\n        pass\n",
         None, True),
        ("def check(f):\n    assert f(1) == 2\ncheck(inc)\n", None, True),
        ("def check(f):\n    assert f(1) == 2\n", "inc", True),
        ("def check(f):\n    assert f(1) == 2\n", None, False),
        ("def helper():\n    assert add(1, 2) == 3\n", None, False),
        ("x = 1\n", None, False),
        ("", None, False),
        ("class Test:\n    pass\n", None, False),
    ],
)  # fmt: skip
def test_what_checks_something(source, entry, checks):
    if checks:
        testcode.prepare(source, entry)
    else:
        with pytest.raises(testcode.NothingToCheckError):
            testcode.prepare(source, entry)


def test_entry_point_adds_the_call_only_when_check_is_not_called():
    assert testcode.prepare("def check(f):\n    assert f(1)\n", "inc").endswith("check(inc)\n")
    called = "def check(f):\n    assert f(1)\ncheck(inc)\n"
    assert testcode.prepare(called, "inc") == called


def test_every_assert_becomes_a_counted_check_and_constants_do_not_count():
    tree = testcode.instrument(ast.parse(
        "assert x\nfor i in y:\n    assert i, 'message'\ndef f():\n    assert True\n"
    ))  # fmt: skip
    hooks = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and getattr(n.func, "id", "") == testcode.ASSERT_HOOK]  # fmt: skip
    assert [hook.args[3].value for hook in hooks] == [True, True, False]
    assert [(hook.args[1].value, hook.args[2].value) for hook in hooks] == [(1, 0), (3, 4), (5, 4)]
    assert not any(isinstance(n, ast.Assert) for n in ast.walk(tree))
