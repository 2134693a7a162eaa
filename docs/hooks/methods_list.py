"""MkDocs hook: fills docs/methods.md's list of methods from the registry when the site is built
(``hooks: [docs/hooks/methods_list.py]`` in mkdocs.yml), so a new method is listed with no
edit of the page.

The list is read from the checkout the site is built from: its root goes first on the import
path, so ``mkdocs build`` and ``mkdocs serve`` work from a clone whether or not the package is
installed, and never list the methods of another installed copy."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])


def on_startup(**kwargs) -> None:
    if ROOT not in sys.path[:1]:
        sys.path.insert(0, ROOT)


def on_page_markdown(markdown: str, page=None, **kwargs) -> str:
    from mars_demo.methods.listing import fill

    return fill(markdown)
