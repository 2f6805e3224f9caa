"""Reading a row's test code before it runs: what it checks, what it binds, where its asserts are.

Test code comes in the layouts people write (each is judged by :mod:`rlx.sandbox.judge`):

- top-level ``assert`` statements (in loops, ``if``, ``with`` and ``try`` blocks too);
- pytest: module-level ``test*`` functions (``async def`` too, ``@pytest.mark.parametrize``
  expanded) and ``Test*`` classes of ``test*`` methods, ``pytest.raises``;
- unittest: ``TestCase`` classes, with or without ``unittest.main()``;
- HumanEval: ``def check(candidate)`` with its call, or, given the row's ``entry_point``,
  without it (the call ``check(<entry_point>)`` is added here).

:func:`prepare` turns the code into what the judge runs, and refuses code that checks nothing:
a layout the judge would run without ever asserting anything must not pass every program.

Standard library only, and no import of rlx (see :mod:`rlx.sandbox.wire`).
"""

from __future__ import annotations

import ast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ASSERT_HOOK = "__rlx_assert__"
"""The judge's function every ``assert`` of the test code calls: it counts the check."""

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class NothingToCheckError(ValueError):
    """The test code would check nothing: no assert would run and no test would be found."""


def prepare(source: str, entry_point: str | None = None) -> str:
    """The test code as the judge runs it: with HumanEval's ``check(<entry_point>)`` added when
    ``check`` is defined but never called. SyntaxError when it is not Python;
    :class:`NothingToCheckError` (saying why) when it checks nothing."""
    tree = ast.parse(source)
    if entry_point is not None and not entry_point.isidentifier():
        raise NothingToCheckError(f"its entry_point {entry_point!r} is not a Python name")
    if entry_point and defines(tree, "check") and not calls_at_top_level(tree, "check"):
        source = f"{source.rstrip()}\n\ncheck({entry_point})\n"
        tree = ast.parse(source)
    why = nothing_checked(tree)
    if why:
        raise NothingToCheckError(why)
    return source


def trusted_setup(prompt: str, entry_point: str | None = None) -> str:
    """The prompt's own definitions, as the judge's trusted set-up code: its imports, function
    definitions and assignments, without the entry point (``entry_point``, or else the
    prompt's last top-level function: the function the completion finishes), which stays the
    program's, and without classes (their instances must be the program's, to be passed to its
    functions). The tests' names resolve to these, so a completion that redefines a helper
    the tests call (``encode_cyclic = lambda s: s``) changes nothing the tests see. "" when the
    prompt is not Python on its own or defines nothing but the entry point."""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return ""
    functions = [
        s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    entry = entry_point or (functions[-1] if functions else None)
    kept = [
        stmt
        for stmt in tree.body
        if is_setup(stmt)
        and not isinstance(stmt, ast.ClassDef)
        and not (isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == entry)
    ]
    if all(isinstance(stmt, (ast.Import, ast.ImportFrom)) for stmt in kept):
        return ""
    return ast.unparse(ast.Module(body=kept, type_ignores=[])) + "\n"


def nothing_checked(tree: ast.Module) -> str:
    """Why ``tree`` checks nothing, or "" when some check would run."""
    if any(_contains(stmt, ast.Assert) for stmt in tree.body if not isinstance(stmt, _SCOPES)):
        return ""
    if test_functions(tree) or test_classes(tree):
        return ""
    called = set(top_level_calls(tree))
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in called:
            return ""  # e.g. check(candidate) and its call: the function's asserts run
    if defines(tree, "check"):
        return (
            "it defines check(candidate) but never calls it; give the row's entry_point "
            "(the name of the function to check) or call check(...) in the tests"
        )
    return (
        "it has no assert outside a function, no test function or Test class, no "
        "unittest.TestCase and no call of a function of its own"
    )


def defines(tree: ast.Module, name: str) -> bool:
    """Whether the module defines a function ``name`` at its top level."""
    return any(
        isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name
        for stmt in tree.body
    )


def calls_at_top_level(tree: ast.Module, name: str) -> bool:
    """Whether a statement outside every function calls ``name(...)``."""
    return name in top_level_calls(tree)


def top_level_calls(tree: ast.Module) -> list[str]:
    """Names called by plain name in statements outside every function and class."""
    names = []
    for stmt in tree.body:
        if isinstance(stmt, _SCOPES):
            continue
        for node in _walk_outside_scopes(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                names.append(node.func.id)
    return names


def test_functions(tree: ast.Module) -> list[str]:
    """Module-level functions pytest would collect (``test`` prefix), in order."""
    return [
        stmt.name
        for stmt in tree.body
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
        and stmt.name.startswith("test")
    ]


def test_classes(tree: ast.Module) -> list[str]:
    """Module-level classes with ``test*`` methods (their own, or inherited from a class the test
    code defines earlier) that pytest or unittest would collect: ``Test*`` classes and classes
    deriving from something called ``TestCase`` (directly or through such a class)."""
    found = []
    has_tests: dict[str, bool] = {}  # by class name: it defines or inherits test* methods
    is_case: dict[str, bool] = {}  # it derives from something called TestCase
    for stmt in tree.body:
        if not isinstance(stmt, ast.ClassDef):
            continue
        bases = [_base_name(base) for base in stmt.bases]
        has_tests[stmt.name] = any(
            isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            and item.name.startswith("test")
            for item in stmt.body
        ) or any(has_tests.get(base, False) for base in bases)
        is_case[stmt.name] = any(
            base.endswith("TestCase") or is_case.get(base, False) for base in bases
        )
        if has_tests[stmt.name] and (stmt.name.startswith("Test") or is_case[stmt.name]):
            found.append(stmt.name)
    return found


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def module_bindings(tree: ast.Module) -> set[str]:
    """Every name the test code binds at module level: imports, definitions, assignment,
    loop, ``with`` and ``except`` targets, walrus targets, and ``global`` names of its
    functions. A program's name never replaces one of these."""
    names: set[str] = set()
    for stmt in tree.body:
        _bind_statement(stmt, names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            names.update(node.names)
    return names


def _bind_statement(stmt: ast.stmt, names: set[str]) -> None:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names.add(stmt.name)
        return
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for alias in stmt.names:
            names.add((alias.asname or alias.name).split(".")[0])
        return
    for node in _walk_outside_scopes(stmt, comprehensions=False):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif (
            # a definition's name is never empty; a match pattern's may be None
            isinstance(
                node,
                (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.MatchAs, ast.MatchStar),
            )
            and node.name
        ):
            names.add(node.name)


def _walk_outside_scopes(node: ast.AST, comprehensions: bool = True):
    """``ast.walk`` that yields a nested function, class or lambda but does not enter it; with
    ``comprehensions=False`` it does not enter a comprehension either (its names are its own)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and isinstance(current, _SCOPES):
            continue
        if not comprehensions and isinstance(current, _COMPREHENSIONS):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(current))))


def _contains(stmt: ast.AST, kind: type) -> bool:
    return any(isinstance(node, kind) for node in _walk_outside_scopes(stmt))


def is_setup(stmt: ast.stmt) -> bool:
    """Whether a top-level statement only sets up (imports, defines, assigns) rather than tests:
    it holds no assert and no call made as a statement of its own (``check(add)``). A set-up
    statement that fails fails the whole row."""
    if isinstance(stmt, (*_SCOPES, ast.Import, ast.ImportFrom)):
        return True
    for node in _walk_outside_scopes(stmt):
        if isinstance(node, ast.Assert):
            return False
        if isinstance(node, ast.Expr) and isinstance(node.value, (ast.Call, ast.Await)):
            return False
    return True


def assert_keys(node: ast.AST) -> list[tuple[str, int, int]]:
    """The tests the asserts in ``node`` (nested functions included, constants left out) are,
    as the judge counts them: ``("assert", line, column)``, one per assert statement."""
    return [
        ("assert", child.lineno, child.col_offset)
        for child in ast.walk(node)
        if isinstance(child, ast.Assert) and not isinstance(child.test, ast.Constant)
    ]


def counted_asserts(node: ast.AST) -> int:
    """Asserts in ``node`` (nested functions included) whose test is not a constant."""
    return sum(
        isinstance(child, ast.Assert) and not isinstance(child.test, ast.Constant)
        for child in ast.walk(node)
    )


class _CountAsserts(ast.NodeTransformer):
    """``assert test, message`` becomes ``if not __rlx_assert__(test, line, column, counted):
    raise AssertionError(message)``: the judge decides the truth of ``test`` (refusing a program
    object) and counts the check, whether it passes or fails, wherever the assert sits, as a
    check of the assert statement written at ``line``, ``column``. An assert of a constant
    (``assert True``) checks no program and is not counted."""

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        self.generic_visit(node)
        counted = ast.Constant(not isinstance(node.test, ast.Constant))
        check = ast.Call(
            func=ast.Name(ASSERT_HOOK, ast.Load()),
            args=[node.test, ast.Constant(node.lineno), ast.Constant(node.col_offset), counted],
            keywords=[],
        )
        error = ast.Call(
            func=ast.Name("AssertionError", ast.Load()),
            args=[] if node.msg is None else [node.msg],
            keywords=[],
        )
        replacement = ast.If(
            test=ast.UnaryOp(ast.Not(), check), body=[ast.Raise(exc=error)], orelse=[]
        )
        return ast.copy_location(replacement, node)


def instrument(tree: ast.Module) -> ast.Module:
    """``tree`` with every assert counted by the judge (see :class:`_CountAsserts`)."""
    return ast.fix_missing_locations(_CountAsserts().visit(tree))


GLOBAL_HOOK = "__rlx_global__"


def read_live(tree: ast.Module, names: set[str]) -> ast.Module:
    """``tree`` with each read of a name of ``names`` (the program's data globals) where it is
    the module's global (not a function's local, parameter or comprehension variable) made a
    call of :data:`GLOBAL_HOOK`, which asks the program for the name's value now."""
    if not names:
        return tree
    return ast.fix_missing_locations(_ReadLive(names).visit(tree))


def _bound_in(nodes: list[ast.stmt] | list[ast.expr], args: ast.arguments | None) -> set[str]:
    """The names a function (or class body, or comprehension) binds locally."""
    bound: set[str] = set()
    declared: set[str] = set()
    if args is not None:
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None:
                bound.add(arg.arg)
    todo: list[ast.AST] = list(nodes)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            continue  # its body is its own scope
        elif isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                               ast.GeneratorExp)):  # fmt: skip
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return bound - declared


class _ReadLive(ast.NodeTransformer):
    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.local: list[set[str]] = []

    def _scoped(self, node: Any, bound: set[str]) -> Any:
        self.local.append(bound)
        try:
            return self.generic_visit(node)
        finally:
            self.local.pop()

    def visit_FunctionDef(self, node: Any) -> Any:
        for part in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults):
            if part is not None:
                self.visit(part)
        self.local.append(_bound_in(node.body, node.args))
        try:
            node.body = [self.visit(statement) for statement in node.body]
        finally:
            self.local.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        return self._scoped(node, _bound_in([], node.args))

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        return self._scoped(node, _bound_in(node.body, None))

    def _comprehension(self, node: Any) -> Any:
        targets = [g.target for g in node.generators]
        return self._scoped(node, _bound_in(targets, None))

    visit_ListComp = visit_SetComp = _comprehension  # noqa: N815
    visit_DictComp = visit_GeneratorExp = _comprehension  # noqa: N815

    def visit_Name(self, node: ast.Name) -> Any:
        if (
            isinstance(node.ctx, ast.Load)
            and node.id in self.names
            and not any(node.id in scope for scope in self.local)
        ):
            call = ast.Call(ast.Name(GLOBAL_HOOK, ast.Load()), [ast.Constant(node.id)], [])
            return ast.copy_location(call, node)
        return node
