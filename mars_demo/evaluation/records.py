"""A line of ``results.jsonl`` as a typed :class:`Record`: what the run writes for each
question and what every reader gets back (``to_dict`` / ``from_dict``, checked as
:mod:`.checks` says)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..verdict import LEVELS as VERDICT_LEVELS
from .checks import (MAX_MEASURES, VARIANTS, RunFileError, json_object, number, optional_count,
                     plain_name)

LABELS = ("judged", "given")


@dataclass
class Record:
    """One question of a run.

    ``correct`` and ``label`` ("judged" by the run's judge, with its ``judge`` note
    ``{"score", "detail"}``, or "given" by the data or a label file);
    ``uncertainty[measure][scoring]``; ``methods[id][variant]``: the other uncertainty
    methods' values (empty for a run made before they existed; the variants are
    :data:`~.checks.VARIANTS`); what a re-judge needs (question, references, greedy answer);
    ``index`` (its place among the data's usable questions), ``id`` and ``line`` (its line in a
    local file); ``analysis``: the whole analysis
    (:meth:`mars_demo.result.AnalysisResult.to_dict`); ``seconds``: the batch's seconds per
    question; ``finished_at``: when it was written (UTC, ISO 8601); ``level``: the page's
    verdict on the answer (:data:`mars_demo.verdict.LEVELS`; None in runs made before it was
    recorded)."""

    correct: bool
    uncertainty: dict[str, dict[str, float]]
    methods: dict[str, dict[str, float]] = field(default_factory=dict)
    index: int | None = None
    id: str | None = None
    question: str | None = None
    references: tuple[str, ...] = ()
    greedy: str | None = None
    label: str = "judged"
    judge: dict[str, Any] | None = None
    line: int | None = None
    analysis: dict[str, Any] | None = None
    seconds: float | None = None
    finished_at: str | None = None
    level: str | None = None

    @property
    def analysis_settings(self) -> dict[str, Any]:
        """The settings the analysis recorded (empty when it has none)."""
        return dict((self.analysis or {}).get("settings") or {})

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "id": self.id, "line": self.line, "question": self.question,
            "references": list(self.references), "greedy": self.greedy,
            "correct": self.correct, "label": self.label, "judge": self.judge,
            "uncertainty": self.uncertainty, "methods": self.methods,
            "analysis": self.analysis, "seconds": self.seconds,
            "finished_at": self.finished_at, "level": self.level,
        }

    @classmethod
    def from_dict(cls, row: Any, where: str) -> "Record":
        if not isinstance(row, dict) or not isinstance(row.get("correct"), bool):
            raise RunFileError(f"{where} has no \"correct\": true/false")
        unc = row.get("uncertainty")
        if not isinstance(unc, dict) or not unc or len(unc) > MAX_MEASURES:
            raise RunFileError(f"{where} has no \"uncertainty\"")
        values = _values(unc, f"{where}: uncertainty")
        methods = row.get("methods")
        if methods is not None and (not isinstance(methods, dict) or len(methods) > MAX_MEASURES):
            raise RunFileError(f"{where}: \"methods\" is not an object of at most "
                               f"{MAX_MEASURES} methods")
        methods = _values(methods or {}, f"{where}: methods", VARIANTS)
        index = row.get("index")
        refs = row.get("references")
        label = row.get("label", "judged")
        if label not in LABELS:
            raise RunFileError(f"{where}: label must be \"judged\" or \"given\"")
        seconds = row.get("seconds")
        level = row.get("level")
        if level is not None and level not in VERDICT_LEVELS:
            raise RunFileError(f"{where}: level must be one of {', '.join(VERDICT_LEVELS)}")

        def text(key: str) -> str | None:
            return row.get(key) if isinstance(row.get(key), str) else None

        return cls(
            correct=row["correct"], uncertainty=values, methods=methods,
            index=index if isinstance(index, int) and not isinstance(index, bool) else None,
            id=None if row.get("id") is None else str(row["id"]),
            question=text("question"),
            references=tuple(r for r in refs if isinstance(r, str))
            if isinstance(refs, list) else (),
            greedy=text("greedy"), label=label,
            judge=_judge_note(row.get("judge"), where),
            line=optional_count(row.get("line"), f"{where}: line"),
            analysis=json_object(row.get("analysis"), f"{where}: analysis"),
            seconds=None if seconds is None else number(seconds, f"{where}: seconds", 0.0, 1e9),
            finished_at=text("finished_at"), level=level)


def question_key(record: Record) -> tuple:
    """A record's place in its run, whatever wrote it: its index among the data's usable
    questions (the same in one process, in each process of several and in each share), then,
    for a record without one, its id, question and line."""
    return (record.index is None, record.index or 0, record.id or "", record.question or "",
            record.line or 0)


def in_question_order(records) -> list[Record]:
    """``records`` sorted by :func:`question_key`: what a report's bootstrap resamples, so that
    its intervals do not follow the order the records came in.

    >>> later, first = Record(True, {}, index=2), Record(False, {}, index=0)
    >>> [r.index for r in in_question_order([later, first])]
    [0, 2]
    """
    return sorted(records, key=question_key)


def _judge_note(raw: Any, where: str) -> dict[str, Any] | None:
    """A judged line's ``{"score", "detail"}`` (None for a given label)."""
    note = json_object(raw, f"{where}: judge")
    if note is None:
        return None
    score = note.get("score")
    detail = note.get("detail")
    return {"score": None if score is None else number(score, f"{where}: judge.score",
                                                        -1e12, 1e12),
            "detail": detail if isinstance(detail, str) else None}


def _values(raw: dict, where: str,
            variants: tuple[str, ...] | None = None) -> dict[str, dict[str, float]]:
    """``{name: {key: finite number}}`` checked: plain names, and with ``variants`` only those
    keys."""
    values: dict[str, dict[str, float]] = {}
    for name, by_key in raw.items():
        plain_name(name, where)
        if not isinstance(by_key, dict) or not by_key:
            raise RunFileError(f"{where} lacks {name}")
        values[name] = {}
        for key, v in by_key.items():
            plain_name(key, f"{where}.{name}")
            if variants is not None and key not in variants:
                raise RunFileError(f"{where}.{name} has {key!r}, not one of "
                                   f"{', '.join(variants)}")
            values[name][key] = number(v, f"{where}.{name}.{key}", -1e12, 1e12)
    return values
