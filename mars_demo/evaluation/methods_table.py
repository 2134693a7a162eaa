"""Every uncertainty method of a run in one table, ranked by AUROC (issue 19).

A row is ``(name, variant)``: the three measures (confidence, entropy, semantic_entropy) with
each of their scorings (length_normalized, mars), then every method of the records' top-level
``methods`` (``{id: {variant: value}}``, variants :data:`~.runs.VARIANTS`) whose id is not
also a measure (``semantic_entropy`` is the same numbers either way and is listed once). A run
made before the records carried ``methods`` gets the measures' rows only.

Each row has AUROC, AUPRC and PRR with their 95% percentile bootstrap intervals
(:func:`.metrics.summarize`; a measure's entries are taken from the report's ``metrics``, the
same seeded computation), and ``auroc_minus_best_mars``: its AUROC minus that of the best MARS
row (the ``mars`` row with the highest AUROC), with the paired bootstrap interval of
:func:`.metrics.paired_difference` (both on the same resampled questions; 0 for the best MARS
row itself). Rows are ranked by AUROC, best first; a row whose AUROC is undefined comes last.

report.json keeps the table under ``methods_table``; report.md shows it
(:func:`markdown_lines`) and ``roc_methods.html/.png`` draws the ROC curves of its
:data:`TOP` rows (:func:`roc_figure`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import METRIC_TITLES
from . import metrics as metric_math
from .labels import row_label
from .records import Record
from .schema import Entry, MethodRow, MethodsTable

RANKED_BY = "auroc"
TABLE_METRICS = ("auroc", "auprc", "prr")
TOP = 5  # rows drawn in roc_methods

def rows(records: Sequence[Record]) -> list[tuple[str, str]]:
    """(name, variant) of every row the records hold: the measures, then the other methods,
    in the records' order."""
    if not records:
        return []
    first = records[0]
    out = [(m, s) for m, scorings in first.uncertainty.items() for s in scorings]
    out += [(m, v) for m, variants in first.methods.items() if m not in first.uncertainty
            for v in variants if all(v in r.methods.get(m, {}) for r in records)]
    return out


def incomplete(records: Sequence[Record]) -> list[str]:
    """A warning for each method some records hold and others lack (it could not be computed
    for those answers, as their warnings say, e.g. P(True) when the server's top log-probs
    miss "True"): :func:`rows` leaves it out, since its metrics would rest on other answers
    than every other row's."""
    n, counts = len(records), {}
    for r in records:
        for m, variants in r.methods.items():
            for v in variants:
                counts[m, v] = counts.get((m, v), 0) + 1
    out = []
    for (m, v), k in counts.items():
        if k < n and (m not in records[0].uncertainty):
            out.append(f"{row_label(m, v)} has a value for {k} of {n} answers only (it could "
                       "not be computed for the others, see their warnings); it is left out of "
                       "the table of every method")
    return out


def values(records: Sequence[Record], name: str, variant: str) -> np.ndarray:
    """The uncertainty of every record for one row (a measure's, else a method's)."""
    if name in records[0].uncertainty:
        return np.array([r.uncertainty[name][variant] for r in records], dtype=float)
    return np.array([r.methods[name][variant] for r in records], dtype=float)


def arrays(records: Sequence[Record]) -> tuple[np.ndarray, dict[tuple[str, str], np.ndarray]]:
    """(correct, {(name, variant): uncertainties}) of every row."""
    correct = np.array([r.correct for r in records], dtype=bool)
    return correct, {row: values(records, *row) for row in rows(records)}


def _rank_key(item: tuple[int, tuple[str, str, dict[str, Entry]]]) -> tuple[int, float, int]:
    k, (_, _, values) = item
    value = values[RANKED_BY].value
    return (value is None, -(value or 0.0), k)  # best first, undefined last, ties as listed


def compute(records: Sequence[Record], *, resamples: int, seed: int,
            metrics: dict[str, Any] | None = None) -> MethodsTable:
    """The table: its rows ranked, each with :data:`TABLE_METRICS` and its
    :data:`~.checks.VS_BEST` entry, and the best MARS row. ``metrics``: the report's metric tables
    (:func:`.report.compute_metrics` with the same resamples and seed), whose measure entries
    are used as they are."""
    if not records:
        return MethodsTable([], None, RANKED_BY)
    correct, u = arrays(records)
    table = []
    for name, variant in rows(records):
        values = {}
        for metric in TABLE_METRICS:
            known = ((metrics or {}).get(metric) or {}).get(name, {}).get(variant)
            values[metric] = known if name in records[0].uncertainty and known else Entry.of(
                metric_math.summarize(metric, u[name, variant], correct, resamples=resamples,
                                      seed=seed))
        table.append((name, variant, values))
    ranked = [row for _, row in sorted(enumerate(table), key=_rank_key)]
    best = next(((name, variant) for name, variant, values in ranked
                 if variant == "mars" and values[RANKED_BY].value is not None), None)
    out = []
    for name, variant, values in ranked:
        if best is None:
            vs_best = Entry(None, None, "no MARS row has an AUROC")
        else:
            vs_best = Entry.of(metric_math.paired_difference(
                RANKED_BY, u[name, variant], u[best], correct, resamples=resamples, seed=seed))
        out.append(MethodRow(name, variant, row_label(name, variant), values, vs_best))
    return MethodsTable(out, None if best is None else {
        "name": best[0], "variant": best[1], "label": row_label(*best)}, RANKED_BY)


def markdown_lines(table: MethodsTable) -> list[str]:
    """report.md's section: the ranked table, x100 with the intervals, and one line saying
    what it is."""
    if not table.rows:
        return []
    against = (f"the best MARS row, {table.best_label}" if table.best_label
               else "the best MARS row (none)")
    lines = ["", "## Every method, ranked by AUROC", "",
             f"Ranked by AUROC (best first); values x100 with the 95% bootstrap interval; the "
             f"last column is the row's AUROC minus that of {against}, with the paired "
             "bootstrap interval (both on the same resampled questions).", "",
             "| # | Method | " + " | ".join(METRIC_TITLES[m] for m in TABLE_METRICS)
             + " | AUROC − best MARS |", "|---|---|" + "---|" * (len(TABLE_METRICS) + 1)]
    for k, row in enumerate(table.rows, 1):
        lines.append(f"| {k} | {row.label} | "
                     + " | ".join(row.metrics[m].text() for m in TABLE_METRICS)
                     + f" | {row.vs_best.text(signed=True)} |")
    return lines


def roc_figure(records: Sequence[Record], ranked: Sequence[tuple[str, str]],
               top: int = TOP) -> tuple[Any, list[str]]:
    """The ROC curves of the first ``top`` rows of ``ranked`` ((name, variant), best first)
    that the records hold and whose AUROC is defined, in one plotly figure (the page's
    Evaluation view draws it too), and warnings. Each AUROC in the legend is computed here
    from the records."""
    import plotly.graph_objects as go

    correct, u = arrays(records)
    fig, shown, warnings = go.Figure(), 0, []
    two_classes = 0 < correct.sum() < correct.size
    for name, variant in ranked:
        if shown == top or not two_classes:
            break
        if (name, variant) not in u:
            continue
        fpr, tpr = metric_math.roc_points(u[name, variant], correct)
        label = (f"{row_label(name, variant)}, AUROC "
                 f"{metric_math.auroc(u[name, variant], correct):.3f}")
        fig.add_trace(go.Scatter(x=fpr, y=tpr, mode="lines", name=label,
                                 line=dict(dash="solid" if variant == "mars" else "dash"),
                                 hovertemplate=f"{label}<br>FPR %{{x:.2f}}, TPR %{{y:.2f}}"
                                 "<extra></extra>"))
        shown += 1
    if shown:
        fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="random",
                                 line=dict(color="#bbbbbb", dash="dot")))
    elif two_classes:  # one class only: report.figures says so already
        warnings.append("the ROC curves of the top methods are not drawn: no row of the "
                        "table is in the results")
    fig.update_xaxes(title_text="false positive rate (correct flagged)", range=[0, 1])
    fig.update_yaxes(title_text="true positive rate (wrong flagged)", range=[0, 1.02])
    fig.update_layout(title=f"ROC of the top {shown} methods (by AUROC)",
                      width=800, height=550, template="plotly_white",
                      legend=dict(orientation="h", y=-0.2))
    return fig, warnings
