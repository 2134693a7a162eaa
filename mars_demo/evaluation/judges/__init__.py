"""Is an answer correct? The judges of a generated answer against reference answers.

Each judge is one module of this package holding its :class:`~.base.JudgeEntry` as ``JUDGE``
(its name, what it decides, what it needs, its threshold, how it is built); :func:`entries`
finds them, and ``evaluate``'s ``--judge`` choices and help come from there. A new judge is
one file here (and its test):

- ``contains`` (the default, :mod:`.contains`): a reference claimed in the answer as whole
  words; it reads sentences (its helper modules are inside it).
- ``em`` (:mod:`.em`): SQuAD exact match; ``f1`` (:mod:`.f1`): token F1 >= threshold;
  ``rouge`` (:mod:`.rouge`): ROUGE-L >= threshold.
- ``nli`` (:mod:`.nli`): bidirectional entailment by the run's NLI model.
- ``llm`` (:mod:`.llm`): the paper's judge prompt on an OpenAI-compatible server.

Every judge records what it is (:meth:`Judge.describe`), so a run says how "correct" was
decided. :meth:`Judge.judge_many` judges a batch (the NLI judge in one batched pass).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from .base import (NEEDS, Judge, JudgeEntry, JudgeError, JudgeOptions, Verdict,  # noqa: F401
                   exact_match, normalize_answer, token_f1)

DEFAULT_JUDGE = "contains"
_FOUND: dict[str, JudgeEntry] = {}
_ADDED: dict[str, JudgeEntry] = {}


def _find() -> dict[str, JudgeEntry]:
    """The entries of this package's modules (each ``JUDGE``), by name; the default first."""
    if not _FOUND:
        found = {}
        for info in pkgutil.iter_modules(__path__):
            module = importlib.import_module(f"{__name__}.{info.name}")
            entry = getattr(module, "JUDGE", None)
            if isinstance(entry, JudgeEntry):
                found[entry.name] = entry
        _FOUND.update(sorted(found.items(), key=lambda kv: (kv[0] != DEFAULT_JUDGE, kv[0])))
    return _FOUND


def entries() -> dict[str, JudgeEntry]:
    """Every judge by name: the modules' entries (the default first), then those added with
    :func:`register`."""
    return {**_find(), **_ADDED}


def register(entry: JudgeEntry) -> None:
    """Add a judge defined elsewhere (a plug-in, a test's probe); a name already taken is
    refused. :func:`unregister` takes it out again."""
    if entry.name in entries():
        raise ValueError(f"a judge named {entry.name!r} exists already")
    _ADDED[entry.name] = entry


def unregister(name: str) -> None:
    _ADDED.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(entries())


def entry(name: str) -> JudgeEntry:
    """The entry of ``name``; an unknown name raises ValueError naming the judges there are."""
    found = entries().get(name)
    if found is None:
        raise ValueError(f"judge must be one of {', '.join(entries())}; got {name!r}")
    return found


def make_judge(name: str, threshold: float | None = None, *, nli: Any = None,
               settings: Any = None, **server: Any) -> Judge:
    """A judge by name (:func:`entries`). ``threshold`` for one that takes it (default: its
    entry's); ``nli`` (an NLI model, see :class:`.nli.NLIJudge`) or ``settings`` (whose NLI
    model is loaded) for one that needs the NLI model; ``server`` (endpoint, model, api,
    api_key_env) for one that needs a server."""
    found = entry(name)
    if threshold is not None and found.threshold is None:
        raise ValueError(f"the {name} judge takes no threshold")
    if "nli" in found.needs and nli is None and settings is None:
        raise ValueError(f"the {name} judge needs the NLI model (give settings or nli)")
    if "server" in found.needs and not server.get("endpoint"):
        raise ValueError(f"the {name} judge needs a server: give --judge-endpoint URL")
    try:
        options = JudgeOptions(threshold=found.threshold if threshold is None else threshold,
                               nli=nli, settings=settings, **server)
    except TypeError as err:
        raise ValueError(f"the {name} judge got an unknown option ({err})") from err
    return found.build(options)
