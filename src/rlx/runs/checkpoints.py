"""Step-numbered checkpoints, written atomically.

``RUN_DIR/checkpoints/step_000001234.pt`` holds one training state; ``checkpoints/latest`` is a
symbolic link to the newest. ``checkpoints/best.pt``, where a run evaluates during training
(``eval_every``), holds the state whose evaluation was the best so far; it is never pruned.
A checkpoint is first written to a temporary file in the same folder, flushed to disk, then
renamed over its final name: a crash, Ctrl-C or a full disk at any moment leaves either the
old checkpoint or the new one, never half of one.

:func:`checkpoint_file` turns what ``rlx.load(run_dir, checkpoint=...)`` takes (None,
``"latest"``, ``"best"`` or a file) into the file to read.

When a run writes one is its :class:`CheckpointCadence`: every ``every_s`` seconds of wall time
(30 by default) and/or every ``every_steps`` steps, the newest ``keep`` kept. A config says so
with the fields of :class:`rlx.core.fields.CheckpointFields` (``checkpoint_every_s``,
``checkpoint_every_steps``, ``checkpoints_kept``), read by :meth:`CheckpointCadence.of`; a
config without them gets the defaults.

States are dicts of tensors, numpy arrays, numbers, strings and nested dicts/lists of those.
A state with tensors is written by ``torch.save``; numpy arrays in it are stored as tensors and
come back as numpy arrays, and files load with ``torch.load(weights_only=True)``. A state
without tensors (tabular learners) is written without torch, as a NumPy ``.npz`` archive whose
structure is JSON, loaded with ``allow_pickle=False``, so such a run never imports torch.
Either way, opening a checkpoint never runs code from it.

A run folder may come from someone else, so ``checkpoints/`` is written, pointed at and
pruned only through a descriptor of the real folder opened without following a link
(:func:`rlx.runs.files.folder_descriptor`): a planted ``checkpoints -> /elsewhere`` is refused
in one sentence, nothing is written or deleted there, and pruning unlinks only regular
``step_<N>.pt`` files of the folder itself. A step checkpoint is a regular file of the folder
(a link by that name is none), and ``latest`` counts only where it names one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx.errors import CheckpointError, RLXError
from rlx.runs.files import atomic_file, folder_descriptor, open_regular
from rlx.runs.folder import CHECKPOINT_DIR

LATEST = "latest"
BEST = "best"
BEST_FILE = "best.pt"
_NAME = re.compile(r"^step_(\d+)\.pt$")
_NUMPY_TAG = "__numpy__"
_STRUCTURE = "structure.json"  # the member that marks a torch-free checkpoint
_ARRAY_TAG = "__array__"
DEFAULT_EVERY_S = 30.0
"""Seconds of wall time between checkpoints when a config sets no cadence."""
DEFAULT_KEPT = 3
"""Step checkpoints kept (the newest) when a config does not say."""


@dataclass(frozen=True)
class CheckpointCadence:
    """When a run writes a checkpoint: once ``every_s`` seconds of wall time or ``every_steps``
    steps (as the run counts them: env steps, episodes' steps, iterations, optimizer steps)
    have passed since the last one, whichever comes first; None turns that clock off. Only
    the newest ``keep`` step checkpoints stay (0: all); ``best.pt`` is never pruned."""

    every_s: float | None = DEFAULT_EVERY_S
    every_steps: int | None = None
    keep: int = DEFAULT_KEPT

    @classmethod
    def of(cls, config: Any, default_s: float = DEFAULT_EVERY_S) -> CheckpointCadence:
        """The cadence a config asks for (``checkpoint_every_s``, ``checkpoint_every_steps``,
        ``checkpoints_kept``): without a cadence of its own, every ``default_s`` seconds."""
        every_s = getattr(config, "checkpoint_every_s", None)
        every_steps = getattr(config, "checkpoint_every_steps", None)
        keep = getattr(config, "checkpoints_kept", DEFAULT_KEPT)
        if every_s is None and every_steps is None:
            every_s = default_s
        return cls(every_s, every_steps, keep)

    def due(self, seconds: float, steps: float) -> bool:
        """Whether a checkpoint is due ``seconds`` and ``steps`` after the last one."""
        by_time = self.every_s is not None and seconds >= self.every_s
        by_steps = self.every_steps is not None and steps >= self.every_steps
        return by_time or by_steps


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
    """The best evaluated checkpoint of a run (a regular file, not a link), or None when it
    has none."""
    path = Path(run_dir) / CHECKPOINT_DIR / BEST_FILE
    return path if path.is_file() and not path.is_symlink() else None


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


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """A run's step checkpoints, ``(step, file)`` from the oldest to the newest."""
    return _list_checkpoints(Path(run_dir) / CHECKPOINT_DIR)


def step_checkpoint(run_dir: str | Path, checkpoint: str | Path | int) -> tuple[int, Path]:
    """``(step, file)`` of one of a run's step checkpoints, named by its step, its file name
    (``step_000000001024.pt``) or its path; CheckpointError naming the steps it has when the
    run has no such checkpoint (``best.pt`` and files of other folders are not among them)."""
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, (str, Path, int)):
        raise CheckpointError(
            f"{checkpoint!r} names no checkpoint: give a step checkpoint's step, file name or path."
        )
    found = list_checkpoints(run_dir)
    for step, path in found:
        if isinstance(checkpoint, int):
            if checkpoint == step:
                return step, path
            continue
        given = Path(checkpoint)
        bare = given.parent == Path(".")
        if given.name == path.name and (bare or given.resolve() == path.resolve()):
            return step, path
    steps = ", ".join(str(step) for step, _ in found) or "none"
    raise CheckpointError(
        f"{run_dir} has no step checkpoint {checkpoint}; its checkpoints are at steps {steps}."
    )


def checkpoints_after(run_dir: str | Path, step: int) -> list[Path]:
    """What a run continued from the checkpoint of ``step`` no longer holds: the step
    checkpoints written after it, and ``best.pt`` when it was written after it too (an
    unreadable ``best.pt`` is left where it is)."""
    later = [path for s, path in list_checkpoints(run_dir) if s > step]
    best = best_checkpoint(run_dir)
    if best is not None:
        try:
            best_step, _ = _read(best, Path(run_dir))
        except Exception:  # unreadable: loading it fails with its own message
            best_step = step
        if best_step > step:
            later.append(best)
    return later


def point_latest(checkpoint: Path) -> None:
    """Point the run's ``checkpoints/latest`` at ``checkpoint`` (a file in that folder)."""
    _point_latest(checkpoint)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest checkpoint of a run, or None when it has none."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    link = folder / LATEST
    steps = _list_checkpoints(folder)
    if link.is_symlink():
        named = os.readlink(link)
        for _, path in steps:  # only a step checkpoint of this folder, never a file elsewhere
            if path.name == named:
                return path
    return steps[-1][1] if steps else None


MAX_CHECKPOINT_BYTES = 64 * 1024**3
"""The largest checkpoint file read."""
UNPACKED_SLACK = 1024 * 1024
"""How much more than the file's own size a checkpoint's members may unpack to: rlx stores
them uncompressed (``np.savez``, ``torch.save``), so more is a zip bomb, not a checkpoint."""


def load_checkpoint(path: str | Path) -> tuple[int, dict[str, Any]]:
    """Read a checkpoint file, or the latest checkpoint of a run folder: ``(step, state)``.
    The file is opened without following a link (nor ``checkpoints/`` as one, from a run
    folder: :func:`rlx.runs.files.open_regular`), and its members must unpack to no more
    than its own size (:data:`UNPACKED_SLACK`) before any is read; a CheckpointError or a
    RunError naming it otherwise."""
    path = Path(path)
    root = None
    if path.is_dir():
        root = path
        found = latest_checkpoint(path)
        if found is None:
            raise CheckpointError(
                f"{path} has no checkpoint (nothing in {path / CHECKPOINT_DIR}): its run has not "
                "saved one, or ended (or was killed) before its first; train it again in the "
                "same folder, or give a checkpoint file."
            )
        path = found
    elif path.name == LATEST and path.parent.name == CHECKPOINT_DIR:
        # the link rlx itself writes: followed only to a step checkpoint of its own folder
        found = latest_checkpoint(path.parent.parent)
        if found is None:
            raise CheckpointError(f"checkpoint {path} names no checkpoint of {path.parent}.")
        path = found
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist.")
    try:
        step, state = _read(path, root)
    except RLXError:
        raise
    except Exception as exc:  # any unreadable file is a corrupt checkpoint to the user
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not an rlx checkpoint ({type(exc).__name__}); "
            "delete it to fall back to an older one, or train again."
        ) from exc
    return step, state


def _write_atomic(final: Path, step: int, state: dict[str, Any]) -> None:
    """Write to a temporary file beside ``final``, flush it to disk, rename it over ``final``
    (never through a link, ``checkpoints/`` included: :func:`rlx.runs.files.atomic_file`)."""
    with atomic_file(final, root=final.parent.parent) as handle:
        _write(handle, int(step), state)


def _write(handle: Any, step: int, state: dict[str, Any]) -> None:
    arrays: dict[str, np.ndarray] = {}
    structure = _without_arrays(state, arrays)
    if structure is None:  # tensors, or leaves JSON cannot hold: torch's format
        import torch

        torch.save({"step": step, "state": _to_storable(state)}, handle)
        return
    # the keys are "a0", "a1", ... and _STRUCTURE: never savez's allow_pickle
    np.savez(
        handle,
        **arrays,  # type: ignore[arg-type]
        **{_STRUCTURE: _json_bytes({"step": step, "state": structure})},  # type: ignore[arg-type]
    )


def _read(path: Path, root: Path | None) -> tuple[int, dict[str, Any]]:
    with os.fdopen(open_regular(path, root=root, limit=MAX_CHECKPOINT_BYTES), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        with zipfile.ZipFile(handle) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
            torch_free = f"{_STRUCTURE}.npy" in archive.namelist()
        if unpacked > size + UNPACKED_SLACK:
            raise CheckpointError(
                f"checkpoint {path} unpacks to {unpacked} bytes from {size}; rlx's checkpoints "
                "are stored uncompressed, so this is not one (delete it, or train again)."
            )
        handle.seek(0)
        if torch_free:
            with np.load(handle, allow_pickle=False) as archive:
                record = json.loads(archive[_STRUCTURE].tobytes())
                return int(record["step"]), _with_arrays(record["state"], archive)
        import torch

        payload = torch.load(handle, map_location="cpu", weights_only=True)
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
    tmp = f".tmp-latest-{os.getpid()}"
    with folder_descriptor(target.parent, root=target.parent.parent) as fd:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=fd)
        os.symlink(target.name, tmp, dir_fd=fd)
        os.replace(tmp, LATEST, src_dir_fd=fd, dst_dir_fd=fd)


def _list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """The step checkpoints in ``folder``: regular files named ``step_<N>.pt`` (a link, a
    folder or anything else by that name is none: nothing reads, copies or prunes it)."""
    if not folder.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in folder.iterdir()
        if (m := _NAME.match(p.name)) and p.is_file() and not p.is_symlink()
    ]
    return sorted(found)


def _prune(folder: Path, keep: int) -> None:
    """Unlink all but the newest ``keep`` step checkpoints: regular files of the real
    ``checkpoints`` folder, by name in its descriptor (a link planted meanwhile is not
    followed)."""
    if keep <= 0:
        return
    with folder_descriptor(folder, root=folder.parent, create=False) as fd:
        found = []
        with os.scandir(fd) as entries:
            for entry in entries:
                m = _NAME.match(entry.name)
                if m and entry.is_file(follow_symlinks=False):
                    found.append((int(m.group(1)), entry.name))
        for _, name in sorted(found)[:-keep]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)


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
