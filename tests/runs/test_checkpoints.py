from __future__ import annotations

import numpy as np
import pytest
import torch

from rlx.errors import CheckpointError
from rlx.runs.checkpoints import (
    best_checkpoint,
    checkpoint_file,
    latest_checkpoint,
    load_checkpoint,
    save_best_checkpoint,
    save_checkpoint,
)


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


def test_the_best_checkpoint_sits_beside_latest_and_is_never_pruned(tmp_path):
    assert best_checkpoint(tmp_path) is None
    save_checkpoint(tmp_path, 1, {"s": 1}, keep=1)
    save_best_checkpoint(tmp_path, 1, {"s": 1, "evaluation": {"eval_return_mean": 9.0}})
    for step in (2, 3):
        save_checkpoint(tmp_path, step, {"s": step}, keep=1)
    save_best_checkpoint(tmp_path, 3, {"s": 3})  # atomically over the previous best
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["best.pt", "latest", "step_000000000003.pt"]
    assert load_checkpoint(best_checkpoint(tmp_path)) == (3, {"s": 3})
    assert latest_checkpoint(tmp_path).name == "step_000000000003.pt"  # best is no step file


def test_checkpoint_file_reads_latest_best_a_name_or_a_path(tmp_path):
    save_checkpoint(tmp_path, 4, {"s": 4})
    assert load_checkpoint(checkpoint_file(tmp_path))[0] == 4
    assert load_checkpoint(checkpoint_file(tmp_path, "latest"))[0] == 4
    assert checkpoint_file(tmp_path, "step_000000000004.pt").parent == tmp_path / "checkpoints"
    with pytest.raises(CheckpointError, match=r"no best checkpoint.*eval_every"):
        checkpoint_file(tmp_path, "best")
    save_best_checkpoint(tmp_path, 2, {"s": 2})
    assert load_checkpoint(checkpoint_file(tmp_path, "best")) == (2, {"s": 2})
    elsewhere = save_checkpoint(tmp_path / "other", 7, {"s": 7})
    assert checkpoint_file(tmp_path, elsewhere) == elsewhere
