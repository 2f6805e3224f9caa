"""Every code example in the docs runs (the rules are in ``docs_examples.py``)."""

from __future__ import annotations

import pytest

from tests.docs.docs_examples import (
    DOCS,
    REAL_MODEL,
    blocks,
    mismatch,
    needs_real_model,
    pages,
    run_page,
)


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


def test_a_page_prints_what_it_shows(tmp_path):
    """A ``text`` block right after a ``python`` block is what that block prints: a stale
    one fails the page, naming the line."""
    page = tmp_path / "page.md"
    page.write_text("```python\nprint('mean', 41 + 1)\n```\n\n```text\nmean 42\n```\n")
    run_page(page, tmp_path)
    page.write_text("```python\nprint('mean', 41 + 1)\n```\n\n```text\nmean 40\n```\n")
    with pytest.raises(AssertionError, match=r"page.md:1 prints otherwise.*'mean 40'"):
        run_page(page, tmp_path)
    # prose between the blocks: the text block is not the code's output, nothing compared
    page.write_text("```python\nprint(1)\n```\n\nsome prose\n\n```text\n2\n```\n")
    run_page(page, tmp_path)


def test_rlx_lines_on_stderr_may_be_shown_beside_stdout(tmp_path):
    code = "import sys\nprint('rlx: a note', file=sys.stderr)\nprint('done')"
    page = tmp_path / "page.md"
    for shown in ("done", "rlx: a note\ndone"):
        page.write_text(f"```python\n{code}\n```\n\n```text\n{shown}\n```\n")
        run_page(page, tmp_path)
    page.write_text(f"```python\n{code}\n```\n\n```text\nrlx: another\ndone\n```\n")
    with pytest.raises(AssertionError, match="prints otherwise"):
        run_page(page, tmp_path)


@pytest.mark.parametrize(
    ("shown", "printed", "rel", "same"),
    [
        ("loss 0.25", "loss 0.25", 0.0, True),
        ("loss 0.25", "loss 0.26", 0.0, True),  # one unit of the last digit shown: rounding
        ("steps 4004", "steps 4005", 0.0, False),  # a count is never rounded
        ("loss 0.25", "loss 0.27", 0.0, False),
        ("loss 0.25", "loss 0.27", 0.1, True),  # the page's stated tolerance
        ("loss 0.25", "loss 0.30", 0.1, False),
        ("loss 0.25", "gain 0.25", 0.5, False),  # words never vary
        ("steps 4004", "steps 4004 of 8000", 0.0, False),
        ("a\n...\nz", "a\nb\nc\nz", 0.0, True),  # a line "..." stands for any lines
        ("a\n...", "a\nb\nc", 0.0, True),
        ("a", "a\nb", 0.0, False),  # more printed than shown
        ("a\nb", "a", 0.0, False),
        ("x: 1, y: ...", "x: 1, y: 2, z: 3", 0.0, True),  # a line ending "..." shows its start
        ("x: 2, y: ...", "x: 1, y: 2, z: 3", 0.0, False),
    ],
)
def test_shown_output_is_compared_line_by_line_numbers_within_the_tolerance(
    shown, printed, rel, same
):
    assert (mismatch(shown, printed, rel) is None) is same
