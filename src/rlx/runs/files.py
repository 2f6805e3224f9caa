"""Files in folders a user may have received from someone else: written without following
links, read with bounds.

A run, study or group folder travels (papers, model hubs, colleagues), so what it holds is
data, links included. Every file rlx writes in one goes through :func:`atomic_file` (a whole
file: a temporary name created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` in a descriptor of the
folder, renamed over the final name, which replaces a link planted there instead of writing
through it) or :func:`append_file` (a log opened with ``O_APPEND | O_NOFOLLOW``). With
``root``, the folders between ``root`` and the file are opened one at a time without following
links either (and made when missing), so a planted ``videos -> /elsewhere`` is refused too.

Copies and moves inside such a folder stay inside it: :func:`copy_regular` reads only a
regular file reached from its folder without a link (a link, pipe or device is refused, never
read as the folder's own file) and writes as :func:`atomic_file`; :func:`move_within` renames
between descriptors of folders opened without links. Before a library that writes by name
(Hugging Face's ``save_pretrained``, TensorBoard, W&B) writes in a sub-folder, :func:`real_folder`
checks that it is a real folder reached without a link; what the library then does inside it
by name is the library's (a link planted there by someone writing in the folder meanwhile is
not seen).

What rlx reads from such a folder is the folder's own and bounded. Every reader here
(:func:`read_regular`, :func:`read_text_bounded`, :func:`open_text`, :func:`load_json_file`,
:func:`open_regular`) opens the file without following a link at its name, and with ``root``
the folders between ``root`` and the file without following one either (``root`` defaults to
the file's own folder, taken as named): a ``summary.json -> ~/.kaggle/kaggle.json`` is refused
in one sentence, never read into a report or printed. Each reads only a regular file (a pipe
or a device is refused before a byte is read). :func:`read_regular` (what a report inlines)
also refuses a hard link to a file another user owns (see its docstring). :func:`open_text`
reads at most :data:`MAX_LOG_BYTES`, whose lines :func:`bounded_lines` caps at
:data:`MAX_LINE_CHARS`, and :func:`loads_json` parses JSON no deeper than
:data:`MAX_JSON_DEPTH` and no larger than :data:`MAX_JSON_BYTES`, an integer longer than Python
converts read as the float it is (infinite). Every refusal is one :class:`~rlx.errors.RunError`
sentence naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import re
import secrets
import shutil
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
MAX_LOG_BYTES = 1024**3
"""The largest log (``metrics.jsonl``, ``episodes.csv``, a ``progress.csv``, a journal) read."""
MAX_LINE_CHARS = 1024 * 1024
"""The longest line of a log read (a row of rlx's own logs holds a few hundred)."""
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


def _open_folder(folder: Path, root: Path | None, *, create: bool = True) -> int:
    """A descriptor of ``folder`` (made when missing, with ``create``): the path up to ``root``
    as given, each folder below it opened without following a link."""
    try:
        return _walk(folder, root, create)
    except OSError as exc:
        raise _refused(folder, exc) from exc


def _walk(folder: Path, root: Path | None, create: bool) -> int:
    """:func:`_open_folder`, raising OSError as it comes."""
    if root is None or not _DIR_FDS:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder, os.O_RDONLY | DIRECTORY | CLOEXEC)
    try:
        parts = folder.relative_to(root).parts
    except ValueError as exc:
        raise RunError(f"{folder} is not inside {root}; rlx writes only inside it.") from exc
    if ".." in parts:
        raise RunError(f"{folder} is not inside {root}; rlx writes only inside it.")
    if create:
        root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | DIRECTORY | CLOEXEC)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
            inner = os.open(part, os.O_RDONLY | DIRECTORY | NOFOLLOW | CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def folder_descriptor(
    folder: str | Path, *, root: str | Path, create: bool = True
) -> Iterator[int]:
    """A descriptor of ``folder`` (made when missing, with ``create``), each folder from
    ``root`` down opened without following a link; a RunError naming it when one is a link or
    not a folder. For ``os`` calls that take ``dir_fd``: what they do happens in that folder,
    wherever a link planted later points."""
    fd = _open_folder(Path(folder), Path(root), create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def real_folder(folder: str | Path, *, root: str | Path) -> Path:
    """``folder``, made when missing, once it is checked to be a real folder reached from
    ``root`` without a link (RunError otherwise): where a library that writes by name may
    write (what it then does inside, by name, is the library's)."""
    with folder_descriptor(folder, root=root):
        return Path(folder)


def remove_entry(path: str | Path) -> None:
    """Remove what ``path`` names: a link or a file unlinked (never what a link points to), a
    folder with what it holds (``shutil.rmtree``, which follows no link inside); nothing when
    it is missing."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


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


def copy_regular(
    source: str | Path, dest: str | Path, *, source_root: str | Path, root: str | Path
) -> None:
    """Copy ``source``, a regular file reached from ``source_root`` without a link (a link, a
    pipe, a device or a folder is refused in one RunError sentence, never read as the folder's
    own file), to ``dest`` whole, as :func:`atomic_file` writes it under ``root``."""
    source = Path(source)
    try:
        folder = _walk(source.parent, Path(source_root), create=False)
        try:
            fd = _open_at(source.name, os.O_RDONLY | NONBLOCK, folder, source.parent)
        finally:
            os.close(folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise RunError(
                f"{source} is (or lies under) a link; rlx copies only a folder's own files, so "
                "replace the link with a copy of what it points to."
            ) from exc
        raise RunError(f"{source} cannot be read ({exc.strerror or exc}).") from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RunError(f"{source} is not a regular file; rlx copies only a folder's own files.")
        with atomic_file(dest, root=root) as out:
            shutil.copyfileobj(handle, out, 1024 * 1024)


def move_within(source: str | Path, dest: str | Path, *, root: str | Path) -> None:
    """Rename ``source`` to ``dest`` (what is there replaced, a link included, never written
    through), both reached from ``root`` without a link (``dest``'s folder made when missing)."""
    source, dest, root = Path(source), Path(dest), Path(root)
    if not _DIR_FDS:
        os.replace(source, dest)
        return
    src_fd = _open_folder(source.parent, root, create=False)
    try:
        dst_fd = _open_folder(dest.parent, root)
        try:
            os.replace(source.name, dest.name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        finally:
            os.close(dst_fd)
    finally:
        os.close(src_fd)


def _open_at(name: str, flags: int, fd: int, folder: Path) -> int:
    flags |= NOFOLLOW | CLOEXEC
    if _DIR_FDS:
        return os.open(name, flags, 0o644, dir_fd=fd)
    return os.open(folder / name, flags, 0o644)


def _link_refused(path: Path, exc: OSError) -> RunError:
    if exc.errno == errno.ENOTDIR:
        return RunError(f"{path} lies under a file, not a folder; rlx reads a folder's own files.")
    return RunError(
        f"{path} is (or lies under) a link; rlx reads only the folder's own files, so replace "
        "the link with a copy of what it points to."
    )


def open_regular(
    path: str | Path, *, root: str | Path | None = None, limit: int = MAX_JSON_BYTES
) -> int:
    """A descriptor of ``path`` opened to read: its name never followed as a link, nor any
    folder between ``root`` (default: ``path``'s own folder, as named) and it, and only a
    regular file (a pipe or a device is not waited on) of at most ``limit`` bytes. A RunError
    naming it for a link, another kind of file or a file too large; OSError (missing,
    unreadable) as opening goes."""
    path = Path(path)
    start = path.parent if root is None else Path(root)
    try:
        folder = _walk(path.parent, start, create=False)
        try:
            fd = _open_at(path.name, os.O_RDONLY | NONBLOCK, folder, path.parent)
        finally:
            os.close(folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise _link_refused(path, exc) from exc
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise RunError(f"{path} is not a regular file; rlx reads only the folder's own files.")
    if info.st_size > limit:
        os.close(fd)
        raise RunError(f"{path} holds {info.st_size} bytes, more than the {limit} rlx reads.")
    return fd


def read_regular(path: str | Path, root: str | Path, *, limit: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of ``path``, a regular file inside ``root`` (no link on the way, none at the
    end) of at most ``limit`` bytes, for a report to inline; RunError otherwise.

    A hard link is a file's own name, so no open can tell it from the file; one that another
    user owns and that has other names (``st_nlink > 1``) is refused all the same: it is not a
    file this folder's run wrote for you (someone sharing the folder linked it there). A hard
    link to a file you own is read: a folder's writer could make one only where the system
    lets them link your files (``fs.protected_hardlinks`` off), and your own run's files are
    yours."""
    path, root = Path(path), Path(root)
    try:
        fd = open_regular(path, root=root, limit=limit)
    except OSError as exc:
        raise RunError(f"{path} cannot be read ({exc.strerror or exc}).") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if info.st_nlink > 1 and hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise RunError(
                f"{path} is a hard link to a file another user owns; rlx inlines only the "
                "folder's own files, so replace it with a copy."
            )
        return handle.read(limit + 1)[:limit]


def read_text_bounded(
    path: str | Path, limit: int = MAX_JSON_BYTES, *, root: str | Path | None = None
) -> str:
    """The UTF-8 text of ``path``, opened as :func:`open_regular` (no link, a regular file of
    at most ``limit`` bytes); OSError, UnicodeDecodeError or a RunError as reading goes."""
    with os.fdopen(open_regular(path, root=root, limit=limit), "rb") as handle:
        return handle.read(limit + 1).decode("utf-8")


def open_text(
    path: str | Path,
    *,
    limit: int = MAX_LOG_BYTES,
    root: str | Path | None = None,
    **text: Any,
) -> IO[str]:
    """``path`` opened to read text (``text``: ``open``'s keywords), as :func:`open_regular`
    (no link, a regular file of at most ``limit`` bytes: the open does not wait for a writer);
    OSError or a RunError otherwise. Read its lines with :func:`bounded_lines`; a byte that
    is not UTF-8 is a RunError naming the file there (:func:`bounded_lines`)."""
    return open(open_regular(path, root=root, limit=limit), **text)


def bounded_lines(
    handle: IO[str], path: str | Path, *, limit: int = MAX_LINE_CHARS
) -> Iterator[str]:
    """The lines of ``handle`` (``path``'s), each of at most ``limit`` characters: a longer
    one is a RunError naming the file and the line."""
    for number in itertools.count(1):
        try:
            line = handle.readline(limit + 1)
        except UnicodeDecodeError as exc:
            raise RunError(
                f"{path} is not UTF-8 text ({exc.reason}); rlx reads its logs as UTF-8."
            ) from exc
        if not line:
            return
        if len(line) > limit:
            raise RunError(
                f"{path}, line {number}: longer than the {limit} characters rlx reads in a line."
            )
        yield line


def check_regular(path: str | Path, *, create: bool = False, limit: int = MAX_LOG_BYTES) -> Path:
    """``path`` once it is checked to be a regular file of its folder, not a link (made empty
    with ``create`` when missing), of at most ``limit`` bytes, and the file its name opens
    now: for a library that opens it by name afterwards. A RunError naming it otherwise."""
    path = Path(path)
    flags = os.O_RDONLY | NONBLOCK | (os.O_CREAT if create else 0)
    try:
        with folder_descriptor(path.parent, root=path.parent, create=create) as folder:
            fd = _open_at(path.name, flags, folder, path.parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise RunError(
                f"{path} is a link, not the folder's own file; rlx opens only a real file there, "
                "so remove the link."
            ) from exc
        raise RunError(f"{path} cannot be opened ({exc.strerror or exc}).") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunError(f"{path} is not a regular file; rlx opens only a real file there.")
        if info.st_size > limit:
            raise RunError(f"{path} holds {info.st_size} bytes, more than the {limit} rlx reads.")
        try:
            now = os.stat(path)
        except OSError as exc:
            raise RunError(f"{path} cannot be opened ({exc.strerror or exc}).") from exc
        if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            raise RunError(
                f"{path} changed while rlx checked it; rlx opens only a real file there."
            )
    finally:
        os.close(fd)
    return path


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


def load_json_file(path: str | Path, *, root: str | Path | None = None) -> Any:
    """The JSON in ``path``, bounded as :func:`loads_json` and :data:`MAX_JSON_BYTES`, not
    through a link (:func:`open_regular`, ``root`` as there); a RunError naming the file when
    it is missing, unreadable or not JSON."""
    path = Path(path)
    try:
        text = read_text_bounded(path, root=root)
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
    "MAX_LINE_CHARS",
    "MAX_LOG_BYTES",
    "JsonDepthError",
    "append_file",
    "atomic_file",
    "bounded_lines",
    "check_regular",
    "copy_regular",
    "folder_descriptor",
    "json_depth",
    "load_json_file",
    "loads_json",
    "move_within",
    "open_regular",
    "open_text",
    "read_regular",
    "read_text_bounded",
    "real_folder",
    "remove_entry",
    "write_atomic",
]
