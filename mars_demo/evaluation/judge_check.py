"""How often does a judge agree with human labels? ``evaluate check-judge FILE --judge NAMES``.

A check file is JSONL, one labelled answer a line: ``question``, ``answers`` (the references),
``answer`` (the answer to judge), ``correct`` (the human label: true/false or 1/0), and
optionally ``kind`` (a category, e.g. "sentence" or "denial", for the figures per kind). The
project ships ``data/judge_check.jsonl`` (labelled by hand before any judge was run on it)
and ``data/judge_check_holdout.jsonl`` (written by a second annotator; see ``data/README.md``).
A bad line is reported with its number and skipped, as everywhere in ``evaluate``.

A judge's figures: agreement (the share of rows where its verdict is the label), false accepts
(it said correct, the label says wrong) and false rejects (it said wrong, the label says
correct). A run given ``--judge-check FILE`` (``evaluate run`` or ``rejudge``) keeps its judge's figures in
``RUN_DIR/judge_check.json``; report.json, report.md and the page's Evaluation view show them.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field
from typing import Any, Sequence

from .data import DataError, LineError, label, question_text, read_objects, references
from .judges import Judge, Verdict

CHECK_FILE = "judge_check.json"  # in a run directory


@dataclass(frozen=True)
class CheckRow:
    question: str
    references: tuple[str, ...]
    answer: str
    correct: bool
    kind: str | None = None
    line: int | None = None


@dataclass
class CheckSet:
    path: str
    rows: list[CheckRow]
    problems: list[str]  # "FILE, line N: why" per skipped line
    fingerprint: str


def read_check_set(path: str) -> CheckSet:
    """The usable rows of a check file; every other line is in ``problems``. Raises
    :class:`DataError` for a file that cannot be read or has no usable row."""
    lines = read_objects(path, "judge check file")
    rows, problems = [], list(lines.problems)
    for n, row in lines.rows:
        try:
            answer = row.get("answer")
            if not isinstance(answer, str):
                raise LineError("'answer' must be text (the answer to judge)")
            if "correct" not in row:
                raise LineError("'correct' (the human label) is missing")
            kind = row.get("kind")
            rows.append(CheckRow(question_text(row.get("question")),
                                 tuple(references(row.get("answers"))), answer,
                                 label(row["correct"]),
                                 kind if isinstance(kind, str) else None, n))
        except LineError as err:
            problems.append(f"{path}, line {n}: {err}")
    if not rows:
        raise DataError(f"the judge check file {path!r} has no usable row", problems)
    return CheckSet(path, rows, problems, lines.fingerprint)


@dataclass
class CheckResult:
    """One judge's figures on a check set; ``disagreements``: (row, verdict) where it differs
    from the label."""

    judge: dict[str, Any]
    n: int
    agreement: float
    false_accepts: int
    false_rejects: int
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind: (n, agreeing)
    disagreements: list[tuple[CheckRow, Verdict]] = field(default_factory=list)

    def to_dict(self, file: str) -> dict[str, Any]:
        return {"file": file, "judge": self.judge, "n": self.n, "agreement": self.agreement,
                "false_accepts": self.false_accepts, "false_rejects": self.false_rejects,
                "by_kind": {k: {"n": n, "agreement": a / n} for k, (n, a) in
                            self.by_kind.items()}}


def check_judge(judge: Judge, rows: Sequence[CheckRow]) -> CheckResult:
    """``judge``'s verdicts on ``rows`` against their labels."""
    verdicts = judge.judge_many([(r.question, r.answer, r.references) for r in rows])
    false_accepts = false_rejects = 0
    by_kind: dict[str, list[int]] = {}
    wrong = []
    for row, verdict in zip(rows, verdicts):
        agrees = verdict.correct == row.correct
        if not agrees:
            wrong.append((row, verdict))
            if verdict.correct:
                false_accepts += 1
            else:
                false_rejects += 1
        if row.kind:
            counts = by_kind.setdefault(row.kind, [0, 0])
            counts[0] += 1
            counts[1] += int(agrees)
    n = len(rows)
    return CheckResult(judge.describe(), n, (n - len(wrong)) / n, false_accepts, false_rejects,
                       {k: (v[0], v[1]) for k, v in by_kind.items()}, wrong)


def _judge_name(judge: dict[str, Any]) -> str:
    name = str(judge.get("name"))
    if judge.get("threshold") is not None:
        name += f" >= {judge['threshold']}"
    return name


def format_results(results: Sequence[CheckResult], path: str) -> str:
    """The figures of each judge as a text table, then the agreement per kind of row."""
    n = results[0].n if results else 0
    width = max([len("judge")] + [len(_judge_name(r.judge)) for r in results])
    lines = [f"judge check on {path}: {n} labelled answers", "",
             f"{'judge':<{width}}  agreement  false accepts  false rejects"]
    for r in results:
        lines.append(f"{_judge_name(r.judge):<{width}}  {r.agreement * 100:8.1f}%  "
                     f"{r.false_accepts:13d}  {r.false_rejects:13d}")
    kinds = sorted({k for r in results for k in r.by_kind})
    if kinds:
        kw = max(len(k) for k in kinds)
        names = [_judge_name(r.judge) for r in results]
        lines += ["", "agreement by kind of row:",
                  f"{'kind':<{kw}}  {'n':>4}  " + "  ".join(f"{x:>10}" for x in names)]
        for k in kinds:
            count = next(r.by_kind[k][0] for r in results if k in r.by_kind)
            cells = [f"{r.by_kind[k][1] / r.by_kind[k][0] * 100:9.1f}%" if k in r.by_kind
                     else f"{'-':>10}" for r in results]
            lines.append(f"{k:<{kw}}  {count:>4}  " + "  ".join(cells))
    return "\n".join(lines) + "\n"


def save(result: CheckResult, check: CheckSet, run_dir: pathlib.Path) -> pathlib.Path:
    """Keep a run's judge check in ``RUN_DIR/judge_check.json`` (its report shows it)."""
    data = result.to_dict(pathlib.Path(check.path).name)
    data["fingerprint"] = check.fingerprint
    path = run_dir / CHECK_FILE
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def load(run_dir: pathlib.Path) -> dict[str, Any] | None:
    """A run's kept judge check (None when it has none)."""
    path = run_dir / CHECK_FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
