"""The table of every method in evaluate, its report, plot, page view and calibration.

Runs are made by hand: a run.json and a results.jsonl whose records carry ``uncertainty``
(the three measures) and ``methods`` (``{id: {variant: value}}``), then the report written by
the evaluate code itself (:func:`mars_demo.evaluation.report.write_report`). Every number of the
table is checked against scikit-learn called here on the same arrays, and the intervals against
a resampling written here.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import average_precision_score, roc_auc_score
from test_eval_metrics import loop_prr_fast

from mars_demo.cli import main
from mars_demo.evaluation import MEASURES, SCORINGS, calibration, methods_table
from mars_demo.evaluation.manifest import Manifest
from mars_demo.evaluation.report import write_report
from mars_demo.evaluation.runs import RunFileError, parse_records, parse_report, read_run
from mars_demo.ui.draw import trust
from mars_demo.ui.guards.redact import Redactor
from mars_demo.ui.views.eval_view import EvaluationView
from mars_demo.verdict import Evidence, covered, judge

N = 40
RESAMPLES = 200
SEED = 5
SETTINGS = {"llm": "tiny-llm", "importance": "tiny-imp", "nli": "tiny-nli", "samples": 5,
            "temperature": 1.0}
#: the methods of the hand-made records and how well each separates (0: not at all)
METHODS = {"semantic_entropy_normalized": ("length_normalized", "mars"),
           "eigv": ("value",), "num_sets": ("value",), "lexical_similarity": ("value",)}


def make_records(with_methods: bool = True) -> list[dict]:
    rng = np.random.default_rng(7)
    correct = rng.random(N) < 0.55
    wrong = (~correct).astype(float)
    records = []
    for i in range(N):
        unc = {m: {s: float(rng.normal() + wrong[i] * (0.4 + 0.3 * k + 0.5 * (s == "mars")))
                   for s in SCORINGS} for k, m in enumerate(MEASURES)}
        row = {"index": i, "id": f"q{i}", "question": f"Question {i}?", "references": ["a"],
               "greedy": "a", "correct": bool(correct[i]), "label": "given", "judge": None,
               "uncertainty": unc, "analysis": {"settings": SETTINGS}, "seconds": 0.1}
        if with_methods:
            row["methods"] = {
                # the same numbers as the measure: listed once
                "semantic_entropy": dict(unc["semantic_entropy"]),
                "semantic_entropy_normalized": {
                    "length_normalized": float(rng.normal() + wrong[i] * 0.2),
                    "mars": float(rng.normal() + wrong[i] * 2.0)},  # the best MARS row
                "eigv": {"value": float(rng.normal() + wrong[i] * 1.0)},
                "num_sets": {"value": float(rng.integers(1, 4) + wrong[i])},  # many ties
                "lexical_similarity": {"value": float(rng.normal())},  # no signal
            }
        records.append(row)
    return records


def make_run(out: pathlib.Path, rows: list[dict], plots: bool = False,
             resamples: int = RESAMPLES) -> dict:
    out.mkdir(parents=True)
    manifest = Manifest(data="hand-made.jsonl", data_fingerprint="x", limit=None, seed=SEED,
                        questions=len(rows), judge={"name": "contains"}, settings=SETTINGS)
    (out / "run.json").write_text(json.dumps(manifest.to_dict()), encoding="utf-8")
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                       encoding="utf-8")
    records = parse_records((out / "results.jsonl").read_text(encoding="utf-8"))
    report = write_report(out, records, manifest=manifest, resamples=resamples, plots=plots,
                          messages=lambda _: None)
    written = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(report.to_dict()))  # the report as returned
    return written


def column(rows: list[dict], name: str, variant: str) -> np.ndarray:
    where = "uncertainty" if name in MEASURES else "methods"
    return np.array([r[where][name][variant] for r in rows])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("methods") / "run"
    rows = make_records()
    return out, rows, make_run(out, rows)


def test_every_row_is_there_once(run):
    _, _, report = run
    table = report["methods_table"]
    got = [(r["name"], r["variant"]) for r in table["rows"]]
    expected = {(m, s) for m in MEASURES for s in SCORINGS} | {
        (m, v) for m, variants in METHODS.items() for v in variants}
    assert len(got) == len(expected) == 11 and set(got) == expected
    assert table["ranked_by"] == "auroc"
    labels = {(r["name"], r["variant"]): r["label"] for r in table["rows"]}
    assert labels["eigv", "value"] == "Eigenvalue (entail.)"
    assert labels["semantic_entropy_normalized", "mars"] == "Semantic entropy, normalized (MARS)"


def test_the_numbers_are_scikit_learns(run):
    _, rows, report = run
    wrong = np.array([not r["correct"] for r in rows]).astype(int)
    correct = [r["correct"] for r in rows]
    assert 0 < wrong.sum() < N
    for row in report["methods_table"]["rows"]:
        u = column(rows, row["name"], row["variant"])
        assert row["auroc"]["value"] == pytest.approx(roc_auc_score(wrong, u), abs=1e-12)
        assert row["auprc"]["value"] == pytest.approx(average_precision_score(wrong, u),
                                                      abs=1e-12)
        if len(set(u)) == N:  # one rejection order (num_sets has ties: its PRR is the metric
            # module's, tested on ties in test_eval_metrics)
            assert row["prr"]["value"] == pytest.approx(loop_prr_fast(list(u), correct),
                                                        abs=1e-9)
        for metric in ("auroc", "auprc", "prr"):
            lo, hi = row[metric]["ci95"]
            assert lo < hi
        if row["name"] in MEASURES:  # the measures' entries are the report's own
            for metric in ("auroc", "auprc", "prr"):
                assert row[metric] == report["metrics"][metric][row["name"]][row["variant"]]
    # an interval, from the same seeded resamples, computed here
    eigv = next(r for r in report["methods_table"]["rows"] if r["name"] == "eigv")
    u = column(rows, "eigv", "value")
    values = [roc_auc_score(wrong[idx], u[idx])
              for idx in np.random.default_rng(SEED).integers(0, N, size=(RESAMPLES, N))
              if 0 < wrong[idx].sum() < N]
    assert eigv["auroc"]["ci95"] == pytest.approx(list(np.percentile(values, [2.5, 97.5])),
                                                  abs=1e-12)


def test_rows_are_ranked_and_compared_with_the_best_mars_row(run):
    _, rows, report = run
    wrong = np.array([not r["correct"] for r in rows]).astype(int)
    table = report["methods_table"]
    aurocs = [r["auroc"]["value"] for r in table["rows"]]
    assert aurocs == sorted(aurocs, reverse=True)
    mars = [r for r in table["rows"] if r["variant"] == "mars"]
    best = max(mars, key=lambda r: r["auroc"]["value"])
    assert table["best_mars"] == {"name": best["name"], "variant": "mars",
                                  "label": best["label"]}
    assert best["name"] == "semantic_entropy_normalized"  # made the strongest above
    assert best["auroc_minus_best_mars"]["value"] == 0.0
    assert best["auroc_minus_best_mars"]["ci95"] == [0.0, 0.0]
    u_best = column(rows, best["name"], "mars")
    idx_all = np.random.default_rng(SEED).integers(0, N, size=(RESAMPLES, N))
    for row in table["rows"]:
        u = column(rows, row["name"], row["variant"])
        diff = row["auroc_minus_best_mars"]
        assert diff["value"] == pytest.approx(
            roc_auc_score(wrong, u) - roc_auc_score(wrong, u_best), abs=1e-12)
        if row["name"] == "lexical_similarity":  # paired: the same questions on both sides
            diffs = [roc_auc_score(wrong[i], u[i]) - roc_auc_score(wrong[i], u_best[i])
                     for i in idx_all if 0 < wrong[i].sum() < N]
            assert diff["ci95"] == pytest.approx(list(np.percentile(diffs, [2.5, 97.5])),
                                                 abs=1e-12)
            assert diff["ci95"][1] < 0  # no signal: clearly worse than the best MARS row


def test_report_md_shows_the_ranked_table(run):
    out, _, report = run
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "## Every method, ranked by AUROC" in md
    assert "Ranked by AUROC (best first)" in md
    section = md.split("## Every method, ranked by AUROC")[1]
    table = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(table) == 1 + 11
    for k, (line, row) in enumerate(zip(table[1:], report["methods_table"]["rows"]), 1):
        lo, hi = row["auroc"]["ci95"]
        assert line.startswith(f"| {k} | {row['label']} | {row['auroc']['value'] * 100:.2f} "
                               f"[{lo * 100:.2f}, {hi * 100:.2f}]")
        diff = row["auroc_minus_best_mars"]
        lo, hi = diff["ci95"]
        assert line.endswith(f" {diff['value'] * 100:+.2f} [{lo * 100:.2f}, {hi * 100:.2f}] |")
    assert table[1].endswith(" +0.00 [0.00, 0.00] |")  # the best MARS row leads here


def test_the_plot_draws_the_top_five(run, tmp_path):
    out, rows, report = run
    records = read_run(out).records
    fig, warnings = methods_table.roc_figure(
        records, [(r["name"], r["variant"]) for r in report["methods_table"]["rows"]])
    assert not warnings
    top = report["methods_table"]["rows"][:5]
    assert [t.name for t in fig.data] == [
        f"{r['label']}, AUROC {r['auroc']['value']:.3f}" for r in top] + ["random"]
    # the run's plots include it
    again = make_run(tmp_path / "plotted", rows, plots=True, resamples=10)
    assert "roc_methods.html" in again["plots"]
    assert (tmp_path / "plotted" / "roc_methods.html").stat().st_size > 1000


def test_a_run_without_methods_lists_the_measures(tmp_path):
    rows = make_records(with_methods=False)
    report = make_run(tmp_path / "old", rows, resamples=10)
    got = [(r["name"], r["variant"]) for r in report["methods_table"]["rows"]]
    assert set(got) == {(m, s) for m in MEASURES for s in SCORINGS}
    assert read_run(tmp_path / "old").records[0].methods == {}
    # a report made before the table: read as before, no rows
    raw = json.loads((tmp_path / "old" / "report.json").read_text())
    del raw["methods_table"]
    assert parse_report(json.dumps(raw)).methods_table.rows == []


@pytest.mark.parametrize("change, message", [
    (lambda r: r["methods"]["eigv"].update(value="1"), "methods.eigv.value is not a number"),
    (lambda r: r["methods"]["eigv"].update(raw=1.0), "'raw', not one of"),
    (lambda r: r["methods"].update({"Bad id": {"value": 1.0}}), "not a measure or scoring"),
    (lambda r: r["methods"]["eigv"].update(value=1e300), "outside"),
    (lambda r: r.update(methods=[1]), "\"methods\" is not an object"),
])
def test_bad_methods_in_records_are_refused(change, message):
    rows = make_records()[:3]
    change(rows[1])
    with pytest.raises(RunFileError, match=message.replace("(", r"\(")):
        parse_records("\n".join(json.dumps(r) for r in rows))


def test_the_view_shows_the_ranked_table_and_the_top_curves(run, tmp_path):
    out, _, report = run
    view = EvaluationView(out.parent)
    update = view.show("run", None, None)
    assert update["eval_error"] == ""
    html = update["eval_table"]
    assert 'class="mars-table mars-eval-methods mars-stack"' in html  # cards on a phone
    body = html.split("mars-eval-methods")[1]
    positions = []
    for row in report["methods_table"]["rows"]:
        lo, hi = row["auroc"]["ci95"]
        cell = (f"{row['auroc']['value'] * 100:.2f} <span class=\"mars-muted\">"
                f"[{lo * 100:.2f}, {hi * 100:.2f}]</span>").replace("-", "−").replace(
                    "mars−muted", "mars-muted")
        assert cell in body, row["label"]
        positions.append(body.index(f"<th scope=\"row\">{row['label']}</th>"))
    assert positions == sorted(positions)  # ranked as the report
    assert "the best MARS row, Semantic entropy, normalized (MARS), with" in html
    fig = update["eval_roc_methods"]
    assert len(fig.data) == 6 and fig.data[-1].name == "random"


def test_a_hostile_methods_table_gets_a_clear_message(run, tmp_path):
    out, _, _ = run
    raw = json.loads((out / "report.json").read_text())
    raw["methods_table"]["rows"][0]["auroc"]["value"] = 2.0
    with pytest.raises(RunFileError, match=r"methods_table.rows\[1\].auroc = 2 is outside"):
        parse_report(json.dumps(raw))
    raw["methods_table"]["rows"][0]["auroc"]["value"] = 0.5
    raw["methods_table"]["rows"][0]["name"] = "<script>"
    with pytest.raises(RunFileError):
        parse_report(json.dumps(raw))


def test_calibrate_on_a_method(run, tmp_path, capsys):
    out, rows, _ = run
    path = tmp_path / "eigv.json"
    assert main(["evaluate", "calibrate", str(out), "--measure", "eigv",
                 "--out", str(path), "--no-plots"]) == 0, capsys.readouterr().err
    cal = calibration.load(path)
    assert (cal.measure, cal.scoring) == ("eigv", "value")
    u = column(rows, "eigv", "value")
    c = [r["correct"] for r in rows]
    iso = IsotonicRegression(increasing=False, y_min=0, y_max=1, out_of_bounds="clip").fit(u, c)
    wrong = [not x for x in c]
    assert cal.auroc == pytest.approx(roc_auc_score(wrong, u), abs=1e-12)
    # an analysis's chance is read from its methods
    analysis = {"settings": SETTINGS, "uncertainty": rows[0]["uncertainty"],
                "methods": {"eigv": {"value": 0.7}}}
    assert cal.chance(analysis) == pytest.approx(float(iso.predict([0.7])[0]), abs=1e-12)
    estimate = covered(analysis, cal)
    assert estimate["uncertainty"] == 0.7 and estimate["measure"] == "eigv"
    shown = trust.trust_html(judge(Evidence(5, 5, 1, True), calibration=estimate))
    assert f"About <b>{round(100 * cal.chance(analysis))}%</b>" in shown
    assert "this answer&#x27;s Eigenvalue (entail.) (no scoring) = 0.700" in shown
    # an analysis without that method gets no chance, and says why, also on a public page
    missing = covered({"settings": SETTINGS, "methods": {}}, cal)
    assert missing["chance_correct"] is None and missing["other"] == "settings"
    assert "no eigv (value) value" in missing["reason"]
    public = Redactor(public=True).calibration(missing)
    html = trust.trust_html(judge(Evidence(5, 5, 1, True), calibration=public))
    assert "no eigv (value) value" in html
    # a scored method: its MARS variant by default, LN when asked
    assert main(["evaluate", "calibrate", str(out), "--measure",
                 "semantic_entropy_normalized", "--scoring", "length_normalized",
                 "--out", str(path), "--no-plots"]) == 0
    assert calibration.load(path).scoring == "length_normalized"
    report = json.loads((out / "report.json").read_text())
    assert report["calibration"]["measure"] == "semantic_entropy_normalized"
    md = (out / "report.md").read_text()
    assert "## Calibration of Semantic entropy, normalized (LN) (held out)" in md


@pytest.mark.parametrize("flags, message", [
    (["--measure", "token_sar"], "has no uncertainty 'token_sar'; it has confidence, entropy, "
     "semantic_entropy, semantic_entropy_normalized, num_sets, lexical_similarity, eigv"),
    (["--measure", "eigv", "--scoring", "mars"], "has no eigv (mars) uncertainty; eigv has value"),
    (["--measure", "confidence", "--scoring", "value"], "has no confidence (value) "
     "uncertainty; confidence has length_normalized, mars"),
])
def test_calibrate_refuses_what_the_run_does_not_hold(run, tmp_path, capsys, flags, message):
    out, _, _ = run
    assert main(["evaluate", "calibrate", str(out), *flags,
                 "--out", str(tmp_path / "c.json")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


def test_a_calibration_file_names_an_uncertainty(run, tmp_path, capsys):
    out, _, _ = run
    path = tmp_path / "c.json"
    assert main(["evaluate", "calibrate", str(out), "--measure", "num_sets",
                 "--out", str(path), "--no-plots"]) == 0
    data = json.loads(path.read_text())
    assert calibration.Calibration.from_dict(data).measure == "num_sets"
    for measure, scoring in (("num sets", "value"), ("num_sets", "raw"),
                             ("confidence", "value")):
        bad = dict(data, measure=measure, scoring=scoring)
        with pytest.raises(calibration.CalibrationError, match="neither a measure"):
            calibration.Calibration.from_dict(bad)
    with pytest.raises(ValueError, match="a method id with a variant"):
        calibration.fit([0.1, 0.2], [True, False], measure="eigv", scoring="mars_x",
                        models={}, data="d", auroc=None)


def test_compare_takes_the_methods_both_runs_hold(run, tmp_path):
    from mars_demo.evaluation.compare import compare_runs, markdown

    out, rows, _ = run
    other = make_records()
    rng = np.random.default_rng(11)
    for r in other:  # B's eigv is A's with noise; B has no lexical_similarity
        r["methods"]["eigv"]["value"] += float(rng.normal())
        del r["methods"]["lexical_similarity"]
    make_run(tmp_path / "b", other, resamples=10)
    result = compare_runs(read_run(out), read_run(tmp_path / "b"), "A", "B", resamples=20)
    wrong = [not r["correct"] for r in rows]
    entry = result["metrics"]["auroc"]["eigv"]["value"]
    ua, ub = column(rows, "eigv", "value"), column(other, "eigv", "value")
    assert entry["a"] == pytest.approx(roc_auc_score(wrong, ua), abs=1e-12)
    assert entry["b_minus_a"]["value"] == pytest.approx(
        roc_auc_score(wrong, ub) - roc_auc_score(wrong, ua), abs=1e-12)
    assert "lexical_similarity" not in result["metrics"]["auroc"]
    assert set(result["metrics"]["auroc"]["semantic_entropy"]) == set(SCORINGS)  # listed once
    assert "| Eigenvalue (entail.) |" in markdown(result)
    old = make_records(with_methods=False)
    make_run(tmp_path / "old", old, resamples=10)
    result = compare_runs(read_run(out), read_run(tmp_path / "old"), "A", "old", resamples=20)
    assert set(result["metrics"]["auroc"]) == set(MEASURES)


def test_rows_are_named_by_the_method_registry_so_a_method_has_one_name_everywhere():
    import doctest

    from mars_demo import methods
    from mars_demo.evaluation import labels

    for method in methods.METHODS.values():
        for variant in method.variants:
            assert labels.row_label(method.id, variant) == methods.label(method.id, variant)
    assert labels.row_label("entropy", "mars") == "Entropy (MARS)"
    assert labels.row_label("some_later_method", "value") == "some later method"
    assert doctest.testmod(labels).failed == 0


def test_a_method_some_answers_lack_is_left_out_of_the_table_with_a_warning(tmp_path):
    """P(True) through a server has no value where "True" is not among the top log-probs: the
    run still reads, the table leaves that method out (its metrics would rest on other
    answers), and the report says so."""
    rows = make_records()
    for row in rows[:3]:
        row["methods"].pop("num_sets")
    assert len(parse_records("\n".join(json.dumps(r) for r in rows))) == len(rows)
    report = make_run(tmp_path / "gaps", rows, resamples=10)
    names = {r["name"] for r in report["methods_table"]["rows"]}
    assert "num_sets" not in names and "eigv" in names
    n = len(rows)
    assert any(w.startswith(f"Number of meanings has a value for {n - 3} of {n} answers only")
               for w in report["warnings"]), report["warnings"]
    whole = parse_records("\n".join(json.dumps(r) for r in make_records()))
    assert methods_table.incomplete(whole) == []


def sar_records(similarity: str | None, methods: list[str]) -> list[dict]:
    """The hand-made records with a ``sar`` value, their analyses made with ``methods`` and
    SAR's similarity model ``similarity``."""
    rows = make_records()
    rng = np.random.default_rng(19)
    for r in rows:
        r["methods"]["sar"] = {"value": float(rng.normal() + (not r["correct"]))}
        r["analysis"] = {"settings": {**SETTINGS, "similarity": similarity,
                                      "methods": methods}}
    return rows


def test_a_run_names_the_similarity_model_where_its_methods_ran_it(run, tmp_path, capsys):
    """report.json, report.md, --compare and --calibrate name SAR's similarity model of a run
    whose analyses ran a SAR method, and a run without one claims none."""
    from mars_demo.evaluation.compare import compare_runs, markdown

    a = make_run(tmp_path / "a", sar_records("org/sts-a", ["eigv", "sar"]), resamples=10)
    assert a["models"] == {"llm": "tiny-llm", "importance": "tiny-imp", "nli": "tiny-nli",
                           "similarity": "org/sts-a"}
    md = (tmp_path / "a" / "report.md").read_text(encoding="utf-8")
    assert "NLI tiny-nli, similarity (SAR) org/sts-a." in md
    # the similarity model is in every analysis's settings, but only SAR runs it
    unused = make_run(tmp_path / "unused", sar_records("org/sts-a", ["eigv"]), resamples=10)
    assert "similarity" not in unused["models"] and "similarity" not in run[2]["models"]
    assert "similarity (SAR)" not in (tmp_path / "unused" / "report.md").read_text(
        encoding="utf-8")

    make_run(tmp_path / "b", sar_records("org/sts-b", ["eigv", "sar"]), resamples=10)
    both = compare_runs(read_run(tmp_path / "a"), read_run(tmp_path / "b"), "A", "B",
                        resamples=20)
    assert both["warnings"] == ["the runs used different models (similarity: org/sts-a vs "
                                "org/sts-b)"]
    assert "| similarity | org/sts-a | org/sts-b |" in markdown(both)
    one = compare_runs(read_run(tmp_path / "a"), read_run(tmp_path / "unused"), "A", "U",
                       resamples=20)
    assert not any("different models" in w for w in one["warnings"])
    assert "| similarity | org/sts-a | none |" in markdown(one)

    head = EvaluationView(tmp_path, public=True).show("a", None, None)["eval_table"]
    assert "NLI model tiny-nli, similarity (SAR) org/sts-a.</p>" in head
    assert "similarity (SAR)" not in EvaluationView(tmp_path).show("unused", None, None)[
        "eval_table"].split("</p>")[0]

    path = tmp_path / "sar.json"
    assert main(["evaluate", "calibrate", str(tmp_path / "a"), "--measure", "sar",
                 "--out", str(path), "--no-plots"]) == 0, capsys.readouterr().err
    assert json.loads(path.read_text())["models"]["similarity"] == "org/sts-a"
    with pytest.raises(calibration.CalibrationError, match="similarity: calibrated with"):
        calibration.load(path).check_models({**a["models"], "similarity": "org/sts-b"})


def test_a_resumed_run_refuses_answers_of_another_similarity_model(tmp_path):
    from types import SimpleNamespace

    from mars_demo.evaluation.batches import _check_models
    from mars_demo.evaluation.runs import RunError

    def made(similarity):
        return SimpleNamespace(settings={**SETTINGS, "similarity": similarity,
                                         "methods": ["sar"]})

    expected = _check_models(None, made("org/sts-a"), tmp_path)
    assert expected["similarity"] == "org/sts-a"
    with pytest.raises(RunError, match="similarity: 'org/sts-a' in the run, 'org/sts-b' now.*"
                                       "--nli, --similarity, --load-in-4bit"):
        _check_models(expected, made("org/sts-b"), tmp_path)
