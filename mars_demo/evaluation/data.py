"""Labelled questions for an evaluation: a local JSONL file or a Hugging Face data set.

- A local JSONL file: one JSON object a line with ``question`` (text) and ``answers`` (a
  non-empty list of accepted reference answers), optionally ``id``, optionally ``correct``
  (true/false or 1/0: a label of the greedy answer given by you, used instead of a judge's
  verdict), and optionally the answers already generated, ``greedy`` and ``samples`` in the
  answer-set format (see :mod:`mars_demo.answers`); questions that carry them are scored
  without an LLM. A line that cannot be used (not JSON, a missing field) is reported with its
  number (counted from 1) and skipped: :attr:`Source.problems` lists every one.
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
    """A data source that cannot be read; the message says what to do. ``problems``: the bad
    lines of a file with no usable line, one message each."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


@dataclass
class Item:
    """One labelled question. ``index``: its position among the source's usable questions;
    ``answer_set``: the pre-generated answers (the source's row) or None when they must be
    generated; ``label``: the greedy answer's correctness as the line gives it (None: a judge
    decides); ``line``: its line in a local file (counted from 1; None for a Hub data set)."""

    index: int
    id: str | None
    question: str
    references: list[str]
    answer_set: dict[str, Any] | None = None
    label: bool | None = None
    line: int | None = None


@dataclass
class Source:
    name: str  # as given (a path or hf:...)
    items: list[Item]  # every usable item of the source, in order
    fingerprint: str  # sha256 of a local file; the data set id and its content fingerprint
    warnings: list[str] = field(default_factory=list)  # rows left out, and why
    problems: list[str] = field(default_factory=list)  # "FILE, line N: why" per skipped line


@dataclass
class Lines:
    """The JSON objects of a JSONL file: ``rows`` as (line number from 1, object), every line
    that is not one in ``problems`` ("FILE, line N: why"), and the file's sha256."""

    rows: list[tuple[int, dict[str, Any]]]
    problems: list[str]
    fingerprint: str


class LineError(ValueError):
    """One line of a JSONL file that cannot be used; the message says why."""


def read_objects(path: str, what: str = "data file") -> Lines:
    """Every line of ``path`` that is a JSON object; blank lines are skipped silently, other
    lines are listed in ``problems``. Raises :class:`DataError` for a file that cannot be read
    or is not UTF-8."""
    try:
        raw = pathlib.Path(path).read_bytes()
    except OSError as err:
        raise DataError(f"cannot read the {what} {path!r}: {err.strerror or err}") from err
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"the {what} {path!r} is not UTF-8 text") from err
    rows, problems = [], []
    for n, line in enumerate(text.split("\n"), 1):  # not splitlines: U+2028 is in-line
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as err:
            problems.append(f"{path}, line {n}: not valid JSON ({getattr(err, 'msg', err)})")
            continue
        if not isinstance(row, dict):
            problems.append(f"{path}, line {n}: not a JSON object")
            continue
        rows.append((n, row))
    return Lines(rows, problems, "sha256:" + hashlib.sha256(raw).hexdigest())


def references(value: Any) -> list[str]:
    """A line's ``answers``: a non-empty list of texts, de-duplicated in order."""
    if (not isinstance(value, list) or not value
            or not all(isinstance(a, str) and a.strip() for a in value)):
        raise LineError("'answers' must be a non-empty list of reference answers (text)")
    return list(dict.fromkeys(value))


def question_text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LineError("'question' must be non-empty text")
    return value


def label(value: Any, key: str = "correct") -> bool:
    """A given label: true/false or 1/0."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise LineError(f"{key!r} must be true/false or 1/0; got {json.dumps(value)[:40]}")


def _item(index: int, n: int, row: dict[str, Any]) -> Item:
    question = question_text(row.get("question"))
    refs = references(row.get("answers"))
    given = label(row["correct"]) if "correct" in row else None
    has_greedy, has_samples = "greedy" in row, "samples" in row
    if has_greedy != has_samples:
        raise LineError("give both 'greedy' and 'samples', or neither")
    answer_set = None
    if has_greedy:
        answer_set = {k: row[k] for k in ("question", "greedy", "samples", "prompt",
                                          "prompt_token_ids", "settings") if k in row}
    rid = row.get("id")
    return Item(index, None if rid is None else str(rid), question, refs, answer_set, given, n)


def read_jsonl(path: str) -> Source:
    """The usable questions of a local JSONL file; every other line is in ``problems``.
    Raises :class:`DataError` when the file cannot be read or has no usable question."""
    lines = read_objects(path)
    items: list[Item] = []
    problems = list(lines.problems)
    for n, row in lines.rows:
        try:
            items.append(_item(len(items), n, row))
        except LineError as err:
            problems.append(f"{path}, line {n}: {err}")
    problems.sort(key=_line_number)
    if not items:
        raise DataError(f"the data file {path!r} has no usable question"
                        + (f" ({len(problems)} bad line(s))" if problems else ""), problems)
    return Source(path, items, lines.fingerprint, problems=problems)


def _line_number(problem: str) -> int:
    try:
        return int(problem.rsplit(", line ", 1)[1].split(":", 1)[0])
    except (IndexError, ValueError):
        return 0


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
