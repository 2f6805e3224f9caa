"""The docs pages that are generated from the code, so they cannot go stale.

``docs/hooks.py`` calls :func:`pages` on every ``mkdocs build``; nothing here is committed as
Markdown. Each page reads the table it documents:

- ``reference/choose-a-method.md``: :data:`rlx.recommend.ROWS`;
- ``reference/defaults.md``: every registered algorithm's config dataclass (field, default,
  field docstring) and its per-environment presets;
- ``reference/troubleshooting.md``: :data:`rlx.diagnostics.rules.RULES`;
- ``reference/cli.md``: the ``--help`` text of every ``rlx`` command;
- ``reference/field-names.md``: every config field name and the algorithms that have it;
- ``reference/architecture.md``: the layers, every module with its first docstring line, and
  the imports between packages, read from the source;
- ``reference/api/<module>.md``: one mkdocstrings page per public module of ``rlx``.

``docs/benchmarks.md`` is generated too, from ``benchmarks/results/*.json``, but committed (so
it reads on the repository's front page as well); ``tests/docs/test_site.py`` fails when it
differs from what the result files give.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
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
    """Each dataclass field's help text, as ``rlx train NAME --help`` shows it: the CLI's own
    reader (:func:`rlx.flags.field_docs`: the string literal under a field, or its line of the
    class docstring's ``Attributes:`` section)."""
    from rlx.flags import field_docs as cli_field_docs

    return cli_field_docs(cls)


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
    from rlx.recommend import ROWS, is_available

    lines = [
        "# Choose a method",
        "",
        "_Generated from `rlx.recommend.ROWS` on every docs build._",
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
BENCHMARK_SCRIPTS = Path(__file__).resolve().parents[1] / "benchmarks"

FLAG_NAMES = {
    "sse4_2": "SSE4.2", "avx": "AVX", "avx2": "AVX2", "fma": "FMA", "f16c": "F16C",
    "avx_vnni": "AVX-VNNI", "avx512f": "AVX-512", "avx512dq": "AVX512-DQ",
    "avx512bw": "AVX512-BW", "avx512vl": "AVX512-VL", "avx512_vnni": "AVX512-VNNI",
    "avx512_bf16": "AVX512-BF16", "avx512_fp16": "AVX512-FP16", "amx_tile": "AMX-TILE",
    "amx_bf16": "AMX-BF16", "amx_int8": "AMX-INT8",
}  # fmt: skip
"""How the page names the instruction sets a result file lists (``/proc/cpuinfo`` flags)."""


def benchmarks_page(results: Path = RESULTS) -> str:
    """The benchmark page, from the result files the benchmarks write: first every goal with
    met or missed, then one section per file (what was measured, the table, the goals, the
    like-for-like settings of both sides, where rlx's preset differs from the peer's recipe,
    and the record: command, date, commit, CPU and its instruction sets, threads, repeats,
    seeds, library versions). A benchmark without a result file is listed as not run.
    Nothing is computed here beyond formatting: no figure is derived or extrapolated."""
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
        "Each benchmark runs rlx and the library a user would otherwise pick on the same work:",
        "the peer as its users run it (its documented defaults or its own published recipe), and",
        "every setting that changes the work equal on both sides (precision, gradient",
        "checkpointing, model, data, batch and group sizes, sequence lengths, steps, threads);",
        "each section lists those settings with both sides' values, read from the two",
        "configuration objects. Every timed figure is the summary of at least 3 repeats (min and",
        "median). A goal the run did not meet is shown as missed; a side that was not run is",
        "shown as not run, never estimated.",
        "",
        "The deep-RL sections have two rows for rlx: rlx with the peer's exact hyperparameters",
        "(the code's speed on the same work) and rlx's preset against the peer's recipe (what a",
        "user gets from each by default); the differences between preset and recipe are listed.",
        "A preset is scored on seeds its tuning never looked at: the seeds each preset's",
        "tuning and retuning used are listed in `benchmarks/seen_seeds.json`, a benchmark",
        "refuses them, and an older record scored on any of them says so. A preset must also",
        "stay up: the stability check asks that after the mean of the last 20 training episodes",
        "first reaches the threshold, no later window of 20 episodes falls below half of it",
        "(for Pendulum, whose returns are negative: halfway from the random policy's measured",
        "return), over the whole budget.",
        "",
        "`make bench` runs them all and rewrites this page; `.venv/bin/python",
        "benchmarks/bench_NAME.py --help` shows the options of one, `--quick` a run that only",
        "checks the benchmark works (written under `benchmarks/results/quick/`, never shown here).",
        "",
        "Where the language-model speedups come from: the work is equal (the same tokens are",
        "scored, sampled and trained on both sides), but rlx packs a prompt with the G",
        "completions of its group (GRPO) or with its two answers (DPO) and scores the prompt",
        "once, and its sampler prefills each prompt once for its G samples, where TRL repeats",
        "the prompt per completion. Those savings are largest with long prompts (a chat",
        "template's) and short completions, and shrink as completions grow: the sampling",
        "benchmark at 256 new tokens shows what is left, and `real_model_grpo_long` times",
        "GRPO on the real model with up to 128 new tokens per sample on a task where its",
        "rewards vary. SFT has no prompt to share, so its rows measure the training step alone.",
        "",
    ]
    if not records:
        lines += ["No result files yet: run `make bench`.", ""]
    lines += _goal_summary(records)
    missing = _not_run(records)
    if missing:
        lines += [
            "Not run under these rules yet (no result file): "
            + ", ".join(f"`benchmarks/{name}`" for name in missing)
            + ".",
            "",
        ]
    for record in records:
        lines += _benchmark_section(record)
    return "\n".join(lines)


DOCTOR_PAGE = BENCHMARKS_PAGE.parent / "how-to" / "doctor.md"
CORPUS_BEGIN = (
    "<!-- doctor-corpus: written from benchmarks/results/doctor_corpus.json by "
    "`python docs/gen_pages.py benchmarks` -->"
)
CORPUS_END = "<!-- /doctor-corpus -->"


def doctor_corpus_figures(results: Path = RESULTS) -> str:
    """The doctor corpus's figures as the doctor's page states them: each half's false
    positives and misses, the commit of the rules and the date (from the result file)."""
    record = json.loads((results / "doctor_corpus.json").read_text())
    f, git = record["figures"], record.get("git") or {}
    commit = str(git.get("commit") or "unknown")[:10]

    def half(name: str) -> str:
        return (f"{f[f'{name}_false_positives']} false positives on "
                f"{f[f'{name}_healthy_runs']} healthy runs, {f[f'{name}_misses']} misses on "
                f"{f[f'{name}_broken_runs']} broken runs")  # fmt: skip

    return (
        f"On the **held-out half**: {half('held_out')}. On the development half, which the "
        f"rules may be revised on: {half('development')}. Measured with the rules of commit "
        f"`{commit}` on {record['date'][:10]}; the runs each half gets wrong are listed on the "
        "benchmarks page."
    )


def with_corpus_figures(page: str, results: Path = RESULTS) -> str:
    """The doctor's page with its generated block (between :data:`CORPUS_BEGIN` and
    :data:`CORPUS_END`) rewritten from the result file."""
    head, found, rest = page.partition(CORPUS_BEGIN)
    _, ended, tail = rest.partition(CORPUS_END)
    if not found or not ended:
        raise SystemExit(f"{DOCTOR_PAGE} lacks its {CORPUS_BEGIN} ... {CORPUS_END} block")
    block = f"{CORPUS_BEGIN}\n{doctor_corpus_figures(results)}\n{CORPUS_END}"
    return head + block + tail


def _verdict(met: Any) -> str:
    return {True: "met", False: "**missed**"}.get(met, "not run")


def _goal_summary(records: list[dict[str, Any]]) -> list[str]:
    rows = [(r, g) for r in records for g in r.get("goals", [])]
    if not rows:
        return []
    lines = ["## Goals", "", "| benchmark | goal | target | measured | result |",
             "|---|---|---|---|---|"]  # fmt: skip
    for record, g in rows:
        lines.append(
            f"| {_cell(record['name'])} | {_cell(g['goal'])} | {_cell(g['target'])} "
            f"| {_cell(_figure(g['measured']))} | {_verdict(g['met'])} |"
        )
    return [*lines, ""]


def _not_run(records: list[dict[str, Any]]) -> list[str]:
    """The benchmark scripts no result file came from."""
    commands = " ".join(r.get("command", "") for r in records)
    names = {r["name"] for r in records}
    return [
        script.name
        for script in sorted(BENCHMARK_SCRIPTS.glob("bench_*.py"))
        if script.stem.removeprefix("bench_") not in names and script.name not in commands
    ]


def _table(columns: list[Any], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    for row in rows:
        lines.append("| " + " | ".join(_cell(_figure(v)) for v in row) + " |")
    return [*lines, ""]


def _benchmark_section(record: dict[str, Any]) -> list[str]:
    lines = [f"## {record['title']}", ""]
    if record.get("quick"):
        lines += ["**Quick run** (`--quick`): a check that the benchmark works, not a "
                  "measurement.", ""]  # fmt: skip
    if "schema" not in record:
        lines += ["_Recorded before result files kept the commit, every library's version, "
                  "the repeats and the goals._", ""]  # fmt: skip
    if record.get("notes"):
        lines += [record["notes"], ""]
    lines += _table(record["columns"], record["rows"])
    peer = record.get("peer", "peer")
    if record.get("goals"):
        lines += ["Goals:", ""]
        lines += _table(
            ["goal", "target", "measured", "result"],
            [[g["goal"], g["target"], g["measured"], _verdict(g["met"])] for g in record["goals"]],
        )
    if record.get("settings"):
        lines += [f"Like for like: the settings that change the work, rlx's and {peer}'s, "
                  "read from the configurations the benchmark builds.", ""]  # fmt: skip
        lines += _table(
            ["setting", "rlx", peer, "equal"],
            [[s["setting"], _value(s["rlx"]), _value(s["peer"]),
              "yes" if s["equal"] else ("**no**" if s.get("must_match") else "no (see notes)")]
             for s in record["settings"]],
        )  # fmt: skip
    if record.get("preset_differences"):
        lines += [f"Where rlx's preset differs from {peer}'s recipe (the preset row's settings "
                  "against the peer's):", ""]  # fmt: skip
        lines += _table(
            ["setting", "rlx preset", f"{peer} recipe"],
            [[d["setting"], _value(d["preset"]), _value(d["recipe"])]
             for d in record["preset_differences"]],
        )  # fmt: skip
    for extra in record.get("extra_tables", []):
        lines += [f"{extra['title']}:", ""]
        lines += _table(extra["columns"], extra["rows"])
    if record.get("figures"):
        lines.append(
            "Figures: " + "; ".join(f"{k} {_figure(v)}" for k, v in record["figures"].items()) + "."
        )
        lines.append("")
    lines += [_record_line(record), ""]
    seen = _seen_seeds(record)
    if seen:
        shown = "; ".join(f"{preset}: {', '.join(map(str, s))}" for preset, s in seen.items())
        lines += [f"**Scored on seeds its preset's tuning looked at** ({shown}; "
                  "`benchmarks/seen_seeds.json`): these figures are not held out.", ""]  # fmt: skip
    return lines


def _seen_seeds(record: dict[str, Any]) -> dict[str, list[int]]:
    """The presets a record scores on seeds their tuning looked at (``seen_seeds.json``, read
    by ``benchmarks/results.py``, which refuses such seeds in a new record)."""
    if str(RESULTS.parent) not in sys.path:
        sys.path.insert(0, str(RESULTS.parent))
    from results import seen_in_record

    return seen_in_record(record.get("name", ""), record.get("seeds") or [])


def _value(value: Any) -> str:
    """A setting's value in a table cell: code-formatted, lists as they were written."""
    return f"`{value}`"


def _record_line(record: dict[str, Any]) -> str:
    """Command, date, commit, machine, threads, repeats, seeds and versions in one line."""
    machine = record.get("machine", {})
    cpu = machine.get("cpu", "?")
    if isinstance(cpu, dict):
        flags = ", ".join(FLAG_NAMES.get(f, f) for f in cpu.get("kernel_flags", []))
        where = f"{cpu.get('model', '?')} ({cpu.get('cores', '?')} cores" + (
            f"; {flags})" if flags else ")"
        )
        if machine.get("torch_cpu_capability"):
            where += f", torch kernels {machine['torch_cpu_capability']}"
    else:
        where = f"{cpu} ({machine.get('cores', '?')} cores)"
    parts = [f"Command: `{record['command']}`", record["date"][:10]]
    git = record.get("git")
    if git and git.get("commit"):
        dirty = len(git.get("dirty_paths", []))
        parts.append(f"commit `{git['commit'][:10]}`"
                     + (f" with {dirty} changed files" if git.get("dirty") else "")
                     + (" (**measured from uncommitted source**)"
                        if git.get("uncommitted_source") else ""))  # fmt: skip
    parts.append(where)
    load = machine.get("load_average")
    if isinstance(load, list) and len(load) == 3:
        cores = cpu.get("cores") if isinstance(cpu, dict) else machine.get("cores")
        busy = isinstance(cores, int) and max(load) > cores
        parts.append(f"load average {load[0]}, {load[1]}, {load[2]} at the end"
                     + (" (the machine was shared)" if busy else ""))  # fmt: skip
    threads = record.get("threads") or {}
    torch_threads = threads.get("torch") if threads else record.get("torch_threads")
    if torch_threads:
        parts.append(f"torch threads {torch_threads}")
    if record.get("repeats"):
        parts.append(f"repeats {record['repeats']}")
    seeds = record.get("seeds")
    if seeds:
        parts.append(f"seeds {', '.join(str(x) for x in seeds)}")
    if record.get("versions"):
        parts.append("versions " + ", ".join(f"{k} {v}" for k, v in record["versions"].items()))
    return "; ".join(parts) + "."


def _figure(value: Any) -> str:
    if value is None:
        return "-"
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
    ("tune",),
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


# ---------------------------------------------------------------------- architecture

SRC = Path(__file__).resolve().parents[1] / "src"
LAYERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("faces", "what users call: Python's rlx.train and rlx.llm.sft, the rlx command",
     ("rlx", "rlx.api", "rlx.align", "rlx.cli", "rlx.recommend")),
    ("launch", "carrying a request out, for both faces; Ray around the methods, from above",
     ("rlx.launch", "rlx.distributed")),
    ("methods", "the algorithms, one file each, and the families they share a loop with",
     ("rlx.agents", "rlx.llm", "rlx.games", "rlx.tabular", "rlx.planning", "rlx.mdp")),
    ("bottom", "what every method stands on, knowing none of them",
     ("rlx.core", "rlx.diagnostics", "rlx.runs", "rlx.sandbox", "rlx.registry", "rlx.metrics",
      "rlx.errors", "rlx.callbacks", "rlx.flags", "rlx.version", "rlx.callable_module",
      "rlx._kernel_cache")),
)  # fmt: skip
"""The layers, top first: a module imports only its own layer and those below it."""


def _module_files() -> dict[str, Path]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _home(module: str) -> tuple[int, str]:
    """The layer (index, name) and the package a module belongs to."""
    best = (-1, "", "")
    for index, (_, _, packages) in enumerate(LAYERS):
        for package in packages:
            if (module == package or module.startswith(package + ".")) and len(package) > len(
                best[2]
            ):
                best = (index, package, package)
    return best[0], best[1]


def _imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The rlx modules ``module`` imports, at the top or lazily."""
    import ast

    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        found |= {t for t in targets if t.startswith("rlx") and t in modules and t != module}
    return found


def architecture() -> str:
    """The house: the layers, each package's modules with their first docstring line and
    size, and the imports between packages, read from the source on every build."""
    modules = _module_files()
    arrows: dict[tuple[str, str], int] = {}
    upward = []
    for module, path in modules.items():
        layer, package = _home(module)
        for target in _imported(module, path, modules):
            target_layer, target_package = _home(target)
            if target_package != package:
                arrows[(package, target_package)] = arrows.get((package, target_package), 0) + 1
            if target_layer < layer:
                upward.append(f"`{module}` -> `{target}`")
    lines = [
        "# Architecture",
        "",
        "_Generated from the source on every docs build: the layers (top first), the modules "
        "of each package, and the imports between packages. A module imports only its own "
        "layer and those below; `tests/test_structure.py` holds the rules, lazy imports "
        "and module names in strings included._",
        "",
    ]
    for name, what, packages in LAYERS:
        lines += [f"## {name}: {what}", ""]
        for package in packages:
            rows = [
                [f"`{m}`", len(p.read_text().splitlines()), _first_line(m)]
                for m, p in modules.items()
                if _home(m)[1] == package
            ]
            uses = sorted(t for (s, t), _ in arrows.items() if s == package)
            lines += [f"### `{package}`", "", "imports: " + (", ".join(f"`{u}`" for u in uses)
                                                           or "nothing of rlx"), ""]  # fmt: skip
            lines += [*_table(["module", "lines", "what it is"], rows), ""]
    lines += ["## Imports that run up", ""]
    lines += [f"- {u}" for u in sorted(upward)] or ["None."]
    return "\n".join([*lines, ""])


def pages() -> dict[str, Callable[[], str] | str]:
    """Docs path -> content (or a function that makes it)."""
    generated: dict[str, Callable[[], str] | str] = {
        "reference/choose-a-method.md": choose_a_method,
        "reference/defaults.md": defaults,
        "reference/troubleshooting.md": troubleshooting,
        "reference/cli.md": cli_reference,
        "reference/field-names.md": field_names,
        "reference/architecture.md": architecture,
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
    DOCTOR_PAGE.write_text(with_corpus_figures(DOCTOR_PAGE.read_text()))
    print(f"wrote the corpus's figures into {DOCTOR_PAGE}")
    # rlx recommend's measured figures travel inside the package (an installed rlx has no
    # benchmarks folder): the same result files, as one small table
    from rlx import recommend

    measured = Path(recommend.__file__).with_name(recommend.MEASURED_FILE)
    table = recommend.measured_speed(RESULTS)
    measured.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {measured}")
