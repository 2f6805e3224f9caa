"""The shape of the tree, held by tests: the import graph of ``src/rlx`` has no cycle, no
module imports another's private name, the layers point one way (core knows no cluster and no
algorithm, runs/ no doctor, only the top reaches distributed/), and ``import rlx`` is light."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in SRC.rglob("*.py")}


def imports_of(name: str) -> list[tuple[str, str | None]]:
    """``(module, imported name or None)`` for every rlx import in the module, wherever it is
    (top level or inside a function: a lazy import is still a dependency)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name.startswith("rlx")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("rlx"):
                found += [(target, alias.name) for alias in node.names]
    return found


@functools.cache
def edges() -> dict[str, set[str]]:
    """Module -> the rlx modules it imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name in MODULES:
        for target, imported in imports_of(name):
            full = f"{target}.{imported}" if imported else target
            if full in MODULES:
                graph[name].add(full)
            elif target in MODULES:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(set(graph) | {w for targets in graph.values() for w in targets}):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle():
    assert cycles(edges()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_another_modules_private_name():
    private = [
        f"{name} imports {imported} from {target}"
        for name in MODULES
        for target, imported in imports_of(name)
        if imported and imported.startswith("_") and target != name
    ]
    assert private == []


@pytest.mark.parametrize(
    ("layer", "must_not_reach", "why"),
    [
        ("rlx.core", "rlx.distributed", "core/ knows no cluster"),
        ("rlx.agents", "rlx.distributed", "Ray wraps the agents from above"),
        ("rlx.games", "rlx.distributed", "Ray wraps the games from above"),
        ("rlx.llm", "rlx.distributed", "only the top reaches distributed/"),
        ("rlx.tabular", "rlx.distributed", "only the top reaches distributed/"),
        ("rlx.runs", "rlx.diagnostics", "runs/ owns the folder; the doctor attaches from above"),
        ("rlx.core", "rlx.agents", "core/ knows no algorithm"),
        ("rlx.core", "rlx.games", "core/ knows no algorithm"),
        ("rlx.core", "rlx.llm", "core/ knows no algorithm"),
        ("rlx.distributed", "rlx.agents", "runners get what they run through a public seam"),
        ("rlx.distributed", "rlx.games", "self-play workers get their game through a seam"),
        ("rlx.metrics", "rlx", "the metric vocabulary sits at the bottom"),
        ("rlx.sandbox", "rlx.llm", "the sandbox judges any program; llm/ uses it from above"),
        ("rlx.sandbox", "rlx.core", "the sandbox knows nothing of RL"),
        ("rlx.sandbox", "rlx.runs", "the sandbox knows nothing of RL"),
        ("rlx.sandbox", "rlx.diagnostics", "the sandbox knows nothing of RL"),
    ],
)
def test_layers_point_one_way(layer, must_not_reach, why):
    graph = edges()
    wrong = [
        f"{source} -> {target}"
        for source, targets in graph.items()
        if source == layer or source.startswith(layer + ".")
        for target in targets
        if (target == must_not_reach or target.startswith(must_not_reach + "."))
        and not (layer == "rlx.metrics" and target == layer)
    ]
    assert wrong == [], why


TOP = ("rlx.api", "rlx.align", "rlx.cli", "rlx.launch", "rlx.recommend", "rlx.distributed")
"""The faces and what carries their requests out: nothing below them reaches them."""


@functools.cache
def named_modules(name: str) -> set[str]:
    """The rlx modules ``name`` names in a string (``importlib.import_module("rlx.align")``, a
    table of lazy exports): a dependency the import statements do not show."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text in MODULES and text.startswith("rlx."):
                found.add(text)
    return found


def reaches(name: str) -> set[str]:
    """Every rlx module ``name`` depends on: imported (at the top or lazily) or named."""
    return edges().get(name, set()) | named_modules(name)


@pytest.mark.parametrize(
    ("layer", "why"),
    [
        ("rlx.llm.", "llm/ sits below the faces: rlx.llm.sft is a face (rlx.align) that only "
                     "the package's public namespace, rlx/llm/__init__.py, names"),
        ("rlx.sandbox", "the sandbox sits at the bottom"),
        ("rlx.diagnostics", "the doctor sits below the methods: its references are handed in "
                            "(rlx.diagnostics.references)"),
        ("rlx.games", "games/ sits below the faces"),
        ("rlx.agents", "agents/ sit below the faces"),
        ("rlx.core", "core/ sits at the bottom"),
        ("rlx.runs", "runs/ sits at the bottom"),
    ],
)  # fmt: skip
def test_nothing_below_the_faces_reaches_up_lazily_or_by_name(layer, why):
    wrong = sorted(
        f"{source} -> {target}"
        for source in MODULES
        if source.startswith(layer) or source == layer
        for target in reaches(source)
        if target.startswith(TOP) or target == "rlx"  # the package's root is a face too
    )
    assert wrong == [], why


def test_a_module_named_in_a_string_is_a_dependency():
    """The rule above sees what ``importlib`` loads by name (the hidden arrow of a lazy
    export table), not only import statements."""
    assert "rlx.align" in named_modules("rlx.llm")
    assert "rlx.align" not in edges().get("rlx.llm", set())


def test_the_sandbox_imports_nothing_of_rlx_but_itself_and_its_errors():
    """The sandbox sits at the bottom beside core/ and runs/: its modules run inside the rooms
    with no rlx installed, so only the trainer's side (process, reward) may name rlx.errors."""
    outside = [
        f"{source} -> {target}"
        for source, targets in edges().items()
        if source.startswith("rlx.sandbox")
        for target in targets
        if not target.startswith("rlx.sandbox") and target != "rlx.errors"
    ]
    assert outside == []


def test_import_rlx_loads_no_heavy_library():
    code = (
        "import sys, rlx\n"
        "rlx.__version__, rlx.errors.RLXError\n"
        "heavy = {'torch', 'numba', 'transformers', 'gymnasium', 'scipy', 'ray'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
