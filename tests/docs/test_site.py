"""The docs site builds with ``mkdocs build --strict``, and its generated pages follow the code."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

from tests.conftest import ROOT
from tests.docs.docs_examples import DOCS

sys.path.insert(0, str(DOCS))
import gen_pages


def test_site_builds_strict_and_holds_the_generated_pages(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                        **__import__("os").environ},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    defaults = (site / "reference" / "defaults" / "index.html").read_text()
    assert "clip_eps" in defaults and "group_size" in defaults
    assert "Mean KL past 0.1" in (site / "reference/troubleshooting/index.html").read_text()
    assert "rlx train ppo --help" in (site / "reference/cli/index.html").read_text()
    api = (site / "reference/api/rlx.core.advantages/index.html").read_text()
    assert "gae" in api


def test_defaults_page_shows_every_field_default_and_help(monkeypatch):
    from rlx import registry
    from rlx.agents.ppo import PPOConfig

    page = gen_pages.defaults()
    for name in registry.names():
        assert f"## `{name}`" in page
    assert "| `clip_eps` | `0.2` | epsilon of the clipped ratio" in page
    # A default changed in the dataclass shows up in the next build.
    fields = {f.name: f for f in dataclasses.fields(PPOConfig)}
    monkeypatch.setattr(fields["clip_eps"], "default", 0.15)
    assert "| `clip_eps` | `0.15` |" in gen_pages.defaults()


@dataclasses.dataclass(frozen=True)
class _Documented:
    """A config documented both ways.

    Attributes:
        width: how wide, from the class docstring's Attributes section.
    """

    width: int = 3
    depth: int = 2
    """how deep, from the attribute docstring"""


def test_field_docs_read_attribute_sections_too():
    """The defaults page and the CLI read a field's text from its attribute docstring or from
    the class docstring's ``Attributes:`` section (rlx.flags.field_docs, for both)."""
    from rlx.flags import field_docs

    assert field_docs(_Documented) == {
        "width": "how wide, from the class docstring's Attributes section.",
        "depth": "how deep, from the attribute docstring",
    }
    page = gen_pages.defaults()
    assert "| `c_puct` | `1.5` | exploration weight of the prior in PUCT |" in page


def test_standard_numbers_are_the_code_defaults():
    from rlx import registry

    for _, value, _, fields in gen_pages.STANDARD_DEFAULTS:
        low, _, high = value.partition("-")
        for algo, name in fields:
            default = {f.name: f.default for f in dataclasses.fields(registry.get(algo).config)}
            assert float(low) <= default[name] <= float(high or low), (algo, name, default[name])


def test_troubleshooting_page_has_every_rule_and_every_table_row():
    from rlx.diagnostics.rules import RULES

    page = gen_pages.troubleshooting()
    for rule in RULES:
        assert f"`{rule.id}`" in page and rule.symptom in page
    for symptom in ("Mean KL past 0.1", "Clip fraction near 0", "Clip fraction 0.5 or more",
                    "Responses get longer", "Q values too high", "DQN diverges",
                    "Policy stops exploring"):  # fmt: skip
        assert symptom in page


def test_choose_a_method_page_has_every_row():
    from rlx.recommend import ROWS

    page = gen_pages.choose_a_method()
    for row in ROWS:
        assert f"| {row.situation} | {row.table_method} | `{row.method}` |" in page


def test_cli_reference_is_the_help_text():
    page = gen_pages.cli_reference()
    assert textwrap.indent(gen_pages.help_text(("train", "dqn")), "    ") in page
    assert "usage: rlx doctor" in page and "--iterations INT" in page


def test_every_public_module_has_an_api_page():
    modules = gen_pages.api_modules()
    assert {"rlx", "rlx.planning.value_iteration", "rlx.agents.ppo", "rlx.llm.losses"} <= set(
        modules
    )
    assert "rlx.cli" not in modules


def test_the_benchmark_page_is_what_the_result_files_give():
    """docs/benchmarks.md is committed; regenerate it (python docs/gen_pages.py benchmarks)
    whenever a benchmark writes a result file, or this fails."""
    assert gen_pages.BENCHMARKS_PAGE.read_text() == gen_pages.benchmarks_page()


def test_the_doctor_page_states_the_corpus_figures_the_result_file_gives():
    """The doctor's page states the held-out figures, the commit and the date, written from
    benchmarks/results/doctor_corpus.json (python docs/gen_pages.py benchmarks), never typed."""
    page = gen_pages.DOCTOR_PAGE.read_text()
    assert page == gen_pages.with_corpus_figures(page)
    figures = gen_pages.doctor_corpus_figures()
    assert figures in page and "held-out half" in figures


def test_the_benchmark_page_shows_a_result_file_whole(tmp_path):
    record = {
        "name": "bench_x", "title": "X per second", "command": "python benchmarks/bench_x.py",
        "date": "2026-12-02T10:00:00+00:00", "machine": {"cpu": "Some CPU", "cores": 2},
        "torch_threads": 1, "seeds": [0, 1], "columns": ["library", "steps/s"],
        "rows": [["rlx", 1234.5], ["other", 617.25]], "figures": {"ratio": 2.0},
        "notes": "What was measured.",
    }  # fmt: skip
    (tmp_path / "bench_x.json").write_text(__import__("json").dumps(record))
    page = gen_pages.benchmarks_page(tmp_path)
    for text in ("## X per second", "What was measured.", "| rlx | 1,234 |", "ratio 2",
                 "python benchmarks/bench_x.py", "2026-12-02", "Some CPU (2 cores)",
                 "seeds 0, 1", "torch threads 1"):  # fmt: skip
        assert text in page, text


def test_every_rlx_name_on_the_coming_from_page_is_a_field_of_its_algorithm():
    """docs/coming-from.md maps SB3 and TRL names to rlx fields; each rlx name must exist in
    the config of every algorithm its section names."""
    import re

    from rlx import registry
    from rlx.cli import ALIGN_STAGES

    text = (DOCS / "coming-from.md").read_text()
    checked = 0
    for section in re.split(r"^### ", text, flags=re.M)[1:]:
        heading, _, body = section.partition("\n")
        names = re.findall(r"`rlx (?:train|align) ([\w-]+)`", heading)
        names += re.findall(r"`(rm|dpo|grpo|rlhf)`", heading)
        algorithms = [registry.get(ALIGN_STAGES.get(n, n)) for n in names]
        assert algorithms, heading
        for row in re.findall(r"^\|(.+)\|$", body, flags=re.M)[2:]:
            rlx_cell = row.split("|")[-1]
            for field_name in re.findall(r"`(\w+)`", rlx_cell):
                for algorithm in algorithms:
                    fields = {f.name for f in dataclasses.fields(algorithm.config)}
                    assert field_name in fields, f"{algorithm.name} has no field {field_name}"
                    checked += 1
    assert checked > 80
