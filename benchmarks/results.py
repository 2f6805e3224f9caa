"""Benchmark result files: what a benchmark measured, how, where and with what, as JSON.

Every benchmark ends with :func:`write_result`, which writes ``benchmarks/results/<name>.json``
(a ``--quick`` run: ``benchmarks/results/quick/<name>.json``, which the docs never read). A
record holds what a reviewer needs to trust or redo the figures:

- the table (columns and rows) and the figures a reader quotes;
- the exact command, the UTC date, the git commit and whether the tree had uncommitted
  changes (and which files);
- the version of every library involved, read from the installed package metadata
  (``importlib.metadata``), not from whichever modules happen to be imported: rlx, numpy, and
  the benchmark's own list (torch, transformers, trl, peft, stable-baselines3, ...);
- the CPU model, its core count and the instruction sets that change which kernels run
  (AVX2, AVX-512, AVX512-BF16, AMX, ...), read from ``/proc/cpuinfo``; the thread settings
  (torch's intra-op threads, ``OMP_NUM_THREADS`` and friends);
- the number of repeats (at least :data:`MIN_REPEATS` outside ``--quick``) and, for each
  timed quantity, its min, median, max and spread (:func:`spread`);
- the like-for-like settings, each with rlx's value and the peer's (:func:`settings_table`);
  where rlx's preset differs from the peer's recipe, the differences (:func:`differences`);
- the goals, each with the value measured and met or missed (:func:`goal`); a goal that
  could not be judged (a side not run) is ``None`` and shows as "not run".

The docs' benchmark page is generated from these files (``docs/gen_pages.py benchmarks``), so
a figure in the docs is always one a benchmark wrote, with the command that reproduces it.
"""

from __future__ import annotations

import contextlib
import importlib.metadata as metadata
import json
import math
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
QUICK_RESULTS = RESULTS / "quick"
ROOT = HERE.parent
SCHEMA = 2
"""Version of the record's layout (1: before commit, versions, repeats and goals)."""
MIN_REPEATS = 3
"""A figure of a full run is the summary of at least this many repeats."""

KERNEL_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)
"""``/proc/cpuinfo`` flags that change which kernels numpy, numba and PyTorch run."""

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "RLX_NUM_THREADS",
    "ATEN_CPU_CAPABILITY",
)

BASE_LIBRARIES = ("rlx", "numpy")
"""Every record names these versions; a benchmark adds its own (torch, the peer, ...)."""


# ---------------------------------------------------------------------------- the machine
def cpu(cpuinfo: str | None = None) -> dict[str, Any]:
    """The CPU model, core count and the kernel-changing instruction sets it has.

    ``cpuinfo``: the text of ``/proc/cpuinfo`` (read when None; elsewhere than Linux the
    flags are empty and the model is ``platform``'s).
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    model: str | None = None
    flags: set[str] | None = None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key == "flags" and flags is None:
            flags = set(value.split())
    model = model or platform.processor() or platform.machine()
    flags = flags or set()
    return {
        "model": model,
        "cores": os.cpu_count(),
        "kernel_flags": [f for f in KERNEL_FLAGS if f in flags],
    }


def machine() -> dict[str, Any]:
    """The CPU (:func:`cpu`), the OS, Python, and torch's chosen CPU kernel path when torch is
    loaded (``default``, ``avx2``, ``avx512``: what ``ATEN_CPU_CAPABILITY`` sets)."""
    info = {
        "cpu": cpu(),
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(AttributeError):  # an old torch has no such call
            info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    with contextlib.suppress(OSError, AttributeError):  # not every OS keeps one
        # whether the machine was quiet: the run queue over the last 1, 5 and 15 minutes
        # when the record was written (above the core count: something else ran beside it)
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return info


def threads() -> dict[str, Any]:
    """torch's intra-op thread count (when torch is loaded) and the thread variables set."""
    torch = sys.modules.get("torch")
    numba = sys.modules.get("numba")
    return {
        "torch": torch.get_num_threads() if torch is not None else None,
        # the configured pool size: get_num_threads() would start numba's pool, which then
        # refuses any later change of NUMBA_NUM_THREADS in this process
        "numba": numba.config.NUMBA_NUM_THREADS if numba is not None else None,
        **{name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ},
    }


# ---------------------------------------------------------------------------- the software
def versions(libraries: Iterable[str] = ()) -> dict[str, str]:
    """Each distribution's installed version from its package metadata (``not installed``
    when absent), for :data:`BASE_LIBRARIES` and ``libraries``, plus Python's."""
    found = {"python": platform.python_version()}
    for name in dict.fromkeys([*BASE_LIBRARIES, *libraries]):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def git_state(root: Path = ROOT) -> dict[str, Any]:
    """The commit checked out in ``root`` and whether the tree differs from it: ``dirty``
    and the paths ``git status`` lists (tracked changes and untracked files)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                 text=True, timeout=30, check=True)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "dirty_paths": []}
    status = git("status", "--porcelain=v1", "-z", "--untracked-files=normal") or ""
    return {"commit": commit.strip(), "dirty": bool(status), "dirty_paths": changed_paths(status)}


def changed_paths(status: str) -> list[str]:
    """The paths of ``git status --porcelain=v1 -z``: NUL-separated ``XY path`` entries, each
    path as it is (no quoting of spaces or non-ASCII names), a rename or copy followed by the
    path it came from, which counts too."""
    entries = status.split("\0")
    paths: list[str] = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC" and i < len(entries):  # the source of a rename or copy
            paths.append(entries[i])
            i += 1
    return paths


ALLOW_UNCOMMITTED = "RLX_BENCH_ALLOW_UNCOMMITTED"
"""Set to 1 to write a full record from a tree whose source differs from its commit; the record
then says so (``git.uncommitted_source``)."""
SOURCE_PATHS = ("src/", "benchmarks/", "pyproject.toml")
"""What decides a measurement: rlx's code, the benchmarks' code and the pins. (Result files
and the page they generate are written by the benchmarks themselves and do not count.)"""
WRITTEN_BY_BENCHMARKS = ("benchmarks/results/",)


def uncommitted_source(state: Mapping[str, Any]) -> list[str]:
    """The paths of ``state`` (:func:`git_state`) that change what a benchmark measures."""
    paths = state.get("dirty_paths", [])
    ours = WRITTEN_BY_BENCHMARKS
    return [p for p in paths if p.startswith(SOURCE_PATHS) and not p.startswith(ours)]


def check_committed(name: str, state: Mapping[str, Any]) -> bool:
    """Refuse a full record of ``name`` measured from uncommitted source unless
    :data:`ALLOW_UNCOMMITTED` is 1; returns whether the source was uncommitted (and allowed)."""
    changed = uncommitted_source(state)
    if changed and os.environ.get(ALLOW_UNCOMMITTED) != "1":
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        shown = ", ".join(changed[:5]) + more
        raise RuntimeError(
            f"{name}: the tree has uncommitted source changes ({shown}), so no commit names "
            f"what was measured: commit them first, or set {ALLOW_UNCOMMITTED}=1 and the record "
            "says so."
        )
    return bool(changed)


SEEN_SEEDS = HERE / "seen_seeds.json"
"""The seeds each preset's tuning and retuning looked at, and the records that score presets."""


def seed_list(text: str) -> list[int]:
    """``"0-9, 11, 14"`` -> ``[0, ..., 9, 11, 14]``."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        seeds += range(int(low), int(high or low) + 1)
    return seeds


def seen_seeds(preset: str, registry: Path = SEEN_SEEDS) -> set[int]:
    """The seeds the tuning of ``preset`` (``"ALGO ENV"``) looked at (none for a preset the
    registry does not list)."""
    entry = json.loads(registry.read_text())["presets"].get(preset)
    return set(seed_list(entry["seeds"])) if entry else set()


def seen_in_record(
    name: str, seeds: Iterable[int], registry: Path = SEEN_SEEDS
) -> dict[str, list[int]]:
    """``preset -> seeds`` of the presets record ``name`` scores whose tuning saw some of
    ``seeds``."""
    scored = json.loads(registry.read_text())["scored_by"].get(name, [])
    found = {preset: sorted(seen_seeds(preset, registry) & set(seeds)) for preset in scored}
    return {preset: seen for preset, seen in found.items() if seen}


def tuning_seeds_text(presets: Iterable[str], registry: Path = SEEN_SEEDS) -> str:
    """The seeds each of ``presets`` was tuned on, as the registry says them."""
    entries = json.loads(registry.read_text())["presets"]
    return "; ".join(f"{p} on seeds {entries[p]['seeds']}" for p in presets if p in entries)


def check_unseen(presets: Iterable[str], seeds: Iterable[int]) -> None:
    """Refuse to score ``presets`` on seeds their tuning looked at (:data:`SEEN_SEEDS`)."""
    for preset in presets:
        seen = sorted(seen_seeds(preset) & set(seeds))
        if seen:
            raise SystemExit(
                f"{preset}: seeds {', '.join(map(str, seen))} were looked at when its preset was "
                f"tuned ({SEEN_SEEDS.name}); score it on seeds outside them."
            )


def utc_now() -> str:
    """The UTC date and time a record gives, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def command() -> str:
    """The command line that ran this benchmark, as typed from the repository root."""
    args = list(sys.argv)
    script = Path(args[0]).resolve() if args else None
    if script is not None and script.is_file():
        try:
            args[0] = str(script.relative_to(ROOT))
        except ValueError:
            args[0] = str(script)
    return "python " + " ".join(shlex.quote(a) for a in args)


# ---------------------------------------------------------------------------- figures
def spread(samples: Sequence[float | None], digits: int = 4) -> dict[str, Any]:
    """Min, median and max of repeated measurements, the relative spread
    ``(max - min) / median`` and the samples themselves. A ``None`` sample (not reached, not
    run) counts as infinitely slow for the median and is left out of min and spread."""
    values = [float(s) for s in samples if s is not None and math.isfinite(s)]
    keyed = sorted(math.inf if s is None or not math.isfinite(s) else float(s) for s in samples)
    n = len(keyed)
    median = None
    if n:
        middle = keyed[n // 2] if n % 2 else (keyed[n // 2 - 1] + keyed[n // 2]) / 2
        median = middle if math.isfinite(middle) else None
    out: dict[str, Any] = {
        "n": len(samples),
        "min": _round(min(values), digits) if values else None,
        "median": _round(median, digits) if median is not None else None,
        "max": _round(max(values), digits) if values else None,
        "spread": None,
        "samples": [None if s is None else _round(float(s), digits) for s in samples],
    }
    if median and len(values) > 1:
        out["spread"] = _round((max(values) - min(values)) / median, 3)
    return out


def _round(value: float, digits: int) -> float:
    """``value`` to ``digits`` significant digits (integers above that stay whole)."""
    if value == 0 or not math.isfinite(value):
        return value
    magnitude = math.floor(math.log10(abs(value)))
    return round(value, max(digits - 1 - magnitude, 0))


def ratio(numerator: float | None, denominator: float | None, digits: int = 3) -> float | None:
    """``numerator / denominator``, or None when either side was not measured."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return _round(numerator / denominator, digits)


def goal(name: str, target: str, value: Any, met: bool | None) -> dict[str, Any]:
    """One goal: what it asks (``name``), the bar (``target``), what was measured, and met
    (True), missed (False) or not judged because a side was not run (None)."""
    return {"goal": name, "target": target, "measured": value, "met": met}


def settings_table(
    rlx: Mapping[str, Any], peer: Mapping[str, Any], *, must_match: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """The like-for-like settings, one row each: the setting, rlx's value, the peer's value
    and whether they are equal. Every key of either side is a row; ``must_match`` (default:
    every key) are the settings that change the work, and :func:`check_like_for_like`
    requires them equal."""
    keys = list(dict.fromkeys([*rlx, *peer]))
    required = set(keys if must_match is None else must_match)
    return [
        {
            "setting": key,
            "rlx": rlx.get(key, "(none)"),
            "peer": peer.get(key, "(none)"),
            "equal": _same(rlx.get(key), peer.get(key)),
            "must_match": key in required,
        }
        for key in keys
    ]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    return a == b


def check_like_for_like(rows: Sequence[Mapping[str, Any]], where: str = "") -> None:
    """Raise ``ValueError`` naming every setting that must match and does not."""
    unequal = [r for r in rows if r["must_match"] and not r["equal"]]
    if unequal:
        listed = "; ".join(f"{r['setting']}: rlx {r['rlx']!r}, peer {r['peer']!r}" for r in unequal)
        raise ValueError(f"{where or 'benchmark'} is not like for like: {listed}")


def differences(preset: Mapping[str, Any], recipe: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Where rlx's preset (as rlx config values) differs from the peer's recipe (mapped to the
    same rlx fields): one row per field, ``{"setting", "preset", "recipe"}``."""
    keys = list(dict.fromkeys([*recipe, *preset]))
    return [
        {"setting": k, "preset": preset.get(k, "(default)"), "recipe": recipe.get(k, "(default)")}
        for k in keys
        if not _same(preset.get(k), recipe.get(k))
    ]


# ---------------------------------------------------------------------------- the file
def write_result(
    name: str,
    *,
    title: str,
    columns: list[str],
    rows: list[list[Any]],
    libraries: Iterable[str],
    repeats: int,
    goals: list[dict[str, Any]],
    peer: str,
    notes: str = "",
    seeds: list[int] | None = None,
    figures: dict[str, Any] | None = None,
    settings: list[dict[str, Any]] | None = None,
    preset_differences: list[dict[str, Any]] | None = None,
    extra_tables: list[dict[str, Any]] | None = None,
    details: dict[str, Any] | None = None,
    quick: bool = False,
    out_dir: Path | None = None,
) -> Path:
    """Write the result file and return its path.

    ``columns`` and ``rows``: the table the docs page shows; ``libraries``: the distributions
    whose versions matter (rlx and numpy are always added); ``repeats``: how many times each
    figure was measured (seeds count as repeats where each seed is a run); ``goals``: from
    :func:`goal`; ``peer``: the library compared against, as the page names it; ``settings``:
    from :func:`settings_table` (must-match rows must be equal, or this raises);
    ``preset_differences``: from :func:`differences`; ``extra_tables``: further tables, each
    ``{"title", "columns", "rows"}``; ``details``: the
    raw figures behind the table (per seed, per repeat), kept in the file, not on the page;
    ``quick``: a ``--quick`` run (fewer, smaller repeats:
    a check that the benchmark works, not a measurement), written under ``results/quick/``
    unless ``out_dir`` says otherwise.
    """
    if not quick and repeats < MIN_REPEATS:
        raise ValueError(f"{name}: {repeats} repeats; a full run needs at least {MIN_REPEATS}")
    for g in goals:
        if g.get("met") not in (True, False, None):
            raise ValueError(f"{name}: goal {g.get('goal')!r} has met={g.get('met')!r}")
    if settings:
        check_like_for_like(settings, name)
    git = git_state()
    if not quick:
        git["uncommitted_source"] = check_committed(name, git)
    record = {
        "schema": SCHEMA,
        "name": name,
        "title": title,
        "quick": quick,
        "command": command(),
        "date": utc_now(),
        "git": git,
        "machine": machine(),
        "threads": threads(),
        "versions": versions(libraries),
        "peer": peer,
        "repeats": repeats,
        "seeds": list(seeds) if seeds is not None else None,
        "notes": notes,
        "columns": list(columns),
        "rows": [list(row) for row in rows],
        "goals": goals,
        "settings": settings or [],
        "preset_differences": preset_differences or [],
        "extra_tables": extra_tables or [],
        "figures": dict(figures or {}),
        "details": details or {},
    }
    folder = out_dir or (QUICK_RESULTS if quick else RESULTS)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, default=_plain) + "\n")
    os.replace(tmp, path)
    print(f"result written to {path}")
    for g in goals:
        verdict = {True: "met", False: "MISSED", None: "not run"}[g["met"]]
        print(f"goal: {g['goal']} ({g['target']}): {g['measured']} -> {verdict}")
    return path


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
