"""The judge: a row's tests, run in a trusted process against a program it does not trust.

The program runs in its own sandboxed process (:mod:`rlx.llm.sandbox.server`) and only defines
its functions. The tests run here, in the launcher, with the program's top-level names bound to
stand-ins (:class:`ProgramObject`) that forward each call through the plain-data boundary of
:mod:`rlx.llm.sandbox.wire`. So ``assert add(1, 2) == 3`` compares two ints built here: no
object of the program's can answer an ``==``, and nothing the program prints, patches, exits
with or kills decides the verdict.

Tests are the row's test code, split into units:

- each top-level ``assert`` statement is one test;
- each top-level function named ``test_*`` is one test, called with no arguments after the
  rest of the code has run (pytest's convention);
- with neither, the whole code is one test (e.g. ``def check(candidate): ...`` then
  ``check(add)``, HumanEval's form).

Other top-level statements (imports, helper definitions, assignments) are set-up: they run in
order, and one that fails is recorded as a failure. The verdict is the number of tests passed
out of the total; a program that stops answering (it exited, crashed, broke the protocol or ran
out of time) fails the test it was in and every test after it.

Standard library only, and no import of rlx (see :mod:`rlx.llm.sandbox.wire`).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import sys

from rlx.llm.sandbox import wire

MAX_FAILURES_REPORTED = 5
TIME_LIMIT = "the time limit passed"
_MESSAGE_CHARS = 300


class ProgramGone(BaseException):
    """The program stopped answering: it exited, crashed, broke the protocol or ran out of time.

    A BaseException, not an Exception, so that a test's ``except Exception`` cannot take a dead
    program for one that raised what the test expected.
    """


class ProgramError(Exception):
    """An exception raised inside the program whose type is not a built-in one."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name


# --- the channel to the program -----------------------------------------------------------------


class Channel:
    """Requests to the program and its answers, one at a time, before ``deadline``."""

    def __init__(self, requests_fd: int, answers_fd: int, deadline: float) -> None:
        self.requests_fd, self.answers_fd, self.deadline = requests_fd, answers_fd, deadline
        self.broken: str | None = None  # why the program stopped answering, once it has

    def first_message(self) -> dict[str, object]:
        """The program's note once it has run: ``{"ready": names}`` or ``{"error": ...}``."""
        message = self._receive()
        if "ready" not in message and "error" not in message:
            raise self._break("the program's first message was neither ready nor an error")
        return message

    def request(self, op: str, target: ProgramObject, *args: object, **kwargs: object) -> object:
        """Ask the program to apply ``op`` to the object ``target`` names; its answer, rebuilt
        here from plain data, or the exception it raised."""
        if self.broken is not None:
            raise ProgramGone(self.broken)
        try:
            message = {
                "op": op,
                "target": object.__getattribute__(target, "_handle"),
                "args": [wire.encode(a, _handle_of_argument) for a in args],
                "kwargs": [[k, wire.encode(v, _handle_of_argument)] for k, v in kwargs.items()],
            }
        except wire.BoundaryError as exc:
            raise TypeError(f"an argument cannot cross to the program: {exc}") from None
        try:
            wire.send(self.requests_fd, message)
        except OSError as exc:
            raise self._break(f"the program closed its channel ({exc.strerror})") from None
        answer = self._receive()
        if "value" in answer and len(answer) == 1:
            try:
                return wire.decode(answer["value"], self._object)
            except (wire.BoundaryError, ValueError, TypeError, RecursionError) as exc:
                raise self._break(f"the program answered with a malformed value: {exc}") from None
        if "raise" in answer and len(answer) == 1:
            raise _program_exception(answer["raise"])
        raise self._break("the program answered with a malformed message")

    def _receive(self) -> dict[str, object]:
        try:
            message = wire.receive(self.answers_fd, self.deadline)
        except TimeoutError:
            raise self._break(TIME_LIMIT) from None
        except (wire.BoundaryError, OSError) as exc:
            raise self._break(f"the program broke the protocol: {exc}") from None
        if message is None:
            raise self._break("the program exited or was killed")
        return message

    def _object(self, handle: int, type_name: str) -> ProgramObject:
        return ProgramObject(self, handle, type_name)

    def _break(self, reason: str) -> ProgramGone:
        self.broken = self.broken or reason
        return ProgramGone(self.broken)

    def out_of_time(self) -> ProgramGone:
        """What the launcher's alarm raises when the time limit passes during the tests."""
        return self._break(TIME_LIMIT)


def _handle_of_argument(value: object) -> int:
    if isinstance(value, ProgramObject):
        return object.__getattribute__(value, "_handle")
    raise wire.BoundaryError(f"a {type(value).__name__} is not plain data")


def _program_exception(description: object) -> Exception:
    """The exception the program raised: the built-in type of that name, else ProgramError."""
    if type(description) is not dict:
        return ProgramError("<malformed>", "")
    name = str(description.get("type", ""))[:100]
    message = str(description.get("message", ""))[:_MESSAGE_CHARS]
    kind = getattr(builtins, name, None)
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except Exception:
            pass
    return ProgramError(name, message)


class ProgramObject:
    """The judge's stand-in for an object that lives in the program (a function, a class, an
    instance, a generator).

    Calls, attribute access, items, ``len``, ``iter``/``next``, ``in``, ``bool``, ``str`` and
    ``repr`` go to the program, whose answers come back as plain data (or more stand-ins).
    Comparisons do not: a stand-in equals only itself, so the program never sees the expected
    value of an ``==`` and cannot answer it.
    """

    __slots__ = ("_channel", "_handle", "_type")

    def __init__(self, channel: Channel, handle: int, type_name: str) -> None:
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_type", type_name)

    def _ask(self, op: str, *args: object, **kwargs: object) -> object:
        return object.__getattribute__(self, "_channel").request(op, self, *args, **kwargs)

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self._ask("call", *args, **kwargs)

    def __getattr__(self, name: str) -> object:
        return self._ask("getattr", name)

    def __setattr__(self, name: str, value: object) -> None:
        self._ask("setattr", name, value)

    def __getitem__(self, key: object) -> object:
        return self._ask("getitem", key)

    def __setitem__(self, key: object, value: object) -> None:
        self._ask("setitem", key, value)

    def __delitem__(self, key: object) -> None:
        self._ask("delitem", key)

    def __contains__(self, item: object) -> bool:
        return _plain(self._ask("contains", item), bool, "in")

    def __len__(self) -> int:
        return _plain(self._ask("len"), int, "len()")

    def __iter__(self) -> object:
        return self._ask("iter")

    def __next__(self) -> object:
        return self._ask("next")

    def __bool__(self) -> bool:
        return _plain(self._ask("bool"), bool, "bool()")

    def __str__(self) -> str:
        return _plain(self._ask("str"), str, "str()")

    def __repr__(self) -> str:
        return _plain(self._ask("repr"), str, "repr()")

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return hash((ProgramObject, object.__getattribute__(self, "_handle")))


def _plain(value: object, kind: type, what: str) -> object:
    if type(value) is not kind:
        raise TypeError(
            f"the program's {what} gave a {type(value).__name__}, not a {kind.__name__}"
        )
    return value


# --- the tests ----------------------------------------------------------------------------------


class Unit:
    """One top-level statement of the test code, or a ``test_*`` function to call."""

    def __init__(
        self, line: int, is_test: bool, statement: ast.stmt | ast.Module | None, name: str = ""
    ) -> None:
        self.line, self.is_test, self.name = line, is_test, name
        self.statement = statement  # None: call the function ``name``

    def label(self) -> str:
        return f"{self.name}()" if self.statement is None else f"line {self.line}"


class Verdict:
    """What the judge found: ``passed`` of ``total`` tests, and why the others failed."""

    def __init__(self, total: int) -> None:
        self.passed, self.total = 0, total
        self.failures: list[str] = []
        self.defined = False  # the program ran to its end and sent its names
        self.timed_out = False

    def as_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "total": self.total,
            "failures": self.failures[:MAX_FAILURES_REPORTED],
            "failure_count": len(self.failures),
            "defined": self.defined,
            "timed_out": self.timed_out,
        }


def test_units(source: str) -> list[Unit]:
    """The test code cut into units (see the module docstring); SyntaxError if it is not
    Python."""
    body = ast.parse(source).body
    units = [Unit(s.lineno, isinstance(s, ast.Assert), s) for s in body]
    calls = [
        Unit(s.lineno, True, None, s.name)
        for s in body
        if isinstance(s, ast.FunctionDef) and s.name.startswith("test_")
    ]
    units += calls
    if not any(u.is_test for u in units):
        return [Unit(1, True, ast.Module(body=body, type_ignores=[]))]
    return units


def judge(tests: str, channel: Channel) -> Verdict:
    """Run ``tests`` against the program at the other end of ``channel``."""
    units = test_units(tests)
    verdict = Verdict(total=sum(u.is_test for u in units))
    try:
        first = channel.first_message()
    except ProgramGone as gone:
        verdict.failures.append(f"the program did not finish defining itself: {gone}")
        verdict.timed_out = channel.broken == TIME_LIMIT
        return verdict
    if "error" in first:
        error = _program_exception(first["error"])
        verdict.failures.append(f"the program raised {_describe(error)} before the tests")
        return verdict
    verdict.defined = True
    namespace = test_namespace(first["ready"], channel)
    for unit in units:
        if channel.broken is not None:
            verdict.failures.append(f"{unit.label()}: not run, {channel.broken}")
            continue
        try:
            _run_unit(unit, namespace)
        except ProgramGone as gone:
            verdict.failures.append(f"{unit.label()}: {gone}")
        except BaseException as error:
            verdict.failures.append(f"{unit.label()}: {_describe(error)}")
        else:
            if channel.broken is not None:  # a bare ``except:`` in the test swallowed it
                verdict.failures.append(f"{unit.label()}: {channel.broken}")
            else:
                verdict.passed += unit.is_test
    verdict.timed_out = channel.broken == TIME_LIMIT
    return verdict


def _run_unit(unit: Unit, namespace: dict[str, object]) -> None:
    if unit.statement is None:
        namespace[unit.name]()
        return
    module = unit.statement
    if not isinstance(module, ast.Module):
        module = ast.Module(body=[unit.statement], type_ignores=[])
    exec(compile(module, "<tests>", "exec"), namespace)


def test_namespace(ready: object, channel: Channel) -> dict[str, object]:
    """The globals the tests run in: the program's top-level names as plain values or
    stand-ins, and the modules it imported (the judge's own copies).

    A program's name that is also a built-in (``abs``, ``len``, ``isinstance`` ...) is left out:
    otherwise ``assert abs(f(x) - y) < 1e-6`` would hand the program the difference and let it
    answer 0.
    """
    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": builtins}
    if type(ready) is not dict:
        raise channel._break("the program's ready note is malformed")
    values, modules = ready.get("values", {}), ready.get("modules", {})
    if type(values) is not dict or type(modules) is not dict:
        raise channel._break("the program's ready note is malformed")
    for name, data in values.items():
        if not _bindable(name):
            continue
        try:
            namespace[name] = wire.decode(data, channel._object)
        except (wire.BoundaryError, ValueError, TypeError, RecursionError) as exc:
            raise channel._break(f"the program's name {name!r} is malformed: {exc}") from None
    for name, module in modules.items():
        if _bindable(name) and type(module) is str and _standard_module(module):
            namespace[name] = importlib.import_module(module)
    return namespace


def _bindable(name: object) -> bool:
    return type(name) is str and name.isidentifier() and not hasattr(builtins, name)


def _standard_module(name: str) -> bool:
    """Only the standard library's modules are imported here on the program's word."""
    return name.split(".")[0] in sys.stdlib_module_names and name.split(".")[0] != "antigravity"


def _describe(error: BaseException) -> str:
    message = str(error)
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text[:_MESSAGE_CHARS]
