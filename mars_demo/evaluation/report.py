"""An evaluation run's report: report.json, report.md (laid out like the paper's Table 1),
plots (ROC and rejection curves, plotly HTML and PNG) and the side-by-side comparison of runs."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np

from . import MEASURES, METRICS, SCORINGS
from . import metrics as M

LABELS = {"confidence": "Confidence", "entropy": "Entropy", "semantic_entropy": "SE"}
METRIC_TITLES = {"auroc": "AUROC", "prr": "PRR", "aurac": "AURAC"}
DIFF = "mars_minus_length_normalized"


def arrays(records: list[dict]) -> tuple[np.ndarray, dict[tuple[str, str], np.ndarray]]:
    correct = np.array([bool(r["correct"]) for r in records], dtype=bool)
    u = {(m, s): np.array([float(r["uncertainty"][m][s]) for r in records])
         for m in MEASURES for s in SCORINGS}
    return correct, u


def compute_metrics(records: list[dict], *, resamples: int, seed: int) -> dict[str, Any]:
    """``{metric: {measure: {scoring: {...}, "mars_minus_length_normalized": {...}}}}``."""
    out: dict[str, Any] = {}
    if not records:
        return {name: {m: {s: {"value": None, "ci95": None, "reason": "no answers"}
                           for s in (*SCORINGS, DIFF)} for m in MEASURES} for name in METRICS}
    correct, u = arrays(records)
    for name in METRICS:
        out[name] = {}
        for m in MEASURES:
            row = {s: M.summarize(name, u[m, s], correct, resamples=resamples, seed=seed).to_dict()
                   for s in SCORINGS}
            row[DIFF] = M.paired_difference(name, u[m, "mars"], u[m, "length_normalized"],
                                            correct, resamples=resamples, seed=seed).to_dict()
            out[name][m] = row
    return out


def _cell(entry: dict | None, scale: float = 100.0, signed: bool = False) -> str:
    if not entry or entry.get("value") is None:
        return "n/a" + (f" ({entry['reason']})" if entry and entry.get("reason") else "")
    fmt = "{:+.2f}" if signed else "{:.2f}"
    text = fmt.format(entry["value"] * scale)
    if entry.get("ci95"):
        lo, hi = entry["ci95"]
        text += f" [{lo * scale:.2f}, {hi * scale:.2f}]"
    return text


def markdown(report: dict[str, Any]) -> str:
    """report.md: one table per metric with the paper's Table 1 rows (the three baselines,
    then the three + MARS), values x100 with the 95% bootstrap interval, then the paired
    MARS - LN differences."""
    model = report["models"].get("llm") or "the model"
    lines = [
        f"# MARS evaluation on {report['data']}",
        "",
        f"n = {report['n']} questions, accuracy {report['accuracy'] * 100:.1f}% "
        f"(judge: {_judge_text(report['judge'])}). Models: LLM {model}, importance "
        f"{report['models'].get('importance')}, NLI {report['models'].get('nli')}.",
        f"Values x100 with the 95% percentile bootstrap interval ({report['bootstrap']['resamples']} "
        f"resamples, seed {report['bootstrap']['seed']}); uncertainty higher = answer predicted "
        "wrong.",
    ]
    if report.get("failed"):
        lines.append(f"{len(report['failed'])} question(s) failed and are not counted "
                     "(see report.json, \"failed\").")
    for name in METRICS:
        lines += ["", f"## {METRIC_TITLES[name]}", "", f"| Method | {model} |", "|---|---|"]
        for scoring, suffix in (("length_normalized", ""), ("mars", " + MARS")):
            for m in MEASURES:
                lines.append(f"| {LABELS[m]}{suffix} | "
                             f"{_cell(report['metrics'][name][m][scoring])} |")
    lines += ["", "## MARS minus length-normalized (paired bootstrap)", "",
              "| Measure | " + " | ".join(METRIC_TITLES[n] for n in METRICS) + " |",
              "|---|" + "---|" * len(METRICS)]
    for m in MEASURES:
        lines.append(f"| {LABELS[m]} | " + " | ".join(
            _cell(report["metrics"][n][m][DIFF], signed=True) for n in METRICS) + " |")
    if report.get("plots"):
        lines += ["", "Plots: " + ", ".join(f"[{p}]({p})" for p in report["plots"])]
    for w in report.get("warnings", []):
        lines += ["", f"Warning: {w}"]
    return "\n".join(lines) + "\n"


def _judge_text(judge: dict) -> str:
    text = judge.get("name", "?")
    if judge.get("threshold") is not None:
        text += f" >= {judge['threshold']}"
    if judge.get("model"):
        text += f", {judge['model']} at {judge.get('endpoint')}"
    return text


def plots(records: list[dict], out_dir: pathlib.Path) -> tuple[list[str], list[str]]:
    """roc.html/png (ROC of LN vs MARS per measure) and rejection.html/png (accuracy of the
    kept answers vs. fraction rejected, with the oracle and random). Returns (file names,
    warnings); PNG export that fails is a warning, never a fake file."""
    roc, rej, warnings = figures(records)
    files = []
    for stem, fig in (("roc", roc), ("rejection", rej)):
        fig.write_html(out_dir / f"{stem}.html", include_plotlyjs="cdn")
        files.append(f"{stem}.html")
    try:
        for stem, fig in (("roc", roc), ("rejection", rej)):
            fig.write_image(out_dir / f"{stem}.png", scale=1)
            files.append(f"{stem}.png")
    except Exception as err:  # kaleido without a browser, or no kaleido
        detail = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        warnings.append(f"PNG plots were not written (plotly/kaleido image export failed: "
                        f"{detail}); the HTML plots are complete")
    return files, warnings


def figures(records: list[dict]) -> tuple[Any, Any, list[str]]:
    """The plotly figures of :func:`plots` (ROC, rejection) from results.jsonl's records
    (each needs ``correct`` and ``uncertainty``), and warnings. The page's Evaluation view
    draws these too."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    correct, u = arrays(records)
    titles = [LABELS[m] for m in MEASURES]
    colors = {"length_normalized": "#7f7f7f", "mars": "#d62728"}
    names = {"length_normalized": "length-normalized", "mars": "MARS"}
    warnings: list[str] = []

    roc = make_subplots(rows=1, cols=3, subplot_titles=titles)
    rej = make_subplots(rows=1, cols=3, subplot_titles=titles)
    two_classes = 0 < correct.sum() < correct.size
    if not two_classes:
        warnings.append("ROC curves are not drawn: every answer has the same correctness")
    frac = np.arange(correct.size) / correct.size
    oracle = np.minimum(1.0, correct.sum() / np.arange(correct.size, 0, -1))
    for col, m in enumerate(MEASURES, 1):
        for s in SCORINGS:
            first = col == 1
            if two_classes:
                fpr, tpr = M.roc_points(u[m, s], correct)
                auc = M.auroc(u[m, s], correct)
                roc.add_trace(go.Scatter(x=fpr, y=tpr, mode="lines", line=dict(color=colors[s]),
                                         name=f"{names[s]}", legendgroup=s, showlegend=first,
                                         hovertemplate=f"{names[s]} AUROC {auc:.3f}"
                                         "<br>FPR %{x:.2f}, TPR %{y:.2f}<extra></extra>"),
                              row=1, col=col)
            x, acc = M.rejection_curve(u[m, s], correct)
            rej.add_trace(go.Scatter(x=x, y=acc, mode="lines", line=dict(color=colors[s]),
                                     name=names[s], legendgroup=s, showlegend=first),
                          row=1, col=col)
        if two_classes:
            roc.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="random",
                                     line=dict(color="#bbbbbb", dash="dot"), legendgroup="r",
                                     showlegend=col == 1), row=1, col=col)
        rej.add_trace(go.Scatter(x=frac, y=oracle, mode="lines", name="oracle",
                                 line=dict(color="#2ca02c", dash="dash"), legendgroup="o",
                                 showlegend=col == 1), row=1, col=col)
        rej.add_trace(go.Scatter(x=[0, frac[-1]], y=[correct.mean()] * 2, mode="lines",
                                 name="random", line=dict(color="#bbbbbb", dash="dot"),
                                 legendgroup="r", showlegend=col == 1), row=1, col=col)
    roc.update_xaxes(title_text="false positive rate (correct flagged)", range=[0, 1])
    roc.update_yaxes(title_text="true positive rate (wrong flagged)", range=[0, 1.02], col=1)
    roc.update_layout(title="ROC: uncertainty predicting a wrong answer", width=1200, height=450,
                      template="plotly_white")
    rej.update_xaxes(title_text="fraction rejected (most uncertain first)", range=[0, 1])
    rej.update_yaxes(title_text="accuracy of the kept answers", col=1)
    rej.update_layout(title="Rejection curves", width=1200, height=450, template="plotly_white")
    return roc, rej, warnings


def compare(report_a: dict, report_b: dict, name_a: str, name_b: str) -> str:
    """Two runs side by side (markdown): every metric, measure and scoring, and B - A."""
    lines = [f"# {name_a} vs {name_b}", "",
             f"| | A: {name_a} | B: {name_b} |", "|---|---|---|"]
    for key, label in (("data", "data"), ("n", "n"), ("accuracy", "accuracy")):
        a, b = report_a.get(key), report_b.get(key)
        if key == "accuracy":
            a, b = f"{a * 100:.1f}%", f"{b * 100:.1f}%"
        lines.append(f"| {label} | {a} | {b} |")
    for key in ("llm", "importance", "nli"):
        lines.append(f"| {key} | {report_a['models'].get(key)} | {report_b['models'].get(key)} |")
    lines.append(f"| judge | {_judge_text(report_a['judge'])} | {_judge_text(report_b['judge'])} |")
    differing = sorted(k for k in set(report_a["settings"]) | set(report_b["settings"])
                       if report_a["settings"].get(k) != report_b["settings"].get(k))
    if differing:
        lines += ["", "Settings that differ: " + ", ".join(
            f"{k} ({report_a['settings'].get(k)!r} vs {report_b['settings'].get(k)!r})"
            for k in differing)]
    for name in METRICS:
        lines += ["", f"## {METRIC_TITLES[name]} (x100)", "",
                  "| Method | A | B | B - A |", "|---|---|---|---|"]
        for scoring, suffix in (("length_normalized", ""), ("mars", " + MARS"), (DIFF, " MARS - LN")):
            for m in MEASURES:
                ea = report_a["metrics"][name][m][scoring]
                eb = report_b["metrics"][name][m][scoring]
                delta = ("n/a" if ea.get("value") is None or eb.get("value") is None
                         else f"{(eb['value'] - ea['value']) * 100:+.2f}")
                signed = scoring == DIFF
                lines.append(f"| {LABELS[m]}{suffix} | {_cell(ea, signed=signed)} | "
                             f"{_cell(eb, signed=signed)} | {delta} |")
    return "\n".join(lines) + "\n"


def load_report(run_dir: str | pathlib.Path) -> dict:
    path = pathlib.Path(run_dir) / "report.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read {str(path)!r}: {err}") from err
