"""Keep numba's on-disk kernel cache in step with the sources it was compiled from.

numba checks only the file that defines a cached function, not the files of the functions it
calls: after an edit of ``rlx/tabular/targets.py`` the kernels in ``rlx/tabular/algorithms/``
would load their old machine code. So a digest of a package's compiled modules is kept beside
its cache, and when it changes the package's cached kernels are dropped (they recompile on
first use). Each package with numba code calls :func:`drop_stale_kernels` on import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

_STAMP_NAME = "numba-sources.sha256"


def drop_stale_kernels(root: Path, compiled: Sequence[str]) -> None:
    """Delete the cached kernels under ``root`` if any of ``compiled`` (files or folders
    relative to ``root``, the modules holding numba code) changed since they were built."""
    stamp = root / "__pycache__" / _STAMP_NAME
    try:
        digest = hashlib.sha256()
        for source in _sources(root, compiled):
            digest.update(source.read_bytes())
        current = digest.hexdigest()
        if stamp.exists() and stamp.read_text() == current:
            return
        for cached in [*root.rglob("__pycache__/*.nbi"), *root.rglob("__pycache__/*.nbc")]:
            cached.unlink(missing_ok=True)
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(current)
    except OSError:
        pass  # a read-only install: numba then keeps its cache elsewhere, or compiles in memory


def _sources(root: Path, compiled: Sequence[str]) -> list[Path]:
    sources = []
    for name in compiled:
        path = root / name
        sources += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return sources
