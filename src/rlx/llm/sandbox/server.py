"""The program's side of the boundary: define the program, then answer the judge's calls.

Runs inside the sandbox as the untrusted process, forked from the launcher into the program's
room before the launcher has read the tests (so no copy of them is in its memory). It
executes the program once, as a module named ``solution``, sends the judge the program's
top-level names, and then answers requests (call this function, read this attribute, take the
next item ...) until the judge closes the channel. Requests arrive on fd 3 and answers leave on
fd 4 (:mod:`rlx.llm.sandbox.wire` frames); the program's own output goes to stdout and stderr,
which only the person reading the sandbox's output sees.

Nothing here is trusted: the program runs in this interpreter and may replace any of it. That is
harmless by design, because all the judge ever receives is plain data it rebuilds itself; the
worst a program can do is answer wrongly or not at all, and either scores 0.

Standard library only, and no import of rlx (see :mod:`rlx.llm.sandbox.wire`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

from rlx.llm.sandbox import wire

TYPE_CHECKING = False  # typing is imported for the type checker only (see wire)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MODULE_NAME = "solution"
_INLINE_GLOBAL_BYTES = 64 << 10  # a larger data global crosses as a handle, not in the ready note
_MESSAGE_CHARS = 500


class Objects:
    """The program's objects the judge holds handles to, so a handle names the same object for
    as long as the run lasts (and two handles to one object are the same handle)."""

    def __init__(self) -> None:
        self._by_handle: dict[object, object] = {}  # looked up with unchecked numbers
        self._handle_by_id: dict[int, int] = {}

    def handle(self, obj: object) -> int:
        number = self._handle_by_id.get(id(obj))
        if number is None:
            number = len(self._by_handle) + 1
            self._by_handle[number] = obj  # kept alive, so id(obj) is not reused
            self._handle_by_id[id(obj)] = number
        return number

    def get(self, number: object, type_name: str = "") -> object:
        try:
            return self._by_handle[number]
        except KeyError:
            raise wire.BoundaryError(f"no program object has handle {number}") from None


def main(source: str, path: str = "program.py") -> None:
    """Run the program ``source`` (the file ``path`` holds it, for tracebacks) as the module
    ``solution``, send its names and answer requests; never returns."""
    objects = Objects()
    namespace: dict[str, object] = {"__name__": MODULE_NAME, "__file__": path}
    try:
        code = compile(source, path, "exec")
        exec(code, namespace)
    except Exception as error:
        import traceback  # only on this path: its import costs each program milliseconds

        traceback.print_exc()
        _flush()
        wire.send(wire.ANSWERS_FD, {"error": describe(error, objects)})
        os._exit(1)
    # SystemExit and os._exit leave without the ready note: exiting is not defining.
    _flush()
    wire.send(wire.ANSWERS_FD, {"ready": {"names": top_level_names(namespace, objects)}})
    serve(objects)


def top_level_names(namespace: dict[str, object], objects: Objects) -> dict[str, object]:
    """``{name: wire value}`` for the program's top-level names, dunders left out; modules,
    functions, classes and instances cross as handles, exception classes as descriptions."""
    names = {}
    for name, value in list(namespace.items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        try:
            encoded = wire.encode(value, objects.handle)
            if len(json.dumps(encoded)) > _INLINE_GLOBAL_BYTES:
                raise wire.BoundaryError("too large to send inline")
        except (wire.BoundaryError, ValueError, RecursionError):
            encoded = {"handle": objects.handle(value), "type": type(value).__name__[:100]}
        names[name] = encoded
    return names


def serve(objects: Objects) -> None:
    """Answer requests until the judge closes the channel."""
    while True:
        request = wire.receive(wire.REQUESTS_FD)
        if request is None:
            os._exit(0)
        try:
            answer = {"value": wire.encode(perform(request, objects), objects.handle)}
        except Exception as error:
            # Only Exceptions are answers; SystemExit and the like end the process, as they
            # would end a plain Python test run.
            answer = {"raise": describe(error, objects)}
        _flush()
        try:
            wire.send(wire.ANSWERS_FD, answer)
        except wire.BoundaryError as error:  # an answer too large to send
            wire.send(wire.ANSWERS_FD, {"raise": describe(error, objects)})


def perform(request: dict[str, object], objects: Objects) -> object:
    """Do what one request asks of the object its handle names."""
    op = request.get("op")
    # the program's object, of whatever type it has; args decode as a list, kwargs as a dict
    target: Any = objects.get(request.get("target"))
    args: Any = wire.decode({"list": request.get("args", [])}, objects.get)
    if op == "call":
        kwargs: Any = wire.decode({"dict": request.get("kwargs", [])}, objects.get)
        return target(*args, **kwargs)
    if op == "getattr":
        return getattr(target, *args)
    if op == "setattr":
        setattr(target, *args)
        return None
    if op == "getitem":
        return target[args[0]]
    if op == "setitem":
        target[args[0]] = args[1]
        return None
    if op == "delitem":
        del target[args[0]]
        return None
    if op in ("iter", "next", "str", "repr"):
        builtin: dict[str, Callable[[Any], object]] = {
            "iter": iter,
            "next": next,
            "str": str,
            "repr": repr,
        }
        return builtin[op](target)
    raise wire.BoundaryError(f"unknown request {op!r}")


def describe(error: BaseException, objects: Objects) -> dict[str, object]:
    """An exception as the judge rebuilds it: its class (a built-in's name, or its own
    description), its arguments, its message and a handle to it (for its attributes)."""
    try:
        message = str(error)
    except Exception:
        message = "<the exception's message could not be read>"
    description: dict[str, object] = {"message": message[:_MESSAGE_CHARS]}
    try:
        description["class"] = wire.describe_exception_class(type(error), objects.handle)
        description["args"] = [wire.encode(arg, objects.handle) for arg in error.args]
        description["handle"] = objects.handle(error)
        json.dumps(description)
    except Exception:
        description = {"message": message[:_MESSAGE_CHARS], "class": {"builtin": "Exception"}}
    return description


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
