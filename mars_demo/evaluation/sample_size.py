"""Whether a run's intervals can be trusted: below :data:`MIN_QUESTIONS` questions, or with fewer
than :data:`MIN_CLASS` right or wrong answers, the 95% bootstrap intervals of AUROC and its kin
are not to be trusted (the bootstrap resamples too few answers of the rarer class to show the
spread a new sample of questions would), and an interval without width (``[100.00, 100.00]``:
every resample gave the same value) says nothing of the spread at all. :func:`caution` says so
in words; report.md prints it above the tables and the page's Evaluation view above its own, so
that such an interval is never shown without it.

>>> from mars_demo.evaluation.schema import Entry, Report
>>> tiny = Report(data="facts.jsonl", n=5, accuracy=0.4, judge={}, models={}, settings={},
...               resamples=200, metrics={"auroc": {"confidence": {"mars": Entry(1.0, (1.0, 1.0))}}})
>>> print(caution(tiny))  # doctest: +NORMALIZE_WHITESPACE
Caution: these intervals cannot be trusted: only 5 questions (at least 30 are needed); only 2
right answers (at least 10 right and 10 wrong are needed); some intervals have no width (such
as [100.00, 100.00]: every resample gave the same value). Evaluate more questions before
drawing conclusions.
"""

from __future__ import annotations

import math
from typing import Any

#: fewer questions than this: the intervals cannot be trusted
MIN_QUESTIONS = 30
#: fewer right (or wrong) answers than this: the intervals cannot be trusted
MIN_CLASS = 10


def degenerate(report: Any) -> bool:
    """Whether some interval of the report's metrics has no width (low == high)."""
    for tables in report.metrics.values():
        for by_key in tables.values():
            for entry in by_key.values():
                ci = getattr(entry, "ci95", None)
                if ci and math.isclose(ci[0], ci[1], rel_tol=0.0, abs_tol=1e-12):
                    return True
    return False


def reasons(report: Any) -> list[str]:
    """Why the report's intervals cannot be trusted, one phrase each (empty: they can)."""
    out = []
    n = report.n
    if n < MIN_QUESTIONS:
        out.append(f"only {n} questions (at least {MIN_QUESTIONS} are needed)")
    if report.accuracy is not None and n:
        right = round(report.accuracy * n)
        rare, kind = min((right, "right"), (n - right, "wrong"))
        if rare < MIN_CLASS:
            out.append(f"only {rare} {kind} answers (at least {MIN_CLASS} right and "
                       f"{MIN_CLASS} wrong are needed)")
    if degenerate(report):
        out.append("some intervals have no width (such as [100.00, 100.00]: every resample "
                   "gave the same value)")
    return out


def caution(report: Any) -> str | None:
    """The caution of a report whose intervals cannot be trusted (:func:`reasons`), or None."""
    found = reasons(report)
    if not found:
        return None
    return ("Caution: these intervals cannot be trusted: " + "; ".join(found)
            + ". Evaluate more questions before drawing conclusions.")
