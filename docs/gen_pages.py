"""The docs pages that are generated from the code, so they cannot go stale.

``docs/hooks.py`` calls :func:`pages` on every ``mkdocs build``; nothing here is committed as
Markdown. Each page reads the table it documents:

- ``reference/choose-a-method.md``: :data:`rlx.diagnostics.recommend.ROWS`;
- ``reference/defaults.md``: every registered algorithm's config dataclass (field, default,
  field docstring) and its per-environment presets;
- ``reference/troubleshooting.md``: :data:`rlx.diagnostics.rules.RULES`;
- ``reference/cli.md``: the ``--help`` text of every ``rlx`` command;
- ``reference/field-names.md``: every config field name and the algorithms that have it;
- ``reference/api/<module>.md``: one mkdocstrings page per public module of ``rlx``.

``docs/benchmarks.md`` is generated too, from ``benchmarks/results/*.json``, but committed (so
it reads on the repository's front page as well); ``tests/docs/test_site.py`` fails when it
differs from what the result files give.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import inspect
import io
import json
import os
import pkgutil
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

# -------------------------------------------------------------------------- field docs


def field_docs(cls: type) -> dict[str, str]:
    """Each dataclass field's help text, as ``rlx train NAME --help`` shows it.

    A field is documented by a string literal right after it, or by a line of the class
    docstring's ``Attributes:`` section (the two styles tyro reads).
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        docs.update(_attributes_section(inspect.getdoc(klass) or ""))
        docs.update(_literal_docs(klass))
    return docs


def _literal_docs(klass: type) -> dict[str, str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, after in zip(body, [*body[1:], None], strict=True):
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
    match = re.search(r"^Attributes:\n((?:[ \t]+.*\n?|\n)+)", docstring, flags=re.MULTILINE)
    if not match:
        return {}
    docs: dict[str, str] = {}
    name = None
    for line in match.group(1).splitlines():
        head = re.match(r"^ {4}(\w+):\s*(.*)$", line)
        if head:
            name = head.group(1)
            docs[name] = head.group(2)
        elif name and line.strip():
            docs[name] += " " + line.strip()
    return docs


# -------------------------------------------------------------------------- pages


def _cell(value: Any) -> str:
    """A Markdown table cell: pipes escaped, code spans for values."""
    return str(value).replace("|", r"\|").replace("\n", " ")


def _default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "(required)"
    return f"`{_cell(repr(value))}`"


def choose_a_method() -> str:
    """The "Choose a method" table, from the chooser's own rows."""
    from rlx.diagnostics.recommend import ROWS, is_available

    lines = [
        "# Choose a method",
        "",
        "_Generated from `rlx.diagnostics.recommend.ROWS` on every docs build._",
        "",
        "`rlx recommend TARGET` (or `rlx.recommend(target)`) reads a Gymnasium id or env, a",
        "GridWorld, a JSONL data file or a board game, finds the row below that fits it and prints",
        "the command to run. The Method column is the table's, verbatim; the rlx column is the",
        "name to run.",
        "",
        "| Situation | Method | rlx runs | Alternatives | Why |",
        "|---|---|---|---|---|",
    ]
    for row in ROWS:
        alternatives = "; ".join(f"`{name}`: {when}" for name, when in row.alternatives)
        ready = "" if is_available(row.method) else " (not installed)"
        lines.append(
            f"| {_cell(row.situation)} | {_cell(row.table_method)} | `{row.method}`{ready} "
            f"| {_cell(alternatives)} | {_cell(row.why)} |"
        )
    lines += [
        "",
        "```python",
        "import rlx",
        "",
        'print(rlx.recommend("Pendulum-v1"))',
        "```",
        "",
    ]
    return "\n".join(lines)


def defaults() -> str:
    """Every registered algorithm's settings: field, default, and the field's help text."""
    from rlx import registry

    lines = [
        "# Defaults and numbers",
        "",
        "_Generated from the config dataclasses on every docs build: a default changed in the",
        "code changes here._",
        "",
        "Every field is also a flag of `rlx train NAME` (`--field-name value`) and a keyword of",
        "`rlx.train(NAME, env, field=value)`. Presets are tuned overrides applied for one",
        "environment before your own flags.",
        "",
        *_standard_numbers(),
    ]
    for algorithm in registry.all_algorithms():
        name = algorithm.name
        config = algorithm.config
        docs = field_docs(config)
        lines += [
            f"## `{name}`",
            "",
            f"{_cell(algorithm.summary)}. Config: `{config.__module__}.{config.__name__}`; "
            f"budget: `{algorithm.budget_field}` ({algorithm.unit}).",
            "",
            "| Field | Default | Meaning |",
            "|---|---|---|",
        ]
        for f in dataclasses.fields(config):
            lines.append(f"| `{f.name}` | {_default_text(f)} | {_cell(docs.get(f.name, ''))} |")
        for env_id, overrides in sorted(algorithm.presets.items()):
            settings = ", ".join(f"`{k}={v!r}`" for k, v in overrides.items())
            lines += ["", f"Preset for `{env_id}`: {_cell(settings)}."]
        lines.append("")
    return "\n".join(lines)


# The standard values of the usual settings: (setting, its value, note, [(algo, field)]).
STANDARD_DEFAULTS: tuple[tuple[str, str, str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Discount γ",
        "0.99",
        "horizon about 1 / (1 - γ), so 100 steps",
        (("ppo", "gamma"), ("a2c", "gamma"), ("dqn", "gamma"), ("sac", "gamma")),
    ),
    (
        "Tabular α and ε",
        "0.1",
        "Q-learning and SARSA on the 4x4 GridWorld",
        (("q-learning", "alpha"), ("q-learning", "epsilon"), ("sarsa", "alpha")),
    ),
    (
        "PPO clip ε",
        "0.2",
        "0.1 is too timid, 0.3 and more is unstable",
        (("ppo", "clip_eps"),),
    ),
    ("Value coefficient c_v", "0.5", "PPO and A2C", (("ppo", "vf_coef"), ("a2c", "vf_coef"))),
    (
        "Entropy coefficient c_e",
        "0.01",
        "PPO and A2C",
        (("ppo", "ent_coef"), ("a2c", "ent_coef")),
    ),
    ("GAE λ", "0.95", "0 is TD, 1 is MC", (("ppo", "gae_lambda"),)),
    (
        "RLHF KL β",
        "0.01-0.05",
        "keeps the policy near SFT",
        (("rlhf-ppo", "beta"), ("grpo", "beta")),
    ),
    (
        "GRPO group size G",
        "8",
        "8 to 64 is standard, below 4 is noisy",
        (("grpo", "group_size"),),
    ),
)


def _standard_numbers() -> list[str]:
    from rlx import registry

    lines = [
        "## Standard values",
        "",
        "| Setting | Standard | Note | rlx field = default |",
        "|---|---|---|---|",
    ]
    names = set(registry.names())
    for setting, value, note, fields in STANDARD_DEFAULTS:
        found = []
        for algo, field_name in fields:
            if algo not in names:
                continue
            by_name = {f.name: f for f in dataclasses.fields(registry.get(algo).config)}
            found.append(f"{algo} `{field_name}` = {_default_text(by_name[field_name])}")
        lines.append(f"| {setting} | {value} | {note} | {'; '.join(found)} |")
    return [*lines, ""]


def troubleshooting() -> str:
    """The doctor's rule table: symptom, cause, fix, and what the doctor suggests."""
    from rlx.diagnostics.rules import RULES

    lines = [
        "# Troubleshooting",
        "",
        "_Generated from `rlx.diagnostics.rules.RULES` on every docs build._",
        "",
        "`rlx doctor RUN_DIR` checks every rule below against a run's metrics (rlx's own runs,",
        "Stable-Baselines3 or TRL logs, TensorBoard event files) and prints the findings with",
        "the config change to try; `rlx train` checks the live rules while it trains. The",
        "Changes column lists the fields a fix may name, in order: a finding names the first",
        "one the run's own config has.",
        "",
        "| Symptom | Cause | Fix | Rule | Metric | Changes | Applies to |",
        "|---|---|---|---|---|---|---|",
    ]
    for rule in RULES:
        where = ", ".join(sorted(rule.algos)) if rule.algos else "any run with the metric"
        changes = " or ".join(f"`{name}`" for name in rule.fields)
        lines.append(
            f"| {_cell(rule.symptom)} | {_cell(rule.cause)} | {_cell(rule.fix)} "
            f"| `{rule.id}` ({rule.severity}{'' if rule.live else ', end of run'}) "
            f"| {', '.join(f'`{m}`' for m in rule.metrics)} | {changes} | {_cell(where)} |"
        )
    return "\n".join([*lines, ""])


def field_names() -> str:
    """Every config field name, and the algorithms that have it: one name for one idea."""
    from rlx import registry

    fields: dict[str, list[str]] = {}
    meaning: dict[str, str] = {}
    for algorithm in registry.all_algorithms():
        docs = field_docs(algorithm.config)
        for f in dataclasses.fields(algorithm.config):
            fields.setdefault(f.name, []).append(algorithm.name)
            meaning.setdefault(f.name, docs.get(f.name, ""))
    lines = [
        "# Field names across algorithms",
        "",
        "_Generated from the config dataclasses on every docs build._",
        "",
        "One idea has one name in every algorithm that has it: the step size is `learning_rate`",
        "(`actor_learning_rate` and `critic_learning_rate` where there are two; the tabular",
        "step size keeps its textbook name `alpha`), the passes over a batch `num_epochs`, the",
        "budget `total_steps`, `episodes`, `iterations` or `steps` by family. A flag is the",
        "field with dashes: `--learning-rate`.",
        "",
        "| Field | Algorithms | Meaning (from the first algorithm that has it) |",
        "|---|---|---|",
    ]
    for name in sorted(fields):
        algos = ", ".join(fields[name])
        lines.append(f"| `{name}` | {_cell(algos)} | {_cell(meaning[name])} |")
    return "\n".join([*lines, ""])


# ------------------------------------------------------------------------- benchmarks
RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
BENCHMARKS_PAGE = Path(__file__).resolve().parent / "benchmarks.md"


def benchmarks_page(results: Path = RESULTS) -> str:
    """The benchmark page, from the result files the benchmarks write (one section each:
    what was measured, the table, the command, the date, the machine, the seeds)."""
    records = sorted(
        (json.loads(path.read_text()) for path in results.glob("*.json")),
        key=lambda r: r["name"],
    )
    lines = [
        "# Benchmarks",
        "",
        "_Generated from `benchmarks/results/*.json` by `python docs/gen_pages.py benchmarks`:",
        "every figure here is one a benchmark wrote, with the command that reproduces it._",
        "",
        "Each benchmark runs rlx and the library a user would otherwise pick on the same work, in",
        "one process run on the same machine, and prints ratios. `make bench` runs them all and",
        "rewrites this page; `.venv/bin/python benchmarks/bench_NAME.py --help` shows the",
        "options of one.",
        "",
    ]
    if not records:
        lines += ["No result files yet: run `make bench`.", ""]
    for record in records:
        lines += _benchmark_section(record)
    return "\n".join(lines)


def _benchmark_section(record: dict[str, Any]) -> list[str]:
    machine = record.get("machine", {})
    lines = [f"## {record['title']}", ""]
    if record.get("notes"):
        lines += [record["notes"], ""]
    columns = record["columns"]
    lines += ["| " + " | ".join(_cell(c) for c in columns) + " |"]
    lines += ["|" + "---|" * len(columns)]
    for row in record["rows"]:
        lines.append("| " + " | ".join(_cell(_figure(v)) for v in row) + " |")
    lines.append("")
    if record.get("figures"):
        lines.append(
            "Figures: " + "; ".join(f"{k} {_figure(v)}" for k, v in record["figures"].items()) + "."
        )
        lines.append("")
    seeds = record.get("seeds")
    threads = record.get("torch_threads")
    lines += [
        f"Command: `{record['command']}`; {record['date'][:10]}; "
        f"{machine.get('cpu', '?')} ({machine.get('cores', '?')} cores)"
        + (f"; torch threads {threads}" if threads else "")
        + (f"; seeds {', '.join(str(x) for x in seeds)}" if seeds else "")
        + ".",
        "",
    ]
    return lines


def _figure(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


# `rlx` commands whose --help the CLI reference shows, in the order of `rlx --help`.
CLI_COMMANDS: tuple[tuple[str, ...], ...] = (
    (),
    ("train",),
    ("eval",),
    ("solve",),
    ("list",),
    ("align",),
    ("align", "tiny"),
    ("align", "data"),
    ("align", "rlhf", "--task", "arithmetic"),
    ("align", "eval"),
    ("doctor",),
    ("report",),
    ("recommend",),
    ("play",),
)


def help_text(args: tuple[str, ...]) -> str:
    """What ``rlx *args --help`` prints (at 100 columns, without colour)."""
    from rlx.cli import main

    buffer = io.StringIO()
    env = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
            main([*args, "--help"])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return buffer.getvalue().rstrip()


def cli_reference() -> str:
    """Every command's ``--help``, and every algorithm's ``rlx train NAME --help``."""
    from rlx import registry

    lines = [
        "# Command line",
        "",
        "_Generated from `rlx ... --help` on every docs build._",
        "",
    ]
    for args in CLI_COMMANDS:
        title = " ".join(("rlx", *args))
        lines += [f"## `{title}`", "", "```text", help_text(args), "```", ""]
    lines += ["## `rlx train NAME` for each algorithm", ""]
    for name in registry.names():
        lines += [
            f'??? note "`rlx train {name} --help`"',
            "",
            "    ```text",
            textwrap.indent(help_text(("train", name)), "    "),
            "    ```",
            "",
        ]
    return "\n".join(lines)


# ------------------------------------------------------------------------- API reference

# Modules the API reference leaves out: the command line (see the CLI page) and entry points.
_API_SKIP = re.compile(r"(^rlx\.cli$|^rlx\.__main__$|\._[a-z])")


def api_modules() -> list[str]:
    """Every public module of ``rlx`` (importable name), sorted."""
    import rlx

    names = ["rlx"]
    for info in pkgutil.walk_packages(rlx.__path__, "rlx."):
        if not _API_SKIP.search(info.name):
            names.append(info.name)
    return sorted(names)


def api_page(module: str) -> str:
    title = module
    return f"# `{title}`\n\n::: {module}\n"


def api_index(modules: list[str]) -> str:
    lines = [
        "# API reference",
        "",
        "_One page per module, generated from the docstrings on every docs build._",
        "",
    ]
    for module in modules:
        summary = _first_line(module)
        lines.append(f"- [`{module}`]({module}.md){': ' + summary if summary else ''}")
    return "\n".join([*lines, ""])


def _first_line(module: str) -> str:
    try:
        doc = importlib.import_module(module).__doc__ or ""
    except ImportError:  # an optional extra that is not installed
        return ""
    first = doc.strip().split("\n\n")[0]
    return " ".join(first.split())


def pages() -> dict[str, Callable[[], str] | str]:
    """Docs path -> content (or a function that makes it)."""
    generated: dict[str, Callable[[], str] | str] = {
        "reference/choose-a-method.md": choose_a_method,
        "reference/defaults.md": defaults,
        "reference/troubleshooting.md": troubleshooting,
        "reference/cli.md": cli_reference,
        "reference/field-names.md": field_names,
    }
    modules = api_modules()
    generated["reference/api/index.md"] = api_index(modules)
    for module in modules:
        generated[f"reference/api/{module}.md"] = api_page(module)
    return generated


if __name__ == "__main__":
    # `python docs/gen_pages.py benchmarks`: rewrite docs/benchmarks.md from the result files
    if sys.argv[1:] != ["benchmarks"]:
        sys.exit("usage: python docs/gen_pages.py benchmarks")
    BENCHMARKS_PAGE.write_text(benchmarks_page())
    print(f"wrote {BENCHMARKS_PAGE}")
