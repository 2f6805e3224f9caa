"""The judge: a row's tests, run in a process of their own against a program they do not trust.

The program runs in another sandboxed process (:mod:`rlx.sandbox.server`) and only defines
its names. The tests run here, in the judge, itself sandboxed. The program's top-level names
are bound to what crossed the plain-data boundary of :mod:`rlx.sandbox.wire`:

- plain data (numbers, strings, containers of them) and the library values of
  :data:`wire.LIBRARY_KINDS` (namedtuples, ``Counter``, ``deque``, ``Decimal``, ``datetime``,
  numpy arrays ...) as the judge's own values, rebuilt from plain data;
- the program's classes as classes made here (:class:`ProgramType`), of the same name, with
  bases made the same way and only the special methods the program's class has; its
  functions, instances and generators as :class:`ProgramObject` handles of those classes, one
  handle per program object (so ``is`` answers as in the program). ``isinstance``,
  ``issubclass``, ``type(x) is C``, ``callable``, ``iter`` and ``hasattr`` of a special method
  answer from these classes, asking the program nothing. A handle's calls, attributes, items,
  iteration, arithmetic, ``await``, ``str``, ``repr``, ``len`` (an int >= 0 back) and ``bool``
  (a bool back) go to the program: their answers are values the program computes, and tell
  it nothing about the tests. ``==`` and ``<`` of a handle and anything that is not a
  program object, and an operator with the tests' data that would answer plain data, raise
  ``TypeError`` (a failed test) and never ask the program, so the program never answers
  whether a test passed; ``x in handle`` is decided on the items it yields; ``hash`` is the
  program's, salted per run so that it never equals a hash of the tests' values. Two program
  objects compare as the program's own ``__eq__`` (``__lt__`` ...) says. ``copy.copy``,
  ``copy.deepcopy`` and ``pickle.loads(pickle.dumps(x))`` of a handle are done in the program
  (a new handle back; the judge never unpickles a byte of the program's), and so are
  ``dataclasses.asdict``, ``astuple``, ``fields``, ``replace`` and ``is_dataclass``;
- a list, dict or set read from a program object's attribute as the judge's own copy (it
  compares as plain data) that makes each change the tests make to it (``append``,
  ``x[k] = v``, ``update``, ``add``, ``+=`` ...) to the program's container too;
- the program's exception classes as exception classes made here, of the same name and bases
  (built-in exceptions, or library ones of :data:`wire.LIBRARY_EXCEPTION_MODULES`), so
  ``except InsufficientFunds:`` and ``pytest.raises(InsufficientFunds)`` catch exactly the
  program's ``InsufficientFunds``;
- the program's modules as the judge's own import of the module of that name, never the
  program's module object, only when the tests use the name, and only a module of the fixed
  list :data:`wire.LIBRARY_MODULES`; else they are left unbound;
- the program's data globals (numbers, strings, containers) as the program's value *now*: each
  read of such a name where the tests' code reads the module's global (not a local of
  theirs) asks the program (:func:`testcode.read_live`), so ``bump(); assert counter == 2``
  and ``record(1); assert log == [1]`` see what the calls did.

No name the program sends is looked up, and no module is imported because the program names
it but one of :data:`wire.LIBRARY_MODULES` (a module in an answer too; a library exception
class only from :data:`wire.LIBRARY_EXCEPTION_MODULES`, which holds that list); a program's
name never replaces a built-in, a dunder name, or a name the
test code binds (:func:`testcode.module_bindings`). The trusted set-up code (``payload["setup"]``:
the prompt's own definitions but the entry point, :func:`testcode.trusted_setup`) runs after the
program's names are bound, and its names replace the program's. Tests that import ``solution``
get a module of these names. What a program call prints is printed here, to the tests'
``sys.stdout`` and ``sys.stderr`` of the moment. The channel is locked, so tests may call the
program from threads; a call answers one request at a time.

**Arguments.** The tests' arguments cross by value (program objects by handle, built-in
classes such as ``int`` by name). After a call, each list, dict, set, bytearray and deque it
was given (nested ones too) is brought up to date, in place, with the state the call left it
in: rebuilt here from plain data (and handles), a container that holds another one the tests
sent holding the tests' own, so ``items.sort()`` in the program sorts the tests' list and a
returned argument ``is`` the tests' object. A function of the tests (a lambda, a bound
method, a built-in such as ``len`` or ``str.upper``, a class of the tests) crosses as a
*callback*: when the program calls it, the judge, waiting for its answer, runs that function
(only one the tests gave, by the number the judge gave it) on the program's arguments,
rebuilt here, and sends its result or exception back; callbacks nest both ways, at most
:data:`MAX_CALLBACK_DEPTH` deep, within the time limit. Any other object of the tests' (an
instance of a class of theirs such as a ``TreeNode`` or a ``FakeClock``, a ``Mock()``, an
iterator) crosses the same way, as a handle the program may call, read and set non-dunder
attributes of (set only on an instance, never on a class, function or module of the tests'),
iterate, index, hash, compare, take ``len``, ``bool``, ``str`` and ``repr`` of: each asked of
the tests' object here, by its number, so the program runs nothing of the judge's but the
special methods and attributes of objects the tests gave it; such an object back from the
program is the tests' own. A ``SystemExit`` the program raises in a call (``sys.exit``,
argparse) is raised here as a ``SystemExit`` and the program answers on.

**pytest.** Test functions get ``@pytest.mark.parametrize`` values and fixtures: the test
code's own ``@pytest.fixture`` functions (``yield`` ones torn down after the test, fixtures
using fixtures, ``params`` expanded, ``autouse``, in test classes too; scopes wider than a
function made once per run), and ``tmp_path``, ``monkeypatch`` (pytest's own
``MonkeyPatch``), ``capsys`` and a minimal ``request``.

**What counts: tests as written.** A test is each ``assert`` statement of the test code (a
top-level one, or one in a function the tests call such as HumanEval's ``check``: by where it is
written), each unittest assertion method or ``pytest.raises`` written outside a test function,
and each test function, ``unittest`` test method and parametrized case as a whole. A test
passes only when every check it made passed: an assert in a loop is one test, failed when any
run of it failed; a test function with ten asserts is one test. An assert of a constant checks
nothing and is not counted; a test function or method that returns without a check passes, as
pytest and unittest pass it. A top-level statement that raises an error no failed check
explains is one failed test. Tests that could not run because the program stopped answering
fail (a top-level statement's asserts, each; a test function, as one). A set-up statement (an
import, a definition, an assignment: :func:`testcode.is_setup`) that fails fails the whole row.
The verdict is the number of tests passed and failed; a row passes when none failed and at
least one passed.

**Where the judge departs from plain Python** (the only intended disagreements):

- a ``StopIteration`` or ``StopAsyncIteration`` escaping a program call (or attribute, item,
  ``iter`` ...; not ``next``) is a ``RuntimeError`` here, as PEP 479 makes it in a generator,
  so it cannot end a ``map``, ``filter``, ``zip`` or ``all`` of the tests early;
- the names the prompt defines (its helpers, its constants) are the prompt's, run here, even
  when the completion redefines them; only the entry point is the completion's;
- a name the tests use without binding it (``math``, ``np``) that the program bound to a module
  is the judge's own import of that module, never the program's (patched or fake) module;
- ``==``, ``!=`` and ``<`` of a program object with the tests' data are not answered by the
  program: they fail the test (``obj == None`` is False, ``obj != None`` True, answered
  here); ``hash`` is the program's, hashed again with a secret of the judge's, so it never
  matches a hash of the tests' values;
- a binary operator between a program object and the tests' data whose answer is plain data
  (``abs(candidate(x) - 2/3)`` with a ``__sub__`` answering 0.0) raises ``TypeError``; one
  answering a program object (``Vector(1, 2) * 2``) is judged as any value;
- a name the tests read attributes of without binding it (``math.sqrt``), a standard-library
  module or ``np``/``pd``, is the judge's own import of that module even when the program bound
  it to a class, an instance or a function (one the tests call, ``copy(x)``, stays the
  program's);
- an instance of a program class deriving from a built-in type (``int``, ``str``, ``tuple``,
  ``list``, ``dict``, ``set`` ...: ``class Money(int)``, a ``str`` or ``IntEnum`` enum, a
  namedtuple with methods) is the built-in's own value for comparisons and ``hash`` (never the
  program's ``__eq__``), and the program's for its methods, attributes, ``str``, ``repr`` and
  the operators it overrides;
- a test function or method that yields (a generator, an async generator) or a coroutine a
  test returns un-awaited runs nothing and fails (pytest errors on them; unittest's plain pass
  of a generator method is a closed forgery); ``x in obj`` is true only when the items the
  object yields hold ``x`` (and, where its class defines ``__contains__``, that says so too),
  so a ``__contains__`` answering True for anything finds nothing;
- partial credit counts tests as written (above), not asserts executed;
- the program runs as the module ``solution``, so its ``if __name__ == "__main__":`` block does
  not run;
- a ``SystemExit`` of the program's that a test swallows (a bare ``except:``) fails that test
  unless the test code names ``SystemExit`` somewhere (``pytest.raises(SystemExit)``,
  ``except SystemExit``): tests that never name it do not expect the program to exit.

**Known limits** (not intended: an honest program that meets one disagrees with plain Python):
values past the wire's caps (:data:`wire.MAX_MESSAGE_BYTES`, :data:`wire.MAX_DEPTH`) cannot
cross, as an answer or as an argument's new state; an argument the program keeps and changes
in a *later* call is brought up to date only after the call it was given to; a container read
from a program object's attribute is a subclass of ``list``, ``dict`` or ``set`` (so
``type(obj.items) is list`` is false), and changes of the program's made to it after it was
read are not seen; a method call on a program object with the tests' arguments
(``greet('Bob').startswith('Hello, Bob')``) is the program's answer, as in plain Python (a
method call is the program answering a call, which the judge cannot tell from computing a
value); a program list, dict or set subclass's instance is brought up to date after its own
method calls, not after a program function it was given changed it; the program's
``__eq__``, ``__bool__`` and ``__len__`` of a built-in subclass are not asked; without trusted
set-up code (``prepend_prompt=False`` and no ``setup`` column) a completion that defines the
helpers the tests call itself is trusted for them; a program's name bound to a module not on
:data:`wire.LIBRARY_MODULES` (``sympy``) is unbound for the tests unless they import it
themselves; a program global read as ``solution.counter`` is the value at the program's end
of definition, not its value now; an attribute of a tests' object that the program reads and
that is a list, dict or set is the program's copy (changing it changes nothing of the tests');
a tests' object in the program is of a class of the sandbox's (``type(node).__name__``,
``isinstance`` and dunder attributes such as ``__dict__`` are not the tests' class's).

Why one long module: everything here runs in the judge's room from one bootstrap, and the
handle classes, the layouts' runners and the tally share the channel and the per-run state;
splitting them across modules would only add imports to every room's start.

Standard library only, and no import of rlx (see :mod:`rlx.sandbox.wire`).
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import os
import signal
import sys
import time

from rlx.sandbox import testcode, wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any, TypeVar

    _T = TypeVar("_T")
    _Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef

MAX_FAILURES_REPORTED = 5
TIME_LIMIT = "the time limit passed"
MAX_NAMES = 10_000
"""The most top-level names of a program the judge binds; a ready note with more is refused."""
MAX_CLASSES = 1_000
"""The most exception classes, and the most other classes, of a program the judge makes."""
MAX_OBJECTS = 1_000_000
"""The most program objects the judge holds handles to."""
MAX_CALLBACK_DEPTH = 100
"""The deepest nesting of callbacks (a test's function the program calls, which calls the
program ...); deeper, the program's call back raises RecursionError."""
_MESSAGE_CHARS = 300
_CO_GENERATOR = 0x20
_CO_COROUTINE = 0x80
_CO_ASYNC_GENERATOR = 0x200


class ProgramGone(BaseException):
    """The program stopped answering: it exited, crashed, broke the protocol or ran out of time.

    A BaseException, not an Exception, so that a test's ``except Exception`` cannot take a dead
    program for one that raised what the test expected.
    """


class ProgramError(Exception):
    """An exception of the program's that the judge cannot rebuild as a class of its own."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name


# --- the channel to the program -----------------------------------------------------------------


class Channel:
    """Requests to the program and its answers, one at a time (a lock keeps the tests' threads
    from interleaving them), before ``deadline``."""

    def __init__(self, requests_fd: int, answers_fd: int, deadline: float) -> None:
        import _thread

        self.requests_fd, self.answers_fd, self.deadline = requests_fd, answers_fd, deadline
        self.broken: str | None = None  # why the program stopped answering, once it has
        self.classes = ProgramClasses(self)
        self.objects: dict[int, ProgramObject] = {}  # one handle object per program object
        self.lock = _thread.RLock()
        self.callbacks: dict[int, object] = {}  # the tests' functions the program may call
        self.callback_numbers: dict[int, int] = {}
        self.callback_depth = 0
        self.builtin_handles: dict[int, int] = {}  # id of a built-in subclass's instance: handle
        self.exits = 0  # SystemExits of the program's raised in the tests
        self.exit_named = False  # the tests name SystemExit (expect one)
        global _current
        _current = self

    def first_message(self) -> dict[str, object]:
        """The program's note once it has run: ``{"ready": names}`` or ``{"error": ...}``."""
        message = self._receive()
        if len(message) != 1 or ("ready" not in message and "error" not in message):
            raise self.fail("the program's first message was neither ready nor an error")
        return message

    def request(self, op: str, target: int, *args: object, **kwargs: object) -> object:
        """Ask the program to apply ``op`` to the object the handle ``target`` names; its
        answer, rebuilt here from plain data, or the exception it raised. What the program
        printed meanwhile is printed here, to the tests' ``sys.stdout`` and ``sys.stderr`` of
        the moment (so ``redirect_stdout`` and the like see it). While the program works, it
        may call back functions of the tests it was given (:meth:`run_callback`). The lists,
        dicts, sets and bytearrays of the tests a call was given are brought up to date with
        what the call did to them (:meth:`update_in_place`)."""
        if self.broken is not None:
            raise ProgramGone(self.broken)
        sent: list[object] = []  # the tests' containers, in the order the program numbers them
        special = functools.partial(self.argument, sent)
        try:
            message = {
                "op": op,
                "target": target,
                "args": [wire.encode(a, _handle_of_argument, 0, None, special) for a in args],
                "kwargs": [
                    [k, wire.encode(v, _handle_of_argument, 0, None, special)]
                    for k, v in kwargs.items()
                ],
            }
        except (wire.BoundaryError, RecursionError) as exc:
            raise TypeError(f"an argument cannot cross to the program: {exc}") from None
        with self.lock:
            try:
                wire.send(self.requests_fd, message)
            except wire.BoundaryError as exc:
                raise TypeError(f"an argument cannot cross to the program: {exc}") from None
            except OSError as exc:
                raise self.fail(f"the program closed its channel ({exc.strerror})") from None
            stop: BaseException | None = None  # what a callback raised that ends the test
            while True:
                answer = self._receive()
                self._print(answer)
                if "callback" not in answer:
                    break
                stop = self.run_callback(answer, stop)
        if stop is not None:
            raise stop
        if "value" in answer and set(answer) <= {"value", "mutated", "origin"}:
            if "mutated" in answer:
                self.update_in_place(sent, answer["mutated"])
            value = self.rebuild(answer["value"], sent)
            origin = answer.get("origin")
            if op in ("getattr", "global") and wire.is_handle(origin) and type(value) in _TRACKED:
                return _TRACKED[type(value)].made(value, self, origin)
            return value
        if len(answer) == 1 and "raise" in answer:
            error = self.exception(answer["raise"])
            if op not in ("next", "anext") and isinstance(
                error, (StopIteration, StopAsyncIteration)
            ):
                # as PEP 479 does for generators: a call that raises StopIteration must not
                # end the loop (map, filter, zip, all) that made the call
                raise RuntimeError(
                    f"the program raised {type(error).__name__} from a {op}, not from next()"
                ) from error
            if isinstance(error, SystemExit):
                self.exits += 1
            raise error
        raise self.fail("the program answered with a malformed message")

    def argument(self, sent: list[object], value: object) -> object:
        """The ``special`` hook of :func:`wire.encode` for what the tests send: notes each
        container (to bring it up to date after the call), sends a function of the tests as a
        callback, a built-in class by name."""
        kind = type(value)
        if issubclass(kind, _BuiltinHandle) and kind is not ProgramType:
            return {"handle": _address(value)[1]}
        if wire.mutable_kind(value) is not None:
            sent.append(value)
            return None
        if issubclass(kind, ProgramObject) or kind is ProgramType:
            return None
        if kind is type and _is_builtin_class(value):
            return {"type": value.__name__}  # type: ignore[attr-defined]
        if isinstance(value, type) and issubclass(value, BaseException):
            return None
        if callable(value) or _is_test_object(value):
            return {"callback": [self.callback_number(value), _callable_name(value)]}
        return None

    def callback_number(self, function: object) -> int:
        """The number the program calls ``function`` back by (the same for the same object)."""
        number = self.callback_numbers.get(id(function))
        if number is None or self.callbacks[number] is not function:
            if len(self.callbacks) >= MAX_OBJECTS:
                raise wire.BoundaryError("too many callbacks")
            number = len(self.callbacks) + 1
            self.callbacks[number] = function  # kept alive: its id is not reused
            self.callback_numbers[id(function)] = number
        return number

    def run_callback(
        self, message: dict[str, object], stop: BaseException | None
    ) -> BaseException | None:
        """Run the function of the tests the program called back (only one the tests gave it,
        by its number) with the program's arguments, rebuilt here, and send its result (or
        the exception it raised). Returns what must end the test once the program has
        answered (a ``pytest.fail`` or the like in the callback), or ``stop`` as it was."""
        number = message.get("callback")
        function: Any = self.callbacks.get(number) if wire.is_handle(number) else None
        op: Any = message.get("op", "call")
        if function is None or set(message) - {"callback", "args", "kwargs", "op"}:
            raise self.fail("the program called back a function the tests never gave it")
        if op not in _TEST_OBJECT_OPS:
            raise self.fail("the program asked a malformed thing of the tests' object")
        reply: dict[str, object]
        if stop is not None:
            reply = {"raised": _describe_for_program(stop, self)}
        elif self.callback_depth >= MAX_CALLBACK_DEPTH:
            reply = {"raised": {"builtin": "RecursionError", "message": "callbacks too deep"}}
        else:
            self.callback_depth += 1
            try:
                args = self.rebuild({"list": message.get("args")})
                pairs = self.rebuild({"list": message.get("kwargs")})
                if not all(
                    type(p) is list and len(p) == 2 and type(p[0]) is str
                    for p in pairs  # type: ignore[attr-defined]
                ):
                    raise TypeError("malformed keyword arguments")
                kwargs = {k: v for k, v in pairs}  # type: ignore[attr-defined]
                result = _TEST_OBJECT_OPS[op](function, *args, **kwargs)  # type: ignore[misc]
                special = functools.partial(self.argument, [])
                reply = {"returned": wire.encode(result, _handle_of_argument, 0, None, special)}
            except ProgramGone:
                raise
            except Exception as error:
                reply = {"raised": _describe_for_program(error, self)}
            except BaseException as error:  # a skip, a failure of the test: after the answer
                stop = error
                reply = {"raised": _describe_for_program(error, self)}
            finally:
                self.callback_depth -= 1
        try:
            wire.send(self.requests_fd, reply)
        except wire.BoundaryError:
            refused = TypeError("a callback's result cannot cross to the program")
            wire.send(self.requests_fd, {"raised": _describe_for_program(refused, self)})
        except OSError as exc:
            raise self.fail(f"the program closed its channel ({exc.strerror})") from None
        return stop

    def update_in_place(self, sent: list[object], states: object) -> None:
        """Give the tests' containers a call was sent the state the program left them in (the
        judge's own values, rebuilt from plain data; a container that refers to another one
        the tests sent refers to the tests' own). TypeError when the states do not match."""
        if type(states) is not list or len(states) != len(sent):
            raise TypeError("the program's arguments came back malformed")
        values = [self.rebuild(state, sent) for state in states]
        for container, value in zip(sent, values, strict=True):
            kind = wire.mutable_kind(container)
            want = {"list": list, "deque": list, "dict": dict, "set": set, "bytearray": bytes}
            if type(value) is not want[kind]:  # type: ignore[index]
                raise TypeError("the program's arguments came back malformed")
        for container, value in zip(sent, values, strict=True):
            _replace_items(container, value)

    def _print(self, answer: dict[str, object]) -> None:
        for key in ("out", "err"):
            text = answer.pop(key, None)
            if type(text) is str:
                stream = sys.stdout if key == "out" else sys.stderr
                stream.write(text)

    def rebuild(self, data: object, sent: list[object] | None = None) -> object:
        """A value the program sent, rebuilt here; TypeError (a failed test) when it cannot be
        a value of the judge's (e.g. a program object as a dict key). ``{"ref": i}`` is the
        ``i``-th container of ``sent`` (the tests' own)."""

        def reference(tag: str, body: object) -> object:
            if tag == "ref" and sent is not None and type(body) is int and 0 <= body < len(sent):
                return sent[body]
            if tag == "callback" and type(body) is list and body and wire.is_handle(body[0]):
                known = self.callbacks.get(body[0])
                if known is not None:  # the tests' own object, back from the program
                    return known
            raise wire.BoundaryError(f"a {tag} where none is expected")

        try:
            return wire.decode(
                data, self.program_object, 0, self.classes.rebuild, self.classes.program_class,
                self.classes.module, reference, self.subclass_object,
            )  # fmt: skip
        except wire.BoundaryError as exc:
            raise TypeError(f"the program's answer cannot be judged: {exc}") from None
        except (ValueError, TypeError, RecursionError) as exc:
            raise self.fail(f"the program answered with a malformed value: {exc}") from None

    def exception(self, description: object) -> BaseException:
        """The exception the program raised, as the judge's own exception."""
        if type(description) is not dict:
            return self.fail("the program described an exception in a malformed way")
        message = description.get("message")
        message = message[:_MESSAGE_CHARS] if type(message) is str else ""
        try:
            kind = self.classes.rebuild(description.get("class"))
        except (wire.BoundaryError, TypeError):
            return ProgramError("an exception the judge cannot rebuild", message)
        args = description.get("args")
        try:
            values = (
                tuple(self.rebuild({"tuple": args}))  # type: ignore[arg-type]  # (a tuple)
                if type(args) is list
                else (message,)
            )
        except (TypeError, ProgramGone):
            values = (message,)
        error = _instance(kind, values, message)
        handle = description.get("handle")
        if kind in self.classes.made and wire.is_handle(handle):
            error.__dict__["_rlx_program"] = self.program_object(handle, None)
        return error

    def program_object(self, handle: int, class_data: object) -> ProgramObject:
        """The one handle object of the program's object ``handle``, of the judge's class that
        stands for its class (BoundaryError when the class is malformed)."""
        known = self.objects.get(handle)
        if known is not None:
            return known
        kind: type = ProgramObject
        if class_data is not None:
            kind = self.classes.program_class(class_data)
        if len(self.objects) >= MAX_OBJECTS:
            raise wire.BoundaryError("too many program objects")
        made: Any = object.__new__(kind)
        object.__setattr__(made, "_channel", self)
        object.__setattr__(made, "_handle", handle)
        self.objects[handle] = made
        return made

    def subclass_object(self, handle: int, class_data: object, value: object) -> object:
        """The one object of the judge's that stands for the program's instance ``handle`` of
        a class deriving from a built-in type: an instance of the judge's class for it (a
        subclass of that built-in) holding ``value``, the built-in value (see
        :class:`_BuiltinHandle`). A known one is brought up to date with ``value``."""
        known = self.objects.get(handle)
        if known is not None:
            if type(known) is not ProgramType and issubclass(type(known), _BuiltinHandle):
                base = getattr(type(known), "_rlx_base", None)
                if base in wire.MUTABLE_BASES and type(value) is base:
                    _replace_items(known, value, base)
            return known
        kind = self.classes.program_class(class_data)
        base = getattr(kind, "_rlx_base", None)
        if base is None or type(value) is not base:
            raise wire.BoundaryError("a built-in subclass's instance of the wrong kind")
        if len(self.objects) >= MAX_OBJECTS:
            raise wire.BoundaryError("too many program objects")
        new: Any = base.__new__
        made: Any = new(kind) if base in wire.MUTABLE_BASES else new(kind, value)
        if base in wire.MUTABLE_BASES:
            _replace_items(made, value, base)
        self.objects[handle] = made
        self.builtin_handles[id(made)] = handle
        return made

    def _receive(self) -> dict[str, object]:
        try:
            message = wire.receive(self.answers_fd, self.deadline)
        except TimeoutError:
            raise self.fail(TIME_LIMIT) from None
        except (wire.BoundaryError, OSError) as exc:
            raise self.fail(f"the program broke the protocol: {exc}") from None
        if message is None:
            raise self.fail("the program exited or was killed")
        return message

    def fail(self, reason: str) -> ProgramGone:
        """Mark the channel broken (the first reason sticks) and return the error to raise."""
        self.broken = self.broken or reason
        return ProgramGone(self.broken)

    def out_of_time(self) -> ProgramGone:
        """What the judge's alarm raises when the time limit passes during the tests."""
        return self.fail(TIME_LIMIT)


_HASH_SALT = os.urandom(16)
_current: Channel | None = None  # the channel of this process (pickle's copies are made by it)


def _is_builtin_class(value: Any) -> bool:
    """Whether ``value`` is a built-in class (not an exception): it crosses by its name."""
    name = getattr(value, "__name__", None)
    if type(name) is not str or getattr(builtins, name, None) is not value:
        return False
    return not issubclass(value, BaseException)  # type: ignore[arg-type]


def _is_test_object(value: object) -> bool:
    """Whether ``value``, an argument of the tests', is an object of theirs that crosses by
    handle (a ``TreeNode`` of the tests, a fake clock, an iterator): not plain data, a library
    value, a class or a module."""
    kind = type(value)
    if issubclass(kind, (type, type(sys), BaseException, *wire._BUILTIN_PLAIN)):
        return False
    try:
        return wire._library_value(value, kind, _handle_of_argument, 0, None) is None
    except Exception:
        return False


def _test_attribute(name: object) -> str:
    if type(name) is not str or not name.isidentifier() or name.startswith("__"):
        raise AttributeError(f"the tests' object's attribute {name!r} is not given to the program")
    return name


def _set_test_attribute(obj: object, name: object, value: object = None) -> None:
    """The program sets (or deletes) an attribute of an instance the tests gave it; never of a
    class, a function or a module of theirs."""
    if isinstance(obj, type) or type(obj).__name__ in ("function", "method", "module"):
        raise AttributeError("the program may not change the tests' classes or functions")
    if value is _MISSING:
        delattr(obj, _test_attribute(name))
    else:
        setattr(obj, _test_attribute(name), value)


def _test_object_ops() -> dict[str, Callable[..., object]]:
    """What the program may ask of an object the tests gave it (each one of the object's own
    special methods, or its non-dunder attributes)."""
    import operator

    ops: dict[str, Callable[..., object]] = {
        "call": lambda obj, *a, **k: obj(*a, **k),
        "getattr": lambda obj, name: getattr(obj, _test_attribute(name)),
        "setattr": _set_test_attribute,
        "delattr": lambda obj, name: _set_test_attribute(obj, name, _MISSING),
        "hash": hash,
        "bool": bool,
        "len": len,
        "iter": iter,
        "next": next,
        "str": str,
        "repr": repr,
        "getitem": operator.getitem,
        "setitem": operator.setitem,
        "delitem": operator.delitem,
        "contains": operator.contains,
    }
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        ops[name] = getattr(operator, name)
    return ops


def _callable_name(function: object) -> str:
    name = getattr(function, "__name__", None)
    return name if type(name) is str and name.isidentifier() else "callback"


def _describe_for_program(error: BaseException, channel: Channel) -> dict[str, object]:
    """An exception a callback raised, as the program rebuilds it: the built-in class it is (or
    derives from), or the program's own class when it is one of the program's exceptions."""
    description: dict[str, object] = {"message": _describe(error)}
    for kind in type(error).__mro__:
        if wire.EXCEPTIONS.get(kind.__name__) is kind:
            description["builtin"] = kind.__name__
            break
        handle = next((h for h, k in channel.classes.by_handle.items() if k is kind), None)
        if handle is not None:
            description["handle"] = handle
            break
    try:
        description["args"] = [wire.encode(a, _handle_of_argument) for a in error.args]
    except Exception:
        description["args"] = [str(error)[:_MESSAGE_CHARS]]
    return description


def _replace_items(container: Any, value: Any, base: type | None = None) -> None:
    """Give one of the tests' containers the items ``value`` holds, in place (a program's
    built-in subclass's instance, ``base``, by the built-in's own methods)."""
    if base is not None:
        if base is list:
            list.__setitem__(container, slice(None), value)
        else:
            base.clear(container)  # type: ignore[attr-defined]
            base.update(container, value)  # type: ignore[attr-defined]
        return
    kind = wire.mutable_kind(container)
    if kind == "list":
        list.__setitem__(container, slice(None), value)
    elif kind == "bytearray":
        bytearray.__setitem__(container, slice(None), value)
    elif kind == "dict":  # its own methods: an OrderedDict keeps its order apart
        container.clear()
        for key, item in value.items():
            container[key] = item
    elif kind == "set":
        set.clear(container)
        set.update(container, value)
    else:  # a deque
        container.clear()
        container.extend(value)


def _handle_of_argument(value: object) -> int:
    if issubclass(type(value), _BuiltinHandle) and type(value) is not ProgramType:
        return _address(value)[1]
    if issubclass(type(value), ProgramObject):
        return object.__getattribute__(value, "_handle")
    if type(value) is ProgramType:
        return type.__getattribute__(value, "_rlx_handle")
    raise wire.BoundaryError(f"a {type(value).__name__} is not plain data")


def _instance(kind: type, args: tuple[object, ...], message: str) -> BaseException:
    """An instance of the judge's exception class ``kind`` with the program's arguments."""
    try:
        error = kind(*args)
    except Exception:
        try:
            error = kind(message)
        except Exception:
            return ProgramError(kind.__name__, message)
    if getattr(type(error), "_rlx_made", False):
        error.__dict__["_rlx_message"] = message
    return error


_BASE_EXCEPTIONS = {
    kind.__name__: kind for kind in (BaseException, SystemExit, KeyboardInterrupt, GeneratorExit)
}


class ProgramClasses:
    """The judge's classes that stand for the program's: exception classes (so that ``except
    ProgramsError`` catches exactly the program's ``ProgramsError``) and the classes of its
    objects (so that ``isinstance``, ``type(x) is Point`` and ``callable`` answer as the
    program's types do), one per program class."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.by_handle: dict[int, type] = {}
        self.made: set[type] = set()
        self.types: dict[int, ProgramType] = {}

    def rebuild(self, description: object, depth: int = 0) -> type:
        """The class a description of :func:`wire.describe_exception_class` stands for: a
        built-in exception by name (``Exception`` subclasses and ``SystemExit`` only, and the
        other built-in exceptions as the bases of a program's class), a library exception of
        :data:`wire.LIBRARY_EXCEPTION_MODULES`, or a class made here with the program's name
        and bases. BoundaryError when the description is malformed."""
        if type(description) is not dict:
            raise wire.BoundaryError("a malformed exception class")
        if set(description) == {"builtin"}:
            kind: type[BaseException] | None = wire.EXCEPTIONS.get(description["builtin"])
            if kind is None and description["builtin"] == "SystemExit":
                kind = SystemExit  # sys.exit() or argparse in a call: pytest.raises catches it
            if kind is None and depth > 0:
                kind = _BASE_EXCEPTIONS.get(description["builtin"])
            if kind is None:
                raise wire.BoundaryError("not a built-in exception class")
            return kind
        if set(description) == {"library"}:
            return _library_exception(description["library"])
        if set(description) != {"handle", "name", "bases"}:
            raise wire.BoundaryError("a malformed exception class")
        handle, name, bases = description["handle"], description["name"], description["bases"]
        if not wire.is_handle(handle) or type(name) is not str or not name.isidentifier():
            raise wire.BoundaryError("a malformed exception class")
        if handle in self.by_handle:
            return self.by_handle[handle]
        if type(bases) is not list or len(bases) > 16 or depth > 16:
            raise wire.BoundaryError("an exception class with a malformed hierarchy")
        if len(self.by_handle) >= MAX_CLASSES:
            raise wire.BoundaryError("too many exception classes")
        parents = tuple(dict.fromkeys(self.rebuild(base, depth + 1) for base in bases))
        kind = _make_exception_class(name[: wire.MAX_NAME_CHARS], parents or (Exception,))
        self.by_handle[handle] = kind
        self.made.add(kind)
        return kind

    def program_class(self, description: object, depth: int = 0) -> ProgramType:
        """The judge's class for a class description of the program's
        (:meth:`rlx.sandbox.server.Objects.class_of`): a subclass of
        :class:`ProgramObject` with the program's name, its bases made the same way, and only
        the special methods the program's class has. BoundaryError when malformed or unknown."""
        if type(description) is not dict or not wire.is_handle(description.get("handle")):
            raise wire.BoundaryError("a malformed class")
        handle = description["handle"]
        known = self.types.get(handle)
        if known is not None:
            return known
        if set(description) - {"names"} != {"handle", "name", "bases", "supports"}:
            raise wire.BoundaryError("a class the program never described")
        name, bases, supports = description["name"], description["bases"], description["supports"]
        if type(name) is not str or not 0 < len(name) <= wire.MAX_NAME_CHARS:
            raise wire.BoundaryError("a malformed class name")
        if type(bases) is not list or len(bases) > 16 or depth > 32:
            raise wire.BoundaryError("a class with a malformed hierarchy")
        if type(supports) is not list or not all(type(n) is str for n in supports):
            raise wire.BoundaryError("a malformed class")
        if len(self.types) >= MAX_CLASSES:
            raise wire.BoundaryError("too many classes")
        parents = tuple(
            dict.fromkeys(
                self.program_class(base, depth + 1)
                for base in bases
                if not (type(base) is dict and set(base) == {"builtin"})
            )
        )
        builtin = [
            _SUBCLASSABLE[b["builtin"]]
            for b in bases
            if type(b) is dict and set(b) == {"builtin"} and b.get("builtin") in _SUBCLASSABLE
        ] + [p._rlx_base for p in parents if issubclass(p, _BuiltinHandle)]
        names = description.get("names")
        if builtin and type(names) is list and all(type(n) is str for n in names):
            kind = _make_builtin_class(self.channel, handle, name, parents, builtin[0], names)
            self.types[handle] = kind
            return kind
        kind = _make_program_class(self.channel, handle, name, parents, set(supports))
        self.types[handle] = kind
        return kind

    def module(self, name: str) -> object:
        """A module the program sent: the judge's own import of it (never the program's
        module object). BoundaryError when the judge cannot import it."""
        return judge_module(name)


def judge_module(name: str, named_by_tests: bool = False) -> ModuleType:
    """The judge's own import of the module ``name``; BoundaryError when it cannot. A module
    the program named (a name bound to a module, a module in an answer) only when it is on
    the fixed list :data:`wire.LIBRARY_MODULES`; one the tests name (they read attributes of
    the name), any module of the standard library's or numpy, pandas."""
    allowed = (
        name.split(".")[0] not in _NEVER_IMPORTED and wire.is_module_name(name)
        if named_by_tests
        else name in wire.LIBRARY_MODULES
    )
    if not allowed:
        raise wire.BoundaryError(f"the module {name!r} is not imported for the tests")
    import importlib

    try:
        return importlib.import_module(name)
    except Exception:
        raise wire.BoundaryError(f"the judge cannot import the module {name!r}") from None


_NEVER_IMPORTED = frozenset(
    {"antigravity", "this", "__hello__", "__phello__", "idlelib", "turtle", "turtledemo",
     "tkinter", "solution", "__main__"}
)  # fmt: skip


def _library_exception(reference: object) -> type:
    if type(reference) is not list or len(reference) != 2:
        raise wire.BoundaryError("a malformed library exception")
    module, name = reference
    if module not in wire.LIBRARY_EXCEPTION_MODULES or type(name) is not str:
        raise wire.BoundaryError("an exception of a module that is not on the list")
    import importlib

    kind = getattr(importlib.import_module(module), name, None) if name.isidentifier() else None
    if not (type(kind) is type and issubclass(kind, BaseException)):
        raise wire.BoundaryError("not a library exception class")
    return kind


def _program_attribute(self: BaseException, name: str) -> object:
    """An attribute of a program's exception that the judge's copy lacks: asked of the program's
    exception object (plain data back), never a dunder."""
    program = self.__dict__.get("_rlx_program")
    if program is None or name.startswith("__"):
        raise AttributeError(name)
    return getattr(program, name)


def _program_message(self: BaseException) -> str:
    message = self.__dict__.get("_rlx_message")
    return message if type(message) is str else Exception.__str__(self)


def _make_exception_class(name: str, parents: tuple[type, ...]) -> type:
    namespace = {
        "__module__": "solution",
        "__qualname__": name,
        "__getattr__": _program_attribute,
        "__str__": _program_message,
        "_rlx_made": True,
    }
    try:
        return type(name, parents, namespace)
    except TypeError:  # an impossible hierarchy (a lying program): plain Exception instead
        return type(name, (Exception,), namespace)


def _refuse(what: str) -> TypeError:
    return TypeError(
        f"{what} of a program object is not judged: the tests compare plain data (numbers, "
        "strings, containers), which the program's functions return"
    )


def _address(obj: object) -> tuple[Channel, int]:
    """The channel and handle of a program object (a handle, or a built-in subclass's)."""
    if issubclass(type(obj), _BuiltinHandle):
        channel: Channel = type(obj)._rlx_channel  # type: ignore[attr-defined]
        handle = channel.builtin_handles.get(id(obj))
        if handle is None or channel.objects.get(handle) is not obj:
            raise TypeError("a copy of a program object the program does not know")
        return channel, handle
    return object.__getattribute__(obj, "_channel"), object.__getattribute__(obj, "_handle")


def _ask(obj: object, op: str, *args: object, **kwargs: object) -> object:
    channel, handle = _address(obj)
    return channel.request(op, handle, *args, **kwargs)


class ProgramType(type):
    """The type of the judge's classes that stand for the program's classes. Calling one asks
    the program to make an instance; its attributes are the program class's; ``isinstance``,
    ``issubclass``, ``type(x) is C`` and its ``__name__`` are the judge's, on classes made here."""

    _rlx_channel: Channel
    _rlx_handle: int

    def __call__(cls, *args: object, **kwargs: object) -> object:
        return cls._rlx_channel.request("call", cls._rlx_handle, *args, **kwargs)

    def __getattr__(cls, name: str) -> object:
        if (name.startswith("__") and name.endswith("__")) or name.startswith("_rlx_"):
            raise AttributeError(name)
        return cls._rlx_channel.request("getattr", cls._rlx_handle, name)

    def __iter__(cls) -> object:  # an Enum class, iterated
        return cls._rlx_channel.request("iter", cls._rlx_handle)

    def __getitem__(cls, key: object) -> object:  # Color["RED"]
        return cls._rlx_channel.request("getitem", cls._rlx_handle, key)

    def __bool__(cls) -> bool:
        return True


def _make_program_class(
    channel: Channel, handle: int, name: str, parents: tuple[type, ...], supports: set[str]
) -> ProgramType:
    namespace: dict[str, object] = {
        "__slots__": (),
        "__module__": "solution",
        "__qualname__": name,
        "_rlx_channel": channel,
        "_rlx_handle": handle,
        "_rlx_truth_asked": bool(supports & {"__bool__", "__len__"}),
    }
    for method in supports:
        if method in _PROTOCOL_METHODS:
            namespace.update(_PROTOCOL_METHODS[method])
    if "__iter__" in supports and "__contains__" in supports:
        namespace["__contains__"] = _contains_by_iterating_and_asking
    elif "__iter__" in supports:
        namespace["__contains__"] = _contains_by_iterating
    elif "__contains__" in supports:
        namespace["__contains__"] = _refused_contains
    if "__hash__" not in supports:
        namespace["__hash__"] = None
    try:
        return ProgramType(name, parents or (ProgramObject,), namespace)
    except TypeError:  # an impossible hierarchy (a lying program): no bases
        return ProgramType(name, (ProgramObject,), namespace)


_SUBCLASSABLE: dict[str, type] = {kind.__name__: kind for kind in wire._SUBCLASSABLE}


class _BuiltinHandle:
    """The judge's instance of a program class deriving from a built-in type (``class
    Money(int)``, ``class Status(str, Enum)``, ``class Stack(list)``, a namedtuple with
    methods): an instance of that built-in holding the program object's value, so comparisons,
    ``hash``, ``len``, items and iteration are the built-in's own on that value (never the
    program's); and a handle: the attributes the program's class defines (its methods,
    properties, ``name`` and ``value`` of an enum member), ``str``, ``repr``, ``format`` and the
    operators it overrides go to the program. The instance of a list, dict or set is brought
    up to date after each call of its methods and each change the tests make to it, which is
    made to the program's too."""

    __slots__ = ()
    _rlx_base: type
    _rlx_names: frozenset[str]
    _rlx_channel: Channel

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_rlx_") or (name.startswith("__") and name.endswith("__")):
            return object.__getattribute__(self, name)
        kind = type(self)
        if name not in kind._rlx_names and kind._rlx_base not in wire.MUTABLE_BASES:
            try:
                return object.__getattribute__(self, name)
            except AttributeError:
                pass
        value = _ask(self, "getattr", name)
        if kind._rlx_base in wire.MUTABLE_BASES and callable(value):
            return functools.partial(_call_and_refresh, self, value)
        return value

    def __setattr__(self, name: str, value: object) -> None:
        _ask(self, "setattr", name, value)

    def __str__(self) -> str:
        if "__str__" not in type(self)._rlx_names:
            base: Any = type(self)._rlx_base
            return base.__str__(self)
        return _plain(_ask(self, "str"), str, "str()")

    def __repr__(self) -> str:
        if "__repr__" not in type(self)._rlx_names:
            base: Any = type(self)._rlx_base
            return base.__repr__(self)
        return _plain(_ask(self, "repr"), str, "repr()")

    def __format__(self, spec: str) -> str:
        if "__format__" not in type(self)._rlx_names:
            base: Any = type(self)._rlx_base
            return base.__format__(self, spec)
        return format(str(self), spec)

    def __copy__(self) -> object:
        return _ask(self, "copy", "copy", None)

    def __deepcopy__(self, memo: dict[int, object]) -> object:
        return _ask(self, "copy", "deepcopy", None)

    def __reduce_ex__(self, protocol: Any) -> Any:
        copied = _ask(self, "copy", "pickle", None)
        return (_same, (copied,))


def _call_and_refresh(obj: Any, method: Any, *args: object, **kwargs: object) -> object:
    try:
        return method(*args, **kwargs)
    finally:
        _refresh(obj)


def _refresh(obj: Any) -> None:
    """Bring a program's list, dict or set (of a class deriving from one) up to date."""
    base = type(obj)._rlx_base
    value = _ask(obj, "value")
    if type(value) is base:
        _replace_items(obj, value, base)


def _mutating(name: str) -> Callable[..., object]:
    def method(self: Any, *args: object) -> object:
        _ask(self, "method", name, *args)
        _refresh(self)
        return self if name.startswith("__i") else None

    method.__name__ = name
    return method


def _make_builtin_class(
    channel: Channel, handle: int, name: str, parents: tuple[type, ...], base: type,
    names: list[str],
) -> ProgramType:  # fmt: skip
    namespace: dict[str, object] = {
        "__slots__": (),
        "__module__": "solution",
        "__qualname__": name,
        "_rlx_channel": channel,
        "_rlx_handle": handle,
        "_rlx_base": base,
        "_rlx_names": frozenset(names),
    }
    for method in names:
        operator = method[2:-2]
        reflected = operator[:1] == "r" and operator[1:] in wire.BINARY_OPERATORS
        if operator in wire.BINARY_OPERATORS or reflected:
            namespace[method] = _operator_method(operator[1:] if reflected else operator, reflected)
    if base in wire.MUTABLE_BASES:
        mutators = _TRACKED[base].__dict__
        for method in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "__ior__",
                       "__iand__", "__isub__", "__ixor__"):  # fmt: skip
            if method in mutators:
                namespace[method] = _mutating(method)
    inherited = tuple(p for p in parents if issubclass(p, _BuiltinHandle))
    try:
        return ProgramType(name, inherited or (_BuiltinHandle, base), namespace)
    except TypeError:
        return ProgramType(name, (_BuiltinHandle, base), namespace)


def _refused_contains(self: ProgramObject, item: object) -> bool:
    raise _refuse("`in`")


def _contains_by_iterating(self: ProgramObject, item: object) -> bool:
    """``in`` for an iterable program object: the judge compares the items it yields."""
    return any(element is item or element == item for element in iter(self))  # type: ignore[call-overload]


def _contains_by_iterating_and_asking(self: ProgramObject, item: object) -> bool:
    """``in`` for an iterable program object whose class defines ``__contains__``: found among
    the items it yields (the judge compares) *and* so answered by its ``__contains__`` (plain
    Python asks only the latter: a wrong ``__contains__`` fails as it would there, and one that
    answers True for anything finds nothing the items do not hold)."""
    if not _contains_by_iterating(self, item):
        return False
    return _plain(_ask(self, "contains", item), bool, "`in`")


def _asked_len(self: ProgramObject) -> int:
    """``len()`` of a program object, asked of the program: an int >= 0, as Python requires
    (the program learns nothing from the tests by answering it)."""
    value = _plain(_ask(self, "len"), int, "len()")
    if not 0 <= value <= sys.maxsize:
        raise TypeError(f"the program's len() gave {value}, not a length")
    return value


def _unpickled(handle: int) -> object:
    """What ``pickle.loads`` makes of a program object ``pickle.dumps`` was given: a fresh copy
    (a pickle round trip, in the program) of the copy made when it was pickled."""
    channel = _current
    original = channel.objects.get(handle) if channel is not None else None
    if original is None:
        raise TypeError("a program object pickled in another run cannot be loaded")
    return _ask(original, "copy", "pickle", None)


def _same(value: object) -> object:
    return value


class _TrackedMixin:
    """A list, dict or set the tests read from a program object's attribute: the judge's own
    copy (compared as plain data), whose changes are made to the program's container too."""

    __slots__ = ()
    _rlx_channel: Channel
    _rlx_handle: int

    @classmethod
    def made(cls, value: Any, channel: Channel, handle: int) -> Any:
        made: Any = cls(value)  # type: ignore[call-arg]  # (a list, dict or set)
        made._rlx_channel, made._rlx_handle = channel, handle
        return made

    def _rlx_forward(self, name: str, *args: object, **kwargs: object) -> None:
        self._rlx_channel.request("method", self._rlx_handle, name, *args, **kwargs)

    def _rlx_plain(self) -> Any:
        base = type(self).__mro__[2]
        return base(self)

    def __copy__(self) -> object:
        return self._rlx_plain()

    def __deepcopy__(self, memo: dict[int, object]) -> object:
        import copy

        return copy.deepcopy(self._rlx_plain(), memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_same, (self._rlx_plain(),))


def _tracked_class(base: type, methods: tuple[str, ...], iterables: tuple[str, ...]) -> type:
    def forwarding(name: str) -> Callable[..., object]:
        local = getattr(base, name)

        def method(self: Any, *args: Any, **kwargs: Any) -> object:
            if base is dict and name in iterables:
                args, kwargs = (dict(*args, **kwargs),), {}
            elif name in iterables:
                args = tuple(list(a) for a in args)
            result = local(self, *args, **kwargs)
            if base is set and name == "pop":
                self._rlx_forward("discard", result)
            elif base is dict and name == "popitem":
                self._rlx_forward("pop", result[0])
            else:
                self._rlx_forward(name, *args, **kwargs)
            return result

        method.__name__ = name
        return method

    namespace: dict[str, object] = {"__slots__": ("_rlx_channel", "_rlx_handle")}
    namespace.update({name: forwarding(name) for name in methods})
    return type(base.__name__, (_TrackedMixin, base), namespace)


_TRACKED: dict[type, Any] = {
    list: _tracked_class(
        list,
        ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
         "__setitem__", "__delitem__", "__iadd__", "__imul__"),
        ("extend", "__iadd__"),
    ),
    dict: _tracked_class(
        dict,
        ("__setitem__", "__delitem__", "update", "pop", "popitem", "clear", "setdefault",
         "__ior__"),
        ("update", "__ior__"),
    ),
    set: _tracked_class(
        set,
        ("add", "discard", "remove", "pop", "clear", "update", "difference_update",
         "intersection_update", "symmetric_difference_update", "__ior__", "__iand__",
         "__isub__", "__ixor__"),
        ("update", "difference_update", "intersection_update", "symmetric_difference_update",
         "__ior__", "__iand__", "__isub__", "__ixor__"),
    ),
}  # fmt: skip


class ProgramObject:
    """The judge's handle to an object that lives in the program (a function, an instance, a
    generator ...), of a judge's class that stands for the object's class (see
    :class:`ProgramType`), made with the special methods the program's class has: so
    ``callable(x)``, ``iter(x)``, ``hasattr(x, "__len__")`` answer as the object's type does.

    Calls, attribute access, items, iteration, arithmetic, ``str``, ``repr``, ``len``,
    ``bool`` (of an object whose class defines its truth), copies and pickle round trips go to
    the program, whose answers come back as plain data (or more handles), of the type Python
    requires where it requires one. What would let the program answer a test's question about
    plain data instead of computing a value is refused: comparisons with anything that is not a
    program object, ``in`` (unless the object is iterable: the judge then compares the items
    itself) and ``hash`` raise ``TypeError``. Two program objects compare as the program's own
    ``__eq__`` (``__lt__`` ...) says.
    """

    __slots__ = ("_channel", "_handle")
    _rlx_truth_asked = True

    def __init__(self, channel: Channel, handle: int, type_name: str = "") -> None:
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_handle", handle)

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # protocols are the judge's, never the program's
        return _ask(self, "getattr", name)

    def __setattr__(self, name: str, value: object) -> None:
        _ask(self, "setattr", name, value)

    def __str__(self) -> str:
        return _plain(_ask(self, "str"), str, "str()")

    def __repr__(self) -> str:
        return _plain(_ask(self, "repr"), str, "repr()")

    def __eq__(self, other: object) -> bool:
        return _compare(self, other, "eq", "==")

    def __ne__(self, other: object) -> bool:
        return _compare(self, other, "ne", "!=")

    def __lt__(self, other: object) -> bool:
        return _compare(self, other, "lt", "<")

    def __le__(self, other: object) -> bool:
        return _compare(self, other, "le", "<=")

    def __gt__(self, other: object) -> bool:
        return _compare(self, other, "gt", ">")

    def __ge__(self, other: object) -> bool:
        return _compare(self, other, "ge", ">=")

    def __bool__(self) -> bool:
        if type(self)._rlx_truth_asked:  # asked of the program: a bool back
            return _plain(_ask(self, "bool"), bool, "bool()")
        return True  # an object whose class defines no truth is true, as in Python

    def __hash__(self) -> int:
        """The program's hash (an int it computes) hashed again with a secret of the judge's,
        so equal program objects hash alike (dict keys, set members, ``asyncio.gather``) but
        no hash of the program's can be made to match one of the tests' values."""
        value = _plain(_ask(self, "hash"), int, "hash()")
        return hash((_HASH_SALT, value))

    def __copy__(self) -> object:
        return _ask(self, "copy", "copy", None)

    def __deepcopy__(self, memo: dict[int, object]) -> object:
        return _ask(self, "copy", "deepcopy", None)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """``pickle.dumps`` of a program object: the round trip is the program's (its copy
        is made now, and ``pickle.loads`` copies that); no byte of the program's is unpickled
        here."""
        copied = _ask(self, "copy", "pickle", None)
        if issubclass(type(copied), ProgramObject):
            return (_unpickled, (object.__getattribute__(copied, "_handle"),))
        return (_same, (copied,))


def _compare(a: ProgramObject, b: object, name: str, symbol: str) -> bool:
    """A comparison of two program objects, asked of the program (a bool back); of a program
    object with anything else, refused."""
    if b is None and symbol in ("==", "!="):
        return symbol == "!="  # a program object is never None: the judge answers
    if not issubclass(type(b), ProgramObject):
        raise _refuse(symbol)
    return _plain(_ask(a, "operator", name, False, b), bool, symbol)


def _protocol_methods() -> dict[str, dict[str, object]]:
    """The special methods a judge's class gets when the program's class has them."""

    def call(self: ProgramObject, *args: object, **kwargs: object) -> object:
        return _ask(self, "call", *args, **kwargs)

    def getitem(self: ProgramObject, key: object) -> object:
        return _ask(self, "getitem", key)

    def setitem(self: ProgramObject, key: object, value: object) -> None:
        _ask(self, "setitem", key, value)

    def delitem(self: ProgramObject, key: object) -> None:
        _ask(self, "delitem", key)

    def iterate(self: ProgramObject) -> object:
        return _ask(self, "iter")

    def next_item(self: ProgramObject) -> object:
        return _ask(self, "next")

    def enter(self: ProgramObject) -> object:
        return _ask(self, "enter")

    def leave(self: ProgramObject, *exc_info: object) -> bool:
        _ask(self, "exit")
        return False  # the program never decides that an error in the test is swallowed

    def awaited(self: ProgramObject) -> Any:
        # the program runs it on its own event loop a step at a time; between steps the
        # tests' loop runs (their timeouts, their other tasks), and a cancel is passed on
        while not _ask(self, "astep"):
            try:
                yield None  # a bare yield: the tests' event loop runs once, then steps on
            except BaseException:
                _ask(self, "acancel")
                raise
        return _ask(self, "aresult")

    def send(self: ProgramObject, value: object) -> object:
        if _ask(self, "astep"):
            raise StopIteration(_ask(self, "aresult"))
        return None

    def throw(self: ProgramObject, *args: Any) -> object:
        _ask(self, "acancel")
        raise args[1] if len(args) > 1 and isinstance(args[1], BaseException) else args[0]

    def close(self: ProgramObject) -> None:
        return None

    def aiter(self: ProgramObject) -> object:
        return _ask(self, "aiter")

    def anext(self: ProgramObject) -> Any:
        return _Step(self)

    methods: dict[str, dict[str, object]] = {
        "__call__": {"__call__": call},
        "__getitem__": {"__getitem__": getitem},
        "__setitem__": {"__setitem__": setitem},
        "__delitem__": {"__delitem__": delitem},
        "__iter__": {"__iter__": iterate},
        "__len__": {"__len__": _asked_len},
        "__next__": {"__next__": next_item},
        "__enter__": {"__enter__": enter},
        "__exit__": {"__exit__": leave},
        "__await__": {"__await__": awaited, "send": send, "throw": throw, "close": close},
        "__aiter__": {"__aiter__": aiter},
        "__anext__": {"__anext__": anext},
    }
    for name in wire.BINARY_OPERATORS:
        methods[f"__{name}__"] = {f"__{name}__": _operator_method(name, False)}
        methods[f"__r{name}__"] = {f"__r{name}__": _operator_method(name, True)}
    results = {"index": int, "int": int, "float": float, "complex": complex}
    for name in wire.UNARY_OPERATORS:
        methods[f"__{name}__"] = {f"__{name}__": _unary_method(name, results.get(name))}
    return methods


class _Step:
    """What ``__anext__`` of a program's asynchronous iterator returns: awaiting it asks the
    program for the next item (StopAsyncIteration ends the loop)."""

    def __init__(self, iterator: ProgramObject) -> None:
        self.iterator = iterator

    def __await__(self) -> Any:
        if False:
            yield
        return _ask(self.iterator, "anext")


def _operator_method(name: str, reflected: bool) -> Callable[[ProgramObject, object], object]:
    def method(self: Any, other: object) -> object:
        return _operated(self, name, reflected, other)

    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _is_program_value(value: object) -> bool:
    kind = type(value)
    return issubclass(kind, (ProgramObject, _BuiltinHandle)) or kind is ProgramType


def _operated(self: Any, name: str, reflected: bool, other: object) -> object:
    """A binary operator of a program object, asked of the program. With the tests' own data
    as the other operand, an answer that is plain data is refused: ``abs(obj - expected)``
    would let the program learn the expected value and answer 0 (a program object back, such
    as ``Vector(1, 2) * 2``, is judged like any value)."""
    value = _ask(self, "operator", name, reflected, other)
    if not _is_program_value(other) and not _is_program_value(value):
        raise TypeError(
            f"the program's {name} with the tests' data gave plain data: an operator of a "
            "program object with the tests' values is not judged (the tests compare the "
            "plain data the program's functions return)"
        )
    return value


def _unary_method(name: str, result: type | None) -> Callable[[ProgramObject], object]:
    def method(self: ProgramObject) -> object:
        value = _ask(self, "operator", name, False)
        return value if result is None else _plain(value, result, f"{name}()")

    method.__name__ = f"__{name}__"
    return method


_PROTOCOL_METHODS = _protocol_methods()
_TEST_OBJECT_OPS = _test_object_ops()


def _plain(value: object, kind: type[_T], what: str) -> _T:
    if type(value) is not kind:
        raise TypeError(
            f"the program's {what} gave a {type(value).__name__}, not a {kind.__name__}"
        )
    return value


# --- counting checks ----------------------------------------------------------------------------


class Tally:
    """Tests passed and failed, and why the first few failed. A test is an assert statement of
    the test code (by where it is written), or a test function, method or parametrized case:
    it has passed when every check it made passed (see the module docstring)."""

    def __init__(self) -> None:
        self.results: dict[object, bool] = {}
        self.passed = self.failed = 0
        self.failed_checks = 0  # every failed check, counted as it happens
        self.failures: list[str] = []
        self.failure_count = 0
        self.setup_failed = False
        self.defined = False  # the program ran to its end and sent its names
        self.timed_out = False
        self.nested = 0  # inside a counted assertion method: its inner calls are not counted
        self.unit = ""  # the test running now, to name in failures
        self.unit_key: object = None  # a test function's key: its checks are one test

    def where(self, line: int) -> str:
        """``"test_x(), line 6"`` inside a test function, ``"line 6"`` at the top level."""
        return f"{self.unit}, line {line}" if self.unit.endswith(")") else f"line {line}"

    def record(self, key: object, ok: bool) -> None:
        """One check of the test ``key``: the test fails with its first failed check."""
        before = self.results.get(key)
        if before is None:
            self.results[key] = ok
            if ok:
                self.passed += 1
            else:
                self.failed += 1
        elif before and not ok:
            self.results[key] = False
            self.passed -= 1
            self.failed += 1
        if not ok:
            self.failed_checks += 1

    def check(self, key: object, ok: bool, why: str = "") -> None:
        """A check written at ``key``, part of the running test function when there is one."""
        self.record(self.unit_key if self.unit_key is not None else key, ok)
        if not ok:
            self.note(why)

    def fail(self, why: str, key: object = None) -> None:
        """A failed test (of its own unless ``key`` names one)."""
        self.record(object() if key is None else key, False)
        self.note(why)

    def explain(self, detail: str) -> None:
        """Add ``detail`` (a failed assert's message) to the failure noted last."""
        if self.failures:
            self.failures[-1] = f"{self.failures[-1]} ({detail})"[:_MESSAGE_CHARS]

    def note(self, why: str) -> None:
        self.failure_count += 1
        if len(self.failures) < MAX_FAILURES_REPORTED:
            self.failures.append(why[:_MESSAGE_CHARS])

    def as_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "failed": self.failed,
            "failures": self.failures,
            "failure_count": self.failure_count,
            "setup_failed": self.setup_failed,
            "defined": self.defined,
            "timed_out": self.timed_out,
        }


def assert_hook(tally: Tally):
    """The function every instrumented ``assert`` calls: the judge's truth of the test, one
    check of the assert written at ``line``, ``column`` (unless it is of a constant)."""

    def check(value: object, line: int, column: int, counted: bool) -> bool:
        key = ("assert", line, column)
        try:
            ok = bool(value)
        except TypeError as error:  # a program object's truth is not judged
            tally.check(key, False, f"{tally.where(line)}: {error}")
            raise AssertionError(str(error)) from None
        if counted:
            tally.check(key, ok, f"{tally.where(line)}: assert failed")
        return ok

    return check


class _CountedContext:
    """A context manager (``assertRaises``, ``pytest.raises``) whose outcome is one check."""

    def __init__(self, inner: Any, tally: Tally, failure: type[BaseException], key: object) -> None:
        self.inner, self.tally, self.failure, self.key = inner, tally, failure, key

    def __enter__(self) -> object:
        return self.inner.__enter__()

    def __exit__(self, *exc_info: object) -> object:
        try:
            result = self.inner.__exit__(*exc_info)
        except self.failure as error:
            self.tally.check(self.key, False, f"{_describe(error)}")
            raise
        if exc_info[0] is None or result:
            self.tally.check(self.key, True)
        return result

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def counted_assertion(method, tally: Tally, failure: type[BaseException]):
    """``method`` (an assertion method or ``pytest.raises``) counted as one check of the line
    that calls it: passed when it returns, failed when it raises ``failure``; a context it
    returns is counted at its exit."""

    def counted(*args: object, **kwargs: object) -> object:
        key = ("call", sys._getframe(1).f_lineno)
        tally.nested += 1
        try:
            result = method(*args, **kwargs)
        except failure as error:
            if tally.nested == 1:
                tally.check(key, False, _describe(error))
            raise
        finally:
            tally.nested -= 1
        if tally.nested == 0:
            if hasattr(result, "__enter__") and hasattr(result, "__exit__"):
                return _CountedContext(result, tally, failure, key)
            tally.check(key, True)
        return result

    counted.__name__ = getattr(method, "__name__", "assertion")
    counted.__doc__ = getattr(method, "__doc__", None)
    return counted


def prepare_frameworks(tree: ast.Module, tally: Tally) -> dict[str, ModuleType]:
    """Import the test frameworks the test code imports, with their assertions counted and
    their ``main()`` left to the judge (which runs the tests it finds itself)."""
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    frameworks: dict[str, ModuleType] = {}
    if "dataclasses" in roots:
        _patch_dataclasses()
    if "unittest" in roots:
        import unittest

        case = unittest.TestCase
        for name in dir(case):
            member = getattr(case, name)
            if (
                name.startswith(("assert", "fail"))
                and callable(member)
                and name != "failureException"
            ):
                setattr(case, name, counted_assertion(member, tally, case.failureException))
        unittest.main = _leave_main_to_the_judge  # type: ignore[assignment]  # a patch
        frameworks["unittest"] = unittest
    if "pytest" in roots:
        try:
            import pytest
        except ImportError:
            pass
        else:
            pytest.raises = counted_assertion(pytest.raises, tally, pytest.fail.Exception)
            pytest.main = _leave_main_to_the_judge  # type: ignore[assignment]  # a patch
            frameworks["pytest"] = pytest
    return frameworks


def _patch_dataclasses() -> None:
    """``dataclasses.asdict``, ``astuple``, ``fields``, ``replace`` and ``is_dataclass`` of a
    program object (or class) are asked of the program, whose dataclass it is."""
    import dataclasses

    for name in ("asdict", "astuple", "fields", "replace", "is_dataclass"):
        original = getattr(dataclasses, name)
        if getattr(original, "_rlx_patched", False):
            continue

        def patched(obj: Any, *args: Any, _name: str = name, _original: Any = original,
                    **kwargs: Any) -> Any:  # fmt: skip
            if issubclass(type(obj), ProgramObject):
                return _ask(obj, "dataclass", _name, *args, **kwargs)
            if type(obj) is ProgramType:
                return obj._rlx_channel.request(
                    "dataclass", obj._rlx_handle, _name, *args, **kwargs
                )
            return _original(obj, *args, **kwargs)

        patched.__name__ = name
        patched.__doc__ = original.__doc__
        patched._rlx_patched = True  # type: ignore[attr-defined]
        setattr(dataclasses, name, patched)


def _leave_main_to_the_judge(*args: object, **kwargs: object) -> object:
    """``unittest.main()`` / ``pytest.main()`` in test code: the judge finds and runs the tests
    itself once the code has run, so this does nothing (and never exits)."""
    return 0


# --- running the tests --------------------------------------------------------------------------


class SkippedError(Exception):
    """A test the test code itself skips (a skip mark, ``skipTest``, ``pytest.skip``): neither
    passed nor failed."""


class Unit:
    """One thing to run: a top-level statement, or a test function or method to call."""

    def __init__(
        self, label: str, node: ast.AST, run: Callable[[], None], setup: bool, is_test: bool
    ) -> None:
        self.label, self.node, self.run = label, node, run
        self.setup = setup  # its failure fails the row
        self.is_test = is_test  # a test function or method: passes when it returns, checked or not


def judge(tests: str | None, channel: Channel, setup: str = "") -> Tally:
    """Run ``tests`` (as :func:`testcode.prepare` made them; None: no tests) against the program
    at the other end of ``channel``, after the trusted ``setup`` code (see the module
    docstring)."""
    tally = Tally()
    try:
        _judge(tests, channel, tally, setup)
    finally:
        tally.timed_out = channel.broken == TIME_LIMIT
    return tally


def _judge(tests: str | None, channel: Channel, tally: Tally, setup: str = "") -> None:
    tree = ast.parse(tests or "")
    frameworks = prepare_frameworks(tree, tally)
    channel.exit_named = any(
        (isinstance(node, ast.Name) and node.id == "SystemExit")
        or (isinstance(node, ast.Attribute) and node.attr == "SystemExit")
        for node in ast.walk(tree)
    )
    try:
        first = channel.first_message()
    except ProgramGone as gone:
        tally.fail(f"the program did not finish defining itself: {gone}")
        return
    if "error" in first:
        error = channel.exception(first["error"])
        tally.fail(f"the program raised {_describe(error)} before the tests")
        return
    tally.defined = True
    if tests is None:  # no tests: the program passes by running to its end
        # the "ready" frame comes on a channel the program also holds, so it could send one
        # and then fail: it passes only if its room, done with its top level, still answers
        try:
            channel.request("global", 0, "__name__")
        except ProgramGone as gone:
            tally.fail(f"the program did not run to its end: {gone}")
            return
        except Exception:  # the room answered: whatever it said, it is serving
            pass
        tally.record("defined", True)
        return
    setup_tree = _parsed(setup)
    live: set[str] = set()
    try:
        namespace = test_namespace(
            first["ready"], channel, testcode.module_bindings(tree), tree, setup_tree, live
        )
    except ProgramGone as gone:
        tally.fail(str(gone))
        return
    namespace[testcode.ASSERT_HOOK] = assert_hook(tally)
    namespace[testcode.GLOBAL_HOOK] = functools.partial(channel.request, "global", 0)
    instrumented = testcode.read_live(testcode.instrument(ast.parse(tests)), live)
    for statement, counted in zip(tree.body, instrumented.body, strict=True):
        code = compile(ast.Module(body=[counted], type_ignores=[]), "<tests>", "exec")
        unit = Unit(
            f"line {statement.lineno}", statement, functools.partial(exec, code, namespace),
            setup=testcode.is_setup(statement), is_test=False,
        )  # fmt: skip
        run_unit(unit, tally, channel)
        if tally.setup_failed:
            return
    for unit in collected_tests(tree, namespace, frameworks):
        run_unit(unit, tally, channel)
    if tally.passed + tally.failed == 0:
        tally.fail("no check ran: every test was skipped or asserted nothing that ran")


def run_unit(unit: Unit, tally: Tally, channel: Channel) -> None:
    """Run one unit and count what it did (see the module docstring)."""
    key = ("unit", unit.label)
    if channel.broken is not None:
        if not unit.setup:
            why = f"{unit.label}: not run, {channel.broken}"
            keys: list[object] = [key]
            if not unit.is_test:
                keys = list(testcode.assert_keys(unit.node)) or keys
            for each in keys:
                tally.record(each, False)
            tally.note(why)
        return
    failed = tally.failed_checks
    exits = channel.exits
    tally.unit = unit.label
    tally.unit_key = key if unit.is_test else None
    try:
        unit.run()
    except SkippedError as skip:
        tally.note(f"{unit.label}: skipped ({skip})")
    except ProgramGone as gone:
        if unit.setup:
            tally.setup_failed = True
        _unexplained_failure(tally, failed, f"{unit.label}: {gone}", key)
    except BaseException as error:
        if unit.setup:
            tally.setup_failed = True
            tally.fail(f"{unit.label}: set-up failed, {_describe(error)}", key)
        elif _is_skip(error):
            tally.note(f"{unit.label}: skipped ({_describe(error)})")
        elif tally.failed_checks > failed and type(error) is AssertionError and error.args:
            tally.explain(_describe(error))  # the failed assert's own message
        else:
            _unexplained_failure(tally, failed, f"{unit.label}: {_describe(error)}", key)
    else:
        if channel.broken is not None:  # a bare ``except:`` in the test swallowed it
            _unexplained_failure(tally, failed, f"{unit.label}: {channel.broken}", key)
        elif channel.exits > exits and not channel.exit_named:
            # the program exited in a call and a bare ``except:`` swallowed it: tests that
            # never name SystemExit do not expect one
            _unexplained_failure(tally, failed, f"{unit.label}: the program exited", key)
        elif unit.is_test:
            tally.record(key, True)  # a test that returns passes, as pytest and unittest pass it
    finally:
        tally.unit_key = None


def _unexplained_failure(tally: Tally, failed_before: int, why: str, key: object) -> None:
    """The unit's test fails for an error, unless a check of the unit already failed (the
    error is then that check's AssertionError, or follows from it)."""
    if tally.failed_checks == failed_before:
        tally.fail(why, key)
    elif tally.unit_key is not None:
        tally.record(key, False)


def _is_skip(error: BaseException) -> bool:
    """A skip raised by the test code through its framework (``pytest.skip``,
    ``unittest.SkipTest``); the program cannot raise these (its exceptions are rebuilt as
    classes of its own)."""
    kinds = []
    if "unittest" in sys.modules:
        kinds.append(sys.modules["unittest"].SkipTest)
    if "pytest" in sys.modules:
        kinds.append(sys.modules["pytest"].skip.Exception)
    return isinstance(error, tuple(kinds))


def collected_tests(
    tree: ast.Module, namespace: dict[str, object], frameworks: dict[str, ModuleType]
) -> list[Unit]:
    """The test functions and classes the test code defines, as pytest and unittest collect
    them (only the test code's own: a program's name never shadows one)."""
    unittest = frameworks.get("unittest")
    nodes = {
        stmt.name: stmt
        for stmt in tree.body
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    units: list[Unit] = []
    fixtures = _fixtures(namespace.values())
    for name in testcode.test_functions(tree):
        function = namespace.get(name)
        if _is_test_code(function):
            units += _function_units(name, function, nodes[name], None, fixtures)
    for name in testcode.test_classes(tree):
        kind = namespace.get(name)
        if type(kind) is not type or kind.__module__ != "__main__":
            continue
        if unittest is not None and issubclass(kind, unittest.TestCase):
            units += _unittest_units(kind, nodes[name], unittest)
        else:
            units += _class_units(kind, nodes[name], fixtures)
    return units


def _is_test_code(function: object) -> bool:
    """Whether ``function`` is a plain function the test code itself defined."""
    code = getattr(function, "__code__", None)
    is_function = type(function).__name__ == "function"
    return is_function and getattr(code, "co_filename", "") == "<tests>"


def _function_units(
    label: str,
    function: Any,
    node: ast.AST,
    kind: type | None = None,
    fixtures: dict[str, Fixture] | None = None,
) -> list[Unit]:
    """One unit per parameter set of a test function (``@pytest.mark.parametrize``, and the
    ``params`` of the fixtures it uses); a method of ``kind`` runs on a fresh instance."""
    marks = [m for m in getattr(function, "pytestmark", []) if hasattr(m, "name")]
    if any(
        m.name == "skip" or (m.name == "skipif" and m.args and m.args[0] is True) for m in marks
    ):
        return []
    fixtures = dict(fixtures or {})
    if kind is not None:
        fixtures.update(_fixtures(vars(kind).values(), method=True))
    cases: list[dict[str, object]] = [{}]
    for mark in marks:
        if mark.name == "parametrize":
            cases = [dict(case, **more) for case in cases for more in _parameter_sets(mark)]
    for name in _fixture_closure(function, fixtures, kind is not None):
        fixture = fixtures[name]
        if fixture.params is not None and not any(name in case for case in cases):
            key = f"{_PARAM}{name}"
            cases = [dict(case, **{key: value}) for case in cases for value in fixture.params]
    units = []
    for index, params in enumerate(cases):
        name = label if len(cases) == 1 else f"{label}[{index}]"
        run = functools.partial(_call_test, function, params, kind, fixtures)
        units.append(Unit(f"{name}()", node, run, setup=False, is_test=True))
    return units


_PARAM = "\0param:"  # a parameter set's key for a fixture's param (never an argument name)


class Fixture:
    """A ``@pytest.fixture`` of the test code: its function, scope, params, autouse."""

    def __init__(self, function: Any, marker: Any, method: bool) -> None:
        self.function, self.method = function, method
        self.scope = getattr(marker, "scope", "function")
        params = getattr(marker, "params", None)
        self.params = None if params is None else list(params)
        self.autouse = bool(getattr(marker, "autouse", False))


def _fixtures(values: Any, method: bool = False) -> dict[str, Fixture]:
    """The pytest fixtures among ``values`` (the test code's names, or a test class's)."""
    found: dict[str, Fixture] = {}
    for value in list(values):
        marker = getattr(value, "_fixture_function_marker", None)  # pytest >= 8.4
        unwrap = getattr(value, "_get_wrapped_function", None)
        if marker is not None and callable(unwrap):
            function = unwrap()
        else:
            marker = getattr(value, "_pytestfixturefunction", None)  # older pytest
            function = value
        if marker is None or getattr(function, "__code__", None) is None:
            continue
        if getattr(function.__code__, "co_filename", "") != "<tests>":
            continue
        name = getattr(marker, "name", None) or function.__name__
        found[name] = Fixture(function, marker, method)
    return found


def _arguments(function: Any, method: bool) -> list[str]:
    code = function.__code__
    names = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    return names[1:] if method else names


def _fixture_closure(function: Any, fixtures: dict[str, Fixture], method: bool) -> list[str]:
    """The fixtures a test uses, itself or through the fixtures it uses (autouse ones too)."""
    found: list[str] = []
    todo = [n for n, f in fixtures.items() if f.autouse] + _arguments(function, method)
    while todo:
        name = todo.pop(0)
        if name in fixtures and name not in found:
            found.append(name)
            todo += _arguments(fixtures[name].function, fixtures[name].method)
    return found


_SESSION: dict[str, object] = {}  # the values of fixtures of a wider scope than a function


class _Request:
    """pytest's ``request`` fixture, the part tests use."""

    def __init__(self, run: _FixtureRun, name: str, param: object) -> None:
        self._run, self.fixturename = run, name
        if param is not _MISSING:
            self.param = param
        self.function, self.instance = run.function, run.instance
        self.cls = None if run.instance is None else type(run.instance)
        self.node: Any = type(sys)("node")
        self.node.name = getattr(run.function, "__name__", "test")  # type: ignore[attr-defined]

    def addfinalizer(self, finalizer: Callable[[], object]) -> None:
        self._run.teardowns.append(finalizer)

    def getfixturevalue(self, name: str) -> object:
        return self._run.value(name)


_MISSING = object()


class _FixtureRun:
    """The fixtures of one test run: made on first use, torn down (``yield`` fixtures,
    ``monkeypatch``, finalizers) in reverse order at its end."""

    def __init__(
        self, fixtures: dict[str, Fixture], params: dict[str, object], function: Any, instance: Any
    ) -> None:
        self.fixtures, self.params = fixtures, params
        self.function, self.instance = function, instance
        self.values: dict[str, object] = {}
        self.teardowns: list[Callable[[], object]] = []
        self.capture: _Capsys | None = None
        self.making: set[str] = set()

    def value(self, name: str, requester: str = "") -> object:
        if name in self.params:
            return self.params[name]
        if name in self.values:
            return self.values[name]
        fixture = self.fixtures.get(name)
        if fixture is None:
            made = self.builtin(name, requester)
        elif fixture.scope != "function" and name in _SESSION:
            made = _SESSION[name]
        else:
            if name in self.making:
                raise TypeError(f"the fixture {name!r} depends on itself")
            self.making.add(name)
            made = self.make(name, fixture)
            self.making.discard(name)
            if fixture.scope != "function":
                _SESSION[name] = made
        self.values[name] = made
        return made

    def make(self, name: str, fixture: Fixture) -> object:
        param = self.params.get(f"{_PARAM}{name}", _MISSING)
        arguments: dict[str, object] = {}
        for argument in _arguments(fixture.function, fixture.method):
            if argument == "request":
                arguments[argument] = _Request(self, name, param)
            else:
                arguments[argument] = self.value(argument, name)
        function = fixture.function
        if fixture.method:
            function = function.__get__(self.instance)
        result = function(**arguments)
        import inspect

        if inspect.isgenerator(result):
            value = next(result)
            if fixture.scope == "function":
                self.teardowns.append(functools.partial(_finish_generator, result))
            return value
        return result

    def builtin(self, name: str, requester: str) -> object:
        if name == "capsys":
            if self.capture is None:
                self.capture = _Capsys()
            return self.capture
        if name == "tmp_path":
            import pathlib
            import tempfile

            return pathlib.Path(tempfile.mkdtemp(prefix="test-"))
        if name == "monkeypatch":
            try:
                from pytest import MonkeyPatch
            except ImportError:
                raise TypeError("the fixture 'monkeypatch' needs pytest") from None
            patch = MonkeyPatch()
            self.teardowns.append(patch.undo)
            return patch
        if name == "request":
            return _Request(self, "", _MISSING)
        where = f" (asked for by the fixture {requester!r})" if requester else ""
        raise TypeError(
            f"the test needs the pytest fixture {name!r}{where}; the sandbox's runner gives "
            "tests the fixtures of the test code, tmp_path, monkeypatch, capsys and request"
        )

    def tear_down(self) -> None:
        error: BaseException | None = None
        for teardown in reversed(self.teardowns):
            try:
                teardown()
            except Exception as exc:  # pytest reports a teardown error as the test's error
                error = error or exc
        if error is not None:
            raise error


def _finish_generator(generator: Any) -> None:
    try:
        next(generator)
    except StopIteration:
        return
    raise RuntimeError("a fixture yielded twice")


def _parameter_sets(mark: Any) -> list[dict[str, object]]:
    names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
    values = mark.args[1] if len(mark.args) > 1 else mark.kwargs.get("argvalues", [])
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(names)
    sets = []
    for value in values:
        if type(value).__name__ == "ParameterSet":  # pytest.param(...)
            row = tuple(value.values)
        else:
            row = value if len(names) > 1 else (value,)
        sets.append(dict(zip(names, row, strict=False)))
    return sets


def _call_test(
    function: Any,
    params: dict[str, object],
    kind: type | None,
    fixtures: dict[str, Fixture] | None = None,
) -> None:
    """Call a test function (a method on a fresh instance of ``kind``, between its
    ``setup_method`` and ``teardown_method``) with its parameters and the fixtures it asks
    for; run it if it is async."""
    code = function.__code__
    fixtures = fixtures or {}
    wanted = _arguments(function, kind is not None)
    defaults = len(function.__defaults__ or ())
    required = wanted[: len(wanted) - defaults] if defaults else wanted
    instance = None if kind is None else kind()
    run = _FixtureRun(fixtures, params, function, instance)
    needed = [n for n, f in fixtures.items() if f.autouse] + required
    if "capsys" in _fixture_closure(function, fixtures, kind is not None) or "capsys" in needed:
        run.capture = _Capsys()
    if instance is not None and hasattr(instance, "setup_method"):
        instance.setup_method(function.__get__(instance))
    saved = sys.stdout, sys.stderr
    try:
        if run.capture is not None:
            sys.stdout, sys.stderr = run.capture.out, run.capture.err
        try:
            for name in needed:
                run.value(name)
            arguments = {n: run.value(n) for n in wanted if n in required or n in params}
            result = function(**arguments) if instance is None else function(instance, **arguments)
            if code.co_flags & _CO_COROUTINE:
                import asyncio

                asyncio.run(result)
            else:
                _refuse_unrun(result)
        finally:
            run.tear_down()
    finally:
        sys.stdout, sys.stderr = saved
        if instance is not None and hasattr(instance, "teardown_method"):
            instance.teardown_method(function.__get__(instance))


def _refuse_unrun(result: object) -> None:
    """A test function that returns a generator or a coroutine ran none of its body (``yield``
    makes it a generator function): it fails, as pytest errors on it."""
    import inspect

    if inspect.isgenerator(result) or inspect.isasyncgen(result) or inspect.iscoroutine(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()
        raise TypeError(
            f"the test returned a {type(result).__name__} and ran nothing: a test function "
            "must not yield (pytest errors on it)"
        )


class _Capsys:
    """pytest's ``capsys`` fixture, the part tests use: what the test (and every program call
    it makes) prints, read with ``readouterr()``."""

    def __init__(self) -> None:
        import io

        self.out, self.err = io.StringIO(), io.StringIO()

    def readouterr(self) -> Any:
        import collections

        result = collections.namedtuple("result", ["out", "err"])  # pytest's is CaptureResult
        captured = result(self.out.getvalue(), self.err.getvalue())
        for stream in (self.out, self.err):
            stream.seek(0)
            stream.truncate()
        return captured


def _class_units(
    kind: type, node: _Definition, fixtures: dict[str, Fixture] | None = None
) -> list[Unit]:
    """pytest's ``Test*`` classes: each ``test*`` method on a fresh instance."""
    units: list[Unit] = []
    if "__init__" in vars(kind):
        return units  # pytest collects no class with an __init__
    seen: set[str] = set()
    for owner in kind.__mro__:  # its own test methods, then the ones it inherits
        for name, function in list(vars(owner).items()):
            if not name.startswith("test") or name in seen:
                continue
            seen.add(name)
            function = getattr(kind, name, None)
            if _is_test_code(function):
                item = next((i for i in node.body if getattr(i, "name", None) == name), node)
                units += _function_units(f"{kind.__name__}.{name}", function, item, kind, fixtures)
    return units


def _unittest_units(kind: type, node: _Definition, unittest: Any) -> list[Unit]:
    """One unit per test method of a ``unittest.TestCase``, run by unittest itself."""
    units = []
    for name in unittest.TestLoader().getTestCaseNames(kind):
        method = next((item for item in node.body if getattr(item, "name", None) == name), node)
        run = functools.partial(_run_test_case, kind, name, unittest)
        units.append(Unit(f"{kind.__name__}.{name}()", method, run, setup=False, is_test=True))
    return units


def _run_test_case(kind: type, name: str, unittest: Any) -> None:
    """Run one unittest test (its class set-up too) and raise what it found: unittest keeps
    failures in a result instead of raising them."""
    flags = getattr(getattr(getattr(kind, name, None), "__code__", None), "co_flags", 0)
    asynchronous = issubclass(kind, getattr(unittest, "IsolatedAsyncioTestCase", ()))
    if flags & (_CO_GENERATOR | _CO_ASYNC_GENERATOR) or (
        flags & _CO_COROUTINE and not asynchronous
    ):
        # unittest passes such a method without running its body: a closed forgery
        raise TypeError(f"the test method {name} is a generator or coroutine and runs nothing")
    result = unittest.TestResult()
    unittest.TestSuite([kind(name)]).run(result)
    problems = [text for _, text in result.errors + result.failures]
    problems += ["an unexpected success"] * len(result.unexpectedSuccesses)
    if problems:  # before skips: a subtest that errors fails the test even if another skipped
        raise AssertionError(problems[0].strip().splitlines()[-1][:_MESSAGE_CHARS])
    if result.skipped:
        raise SkippedError(str(result.skipped[0][1]))


# --- the names the tests see --------------------------------------------------------------------


def test_namespace(
    ready: object,
    channel: Channel,
    test_bound: set[str],
    tree: ast.Module | None = None,
    setup: ast.Module | None = None,
    live: set[str] | None = None,
) -> dict[str, object]:
    """The globals the tests run in: the program's top-level names, rebuilt from plain data or
    as handles, except any that would replace a built-in, a dunder name or a name the test code
    binds itself; then the names the trusted ``setup`` code defines, which replace the
    program's. A program's name bound to a module is bound to the judge's own import of that
    module, when the tests use the name and the judge can import it; else it is left unbound.
    When the tests import ``solution``, it is a module of these names."""
    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": builtins}
    names = ready.get("names") if type(ready) is dict and len(ready) == 1 else None
    if type(names) is not dict or len(names) > MAX_NAMES:
        raise channel.fail("the program's ready note is malformed")
    trees = [t for t in (tree, setup) if t is not None]
    imported = any(_imports_solution(t) for t in trees)
    used = set().union(*(_names_used(t) for t in trees)) if trees else set()
    module_like = _module_like_names(trees)
    module = type(sys)("solution") if imported else None
    for name, data in names.items():
        if type(name) is not str or not name.isidentifier() or len(name) > wire.MAX_NAME_CHARS:
            continue
        if name.startswith("__") and name.endswith("__"):
            continue
        if not (bindable(name, test_bound) or module is not None):
            continue
        try:
            value: object
            replaced = _library_module(name, module_like.get(name))
            if replaced is not None:
                value = replaced  # the judge's own module, whatever the program bound
            elif type(data) is dict and set(data) == {"module"}:
                if name not in used and module is None:
                    continue
                try:
                    value = judge_module(data["module"])
                except wire.BoundaryError:
                    continue  # the program's own module object is never bound
            else:
                value = wire.decode(
                    data, channel.program_object, 0, channel.classes.rebuild,
                    channel.classes.program_class, channel.classes.module, None,
                    channel.subclass_object,
                )  # fmt: skip
        except (wire.BoundaryError, ValueError, TypeError, RecursionError) as exc:
            raise channel.fail(f"the program's name {name[:100]!r} is malformed: {exc}") from None
        if module is not None:
            setattr(module, name, value)
        if bindable(name, test_bound):
            namespace[name] = value
            if live is not None and _is_data_global(value, data):
                live.add(name)  # the tests read it from the program each time
    if setup is not None:
        defined = run_setup(setup, namespace)
        if live is not None:
            live.difference_update(defined)
        if module is not None:
            for name in defined:
                setattr(module, name, namespace[name])
    if module is not None:
        sys.modules["solution"] = module
    return namespace


def _is_data_global(value: object, data: object) -> bool:
    """Whether a program's global crossed as data (a number, a string, a container ...) that
    a call of the program's may rebind or change: not a module, class, function or handle."""
    if type(data) is dict and set(data) & {"module", "class", "exception", "handle"}:
        return False
    return not (callable(value) or isinstance(value, type(sys)) or _is_program_value(value))


def _parsed(code: str) -> ast.Module | None:
    if not code.strip():
        return None
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None  # no trusted set-up: the program's own definitions stand


def run_setup(setup: ast.Module, namespace: dict[str, object]) -> list[str]:
    """Run the trusted set-up code (the prompt's own definitions) in the tests' namespace,
    statement by statement (one that fails is left out); the names it bound."""
    before = dict(namespace)
    for statement in setup.body:
        code = compile(ast.Module(body=[statement], type_ignores=[]), "<setup>", "exec")
        try:
            exec(code, namespace)
        except Exception:
            continue
    return [
        name
        for name, value in namespace.items()
        if not name.startswith("__") and (name not in before or before[name] is not value)
    ]


def _imports_solution(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            alias.name.split(".")[0] == "solution" for alias in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "solution":
            return True
    return False


_MODULE_ALIASES = {"np": "numpy", "pd": "pandas"}


def _module_like_names(trees: list[ast.Module]) -> dict[str, set[str]]:
    """The names the tests read attributes of (``math.sqrt``) and never call themselves
    (``copy(x)``), with the attributes read."""
    attributes: dict[str, set[str]] = {}
    called: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                attributes.setdefault(node.value.id, set()).add(node.attr)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called.add(node.func.id)
    return {name: attrs for name, attrs in attributes.items() if name not in called}


def _library_module(name: str, attributes: set[str] | None) -> ModuleType | None:
    """The judge's own import of the standard-library module ``name`` (or of numpy for ``np``,
    pandas for ``pd``) when the tests use ``name`` as a module (they read attributes of it
    that the module has, and never call it), whatever the program bound to the name."""
    module_name = _MODULE_ALIASES.get(name, name)
    if not attributes or module_name.split(".")[0] not in (
        *sys.stdlib_module_names,
        *_MODULE_ALIASES.values(),
    ):
        return None
    try:
        module = judge_module(module_name, named_by_tests=True)
    except wire.BoundaryError:
        return None
    return module if all(hasattr(module, attr) for attr in attributes) else None


def _names_used(tree: ast.Module) -> set[str]:
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def bindable(name: object, test_bound: set[str]) -> bool:
    """Whether a program's top-level name may be bound for the tests."""
    return (
        type(name) is str
        and len(name) <= wire.MAX_NAME_CHARS
        and name.isidentifier()
        and not (name.startswith("__") and name.endswith("__"))
        and not hasattr(builtins, name)
        and name not in test_bound
    )


def _describe(error: BaseException) -> str:
    try:
        message = str(error)
    except BaseException:
        message = ""
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text[:_MESSAGE_CHARS]


# --- the judge's process ------------------------------------------------------------------------


def main(payload: dict, seconds: float) -> None:
    """The judge's process, started in its room: ``payload`` is what the trainer sent for it
    (``{"tests": code or None, ...}``), the program's channel on fds 3 and 4, the verdict to
    fd 5 as one JSON object."""
    tests = payload["tests"]
    setup = payload.get("setup") or ""
    deadline = time.monotonic() + seconds
    channel = Channel(wire.REQUESTS_FD, wire.ANSWERS_FD, deadline)

    def alarm(signum: int, frame: object) -> None:
        raise channel.out_of_time()

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001))
    try:
        tally = judge(tests, channel, setup if type(setup) is str else "")
    except ProgramGone as gone:  # the alarm outside a test
        tally = Tally()
        tally.fail(str(gone))
        tally.timed_out = channel.broken == TIME_LIMIT
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    verdict = json.dumps(tally.as_dict()).encode("utf-8")
    while verdict:
        verdict = verdict[os.write(wire.VERDICT_FD, verdict) :]
    os._exit(0)
