from __future__ import annotations

import numpy as np
import pytest
import torch

from rlx.errors import CheckpointError
from rlx.runs.checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint


def test_round_trip_keeps_numpy_tensors_and_numbers(tmp_path):
    state = {
        "Q": np.arange(6.0).reshape(2, 3),
        "rng": np.array([1, 2**63 + 5], dtype=np.uint64),
        "episodes": 7,
        "nested": {"w": torch.ones(2), "names": ["a", "b"]},
    }
    save_checkpoint(tmp_path, 10, state)
    step, back = load_checkpoint(tmp_path)
    assert step == 10
    np.testing.assert_array_equal(back["Q"], state["Q"])
    assert back["rng"].dtype == np.uint64 and back["rng"][1] == 2**63 + 5
    assert back["episodes"] == 7
    assert torch.equal(back["nested"]["w"], torch.ones(2))
    assert back["nested"]["names"] == ["a", "b"]


def test_latest_points_at_newest_and_old_ones_are_pruned(tmp_path):
    for step in (1, 2, 3, 4, 5):
        save_checkpoint(tmp_path, step, {"s": step}, keep=2)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["latest", "step_000000000004.pt", "step_000000000005.pt"]
    assert latest_checkpoint(tmp_path).name == "step_000000000005.pt"
    assert load_checkpoint(tmp_path)[1] == {"s": 5}


def test_no_temporary_files_are_left_behind(tmp_path):
    save_checkpoint(tmp_path, 1, {"a": np.zeros(1000)})
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".tmp")]


def test_corrupt_checkpoint_gives_checkpoint_error(tmp_path):
    path = save_checkpoint(tmp_path, 3, {"a": 1})
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(tmp_path)


def test_missing_checkpoint_gives_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="has no checkpoint"):
        load_checkpoint(tmp_path)


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path):
    save_checkpoint(tmp_path, 1, {"v": 1})

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        save_checkpoint(tmp_path, 2, {"v": Unpicklable()})
    assert load_checkpoint(tmp_path) == (1, {"v": 1})
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".tmp")]
