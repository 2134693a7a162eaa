"""The one reader of an evaluation run: ``run.json``, ``results.jsonl`` and ``report.json``.

``--compare``, ``--calibrate``, ``--rejudge`` and the page's Evaluation view read runs here and
nowhere else. Everything is checked as if it came from a stranger (the page reads uploads):
finite numbers in their range, the expected types, measure and scoring names that are plain
identifiers, bounded counts; a file that fails gets one :class:`RunFileError` naming the place.

- :func:`parse_report` -> :class:`Report` (the metric tables are data-driven: whatever
  measures and scorings the report holds, in its order, so a new measure needs no new code;
  the ranked table of every method, ``methods_table``, as :class:`MethodRow`).
- :func:`parse_records` / :class:`Record`: the lines of results.jsonl (each question's
  correctness, where it came from, its uncertainties and its other methods' values).
- :func:`read_run` -> :class:`Run`: a run directory; :func:`read_results` is the tolerant
  reader of a results file that a killed run may have left with a torn last line.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
from dataclasses import dataclass, field
from typing import Any

RESULTS = "results.jsonl"
MANIFEST = "run.json"
REPORT = "report.json"
DIFF = "mars_minus_length_normalized"  # the paired MARS - LN entry of a measure
#: the variants of a method's values (issue 19's contract): scored with length-normalized or
#: MARS scoring, or one value for a method that reads no sequence score
VARIANTS = ("length_normalized", "mars", "value")
MAX_MEASURES = 64
MAX_WARNINGS = 50
TEXT_CHARS = 500  # longer strings of a report are cut
NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")  # a measure, method, scoring or variant name
#: the range of each metric's value; the paired differences get +- the width
RANGES = {"auroc": (0.0, 1.0), "auprc": (0.0, 1.0), "aurac": (0.0, 1.0), "prr": (-1e6, 1.0)}


class RunFileError(ValueError):
    """A run file that cannot be read or used; the message says where, in one line."""


# --- checked values ---------------------------------------------------------------------------


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def loads(text: str, name: str) -> Any:
    """JSON without NaN/Infinity; errors as :class:`RunFileError`."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError as err:
        raise RunFileError(f"{name} is nested too deeply") from err
    except ValueError as err:  # JSONDecodeError included
        raise RunFileError(f"{name} is not valid JSON ({str(err)[:120]})") from err


def number(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunFileError(f"{where} is not a number")
    value = float(value)
    if not math.isfinite(value) or not low <= value <= high:
        raise RunFileError(f"{where} = {value:.4g} is outside [{low:g}, {high:g}]")
    return value


def _count(value: Any, where: str, high: int = 10**9) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise RunFileError(f"{where} is not a count")
    return value


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def _name(key: Any, where: str) -> str:
    if not isinstance(key, str) or not NAME.fullmatch(key):
        raise RunFileError(f"{where} has a key that is not a measure or scoring name")
    return key


@dataclass(frozen=True)
class Entry:
    """A metric with its 95% interval; ``value`` None: undefined, ``reason`` says why."""

    value: float | None
    ci95: tuple[float, float] | None = None
    reason: str | None = None

    @classmethod
    def from_dict(cls, raw: Any, where: str, low: float, high: float) -> "Entry":
        if not isinstance(raw, dict):
            raise RunFileError(f"{where} is missing")
        if raw.get("value") is None:
            return cls(None, None, _text(raw.get("reason") or "undefined"))
        value = number(raw["value"], where, low, high)
        ci = raw.get("ci95")
        if ci is not None:
            if not isinstance(ci, list) or len(ci) != 2:
                raise RunFileError(f"{where}.ci95 is not [low, high]")
            ci = (number(ci[0], f"{where}.ci95", low, high),
                  number(ci[1], f"{where}.ci95", low, high))
        return cls(value, ci, _text(raw["reason"]) if raw.get("reason") else None)


# --- report.json ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodRow:
    """A row of report.json's ``methods_table``: ``name`` and ``variant``, its ``label``,
    ``metrics[metric]`` (auroc, auprc, prr) and ``vs_best``, its AUROC minus the best MARS
    row's (paired)."""

    name: str
    variant: str
    label: str
    metrics: dict[str, Entry]
    vs_best: Entry


@dataclass
class Report:
    """The parts of a report.json that readers use, checked. ``metrics[metric][measure][key]``
    with key a scoring or :data:`DIFF`; ``raw``: the whole JSON as read."""

    data: str
    n: int
    accuracy: float | None
    judge: dict[str, Any]
    models: dict[str, Any]
    settings: dict[str, Any]
    resamples: int | None
    metrics: dict[str, dict[str, dict[str, Entry]]]
    labels: dict[str, int] | None = None
    judge_check: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    methods: list[MethodRow] = field(default_factory=list)  # methods_table, ranked
    best_mars: str | None = None  # the label of the best MARS row
    warnings: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def measures(self) -> list[str]:
        return list(self.metrics["auroc"])

    def scorings(self, measure: str) -> list[str]:
        return [k for k in self.metrics["auroc"][measure] if k != DIFF]

    def rows(self) -> list[tuple[str, str]]:
        """(measure, scoring) of every method, scoring by scoring (the paper's Table 1 order:
        the baselines, then each with MARS)."""
        scorings = list(dict.fromkeys(s for m in self.measures for s in self.scorings(m)))
        return [(m, s) for s in scorings for m in self.measures if s in self.scorings(m)]

    def paired(self) -> list[str]:
        """The measures that have a paired MARS - LN entry."""
        return [m for m in self.measures if DIFF in self.metrics["auroc"][m]]

    def judge_text(self) -> str:
        """"contains", "f1 ≥ 0.5", "llm (model at endpoint)"."""
        text = _text(self.judge.get("name", "?"))
        if self.judge.get("threshold") is not None:
            text += f" ≥ {_text(self.judge['threshold'])}"
        if self.judge.get("model"):
            text += f" ({_text(self.judge['model'])})"
        return text


def _metric_table(raw: Any, metric: str, where: str) -> dict[str, dict[str, Entry]]:
    if not isinstance(raw, dict) or not raw:
        raise RunFileError(f"{where} is missing")
    if len(raw) > MAX_MEASURES:
        raise RunFileError(f"{where} has more than {MAX_MEASURES} measures")
    low, high = RANGES.get(metric, (-1e6, 1e6))
    width = high - low
    table = {}
    for measure, row in raw.items():
        _name(measure, where)
        if not isinstance(row, dict) or not row or len(row) > MAX_MEASURES:
            raise RunFileError(f"{where}.{measure} is missing")
        table[measure] = {}
        for key, entry in row.items():
            _name(key, f"{where}.{measure}")
            lo, hi = (-width, width) if key == DIFF else (low, high)
            table[measure][key] = Entry.from_dict(entry, f"{where}.{measure}.{key}", lo, hi)
    return table


def _optional_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _judge_check(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RunFileError("judge_check is not an object")
    w = "judge_check"
    return {"file": _text(raw.get("file", "?")), "n": _count(raw.get("n"), f"{w}.n"),
            "agreement": number(raw.get("agreement"), f"{w}.agreement", 0.0, 1.0),
            "false_accepts": _count(raw.get("false_accepts"), f"{w}.false_accepts"),
            "false_rejects": _count(raw.get("false_rejects"), f"{w}.false_rejects")}


def _calibration(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RunFileError("calibration is not an object")
    w = "calibration"
    out = {"measure": _name(raw.get("measure"), f"{w}.measure"),
           "scoring": _name(raw.get("scoring"), f"{w}.scoring"),
           "folds": _count(raw.get("folds"), f"{w}.folds", 1000)}
    for key in ("brier", "brier_constant", "ece"):
        out[key] = number(raw.get(key), f"{w}.{key}", 0.0, 1.0)
    return out


def _methods_table(raw: Any) -> tuple[list[MethodRow], str | None]:
    """report.json's ``methods_table`` (absent in reports made before it: no rows)."""
    if raw is None:
        return [], None
    w = "methods_table"
    if not isinstance(raw, dict) or not isinstance(raw.get("rows"), list):
        raise RunFileError(f"{w} has no \"rows\"")
    if len(raw["rows"]) > MAX_MEASURES * len(VARIANTS):
        raise RunFileError(f"{w} has more than {MAX_MEASURES * len(VARIANTS)} rows")
    rows = []
    for k, row in enumerate(raw["rows"], 1):
        where = f"{w}.rows[{k}]"
        if not isinstance(row, dict):
            raise RunFileError(f"{where} is not an object")
        name, variant = _name(row.get("name"), where), _name(row.get("variant"), where)
        metrics = {m: Entry.from_dict(row.get(m), f"{where}.{m}", *RANGES[m])
                   for m in ("auroc", "auprc", "prr")}
        width = RANGES["auroc"][1] - RANGES["auroc"][0]
        vs_best = Entry.from_dict(row.get("auroc_minus_best_mars"),
                                  f"{where}.auroc_minus_best_mars", -width, width)
        rows.append(MethodRow(name, variant, _text(row.get("label") or name), metrics, vs_best))
    best = raw.get("best_mars")
    return rows, _text(best.get("label")) if isinstance(best, dict) else None


def parse_report(text: str, name: str = REPORT) -> Report:
    """A report.json, checked. Raises :class:`RunFileError`."""
    data = loads(text, name)
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        raise RunFileError(f"{name} has no \"metrics\" (is it an evaluation run's report.json?)")
    metrics = {"auroc": _metric_table(data["metrics"].get("auroc"), "auroc",
                                      "metrics.auroc")}
    for metric, table in data["metrics"].items():
        if metric != "auroc":
            metrics[_name(metric, "metrics")] = _metric_table(table, metric, f"metrics.{metric}")
    n = _count(data.get("n"), f"{name}: n")
    accuracy = data.get("accuracy")
    accuracy = None if accuracy is None else number(accuracy, "accuracy", 0.0, 1.0)
    labels = data.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            raise RunFileError("labels is not an object")
        labels = {k: _count(labels.get(k), f"labels.{k}") for k in ("given", "judged")}
    boot = _optional_dict(data.get("bootstrap"))
    resamples = boot.get("resamples")
    warnings = data.get("warnings") if isinstance(data.get("warnings"), list) else []
    methods, best_mars = _methods_table(data.get("methods_table"))
    return Report(
        data=_text(data.get("data", "?")), n=n, accuracy=accuracy,
        judge=_optional_dict(data.get("judge")),
        models={k: _text(v) if v is not None else None
                for k, v in _optional_dict(data.get("models")).items()},
        settings=_optional_dict(data.get("settings")),
        resamples=resamples if isinstance(resamples, int) and not isinstance(resamples, bool)
        else None,
        metrics=metrics, labels=labels, judge_check=_judge_check(data.get("judge_check")),
        calibration=_calibration(data.get("calibration")),
        methods=methods, best_mars=best_mars,
        warnings=[_text(w) for w in warnings[:MAX_WARNINGS]], raw=data)


# --- results.jsonl ----------------------------------------------------------------------------


@dataclass
class Record:
    """One question of a run: ``correct`` and ``label`` ("judged" by the run's judge, or
    "given" by the data or a label file), ``uncertainty[measure][scoring]``, and what a
    re-judge needs (question, references, greedy answer). ``methods[id][variant]``: the other
    uncertainty methods' values (empty for a run made before they existed; the variants are
    :data:`VARIANTS`). ``data``: the line as read."""

    correct: bool
    uncertainty: dict[str, dict[str, float]]
    methods: dict[str, dict[str, float]] = field(default_factory=dict)
    index: int | None = None
    id: str | None = None
    question: str | None = None
    references: tuple[str, ...] = ()
    greedy: str | None = None
    label: str = "judged"
    data: dict[str, Any] = field(default_factory=dict)

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
        if label not in ("judged", "given"):
            raise RunFileError(f"{where}: label must be \"judged\" or \"given\"")
        return cls(
            correct=row["correct"], uncertainty=values, methods=methods,
            index=index if isinstance(index, int) and not isinstance(index, bool) else None,
            id=None if row.get("id") is None else str(row["id"]),
            question=row.get("question") if isinstance(row.get("question"), str) else None,
            references=tuple(r for r in refs if isinstance(r, str))
            if isinstance(refs, list) else (),
            greedy=row.get("greedy") if isinstance(row.get("greedy"), str) else None,
            label=label, data=row)


def _values(raw: dict, where: str,
            variants: tuple[str, ...] | None = None) -> dict[str, dict[str, float]]:
    """``{name: {key: finite number}}`` checked: plain names, and with ``variants`` only those
    keys."""
    values: dict[str, dict[str, float]] = {}
    for name, by_key in raw.items():
        _name(name, where)
        if not isinstance(by_key, dict) or not by_key:
            raise RunFileError(f"{where} lacks {name}")
        values[name] = {}
        for key, v in by_key.items():
            _name(key, f"{where}.{name}")
            if variants is not None and key not in variants:
                raise RunFileError(f"{where}.{name} has {key!r}, not one of "
                                   f"{', '.join(variants)}")
            values[name][key] = number(v, f"{where}.{name}.{key}", -1e12, 1e12)
    return values


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
    manifest: dict[str, Any]
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

    manifest = loads(text(MANIFEST), f"{path / MANIFEST}")
    if not isinstance(manifest, dict):
        raise RunFileError(f"{path / MANIFEST} is not a run's manifest")
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
