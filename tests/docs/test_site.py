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


def test_defaults_page_reads_attribute_sections_too():
    page = gen_pages.defaults()
    assert "| `c_puct` | `1.5` | exploration weight of the network prior in PUCT. |" in page


def test_cheat_sheet_numbers_are_the_code_defaults():
    from rlx import registry

    for _, value, _, fields in gen_pages.CHEAT_SHEET_DEFAULTS:
        low, _, high = value.partition("-")
        for algo, name in fields:
            default = {f.name: f.default for f in dataclasses.fields(registry.get(algo).config)}
            assert float(low) <= default[name] <= float(high or low), (algo, name, default[name])


def test_troubleshooting_page_has_every_rule_and_every_cheat_sheet_row():
    from rlx.diagnostics.rules import RULES

    page = gen_pages.troubleshooting()
    for rule in RULES:
        assert f"`{rule.id}`" in page and rule.symptom in page
    for symptom in ("Mean KL past 0.1", "Clip fraction near 0", "Clip fraction 0.5 or more",
                    "Responses get longer", "Q values too high", "DQN diverges",
                    "Policy stops exploring"):  # fmt: skip
        assert symptom in page


def test_choose_a_method_page_has_every_row():
    from rlx.diagnostics.recommend import ROWS

    page = gen_pages.choose_a_method()
    for row in ROWS:
        assert f"| {row.situation} | {row.cheat_sheet} | `{row.method}` |" in page


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
