"""The plain-data boundary between the judge and a program: values as tagged JSON.

Only plain data crosses: ``None``, ``bool``, ``int`` (of any size), ``float`` (NaN and the
infinities too), ``str``, ``bytes``, ``bytearray``, ``complex``, and lists, tuples, dicts, sets
and frozensets of them, to a depth of :data:`MAX_DEPTH`. Any other object a program returns (an
instance of its class, a function, a module, a generator) crosses as a *handle*: a number that
names the object inside the program's process, whose only power on the judge's side is to be
called, asked for an attribute or an item, or iterated. An exception class crosses as a
*description*: its name and its bases, each a built-in exception's name or another description,
so that the judge can make an exception class of its own that stands for it. A function of
the judge's tests crosses the other way as a *callback* number, which the program can only
call (the judge then runs its own function of that number). The judge's
decoder builds fresh values of exactly these built-in types from JSON, so nothing that arrives
can run code on the judge's side: no ``__eq__``, ``__hash__`` or ``__bool__`` of the program's
is ever called there, and no name the program sends is imported or looked up.

A message is a 4-byte big-endian length and that many bytes of UTF-8 JSON, at most
:data:`MAX_MESSAGE_BYTES`. Every message from the program is hostile input: its size, nesting
depth, tags, numbers and names are checked before anything is built from it.

Standard library only, and no import of rlx: the sandbox runs this file in interpreters that
may not see the installed package (see :func:`rlx.sandbox.process.script`).

Why one module past rlx's 800 lines (just): the encoder, the decoder and every check of
hostile input of one message format, kept together so that what is encoded and what is
accepted cannot drift apart.
"""

from __future__ import annotations

import builtins
import json
import os
import select
import struct
import sys
import time

# This module, the server and the judge start in a fresh interpreter for every program, so they
# import only what they use at run time: typing alone would add milliseconds to each program.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeGuard, TypeVar

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


LIBRARY_MODULES = frozenset(
    {"abc", "argparse", "array", "ast", "asyncio", "base64", "binascii", "bisect", "calendar",
     "cmath", "collections", "collections.abc", "contextlib", "copy", "csv", "dataclasses",
     "datetime", "decimal", "difflib", "enum", "fnmatch", "fractions", "functools", "hashlib",
     "heapq", "html", "io", "itertools", "json", "logging", "math", "numbers", "operator", "os",
     "os.path", "pathlib", "posixpath", "pprint", "queue", "random", "re", "secrets", "shutil",
     "statistics", "string", "struct", "sys", "tempfile", "textwrap", "threading", "time",
     "types", "typing", "unicodedata", "urllib.parse", "uuid", "warnings", "weakref",
     "xml.etree.ElementTree", "zlib", "numpy", "numpy.linalg", "numpy.random", "pandas",
     "pandas.errors"}
)  # fmt: skip
"""The library modules a receiver imports because the other side named one (a program's name
bound to a module, a module in an answer, an exception class of a library): a fixed list, so
that no module with effects on import (``unittest.__main__``, ``this``) is ever imported
because the program named it. The standard library's and numpy's, pandas' that programs use."""

LIBRARY_EXCEPTION_MODULES = tuple(
    sorted(
        LIBRARY_MODULES
        | {"asyncio.exceptions", "concurrent.futures._base", "json.decoder", "subprocess",
           "_csv", "_pickle", "re._constants", "sre_constants", "zipfile"}
    )
)  # fmt: skip
"""The library modules whose exception classes cross as themselves (``{"library": [module,
name]}``), so that ``except asyncio.CancelledError``, ``pytest.raises(json.JSONDecodeError)``
or ``pytest.raises(re.error)`` catch them; the receiver imports the module itself, and only
from this list (:data:`LIBRARY_MODULES` and the private modules their exceptions live in)."""


BINARY_OPERATORS = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
    "lshift", "rshift",
)  # fmt: skip
"""Arithmetic a program object takes part in (``__add__``, and ``__radd__`` reflected): the
program computes the result, which the tests then judge like any value it returns."""

UNARY_OPERATORS = ("neg", "pos", "abs", "invert", "index", "int", "float", "complex")

COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
"""Comparisons the program answers, only between two of its own objects."""

PROTOCOLS = (
    "__call__", "__iter__", "__next__", "__getitem__", "__setitem__", "__delitem__", "__len__",
    "__bool__", "__contains__", "__hash__", "__enter__", "__exit__", "__await__", "__aiter__",
    "__anext__",
    *(f"__{name}__" for name in BINARY_OPERATORS),
    *(f"__r{name}__" for name in BINARY_OPERATORS),
    *(f"__{name}__" for name in UNARY_OPERATORS),
)  # fmt: skip
"""The special methods a class description says its instances have (so that ``callable``,
``iter``, ``hasattr`` and the like answer from the object's real type)."""


class BoundaryError(Exception):
    """A value cannot cross, or a message is malformed, too large or cut short."""


# --- values -------------------------------------------------------------------------------------


def encode(
    value: object,
    handle_of: Callable[[object], int],
    depth: int = 0,
    class_of: Callable[[type], object] | None = None,
    special: Callable[[object], object] | None = None,
) -> object:
    """``value`` as JSON-ready data; objects that are not plain data become
    ``{"handle": handle_of(obj)}`` (with ``"class": class_of(type(obj))`` when ``class_of`` is
    given: the program's side describes its classes, the judge's never does), exception
    classes their description, other classes ``{"class": ...}`` (the program's side) or a
    handle, modules ``{"module": name}``.

    Subclasses of the plain types cross as their base type (a library's ``IntEnum`` as an int),
    as they compare equal to it in Python, except the program's own classes (on the program's
    side: ``class Money(int)``, ``class Status(str, Enum)``, ``class Stack(list)``), which
    cross as ``{"subclass": [handle, class, value]}``: the built-in value and a handle; the
    library types of :data:`LIBRARY_KINDS` cross by value, tagged ``{"lib": [kind, body]}``,
    and are rebuilt as the receiver's own objects of that type.

    ``special``, when given, is first shown every value that is not a scalar (containers, and
    what is not plain data): what it returns, unless None, is the value's encoding (the judge's
    callbacks ``{"callback": [number, name]}``, a container the judge sent ``{"ref": index}``);
    it may also just take note of the value (the judge numbers the containers it sends).
    """
    if depth > MAX_DEPTH:
        raise BoundaryError(f"a value nested deeper than {MAX_DEPTH} levels cannot cross")
    # type() and issubclass, never isinstance: isinstance asks an object for its __class__,
    # which a program's object could fake
    # (mypy cannot narrow ``value`` from ``issubclass(type(value), ...)``, hence the ignores)
    kind = type(value)
    if value is None or issubclass(kind, bool):
        return None if value is None else bool(value)
    if special is not None and kind not in _SCALARS:
        replaced = special(value)
        if replaced is not None:
            return replaced
    if kind is range:
        return {"lib": ["range", [value.start, value.stop, value.step]]}  # type: ignore[attr-defined]
    if kind not in _BUILTIN_PLAIN:
        library = _library_value(value, kind, handle_of, depth, class_of, special)
        if library is not None:
            return library
        base = plain_base(kind) if is_program_class(kind) else None
        if base is not None and class_of is not None:  # a program class deriving from a
            # built-in (on the program's side): its built-in value and a handle
            plain = encode(_as_base(value, base), handle_of, depth + 1, class_of, special)
            return {"subclass": [handle_of(value), class_of(kind), plain]}
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
        return {"dict": _encode_items(value, handle_of, depth, class_of, special)}
    for tag, base in zip(_CONTAINERS, (list, tuple, set, frozenset), strict=True):
        if issubclass(kind, base):
            return {
                tag: [
                    encode(item, handle_of, depth + 1, class_of, special)
                    for item in base.__iter__(value)
                ]
            }
    if issubclass(kind, type) and issubclass(value, BaseException):  # type: ignore[arg-type]
        return {"exception": describe_exception_class(value, handle_of)}  # type: ignore[arg-type]
    if issubclass(kind, _MODULE):
        name = getattr(value, "__name__", None)
        if type(name) is str and is_module_name(name):
            return {"module": name}
    if issubclass(kind, type):
        fields = _namedtuple_fields(value)  # type: ignore[arg-type]
        if fields is not None:
            return {"lib": ["namedtuple class", [_class_name(value), fields]]}  # type: ignore[arg-type]
        if class_of is not None:
            return {"class": class_of(value)}  # type: ignore[arg-type]
    if class_of is not None:
        return {"handle": handle_of(value), "class": class_of(kind)}
    return {"handle": handle_of(value)}


def _encode_items(
    mapping: Any, handle_of: Callable[[object], int], depth: int, class_of: Any, special: Any
) -> list[list[object]]:
    return [
        [
            encode(k, handle_of, depth + 1, class_of, special),
            encode(v, handle_of, depth + 1, class_of, special),
        ]
        for k, v in dict.items(mapping)
    ]


LIBRARY_KINDS = (
    "namedtuple", "namedtuple class", "Counter", "OrderedDict", "defaultdict", "deque",
    "Decimal", "Fraction", "datetime", "date", "time", "timedelta", "ndarray", "numpy scalar",
    "range",
)  # fmt: skip
"""The library values that cross by value (``{"lib": [kind, body]}``): each rebuilt from plain
data by the receiver, as its own object of that type, from a module it imports itself (only
``collections``, ``decimal``, ``fractions``, ``datetime`` and ``numpy``, and only when such a
value arrives). A namedtuple becomes one of the receiver's namedtuple classes of the same
typename and fields; an array of numbers or text is rebuilt from its dtype, shape and bytes."""

MAX_ARRAY_BYTES = 1 << 20
"""The largest numpy array (its data) that crosses by value; a larger one crosses as a
handle."""

_MODULE = type(builtins)
_SCALARS = frozenset({int, float, str, bytes, complex})
_BUILTIN_PLAIN = frozenset(
    {int, float, str, bytes, bytearray, complex, list, tuple, dict, set, frozenset}
)
_DEFAULT_FACTORIES = {
    factory.__name__: factory
    for factory in (int, float, complex, str, bytes, list, dict, set, frozenset, tuple, bool)
}
_ARRAY_KINDS = "biufcUS"
_NAMEDTUPLES: dict[tuple[str, tuple[str, ...]], type] = {}


def is_module_name(name: object) -> TypeGuard[str]:
    """Whether ``name`` is a well-formed dotted module name."""
    return (
        type(name) is str
        and 0 < len(name) <= MAX_NAME_CHARS
        and all(part.isidentifier() for part in name.split("."))
    )


def _class_name(kind: type) -> str:
    try:
        name = type.__dict__["__name__"].__get__(kind)
    except Exception:
        name = "object"
    return str(name)[:MAX_NAME_CHARS]


PROGRAM_MODULE = "solution"
"""The module the program runs as (:mod:`rlx.sandbox.server`)."""

_SUBCLASSABLE = (int, float, complex, str, bytes, tuple, frozenset, list, dict, set)
MUTABLE_BASES = (list, dict, set)
_NAMEDTUPLE_MADE = frozenset(
    {"__doc__", "__getnewargs__", "__match_args__", "__module__", "__new__", "__repr__",
     "__slots__", "_asdict", "_field_defaults", "_fields", "_make", "_replace",
     "__annotations__", "__orig_bases__"}
)  # fmt: skip


def is_program_class(kind: type) -> bool:
    """Whether ``kind`` is a class the program defined (in the module it runs as)."""
    try:
        return type.__dict__["__module__"].__get__(kind) == PROGRAM_MODULE
    except Exception:
        return False


def plain_base(kind: type) -> type | None:
    """The built-in type a class derives from (int, str, tuple, list, dict ...), or None."""
    try:
        mro = type.__dict__["__mro__"].__get__(kind)
    except Exception:
        return None
    return next((base for base in mro if base in _SUBCLASSABLE), None)


def _as_base(value: Any, base: type) -> object:
    """The built-in value a built-in subclass's instance holds (its own methods not asked)."""
    if base is dict:
        return dict(dict.items(value))
    if base in (list, tuple, set, frozenset):
        return base(base.__iter__(value))
    if base is str:
        return str.__str__(value)
    if base is bytes:
        return bytes.__bytes__(value) if hasattr(bytes, "__bytes__") else bytes(value)
    return getattr(base, f"__{base.__name__}__")(value)


def _namedtuple_fields(kind: type) -> list[str] | None:
    """The fields of a namedtuple class, or None for any other class (and for a program's
    namedtuple class with defaults or methods of its own: it crosses as a program class)."""
    try:
        if not issubclass(kind, tuple) or kind is tuple:
            return None
        fields = getattr(kind, "_fields", None)
        if is_program_class(kind) and type(fields) is tuple:
            own = type.__dict__["__dict__"].__get__(kind)
            bases = type.__dict__["__bases__"].__get__(kind)
            if bases != (tuple,) or getattr(kind, "_field_defaults", None):
                return None
            if any(name not in _NAMEDTUPLE_MADE and name not in fields for name in own):
                return None
    except Exception:
        return None
    if type(fields) is not tuple or len(fields) > 255:
        return None
    if not all(type(f) is str and f.isidentifier() and not f.startswith("_") for f in fields):
        return None
    return list(fields)


def _library_class(kind: type, module: str, name: str) -> bool:
    """Whether ``kind`` is exactly ``module.name`` (a module that is already imported: a value of
    its type exists, so it is)."""
    return getattr(sys.modules.get(module), name, None) is kind


def _library_value(
    value: Any,
    kind: type,
    handle_of: Callable[[object], int],
    depth: int,
    class_of: Any,
    special: Any = None,
) -> object:
    """``{"lib": [kind, body]}`` for a value of one of :data:`LIBRARY_KINDS`, else None."""
    try:
        module = type.__dict__["__module__"].__get__(kind)
    except Exception:
        return None
    try:
        if issubclass(kind, tuple):
            fields = _namedtuple_fields(kind)
            if fields is None or len(fields) != tuple.__len__(value):
                return None
            items = [
                encode(item, handle_of, depth + 1, class_of, special)
                for item in tuple.__iter__(value)
            ]
            return {"lib": ["namedtuple", [_class_name(kind), fields, items]]}
        if module == "collections":
            for name in ("Counter", "OrderedDict"):
                if _library_class(kind, module, name):
                    return {
                        "lib": [name, _encode_items(value, handle_of, depth, class_of, special)]
                    }
            if _library_class(kind, module, "defaultdict"):
                factory = value.default_factory
                named = next((k for k, v in _DEFAULT_FACTORIES.items() if v is factory), None)
                if factory is not None and named is None:
                    return None  # a factory that cannot cross: the dict's items only
                pairs = _encode_items(value, handle_of, depth, class_of, special)
                return {"lib": ["defaultdict", [named, pairs]]}
            if _library_class(kind, module, "deque"):
                items = [
                    encode(item, handle_of, depth + 1, class_of, special) for item in list(value)
                ]
                maxlen = value.maxlen
                return {"lib": ["deque", [items, maxlen if type(maxlen) is int else None]]}
        elif module == "decimal" and _library_class(kind, module, "Decimal"):
            return {"lib": ["Decimal", str(value)]}
        elif module == "fractions" and _library_class(kind, module, "Fraction"):
            return {"lib": ["Fraction", str(value)]}
        elif module == "datetime":
            if _library_class(kind, module, "timedelta"):
                return {"lib": ["timedelta", [value.days, value.seconds, value.microseconds]]}
            for name in ("datetime", "date", "time"):
                if _library_class(kind, module, name):
                    return {"lib": [name, str(value.isoformat())]}
        elif module == "numpy":
            return _numpy_value(value, kind)
    except BoundaryError:
        raise
    except Exception:
        return None
    return None


def _numpy_value(value: Any, kind: type) -> object:
    numpy = sys.modules["numpy"]
    if issubclass(kind, (float, complex)):
        return None  # float64 and complex128 cross as the float and complex they are
    if kind is numpy.ndarray:
        tag = "ndarray"
    elif issubclass(kind, numpy.generic):
        tag = "numpy scalar"
    else:
        return None
    dtype = value.dtype
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or value.nbytes > MAX_ARRAY_BYTES:
        return None
    data = numpy.ascontiguousarray(value).tobytes()
    return {"lib": [tag, [str(dtype.str), [int(n) for n in value.shape], data.hex()]]}


def _decode_library(data: object, rebuild: Callable[[object], object]) -> object:
    """The receiver's own value for ``{"lib": [kind, body]}`` (see :data:`LIBRARY_KINDS`)."""
    pair = _typed(data, list)
    if len(pair) != 2 or pair[0] not in LIBRARY_KINDS:
        raise BoundaryError("malformed library value")
    kind, body = pair
    try:
        if kind in ("namedtuple", "namedtuple class"):
            parts = _typed(body, list)
            if len(parts) != (3 if kind == "namedtuple" else 2):
                raise BoundaryError("malformed namedtuple")
            made = _namedtuple_class(parts[0], parts[1])
            if kind == "namedtuple class":
                return made
            items = [rebuild(item) for item in _typed(parts[2], list)]
            if len(items) != len(made._fields):  # type: ignore[attr-defined]
                raise BoundaryError("a namedtuple with the wrong number of items")
            return made(*items)
        if kind in ("Counter", "OrderedDict"):
            import collections

            mapping = getattr(collections, kind)()
            mapping.update(rebuild({"dict": body}))
            return mapping
        if kind == "defaultdict":
            import collections

            factory_name, items = _typed(body, list)
            if factory_name is not None and factory_name not in _DEFAULT_FACTORIES:
                raise BoundaryError("a defaultdict factory that cannot cross")
            out: Any = collections.defaultdict(_DEFAULT_FACTORIES.get(factory_name))
            out.update(rebuild({"dict": items}))
            return out
        if kind == "deque":
            import collections

            items, maxlen = _typed(body, list)
            if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
                raise BoundaryError("malformed deque")
            return collections.deque(rebuild({"list": items}), maxlen)  # type: ignore[call-overload]
        if kind == "Decimal":
            import decimal

            return decimal.Decimal(_short_text(body))
        if kind == "Fraction":
            import fractions

            return fractions.Fraction(_short_text(body))
        if kind in ("datetime", "date", "time"):
            import datetime

            return getattr(datetime, kind).fromisoformat(_short_text(body))
        if kind == "range":
            bounds = _typed(body, list)
            if len(bounds) != 3 or not all(type(n) is int for n in bounds):
                raise BoundaryError("malformed range")
            return range(*bounds)
        if kind == "timedelta":
            import datetime

            days, seconds, micros = _typed(body, list)
            if not all(type(n) is int for n in (days, seconds, micros)):
                raise BoundaryError("malformed timedelta")
            return datetime.timedelta(days, seconds, micros)
        return _decode_array(kind, body)
    except BoundaryError:
        raise
    except (ValueError, TypeError, ArithmeticError, OverflowError, ImportError) as exc:
        raise BoundaryError(f"malformed {kind}: {str(exc)[:200]}") from None


def _short_text(body: object) -> str:
    text = _typed(body, str)
    if len(text) > 10_000:
        raise BoundaryError("a library value's text is too long")
    return text


def _namedtuple_class(name: object, fields: object) -> type:
    if type(name) is not str or not name.isidentifier() or len(name) > MAX_NAME_CHARS:
        raise BoundaryError("malformed namedtuple name")
    names = tuple(_typed(fields, list))
    if len(names) > 255 or not all(
        type(f) is str and f.isidentifier() and not f.startswith("_") for f in names
    ):
        raise BoundaryError("malformed namedtuple fields")
    key = (name, names)
    known = _NAMEDTUPLES.get(key)
    if known is None:
        import collections

        made: Any = collections.namedtuple(name, names)  # type: ignore[misc]  # ValueError: refused
        made.__module__ = "solution"
        _NAMEDTUPLES[key] = known = made
    return known


def _decode_array(kind: str, body: object) -> object:
    dtype_text, shape, data = _typed(body, list)
    if type(dtype_text) is not str or len(dtype_text) > 8 or type(data) is not str:
        raise BoundaryError("malformed array")
    if dtype_text[:1] not in "<>|=" or dtype_text[1:2] not in _ARRAY_KINDS:
        raise BoundaryError("an array of a dtype that does not cross")
    if not dtype_text[2:].isdigit():
        raise BoundaryError("an array of a dtype that does not cross")
    dims = _typed(shape, list)
    if len(dims) > 32 or not all(type(n) is int and n >= 0 for n in dims):
        raise BoundaryError("malformed array shape")
    if len(data) > 2 * MAX_ARRAY_BYTES:
        raise BoundaryError("an array too large to cross")
    import numpy

    dtype = numpy.dtype(dtype_text)
    raw = bytes.fromhex(data)
    count = 1
    for n in dims:
        count *= n
    if count * dtype.itemsize != len(raw) or (kind == "numpy scalar" and dims):
        raise BoundaryError("an array whose bytes do not match its shape")
    array = numpy.frombuffer(raw, dtype=dtype).reshape(dims).copy()
    return array[()] if kind == "numpy scalar" else array


def describe_exception_class(
    kind: type, handle_of: Callable[[object], int], depth: int = 0
) -> dict[str, object]:
    """``{"builtin": name}`` for a built-in exception class, else ``{"handle", "name",
    "bases"}`` with each base described the same way (the program's side)."""
    name = getattr(kind, "__name__", "")
    if EXCEPTIONS.get(name) is kind or getattr(builtins, name, None) is kind:
        return {"builtin": name}
    module = getattr(kind, "__module__", None)
    if module in LIBRARY_EXCEPTION_MODULES and _library_class(kind, module, name):
        return {"library": [module, name]}
    if depth > MAX_DEPTH:
        raise BoundaryError("an exception class with too deep a hierarchy cannot cross")
    bases = [
        describe_exception_class(base, handle_of, depth + 1)
        for base in kind.__bases__
        if issubclass(type(base), type) and issubclass(base, BaseException)
    ]
    return {"handle": handle_of(kind), "name": str(name)[:MAX_NAME_CHARS], "bases": bases}


def decode(
    data: object,
    from_handle: Callable[[int, object], object],
    depth: int = 0,
    from_exception: Callable[[dict[str, object]], object] | None = None,
    from_class: Callable[[object], object] | None = None,
    from_module: Callable[[str], object] | None = None,
    from_other: Callable[[str, object], object] | None = None,
    from_subclass: Callable[[int, object, object], object] | None = None,
) -> object:
    """The value ``data`` (as :func:`encode` made it) stands for, built from built-in types
    and the library types of :data:`LIBRARY_KINDS` only; a handle becomes
    ``from_handle(number, class description or None)``, an exception class's description
    ``from_exception(description)``, a class ``from_class(description)``, a module
    ``from_module(name)``, the tags of :data:`OTHER_TAGS` ``from_other(tag, body)``, and an
    instance of a program class deriving from a built-in type ``from_subclass(handle, class
    description, built-in value)``.
    Anything malformed, or a kind the receiver takes no hook for, raises
    :class:`BoundaryError`."""
    if depth > MAX_DEPTH:
        raise BoundaryError(f"a value nested deeper than {MAX_DEPTH} levels cannot cross")
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is not dict or len(data) not in (1, 2):
        raise BoundaryError(f"malformed value of type {type(data).__name__}")
    if "handle" in data:
        number = data.get("handle")
        if not is_handle(number) or (len(data) == 2 and "class" not in data):
            raise BoundaryError("malformed handle")
        return from_handle(number, data.get("class"))

    def rebuild(item: object) -> object:
        return decode(
            item, from_handle, depth + 1, from_exception, from_class, from_module, from_other,
            from_subclass,
        )  # fmt: skip

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
    if tag == "lib":
        return _decode_library(body, rebuild)
    if tag == "class":
        if from_class is None:
            raise BoundaryError("a class where none is expected")
        return from_class(body)
    if tag == "module":
        if from_module is None or not is_module_name(body):
            raise BoundaryError("a module where none is expected")
        return from_module(body)
    if tag == "subclass":
        parts = _typed(body, list)
        if from_subclass is None or len(parts) != 3 or not is_handle(parts[0]):
            raise BoundaryError("a built-in subclass's instance where none is expected")
        return from_subclass(parts[0], parts[1], rebuild(parts[2]))
    if tag in OTHER_TAGS:
        if from_other is None:
            raise BoundaryError(f"a {tag} where none is expected")
        return from_other(tag, body)
    if tag == "dict":
        out = {}
        for pair in _typed(body, list):
            if type(pair) is not list or len(pair) != 2:
                raise BoundaryError("malformed dict item")
            key = rebuild(pair[0])
            _require_hashable(key)
            out[key] = rebuild(pair[1])
        return out
    if tag in _CONTAINERS:
        items = [rebuild(item) for item in _typed(body, list)]
        if tag in ("set", "frozenset"):
            for item in items:
                _require_hashable(item)
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    raise BoundaryError(f"unknown value tag {str(tag)[:MAX_NAME_CHARS]!r}")


OTHER_TAGS = ("callback", "ref", "type")
"""Tags only one side sends: ``{"callback": [number, name]}`` (the judge's: a function of the
tests the program may call back), ``{"type": name}`` (the judge's: a built-in class, such as
``int`` given as a ``key``), ``{"ref": index}`` (the program's: the judge's own container, the
``index``-th that a call sent, see :func:`mutable_parts`)."""

MUTABLE_TAGS = ("list", "dict", "set", "bytearray")
"""How a container's state comes back after a call that may have changed it in place."""


def mutable_kind(value: object) -> str | None:
    """``"list"``, ``"dict"``, ``"set"``, ``"bytearray"`` (or ``"deque"``) for a container a
    function can change in place, else None."""
    kind = type(value)
    if issubclass(kind, list):
        return "list"
    if issubclass(kind, dict):
        return "dict"
    if issubclass(kind, set):
        return "set"
    if issubclass(kind, bytearray):
        return "bytearray"
    deque = getattr(sys.modules.get("collections"), "deque", None)
    if deque is not None and issubclass(kind, deque):
        return "deque"
    return None


def mutable_parts(values: list[object]) -> list[object]:
    """The containers a function can change in place inside ``values``, in the order
    :func:`encode` meets them (the order its ``special`` hook sees them): each container, then
    its items (a dict's values; never a set's items or a dict's keys, which are hashable);
    a tuple's and a namedtuple's items too."""
    found: list[object] = []

    def walk(value: object, depth: int) -> None:
        if depth > MAX_DEPTH or type(value) in _SCALARS:
            return
        kind = mutable_kind(value)
        if kind is not None:
            found.append(value)
        if kind in ("list", "deque"):
            items: Any = list(value)  # type: ignore[call-overload]
        elif kind == "dict":
            items = dict.values(value)  # type: ignore[arg-type]
        elif issubclass(type(value), tuple):
            items = tuple.__iter__(value)  # type: ignore[arg-type]
        else:
            return
        for item in items:
            walk(item, depth + 1)

    for value in values:
        walk(value, 0)
    return found


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
