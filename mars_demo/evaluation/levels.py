"""How often the answers at each level of the page's verdict were right in a run.

``evaluate`` records each answer's verdict level (:func:`mars_demo.verdict.verdict`, the very
words the page would show) in its line of results.jsonl (``level``); :func:`level_records` counts
the answers and the right ones per level, with a 95% Wilson score interval of the share right
(it stays inside 0..1 and is sensible for a handful of answers, unlike the normal
approximation; :mod:`mars_demo.core.intervals`). report.json keeps them as ``levels`` and
report.md as a table; the verdict of an engine given the run says a level's share beside the
run's where the run tells the levels apart, and else that it cannot
(:func:`mars_demo.verdict.run_record`).

>>> round(wilson(7, 10)[0], 3), round(wilson(7, 10)[1], 3)
(0.397, 0.892)
>>> wilson(0, 0)
(nan, nan)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.intervals import Z95, wilson  # noqa: F401  (the interval's home is core/)
from ..verdict import LEVELS, LevelRecord
from .checks import RunFileError, count_of, number


def level_records(records: Sequence[Any], run: str = "") -> dict[str, LevelRecord]:
    """Per verdict level (in :data:`~mars_demo.verdict.LEVELS` order, only those that occur):
    how many of ``records`` (a run's, with ``level`` and ``correct``) had it and how many of
    them were right. Records without a level (runs made before it was recorded) are left out."""
    counts = {level: [0, 0] for level in LEVELS}
    for record in records:
        level = getattr(record, "level", None)
        if level in counts:
            counts[level][0] += 1
            counts[level][1] += bool(record.correct)
    return {level: LevelRecord(level, right, n, *wilson(right, n), run)
            for level, (n, right) in counts.items() if n}


def to_json(levels: dict[str, LevelRecord]) -> dict[str, dict[str, Any]]:
    """report.json's ``levels``: ``{level: {"n", "right", "share", "ci95"}}``."""
    return {level: {"n": r.n, "right": r.right, "share": r.share, "ci95": [r.low, r.high]}
            for level, r in levels.items()}


def from_json(raw: Any, run: str = "") -> dict[str, LevelRecord]:
    """:func:`to_json`'s object read back, checked as a stranger's (absent: none)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RunFileError("levels is not an object")
    out = {}
    for level, entry in raw.items():
        if level not in LEVELS or not isinstance(entry, dict):
            raise RunFileError(f"levels: {str(level)[:30]!r} is not one of {', '.join(LEVELS)}")
        n = count_of(entry.get("n"), f"levels.{level}.n")
        right = count_of(entry.get("right"), f"levels.{level}.right")
        if right > n:
            raise RunFileError(f"levels.{level}: more right answers than answers")
        ci = entry.get("ci95")
        if not isinstance(ci, list) or len(ci) != 2:
            raise RunFileError(f"levels.{level}.ci95 is not [low, high]")
        low, high = (number(v, f"levels.{level}.ci95", 0.0, 1.0) for v in ci)
        out[level] = LevelRecord(level, right, n, low, high, run)
    return out


def markdown_lines(levels: dict[str, LevelRecord]) -> list[str]:
    """report.md's table of the levels: answers, right, the share right and its interval."""
    if not levels:
        return []
    lines = ["", "## The page's verdict levels", "",
             "How often the answers the page would call consistent, mostly consistent, unsure "
             "or too few tries were right here (95% Wilson interval of the share right).", "",
             "| Level | Answers | Right | Share right [95% interval] |", "|---|---|---|---|"]
    for level, r in levels.items():
        lines.append(f"| {level} | {r.n} | {r.right} | "
                     f"{r.share * 100:.1f}% [{r.low * 100:.1f}, {r.high * 100:.1f}] |")
    return lines
