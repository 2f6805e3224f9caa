"""A seed group: one run folder per seed inside a group folder, and the file that lists them.

```
GROUP/group.json        algo, env, seeds, the command, each seed's folder and status
                        (pending, running, completed, stopped, interrupted, failed) and, for a
                        failed seed, why; the config fields given and the env's recipe (to
                        start a seed a resume finds unstarted); history of starts and resumes
GROUP/seed-0/           an ordinary run folder (config.json, metrics.jsonl, episodes.csv, ...)
GROUP/seed-1/ ...
GROUP/report.html       `rlx report GROUP`
```

``rlx train ALGO --seeds 0 1 2 --run-dir GROUP`` writes it
(:func:`rlx.launch.seed_groups.train_seeds`);
``rlx report GROUP`` and ``rlx doctor GROUP`` read it. Seed folders hold paths relative to the
group folder, so a group can be moved or shared whole. Like the run folder's readers, these
treat the file as data: a malformed one is one sentence (RunError), never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from rlx.errors import RunError
from rlx.runs.folder import CONFIG_FILE, read_json, write_json_atomic
from rlx.version import VERSION

GROUP_FILE = "group.json"
GROUP_KIND = "rlx seed group"
"""``group.json``'s ``kind``: what tells a group file from any other JSON."""
STATUSES = ("pending", "running", "completed", "stopped", "interrupted", "failed")
"""A seed's status in ``group.json``: the run's own (``summary.json``) once it has ended."""


def seed_folder_name(seed: int) -> str:
    """``seed-3``: the folder of seed 3 inside its group."""
    return f"seed-{seed}"


@dataclass(frozen=True)
class SeedEntry:
    """One seed of a group: its folder (relative to the group) and how its run stands."""

    seed: int
    run_dir: str
    status: str = "pending"
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "run_dir": self.run_dir, "status": self.status,
                "error": self.error}  # fmt: skip


@dataclass(frozen=True)
class GroupRecord:
    """What ``group.json`` says: read once, rewritten as the seeds end."""

    path: Path
    algo: str
    env: str
    runs: tuple[SeedEntry, ...]
    extra: dict[str, Any] = field(default_factory=dict)
    """``command``, ``jobs``, ``overrides``, ``env_recipe``, ``created``, ``history``"""

    @property
    def seeds(self) -> list[int]:
        return [entry.seed for entry in self.runs]

    def folder(self, seed: int) -> Path:
        """The run folder of ``seed``: a RunError when it (or a folder on the way from the
        group's) is a link, so a seed's run is never read or written elsewhere."""
        entry = self.entry(seed)
        name = entry.run_dir if entry is not None else seed_folder_name(seed)
        path = self.path
        for part in Path(name).parts:
            path = path / part
            if path.is_symlink():
                raise RunError(
                    f"{self.path / GROUP_FILE} lists {name!r} as seed {seed}'s run folder, but "
                    f"{path} is a link; rlx uses only real folders inside the group, so remove "
                    "the link."
                )
        return path

    def entry(self, seed: int) -> SeedEntry | None:
        return next((entry for entry in self.runs if entry.seed == seed), None)

    def with_entry(self, entry: SeedEntry) -> GroupRecord:
        """This record with ``entry`` replacing the seed's own (or added)."""
        runs = [entry if e.seed == entry.seed else e for e in self.runs]
        if entry.seed not in self.seeds:
            runs.append(entry)
        return replace(self, runs=tuple(runs))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": GROUP_KIND,
            "algo": self.algo,
            "env": self.env,
            "seeds": self.seeds,
            **{k: v for k, v in self.extra.items() if k != "history"},
            "runs": [entry.to_dict() for entry in self.runs],
            "history": self.extra.get("history", []),
        }


def new_group(
    path: str | Path,
    algo: str,
    env: str,
    seeds: list[int],
    *,
    command: str | None,
    kind: str = "start",
    history: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> GroupRecord:
    """The record of a group about to start: every seed pending; ``kind`` is ``"start"`` or
    ``"overwrite"`` (started over), added to the ``history`` kept from before."""
    entries = tuple(SeedEntry(seed, seed_folder_name(seed)) for seed in seeds)
    now = _now()
    fields = {"command": command, **extra, "created": now,
              "history": [*(history or []), history_entry(kind, command)]}  # fmt: skip
    return GroupRecord(Path(path), algo, env, entries, fields)


def history_entry(kind: str, command: str | None) -> dict[str, Any]:
    """One start, resume or start-over of the group, for ``group.json``'s history."""
    return {"kind": kind, "command": command, "time": _now(), "rlx": VERSION}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def is_group_folder(path: str | Path | None) -> bool:
    """True when ``path`` is a folder holding a ``group.json``."""
    return path is not None and (Path(path) / GROUP_FILE).is_file()


def group_folder_state(path: str | Path) -> str:
    """What a folder holds, as far as starting a group in it goes: ``"new"`` (absent or
    empty), ``"group"`` (a ``group.json``), ``"run"`` (a single run's ``config.json``) or
    ``"files"`` (anything else)."""
    path = Path(path)
    if not path.exists() or (path.is_dir() and not any(path.iterdir())):
        return "new"
    if is_group_folder(path):
        return "group"
    if (path / CONFIG_FILE).is_file():
        return "run"
    return "files"


def read_group(path: str | Path) -> GroupRecord:
    """The group's ``group.json``; RunError when ``path`` holds none or a malformed one."""
    path = Path(path)
    if not path.is_dir():
        raise RunError(f"seed group {path} does not exist.")
    data = read_json(path / GROUP_FILE)
    where = path / GROUP_FILE
    if not isinstance(data, dict) or data.get("kind") != GROUP_KIND:
        raise RunError(f"{where} is not an rlx seed group's file (no kind {GROUP_KIND!r}).")
    runs = data.get("runs")
    if not isinstance(data.get("algo"), str) or not isinstance(runs, list):
        raise RunError(f"{where} is not an rlx seed group's file (no algo or runs).")
    entries: list[SeedEntry] = []
    for item in runs:
        entry = _entry(item)
        if entry is None:
            raise RunError(f"{where} lists a seed it cannot read: {item!r}.")
        if entry.seed in [e.seed for e in entries]:
            raise RunError(f"{where} lists seed {entry.seed} twice.")
        entries.append(entry)
    known = ("kind", "algo", "env", "seeds", "runs")
    extra = {k: v for k, v in data.items() if k not in known}
    return GroupRecord(path, data["algo"], str(data.get("env")), tuple(entries), extra)


def _entry(item: Any) -> SeedEntry | None:
    """A ``runs`` item checked as data: a whole-number seed, a folder inside the group."""
    if not isinstance(item, dict):
        return None
    seed, run_dir = item.get("seed"), item.get("run_dir")
    if isinstance(seed, bool) or not isinstance(seed, int) or not isinstance(run_dir, str):
        return None
    if Path(run_dir).is_absolute() or ".." in Path(run_dir).parts or not run_dir.strip():
        return None  # a seed folder lies inside its group
    # one of STATUSES (strings)
    status = cast(str, item.get("status")) if item.get("status") in STATUSES else "pending"
    error = item.get("error")
    return SeedEntry(seed, run_dir, status, str(error) if error is not None else None)


def write_group(record: GroupRecord) -> None:
    """Write ``group.json`` atomically (the folder made if needed)."""
    record.path.mkdir(parents=True, exist_ok=True)
    data = record.to_dict()
    data["updated"] = _now()
    write_json_atomic(record.path / GROUP_FILE, data)


__all__ = [
    "GROUP_FILE",
    "GROUP_KIND",
    "STATUSES",
    "GroupRecord",
    "SeedEntry",
    "group_folder_state",
    "history_entry",
    "is_group_folder",
    "new_group",
    "read_group",
    "seed_folder_name",
    "write_group",
]
