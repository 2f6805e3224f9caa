"""The judge: a row's tests, run in a process of their own against a program they do not trust.

The program runs in another sandboxed process (:mod:`rlx.llm.sandbox.server`) and only defines
its names. The tests run here, in the judge, itself sandboxed (its own unprivileged uid, its
own empty working folder and private ``/tmp``, its own limits; see
:mod:`rlx.llm.sandbox.launcher`). The program's top-level names are bound to what crossed the
plain-data boundary of :mod:`rlx.llm.sandbox.wire`:

- plain data (numbers, strings, containers of them) as the judge's own values;
- the program's functions, classes, instances and modules as :class:`ProgramObject` handles,
  whose only power is to be called, asked for an attribute or item, iterated, or turned into a
  string: ``==``, ``!=``, ``<``, ``in``, ``bool()``, ``len()``, ``hash()`` and ``isinstance()``
  on a handle raise ``TypeError`` (a failed test) and never ask the program, so the program
  never answers whether a test passed;
- the program's exception classes as exception classes made here, of the same name and built-in
  bases, so ``except InsufficientFunds:`` and ``pytest.raises(InsufficientFunds)`` catch
  exactly the program's ``InsufficientFunds``.

No name the program sends is imported or looked up, and a program's name never replaces a
built-in, a dunder name, or a name the test code binds (:func:`testcode.module_bindings`).

**What counts.** Every executed ``assert`` of the test code is one check (wherever it sits: a
loop, an ``if``, a ``with``, a ``check()`` function), and so is every ``unittest`` assertion
method and every ``pytest.raises``; an assert of a constant checks nothing and is not counted.
A test (a top-level statement, a ``test*`` function or method) that raises an error no counted
check explains is one failed check; a test function or method that returns without a check is
one passed check, as pytest and unittest pass it. A test that could not run because the program
stopped answering counts its asserts as failed. A set-up statement (an import, a definition, an
assignment: :func:`testcode.is_setup`) that fails fails the whole row. The verdict is the
number of checks passed and failed; a row passes when no check failed and at least one passed.

Standard library only, and no import of rlx (see :mod:`rlx.llm.sandbox.wire`).
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

from rlx.llm.sandbox import testcode, wire

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
"""The most exception classes of a program the judge makes."""
_MESSAGE_CHARS = 300
_CO_COROUTINE = 0x80


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
    """Requests to the program and its answers, one at a time, before ``deadline``."""

    def __init__(self, requests_fd: int, answers_fd: int, deadline: float) -> None:
        self.requests_fd, self.answers_fd, self.deadline = requests_fd, answers_fd, deadline
        self.broken: str | None = None  # why the program stopped answering, once it has
        self.classes = ProgramClasses(self)

    def first_message(self) -> dict[str, object]:
        """The program's note once it has run: ``{"ready": names}`` or ``{"error": ...}``."""
        message = self._receive()
        if len(message) != 1 or ("ready" not in message and "error" not in message):
            raise self.fail("the program's first message was neither ready nor an error")
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
        except (wire.BoundaryError, RecursionError) as exc:
            raise TypeError(f"an argument cannot cross to the program: {exc}") from None
        try:
            wire.send(self.requests_fd, message)
        except wire.BoundaryError as exc:
            raise TypeError(f"an argument cannot cross to the program: {exc}") from None
        except OSError as exc:
            raise self.fail(f"the program closed its channel ({exc.strerror})") from None
        answer = self._receive()
        if len(answer) == 1 and "value" in answer:
            return self.rebuild(answer["value"])
        if len(answer) == 1 and "raise" in answer:
            raise self.exception(answer["raise"])
        raise self.fail("the program answered with a malformed message")

    def rebuild(self, data: object) -> object:
        """A value the program sent, rebuilt here; TypeError (a failed test) when it cannot be
        a value of the judge's (e.g. a program object as a dict key)."""
        try:
            return wire.decode(data, self.program_object, 0, self.classes.rebuild)
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
            error.__dict__["_rlx_program"] = ProgramObject(self, handle, kind.__name__)
        return error

    def program_object(self, handle: int, type_name: str) -> ProgramObject:
        return ProgramObject(self, handle, type_name)

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


def _handle_of_argument(value: object) -> int:
    if type(value) is ProgramObject:
        return object.__getattribute__(value, "_handle")
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


class ProgramClasses:
    """The judge's exception classes that stand for the program's, one per program class, so
    that ``except ProgramsError`` catches exactly the program's ``ProgramsError``."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.by_handle: dict[int, type] = {}
        self.made: set[type] = set()

    def rebuild(self, description: object, depth: int = 0) -> type:
        """The class a description of :func:`wire.describe_exception_class` stands for: a
        built-in exception by name (``Exception`` subclasses only), or a class made here with
        the program's name and bases. BoundaryError when the description is malformed."""
        if type(description) is not dict:
            raise wire.BoundaryError("a malformed exception class")
        if set(description) == {"builtin"}:
            kind = wire.EXCEPTIONS.get(description["builtin"])
            if kind is None:
                raise wire.BoundaryError("not a built-in exception class")
            return kind
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


class ProgramObject:
    """The judge's handle to an object that lives in the program (a function, a class, an
    instance, a module, a generator).

    Calls, attribute access, items, iteration, ``str`` and ``repr`` go to the program, whose
    answers come back as plain data (or more handles). Everything that would let the program
    answer a test's question instead of computing a value is refused: comparisons, ``in``,
    ``bool``, ``len``, ``hash`` and ``isinstance`` raise ``TypeError``.
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
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # protocols are the judge's, never the program's
        return self._ask("getattr", name)

    def __setattr__(self, name: str, value: object) -> None:
        self._ask("setattr", name, value)

    def __getitem__(self, key: object) -> object:
        return self._ask("getitem", key)

    def __setitem__(self, key: object, value: object) -> None:
        self._ask("setitem", key, value)

    def __delitem__(self, key: object) -> None:
        self._ask("delitem", key)

    def __iter__(self) -> object:
        return self._ask("iter")

    def __next__(self) -> object:
        return self._ask("next")

    def __str__(self) -> str:
        return _plain(self._ask("str"), str, "str()")

    def __repr__(self) -> str:
        return _plain(self._ask("repr"), str, "repr()")

    # read-only on purpose (object's __class__ can be set): isinstance() asks for it after
    # type() says no
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise _refuse("isinstance()")

    def __eq__(self, other: object) -> bool:
        raise _refuse("==")

    def __ne__(self, other: object) -> bool:
        raise _refuse("!=")

    def __lt__(self, other: object) -> bool:
        raise _refuse("<")

    def __le__(self, other: object) -> bool:
        raise _refuse("<=")

    def __gt__(self, other: object) -> bool:
        raise _refuse(">")

    def __ge__(self, other: object) -> bool:
        raise _refuse(">=")

    def __contains__(self, item: object) -> bool:
        raise _refuse("`in`")

    def __bool__(self) -> bool:
        raise _refuse("bool()")

    def __len__(self) -> int:
        raise _refuse("len()")

    def __hash__(self) -> int:
        raise _refuse("hash()")


def _plain(value: object, kind: type[_T], what: str) -> _T:
    if type(value) is not kind:
        raise TypeError(
            f"the program's {what} gave a {type(value).__name__}, not a {kind.__name__}"
        )
    return value


# --- counting checks ----------------------------------------------------------------------------


class Tally:
    """Checks passed and failed, and why the first few failed."""

    def __init__(self) -> None:
        self.passed = self.failed = 0
        self.failures: list[str] = []
        self.failure_count = 0
        self.setup_failed = False
        self.defined = False  # the program ran to its end and sent its names
        self.timed_out = False
        self.nested = 0  # inside a counted assertion method: its inner calls are not counted
        self.unit = ""  # the test running now, to name in failures

    def where(self, line: int) -> str:
        """``"test_x(), line 6"`` inside a test function, ``"line 6"`` at the top level."""
        return f"{self.unit}, line {line}" if self.unit.endswith(")") else f"line {line}"

    def fail(self, why: str, checks: int = 1) -> None:
        self.failed += checks
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
    """The function every instrumented ``assert`` calls: the judge's truth of the test, counted
    as one check (unless the assert is of a constant)."""

    def check(value: object, line: int, counted: bool) -> bool:
        try:
            ok = bool(value)
        except TypeError as error:  # a program object's truth is not judged
            tally.fail(f"{tally.where(line)}: {error}")
            raise AssertionError(str(error)) from None
        if counted:
            if ok:
                tally.passed += 1
            else:
                tally.fail(f"{tally.where(line)}: assert failed")
        return ok

    return check


class _CountedContext:
    """A context manager (``assertRaises``, ``pytest.raises``) whose outcome is one check."""

    def __init__(self, inner: Any, tally: Tally, failure: type[BaseException]) -> None:
        self.inner, self.tally, self.failure = inner, tally, failure

    def __enter__(self) -> object:
        return self.inner.__enter__()

    def __exit__(self, *exc_info: object) -> object:
        try:
            result = self.inner.__exit__(*exc_info)
        except self.failure as error:
            self.tally.fail(f"{_describe(error)}")
            raise
        if exc_info[0] is None or result:
            self.tally.passed += 1
        return result

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def counted_assertion(method, tally: Tally, failure: type[BaseException]):
    """``method`` (an assertion method or ``pytest.raises``) counted as one check: passed when
    it returns, failed when it raises ``failure``; a context it returns is counted at its exit."""

    def counted(*args: object, **kwargs: object) -> object:
        tally.nested += 1
        try:
            result = method(*args, **kwargs)
        except failure as error:
            if tally.nested == 1:
                tally.fail(_describe(error))
            raise
        finally:
            tally.nested -= 1
        if tally.nested == 0:
            if hasattr(result, "__enter__") and hasattr(result, "__exit__"):
                return _CountedContext(result, tally, failure)
            tally.passed += 1
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


def judge(tests: str | None, channel: Channel) -> Tally:
    """Run ``tests`` (as :func:`testcode.prepare` made them; None: no tests) against the program
    at the other end of ``channel``."""
    tally = Tally()
    try:
        _judge(tests, channel, tally)
    finally:
        tally.timed_out = channel.broken == TIME_LIMIT
    return tally


def _judge(tests: str | None, channel: Channel, tally: Tally) -> None:
    tree = ast.parse(tests or "")
    frameworks = prepare_frameworks(tree, tally)
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
        tally.passed = 1
        return
    try:
        namespace = test_namespace(first["ready"], channel, testcode.module_bindings(tree))
    except ProgramGone as gone:
        tally.fail(str(gone))
        return
    namespace[testcode.ASSERT_HOOK] = assert_hook(tally)
    instrumented = testcode.instrument(ast.parse(tests))
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
    if channel.broken is not None:
        if not unit.setup:
            checks = max(1, testcode.counted_asserts(unit.node))
            tally.fail(f"{unit.label}: not run, {channel.broken}", checks)
        return
    passed, failed = tally.passed, tally.failed
    tally.unit = unit.label
    try:
        unit.run()
    except SkippedError as skip:
        tally.note(f"{unit.label}: skipped ({skip})")
    except ProgramGone as gone:
        if unit.setup:
            tally.setup_failed = True
        _unexplained_failure(tally, failed, f"{unit.label}: {gone}")
    except BaseException as error:
        if unit.setup:
            tally.setup_failed = True
            tally.fail(f"{unit.label}: set-up failed, {_describe(error)}")
        elif _is_skip(error):
            tally.note(f"{unit.label}: skipped ({_describe(error)})")
        elif tally.failed > failed and type(error) is AssertionError and error.args:
            tally.explain(_describe(error))  # the failed assert's own message
        else:
            _unexplained_failure(tally, failed, f"{unit.label}: {_describe(error)}")
    else:
        if channel.broken is not None:  # a bare ``except:`` in the test swallowed it
            _unexplained_failure(tally, failed, f"{unit.label}: {channel.broken}")
        elif unit.is_test and (tally.passed, tally.failed) == (passed, failed):
            tally.passed += 1  # a test that returns passes, as pytest and unittest pass it


def _unexplained_failure(tally: Tally, failed_before: int, why: str) -> None:
    """One failed check for an error, unless a counted check of the unit already failed (the
    error is then that check's AssertionError, or follows from it)."""
    if tally.failed == failed_before:
        tally.fail(why)


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
    for name in testcode.test_functions(tree):
        function = namespace.get(name)
        if _is_test_code(function):
            units += _function_units(name, function, nodes[name])
    for name in testcode.test_classes(tree):
        kind = namespace.get(name)
        if type(kind) is not type or kind.__module__ != "__main__":
            continue
        if unittest is not None and issubclass(kind, unittest.TestCase):
            units += _unittest_units(kind, nodes[name], unittest)
        else:
            units += _class_units(kind, nodes[name])
    return units


def _is_test_code(function: object) -> bool:
    """Whether ``function`` is a plain function the test code itself defined."""
    code = getattr(function, "__code__", None)
    is_function = type(function).__name__ == "function"
    return is_function and getattr(code, "co_filename", "") == "<tests>"


def _function_units(
    label: str, function: Any, node: ast.AST, kind: type | None = None
) -> list[Unit]:
    """One unit per parameter set of a test function (``@pytest.mark.parametrize``); a method
    of ``kind`` runs on a fresh instance."""
    marks = [m for m in getattr(function, "pytestmark", []) if hasattr(m, "name")]
    if any(
        m.name == "skip" or (m.name == "skipif" and m.args and m.args[0] is True) for m in marks
    ):
        return []
    cases: list[dict[str, object]] = [{}]
    for mark in marks:
        if mark.name == "parametrize":
            cases = [dict(case, **more) for case in cases for more in _parameter_sets(mark)]
    units = []
    for index, params in enumerate(cases):
        name = label if len(cases) == 1 else f"{label}[{index}]"
        run = functools.partial(_call_test, function, params, kind)
        units.append(Unit(f"{name}()", node, run, setup=False, is_test=True))
    return units


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


def _call_test(function: Any, params: dict[str, object], kind: type | None) -> None:
    """Call a test function (a method on a fresh instance of ``kind``, between its
    ``setup_method`` and ``teardown_method``) with its parameters; run it if it is async."""
    code = function.__code__
    wanted = code.co_varnames[: code.co_argcount][0 if kind is None else 1 :]
    required = wanted[: len(wanted) - len(function.__defaults__ or ())]
    missing = [name for name in required if name not in params]
    if missing:
        raise TypeError(
            f"the test needs the pytest fixture {missing[0]!r}; the sandbox's runner gives "
            "tests no fixtures (use @pytest.mark.parametrize or plain values)"
        )
    instance = None if kind is None else kind()
    if instance is not None and hasattr(instance, "setup_method"):
        instance.setup_method(function.__get__(instance))
    try:
        result = function(**params) if instance is None else function(instance, **params)
        if code.co_flags & _CO_COROUTINE:
            import asyncio

            asyncio.run(result)
    finally:
        if instance is not None and hasattr(instance, "teardown_method"):
            instance.teardown_method(function.__get__(instance))


def _class_units(kind: type, node: _Definition) -> list[Unit]:
    """pytest's ``Test*`` classes: each ``test*`` method on a fresh instance."""
    units = []
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith(
            "test"
        ):
            function = vars(kind).get(item.name)
            if _is_test_code(function):
                units += _function_units(f"{kind.__name__}.{item.name}", function, item, kind)
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
    result = unittest.TestResult()
    unittest.TestSuite([kind(name)]).run(result)
    if result.skipped:
        raise SkippedError(str(result.skipped[0][1]))
    problems = [text for _, text in result.errors + result.failures]
    problems += ["an unexpected success"] * len(result.unexpectedSuccesses)
    if problems:
        raise AssertionError(problems[0].strip().splitlines()[-1][:_MESSAGE_CHARS])


# --- the names the tests see --------------------------------------------------------------------


def test_namespace(ready: object, channel: Channel, test_bound: set[str]) -> dict[str, object]:
    """The globals the tests run in: the program's top-level names, rebuilt from plain data or
    as handles, except any that would replace a built-in, a dunder name or a name the test code
    binds itself."""
    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": builtins}
    names = ready.get("names") if type(ready) is dict and len(ready) == 1 else None
    if type(names) is not dict or len(names) > MAX_NAMES:
        raise channel.fail("the program's ready note is malformed")
    for name, data in names.items():
        if not bindable(name, test_bound):
            continue
        try:
            namespace[name] = wire.decode(data, channel.program_object, 0, channel.classes.rebuild)
        except (wire.BoundaryError, ValueError, TypeError, RecursionError) as exc:
            raise channel.fail(f"the program's name {name[:100]!r} is malformed: {exc}") from None
    return namespace


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
    deadline = time.monotonic() + seconds
    channel = Channel(wire.REQUESTS_FD, wire.ANSWERS_FD, deadline)

    def alarm(signum: int, frame: object) -> None:
        raise channel.out_of_time()

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001))
    try:
        tally = judge(tests, channel)
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
