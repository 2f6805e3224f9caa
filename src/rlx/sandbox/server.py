"""The program's side of the boundary: define the program, then answer the judge's calls.

Runs inside the sandbox as the untrusted process, forked from the launcher into the program's
room before the launcher has read the tests (so no copy of them is in its memory). It
executes the program once, as a module named ``solution``, sends the judge the program's
top-level names, and then answers requests (call this function, read this attribute, take the
next item ...) until the judge closes the channel. A function of the tests it is given is a
stub (:class:`_Callback`): calling it asks the judge to run it, and answers the judge's
requests meanwhile. Requests arrive on fd 3 and answers leave on
fd 4 (:mod:`rlx.sandbox.wire` frames); the program's own output goes to stdout and stderr,
which only the person reading the sandbox's output sees.

Nothing here is trusted: the program runs in this interpreter and may replace any of it. That is
harmless by design, because all the judge ever receives is plain data it rebuilds itself; the
worst a program can do is answer wrongly or not at all, and either scores 0.

Standard library only, and no import of rlx (see :mod:`rlx.sandbox.wire`).
"""

from __future__ import annotations

import _thread
import builtins
import contextlib
import json
import os
import sys

from rlx.sandbox import wire

TYPE_CHECKING = False  # typing is imported for the type checker only (see wire)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MODULE_NAME = "solution"
_LOCK = (
    _thread.RLock()
)  # the channel's: held while a message is read or written, or a callback runs
_INLINE_GLOBAL_BYTES = 64 << 10  # a larger data global crosses as a handle, not in the ready note
_MESSAGE_CHARS = 500
_OUTPUT_CHARS = 1 << 20  # what one call prints, sent with its answer


class Objects:
    """The program's objects the judge holds handles to, so a handle names the same object for
    as long as the run lasts (and two handles to one object are the same handle); and which of
    their classes the judge has been sent a description of."""

    def __init__(self) -> None:
        self._by_handle: dict[object, object] = {}  # looked up with unchecked numbers
        self._handle_by_id: dict[int, int] = {}
        self.described: set[int] = set()  # classes whose description reached the judge
        self.pending: set[int] = set()  # described in the message being written

    def handle(self, obj: object) -> int:
        number = self._handle_by_id.get(id(obj))
        if number is None:
            number = len(self._by_handle) + 1
            self._by_handle[number] = obj  # kept alive, so id(obj) is not reused
            self._handle_by_id[id(obj)] = number
        return number

    def get(self, number: object, class_data: object = None) -> object:
        try:
            return self._by_handle[number]
        except KeyError:
            raise wire.BoundaryError(f"no program object has handle {number}") from None

    def class_of(self, kind: type) -> dict[str, object]:
        """A class as the judge rebuilds it: in full (its name, its bases, the special methods
        its instances have) the first time, then by its handle alone."""
        number = self.handle(kind)
        if number in self.described or number in self.pending:
            return {"handle": number}
        self.pending.add(number)
        bases: list[object] = []
        for base in _bases(kind):
            if base is object:
                continue
            name = getattr(base, "__name__", None)
            if type(name) is str and getattr(builtins, name, None) is base:
                bases.append({"builtin": name})
            else:
                bases.append(self.class_of(base))
        description: dict[str, object] = {
            "handle": number,
            "name": wire._class_name(kind),
            "bases": bases[:16],
            "supports": [name for name in wire.PROTOCOLS if _has(kind, name)],
        }
        if wire.plain_base(kind) is not None:
            description["names"] = _own_names(kind)
        return description

    def sent(self, ok: bool) -> None:
        """The message written last reached the judge (``ok``) or was not sent."""
        if ok:
            self.described |= self.pending
        self.pending = set()


def _bases(kind: type) -> tuple[type, ...]:
    try:
        bases = type.__dict__["__bases__"].__get__(kind)
    except Exception:
        return ()
    return bases if type(bases) is tuple else ()


_FORWARDED_DUNDERS = frozenset(
    {"__str__", "__repr__", "__format__"}
    | {f"__{name}__" for name in (*wire.BINARY_OPERATORS, *wire.UNARY_OPERATORS)}
    | {f"__r{name}__" for name in wire.BINARY_OPERATORS}
)


def _own_names(kind: type) -> list[str]:
    """The attributes a class deriving from a built-in type defines above the built-in (its
    methods, properties, class attributes; of the special methods, its operators and
    ``__str__``, ``__repr__``, ``__format__``): the judge asks the program for these."""
    names: list[str] = []
    try:
        for base in type.__dict__["__mro__"].__get__(kind):
            if base is object or getattr(builtins, wire._class_name(base), None) is base:
                continue
            for name in type.__dict__["__dict__"].__get__(base):
                dunder = name.startswith("__") and name.endswith("__")
                if (
                    type(name) is str
                    and name not in names
                    and (not dunder or name in _FORWARDED_DUNDERS)
                ):
                    names.append(name[: wire.MAX_NAME_CHARS])
    except Exception:
        pass
    return names[:512]


def _has(kind: type, name: str) -> bool:
    """Whether instances of ``kind`` have the special method ``name`` (looked up on the class
    and its bases, as Python does: never on its metaclass)."""
    try:
        for base in type.__dict__["__mro__"].__get__(kind):
            attributes = type.__dict__["__dict__"].__get__(base)
            if name in attributes:
                return attributes[name] is not None
    except Exception:
        return False
    return False


def encode(value: object, objects: Objects) -> object:
    """``value`` as the judge receives it (classes described)."""
    return wire.encode(value, objects.handle, 0, objects.class_of)


def main(source: str, path: str = "program.py") -> None:
    """Run the program ``source`` (the file ``path`` holds it, for tracebacks) as the module
    ``solution`` (a real module, in ``sys.modules``, so that dataclasses, pickle and
    ``import solution`` find it), send its names and answer requests; never returns."""
    objects = Objects()
    module = type(sys)(MODULE_NAME)
    module.__file__ = path
    sys.modules[MODULE_NAME] = module
    namespace = module.__dict__
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
    objects.sent(True)
    serve(objects)


def top_level_names(namespace: dict[str, object], objects: Objects) -> dict[str, object]:
    """``{name: wire value}`` for the program's top-level names, dunders left out; modules
    cross as their names, classes as descriptions, functions and instances as handles,
    exception classes as descriptions."""
    names = {}
    for name, value in list(namespace.items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        try:
            encoded = encode(value, objects)
            if len(json.dumps(encoded)) > _INLINE_GLOBAL_BYTES:
                raise wire.BoundaryError("too large to send inline")
        except (wire.BoundaryError, ValueError, RecursionError):
            encoded = {"handle": objects.handle(value), "class": objects.class_of(type(value))}
        names[name] = encoded
    return names


_ENDS = (KeyboardInterrupt, GeneratorExit)


def serve(objects: Objects) -> None:
    """Answer requests until the judge closes the channel. What a call prints goes back with
    its answer (``"out"``, ``"err"``), for the judge to print where its tests print."""
    global _OBJECTS
    _OBJECTS = objects
    while True:
        with _LOCK:
            request = wire.receive(wire.REQUESTS_FD)
        if request is None:
            os._exit(0)
        reply(request, objects)


def reply(request: dict[str, object], objects: Objects) -> None:
    """Do what ``request`` asks and send the answer (or the exception it raised)."""
    import io

    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err = io.StringIO(), io.StringIO()
    _STREAMS.append((out, err))
    try:
        answer = answer_to(request, objects)
    except _ENDS:
        # they end the process, as they would end a plain Python test run; a SystemExit
        # (``sys.exit``, argparse) is answered as the exception it is, for the tests to catch
        sys.stdout, sys.stderr = saved
        raise
    except BaseException as error:
        objects.sent(False)
        answer = {"raise": describe(error, objects)}
    finally:
        sys.stdout, sys.stderr = saved
        _STREAMS.pop()
    answer.update(_printed(out, err))
    with _LOCK:
        try:
            wire.send(wire.ANSWERS_FD, answer)
            objects.sent(True)
        except wire.BoundaryError as error:  # an answer too large to send
            objects.sent(False)
            wire.send(wire.ANSWERS_FD, {"raise": describe(error, objects)})
            objects.sent(True)


def _printed(out: Any, err: Any) -> dict[str, object]:
    """What was printed to ``out`` and ``err`` since they were last read (then emptied)."""
    printed: dict[str, object] = {}
    for key, stream in (("out", out), ("err", err)):
        text = stream.getvalue()
        if text:
            printed[key] = text[:_OUTPUT_CHARS]
            stream.seek(0)
            stream.truncate()
    return printed


def answer_to(request: dict[str, object], objects: Objects) -> dict[str, object]:
    """The answer to ``request``: ``{"value": ...}``, with a call's arguments the judge sent
    that the call changed in place (``"mutated"``: each container's state, in the order of
    :func:`wire.mutable_parts`), and, for an attribute that is a list, dict or set, the handle
    of that container (``"origin"``: so the judge can change it as the tests change theirs)."""
    op = request.get("op")
    if op == "global":  # the tests read a global of the program's: its value now
        name = request.get("args")
        if type(name) is not list or len(name) != 1 or type(name[0]) is not str:
            raise wire.BoundaryError("malformed global request")
        module = sys.modules.get(MODULE_NAME)
        if module is None or name[0] not in module.__dict__:
            raise NameError(f"name {name[0]!r} is not defined")
        value = module.__dict__[name[0]]
        found: dict[str, object] = {"value": encode(value, objects)}
        if type(value) in (list, dict, set):
            found["origin"] = objects.handle(value)
        return found
    target: Any = objects.get(request.get("target"))
    if op != "call":
        value = perform(request, objects)
        answer: dict[str, object] = {"value": encode(value, objects)}
        if op == "getattr" and type(value) in (list, dict, set):
            answer["origin"] = objects.handle(value)
        return answer
    args: Any = _decode({"list": request.get("args", [])}, objects)
    kwargs: Any = _decode({"dict": request.get("kwargs", [])}, objects)
    sent = [*args, *kwargs.values()]
    parts = wire.mutable_parts(sent)
    value = target(*args, **kwargs)
    if not parts:
        return {"value": encode(value, objects)}
    index = {id(part): number for number, part in enumerate(parts)}

    def special(item: object) -> object:
        if type(item) is _Callback:
            return object.__getattribute__(item, "_rlx_encoded")
        number = index.get(id(item))
        return None if number is None else {"ref": number}

    answer = {"value": wire.encode(value, objects.handle, 0, objects.class_of, special)}
    if _changed(args, kwargs, request):
        answer["mutated"] = [
            wire.encode(_state(part), objects.handle, 0, objects.class_of, special)
            for part in parts
        ]
    return answer


def _changed(args: list[object], kwargs: dict[str, object], request: dict[str, object]) -> bool:
    """Whether the arguments, encoded again, differ from what the judge sent."""

    def special(item: object) -> object:
        return object.__getattribute__(item, "_rlx_encoded") if type(item) is _Callback else None

    try:
        again = [wire.encode(a, _OBJECTS.handle, 0, None, special) for a in args]
        named = [[k, wire.encode(v, _OBJECTS.handle, 0, None, special)] for k, v in kwargs.items()]
    except (wire.BoundaryError, RecursionError):
        return True
    return again != request.get("args", []) or named != request.get("kwargs", [])


def _state(container: Any) -> object:
    """A copy of a container's items, to send as its state (its nested containers the judge
    sent become references to them)."""
    kind = wire.mutable_kind(container)
    if kind == "dict":
        return dict(dict.items(container))
    if kind == "set":
        return set(set.__iter__(container))
    if kind == "bytearray":
        return bytes(container)
    return list(container)


_OBJECTS = Objects()
_STREAMS: list[tuple[Any, Any]] = []  # what the requests being answered print to
_CALLBACK_DEPTH = 200


class _Callback:
    """A function or other object of the tests given to the program (``key=``, a handler, a
    ``TreeNode`` of the tests, a ``Mock()``): calling it, reading or setting its attributes,
    iterating, comparing or hashing it asks the judge to do that to the tests' object, and
    answers the judge's requests until it has."""

    __slots__ = ("__name__", "__qualname__", "_rlx_encoded", "_rlx_number")

    def __init__(self, number: int, name: str) -> None:
        object.__setattr__(self, "_rlx_number", number)
        object.__setattr__(self, "__name__", name)
        object.__setattr__(self, "__qualname__", name)
        object.__setattr__(self, "_rlx_encoded", {"callback": [number, name]})

    def __call__(self, *args: object, **kwargs: object) -> object:
        return _call_back(self, args, kwargs)

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _call_back(self, (name,), {}, "getattr")

    def __setattr__(self, name: str, value: object) -> None:
        _call_back(self, (name, value), {}, "setattr")

    def __delattr__(self, name: str) -> None:
        _call_back(self, (name,), {}, "delattr")

    def __eq__(self, other: object) -> Any:
        if type(other) is _Callback and other._rlx_number == self._rlx_number:
            return True
        return _call_back(self, (other,), {}, "eq")

    def __ne__(self, other: object) -> Any:
        if type(other) is _Callback and other._rlx_number == self._rlx_number:
            return False
        return _call_back(self, (other,), {}, "ne")


def _asking(op: str) -> Callable[..., object]:
    def method(self: _Callback, *args: object) -> object:
        return _call_back(self, args, {}, op)

    method.__name__ = f"__{op}__"
    return method


for _op in ("lt", "le", "gt", "ge", "hash", "bool", "len", "iter", "next", "str", "repr",
            "getitem", "setitem", "delitem", "contains"):  # fmt: skip
    setattr(_Callback, f"__{_op}__", _asking(_op))
_CALLBACKS: dict[int, _Callback] = {}


def _call_back(
    callback: _Callback, args: tuple[object, ...], kwargs: dict[str, object], op: str = "call"
) -> object:
    objects = _OBJECTS

    def special(item: object) -> object:
        return object.__getattribute__(item, "_rlx_encoded") if type(item) is _Callback else None

    message: dict[str, object] = {
        "callback": object.__getattribute__(callback, "_rlx_number"),
        "args": [wire.encode(a, objects.handle, 0, objects.class_of, special) for a in args],
        "kwargs": [
            [k, wire.encode(v, objects.handle, 0, objects.class_of, special)]
            for k, v in kwargs.items()
        ],
    }
    if op != "call":
        message["op"] = op
    if len(_STREAMS) > _CALLBACK_DEPTH:
        raise RecursionError("callbacks of the tests nested too deeply")
    with _LOCK:
        if _STREAMS:
            message.update(_printed(*_STREAMS[-1]))
        try:
            wire.send(wire.ANSWERS_FD, message)
            objects.sent(True)
        except BaseException:
            objects.sent(False)
            raise
        while True:
            request = wire.receive(wire.REQUESTS_FD)
            if request is None:
                os._exit(0)
            if "returned" in request:
                return _decode(request["returned"], objects)
            if "raised" in request:
                raise _judges_exception(request["raised"], objects)
            reply(request, objects)


def _judges_exception(description: object, objects: Objects) -> BaseException:
    """An exception a callback raised in the judge, as the program's own exception."""
    if type(description) is not dict:
        return Exception("a callback of the tests failed")
    message = str(description.get("message", ""))[:_MESSAGE_CHARS]
    kind: Any = wire.EXCEPTIONS.get(description.get("builtin"))  # type: ignore[arg-type]
    if kind is None and wire.is_handle(description.get("handle")):
        try:
            found = objects.get(description["handle"])
        except wire.BoundaryError:
            found = None
        if type(found) is type and issubclass(found, BaseException):
            kind = found
    try:
        args: Any = _decode({"list": description.get("args", [])}, objects)
        return (kind or Exception)(*args)
    except Exception:
        return Exception(message)


_loop: Any = None


def _await(awaitable: Any) -> object:
    """Run ``awaitable`` to its end on the program's own event loop."""
    import asyncio

    global _loop
    if _loop is None:
        _loop = asyncio.new_event_loop()

    async def wait() -> object:
        return await awaitable

    return _loop.run_until_complete(wait())


_TASKS: dict[int, Any] = {}  # id of an awaitable the judge awaits: its task on the loop
_STEP_SECONDS = 0.005


def _task(awaitable: Any) -> Any:
    import asyncio

    global _loop
    if _loop is None:
        _loop = asyncio.new_event_loop()
    task = _TASKS.get(id(awaitable))
    if task is None:

        async def wait() -> object:
            return await awaitable

        task = _TASKS[id(awaitable)] = _loop.create_task(wait())
    return task


def _step(awaitable: Any) -> bool:
    """Run the program's event loop a moment for ``awaitable`` (started on first use); whether
    it is done. The judge awaits between steps, so its own timeouts run."""
    import asyncio

    task = _task(awaitable)
    if not task.done():
        _loop.run_until_complete(asyncio.wait([task], timeout=_STEP_SECONDS))
    return bool(task.done())


def _finish(awaitable: Any, cancel: bool) -> object:
    """The result of an awaitable that is done (or, with ``cancel``, cancelled now)."""
    import asyncio

    task = _task(awaitable)
    if cancel and not task.done():
        task.cancel()
        with contextlib.suppress(BaseException):
            _loop.run_until_complete(asyncio.wait([task], timeout=1.0))
    if not task.done():
        raise RuntimeError("the awaitable is not done")
    _TASKS.pop(id(awaitable), None)
    if task.cancelled():
        return None
    return task.result()


def perform(request: dict[str, object], objects: Objects) -> object:
    """Do what one request asks of the object its handle names."""
    op = request.get("op")
    # the program's object, of whatever type it has; args decode as a list, kwargs as a dict
    target: Any = objects.get(request.get("target"))
    args: Any = _decode({"list": request.get("args", [])}, objects)
    if op == "call":
        kwargs: Any = _decode({"dict": request.get("kwargs", [])}, objects)
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
    if op == "operator":
        return _operator(target, args)
    if op == "await":
        return _await(target)
    if op == "astep":
        return _step(target)
    if op in ("aresult", "acancel"):
        return _finish(target, op == "acancel")
    if op == "aiter":
        return type(target).__aiter__(target)
    if op == "anext":
        return _await(type(target).__anext__(target))
    if op == "enter":
        return type(target).__enter__(target)
    if op == "exit":
        type(target).__exit__(target, None, None, None)
        return None
    if op == "value":
        base = wire.plain_base(type(target))
        return target if base is None else wire._as_base(target, base)
    if op == "len":
        return len(target)
    if op == "hash":
        return hash(target)
    if op == "bool":
        return bool(target)
    if op == "contains":
        return args[0] in target
    if op == "copy":
        return _copy(target, args)
    if op == "method":
        _container_method(target, args, request, objects)
        return None
    if op == "dataclass":
        import dataclasses

        name, *rest = args
        if name not in ("asdict", "astuple", "fields", "replace", "is_dataclass"):
            raise wire.BoundaryError(f"unknown dataclass function {name!r}")
        kwargs = _decode({"dict": request.get("kwargs", [])}, objects)
        return getattr(dataclasses, name)(target, *rest, **kwargs)
    raise wire.BoundaryError(f"unknown request {op!r}")


def _decode(data: object, objects: Objects) -> object:
    import importlib

    return wire.decode(data, objects.get, 0, None, None, importlib.import_module, _judges_value)


def _judges_value(tag: str, body: object) -> object:
    """A callback of the tests (``{"callback": [number, name]}``) or a built-in class
    (``{"type": name}``)."""
    if tag == "callback":
        if type(body) is list and len(body) == 2 and wire.is_handle(body[0]):
            name = body[1] if type(body[1]) is str and body[1].isidentifier() else "callback"
            known = _CALLBACKS.get(body[0])
            if known is None:
                known = _CALLBACKS[body[0]] = _Callback(body[0], name[: wire.MAX_NAME_CHARS])
            return known
    elif tag == "type":
        found = getattr(builtins, body, None) if type(body) is str else None
        if type(found) is type:
            return found
    raise wire.BoundaryError(f"malformed {tag}")


_CONTAINER_METHODS = {
    list: {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
           "__setitem__", "__delitem__", "__iadd__", "__imul__"},
    dict: {"__setitem__", "__delitem__", "update", "pop", "popitem", "clear", "setdefault",
           "__ior__"},
    set: {"add", "discard", "remove", "clear", "update", "difference_update",
          "intersection_update", "symmetric_difference_update", "__ior__", "__iand__",
          "__isub__", "__ixor__"},
}  # fmt: skip


def _container_method(
    target: Any, args: list[Any], request: dict[str, object], objects: Objects
) -> None:
    """What the tests did to a list, dict or set they read from a program object's attribute,
    done to the program's own container too."""
    name, *rest = args
    allowed = next((m for k, m in _CONTAINER_METHODS.items() if isinstance(target, k)), set())
    if name not in allowed:
        raise wire.BoundaryError(f"unknown container method {name!r}")
    kwargs: Any = _decode({"dict": request.get("kwargs", [])}, objects)
    getattr(target, name)(*rest, **kwargs)


def _copy(target: Any, args: list[Any]) -> object:
    """A copy of ``target``: ``copy.copy``, ``copy.deepcopy`` or a pickle round trip (for the
    tests' ``pickle.loads(pickle.dumps(obj))``, done here, never in the judge)."""
    how, protocol = [*args, None][:2]
    if how == "copy" or how == "deepcopy":
        import copy

        return copy.copy(target) if how == "copy" else copy.deepcopy(target)
    if how == "pickle" and (protocol is None or (type(protocol) is int and 0 <= protocol <= 5)):
        import pickle

        return pickle.loads(pickle.dumps(target, protocol))
    raise wire.BoundaryError("malformed copy request")


def _operator(target: Any, args: list[Any]) -> object:
    """``operator.<name>(target, *others)`` (reflected: the other operand first)."""
    import operator

    name, reflected, *others = args
    if name in ("int", "float", "complex"):
        return {"int": int, "float": float, "complex": complex}[name](target)
    if name not in (*wire.BINARY_OPERATORS, *wire.UNARY_OPERATORS, *wire.COMPARISONS):
        raise wire.BoundaryError(f"unknown operator {name!r}")
    function = getattr(operator, f"{name}_" if name in ("and", "or") else name)
    if reflected:
        return function(*others, target)
    return function(target, *others)


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
        description["args"] = [encode(arg, objects) for arg in error.args]
        description["handle"] = objects.handle(error)
        json.dumps(description)
    except Exception:
        description = {"message": message[:_MESSAGE_CHARS], "class": {"builtin": "Exception"}}
    return description


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
