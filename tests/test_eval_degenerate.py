"""Figures that tell nothing, said so (without a browser): a method whose values are the same
for every answer is marked and not ranked, and one whose AUROC interval has zero width keeps its
place with a caution, in report.json, report.md and the Evaluation view; the charts that are
compared share their axes.
"""

from __future__ import annotations

import json
import re
from html import unescape as html_unescape

from test_eval_view import full_run, given_run, upload  # noqa: F401  (fixtures)

from mars_demo.evaluation import methods_table
from mars_demo.evaluation.runs import parse_records
from mars_demo.evaluation.schema import MethodsTable
from mars_demo.ui.views.eval_charts import split_columns
from mars_demo.ui.views.eval_view import EvaluationView


def flat_records(run):
    """The run's records with Eigenvalue (entail.) 1.0 for every answer, give or take a
    rounding error (as the issue's run had it: "about 1.0 for every answer")."""
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    for k, row in enumerate(rows):
        row["methods"]["eigv"]["value"] = 1.0 + (k % 3) * 1e-12
    return parse_records("\n".join(json.dumps(r) for r in rows))


def test_a_method_whose_values_do_not_vary_is_not_ranked(given_run):  # noqa: F811
    records = flat_records(given_run)
    table = methods_table.compute(records, resamples=100, seed=0)
    flat = [r for r in table.rows if r.name == "eigv"]
    assert flat and flat[0].degenerate == methods_table.VALUES_SAME
    # after every informative row, and never the best
    order = [bool(r.degenerate) for r in table.rows if r.metrics["auroc"].value is not None]
    assert order == sorted(order), [(r.label, r.degenerate) for r in table.rows]
    assert table.rows[0].degenerate == ""
    # report.json keeps the reason, report.md says it in place of a rank
    again = MethodsTable.from_dict(json.loads(json.dumps(table.to_dict())))
    assert [r.degenerate for r in again.rows] == [r.degenerate for r in table.rows]
    md = "\n".join(methods_table.markdown_lines(table))
    assert re.search(r"\| – \| Eigenvalue \(entail\.\) \(not ranked: its values are the same",
                     md), md


def test_the_view_marks_a_zero_width_interval_and_keeps_its_place(given_run, tmp_path):  # noqa: F811
    """As the issue's run showed it: "AUROC 0.00 [0.00, 0.00]", ranked third without a word.
    A zero-width interval says too few answers were resampled, not that the method tells
    nothing (a perfect AUROC on a few answers has one too): the row keeps its place, with a
    caution under its name."""
    report = json.loads((given_run / "report.json").read_text())
    rows = report["methods_table"]["rows"]
    middle = rows[2]
    middle["auroc"] = {"value": 0.0, "ci95": [0.0, 0.0]}
    middle.pop("degenerate", None)
    html = EvaluationView().show(None, upload(tmp_path, "report.json", json.dumps(report)),
                                 None)["eval_table"]
    table = html.split('class="mars-table mars-eval-methods', 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    found = re.findall(r"<tr( data-degenerate)?><td[^>]*>(.*?)</td><th[^>]*>(.*?)</th>", body)
    ranks = [html_unescape(re.sub(r"<[^>]+>", "", rank)) for _, rank, _ in found]
    marked = [(html_unescape(re.sub(r"<[^>]+>", " ", name)), rank)
              for (flag, _, name), rank in zip(found, ranks) if flag]
    assert len(marked) == 1 and marked[0][1] == "3", marked
    assert middle["label"] in marked[0][0] and "Caution: its AUROC interval has zero width" \
        in marked[0][0]
    assert ranks == [str(k) for k in range(1, len(ranks) + 1)]  # every row keeps its place
    assert "(zero width)" in table
    # and report.md alike: its place, with the caution
    table_of = MethodsTable.from_dict(report["methods_table"])
    md = "\n".join(methods_table.markdown_lines(table_of))
    assert re.search(r"\| 3 \| [^|]*\(caution: its AUROC interval has zero width", md), md


def test_the_rejection_curves_share_their_axes(given_run):  # noqa: F811
    from mars_demo.evaluation.report import figures

    records = parse_records((given_run / "results.jsonl").read_text())
    roc, rejection, _ = figures(records)
    for fig in (roc, rejection):
        charts = split_columns(fig)
        assert len(charts) == 3
        ys = {tuple(c.layout.yaxis.range) for c in charts}
        xs = {tuple(c.layout.xaxis.range) for c in charts}
        assert len(ys) == 1 and len(xs) == 1, (ys, xs)
        low, high = next(iter(ys))
        drawn = [y for c in charts for t in c.data for y in t.y]
        assert low <= min(drawn) and max(drawn) <= high
