"""The examples of the docs' Ray page run (with the session's Ray, in the private network)."""

from __future__ import annotations

import pytest

from tests.docs.docs_examples import DOCS, pages, run_page

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("page", pages(ray=True), ids=lambda p: str(p.relative_to(DOCS)))
def test_ray_page_examples_run(page, tmp_path):
    run_page(page, tmp_path)


def test_the_ray_how_to_runs_here():
    assert DOCS / "how-to" / "ray.md" in pages(ray=True)
