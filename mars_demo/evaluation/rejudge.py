"""Re-judge a finished run: new verdicts and metrics, the answers and uncertainties as they were.

``evaluate rejudge RUN_DIR --out NEW_DIR --judge NAME`` (and/or ``--labels FILE``) reads the
run through :mod:`.runs`, decides each greedy answer's correctness again and writes a new run
directory: run.json (the old one's, with the new judge and ``rejudged_from``), results.jsonl
(every line as it was, with ``correct``, ``label`` and ``judge`` replaced), report.json,
report.md and plots. Nothing is generated or scored again: no LLM, importance or NLI model is
loaded (the ``nli`` judge loads its NLI model, nothing else).

Labels: a line of the run whose label was given (by the data's ``correct``) keeps it. A label
file (JSONL: ``correct`` true/false or 1/0, and ``index``, ``id`` or ``question`` naming the
run's question) gives labels that replace any other; the questions it does not name are judged.
A bad line of the label file is reported with its number and skipped.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
from typing import Any, Callable, Sequence

from . import judge_check
from .data import LineError, label, read_objects
from .judges import Judge
from .records import Record
from .report import write_report
from .runs import MANIFEST, RESULTS, RunError, RunFileError, read_run
from .schema import Report


def read_labels(path: str) -> tuple[list[tuple[int, str, Any, bool]], list[str]]:
    """(line, key, value, correct) of each usable line of a label file, and the problems.
    ``key`` is "index", "id" or "question" (the first the line has)."""
    lines = read_objects(path, "label file")
    labels, problems = [], list(lines.problems)
    for n, row in lines.rows:
        try:
            if "correct" not in row:
                raise LineError("'correct' (the label) is missing")
            given = label(row["correct"])
            key = next((k for k in ("index", "id", "question") if row.get(k) is not None),
                       None)
            if key is None:
                raise LineError("name the question with 'index', 'id' or 'question'")
            value = row[key]
            if key == "index" and (isinstance(value, bool) or not isinstance(value, int)):
                raise LineError("'index' must be a whole number (results.jsonl's index)")
            labels.append((n, key, value if key == "index" else str(value), given))
        except LineError as err:
            problems.append(f"{path}, line {n}: {err}")
    return labels, problems


def _label_map(records: Sequence[Record], labels, path: str) -> tuple[dict[int, bool], list[str]]:
    """Record position -> given label; warnings for labels that name no question."""
    keys = {"index": {}, "id": {}, "question": {}}
    for k, r in enumerate(records):
        keys["index"].setdefault(r.index, k)
        keys["id"].setdefault(r.id, k)
        keys["question"].setdefault(r.question, k)
    out: dict[int, bool] = {}
    unmatched = []
    for n, key, value, given in labels:
        k = keys[key].get(value)
        if k is None:
            unmatched.append(n)
        else:
            out[k] = given
    warnings = []
    if unmatched:
        shown = ", ".join(map(str, unmatched[:10])) + (" ..." if len(unmatched) > 10 else "")
        warnings.append(f"{len(unmatched)} label(s) of {pathlib.Path(path).name} name no "
                        f"question of the run (lines {shown})")
    return out, warnings


def rejudge(run_dir: str | pathlib.Path, out: str | pathlib.Path, judge: Judge | None, *,
            labels_file: str | None = None, resamples: int | None = None, plots: bool = True,
            messages: Callable[[str], None] | None = None,
            checked: tuple[Any, Any] | None = None) -> Report:
    """Write the re-judged run to ``out`` and return its report. ``judge`` None: every
    question must have a label (given in the run or by ``labels_file``). ``checked``: the
    judge's (result, check set) of :mod:`.judge_check`, kept in the new run. Raises
    :class:`RunError` for an unreadable or unfinished run, an ``out`` that holds files, or
    questions left without a label and without a judge."""
    messages = messages or (lambda m: print(m, file=sys.stderr))
    try:
        run = read_run(run_dir)
    except RunFileError as err:
        raise RunError(str(err)) from err
    out = pathlib.Path(out)
    if out.resolve() == run.path.resolve():
        raise RunError("--out must be a new directory, not the run being re-judged")
    if out.exists() and any(out.iterdir()):
        raise RunError(f"{out} is not empty; give a new --out directory")
    warnings, skipped = [], []
    given: dict[int, bool] = {}
    if labels_file:
        labels, skipped = read_labels(labels_file)
        for problem in skipped:
            messages(f"skipped {problem}")
        given, unmatched = _label_map(run.records, labels, labels_file)
        warnings += unmatched
    for k, r in enumerate(run.records):
        if r.label == "given" and k not in given:
            given[k] = r.correct  # a label the data gave stays
    todo = [k for k in range(len(run.records)) if k not in given]
    if todo and judge is None:
        raise RunError(f"{len(todo)} of {len(run.records)} questions have no label; give "
                       "--judge NAME to judge them")
    lacking = [k for k in todo if run.records[k].question is None
               or run.records[k].greedy is None or not run.records[k].references]
    if lacking:
        raise RunError(f"{RESULTS} line {lacking[0] + 1} has no question, references or greedy "
                       "answer: it cannot be judged again")
    verdicts = dict(zip(todo, judge.judge_many(
        [(run.records[k].question, run.records[k].greedy, run.records[k].references)
         for k in todo]))) if todo else {}
    out.mkdir(parents=True, exist_ok=True)
    if checked is not None:
        judge_check.save(*checked, out)
    records = []
    with open(out / RESULTS, "w", encoding="utf-8") as f:
        for k, r in enumerate(run.records):
            if k in verdicts:
                r = dataclasses.replace(r, correct=bool(verdicts[k].correct), label="judged",
                                        judge={"score": verdicts[k].score,
                                               "detail": verdicts[k].detail})
            else:
                r = dataclasses.replace(r, correct=bool(given[k]), label="given", judge=None)
            f.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")
            records.append(r)
    # every verdict given by a label: the judge decided nothing, and the run says so
    decided = judge.describe() if judge is not None and todo else {"name": "given labels",
                                                                   "threshold": None}
    manifest = dataclasses.replace(
        run.manifest, judge=decided, questions=len(records), shard=None, share_questions=None,
        rejudged_from={"run": str(run.path), "judge": run.manifest.judge,
                       "labels": pathlib.Path(labels_file).name if labels_file else None})
    (out / MANIFEST).write_text(json.dumps(manifest.to_dict(), indent=2) + "\n",
                                encoding="utf-8")
    return write_report(out, records, manifest=manifest,
                        resamples=resamples or run.report.resamples or 1000, plots=plots,
                        messages=messages, warnings=warnings, skipped_lines=skipped)
