"""MkDocs hooks: add the generated pages of ``gen_pages.py`` to every build.

The pages are made in memory from the code (nothing generated is committed), so a default
changed in a config dataclass or a rule added to the doctor shows up in the next build.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).parent))

import gen_pages


def on_files(files: Files, config) -> Files:
    for path, content in gen_pages.pages().items():
        text = content() if callable(content) else content
        files.append(File.generated(config, path, content=text))
    return files
