"""The plain-data boundary between the judge and a program: values as tagged JSON.

Only plain data crosses: ``None``, ``bool``, ``int`` (of any size), ``float`` (NaN and the
infinities too), ``str``, ``bytes``, ``bytearray``, ``complex``, and lists, tuples, dicts, sets
and frozensets of them, to a depth of :data:`MAX_DEPTH`. Any other object a program returns (an
instance of its class, a function, a module, a generator) crosses as a *handle*: a number that
names the object inside the program's process, whose only power on the judge's side is to be
called, asked for an attribute or an item, or iterated. An exception class crosses as a
*description*: its name and its bases, each a built-in exception's name or another description,
so that the judge can make an exception class of its own that stands for it. The judge's
decoder builds fresh values of exactly these built-in types from JSON, so nothing that arrives
can run code on the judge's side: no ``__eq__``, ``__hash__`` or ``__bool__`` of the program's
is ever called there, and no name the program sends is imported or looked up.

A message is a 4-byte big-endian length and that many bytes of UTF-8 JSON, at most
:data:`MAX_MESSAGE_BYTES`. Every message from the program is hostile input: its size, nesting
depth, tags, numbers and names are checked before anything is built from it.

Standard library only, and no import of rlx: the sandbox runs this file in interpreters that
may not see the installed package (see :func:`rlx.llm.sandbox.process.script`).
"""

from __future__ import annotations

import builtins
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
    from typing import TypeGuard, TypeVar

    _T = TypeVar("_T")

MAX_MESSAGE_BYTES = 4 << 20
"""The largest message either side accepts; a program's answer above it breaks the channel."""

REQUESTS_FD = 3
"""The program's file descriptor for the judge's requests (the judge writes them on its own
fd 3)."""

ANSWERS_FD = 4
"""The program's file descriptor for its answers (the judge reads them on its own fd 4)."""

VERDICT_FD = 5
"""The judge's file descriptor for its verdict, read by the launcher."""

MAX_DEPTH = 64
"""The deepest nesting of containers that crosses (a list inside a list ... 64 times)."""

MAX_NAME_CHARS = 100
"""The longest type or class name that crosses; longer ones are refused."""

MAX_HANDLE = 1 << 31
"""Handles are numbers in ``1 .. MAX_HANDLE``."""

_HEADER = struct.Struct(">I")
_CONTAINERS = ("list", "tuple", "set", "frozenset")
_SMALL_INT_BITS = 63  # ints wider than this cross as hex text: JSON's decimal has a digit limit

EXCEPTIONS = {
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, Exception)
}
"""The built-in exception classes a program's exception may be rebuilt as, by name. Only
subclasses of ``Exception``: a ``SystemExit``, ``KeyboardInterrupt`` or ``GeneratorExit``
named by the program never reaches the judge as such."""


class BoundaryError(Exception):
    """A value cannot cross, or a message is malformed, too large or cut short."""


# --- values -------------------------------------------------------------------------------------


def encode(value: object, handle_of: Callable[[object], int], depth: int = 0) -> object:
    """``value`` as JSON-ready data; objects that are not plain data become
    ``{"handle": handle_of(obj), "type": name}``, exception classes their description.

    Subclasses of the plain types cross as their base type (a namedtuple as a tuple, a
    ``Counter`` as a dict, an ``IntEnum`` as an int), as they compare equal to it in Python.
    """
    if depth > MAX_DEPTH:
        raise BoundaryError(f"a value nested deeper than {MAX_DEPTH} levels cannot cross")
    # type() and issubclass, never isinstance: isinstance asks an object for its __class__,
    # which the judge's handles refuse, and which a program's object could fake
    # (mypy cannot narrow ``value`` from ``issubclass(type(value), ...)``, hence the ignores)
    kind = type(value)
    if value is None or issubclass(kind, bool):
        return None if value is None else bool(value)
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, int):
        number = int.__int__(value)  # type: ignore[arg-type]
        return number if number.bit_length() <= _SMALL_INT_BITS else {"int": hex(number)}
    if issubclass(kind, float):
        return float.__float__(value)  # type: ignore[arg-type]
    if issubclass(kind, complex):
        return {
            "complex": [
                complex.__complex__(value).real,  # type: ignore[arg-type]
                complex.__complex__(value).imag,  # type: ignore[arg-type]
            ]
        }
    if issubclass(kind, (bytes, bytearray)):
        tag = "bytearray" if issubclass(kind, bytearray) else "bytes"
        return {tag: bytes(value).hex()}  # type: ignore[call-overload]
    if issubclass(kind, dict):
        mapping: dict[object, object] = value  # type: ignore[assignment]
        items = [
            [encode(k, handle_of, depth + 1), encode(v, handle_of, depth + 1)]
            for k, v in dict.items(mapping)
        ]
        return {"dict": items}
    for tag, base in zip(_CONTAINERS, (list, tuple, set, frozenset), strict=True):
        if issubclass(kind, base):
            return {tag: [encode(item, handle_of, depth + 1) for item in base.__iter__(value)]}
    if issubclass(kind, type) and issubclass(value, BaseException):  # type: ignore[arg-type]
        return {"exception": describe_exception_class(value, handle_of)}  # type: ignore[arg-type]
    return {"handle": handle_of(value), "type": _type_name(value)}


def describe_exception_class(
    kind: type, handle_of: Callable[[object], int], depth: int = 0
) -> dict[str, object]:
    """``{"builtin": name}`` for a built-in exception class, else ``{"handle", "name",
    "bases"}`` with each base described the same way (the program's side)."""
    name = getattr(kind, "__name__", "")
    if EXCEPTIONS.get(name) is kind or getattr(builtins, name, None) is kind:
        return {"builtin": name}
    if depth > MAX_DEPTH:
        raise BoundaryError("an exception class with too deep a hierarchy cannot cross")
    bases = [
        describe_exception_class(base, handle_of, depth + 1)
        for base in kind.__bases__
        if issubclass(type(base), type) and issubclass(base, BaseException)
    ]
    return {"handle": handle_of(kind), "name": str(name)[:MAX_NAME_CHARS], "bases": bases}


def _type_name(value: object) -> str:
    try:
        return str(type(value).__name__)[:MAX_NAME_CHARS]
    except Exception:
        return "object"


def decode(
    data: object,
    from_handle: Callable[[int, str], object],
    depth: int = 0,
    from_exception: Callable[[dict[str, object]], object] | None = None,
) -> object:
    """The value ``data`` (as :func:`encode` made it) stands for, built from built-in types
    only; a handle becomes ``from_handle(number, type_name)``, an exception class's description
    ``from_exception(description)``. Anything malformed raises :class:`BoundaryError`."""
    if depth > MAX_DEPTH:
        raise BoundaryError(f"a value nested deeper than {MAX_DEPTH} levels cannot cross")
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is not dict or len(data) not in (1, 2):
        raise BoundaryError(f"malformed value of type {type(data).__name__}")
    if "handle" in data:
        number, name = data.get("handle"), data.get("type")
        if len(data) != 2 or not is_handle(number) or not is_name(name):
            raise BoundaryError("malformed handle")
        return from_handle(number, name)
    if len(data) != 1:
        raise BoundaryError("malformed value")
    ((tag, body),) = data.items()
    if tag == "int":
        text = _typed(body, str)
        if not text.lstrip("-").startswith("0x") or len(text) > 2 * MAX_MESSAGE_BYTES:
            raise BoundaryError("malformed int")
        try:
            return int(text, 16)
        except ValueError:
            raise BoundaryError("malformed int") from None
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
    if tag == "exception":
        if from_exception is None:
            raise BoundaryError("an exception class where none is expected")
        return from_exception(_typed(body, dict))
    if tag == "dict":
        out = {}
        for pair in _typed(body, list):
            if type(pair) is not list or len(pair) != 2:
                raise BoundaryError("malformed dict item")
            key = decode(pair[0], from_handle, depth + 1, from_exception)
            _require_hashable(key)
            out[key] = decode(pair[1], from_handle, depth + 1, from_exception)
        return out
    if tag in _CONTAINERS:
        items = [
            decode(item, from_handle, depth + 1, from_exception) for item in _typed(body, list)
        ]
        if tag in ("set", "frozenset"):
            for item in items:
                _require_hashable(item)
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    raise BoundaryError(f"unknown value tag {str(tag)[:MAX_NAME_CHARS]!r}")


def is_handle(number: object) -> TypeGuard[int]:
    """Whether ``number`` is a well-formed handle number."""
    return type(number) is int and 0 < number <= MAX_HANDLE


def is_name(name: object) -> TypeGuard[str]:
    """Whether ``name`` is a well-formed type or class name to show people."""
    return type(name) is str and 0 < len(name) <= MAX_NAME_CHARS


def _typed(body: object, kind: type[_T]) -> _T:
    if type(body) is not kind:
        raise BoundaryError(f"malformed value body ({type(body).__name__})")
    return body


def _require_hashable(value: object) -> None:
    # Only built-in values and the judge's own objects get here, so hash() runs no program
    # code; a list or dict, or a program object (whose hash the judge refuses), is refused as a
    # key or set member.
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
    starts. Raises BoundaryError on a malformed, oversized, too deeply nested or cut-short
    message, and TimeoutError when ``deadline`` (``time.monotonic()``) passes first."""
    header = _read_exactly(fd, _HEADER.size, deadline, allow_eof=True)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise BoundaryError(f"a message of {size} bytes is over {MAX_MESSAGE_BYTES}")
    payload = _read_exactly(fd, size, deadline, allow_eof=False)
    assert payload is not None  # allow_eof=False: end of file raises instead
    try:
        message = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BoundaryError(f"a message that is not JSON ({str(exc)[:200]})") from None
    except RecursionError:
        raise BoundaryError("a message nested too deeply to read") from None
    if type(message) is not dict:
        raise BoundaryError("a message that is not a JSON object")
    return message


def _read_exactly(fd: int, size: int, deadline: float | None, allow_eof: bool) -> bytes | None:
    chunks: list[bytes] = []
    left = size
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
