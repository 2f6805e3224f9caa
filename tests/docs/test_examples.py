"""Every code example in the docs runs (the rules are in ``docs_examples.py``)."""

from __future__ import annotations

import pytest

from tests.docs.docs_examples import DOCS, REAL_MODEL, blocks, needs_real_model, pages, run_page


def _param(page):
    """A page; one that trains the real model runs with the slow tests only."""
    marks = [pytest.mark.slow] if needs_real_model(page) else []
    return pytest.param(page, marks=marks, id=str(page.relative_to(DOCS)))


@pytest.mark.parametrize("page", [_param(page) for page in pages(ray=False)])
def test_page_examples_run(page, tmp_path):
    if needs_real_model(page):
        if not (REAL_MODEL / "config.json").is_file():
            pytest.skip(f"{page.name} trains the real model: no model in {REAL_MODEL} "
                        "(`make real-model` makes it)")  # fmt: skip
        (tmp_path / "models").mkdir()
        (tmp_path / "models" / REAL_MODEL.name).symlink_to(REAL_MODEL)
    run_page(page, tmp_path)


def test_real_model_pages_run_only_with_the_slow_tests():
    page = DOCS / "how-to" / "laptop-grpo.md"
    assert needs_real_model(page)
    (param,) = [p for p in map(_param, pages(ray=False)) if p.values[0] == page]
    assert [mark.name for mark in param.marks] == ["slow"]


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
