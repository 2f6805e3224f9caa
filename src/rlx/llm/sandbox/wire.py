"""The plain-data boundary between the judge and a program: values as tagged JSON.

Only plain data crosses: ``None``, ``bool``, ``int``, ``float`` (NaN and the infinities too),
``str``, ``bytes``, ``bytearray``, ``complex``, and lists, tuples, dicts, sets and frozensets of
them, to a depth of :data:`MAX_DEPTH`. Any other object a program returns (an instance of its
class, a function, a generator) crosses as a *handle*: a number that names the object inside
the program's process. The judge's decoder builds fresh values of exactly these built-in types
from JSON, so nothing that arrives can run code on the judge's side: no ``__eq__``,
``__hash__`` or ``__bool__`` of the program's is ever called there.

A message is a 4-byte big-endian length and that many bytes of UTF-8 JSON, at most
:data:`MAX_MESSAGE_BYTES`.

Standard library only, and no import of rlx: the sandbox runs this file in interpreters that
may not see the installed package (see :func:`rlx.llm.sandbox.process.script`).
"""

from __future__ import annotations

import json
import os
import select
import struct
import time

# This module, the server and the judge start in a fresh interpreter for every program, so they
# import only what they use at run time: typing alone would add milliseconds to each program.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_MESSAGE_BYTES = 4 << 20
"""The largest message either side accepts; a program's answer above it breaks the channel."""

REQUESTS_FD = 3
"""The program's file descriptor for the judge's requests."""

ANSWERS_FD = 4
"""The program's file descriptor for its answers."""

MAX_DEPTH = 64
"""The deepest nesting of containers that crosses (a list inside a list ... 64 times)."""

_HEADER = struct.Struct(">I")
_CONTAINERS = ("list", "tuple", "set", "frozenset")


class BoundaryError(Exception):
    """A value cannot cross, or a message is malformed, too large or cut short."""


# --- values -------------------------------------------------------------------------------------


def encode(value: object, handle_of: Callable[[object], int], depth: int = 0) -> object:
    """``value`` as JSON-ready data; objects that are not plain data become
    ``{"handle": handle_of(obj), "type": name}``.

    Subclasses of the plain types cross as their base type (a namedtuple as a tuple, a
    ``Counter`` as a dict, an ``IntEnum`` as an int), as they compare equal to it in Python.
    """
    if depth > MAX_DEPTH:
        raise BoundaryError(f"a value nested deeper than {MAX_DEPTH} levels cannot cross")
    if value is None or isinstance(value, bool):
        return None if value is None else bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    if isinstance(value, (bytes, bytearray)):
        kind = "bytearray" if isinstance(value, bytearray) else "bytes"
        return {kind: bytes(value).hex()}
    if isinstance(value, dict):
        items = [
            [encode(k, handle_of, depth + 1), encode(v, handle_of, depth + 1)]
            for k, v in value.items()
        ]
        return {"dict": items}
    for kind, base in zip(_CONTAINERS, (list, tuple, set, frozenset), strict=True):
        if isinstance(value, base):
            return {kind: [encode(item, handle_of, depth + 1) for item in value]}
    return {"handle": handle_of(value), "type": type(value).__name__}


def decode(data: object, from_handle: Callable[[int, str], object], depth: int = 0) -> object:
    """The value ``data`` (as :func:`encode` made it) stands for, built from built-in types
    only; a handle becomes ``from_handle(number, type_name)``. Anything malformed raises
    :class:`BoundaryError`."""
    if depth > MAX_DEPTH:
        raise BoundaryError(f"a value nested deeper than {MAX_DEPTH} levels cannot cross")
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is not dict or len(data) not in (1, 2):
        raise BoundaryError(f"malformed value of type {type(data).__name__}")
    if "handle" in data:
        number, name = data.get("handle"), data.get("type")
        if type(number) is not int or type(name) is not str or len(data) != 2:
            raise BoundaryError("malformed handle")
        return from_handle(number, name)
    if len(data) != 1:
        raise BoundaryError("malformed value")
    ((tag, body),) = data.items()
    if tag in ("bytes", "bytearray"):
        try:
            raw = bytes.fromhex(_typed(body, str))
        except ValueError:
            raise BoundaryError("malformed bytes") from None
        return raw if tag == "bytes" else bytearray(raw)
    if tag == "complex":
        parts = _typed(body, list)
        if len(parts) != 2 or any(type(p) not in (int, float) for p in parts):
            raise BoundaryError("malformed complex number")
        return complex(parts[0], parts[1])
    if tag == "dict":
        out = {}
        for pair in _typed(body, list):
            if type(pair) is not list or len(pair) != 2:
                raise BoundaryError("malformed dict item")
            key = decode(pair[0], from_handle, depth + 1)
            _require_hashable(key)
            out[key] = decode(pair[1], from_handle, depth + 1)
        return out
    if tag in _CONTAINERS:
        items = [decode(item, from_handle, depth + 1) for item in _typed(body, list)]
        if tag in ("set", "frozenset"):
            for item in items:
                _require_hashable(item)
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    raise BoundaryError(f"unknown value tag {tag!r}")


def _typed(body: object, kind: type) -> object:
    if type(body) is not kind:
        raise BoundaryError(f"malformed value body ({type(body).__name__})")
    return body


def _require_hashable(value: object) -> None:
    # Only built-in values (and the judge's own handle objects) get here, so hash() runs no
    # program code; a list or dict is refused as a key or set member, as Python would.
    try:
        hash(value)
    except TypeError as exc:
        raise BoundaryError(f"unhashable {type(value).__name__} as a dict key or set item") from exc


# --- messages -----------------------------------------------------------------------------------


def send(fd: int, message: dict[str, object]) -> None:
    """Write one framed JSON message to ``fd``; BoundaryError when it is too large."""
    payload = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(payload) > MAX_MESSAGE_BYTES:
        raise BoundaryError(f"a message of {len(payload)} bytes is over {MAX_MESSAGE_BYTES}")
    data = memoryview(_HEADER.pack(len(payload)) + payload)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def receive(fd: int, deadline: float | None = None) -> dict[str, object] | None:
    """Read one framed JSON message from ``fd``, or None at end of file before a message
    starts. Raises BoundaryError on a malformed, oversized or cut-short message, and
    TimeoutError when ``deadline`` (``time.monotonic()``) passes first."""
    header = _read_exactly(fd, _HEADER.size, deadline, allow_eof=True)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise BoundaryError(f"a message of {size} bytes is over {MAX_MESSAGE_BYTES}")
    payload = _read_exactly(fd, size, deadline, allow_eof=False)
    try:
        message = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BoundaryError(f"a message that is not JSON ({exc})") from exc
    if type(message) is not dict:
        raise BoundaryError("a message that is not a JSON object")
    return message


def _read_exactly(fd: int, size: int, deadline: float | None, allow_eof: bool) -> object:
    chunks, left = [], size
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError("the program did not answer in time")
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            if allow_eof and left == size:
                return None
            raise BoundaryError("the channel closed in the middle of a message")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
