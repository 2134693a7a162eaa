"""Griffe extension: the keywords of ``analyze``, ``score`` and ``Engine`` in the API reference,
one line each, from the option schema.

Their docstrings hold one line, :data:`mars_demo.options.KEYWORDS_LINE`, which the
``@documented`` decorator replaces when the package is imported (so ``help()`` shows every
keyword with its type, range and default). mkdocstrings reads the source, so this extension
puts the same text into the page: the docstring of the imported object, which importing
``mars_demo.options`` and the engine's module does without loading any model or heavy library.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import griffe

ROOT = str(Path(__file__).resolve().parents[2])  # the checkout the site is built from


class SchemaKeywords(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        if ROOT not in sys.path[:1]:
            sys.path.insert(0, ROOT)
        from mars_demo.options import KEYWORDS_LINE

        if obj.docstring is None or KEYWORDS_LINE not in obj.docstring.value:
            return
        found = importlib.import_module(obj.module.path)
        for name in obj.path[len(obj.module.path) + 1:].split("."):
            found = getattr(found, name)
        obj.docstring.value = inspect.getdoc(found)
