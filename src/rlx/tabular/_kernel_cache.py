"""Keep numba's on-disk kernel cache in step with the sources it was compiled from.

numba checks only the file that defines a cached function, not the files of the functions it
calls: after an edit of ``targets.py`` the kernels in ``algorithms/`` would load their old
machine code. So a digest of the compiled modules' sources is kept beside the cache, and when
it changes the package's cached kernels are dropped (they recompile on first use).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
_STAMP = _ROOT / "__pycache__" / "numba-sources.sha256"
# the modules holding numba code (others, e.g. registered.py, may change without a recompile)
_COMPILED = ("rng.py", "model.py", "explore.py", "targets.py", "environment.py", "algorithms")


def drop_stale_kernels() -> None:
    """Delete this package's cached kernels if any of its sources changed since they were built."""
    try:
        digest = hashlib.sha256()
        for source in _compiled_sources():
            digest.update(source.read_bytes())
        current = digest.hexdigest()
        if _STAMP.exists() and _STAMP.read_text() == current:
            return
        for cached in [*_ROOT.rglob("__pycache__/*.nbi"), *_ROOT.rglob("__pycache__/*.nbc")]:
            cached.unlink(missing_ok=True)
        _STAMP.parent.mkdir(exist_ok=True)
        _STAMP.write_text(current)
    except OSError:
        pass  # a read-only install: numba then keeps its cache elsewhere, or compiles in memory


def _compiled_sources() -> list[Path]:
    sources = []
    for name in _COMPILED:
        path = _ROOT / name
        sources += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return sources
