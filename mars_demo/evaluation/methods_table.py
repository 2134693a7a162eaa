"""Every uncertainty method of a run in one table, ranked by AUROC.

A row is ``(name, variant)``: every method of the records (:func:`mars_demo.methods.values_of`:
their ``methods``, and MARS's three measures from their ``uncertainty`` block where a run made
before those were methods lacks them) with each of its variants, in the registry's order (ids
the registry does not know, from a later version, after them). A method some records lack is
left out (:func:`incomplete` says so).

Each row has AUROC, AUPRC, PRR and PRR up to half of the answers rejected (``prr_0.5``,
lm-polygraph's ``PredictionRejectionArea(max_rejection=0.5)``) with their 95% percentile
bootstrap intervals (:func:`.metrics.summarize`; an entry the report's ``metrics`` already holds,
the same seeded computation, is taken as it is), ``length_spearman``: the Spearman correlation
of the row's values with the greedy answer's length (scipy's ``spearmanr``; in tokens where the
records hold ``answer_length``, else in words of the greedy answer), and
``auroc_minus_best_mars``: its AUROC minus that of the best MARS row (the ``mars`` row with the
highest AUROC), with the paired bootstrap interval of :func:`.metrics.paired_difference` (both
on the same resampled questions; 0 for the best MARS row itself). Rows are ranked by AUROC, best
first; a row whose values are the same for every answer tells nothing: it is marked so and comes
after the ranked ones (:func:`degenerate`, :func:`unranked`); a row whose AUROC interval has no
width keeps its place with a caution (too few answers to say how surely), and a row whose AUROC
is undefined comes last. With a lexical judge (labels from word
overlap), a best row whose correlation with length is above :data:`LENGTH_LIMIT` is warned of:
such judges favour length-biased methods (Santilli et al., ACL 2025).

report.json keeps the table under ``methods_table``; report.md shows it
(:func:`markdown_lines`) and ``roc_methods.html/.png`` draws the ROC curves of its
:data:`TOP` rows (:func:`roc_figure`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..methods import METHODS, NEEDS, values_of
from . import METRIC_TITLES
from . import metrics as metric_math
from .labels import row_label
from .records import Record
from .schema import Entry, MethodRow, MethodsTable

RANKED_BY = "auroc"
TABLE_METRICS = ("auroc", "auprc", "prr", "prr_0.5")
LENGTH = "length_spearman"  # a row's Spearman correlation with the answer's length
LENGTH_LIMIT = 0.5  # above this, with a lexical judge, the best row is warned of
LEXICAL_JUDGES = ("contains", "em", "f1", "rouge")  # judges that compare words
TOP = 5  # rows drawn in roc_methods
#: a row's values whose spread is at most this share of their size (of 1 near 0) count as the
#: same for every answer: the graph measures come from float64 eigenvalues of a Laplacian of a
#: few answers (numpy's eigh is backward stable: errors of a few ulps of the matrix's norm, about
#: 1e-15) built from float32 NLI probabilities (2**-24, about 6e-8, relative): 1e-6 is well above
#: that rounding and far below any difference between answers that means something
SAME = 1e-6
VALUES_SAME = ("its values are the same for every answer (they differ by rounding at most), so "
               "its figures say nothing about them")
ZERO_WIDTH = ("its AUROC interval has zero width: every resample gave the same value, which "
              "shows too few answers, not certainty")


def degenerate(values: np.ndarray | None, auroc: Entry) -> str:
    """Why a row's figures tell nothing, or "" for an informative row: ``values`` (the row's
    uncertainty of every answer; None where only the report is at hand) the same for every
    answer (:data:`SAME`), or an AUROC interval of zero width."""
    if values is not None and values.size:
        if float(np.ptp(values)) <= SAME * max(1.0, float(np.max(np.abs(values)))):
            return VALUES_SAME
    if auroc.value is not None and auroc.ci95 is not None and auroc.ci95[0] == auroc.ci95[1]:
        return ZERO_WIDTH
    return ""


def unranked(why: str) -> bool:
    """Whether a row marked with ``why`` (:func:`degenerate`) is left out of the ranking: only
    one whose values are the same for every answer, which tell nothing. A row whose AUROC
    interval has no width keeps its place and is marked with a caution: its values do tell
    the answers apart (a perfect AUROC on a few answers has such an interval), but too few
    answers were resampled to say how surely."""
    return why == VALUES_SAME


def record_values(record: Record) -> dict[str, dict[str, float]]:
    """Every method's values of one record (the measures included)."""
    return values_of({"methods": record.methods, "uncertainty": record.uncertainty})


def _order(ids) -> list[str]:
    known = [m for m in METHODS if m in ids]
    return known + [m for m in ids if m not in METHODS]


def rows(records: Sequence[Record]) -> list[tuple[str, str]]:
    """(name, variant) of every row all the records hold, in the registry's order."""
    if not records:
        return []
    every = [record_values(r) for r in records]
    first = every[0]
    return [(m, v) for m in _order(first) for v in first[m]
            if all(v in x.get(m, {}) for x in every)]


def incomplete(records: Sequence[Record]) -> list[str]:
    """A warning for each method some records hold and others lack (it could not be computed
    for those answers, as their warnings say, e.g. P(True) when the server's top log-probs
    miss "True"): :func:`rows` leaves it out, since its metrics would rest on other answers
    than every other row's."""
    n, counts = len(records), {}
    for r in records:
        for m, variants in record_values(r).items():
            for v in variants:
                counts[m, v] = counts.get((m, v), 0) + 1
    return [f"{row_label(m, v)} has a value for {k} of {n} answers only (it could not be "
            "computed for the others, see their warnings); it is left out of the table of "
            "every method" for (m, v), k in counts.items() if k < n]


def absent(records: Sequence[Record], asked: Sequence[str]) -> list[str]:
    """A warning for each method of ``asked`` (the run's methods) that no record holds, with
    what the answers lack (the need of the method's entry that the engine named in an
    analysis' warnings, e.g. token entropies that answers given as text lack): it has no row,
    and the reader should know why. The need's fix (a command-line option) stays in each
    analysis' own warnings, since a page shows the report's."""
    if not records:
        return []
    held = set().union(*(record_values(r) for r in records))
    said = [w for r in records for w in (r.analysis or {}).get("warnings") or ()
            if isinstance(w, str)]
    out = []
    for method_id in asked:
        if method_id in held:
            continue
        method = METHODS.get(method_id)
        lacking = [] if method is None else sorted(
            NEEDS[n].lacking for n in method.needs
            if n in NEEDS and NEEDS[n].lacking and any(
                f"no {NEEDS[n].lacking} that {method_id} reads" in w for w in said))
        out.append(f"{method.label if method else method_id} has no value for any answer, so "
                   "it has no row in the table of every method"
                   + (f": the answers hold no {'; no '.join(lacking)}" if lacking else ""))
    return out


def values(records: Sequence[Record], name: str, variant: str) -> np.ndarray:
    """The uncertainty of every record for one row."""
    return np.array([record_values(r)[name][variant] for r in records], dtype=float)


def arrays(records: Sequence[Record]) -> tuple[np.ndarray, dict[tuple[str, str], np.ndarray]]:
    """(correct, {(name, variant): uncertainties}) of every row."""
    correct = np.array([r.correct for r in records], dtype=bool)
    every = [record_values(r) for r in records]
    return correct, {row: np.array([x[row[0]][row[1]] for x in every], dtype=float)
                     for row in rows(records)}


def lengths(records: Sequence[Record]) -> tuple[np.ndarray | None, str]:
    """Each record's greedy answer length and its unit: ``answer_length`` (tokens) where every
    record holds it, else the words of the greedy answer where every record has it; (None,
    "") otherwise."""
    every = [record_values(r) for r in records]
    if records and all("answer_length" in x for x in every):
        return np.array([x["answer_length"]["value"] for x in every], dtype=float), "tokens"
    if records and all(r.greedy is not None for r in records):
        return np.array([len(r.greedy.split()) for r in records], dtype=float), "words"
    return None, ""


def spearman(u: np.ndarray, length: np.ndarray | None) -> Entry:
    """The Spearman correlation of ``u`` with the lengths (scipy), or undefined with why."""
    from scipy.stats import spearmanr

    if length is None:
        return Entry(None, None, "the records hold no answer lengths")
    if np.ptp(u) == 0 or np.ptp(length) == 0:
        return Entry(None, None, "constant values or lengths: no correlation")
    return Entry(float(spearmanr(u, length).statistic))


def _rank_key(item: tuple[int, tuple[str, str, dict[str, Entry], str]]
              ) -> tuple[int, bool, float, int]:
    k, (_, _, values, why) = item
    value = values[RANKED_BY].value
    # best first, then the rows that tell nothing, undefined last, ties as listed
    return (value is None, unranked(why), -(value or 0.0), k)


def compute(records: Sequence[Record], *, resamples: int, seed: int,
            metrics: dict[str, Any] | None = None, judge: str | None = None) -> MethodsTable:
    """The table: its rows ranked, each with :data:`TABLE_METRICS`, :data:`LENGTH` and its
    :data:`~.checks.VS_BEST` entry; the best MARS row; the unit of the answer lengths
    ("tokens", "words" or ""); its warnings. ``metrics``: the report's metric tables
    (:func:`.report.compute_metrics` with the same resamples and seed), whose entries are used
    as they are. ``judge``: the judge's name (a lexical one turns on the length warning)."""
    if not records:
        return MethodsTable([], None, RANKED_BY)
    correct, u = arrays(records)
    length, unit = lengths(records)
    table = []
    for name, variant in u:
        values = {}
        for metric in TABLE_METRICS:
            known = ((metrics or {}).get(metric) or {}).get(name, {}).get(variant)
            values[metric] = known or Entry.of(metric_math.summarize(
                metric, u[name, variant], correct, resamples=resamples, seed=seed))
        values[LENGTH] = spearman(u[name, variant], length)
        table.append((name, variant, values, degenerate(u[name, variant], values[RANKED_BY])))
    ranked = [row for _, row in sorted(enumerate(table), key=_rank_key)]
    best = next(((name, variant) for name, variant, values, _ in ranked
                 if variant == "mars" and values[RANKED_BY].value is not None), None)
    rows_out = []
    for name, variant, values, why in ranked:
        if best is None:
            vs_best = Entry(None, None, "no MARS row has an AUROC")
        else:
            vs_best = Entry.of(metric_math.paired_difference(
                RANKED_BY, u[name, variant], u[best], correct, resamples=resamples, seed=seed))
        rows_out.append(MethodRow(name, variant, row_label(name, variant), values, vs_best,
                                  why))
    warnings = []
    top = (rows_out[0] if rows_out and rows_out[0].metrics[RANKED_BY].value is not None
           and not unranked(rows_out[0].degenerate) else None)
    tie = top.metrics[LENGTH].value if top else None
    if judge in LEXICAL_JUDGES and tie is not None and tie > LENGTH_LIMIT:
        warnings.append(
            f"The best method, {top.label}, follows the answers' length (Spearman "
            f"{tie:.2f} with the length in {unit}), and the {judge} judge compares words, "
            "which favours length-biased methods (Santilli et al., ACL 2025): check the "
            "ranking with the nli or llm judge (evaluate rejudge RUN_DIR --judge nli)")
    return MethodsTable(rows_out, None if best is None else {
        "name": best[0], "variant": best[1], "label": row_label(*best)}, RANKED_BY,
        length_unit=unit, warnings=warnings)


def markdown_lines(table: MethodsTable) -> list[str]:
    """report.md's section: the ranked table, x100 with the intervals, each row's correlation
    with answer length, and what it is."""
    if not table.rows:
        return []
    against = (f"the best MARS row, {table.best_label}" if table.best_label
               else "the best MARS row (none)")
    unit = table.length_unit or "length"
    lines = ["", "## Every method, ranked by AUROC", "",
             f"Ranked by AUROC (best first); values x100 with the 95% bootstrap interval; "
             f"\"Length ρ\" is the Spearman correlation of the method's values with the greedy "
             f"answer's length (in {unit}); the last column is the row's AUROC minus that of "
             f"{against}, with the paired bootstrap interval (both on the same resampled "
             "questions).", "",
             "| # | Method | " + " | ".join(METRIC_TITLES[m] for m in TABLE_METRICS)
             + " | Length ρ | AUROC − best MARS |",
             "|---|---|" + "---|" * (len(TABLE_METRICS) + 2)]
    place = 0
    for row in table.rows:
        rho = row.metrics[LENGTH].value if LENGTH in row.metrics else None
        why = reason(row)
        place += not unranked(why)
        lines.append(f"| {'–' if unranked(why) else place} | {row.label}"
                     + (f" (not ranked: {why})" if unranked(why) else
                        f" (caution: {why})" if why else "") + " | "
                     + " | ".join(row.metrics[m].text() if m in row.metrics else "n/a"
                                  for m in TABLE_METRICS)
                     + f" | {'n/a' if rho is None else f'{rho:+.2f}'}"
                     + f" | {row.vs_best.text(signed=True)} |")
    if table.warnings:
        lines += ["", *(f"Warning: {w}" for w in table.warnings)]
    return lines


def reason(row: MethodRow) -> str:
    """Why ``row``'s figures tell nothing ("" for an informative row): as the table recorded
    it, else (a report made before rows recorded it) from its AUROC interval alone."""
    return row.degenerate or degenerate(None, row.metrics[RANKED_BY])


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
