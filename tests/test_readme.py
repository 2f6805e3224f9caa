"""The README's Python quickstart runs as written."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_readme_quickstart_runs(tmp_path, monkeypatch, capsys):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert blocks, "the README has no Python quickstart"
    monkeypatch.chdir(tmp_path)  # the quickstart writes runs/ql
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert (tmp_path / "runs" / "ql" / "summary.json").is_file()
    assert "q-learning vs dynamic programming" in capsys.readouterr().out
