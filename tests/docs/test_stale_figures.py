"""No figure without a measurement: the README and the docs' prose quote no speed figure of
their own and cite no figure "the README reports". Speed figures live on the benchmarks page,
which ``docs/gen_pages.py`` generates from the result files the benchmarks write; prose links
to it instead.

The check is a heuristic over prose (fenced code blocks, whose output the examples' tests
check, are left out): a number followed by ``x faster`` / ``x slower`` / ``times faster``, a
number with ``×``, or a number followed by a rate (``steps/s``, ``sims/s``, ``examples/s``,
...)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOCS = ROOT / "docs"
GENERATED = {DOCS / "benchmarks.md"}
PAGES = sorted({*DOCS.rglob("*.md"), ROOT / "README.md"} - GENERATED)

CITES_README = re.compile(
    r"README (reports|measures|has a table)|rlx's README|README's benchmark|\(README\)", re.I
)
NUMBER = r"\d[\d,]*(?:\.\d+)?"
SPEED = re.compile(
    rf"{NUMBER}\s*(?:-\s*{NUMBER}\s*)?"
    r"(?:x|×|times)\s+(?:faster|slower|the speed|as fast|quicker)"
    rf"|{NUMBER}\s*×"
    rf"|{NUMBER}\s*(?:env\s+)?(?:steps|sims|simulations|examples|prompts|pairs|rows|updates|"
    r"moves|tokens)\s*(?:/\s*s\b|per\s+second)",
    re.I,
)


def prose(text: str) -> list[tuple[int, str]]:
    """The lines of ``text`` outside fenced code blocks, with their line numbers."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def offending(path: Path, root: Path = ROOT) -> list[str]:
    """``path:line: what: the text`` for every stale citation or speed figure in its prose."""
    found = []
    lines = prose(path.read_text())
    # a figure may wrap onto the next line: check each line with the start of the next
    for (number, line), (_, following) in zip(lines, [*lines[1:], (0, "")], strict=True):
        joined = f"{line} {following[:40]}"
        for pattern, what in ((CITES_README, "cites the README"), (SPEED, "a speed figure")):
            match = pattern.search(joined)
            if match and match.start() < len(line):
                found.append(f"{path.relative_to(root)}:{number}: {what}: {match.group(0)!r}")
    return found


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_quotes_a_speed_figure_or_the_readme(path):
    assert offending(path) == []


def test_the_check_catches_what_it_is_for(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "rlx runs 4.3x faster than SB3.\n"
        "It reaches 14,665 env steps/s\n"
        "and 2.5 ×\n"
        "the README reports 0.383 for it.\n"
        "```text\n1,234 steps/s in a code block is an example's own output\n```\n"
        "The [benchmarks page](benchmarks.md) gives the figures.\n"
    )
    found = [line.split(": ", 1)[1] for line in offending(page, tmp_path)]
    assert found == ["a speed figure: '4.3x faster'", "a speed figure: '14,665 env steps/s'",
                     "a speed figure: '2.5 ×'", "cites the README: 'README reports'"]  # fmt: skip
