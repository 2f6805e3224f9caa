"""Collect and run the code examples of the docs (``docs/**/*.md``).

The rules every page follows, so an API change that breaks an example fails CI:

- `` ```python `` blocks run in order, in one namespace per page, in a fresh temporary folder
  (the page's working directory), with stdout captured;
- `` ```bash `` blocks run line by line: a line ``rlx ARGS`` runs ``rlx.cli.main(ARGS)`` in
  the same folder and must return 0; lines that install or build (:data:`SHOWN_ONLY`) are
  shown to the reader but not run; any other command is an error of the page;
- `` ```text `` blocks (printed output) and `` ```mermaid `` diagrams are not run; a ``text``
  block right after a ``python`` block (nothing but blank lines between) is what that block
  prints, and is compared with it line by line (:func:`mismatch`): words exactly, numbers to
  the last digit shown unless the page states ``<!-- docs-output: numbers within N% -->``
  (a page whose examples train, where another CPU's float rounding moves the figures). Where
  a printed result cannot be held even so (moves a trained network picks), the page puts
  ``<!-- docs-output: not compared: REASON -->`` between the blocks, and the reason;
- a page with the comment ``<!-- docs-test: ray -->`` starts Ray, so its examples run with the
  Ray tests, in a private network namespace (``tests/distributed/test_docs_ray.py``);
- a page with the comment ``<!-- docs-test: real-model -->`` trains the real pretrained model
  of ``make real-model`` (:data:`REAL_MODEL`): its examples run with the slow tests, with
  ``models/`` of the repository linked into the page's folder, and are skipped where that
  model is missing (``tests/docs/test_examples.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
RAY_MARK = "<!-- docs-test: ray -->"
REAL_MODEL_MARK = "<!-- docs-test: real-model -->"
REAL_MODEL = Path(
    os.environ.get("RLX_REAL_MODEL", DOCS.parent / "models" / "smollm2-135m-instruct")
)
"""The folder ``make real-model`` writes (SmolLM2-135M-Instruct), as the pages name it."""
# Commands a reader runs once to set up, not examples of rlx: shown, not run.
SHOWN_ONLY = ("pip ", "make ", "git ", "cd ", "ray start", "export ", "unshare ")
RUN = ("python", "bash")
NOT_RUN = ("text", "mermaid", "console", "json", "yaml", "")

_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
    flags=re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    shown: str | None = None
    """the ``text`` block right after a ``python`` block: what the page says it prints"""


def pages(ray: bool | None = None) -> list[Path]:
    """The Markdown pages with runnable blocks (``ray``: only Ray pages, only others, all)."""
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text()
        if ray is not None and (RAY_MARK in text) != ray:
            continue
        if blocks(path):
            found.append(path)
    return found


def needs_real_model(path: Path) -> bool:
    """Whether a page trains the real model of ``make real-model`` (:data:`REAL_MODEL_MARK`)."""
    return REAL_MODEL_MARK in path.read_text()


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    found: list[Block] = []
    previous_end, previous_lang = -1, ""
    for match in _FENCE.finditer(text):
        lang = match.group("lang")
        if lang not in RUN and lang not in NOT_RUN:
            raise ValueError(f"{path}: code block language {lang!r} is neither run {RUN} "
                             f"nor shown {NOT_RUN}")  # fmt: skip
        indent = len(match.group("indent"))
        body = "\n".join(line[indent:] for line in match.group("body").splitlines())
        follows = previous_lang == "python" and not text[previous_end : match.start()].strip()
        if lang == "text" and follows and found:
            found[-1] = dataclasses.replace(found[-1], shown=body)
        if lang in RUN:
            line = text.count("\n", 0, match.start()) + 1
            page = path.relative_to(DOCS) if path.is_relative_to(DOCS) else path
            found.append(Block(str(page), line, lang, body))
        previous_end, previous_lang = match.end(), lang
    return found


def run_page(path: Path, workdir: Path, printed: list | None = None) -> str:
    """Run every block of a page in ``workdir``; returns what the page printed. A python
    block followed by a ``text`` block must print what that block shows (:func:`mismatch`,
    within the page's :func:`tolerance`); ``printed``, when given, collects
    ``(block, what it printed)`` instead of comparing."""
    from rlx.cli import main

    page_blocks = blocks(path.resolve())
    rel = tolerance(path.resolve())
    namespace: dict = {"__name__": "__docs__"}
    out = io.StringIO()
    old = Path.cwd()
    os.chdir(workdir)
    try:
        for block in page_blocks:
            where = f"{block.page}:{block.line}"
            if block.lang == "python":
                terminal = io.StringIO()  # stdout and rlx's stderr lines, as a terminal shows
                one, said = Tee(terminal), RlxLines(terminal)
                with contextlib.redirect_stdout(one), contextlib.redirect_stderr(said):
                    exec(compile(block.code, where, "exec"), namespace)
                out.write(one.getvalue())
                if block.shown is None:
                    continue
                if printed is not None:
                    printed.append((block, one.getvalue(), terminal.getvalue()))
                    continue
                wrong = mismatch(block.shown, one.getvalue(), rel)
                if wrong is not None and mismatch(block.shown, terminal.getvalue(), rel) is None:
                    wrong = None  # the page shows rlx's own stderr lines too, as printed
                assert wrong is None, f"{where} prints otherwise than the page shows: {wrong}"
                continue
            with contextlib.redirect_stdout(out):
                for command in _commands(block.code):
                    if command.startswith(SHOWN_ONLY):
                        continue
                    argv = shlex.split(command)
                    assert argv[0] == "rlx", f"{where}: only rlx commands run, not {command!r}"
                    code = main(argv[1:])
                    assert code == 0, f"{where}: {command!r} exited with {code}"
    finally:
        os.chdir(old)
    return out.getvalue()


_TOLERANCE = re.compile(r"<!-- docs-output: numbers within (?P<percent>[0-9.]+)% -->")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
ELIDED = "..."
"""A line of a shown output that stands for any number of printed lines."""


def tolerance(path: Path) -> float:
    """How far a printed number may be from the one the page shows, relative to it: 0 (the
    same digits) unless the page says ``<!-- docs-output: numbers within N% -->``, as a page
    whose examples train must, since another CPU rounds otherwise."""
    found = _TOLERANCE.search(path.read_text())
    return 0.0 if found is None else float(found.group("percent")) / 100


def _same_line(shown: str, printed: str, rel: float) -> bool:
    """The words equal, and each number within ``rel`` of the shown one (a decimal may also
    be off by one unit of its last digit shown, for rounding). A shown line that ends in
    ``...`` (:data:`ELIDED`) shows the start of the printed one."""
    shown, printed = " ".join(shown.split()), " ".join(printed.split())
    if shown.endswith(ELIDED) and shown != ELIDED:
        shown = shown[: -len(ELIDED)].rstrip()
        printed = printed[: len(shown)]
    if _NUMBER.split(shown) != _NUMBER.split(printed):
        return False
    for a, b in zip(_NUMBER.findall(shown), _NUMBER.findall(printed), strict=True):
        decimals = a.split(".")[1] if "." in a and "e" not in a.lower() else ""
        slack = 10.0 ** -len(decimals) if decimals else 0.0  # a count is never rounded
        if abs(float(b) - float(a)) > (rel * abs(float(a)) + slack) * (1 + 1e-9):
            return False
    return True


class Tee(io.StringIO):
    """A stdout that also writes into ``terminal``."""

    def __init__(self, terminal: io.StringIO) -> None:
        super().__init__()
        self.terminal = terminal

    def write(self, text: str) -> int:
        self.terminal.write(text)
        return super().write(text)


class RlxLines(io.StringIO):
    """Stderr as a page shows it: the lines rlx writes there (``rlx: ...``, ``rlx doctor:
    ...``; :data:`RLX_LINE`) go into ``terminal`` beside stdout, in the order a terminal shows
    them; the rest (libraries' warnings) go on to the real stderr."""

    def __init__(self, terminal: io.StringIO) -> None:
        super().__init__()
        self.terminal, self.stderr = terminal, sys.stderr

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if RLX_LINE.match(line):
                self.terminal.write(line + "\n")
            elif line.strip():
                self.stderr.write(line + "\n")
        return len(text)


RLX_LINE = re.compile(r"^rlx( [a-z0-9-]+)?: ")
"""A line rlx writes to stderr: its notes, the live doctor's findings, a healing's steps."""


def mismatch(shown: str, printed: str, rel: float = 0.0) -> str | None:
    """None when ``printed`` is what ``shown`` shows, else the first line that differs. A
    shown line ``...`` stands for any printed lines. (A page shows what its code printed, or
    that with rlx's own stderr lines where it shows them: :func:`run_page` tries both.)"""
    return _lines_mismatch(shown.strip("\n").splitlines(), printed.strip("\n").splitlines(), rel)


def _lines_mismatch(shown: list[str], printed: list[str], rel: float) -> str | None:
    want = [line for line in shown if line.strip()]
    got = [line for line in printed if line.strip()]
    i = 0
    for k, line in enumerate(want):
        if line.strip() == ELIDED:
            continue
        elided = k > 0 and want[k - 1].strip() == ELIDED
        while elided and i < len(got) and not _same_line(line, got[i], rel):
            i += 1
        if i >= len(got):
            return f"shown {line!r}, printed nothing more"
        if not _same_line(line, got[i], rel):
            return f"shown {line!r}, printed {got[i]!r}"
        i += 1
    if i < len(got) and not (want and want[-1].strip() == ELIDED):
        return f"printed {got[i]!r} beyond what the page shows"
    return None


def _commands(script: str) -> list[str]:
    """Shell lines, with backslash continuations joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", script)
    lines = (line.split(" #")[0].strip() for line in joined.splitlines())
    return [line for line in lines if line and not line.startswith("#")]
