"""Labelled questions for an evaluation: a local JSONL file or a Hugging Face data set.

- A local JSONL file: one JSON object a line with ``question`` (text) and ``answers`` (a
  non-empty list of accepted reference answers), optionally ``id``, and optionally the answers
  already generated, ``greedy`` and ``samples`` in the answer-set format (see
  :mod:`mars_demo.answers`); questions that carry them are scored without an LLM.
- ``hf:trivia_qa`` (``mandarjoshi/trivia_qa``, config ``rc.nocontext``, split ``validation``;
  references: the answer's value and aliases), ``hf:nq_open``
  (``google-research-datasets/nq_open``, ``validation``) and ``hf:web_questions``
  (``Stanford/web_questions``, ``train`` + ``test`` combined, as the paper's appendix says);
  ``hf:NAME:SPLIT`` picks one split instead (e.g. ``hf:web_questions:test``).

``limit`` takes a seeded random subset (numpy ``default_rng(seed)``), kept in the source's order.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any

HF_SOURCES: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    "trivia_qa": ("mandarjoshi/trivia_qa", "rc.nocontext", ("validation",)),
    "nq_open": ("google-research-datasets/nq_open", None, ("validation",)),
    "web_questions": ("Stanford/web_questions", None, ("train", "test")),
}


class DataError(ValueError):
    """A data source that cannot be read; the message says what to do."""


@dataclass
class Item:
    """One labelled question. ``index``: its position in the source; ``answer_set``: the
    pre-generated answers (the source's row) or None when they must be generated."""

    index: int
    id: str | None
    question: str
    references: list[str]
    answer_set: dict[str, Any] | None = None


@dataclass
class Source:
    name: str  # as given (a path or hf:...)
    items: list[Item]  # every item of the source, in order
    fingerprint: str  # sha256 of a local file; the data set id and its content fingerprint
    warnings: list[str] = field(default_factory=list)  # rows left out, and why


def _references(value: Any, where: str) -> list[str]:
    if (not isinstance(value, list) or not value
            or not all(isinstance(a, str) and a.strip() for a in value)):
        raise DataError(f"{where}: 'answers' must be a non-empty list of reference answers (text)")
    return list(dict.fromkeys(value))  # de-duplicated, in order


def read_jsonl(path: str) -> Source:
    p = pathlib.Path(path)
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise DataError(f"cannot read the data file {path!r}: {err.strerror or err}") from err
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"the data file {path!r} is not UTF-8 text") from err
    items: list[Item] = []
    for n, line in enumerate(text.split("\n"), 1):  # not splitlines: U+2028 is in-line
        if not line.strip():
            continue
        where = f"{path}, line {n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{where}: not valid JSON ({err.msg})") from err
        if not isinstance(row, dict):
            raise DataError(f"{where}: must be a JSON object with question and answers")
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            raise DataError(f"{where}: 'question' must be non-empty text")
        refs = _references(row.get("answers"), where)
        has_greedy, has_samples = "greedy" in row, "samples" in row
        if has_greedy != has_samples:
            raise DataError(f"{where}: give both 'greedy' and 'samples', or neither")
        answer_set = None
        if has_greedy:
            answer_set = {k: row[k] for k in ("question", "greedy", "samples", "prompt",
                                              "prompt_token_ids", "settings") if k in row}
        rid = row.get("id")
        items.append(Item(len(items), None if rid is None else str(rid), question, refs,
                          answer_set))
    if not items:
        raise DataError(f"the data file {path!r} has no questions")
    return Source(path, items, "sha256:" + hashlib.sha256(raw).hexdigest())


def _offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def read_hub(source: str) -> Source:
    parts = source[3:].split(":")
    name = parts[0]
    if name not in HF_SOURCES or len(parts) > 2:
        raise DataError(
            f"unknown data set {source!r}; known: "
            + ", ".join(f"hf:{k}" for k in HF_SOURCES) + " (optionally hf:NAME:SPLIT)"
        )
    repo, config, splits = HF_SOURCES[name]
    if len(parts) == 2:
        splits = (parts[1],)
    try:
        import datasets

        datasets.logging.set_verbosity_error()
        tables = [datasets.load_dataset(repo, config, split=s) for s in splits]
    except Exception as err:  # datasets raises ConnectionError, FileNotFoundError, ValueError...
        what = f"{repo}" + (f" ({config})" if config else "") + f", split {'+'.join(splits)}"
        if _offline():
            raise DataError(
                f"cannot load the Hugging Face data set {what}: offline (HF_HUB_OFFLINE or "
                "HF_DATASETS_OFFLINE is set) and it is not in the local cache; run once with "
                "network access, or give a local JSONL file with --data"
            ) from err
        detail = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise DataError(f"cannot load the Hugging Face data set {what}: {detail}") from err
    items: list[Item] = []
    skipped = rows = 0
    for table in tables:
        for row in table:
            rows += 1
            if name == "trivia_qa":
                ans = row["answer"]
                refs = [ans["value"], *ans.get("aliases", [])]
                rid = row.get("question_id")
            elif name == "nq_open":
                refs, rid = list(row["answer"]), None
            else:
                refs, rid = list(row["answers"]), row.get("url")
            refs = [r for r in dict.fromkeys(refs) if isinstance(r, str) and r.strip()]
            if not refs:
                skipped += 1
                continue
            items.append(Item(len(items), rid, row["question"], refs))
    # the datasets library's fingerprint of each table (from its files): an updated data set
    # changes it, so a run of the old one is not resumed on the new one
    content = "+".join(str(getattr(t, "_fingerprint", "?")) for t in tables)
    fingerprint = f"{repo}:{config or ''}:{'+'.join(splits)}:{content}"
    warnings = [f"{skipped} of {rows} rows of {source} have no reference answer and are left out"
                ] if skipped else []
    return Source(source, items, fingerprint, warnings)


def load_source(source: str) -> Source:
    if source.startswith("hf:"):
        return read_hub(source)
    return read_jsonl(source)


def select(items: list[Item], limit: int | None, seed: int) -> list[Item]:
    """Every item, or a seeded random subset of ``limit`` items in the source's order."""
    if limit is None or limit >= len(items):
        return list(items)
    import numpy as np

    chosen = np.random.default_rng(seed).choice(len(items), size=limit, replace=False)
    return [items[i] for i in sorted(int(i) for i in chosen)]
