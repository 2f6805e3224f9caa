"""Collect and run the code examples of the docs (``docs/**/*.md``).

The rules every page follows, so an API change that breaks an example fails CI:

- `` ```python `` blocks run in order, in one namespace per page, in a fresh temporary folder
  (the page's working directory), with stdout captured;
- `` ```bash `` blocks run line by line: a line ``rlx ARGS`` runs ``rlx.cli.main(ARGS)`` in
  the same folder and must return 0; lines that install or build (:data:`SHOWN_ONLY`) are
  shown to the reader but not run; any other command is an error of the page;
- `` ```text `` blocks (printed output) and `` ```mermaid `` diagrams are not run;
- a page with the comment ``<!-- docs-test: ray -->`` starts Ray, so its examples run with the
  Ray tests, in a private network namespace (``tests/distributed/test_docs_ray.py``);
- a page with the comment ``<!-- docs-test: real-model -->`` trains the real pretrained model
  of ``make real-model`` (:data:`REAL_MODEL`): its examples run with the slow tests, with
  ``models/`` of the repository linked into the page's folder, and are skipped where that
  model is missing (``tests/docs/test_examples.py``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
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
    found = []
    for match in _FENCE.finditer(text):
        lang = match.group("lang")
        if lang not in RUN and lang not in NOT_RUN:
            raise ValueError(f"{path}: code block language {lang!r} is neither run {RUN} "
                             f"nor shown {NOT_RUN}")  # fmt: skip
        if lang in RUN:
            indent = len(match.group("indent"))
            body = "\n".join(line[indent:] for line in match.group("body").splitlines())
            line = text.count("\n", 0, match.start()) + 1
            page = path.relative_to(DOCS) if path.is_relative_to(DOCS) else path
            found.append(Block(str(page), line, lang, body))
    return found


def run_page(path: Path, workdir: Path) -> str:
    """Run every block of a page in ``workdir``; returns what the page printed."""
    from rlx.cli import main

    page_blocks = blocks(path.resolve())
    namespace: dict = {"__name__": "__docs__"}
    out = io.StringIO()
    old = Path.cwd()
    os.chdir(workdir)
    try:
        with contextlib.redirect_stdout(out):
            for block in page_blocks:
                where = f"{block.page}:{block.line}"
                if block.lang == "python":
                    exec(compile(block.code, where, "exec"), namespace)
                    continue
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


def _commands(script: str) -> list[str]:
    """Shell lines, with backslash continuations joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", script)
    lines = (line.split(" #")[0].strip() for line in joined.splitlines())
    return [line for line in lines if line and not line.startswith("#")]
