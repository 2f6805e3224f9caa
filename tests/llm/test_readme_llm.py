"""The README's language-model example runs as written (with each stage cut to a few steps)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("transformers")

from rlx.llm import training
from tests.conftest import ROOT


def test_readme_llm_example_runs(tmp_path, monkeypatch, capsys):
    text = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
              if "from rlx import llm" in b]  # fmt: skip
    assert blocks, "the README has no language-model example"
    monkeypatch.chdir(tmp_path)
    resolve = training.resolve_steps
    monkeypatch.setattr(training, "resolve_steps", lambda c, n: min(resolve(c, n), 4))
    exec(compile(blocks[0], "README.md", "exec"), {})
    for stage in ("sft", "rm", "dpo"):
        assert (tmp_path / "runs" / stage / "model" / "config.json").is_file()
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 2
