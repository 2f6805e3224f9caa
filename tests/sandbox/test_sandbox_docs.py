"""Every claim of the sandbox's docs page names a test that exists (and so runs in make test)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "code-reward.md"


def test_every_test_the_sandbox_page_names_exists():
    text = PAGE.read_text()
    named = re.findall(r"`(test_sandbox\w*\.py)::([\w*]+)`", text)
    named += [
        (file, name)
        for file, rest in re.findall(r"`(test_sandbox\w*\.py)::\w+`((?:, `\w+`)+)", text)
        for name in re.findall(r"`(\w+)`", rest)
    ]
    assert len(named) >= 15
    for file, name in named:
        tree = ast.parse((ROOT / "tests" / "sandbox" / file).read_text())
        tests = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        pattern = re.compile(name.replace("*", r"\w*") + "$")
        assert any(pattern.match(test) for test in tests), f"{file}::{name} is not a test"


def test_the_sandbox_pages_examples_print_what_their_comments_say(tmp_path):
    """Each `print(...)  # value` of the page's Python examples prints that value (the GRPO
    example, which needs a model, runs in tests/docs)."""
    import contextlib
    import io

    from tests.docs.docs_examples import blocks

    namespace: dict = {"__name__": "__docs__"}
    expected, out = [], io.StringIO()
    for block in blocks(PAGE):
        if block.lang != "python" or "make_tiny_lm" in block.code:
            continue
        expected += re.findall(r"^print\(.*\)  # (.+)$", block.code, flags=re.MULTILINE)
        with contextlib.redirect_stdout(out):
            exec(compile(block.code, f"{PAGE}:{block.line}", "exec"), namespace)
    assert len(expected) >= 6
    assert out.getvalue().splitlines() == expected
