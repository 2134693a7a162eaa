"""The analyses of the page's example questions, made once and kept on disk.

The first visitor who asks an example question with the page's default options waits for its
analysis as for any other; it is then written to the store (one JSON file, the analysis's own
``to_dict``), and every later visitor who asks it with those options gets the whole analysis at
once, also after the server restarts. Only the page's fixed example questions
(``ui/assets/examples.json``) with the default options, the models loaded now and this
version's result format and verdict words, judged against the page's calibration and run (its
verdict is part of it), are ever stored or served: a visitor's own question, options or pasted
answers never fill it, and nothing a visitor sends changes a stored analysis (a cancelled or
failed analysis is not stored). The file's name is a hash of all of that, so other models or
options find nothing, and the store holds at most one file per example and setting.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import tempfile
from collections.abc import Sequence
from typing import Any

from mars_demo import texts
from mars_demo.result import SCHEMA_VERSION, AnalysisResult
from mars_demo.settings import Settings

log = logging.getLogger(__name__)


def verdict_words() -> str:
    """A hash of every ``VERDICT_*`` text: the words a verdict is made with."""
    words = {name: getattr(texts, name) for name in sorted(dir(texts))
             if name.startswith("VERDICT_")}
    return hashlib.sha256(json.dumps(words, sort_keys=True, default=str).encode("utf-8")
                          ).hexdigest()[:16]


#: the words this page's verdicts are made with: a version of the page that words its verdicts
#: otherwise finds none of the analyses kept before it, whose stored verdicts read as the old
#: page's
VERDICT_WORDS = verdict_words()


def default_folder() -> pathlib.Path:
    """Where the store lives unless the host names a folder: ``$XDG_CACHE_HOME`` (or
    ``~/.cache``) ``/mars-demo/examples``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "mars-demo" / "examples"


class ExampleStore:
    """The store of ``examples`` (their questions) in ``folder`` (None: none is kept)."""

    def __init__(self, folder: str | os.PathLike | None, examples: Sequence[str],
                 basis: str = "") -> None:
        self.folder = pathlib.Path(folder) if folder is not None else None
        self.examples = frozenset(examples)
        self.ordered = tuple(dict.fromkeys(examples))  # as the page lists them
        #: what the page's verdicts cite (its calibration and run, in words): an analysis kept
        #: under other ones holds another verdict, so it is not served
        self.basis = basis

    def _path(self, question: str, settings: Settings, defaults: Settings) -> pathlib.Path | None:
        """The file of ``question`` asked with ``settings``, or None when it is not an example
        asked with the page's ``defaults``."""
        if self.folder is None or question not in self.examples or settings != defaults:
            return None
        key = json.dumps({"question": question, "settings": settings.to_dict(),
                          "schema_version": SCHEMA_VERSION, "verdict_basis": self.basis,
                          "verdict_words": VERDICT_WORDS},
                         sort_keys=True, default=str)
        return self.folder / f"{hashlib.sha256(key.encode('utf-8')).hexdigest()[:32]}.json"

    def get(self, question: str, settings: Settings, defaults: Settings) -> AnalysisResult | None:
        """The stored analysis of an example asked with the defaults, or None (not an example,
        other options, not made yet, or a file that cannot be read, which is logged)."""
        path = self._path(question, settings, defaults)
        if path is None or not path.is_file():
            return None
        try:
            result = AnalysisResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.warning("the stored example analysis %s cannot be read: %s", path.name, err)
            return None
        return result if result.question == question else None

    def wants(self, question: str, settings: Settings, defaults: Settings) -> bool:
        """Whether an analysis of ``question`` with ``settings`` is one to keep."""
        return self._path(question, settings, defaults) is not None

    def put(self, question: str, settings: Settings, defaults: Settings,
            result: AnalysisResult) -> bool:
        """Keep ``result`` (the analysis of an example with the defaults; anything else is
        not kept). Written whole or not at all (a temporary file, then renamed); a failure is
        logged and the page goes on. Returns whether it was kept."""
        path = self._path(question, settings, defaults)
        if path is None or result.question != question:
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent,
                                             suffix=".tmp", delete=False) as f:
                json.dump(result.to_dict(), f)
            os.replace(f.name, path)
        except OSError as err:
            log.warning("the example analysis could not be kept in %s: %s", path.parent, err)
            return False
        return True


def describe(store: ExampleStore) -> dict[str, Any]:
    """What the store holds, for the host's log: its folder and how many analyses are in it."""
    if store.folder is None:
        return {"folder": None, "kept": 0}
    kept = len(list(store.folder.glob("*.json"))) if store.folder.is_dir() else 0
    return {"folder": str(store.folder), "kept": kept}
