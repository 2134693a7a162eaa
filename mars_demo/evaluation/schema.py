"""An evaluation run's files as typed objects, and their JSON form, defined once.

The run writes these objects and every reader gets them back: a :class:`Record` is a line of
``results.jsonl``, a :class:`Report` is ``report.json`` (its metric tables of :class:`Entry`,
its :class:`MethodsTable` of :class:`MethodRow`, its :class:`Failure` list), a :class:`Manifest`
is ``run.json``. Each has ``to_dict`` (what is written) and ``from_dict`` (what is read back,
checked as if it came from a stranger, since the page reads uploads: finite numbers in their
range, the expected types, measure and scoring names that are plain identifiers, bounded counts;
a value that fails gets one :class:`RunFileError` naming the place). ``from_dict(x.to_dict())``
gives ``x`` back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .levels import from_json as levels_from_json
from .levels import to_json as levels_json
from .checks import (COLUMN, DIFF, MAX_MEASURES, MAX_WARNINGS, RANGES, TEXT_CHARS,  # noqa: F401
                     VARIANTS, VS_BEST, WIDE, RunFileError, count_of, plain_name, json_object,
                     optional_count, text_list, short_text, number)

# --- metric entries ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """A metric with its 95% interval; ``value`` None: undefined, ``reason`` says why;
    ``resamples_used``: the bootstrap resamples that had both classes, when fewer than asked."""

    value: float | None
    ci95: tuple[float, float] | None = None
    reason: str | None = None
    resamples_used: int | None = None

    @classmethod
    def of(cls, computed: Any) -> "Entry":
        """The entry of a :class:`~.metrics.MetricValue`."""
        ci = None if computed.ci95 is None else (float(computed.ci95[0]),
                                                 float(computed.ci95[1]))
        return cls(None if computed.value is None else float(computed.value), ci,
                   computed.reason or None, computed.resamples_used)

    def text(self, scale: float = 100.0, signed: bool = False) -> str:
        """"77.97 [74.10, 81.52]" (x ``scale``), or "n/a (why)"."""
        if self.value is None:
            return "n/a" + (f" ({self.reason})" if self.reason else "")
        fmt = "{:+.2f}" if signed else "{:.2f}"
        text = fmt.format(self.value * scale)
        if self.ci95:
            text += f" [{self.ci95[0] * scale:.2f}, {self.ci95[1] * scale:.2f}]"
        return text

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value,
                               "ci95": None if self.ci95 is None else list(self.ci95)}
        if self.reason:
            out["reason"] = self.reason
        if self.resamples_used is not None:
            out["resamples_used"] = self.resamples_used
        return out

    @classmethod
    def from_dict(cls, raw: Any, where: str, low: float, high: float) -> "Entry":
        if not isinstance(raw, dict):
            raise RunFileError(f"{where} is missing")
        used = optional_count(raw.get("resamples_used"), f"{where}.resamples_used")
        if raw.get("value") is None:
            return cls(None, None, short_text(raw.get("reason") or "undefined"), used)
        value = number(raw["value"], where, low, high)
        ci = raw.get("ci95")
        if ci is not None:
            if not isinstance(ci, list) or len(ci) != 2:
                raise RunFileError(f"{where}.ci95 is not [low, high]")
            ci = (number(ci[0], f"{where}.ci95", low, high),
                  number(ci[1], f"{where}.ci95", low, high))
        return cls(value, ci, short_text(raw["reason"]) if raw.get("reason") else None, used)


#: ``{metric: {measure: {scoring or DIFF: Entry}}}``
MetricTables = dict[str, dict[str, dict[str, Entry]]]


def _metric_table(raw: Any, metric: str, where: str,
                  empty: bool = False) -> dict[str, dict[str, Entry]]:
    """One metric's table; ``empty``: a report of no questions, whose tables have no rows."""
    if not isinstance(raw, dict) or (not raw and not empty):
        raise RunFileError(f"{where} is missing")
    if len(raw) > MAX_MEASURES:
        raise RunFileError(f"{where} has more than {MAX_MEASURES} measures")
    low, high = RANGES.get(metric, WIDE)
    width = high - low
    table = {}
    for measure, row in raw.items():
        plain_name(measure, where)
        if not isinstance(row, dict) or not row or len(row) > MAX_MEASURES:
            raise RunFileError(f"{where}.{measure} is missing")
        table[measure] = {}
        for key, entry in row.items():
            plain_name(key, f"{where}.{measure}")
            lo, hi = (-width, width) if key == DIFF else (low, high)
            table[measure][key] = Entry.from_dict(entry, f"{where}.{measure}.{key}", lo, hi)
    return table


def _metric_tables(raw: Any, name: str, empty: bool = False) -> MetricTables:
    """The metrics of a report; ``empty``: of no questions (a share that got none: tables
    without rows, as :func:`~.report.compute_metrics` writes them)."""
    if not isinstance(raw, dict):
        raise RunFileError(f"{name} has no \"metrics\" (is it an evaluation run's report.json?)")
    tables = {"auroc": _metric_table(raw.get("auroc"), "auroc", "metrics.auroc", empty)}
    for metric, table in raw.items():
        if metric != "auroc":
            tables[plain_name(metric, "metrics")] = _metric_table(table, metric,
                                                                  f"metrics.{metric}", empty)
    return tables


# --- the table of every method ----------------------------------------------------------------

DEGENERATE = "degenerate"  # a row's key: why its figures tell nothing (absent: informative)


@dataclass(frozen=True)
class MethodRow:
    """A row of the table of every method: ``name`` and ``variant``, its ``label``,
    ``metrics[column]`` (auroc, auprc, prr, ...) and ``vs_best``, its AUROC minus the best MARS
    row's (paired); ``degenerate``: why its figures tell nothing (its values are the same for
    every answer, its AUROC interval has no width), empty for an informative row
    (:func:`.methods_table.degenerate`)."""

    name: str
    variant: str
    label: str
    metrics: dict[str, Entry]
    vs_best: Entry
    degenerate: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "variant": self.variant, "label": self.label,
                **{k: e.to_dict() for k, e in self.metrics.items()},
                VS_BEST: self.vs_best.to_dict(),
                **({DEGENERATE: self.degenerate} if self.degenerate else {})}

    @classmethod
    def from_dict(cls, row: Any, where: str) -> "MethodRow":
        if not isinstance(row, dict):
            raise RunFileError(f"{where} is not an object")
        name, variant = plain_name(row.get("name"), where), plain_name(row.get("variant"), where)
        metrics = {}
        for key, raw in row.items():
            if key in ("name", "variant", "label", VS_BEST, DEGENERATE):
                continue
            plain_name(key, where, COLUMN)
            metrics[key] = Entry.from_dict(raw, f"{where}.{key}", *RANGES.get(key, WIDE))
        if "auroc" not in metrics:
            raise RunFileError(f"{where}.auroc is missing")
        width = RANGES["auroc"][1] - RANGES["auroc"][0]
        vs_best = Entry.from_dict(row.get(VS_BEST), f"{where}.{VS_BEST}", -width, width)
        degenerate = row.get(DEGENERATE) or ""
        return cls(name, variant, short_text(row.get("label") or name), metrics, vs_best,
                   short_text(degenerate) if isinstance(degenerate, str) else "")


@dataclass(frozen=True)
class MethodsTable:
    """report.json's ``methods_table``: ``rows`` ranked by ``ranked_by`` (best first), the
    best MARS row's name, variant and label (None when no MARS row has an AUROC), the unit of
    the answer lengths the rows' ``length_spearman`` correlates with ("tokens", "words", or ""),
    and the table's ``warnings``."""

    rows: list[MethodRow] = field(default_factory=list)
    best_mars: dict[str, str] | None = None
    ranked_by: str = "auroc"
    length_unit: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def best_label(self) -> str | None:
        return None if self.best_mars is None else self.best_mars["label"]

    def to_dict(self) -> dict[str, Any]:
        return {"ranked_by": self.ranked_by, "best_mars": self.best_mars,
                "length_unit": self.length_unit, "warnings": self.warnings,
                "rows": [r.to_dict() for r in self.rows]}

    @classmethod
    def from_dict(cls, raw: Any) -> "MethodsTable":
        """``methods_table`` (absent in reports made before it: no rows)."""
        if raw is None:
            return cls()
        w = "methods_table"
        if not isinstance(raw, dict) or not isinstance(raw.get("rows"), list):
            raise RunFileError(f"{w} has no \"rows\"")
        if len(raw["rows"]) > MAX_MEASURES * len(VARIANTS):
            raise RunFileError(f"{w} has more than {MAX_MEASURES * len(VARIANTS)} rows")
        rows = [MethodRow.from_dict(row, f"{w}.rows[{k}]") for k, row in enumerate(raw["rows"], 1)]
        best = raw.get("best_mars")
        if best is not None:
            if not isinstance(best, dict):
                raise RunFileError(f"{w}.best_mars is not an object")
            best = {"name": plain_name(best.get("name"), f"{w}.best_mars"),
                    "variant": plain_name(best.get("variant"), f"{w}.best_mars"),
                    "label": short_text(best.get("label") or best.get("name"))}
        unit = raw.get("length_unit") or ""
        return cls(rows, best, plain_name(raw.get("ranked_by", "auroc"), f"{w}.ranked_by"),
                   short_text(unit) if isinstance(unit, str) else "",
                   text_list(raw.get("warnings"), f"{w}.warnings", MAX_WARNINGS))


# --- report.json ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """A question that failed (it has no line in results.jsonl): where it is and why."""

    index: int
    id: str | None
    line: int | None
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id, "line": self.line, "error": self.error}

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "Failure":
        if not isinstance(raw, dict):
            raise RunFileError(f"{where} is not an object")
        return cls(count_of(raw.get("index"), f"{where}.index"),
                   None if raw.get("id") is None else short_text(raw["id"]),
                   optional_count(raw.get("line"), f"{where}.line"), short_text(raw.get("error")))


def _judge_check(raw: Any) -> dict[str, Any] | None:
    """The judge check's figures (checked; the rest of the object kept as it is)."""
    check = json_object(raw, "judge_check")
    if check is None:
        return None
    w = "judge_check"
    return {**check, "file": short_text(check.get("file", "?")), "n": count_of(check.get("n"), f"{w}.n"),
            "agreement": number(check.get("agreement"), f"{w}.agreement", 0.0, 1.0),
            "false_accepts": count_of(check.get("false_accepts"), f"{w}.false_accepts"),
            "false_rejects": count_of(check.get("false_rejects"), f"{w}.false_rejects")}


def _calibration(raw: Any) -> dict[str, Any] | None:
    """The held-out calibration section (checked; its bins and plots kept)."""
    cal = json_object(raw, "calibration")
    if cal is None:
        return None
    w = "calibration"
    out = {**cal, "measure": plain_name(cal.get("measure"), f"{w}.measure"),
           "scoring": plain_name(cal.get("scoring"), f"{w}.scoring"),
           "folds": count_of(cal.get("folds"), f"{w}.folds", 1000),
           "bins": [], "plots": text_list(cal.get("plots"), f"{w}.plots")}
    for key in ("brier", "brier_constant", "ece"):
        out[key] = number(cal.get(key), f"{w}.{key}", 0.0, 1.0)
    bins = cal.get("bins") or []
    if not isinstance(bins, list) or len(bins) > 1000:
        raise RunFileError(f"{w}.bins is not a list of bins")
    for k, b in enumerate(bins, 1):
        where = f"{w}.bins[{k}]"
        if not isinstance(b, dict):
            raise RunFileError(f"{where} is not an object")
        out["bins"].append({**b, "n": count_of(b.get("n"), f"{where}.n"), **{
            key: number(b.get(key), f"{where}.{key}", 0.0, 1.0)
            for key in ("low", "high", "mean_chance", "share_correct")}})
    return out


@dataclass
class Report:
    """report.json. ``metrics[metric][measure][key]`` with key a scoring or :data:`DIFF`;
    ``methods_table``: every method ranked; ``resamples`` and ``seed``: the bootstrap's;
    ``failed``: the questions without a result; ``skipped_lines``: the data's unusable lines;
    ``judge``, ``settings``, ``models``, ``judge_check``, ``calibration`` and
    ``rejudged_from`` are the objects their makers describe (checked where a reader uses
    them). A report read back keeps at most :data:`MAX_WARNINGS` warnings, and its texts are
    cut at :data:`TEXT_CHARS` characters."""

    data: str
    n: int
    accuracy: float | None
    judge: dict[str, Any]
    models: dict[str, Any]
    settings: dict[str, Any]
    resamples: int | None
    metrics: MetricTables
    labels: dict[str, int] | None = None
    judge_check: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    methods_table: MethodsTable = field(default_factory=MethodsTable)
    limit: int | None = None
    seed: int = 0
    failed: list[Failure] = field(default_factory=list)
    skipped_lines: list[str] = field(default_factory=list)
    seconds_per_question: float | None = None
    warnings: list[str] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    rejudged_from: dict[str, Any] | None = None
    #: how often the answers at each verdict level of the page were right (:mod:`.levels`)
    levels: dict[str, Any] = field(default_factory=dict)

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
        text = short_text(self.judge.get("name", "?"))
        if self.judge.get("threshold") is not None:
            text += f" ≥ {short_text(self.judge['threshold'])}"
        if self.judge.get("model"):
            text += f" ({short_text(self.judge['model'])})"
        return text

    def to_dict(self) -> dict[str, Any]:
        out = {
            "data": self.data, "n": self.n, "accuracy": self.accuracy, "labels": self.labels,
            "judge": self.judge, "judge_check": self.judge_check, "models": self.models,
            "settings": self.settings, "limit": self.limit, "seed": self.seed,
            "bootstrap": {"resamples": self.resamples, "seed": self.seed,
                          "interval": "percentile 2.5-97.5"},
            "metrics": {metric: {m: {k: e.to_dict() for k, e in row.items()}
                                 for m, row in table.items()}
                        for metric, table in self.metrics.items()},
            "methods_table": self.methods_table.to_dict(),
            "failed": [f.to_dict() for f in self.failed], "skipped_lines": self.skipped_lines,
            "seconds_per_question": self.seconds_per_question, "warnings": self.warnings,
            "plots": self.plots, "levels": levels_json(self.levels),
        }
        if self.rejudged_from is not None:
            out["rejudged_from"] = self.rejudged_from
        if self.calibration is not None:
            out["calibration"] = self.calibration
        return out

    @classmethod
    def from_dict(cls, data: Any, name: str = "report.json") -> "Report":
        if not isinstance(data, dict):
            raise RunFileError(f"{name} has no \"metrics\" (is it an evaluation run's "
                               "report.json?)")
        n = count_of(data.get("n"), f"{name}: n")
        metrics = _metric_tables(data.get("metrics"), name, empty=n == 0)
        accuracy = data.get("accuracy")
        labels = json_object(data.get("labels"), "labels")
        if labels is not None:
            labels = {k: count_of(labels.get(k), f"labels.{k}") for k in ("given", "judged")}
        boot = json_object(data.get("bootstrap"), "bootstrap") or {}
        resamples = boot.get("resamples")
        seed = data.get("seed", boot.get("seed"))
        failed = data.get("failed") or []
        if not isinstance(failed, list):
            raise RunFileError("failed is not a list")
        seconds = data.get("seconds_per_question")
        return cls(
            data=short_text(data.get("data", "?")), n=n,
            accuracy=None if accuracy is None else number(accuracy, "accuracy", 0.0, 1.0),
            judge=json_object(data.get("judge"), "judge") or {},
            models={k: short_text(v) if v is not None else None
                    for k, v in (json_object(data.get("models"), "models") or {}).items()},
            settings=json_object(data.get("settings"), "settings") or {},
            resamples=resamples if isinstance(resamples, int)
            and not isinstance(resamples, bool) else None,
            metrics=metrics, labels=labels, judge_check=_judge_check(data.get("judge_check")),
            calibration=_calibration(data.get("calibration")),
            methods_table=MethodsTable.from_dict(data.get("methods_table")),
            limit=optional_count(data.get("limit"), "limit"),
            seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else 0,
            failed=[Failure.from_dict(f, f"failed[{k}]") for k, f in enumerate(failed, 1)],
            skipped_lines=text_list(data.get("skipped_lines"), "skipped_lines"),
            seconds_per_question=None if seconds is None else number(
                seconds, "seconds_per_question", 0.0, 1e9),
            warnings=text_list(data.get("warnings"), "warnings", MAX_WARNINGS),
            plots=text_list(data.get("plots"), "plots"),
            rejudged_from=json_object(data.get("rejudged_from"), "rejudged_from"),
            levels=levels_from_json(data.get("levels")))
