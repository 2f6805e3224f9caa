"""Benchmark result files: what a benchmark measured, how and where, as JSON.

Every benchmark ends with :func:`write_result`, which writes ``benchmarks/results/<name>.json``
holding its table (columns and rows), the figures a reader quotes, the exact command, the date,
the machine (CPU model, cores, Python, torch), the torch thread count and the seeds. The docs'
benchmark page is generated from these files (``docs/gen_pages.py``), so a figure in the docs
is always one a benchmark wrote, with the command that reproduces it beside it.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """The CPU model, its core count, the OS and the versions that matter for speed."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
    }
    for module in ("torch", "numpy", "gymnasium"):
        if module in sys.modules:
            info[module] = getattr(sys.modules[module], "__version__", "?")
    return info


def torch_threads() -> int | None:
    """torch's intra-op thread count, when torch is loaded."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def write_result(
    name: str,
    *,
    title: str,
    columns: list[str],
    rows: list[list[Any]],
    seeds: list[int] | None = None,
    figures: dict[str, Any] | None = None,
    notes: str = "",
    out_dir: Path | None = None,
) -> Path:
    """Write ``benchmarks/results/<name>.json`` and return its path.

    ``columns`` and ``rows`` are the table the docs page shows; ``figures`` the headline
    numbers (ratios, medians) by name; ``notes`` one or two sentences on what was measured.
    """
    record = {
        "name": name,
        "title": title,
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "torch_threads": torch_threads(),
        "seeds": list(seeds) if seeds is not None else None,
        "columns": list(columns),
        "rows": [list(row) for row in rows],
        "figures": dict(figures or {}),
        "notes": notes,
    }
    folder = out_dir or RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, default=_plain) + "\n")
    os.replace(tmp, path)
    print(f"result written to {path}")
    return path


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
