"""Command-line flags generated from a dataclass, with the standard library's ``argparse``.

Every config field is written once, as a field of a frozen dataclass; :func:`add_fields` turns
each field into one flag:

- the name: ``learning_rate`` -> ``--learning-rate`` (or a positional argument, for a field made
  with :func:`positional`);
- the type, from the annotation: ``int`` (also ``1e4``, ``10_000`` and ``100k``), ``float``,
  ``str``, ``Path``, ``bool`` as ``--flag`` / ``--no-flag``, ``X | None`` (``none`` for None),
  ``tuple[X, ...]`` as several values, ``Literal[...]`` as a choice; any other type is read as
  JSON; a field with :data:`BARE` metadata may also be given without a value (``--video``
  alone, or ``--video PATH``);
- the help: the string literal under the field (its attribute docstring, read from the class
  source with :mod:`ast`, as tyro and Sphinx read it), or the line of the class docstring's
  ``Attributes:`` section, then the default.

:class:`FlagParser` parses *once* and keeps only what the user typed: every default is
``argparse.SUPPRESS``, so :meth:`FlagParser.given` returns ``{field: value}`` for the flags on
the command line and nothing else. Whoever resolves the config (:func:`rlx.launch.plan.plan`) fills
in the defaults, a preset or a resumed run's record in one place.

A mistake never reaches the user as a usage dump or a traceback: it raises
:class:`~rlx.errors.ConfigError` with one sentence built from argparse's own error (the
argument it names and its message), and an unknown flag gets "did you mean" the close ones
(``--lr`` -> ``--learning-rate``).

Nothing here imports more than the standard library, so ``rlx --help`` stays fast.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import functools
import inspect
import json
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rlx.errors import ConfigError

POSITIONAL = "rlx.flags.positional"
"""Field metadata key: the field is a positional argument (its value the metavar)."""
REPEATABLE = "rlx.flags.repeatable"
"""Field metadata key: values of repeated flags add up (``--x a --x b`` is ``(a, b)``)."""
ALIASES = "rlx.flags.aliases"
"""Field metadata key: more option strings for the same flag (e.g. a deprecated name)."""
METAVAR = "rlx.flags.metavar"
"""Field metadata key: the placeholder of the value in ``--help``."""
HIDDEN = "rlx.flags.hidden"
"""Field metadata key: the flag works but ``--help`` does not show it (a deprecated name)."""
BARE = "rlx.flags.bare"
"""Field metadata key: the value of the flag given without one (``--video`` alone), beside
``--video PATH``."""
MULTIPLIERS = {"k": 1_000, "K": 1_000, "M": 1_000_000}
"""Suffixes a whole number may carry: ``100k`` is 100000, ``2M`` is 2000000."""


def positional(metavar: str, default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field given as a positional argument, shown as ``metavar``."""
    metadata = {POSITIONAL: metavar}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def flag_name(field_name: str) -> str:
    """``learning_rate`` -> ``--learning-rate``."""
    return "--" + field_name.replace("_", "-")


# ---------------------------------------------------------------------------- field docs
def field_docs(cls: type) -> dict[str, str]:
    """Each field's help text: the string literal under it in the class body (its attribute
    docstring), or its line of the class docstring's ``Attributes:`` section; a subclass's
    text wins over its base's. Read once per class (cached)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(_class_docs(klass))
    return docs


@functools.cache
def _class_docs(klass: type) -> dict[str, str]:
    docs = _attributes_section(inspect.getdoc(klass) or "")
    docs.update(_attribute_docstrings(klass))
    return docs


def _attribute_docstrings(klass: type) -> dict[str, str]:
    """``field: type = default`` followed by a string literal, in the class's own source."""
    try:
        source = textwrap.dedent(inspect.getsource(klass))
    except (OSError, TypeError):  # made at run time, or no source shipped
        return {}
    body = ast.parse(source).body[0]
    if not isinstance(body, ast.ClassDef):
        return {}
    docs = {}
    statements = body.body
    for node, after in zip(statements, [*statements[1:], None], strict=True):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _attributes_section(docstring: str) -> dict[str, str]:
    """``Attributes:`` followed by indented ``name: text`` lines (Google style)."""
    match = re.search(r"^Attributes:\n((?:[ \t]+.*\n?|\n)+)", docstring, flags=re.MULTILINE)
    if not match:
        return {}
    docs: dict[str, list[str]] = {}
    name = None
    for line in match.group(1).splitlines():
        head = re.match(r"^ {4}(\w+):\s*(.*)$", line)
        if head:
            name = head.group(1)
            docs[name] = [head.group(2)]
        elif name is not None and line.strip():
            docs[name].append(line.strip())
    return {key: " ".join(" ".join(parts).split()) for key, parts in docs.items()}


# ---------------------------------------------------------------------------- value types
def whole_number(text: str) -> int:
    """``100000``, ``100_000``, ``1e5`` or ``100k`` as an int; ArgumentTypeError otherwise."""
    cleaned = text.strip().replace("_", "")
    multiplier = 1
    if cleaned[-1:] in MULTIPLIERS:
        cleaned, multiplier = cleaned[:-1], MULTIPLIERS[cleaned[-1]]
    try:
        return int(cleaned) * multiplier
    except ValueError:
        pass
    try:
        value = float(cleaned) * multiplier
    except ValueError:
        value = float("nan")
    if not value.is_integer():
        raise argparse.ArgumentTypeError(
            f"expects a whole number (e.g. 100000, 100_000, 1e5 or 100k), not {text!r}"
        )
    return int(value)


def number(text: str) -> float:
    """``0.0003``, ``3e-4`` or ``1_000.5`` as a float; ArgumentTypeError otherwise."""
    try:
        return float(text.strip().replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expects a number (e.g. 0.5 or 3e-4), not {text!r}"
        ) from None


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a JSON value, not {text!r}") from None


def _optional(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        return None if text.strip().lower() == "none" else convert(text)

    return read


def _choice(values: Sequence[Any]) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        for value in values:
            if str(value) == text:
                return value
        raise argparse.ArgumentTypeError(
            f"expects one of {', '.join(str(v) for v in values)}, not {text!r}"
        )

    return read


@dataclasses.dataclass(frozen=True)
class Kind:
    """How one annotation reads from the command line."""

    convert: Callable[[str], Any]
    metavar: str
    boolean: bool = False
    many: bool = False
    optional: bool = False


_SCALARS: dict[Any, tuple[Callable[[str], Any], str]] = {
    int: (whole_number, "INT"),
    float: (number, "FLOAT"),
    str: (str, "STR"),
    Path: (Path, "PATH"),
}


def kind_of(annotation: Any) -> Kind:
    """The :class:`Kind` of a resolved annotation (see the module docstring)."""
    optional = False
    args = typing.get_args(annotation)
    if _is_union(annotation) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            annotation, optional = rest[0], True
            args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return Kind(bool, "", boolean=True, optional=optional)
    if origin is typing.Literal:
        metavar = "{" + ",".join(str(a) for a in args) + "}"
        return Kind(_wrap(_choice(args), optional), metavar, optional=optional)
    if annotation in _SCALARS:
        convert, metavar = _SCALARS[annotation]
        return Kind(_wrap(convert, optional), metavar, optional=optional)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = kind_of(args[0])
        if not (item.boolean or item.many):
            convert = _optional(item.convert) if optional else item.convert
            return Kind(convert, item.metavar, many=True, optional=optional)
    return Kind(_wrap(_json_value, optional), "JSON", optional=optional)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) is typing.Union or isinstance(annotation, types.UnionType)


def _wrap(convert: Callable[[str], Any], optional: bool) -> Callable[[str], Any]:
    return _optional(convert) if optional else convert


class _Many(argparse.Action):
    """Several values as a tuple; a lone ``none`` is None where the field may be None, and
    repeated flags add up where the field is repeatable."""

    def __init__(self, *args: Any, repeatable: bool = False, **kwargs: Any) -> None:
        self.repeatable = repeatable
        super().__init__(*args, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        values = list(values or [])
        if any(v is None for v in values):
            if len(values) > 1:
                raise argparse.ArgumentError(self, "takes none alone or values, not both")
            setattr(namespace, self.dest, None)
            return
        if self.repeatable:
            values = [*(getattr(namespace, self.dest, None) or ()), *values]
        setattr(namespace, self.dest, tuple(values))


# ---------------------------------------------------------------------------- the parser
class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help layout, its descriptions kept as written and a wider flag column."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)


class FlagParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes are :class:`ConfigError` sentences (never a usage
    dump and exit), with "did you mean" for unknown flags; ``--help`` prints and exits 0."""

    def __init__(
        self, prog: str, description: str | None = None, *, see: str | None = None, **kwargs: Any
    ) -> None:
        self.see = see or f"{prog} --help"
        """the command whose help an error points to"""
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(
            prog=prog,
            description=description,
            allow_abbrev=False,  # a new field must not change what an old command line means
            exit_on_error=False,
            argument_default=argparse.SUPPRESS,
            **kwargs,
        )

    def error(self, message: str) -> NoReturn:
        """argparse's message (e.g. "the following arguments are required: RUN_DIR") as one
        sentence that points to ``--help``."""
        raise ConfigError(f"{message} (see `{self.see}`).")

    def given(self, argv: Sequence[str]) -> dict[str, Any]:
        """The values the user gave, by field name: nothing for a flag not on the line."""
        try:
            namespace, extras = self.parse_known_args(list(argv))
        except argparse.ArgumentError as exc:  # a value that does not convert, a missing one
            named = f"{exc.argument_name} " if exc.argument_name else ""
            raise ConfigError(f"{named}{exc.message} (see `{self.see}`).") from None
        if extras:
            self.reject(extras[0])
        return dict(vars(namespace))

    def reject(self, extra: str) -> NoReturn:
        """An argument no flag takes: an unknown flag with the close known ones, or a value
        where none belongs."""
        if extra.startswith("-") and not _looks_negative(extra):
            flag = extra.split("=", 1)[0]
            close = suggest(flag, self.option_strings())
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ConfigError(f"{self.prog} has no flag {flag}{hint} (see `{self.see}`).")
        raise ConfigError(f"{self.prog} takes no argument {extra!r} here (see `{self.see}`).")

    def option_strings(self) -> list[str]:
        return [
            option
            for action in self._actions
            for option in action.option_strings
            if option.startswith("--") and action.help is not argparse.SUPPRESS
        ]


def _looks_negative(text: str) -> bool:
    return bool(re.match(r"^-\d", text))


def suggest(flag: str, options: Iterable[str]) -> list[str]:
    """The known names close to ``flag`` (flags ``--learning-rate`` or field names
    ``learning_rate`` alike): by spelling (difflib), by initials (``--lr`` ->
    ``--learning-rate``) or as a prefix (``--learning`` -> ``--learning-rate``)."""
    names = {_plain(option): option for option in options}
    typed = _plain(flag)
    if typed in names:
        return [names[typed]]
    close = difflib.get_close_matches(typed, list(names), n=3, cutoff=0.75)
    if not close:
        letters = typed.replace("-", "")
        close = [name for name in names if _initials(name) == letters]
    if not close:
        close = [name for name in names if name.startswith(typed)][:3]
    if not close:
        close = difflib.get_close_matches(typed, list(names), n=3, cutoff=0.6)
    return [names[name] for name in close]


def _plain(name: str) -> str:
    return name.lstrip("-").lower().replace("_", "-")


def _initials(name: str) -> str:
    return "".join(part[0] for part in name.split("-") if part and not part.startswith("no"))


def add_fields(
    target: Any,
    cls: type,
    *,
    skip: Iterable[str] = (),
    helps: Mapping[str, str] | None = None,
) -> list[str]:
    """Add one argument per field of the dataclass ``cls`` to ``target`` (a parser or an
    argument group); ``helps`` replaces a field's help text. Returns the field names added."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    skipped = set(skip)
    added = []
    for field in dataclasses.fields(cls):
        if field.name in skipped or not field.init:
            continue
        text = (helps or {}).get(field.name) or docs.get(field.name, "")
        _add_field(target, field, kind_of(hints[field.name]), text)
        added.append(field.name)
    return added


def _add_field(target: Any, field: dataclasses.Field, kind: Kind, text: str) -> None:
    default = _default(field)
    required = default is dataclasses.MISSING
    documented = "default" in text.lower()  # the text says what the default is
    shown = "" if required or documented else f"(default: {_show(default)})"
    options: dict[str, Any] = {
        "help": " ".join(part for part in (text, shown) if part).replace("%", "%%") or None
    }
    if field.metadata.get(HIDDEN):
        options["help"] = argparse.SUPPRESS
    if kind.many:
        options.update(action=_Many, type=kind.convert, nargs="+" if kind.optional else "*")
    elif not kind.boolean:
        options["type"] = kind.convert
    positional_metavar = field.metadata.get(POSITIONAL)
    if positional_metavar:
        if kind.many:
            options["nargs"] = "*"
        elif not required:
            options["nargs"] = "?"
        target.add_argument(field.name, metavar=positional_metavar, **options)
        return
    names = [flag_name(field.name), *field.metadata.get(ALIASES, ())]
    if kind.boolean:
        target.add_argument(*names, dest=field.name, action=argparse.BooleanOptionalAction,
                            **options)  # fmt: skip
        return
    if kind.many:
        options["repeatable"] = bool(field.metadata.get(REPEATABLE))
    if BARE in field.metadata and not kind.many:
        options.update(nargs="?", const=field.metadata[BARE])
    metavar = field.metadata.get(METAVAR, kind.metavar)
    target.add_argument(*names, dest=field.name, metavar=metavar, required=required, **options)


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _show(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return " ".join(str(v) for v in value) if value else "none"
    return str(value)


def parser_for(cls: type, prog: str, description: str | None = None, **kwargs: Any) -> FlagParser:
    """A :class:`FlagParser` with one argument per field of ``cls``; the description is the
    class docstring unless given; ``kwargs`` go to the parser (``usage``, ``epilog``,
    ``see``)."""
    parser = FlagParser(prog, description or inspect.getdoc(cls), **kwargs)
    add_fields(parser, cls)
    return parser


def parse(cls: type, argv: Sequence[str], prog: str, **kwargs: Any) -> Any:
    """``argv`` parsed into an instance of the dataclass ``cls``: the values given, and the
    field defaults for the rest. ``--help`` prints and exits 0; a mistake is a ConfigError.
    ``kwargs`` go to the parser (:func:`parser_for`)."""
    return cls(**parser_for(cls, prog, **kwargs).given(argv))


__all__ = [
    "ALIASES",
    "BARE",
    "HIDDEN",
    "METAVAR",
    "POSITIONAL",
    "REPEATABLE",
    "FlagParser",
    "Kind",
    "add_fields",
    "field_docs",
    "flag_name",
    "kind_of",
    "number",
    "parse",
    "parser_for",
    "positional",
    "suggest",
    "whole_number",
]
