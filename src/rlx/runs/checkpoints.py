"""Step-numbered checkpoints, written atomically.

``RUN_DIR/checkpoints/step_000001234.pt`` holds one training state; ``checkpoints/latest`` is a
symbolic link to the newest. ``checkpoints/best.pt``, where a run evaluates during training
(``eval_every``), holds the state whose evaluation was the best so far; it is never pruned.
A checkpoint is first written to a temporary file in the same folder, flushed to disk, then
renamed over its final name: a crash, Ctrl-C or a full disk at any moment leaves either the
old checkpoint or the new one, never half of one.

:func:`checkpoint_file` turns what ``rlx.load(run_dir, checkpoint=...)`` takes (None,
``"latest"``, ``"best"`` or a file) into the file to read.

States are dicts of tensors, numpy arrays, numbers, strings and nested dicts/lists of those.
A state with tensors is written by ``torch.save``; numpy arrays in it are stored as tensors and
come back as numpy arrays, and files load with ``torch.load(weights_only=True)``. A state
without tensors (tabular learners) is written without torch, as a NumPy ``.npz`` archive whose
structure is JSON, loaded with ``allow_pickle=False``, so such a run never imports torch.
Either way, opening a checkpoint never runs code from it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from rlx.errors import CheckpointError
from rlx.runs.folder import CHECKPOINT_DIR

LATEST = "latest"
BEST = "best"
BEST_FILE = "best.pt"
_NAME = re.compile(r"^step_(\d+)\.pt$")
_NUMPY_TAG = "__numpy__"
_STRUCTURE = "structure.json"  # the member that marks a torch-free checkpoint
_ARRAY_TAG = "__array__"


def checkpoint_path(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / f"step_{step:012d}.pt"


def save_checkpoint(run_dir: str | Path, step: int, state: dict[str, Any], keep: int = 3) -> Path:
    """Write ``state`` as the checkpoint of ``step`` atomically and point ``latest`` at it.

    Only the newest ``keep`` checkpoints stay (``keep <= 0`` keeps all).
    """
    final = checkpoint_path(run_dir, step)
    _write_atomic(final, step, state)
    _point_latest(final)
    _prune(final.parent, keep)
    return final


def save_best_checkpoint(run_dir: str | Path, step: int, state: dict[str, Any]) -> Path:
    """Write ``state`` atomically as ``checkpoints/best.pt``, over the previous best."""
    final = Path(run_dir) / CHECKPOINT_DIR / BEST_FILE
    _write_atomic(final, step, state)
    return final


def best_checkpoint(run_dir: str | Path) -> Path | None:
    """The best evaluated checkpoint of a run, or None when it has none."""
    path = Path(run_dir) / CHECKPOINT_DIR / BEST_FILE
    return path if path.is_file() else None


def checkpoint_file(run_dir: str | Path, checkpoint: str | Path | None = None) -> Path:
    """The checkpoint ``checkpoint`` names in a run folder: None or ``"latest"`` the newest,
    ``"best"`` the best evaluated one (``checkpoints/best.pt``), anything else a file (a name
    in the run's ``checkpoints/`` when no such file is here) or a run folder (its newest)."""
    if checkpoint is None or str(checkpoint) == LATEST:
        return Path(run_dir)  # load_checkpoint reads a folder's newest
    if str(checkpoint) == BEST:
        found = best_checkpoint(run_dir)
        if found is None:
            raise CheckpointError(
                f"{run_dir} has no best checkpoint ({Path(run_dir) / CHECKPOINT_DIR / BEST_FILE}):"
                " it is written by runs that evaluate during training; train with eval_every "
                "(--eval-every N), or load the latest checkpoint."
            )
        return found
    path = Path(checkpoint)
    inside = Path(run_dir) / CHECKPOINT_DIR / path
    return inside if not path.exists() and inside.is_file() else path


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest checkpoint of a run, or None when it has none."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    link = folder / LATEST
    if link.is_symlink() and link.exists():
        return link.resolve()
    steps = _list_checkpoints(folder)
    return steps[-1][1] if steps else None


def load_checkpoint(path: str | Path) -> tuple[int, dict[str, Any]]:
    """Read a checkpoint file, or the latest checkpoint of a run folder: ``(step, state)``."""
    path = Path(path)
    if path.is_dir():
        found = latest_checkpoint(path)
        if found is None:
            raise CheckpointError(
                f"{path} has no checkpoint (looked in {path / CHECKPOINT_DIR}); "
                "train with --run-dir first, or give a checkpoint file."
            )
        path = found
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist.")
    try:
        step, state = _read(path)
    except Exception as exc:  # any unreadable file is a corrupt checkpoint to the user
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not an rlx checkpoint ({type(exc).__name__}); "
            "delete it to fall back to an older one, or train again."
        ) from exc
    return step, state


def _write_atomic(final: Path, step: int, state: dict[str, Any]) -> None:
    """Write to a temporary file beside ``final``, flush it to disk, rename it over ``final``."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".pt", dir=final.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            _write(f, int(step), state)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write(handle: Any, step: int, state: dict[str, Any]) -> None:
    arrays: dict[str, np.ndarray] = {}
    structure = _without_arrays(state, arrays)
    if structure is None:  # tensors, or leaves JSON cannot hold: torch's format
        import torch

        torch.save({"step": step, "state": _to_storable(state)}, handle)
        return
    np.savez(handle, **arrays, **{_STRUCTURE: _json_bytes({"step": step, "state": structure})})


def _read(path: Path) -> tuple[int, dict[str, Any]]:
    with zipfile.ZipFile(path) as archive:
        torch_free = f"{_STRUCTURE}.npy" in archive.namelist()
    if torch_free:
        with np.load(path, allow_pickle=False) as archive:
            record = json.loads(archive[_STRUCTURE].tobytes())
            return int(record["step"]), _with_arrays(record["state"], archive)
    import torch

    payload = torch.load(path, map_location="cpu", weights_only=True)
    return int(payload["step"]), _from_storable(payload["state"])


def _without_arrays(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """``value`` with each numpy array replaced by a reference into ``arrays``; None when it
    holds a tensor or a leaf JSON cannot keep exactly."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return None
        key = f"a{len(arrays)}"
        arrays[key] = value
        return {_ARRAY_TAG: key}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return None
        out = {k: _without_arrays(v, arrays) for k, v in value.items()}
        return None if any(v is None and value[k] is not None for k, v in out.items()) else out
    if isinstance(value, (list, tuple)):
        items = [_without_arrays(v, arrays) for v in value]
        bad = any(new is None and old is not None for new, old in zip(items, value, strict=True))
        return None if bad else items
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return None  # a tensor, or anything else: torch's format keeps it


def _with_arrays(value: Any, archive: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {_ARRAY_TAG}:
            return archive[value[_ARRAY_TAG]]
        return {k: _with_arrays(v, archive) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_arrays(v, archive) for v in value]
    return value


def _json_bytes(record: dict[str, Any]) -> np.ndarray:
    return np.frombuffer(json.dumps(record).encode("utf-8"), dtype=np.uint8)


def _point_latest(target: Path) -> None:
    link = target.parent / LATEST
    tmp = target.parent / f".tmp-latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    os.symlink(target.name, tmp)
    os.replace(tmp, link)


def _list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return sorted(found)


def _prune(folder: Path, keep: int) -> None:
    if keep <= 0:
        return
    for _, path in _list_checkpoints(folder)[:-keep]:
        path.unlink(missing_ok=True)


def _to_storable(value: Any) -> Any:
    torch = sys.modules["torch"]  # loaded: only states with tensors come here
    if isinstance(value, np.ndarray):
        return {_NUMPY_TAG: torch.from_numpy(np.ascontiguousarray(value).copy())}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _to_storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_storable(v) for v in value]
    return value


def _from_storable(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {_NUMPY_TAG}:
            return value[_NUMPY_TAG].numpy()
        return {k: _from_storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_storable(v) for v in value]
    return value
