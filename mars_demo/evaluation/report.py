"""An evaluation run's report: :func:`write_report` computes it from the run's records (a
typed :class:`~.schema.Report`), :func:`save_report` writes report.json and report.md (laid out
like the paper's Table 1), and the plots (ROC and rejection curves, plotly HTML and PNG).

Rows are data-driven: every (measure, scoring) the records hold, in their order, so a new
uncertainty measure needs no change here. A measure with both a length-normalized and a MARS
scoring also gets their paired difference (MARS - LN, :data:`DIFF`).
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any, Callable, Sequence

import numpy as np

from ..methods import FREE, OWN_MODELS, models_of, parse_methods
from . import METRIC_TITLES, METRICS, judge_check, judges, levels, methods_table
from . import metrics as metric_math
from .checks import DIFF
from .labels import model_id, row_label
from .sample_size import caution
from .manifest import Manifest
from .records import Record, in_question_order
from .schema import Entry, Failure, MetricTables, Report

LABELS = {"confidence": "Confidence", "entropy": "Entropy", "semantic_entropy": "SE"}
SCORING_SUFFIX = {"length_normalized": "", "mars": " + MARS"}
PAIR = ("mars", "length_normalized")  # DIFF = PAIR[0] - PAIR[1]
LONG_ANSWER_WORDS = 5  # a greedy answer of this many normalized words or more is a sentence


def label(measure: str) -> str:
    return LABELS.get(measure, measure.replace("_", " "))


def method_label(measure: str, scoring: str) -> str:
    """"SE + MARS", "Confidence" (the paper's Table 1 names); another method by
    :func:`.labels.row_label` ("Eigenvalue (entail.)")."""
    if measure not in LABELS:
        return row_label(measure, scoring)
    suffix = SCORING_SUFFIX.get(scoring, f" ({scoring.replace('_', ' ')})")
    return label(measure) + suffix


def methods(records: Sequence[Record]) -> list[tuple[str, list[str]]]:
    """(measure, its scorings) as the records hold them, in their order."""
    if not records:
        return []
    return [(m, list(by_scoring)) for m, by_scoring in records[0].uncertainty.items()]


def arrays(records: Sequence[Record]) -> tuple[np.ndarray, dict[tuple[str, str], np.ndarray]]:
    correct = np.array([r.correct for r in records], dtype=bool)
    u = {(m, s): np.array([r.uncertainty[m][s] for r in records], dtype=float)
         for m, scorings in methods(records) for s in scorings}
    return correct, u


def compute_metrics(records: Sequence[Record], *, resamples: int, seed: int,
                    measures: Sequence[tuple[str, list[str]]] = ()) -> MetricTables:
    """``{metric: {measure: {scoring: Entry, DIFF: Entry}}}`` over :data:`METRICS`, each value
    with its bootstrap interval. ``measures``: the rows when there are no records."""
    rows = methods(records) or list(measures)
    if not records:
        return {name: {m: {s: Entry(None, None, "no answers")
                           for s in (*scorings, *([DIFF] if set(PAIR) <= set(scorings) else []))}
                       for m, scorings in rows} for name in METRICS}
    correct, u = arrays(records)
    out: MetricTables = {}
    for name in METRICS:
        out[name] = {}
        for m, scorings in rows:
            row = {s: Entry.of(metric_math.summarize(name, u[m, s], correct,
                                                     resamples=resamples, seed=seed))
                   for s in scorings}
            if set(PAIR) <= set(scorings):
                row[DIFF] = Entry.of(metric_math.paired_difference(
                    name, u[m, PAIR[0]], u[m, PAIR[1]], correct, resamples=resamples,
                    seed=seed))
            out[name][m] = row
    return out


def long_answer_warning(records: Sequence[Record], judge: dict[str, Any]) -> str | None:
    """A warning when most judged greedy answers are sentences and the judge compares whole
    answers (an entry's ``whole_answer``: em, f1, rouge): those judges mark right sentence
    answers wrong."""
    name = judge.get("name")
    judged = [r for r in records if r.label == "judged" and r.greedy is not None]
    entry = judges.entries().get(name)
    if entry is None or not entry.whole_answer or not judged:
        return None
    long = sum(len(judges.normalize_answer(r.greedy).split()) >= LONG_ANSWER_WORDS
               for r in judged)
    if long * 2 <= len(judged):
        return None
    return (f"{long} of {len(judged)} judged greedy answers are sentences ({LONG_ANSWER_WORDS} "
            f"words or more), and the {name} judge compares the whole answer with each "
            "reference, so it marks right sentence answers wrong; re-judge the run with "
            "evaluate rejudge RUN_DIR --judge contains (or nli, llm) --out NEW_DIR")


# --- report.json and report.md ----------------------------------------------------------------


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _models(records: Sequence[Record], manifest: Manifest) -> dict[str, Any]:
    """The models that made and scored the answers, as the analyses recorded them (a run's
    answers all come from the same ones): the LLM, importance and NLI models, and an optional
    one (SAR's similarity model...) only where the run's methods ran it
    (:func:`mars_demo.methods.models_of`)."""
    first = records[0].analysis_settings if records else {}
    return models_of({**manifest.settings, **first})


def _asked(manifest: Manifest) -> tuple[str, ...]:
    """The methods the run computed: those its settings name, else every free one (a list a
    later version wrote, with ids unknown here, names none)."""
    asked = manifest.settings.get("methods")
    if asked is None:
        return FREE
    try:
        return parse_methods(asked)
    except ValueError:
        return ()


def write_report(out: pathlib.Path, records: Sequence[Record], *, manifest: Manifest,
                 resamples: int, plots: bool = True,
                 messages: Callable[[str], None] = _stderr, failed: Sequence[Failure] = (),
                 warnings: Sequence[str] = (), skipped_lines: Sequence[str] = ()) -> Report:
    """report.json, report.md and the plots of a run directory from its records, taken in
    question order (:func:`.records.in_question_order`: the bootstrap intervals do not follow
    the order the records came in); returns the report. ``manifest``: the run's run.json (its
    data, judge, settings, seed); ``warnings`` (e.g. rows of the data set left out) and ``skipped_lines``
    (unusable lines of the data or a label file) go into the report as they are."""
    records = in_question_order(records)
    n = len(records)
    given = sum(r.label == "given" for r in records)
    seed = manifest.seed
    warnings = list(warnings)
    expected = manifest.expected
    if n < expected:
        warnings.append(f"{expected - n} of {expected} selected questions have no result "
                        f"(failed, see above); the metrics use the {n} that have one")
    warnings += methods_table.incomplete(records)
    warnings += methods_table.absent(records, _asked(manifest))
    long = long_answer_warning(records, manifest.judge)
    if long:
        warnings.append(long)
    check = judge_check.load(out)
    if check is not None and check.get("judge") != manifest.judge:
        check = None  # a check of another judge
    metrics = compute_metrics(records, resamples=resamples, seed=seed)
    table = methods_table.compute(records, resamples=resamples, seed=seed, metrics=metrics,
                                  judge=manifest.judge.get("name"))
    report = Report(
        data=manifest.data, n=n,
        accuracy=sum(r.correct for r in records) / n if n else 0.0,
        labels={"given": given, "judged": n - given},
        judge=manifest.judge, judge_check=check,
        models=_models(records, manifest),
        settings=manifest.settings, limit=manifest.limit, seed=seed,
        resamples=resamples, metrics=metrics, methods_table=table,
        failed=list(failed), skipped_lines=list(skipped_lines),
        seconds_per_question=(round(sum(float(r.seconds or 0.0) for r in records) / n, 4)
                              if n else None),
        warnings=warnings, rejudged_from=manifest.rejudged_from,
        levels=levels.level_records(records, out.name))
    report.calibration, stale = _kept_calibration(out, n)
    if stale:
        report.warnings.append(stale)
    if plots and n:
        top, top_warnings = methods_table.roc_figure(
            records, [(r.name, r.variant) for r in table.rows])
        files, plot_warnings = write_plots(records, out, {"roc_methods": top})
        report.plots = files
        report.warnings += top_warnings + plot_warnings
    for w in report.warnings:
        messages(f"warning: {w}")
    save_report(out, report)
    return report


def _kept_calibration(out: pathlib.Path, n: int) -> tuple[dict[str, Any] | None, str | None]:
    """The calibration section of the report already in ``out`` (a run written again, e.g. a
    finished run resumed), kept while its calibration file holds the same ``n`` answers; else
    None, and a warning when there was one that no longer fits."""
    try:
        section = json.loads((out / "report.json").read_text(encoding="utf-8"))["calibration"]
        made = json.loads((out / section["file"]).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None, None
    if not isinstance(made, dict) or made.get("n") != n:
        return None, (f"the calibration {section['file']} was made on {made.get('n')} "
                      f"questions and the run now has {n}: calibrate again (evaluate calibrate "
                      f"{out})")
    return section, None


def save_report(out: pathlib.Path, report: Report) -> None:
    """report.json (:meth:`Report.to_dict`) and report.md (:func:`markdown`) in ``out``."""
    (out / "report.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n",
                                     encoding="utf-8")
    (out / "report.md").write_text(markdown(report), encoding="utf-8")


def cell(entry: Entry | None, signed: bool = False) -> str:
    """A metric entry as "77.97 [74.10, 81.52]" (x100), "n/a (why)", or "n/a" when absent."""
    return "n/a" if entry is None else entry.text(signed=signed)


def judge_text(judge: dict) -> str:
    text = str(judge.get("name", "?"))
    if judge.get("threshold") is not None:
        text += f" >= {judge['threshold']}"
    if judge.get("model"):
        text += f", {judge['model']}" + (f" at {judge['endpoint']}" if judge.get("endpoint")
                                         else "")
    return text


def labels_text(report: Report) -> str:
    labels = report.labels or {}
    judge = judge_text(report.judge)
    if labels.get("given") and not labels.get("judged"):
        return f"all {labels['given']} labels given"
    if labels.get("given"):
        return f"{labels['given']} labels given, {labels['judged']} judged by {judge}"
    return f"judge: {judge}"


def check_text(check: dict[str, Any] | None) -> str | None:
    if not check:
        return None
    return (f"On the judge check {check['file']} (n = {check['n']}), this judge agreed with "
            f"the human labels on {check['agreement'] * 100:.1f}% ({check['false_accepts']} "
            f"false accepts, {check['false_rejects']} false rejects).")


def markdown(report: Report) -> str:
    """report.md: one table per metric with the paper's Table 1 rows (the baselines, then
    each + MARS), values x100 with the 95% bootstrap interval, the paired MARS - LN
    differences, the table of every method, the held-out calibration quality when the run was
    calibrated."""
    model = report.models.get("llm") or "the model"
    column = model_id(model) if report.models.get("llm") else model  # the page's short name
    accuracy = (report.accuracy or 0.0) * 100
    lines = [
        f"# MARS evaluation on {report.data}",
        "",
        f"n = {report.n} questions, accuracy {accuracy:.1f}% "
        f"({labels_text(report)}). Models: LLM {model}, importance "
        f"{report.models.get('importance')}, NLI {report.models.get('nli')}"
        + "".join(f", {m.label} {report.models[m.field]}" for m in OWN_MODELS
                  if report.models.get(m.field)) + ".",
    ]
    if check_text(report.judge_check):
        lines.append(check_text(report.judge_check))
    lines.append(
        f"Values x100 with the 95% percentile bootstrap interval "
        f"({report.resamples} resamples, seed {report.seed}); "
        "uncertainty higher = answer predicted wrong; AUPRC counts wrong answers as positive.")
    if report.failed:
        lines.append(f"{len(report.failed)} question(s) failed and are not counted "
                     "(see report.json, \"failed\").")
    warned = caution(report)
    if warned:
        lines += ["", f"**{warned}**"]
    rows = report.rows()
    for name in METRICS:
        if name not in report.metrics:
            continue
        lines += ["", f"## {METRIC_TITLES[name]}", "", f"| Method | {column} |", "|---|---|"]
        for m, s in rows:
            lines.append(f"| {method_label(m, s)} | {cell(report.metrics[name][m].get(s))} |")
    paired = report.paired()
    shown = [n for n in METRICS if n in report.metrics]
    if paired:
        lines += ["", "## MARS minus length-normalized (paired bootstrap)", "",
                  "| Measure | " + " | ".join(METRIC_TITLES[n] for n in shown) + " |",
                  "|---|" + "---|" * len(shown)]
        for m in paired:
            lines.append(f"| {label(m)} | " + " | ".join(
                cell(report.metrics[n][m].get(DIFF), signed=True) for n in shown) + " |")
    lines += levels.markdown_lines(report.levels)
    lines += methods_table.markdown_lines(report.methods_table)
    if report.calibration:
        lines += ["", *calibration_markdown(report.calibration)]
    if report.plots:
        lines += ["", "Plots: " + ", ".join(f"[{p}]({p})" for p in report.plots)]
    for w in report.warnings:
        lines += ["", f"Warning: {w}"]
    return "\n".join(lines) + "\n"


def calibration_markdown(cal: dict[str, Any]) -> list[str]:
    """The held-out calibration section: Brier score, ECE and the reliability table."""
    lines = [
        f"## Calibration of {method_label(cal['measure'], cal['scoring'])} (held out)", "",
        f"Isotonic P(correct), {cal['folds']}-fold cross-validated (each answer's chance from a "
        "fit that did not see it): Brier score "
        f"{cal['brier']:.4f} (predicting the accuracy for every answer: "
        f"{cal['brier_constant']:.4f}), expected calibration error {cal['ece']:.4f} "
        f"(the {len(cal['bins'])} non-empty ones of its equal-width bins).", "",
        "| chance | answers | mean chance | share correct |", "|---|---|---|---|"]
    for b in cal["bins"]:
        lines.append(f"| {b['low']:.1f}-{b['high']:.1f} | {b['n']} | "
                     f"{b['mean_chance']:.3f} | {b['share_correct']:.3f} |")
    if cal.get("plots"):
        lines += ["", "Reliability diagram: " + ", ".join(f"[{p}]({p})" for p in cal["plots"])]
    return lines


# --- plots ------------------------------------------------------------------------------------


def write_figures(figs: dict[str, Any], out_dir: pathlib.Path) -> tuple[list[str], list[str]]:
    """Each figure as STEM.html and STEM.png; PNG export that fails is a warning, never a fake
    file. Returns (file names, warnings)."""
    files, warnings = [], []
    for stem, fig in figs.items():
        fig.write_html(out_dir / f"{stem}.html", include_plotlyjs="cdn")
        files.append(f"{stem}.html")
    try:
        for stem, fig in figs.items():
            fig.write_image(out_dir / f"{stem}.png", scale=1)
            files.append(f"{stem}.png")
    except Exception as err:  # kaleido without a browser, or no kaleido
        detail = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        warnings.append(f"PNG plots were not written (plotly/kaleido image export failed: "
                        f"{detail}); the HTML plots are complete")
    return files, warnings


def write_plots(records: Sequence[Record], out_dir: pathlib.Path,
                extra: dict[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """roc.html/png (ROC per measure and scoring) and rejection.html/png (accuracy of the kept
    answers vs. fraction rejected, with the oracle and random), and the ``extra`` figures by
    their stems. Returns (files, warnings)."""
    roc, rej, warnings = figures(records)
    files, more = write_figures({"roc": roc, "rejection": rej, **(extra or {})}, out_dir)
    return files, warnings + more


_COLORS = {"length_normalized": "#7f7f7f", "mars": "#d62728"}
_NAMES = {"length_normalized": "length-normalized", "mars": "MARS"}


def figures(records: Sequence[Record]) -> tuple[Any, Any, list[str]]:
    """The plotly figures of :func:`plots` (ROC, rejection) and warnings; one column per
    measure, one line per scoring. The page's Evaluation view draws these too."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    correct, u = arrays(records)
    rows = methods(records)
    titles = [label(m) for m, _ in rows]
    warnings: list[str] = []
    roc = make_subplots(rows=1, cols=len(rows), subplot_titles=titles)
    rej = make_subplots(rows=1, cols=len(rows), subplot_titles=titles)
    two_classes = 0 < correct.sum() < correct.size
    if not two_classes:
        warnings.append("ROC curves are not drawn: every answer has the same correctness")
    frac = np.arange(correct.size) / correct.size
    oracle = np.minimum(1.0, correct.sum() / np.arange(correct.size, 0, -1))
    for col, (m, scorings) in enumerate(rows, 1):
        first = col == 1
        for s in scorings:
            color, name = _COLORS.get(s), _NAMES.get(s, s.replace("_", " "))
            if two_classes:
                fpr, tpr = metric_math.roc_points(u[m, s], correct)
                auc = metric_math.auroc(u[m, s], correct)
                roc.add_trace(go.Scatter(x=fpr, y=tpr, mode="lines", line=dict(color=color),
                                         name=name, legendgroup=s, showlegend=first,
                                         hovertemplate=f"{name} AUROC {auc:.3f}"
                                         "<br>FPR %{x:.2f}, TPR %{y:.2f}<extra></extra>"),
                              row=1, col=col)
            x, acc = metric_math.rejection_curve(u[m, s], correct)
            rej.add_trace(go.Scatter(x=x, y=acc, mode="lines", line=dict(color=color),
                                     name=name, legendgroup=s, showlegend=first),
                          row=1, col=col)
        if two_classes:
            roc.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="random",
                                     line=dict(color="#bbbbbb", dash="dot"), legendgroup="r",
                                     showlegend=first), row=1, col=col)
        rej.add_trace(go.Scatter(x=frac, y=oracle, mode="lines", name="oracle",
                                 line=dict(color="#2ca02c", dash="dash"), legendgroup="o",
                                 showlegend=first), row=1, col=col)
        rej.add_trace(go.Scatter(x=[0, frac[-1]], y=[correct.mean()] * 2, mode="lines",
                                 name="random", line=dict(color="#bbbbbb", dash="dot"),
                                 legendgroup="r", showlegend=first), row=1, col=col)
    roc.update_xaxes(title_text="false positive rate (correct flagged)", range=[0, 1])
    roc.update_yaxes(title_text="true positive rate (wrong flagged)", range=[0, 1.02], col=1)
    roc.update_layout(title="ROC: uncertainty predicting a wrong answer", width=1200, height=450,
                      template="plotly_white")
    rej.update_xaxes(title_text="fraction rejected (most uncertain first)", range=[0, 1])
    rej.update_yaxes(title_text="accuracy of the kept answers", col=1)
    rej.update_layout(title="Rejection curves", width=1200, height=450, template="plotly_white")
    return roc, rej, warnings
