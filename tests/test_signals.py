"""Ctrl-C and SIGTERM during training: a complete run folder, then an exact resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import rlx
from tests.conftest import ROOT


def start(args: list[str], prelude: str = "") -> subprocess.Popen:
    code = f"{prelude}import sys; from rlx.cli import main; sys.exit(main({args!r}))"
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_metrics(run_dir: Path, lines: int, proc: subprocess.Popen, timeout: float = 120):
    deadline = time.monotonic() + timeout
    metrics = run_dir / "metrics.jsonl"
    while time.monotonic() < deadline:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= lines:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("training logged nothing in time")


def assert_complete_run_folder(run_dir: Path, status: str) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == status
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        json.loads(line)  # every line is whole
    assert (run_dir / "checkpoints" / "latest").exists()
    assert json.loads((run_dir / "config.json").read_text())["algo"]
    return summary


def test_sigint_saves_a_checkpoint_and_the_resumed_run_equals_an_uninterrupted_one(tmp_path):
    run_dir = tmp_path / "interrupted"
    proc = start(
        [
            "train",
            "q-learning",
            "--env",
            "FrozenLake8x8-v1",
            "--episodes",
            "20000000",
            "--run-dir",
            str(run_dir),
            "--seed",
            "7",
            "--no-progress",
        ]
    )
    wait_for_metrics(run_dir, 2, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "SIGINT received" in err
    summary = assert_complete_run_folder(run_dir, "interrupted")
    done = summary["episodes"]
    assert 0 < done < 20_000_000

    target = done + 3000
    resumed = rlx.train(
        "q-learning", "FrozenLake8x8-v1", run_dir=run_dir, resume=True, episodes=target
    )
    whole = rlx.train(
        "q-learning", "FrozenLake8x8-v1", run_dir=tmp_path / "whole", episodes=target, seed=7
    )
    np.testing.assert_array_equal(resumed.Q, whole.Q)
    np.testing.assert_array_equal(rlx.load(run_dir).Q, whole.Q)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"


def test_sigterm_leaves_a_complete_run_folder(tmp_path):
    run_dir = tmp_path / "r"
    proc = start(
        [
            "train",
            "toy-counter",
            "--env",
            "Toy-v0",
            "--total-steps",
            "100000",
            "--sleep-s",
            "0.01",
            "--run-dir",
            str(run_dir),
        ],
        prelude="import tests.runs.toy_algorithm; ",
    )
    wait_for_metrics(run_dir, 3, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err
    summary = assert_complete_run_folder(run_dir, "interrupted")
    step, _ = rlx.runs.load_checkpoint(run_dir)
    assert step == summary["steps"] >= 3
