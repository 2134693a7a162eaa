"""``evaluate merge OUT PART...``: the shares of one run (each made by ``evaluate run --shard
K/N``, each in its own folder, on a machine of its own or as one task of a Slurm job array)
joined into one run folder, as one process would have written it.

The parts are checked before anything is written: each must be a finished share
(:func:`~.runs.read_run`), all must be shares of the same run (the same data and its
fingerprint, limit, seed, settings, judge, batch size and number of shares:
:meth:`~.manifest.Manifest.run_key`), every share K of N must be there once, and every question
must be in one share only; a part that fails is named. The merged run's records are in the
data's order, and its report is computed from them with ``resamples`` as a run's is.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import sys
from typing import Callable, Sequence

from .judge_check import CHECK_FILE
from .records import Record
from .report import write_report
from .runs import MANIFEST, RESULTS, Run, RunError, RunFileError, read_run
from .schema import Report


def _read(part: str | pathlib.Path) -> Run:
    try:
        run = read_run(part)
    except RunFileError as err:
        raise RunError(f"the part {str(part)!r} cannot be merged: {err}") from err
    if run.manifest.shard is None:
        raise RunError(f"{run.path} is not a share of a run (it was made without --shard K/N)")
    k, n = run.manifest.shard
    got = len(run.records) + len(run.report.failed)
    if got != run.manifest.share_questions:
        raise RunError(f"{run.path} (share {k}/{n}) has {got} of its "
                       f"{run.manifest.share_questions} questions: run its evaluate run --shard "
                       f"{k}/{n} command again to finish it")
    return run


def check_parts(parts: Sequence[str | pathlib.Path]) -> list[Run]:
    """The parts read and checked, in share order; a :class:`~.runs.RunError` names the part
    that is unreadable, unfinished, of another run, missing, given twice, or holding a
    question another part holds."""
    if not parts:
        raise RunError("merge needs the output folder and at least one part")
    runs = [_read(p) for p in parts]
    first = runs[0]
    for run in runs[1:]:
        diffs = first.manifest.differences(run.manifest, f"in {first.path}", f"in {run.path}",
                                           shares=True)
        if diffs:
            raise RunError(f"{run.path} is a share of another run than {first.path} "
                           f"({'; '.join(diffs)[:600]})")
    n = first.manifest.shard[1]
    by_share: dict[int, Run] = {}
    for run in runs:
        k = run.manifest.shard[0]
        if k in by_share:
            raise RunError(f"share {k}/{n} is given twice: {by_share[k].path} and {run.path}")
        by_share[k] = run
    missing = [k for k in range(1, n + 1) if k not in by_share]
    if missing:
        raise RunError(", ".join(f"share {k}/{n}" for k in missing)
                       + f" {'is' if len(missing) == 1 else 'are'} missing: give "
                       + " and ".join(f"the folder of evaluate run --shard {k}/{n}"
                                      for k in missing))
    seen: dict[int, pathlib.Path] = {}
    for k in sorted(by_share):
        run = by_share[k]
        for index in [r.index for r in run.records] + [f.index for f in run.report.failed]:
            if index in seen:
                raise RunError(f"question {index} is in two parts: {seen[index]} and "
                               f"{run.path}")
            seen[index] = run.path
    if len(seen) != first.manifest.questions:
        raise RunError(f"the parts hold {len(seen)} of the run's {first.manifest.questions} "
                       "questions")
    return [by_share[k] for k in sorted(by_share)]


def merge(out: str | pathlib.Path, parts: Sequence[str | pathlib.Path], *,
          resamples: int = 1000, plots: bool = True,
          messages: Callable[[str], None] | None = None) -> Report:
    """Check the ``parts`` (:func:`check_parts`) and write the merged run into ``out`` (a new
    or empty folder): run.json, results.jsonl in the data's order, the judge check the parts
    kept, report.json, report.md and plots. Returns its report."""
    messages = messages or (lambda m: print(m, file=sys.stderr))
    runs = check_parts(parts)
    out = pathlib.Path(out)
    if any(out.resolve() == run.path.resolve() for run in runs):
        raise RunError("merge writes into a new folder, not into one of its parts")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunError(f"{out} is not an empty folder; give a new one to merge into")
    first = runs[0].manifest
    manifest = dataclasses.replace(first, shard=None, share_questions=None, processes=None,
                                   merged_from=[str(run.path) for run in runs])
    records: list[Record] = sorted((r for run in runs for r in run.records),
                                   key=lambda r: r.index)
    failed = sorted((f for run in runs for f in run.report.failed), key=lambda f: f.index)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunError(f"cannot create {str(out)!r}: {err}") from err
    (out / MANIFEST).write_text(json.dumps(manifest.to_dict(), indent=2) + "\n",
                                encoding="utf-8")
    with open(out / RESULTS, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
    check = runs[0].path / CHECK_FILE
    if check.is_file():
        shutil.copyfile(check, out / CHECK_FILE)
    return write_report(out, records, manifest=manifest, resamples=resamples, plots=plots,
                        messages=messages, failed=failed, warnings=manifest.data_warnings,
                        skipped_lines=manifest.skipped_lines)
