"""Files in folders a user may have received from someone else: written without following
links, read with bounds.

A run, study or group folder travels (papers, model hubs, colleagues), so what it holds is
data, links included. Every file rlx writes in one goes through :func:`atomic_file` (a whole
file: a temporary name created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` in a descriptor of the
folder, renamed over the final name, which replaces a link planted there instead of writing
through it) or :func:`append_file` (a log opened with ``O_APPEND | O_NOFOLLOW``). With
``root``, the folders between ``root`` and the file are opened one at a time without following
links either (and made when missing), so a planted ``videos -> /elsewhere`` is refused too.

What rlx reads from such a folder is bounded: :func:`read_regular` opens a file without
following a link and only when it is a regular file inside ``root`` (what the report inlines),
and :func:`loads_json` parses JSON no deeper than :data:`MAX_JSON_DEPTH` and no larger than
:data:`MAX_JSON_BYTES`, an integer longer than Python converts read as the float it is
(infinite). Every refusal is one :class:`~rlx.errors.RunError` sentence naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from rlx.errors import RunError

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)
MAX_JSON_DEPTH = 64
"""How deeply the JSON a folder holds may nest (rlx's own files nest a few levels)."""
MAX_JSON_BYTES = 256 * 1024 * 1024
"""The largest JSON file read from a folder."""
MAX_INT_DIGITS = 4000
"""An integer of more digits is read as a float (Python refuses to convert past 4300)."""
# os.replace takes the dir fds wherever os.rename does (renameat), but is not listed itself
_DIR_FDS = os.open in os.supports_dir_fd and os.rename in os.supports_dir_fd


def _refused(path: Path, exc: OSError) -> RunError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return RunError(
            f"{path} is (or lies under) a link or not a folder; rlx writes in a folder only "
            "through real folders and files, so remove the link and run again."
        )
    return RunError(f"{path} cannot be written ({exc.strerror or exc}).")


def _open_folder(folder: Path, root: Path | None) -> int:
    """A descriptor of ``folder`` (made when missing): the path up to ``root`` as given, each
    folder below it opened without following a link."""
    if root is None or not _DIR_FDS:
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder, os.O_RDONLY | DIRECTORY | CLOEXEC)
    try:
        parts = folder.relative_to(root).parts
    except ValueError as exc:
        raise RunError(f"{folder} is not inside {root}; rlx writes only inside it.") from exc
    if ".." in parts:
        raise RunError(f"{folder} is not inside {root}; rlx writes only inside it.")
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | DIRECTORY | CLOEXEC)
    try:
        for part in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=fd)
            inner = os.open(part, os.O_RDONLY | DIRECTORY | NOFOLLOW | CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = inner
    except OSError as exc:
        os.close(fd)
        raise _refused(folder, exc) from exc
    return fd


@contextlib.contextmanager
def atomic_file(path: str | Path, *, root: str | Path | None = None) -> Iterator[IO[bytes]]:
    """A binary file to write ``path`` whole: a new temporary name beside it (never one that
    exists, never through a link), flushed to disk and renamed over ``path`` when the block
    ends; removed when it raises. ``root``: the folder from which no link is followed."""
    path = Path(path)
    fd = _open_folder(path.parent, None if root is None else Path(root))
    tmp = f".tmp-{path.name}-{secrets.token_hex(4)}"
    try:
        try:
            handle_fd = _open_at(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, fd, path.parent)
        except OSError as exc:
            raise _refused(path, exc) from exc
        try:
            with os.fdopen(handle_fd, "wb") as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            if _DIR_FDS:
                os.replace(tmp, path.name, src_dir_fd=fd, dst_dir_fd=fd)
            else:
                os.replace(path.parent / tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                if _DIR_FDS:
                    os.unlink(tmp, dir_fd=fd)
                else:
                    os.unlink(path.parent / tmp)
            raise
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: str | bytes, *, root: str | Path | None = None) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole, as :func:`atomic_file`."""
    with atomic_file(path, root=root) as handle:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)


def append_file(path: str | Path, *, root: str | Path | None = None, **text: Any) -> IO[str]:
    """``path`` opened to append text (``text``: ``open``'s keywords), made when missing,
    never through a link; a RunError when it is not a regular file."""
    path = Path(path)
    fd = _open_folder(path.parent, None if root is None else Path(root))
    try:
        handle_fd = _open_at(path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, fd, path.parent)
    except OSError as exc:
        raise _refused(path, exc) from exc
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(handle_fd).st_mode):
        os.close(handle_fd)
        raise RunError(f"{path} is not a regular file; rlx appends only to its own logs.")
    return open(handle_fd, "a", **text)


def _open_at(name: str, flags: int, fd: int, folder: Path) -> int:
    flags |= NOFOLLOW | CLOEXEC
    if _DIR_FDS:
        return os.open(name, flags, 0o644, dir_fd=fd)
    return os.open(folder / name, flags, 0o644)


def read_regular(path: str | Path, root: str | Path, *, limit: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of ``path``, a regular file inside ``root`` (no link on the way, none at the
    end) of at most ``limit`` bytes; RunError otherwise."""
    path, root = Path(path), Path(root)
    try:
        inside = path.resolve().is_relative_to(root.resolve())
    except OSError:
        inside = False
    if not inside or path.is_symlink():
        raise RunError(
            f"{path} is a link or lies outside {root}; rlx reads only the folder's own files."
        )
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | NONBLOCK | CLOEXEC)
    except OSError as exc:
        raise RunError(f"{path} cannot be read ({exc.strerror or exc}).") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunError(f"{path} is not a regular file; rlx reads only the folder's own files.")
        if info.st_size > limit:
            raise RunError(f"{path} holds {info.st_size} bytes, more than the {limit} rlx reads.")
        return handle.read(limit + 1)[:limit]


def read_text_bounded(path: str | Path, limit: int = MAX_JSON_BYTES) -> str:
    """The UTF-8 text of ``path`` (a regular file: never a device or a pipe) of at most
    ``limit`` bytes; OSError, UnicodeDecodeError or a RunError (too large) as reading goes."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | NONBLOCK | CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunError(f"{path} is not a regular file.")
        if info.st_size > limit:
            raise RunError(f"{path} holds {info.st_size} bytes, more than the {limit} rlx reads.")
        return handle.read(limit + 1).decode("utf-8")


def open_text(path: str | Path, **text: Any) -> IO[str]:
    """``path`` opened to read text (``text``: ``open``'s keywords), only when it is a regular
    file (never a device or a pipe); OSError or a RunError otherwise."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | NONBLOCK | CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunError(f"{path} is not a regular file; rlx reads only the folder's own files.")
    return open(fd, **text)


def _int_or_float(text: str) -> int | float:
    return int(text) if len(text.lstrip("-")) <= MAX_INT_DIGITS else float(text)


_DEPTH = {"[": 1, "{": 1, "]": -1, "}": -1}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str) -> int:
    """How deeply ``text`` (JSON) nests, counting brackets outside strings."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0  # cannot nest deeper than the limit
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(itertools.accumulate(_DEPTH[c] for c in brackets), default=0)


class JsonDepthError(ValueError):
    """JSON nested deeper than :data:`MAX_JSON_DEPTH`."""


def loads_json(text: str) -> Any:
    """``json.loads`` bounded: nested at most :data:`MAX_JSON_DEPTH` levels (JsonDepthError, a
    ValueError, otherwise), an integer of more than :data:`MAX_INT_DIGITS` digits read as a
    float. Raises ValueError where ``json.loads`` does."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise JsonDepthError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_int=_int_or_float)
    except RecursionError as exc:  # the bound above keeps it away; a guard all the same
        raise JsonDepthError(f"nested deeper than {MAX_JSON_DEPTH} levels") from exc


def load_json_file(path: str | Path) -> Any:
    """The JSON in ``path``, bounded as :func:`loads_json` and :data:`MAX_JSON_BYTES`, not
    through a link; a RunError naming the file when it is missing, unreadable or not JSON."""
    path = Path(path)
    try:
        text = read_text_bounded(path)
        return loads_json(text)
    except FileNotFoundError as exc:
        raise RunError(f"{path} does not exist; is {path.parent} an rlx run folder?") from exc
    except json.JSONDecodeError as exc:
        raise RunError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}).") from exc
    except UnicodeDecodeError as exc:
        raise RunError(f"{path} is not valid JSON (not UTF-8 text).") from exc
    except JsonDepthError as exc:
        raise RunError(f"{path} is not JSON rlx reads ({exc}).") from exc
    except ValueError as exc:
        raise RunError(f"{path} is not valid JSON ({exc}).") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RunError(f"{path} is a link; rlx reads only the folder's own files.") from exc
        raise RunError(f"{path} cannot be read ({exc.strerror or exc}).") from exc


__all__ = [
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "JsonDepthError",
    "append_file",
    "atomic_file",
    "json_depth",
    "load_json_file",
    "loads_json",
    "open_text",
    "read_regular",
    "read_text_bounded",
    "write_atomic",
]
