"""The judge's side of the boundary, in-process: the wire codec rebuilds only built-in values
and refuses malformed ones, stand-ins never let the program answer a comparison, and the test
code is cut into the units the verdict counts."""

from __future__ import annotations

import json
import math
import os
import struct

import pytest

from rlx.llm.sandbox import judge, wire

PLAIN = [
    None, True, False, 0, -7, 10**40, 1.5, -0.0, "text", "", b"\x00\xff", bytearray(b"ab"),
    2 - 3j, [1, [2, [3]]], (1, (2,)), {"a": 1, 2: "b", (3, 4): [5]}, {1, 2}, frozenset({"x"}),
]  # fmt: skip


def no_handles(obj):
    raise AssertionError(f"a plain value became a handle: {obj!r}")


@pytest.mark.parametrize("value", PLAIN, ids=repr)
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
    assert data == {"dict": [["p", {"handle": 7, "type": "Point"}], ["flag", True]]}

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


def test_a_stand_in_equals_only_itself_and_never_asks_the_program_to_compare():
    asked = []

    class Recorder:
        broken = None

        def request(self, op, target, *args, **kwargs):
            asked.append(op)
            return True

    a = judge.ProgramObject(Recorder(), 1, "Equal")
    b = judge.ProgramObject(Recorder(), 2, "Equal")
    assert a == a and a != b and a != 5
    assert (5 == a) is False  # noqa: SIM300 (the reflected comparison, int's then ours)
    assert asked == []  # no comparison crossed the boundary
    assert len({a, b, a}) == 2


def test_the_test_code_is_cut_into_units():
    units = judge.test_units(
        "import math\nassert 1 == 1\ndef test_x():\n    pass\nx = 2\nassert x == 2\n"
    )
    assert [(u.label(), u.is_test) for u in units] == [
        ("line 1", False), ("line 2", True), ("line 3", False), ("line 5", False),
        ("line 6", True), ("test_x()", True),
    ]  # fmt: skip
    whole = judge.test_units("def check(f):\n    assert f(1) == 2\ncheck(inc)\n")
    assert [(u.label(), u.is_test) for u in whole] == [("line 1", True)]
