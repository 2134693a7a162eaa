"""The one reader of an evaluation run's directory: ``run.json``, ``results.jsonl`` and
``report.json``, as the typed objects of :mod:`.records` and :mod:`.schema`.

``evaluate compare``, ``calibrate``, ``rejudge``, ``merge`` and the page's Evaluation view read
runs here and nowhere else.

- :func:`parse_report` -> :class:`~.schema.Report`;
- :func:`parse_records` -> :class:`~.records.Record` list: the lines of results.jsonl;
- :func:`read_run` -> :class:`Run`: a run directory; :func:`read_results` is the tolerant
  reader of a results file that a killed run may have left with a torn last line.
"""

from __future__ import annotations

import json
import os
import pathlib
from dataclasses import dataclass

from .checks import RunFileError, loads
from .manifest import Manifest
from .records import Record
from .schema import Report

class RunError(ValueError):
    """A run that cannot start, go on or be used (a RUN_DIR of other settings, one in use, bad
    data, one not finished)."""


RESULTS = "results.jsonl"
MANIFEST = "run.json"
REPORT = "report.json"


def parse_report(text: str, name: str = REPORT) -> Report:
    """A report.json, checked. Raises :class:`RunFileError`."""
    return Report.from_dict(loads(text, name), name)


def _same_keys(records: list[Record], name: str) -> None:
    if not records:
        return

    # The measures are computed for every answer; a method may be missing from some records
    # (it could not be computed for that answer, which its warnings say): the methods table
    # leaves such a method out and says so (methods_table.incomplete), so no check here.
    def keys(r: Record) -> dict:
        return {m: sorted(v) for m, v in r.uncertainty.items()}

    first = keys(records[0])
    for k, r in enumerate(records[1:], 2):
        if keys(r) != first:
            raise RunFileError(f"{name}: record {k} has other measures than the first")


def parse_records(text: str, name: str = RESULTS, max_lines: int | None = None) -> list[Record]:
    """Every line of a results.jsonl text, checked (a bad line is an error: the curves and
    metrics need them all). Raises :class:`RunFileError`."""
    records = []
    parts = text.split("\n") if max_lines is None else text.split("\n", max_lines + 1)
    # split at "\n" only: JSON leaves U+2028/U+2029 unescaped inside strings
    for i, line in enumerate(parts, 1):
        if not line.strip():
            continue
        if max_lines is not None and i > max_lines:
            raise RunFileError(f"{name} has more than {max_lines} lines")
        records.append(Record.from_dict(loads(line, f"{name} line {i}"), f"{name} line {i}"))
    if not records:
        raise RunFileError(f"{name} has no results")
    _same_keys(records, name)
    return records


def read_results(path: pathlib.Path, repair: bool = False) -> list[dict]:
    """The finished lines of a run's results.jsonl as written. A last line without its newline
    or not valid JSON (a run killed while writing it) is not counted; with ``repair`` it is cut
    off the file. Damage before the last line raises :class:`RunFileError`."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    records, good_end, pos = [], 0, 0
    while pos < len(raw):
        nl = raw.find(b"\n", pos)
        if nl < 0:
            break  # no newline: the line was cut short
        try:
            rec = json.loads(raw[pos:nl])
        except (json.JSONDecodeError, UnicodeDecodeError):
            break
        records.append(rec)
        pos = good_end = nl + 1
    if good_end < len(raw):
        rest = raw[good_end:]
        if rest.count(b"\n") > 1 or (rest.count(b"\n") == 1 and not rest.endswith(b"\n")):
            raise RunFileError(f"{path} is damaged in the middle (not just its last line); use "
                               "a new --out directory")
        if repair:
            with open(path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())
    return records


# --- a run directory --------------------------------------------------------------------------


@dataclass
class Run:
    """A finished run: its manifest (run.json), report and records, in the report's order."""

    path: pathlib.Path
    manifest: Manifest
    report: Report
    records: list[Record]


def read_run(run_dir: str | os.PathLike) -> Run:
    """Read and check a run directory. Raises :class:`RunFileError` for a missing or
    unreadable file, and for a run whose report is behind its results (not finished)."""
    path = pathlib.Path(run_dir)

    def text(name: str) -> str:
        try:
            return (path / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise RunFileError(f"cannot read {str(path / name)!r}: "
                               f"{getattr(err, 'strerror', None) or err}") from err

    manifest = Manifest.from_dict(loads(text(MANIFEST), f"{path / MANIFEST}"),
                                  str(path / MANIFEST))
    report = parse_report(text(REPORT), str(path / REPORT))
    rows = read_results(path / RESULTS)
    records = [Record.from_dict(row, f"{path / RESULTS} line {i}")
               for i, row in enumerate(rows, 1)]
    _same_keys(records, str(path / RESULTS))
    if report.n != len(records):
        raise RunFileError(
            f"{path / REPORT} covers {report.n} questions but {RESULTS} has {len(records)}: "
            "the run did not finish; run the same evaluate command again to finish it (and "
            "rewrite its report)")
    return Run(path, manifest, report, records)
