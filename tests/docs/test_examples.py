"""Every code example in the docs runs (the rules are in ``docs_examples.py``)."""

from __future__ import annotations

import pytest

from tests.docs.docs_examples import DOCS, blocks, pages, run_page


@pytest.mark.parametrize("page", pages(ray=False), ids=lambda p: str(p.relative_to(DOCS)))
def test_page_examples_run(page, tmp_path):
    run_page(page, tmp_path)


def test_every_how_to_page_has_a_runnable_example():
    for page in sorted((DOCS / "how-to").glob("*.md")):
        assert blocks(page), f"{page.name} has no runnable example"


def test_collector_runs_python_and_rlx_lines_and_refuses_other_commands(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 2\n```\n\ntext\n\n```python\nprint(x * 21)\n```\n\n"
        "```bash\npip install rlx  # shown only\nrlx list\n```\n\n```text\nnot run\n```\n"
    )
    assert run_page(page, tmp_path).startswith("42\n")
    page.write_text("```bash\nrm -rf /tmp/x\n```\n")
    with pytest.raises(AssertionError, match="only rlx commands run"):
        run_page(page, tmp_path)
