"""Shared helpers of the policy-gradient agent tests: runs, interruptions, comparisons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import rlx
from rlx.runs import Run


def train(algo: str, env: Any, run_dir: Path, **overrides: Any) -> Any:
    overrides.setdefault("eval_episodes", 0)
    return rlx.train(algo, env, run_dir=run_dir, progress=False, **overrides)


def interrupt_at(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Make the next run stop (as on Ctrl-C) right after it logs at ``step`` or later."""
    log = Run.log

    def log_then_stop(self: Run, at: int, metrics: Any) -> Any:
        values = log(self, at, metrics)
        if at >= step:
            self.stop_requested = True
        return values

    monkeypatch.setattr(Run, "log", log_then_stop)


def metric_rows(run_dir: Path) -> list[dict[str, float]]:
    """metrics.jsonl without the wall-clock column."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "wall_s"} for row in rows]


def summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


def assert_same_parameters(a: Any, b: Any) -> None:
    sa, sb = a.policy.state_dict(), b.policy.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        torch.testing.assert_close(sa[key], sb[key], rtol=0, atol=0, msg=key)


def resume_matches_uninterrupted(
    algo: str, env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_at: int, **cfg: Any
) -> None:
    """A run stopped at ``stop_at`` and resumed ends with exactly the uninterrupted parameters."""
    whole = train(algo, env, tmp_path / "whole", **cfg)
    with monkeypatch.context() as patch:
        interrupt_at(patch, stop_at)
        train(algo, env, tmp_path / "cut", **cfg)
    assert summary(tmp_path / "cut")["status"] == "interrupted"
    assert summary(tmp_path / "cut")["steps"] < summary(tmp_path / "whole")["steps"]
    resumed = rlx.train(algo, env, run_dir=tmp_path / "cut", resume=True, progress=False)
    assert summary(tmp_path / "cut")["steps"] == summary(tmp_path / "whole")["steps"]
    assert_same_parameters(whole, resumed)
    assert_same_parameters(whole, rlx.load(tmp_path / "cut"))
    assert metric_rows(tmp_path / "whole") == metric_rows(tmp_path / "cut")


def last_returns(run_dir: Path, n: int) -> np.ndarray:
    lines = (run_dir / "episodes.csv").read_text().splitlines()[1:]
    return np.array([float(line.split(",")[2]) for line in lines[-n:]])
