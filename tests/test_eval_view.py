"""The calibration on the page and the API, and the Evaluation view, without a browser.

Runs are made as tests/test_evaluate.py makes them: the pre-generated answers of
data/facts_answers.jsonl (no LLM), or the tiny random LLM on data/facts.jsonl. Every chance the
page or the API shows is checked against scikit-learn's own isotonic fit on the run's results.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
from html import escape as html_escape
from html import unescape as html_unescape

import numpy as np
import pytest
from test_evaluate import ANSWERS, FACTS, full_run, lines, model_flags  # noqa: F401
from ui_helpers import FakeEngine, make_result, page_event, running_app

from mars_demo import texts
from mars_demo.cli import main
from mars_demo.evaluation import MEASURES, SCORINGS
from mars_demo.evaluation import calibration as calibration_module
from mars_demo.evaluation.runs import parse_report
from mars_demo.evaluation.schema import Entry
from mars_demo.hosting.access import public_access
from mars_demo.result import AnalysisResult
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.views.eval_view import EvaluationView
from mars_demo.ui.work import controls
from mars_demo.ui.work.host import EngineHost
from mars_demo.verdict import verdict

ROOT = pathlib.Path(__file__).resolve().parents[1]


def isotonic_chance(run: pathlib.Path, uncertainty: float, measure="semantic_entropy",
                    scoring="mars") -> float:
    """P(correct) at ``uncertainty`` from scikit-learn's own fit on the run's results."""
    from sklearn.isotonic import IsotonicRegression

    records = lines(run / "results.jsonl")
    u = [r["uncertainty"][measure][scoring] for r in records]
    c = [r["correct"] for r in records]
    iso = IsotonicRegression(increasing=False, y_min=0, y_max=1, out_of_bounds="clip").fit(u, c)
    return float(iso.predict([uncertainty])[0])


@pytest.fixture(scope="module")
def given_run(full_run):
    """The 40 pre-generated questions (no LLM), the default judge with its judge check,
    calibrated (SE, MARS): test_evaluate's full run."""
    return full_run


@pytest.fixture(scope="module")
def tiny_llm_run(tiny_models, tmp_path_factory):
    """The tiny LLM's own answers to 10 questions, with labels given in the data (half right,
    half wrong: the random LLM answers no question right), calibrated: a calibration of the
    models app.py loads in the tests."""
    base = tmp_path_factory.mktemp("runs")
    data = base / "labelled.jsonl"
    rows = [json.loads(x) for x in FACTS.read_text(encoding="utf-8").splitlines()][:10]
    data.write_text("".join(json.dumps({**r, "correct": k % 2 == 0}) + "\n"
                            for k, r in enumerate(rows)), encoding="utf-8")
    out = base / "facts-tiny"
    assert main(["evaluate", "run", "--data", str(data), "--out", str(out), "--llm",
                 str(tiny_models["llm"]), "--max-new-tokens", "6", "--samples", "2",
                 "--bootstrap", "50", "--no-plots", *model_flags(tiny_models)]) == 0
    assert main(["evaluate", "calibrate", str(out)]) == 0
    return out


def controller(calibration=None, access=None, result=None) -> Controller:
    return Controller(EngineHost(FakeEngine(result=result)), access, calibration=calibration)


def judged(result: AnalysisResult, calibration) -> AnalysisResult:
    """``result`` with the verdict an engine given ``calibration`` computes (the page shows the
    verdict it is given)."""
    result.verdict = verdict(result, calibration)
    return result


def first_result(run: pathlib.Path) -> AnalysisResult:
    return AnalysisResult.from_dict(lines(run / "results.jsonl")[0]["analysis"])


# --- the trust line and the API field ------------------------------------------------------------


def test_the_page_shows_the_chance_and_where_it_comes_from(given_run):
    cal = calibration_module.load(given_run / "calibration.json")
    result = judged(first_result(given_run), cal)
    update = controller(cal).show(result, "mars")
    expected = isotonic_chance(given_run, result.uncertainty.semantic_entropy.mars)
    assert f"About <b>{round(100 * expected)}%</b> likely to be right." in update["verdict"]
    # the verdict's own line says it too, and on what it was calibrated
    assert (f'<p class="mars-verdict-said mars-verdict-chance">About {round(100 * expected)}% likely right '
            f"(calibrated on ") in update["verdict"]
    report = json.loads((given_run / "report.json").read_text())
    # the run's data by its file's name: the page shows no server folder
    assert str(ANSWERS.parent) not in update["verdict"]
    for part in (f"n = {report['n']} questions", ANSWERS.name, "judge contains",
                 f"AUROC of that uncertainty there "
                 f"{report['metrics']['auroc']['semantic_entropy']['mars']['value']:.2f}",
                 "Semantic Entropy (MARS)"):
        assert part in update["verdict"], part
    # a new question clears the line while it is answered, a failure too
    assert controller(cal)._failed(RuntimeError("x"))["verdict"] == ""


def test_without_a_calibration_the_page_says_what_the_numbers_mean(given_run):
    html = controller().show(first_result(given_run), "mars")["verdict"]
    assert "lower uncertainty = more trustworthy" in html
    assert "not a probability" in html and "likely right" not in html  # no chance of being right
    assert "likely to be right" not in html
    assert "Table 1" in html and "MARS scoring predicted wrong answers better" in html
    # the paper's claim names its source, not this page's run
    assert "In the MARS paper (Bakman et al., ACL 2024, Table 1: 7B and 13B models" in html
    # no tone of trust without a calibration
    assert 'data-tone="neutral"' in html or 'data-tone="caution"' in html


def test_a_calibration_that_cannot_tell_answers_apart_says_so(given_run):
    cal = calibration_module.load(given_run / "calibration.json")
    result = first_result(given_run)
    assert "Careful" not in controller(cal).show(judged(result, cal), "mars")["verdict"]
    cal.auroc = None  # as fit on answers that were all wrong (or all right)
    assert "all right or all wrong" in controller(cal).show(judged(result, cal),
                                                            "mars")["verdict"]


def test_answers_of_other_models_get_no_chance(given_run):
    cal = calibration_module.load(given_run / "calibration.json")
    other = judged(make_result(), cal)  # made by other models (the page's defaults)
    html = controller(cal).show(other, "mars")["verdict"]
    assert "No chance of being right" in html and "likely to be right" not in html
    assert "other models" in html and "hand-written" in html  # says which
    public = controller(cal, public_access()).show(other, "mars")["verdict"]
    assert html_escape(texts.TRUST_OTHER_MODELS) in public and "hand-written" not in public


def test_the_api_result_gets_a_calibration_field(given_run):
    cal = calibration_module.load(given_run / "calibration.json")
    result = first_result(given_run)
    data = controller(cal, result=result).api.analyze("What is the capital of Australia?")
    field = data["calibration"]
    assert field["chance_correct"] == pytest.approx(
        isotonic_chance(given_run, result.uncertainty.semantic_entropy.mars), abs=1e-12)
    assert field["n"] == 40 and field["data"] == str(ANSWERS)
    assert field["measure"] == "semantic_entropy" and field["scoring"] == "mars"
    assert field["uncertainty"] == data["uncertainty"]["semantic_entropy"]["mars"]
    # additive: the analysis JSON is unchanged otherwise
    assert {k: v for k, v in data.items() if k != "calibration"} == result.to_dict()
    other = controller(cal, result=make_result()).api.analyze("Which planet?")
    assert other["calibration"]["chance_correct"] is None and other["calibration"]["reason"]
    assert "calibration" not in controller(result=result).api.analyze("Which planet?")


def test_chance_of_is_the_library_function(given_run):
    result = first_result(given_run)
    path = given_run / "calibration.json"
    expected = isotonic_chance(given_run, result.uncertainty.semantic_entropy.mars)
    assert calibration_module.chance_of(result, path) == pytest.approx(expected, abs=1e-12)
    loaded = calibration_module.load(path)
    assert calibration_module.chance_of(result.to_dict(), loaded) == pytest.approx(expected,
                                                                                   abs=1e-12)
    with pytest.raises(calibration_module.CalibrationError, match="other models"):
        calibration_module.chance_of(make_result(), path)


# --- app.py --calibration ---------------------------------------------------------------------


def test_app_refuses_a_calibration_of_other_models_before_serving(given_run, tiny_models):
    """The pre-generated answers' calibration names a hand-written 'LLM': app.py with the tiny
    LLM stops with one line, before it loads a model or serves."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MARS_DEMO_SHARE": "0",
           "MARS_DEMO_CALIBRATION": str(given_run / "calibration.json")}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "--llm", str(tiny_models["llm"]),
         "--importance", str(tiny_models["importance"]), "--nli", str(tiny_models["nli"]),
         "--port", "9"],  # never reached: port 9 would fail to serve
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    errors = [x for x in proc.stderr.splitlines() if x.startswith("python app.py: error:")]
    assert len(errors) == 1 and "other models" in errors[0] and "hand-written" in errors[0]
    assert "models ready" not in proc.stderr + proc.stdout


def test_app_reads_the_calibration_flag_and_variable(given_run, tmp_path):
    from mars_demo import serve as app

    path = str(given_run / "calibration.json")
    args = app.parse_args([], env={"MARS_DEMO_CALIBRATION": path})
    assert args.calibration_data.n == 40
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(SystemExit):
        app.parse_args(["--calibration", str(bad)], env={})
    with pytest.raises(SystemExit):
        app.parse_args(["--runs", str(tmp_path / "missing")], env={})


def test_check_calibration_uses_the_ids_known_before_loading(given_run):
    from mars_demo import serve as app
    from mars_demo.settings import Settings

    cal = calibration_module.load(given_run / "calibration.json")
    info = {"llm": cal.models["llm"], "importance": cal.models["importance"],
            "nli": cal.models["nli"]}
    made = Settings(llm=cal.models["llm"])  # as the engine describes it
    assert app.check_calibration(cal, info, made) is None
    with pytest.raises(calibration_module.CalibrationError):
        app.check_calibration(cal, {**info, "nli": "another/nli"}, made)
    with pytest.raises(calibration_module.CalibrationError):
        app.check_calibration(cal, info, Settings(llm="another/llm"))
    served = Settings(llm_endpoint="http://127.0.0.1:1/v1")
    note = app.check_calibration(cal, {**info, "llm": "x (served over HTTP)"}, served)
    assert note == texts.APP_CALIBRATION_LLM_LATER
    with pytest.raises(calibration_module.CalibrationError):
        app.check_calibration(cal, info, Settings(llm_endpoint="http://127.0.0.1:1/v1",
                                                  llm_model="another-model"))


def test_app_with_a_calibration_shows_the_chance_on_the_page_and_the_api(
        tiny_llm_run, tiny_models, tmp_path):
    from gradio_client import Client

    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(tiny_llm_run, runs / "tiny")
    with running_app(tiny_models, "--calibration", str(tiny_llm_run / "calibration.json"),
                     "--runs", str(runs)) as url:
        client = Client(url, verbose=False)
        data = client.predict("What is the capital city of Australia?", samples=2,
                              max_new_tokens=6, api_name="/analyze")
        expected = isotonic_chance(tiny_llm_run, data["uncertainty"]["semantic_entropy"]["mars"])
        assert data["calibration"]["chance_correct"] == pytest.approx(expected, abs=1e-12)
        assert data["calibration"]["n"] == 10
        # the page: the same question through the page's Ask event
        config = __import__("httpx").get(f"{url}/config", timeout=30).json()
        ask = next(d for d in config["dependencies"] if d["api_name"] == "ask")
        n_inputs = len(ask["inputs"])
        defaults = {c["id"]: c.get("props", {}).get("value") for c in config["components"]}
        elem = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
        values = [defaults[i] for i in ask["inputs"]]
        values[0] = "What is the capital city of Australia?"
        assert n_inputs == len(values)
        # the page's default settings (5 samples, 64 tokens) are not the calibrated run's
        out = page_event(url, "ask", values)
        assert "No chance of being right" in out["mars-verdict"]
        assert "samples 5 here, 2 in the calibration" in html_unescape(out["mars-verdict"])
        # the run's settings: its chance
        run_settings = {controls.elem_id("samples"): 2, controls.elem_id("max_new_tokens"): 6}
        values = [run_settings.get(elem[i], v) for i, v in zip(ask["inputs"], values)]
        out = page_event(url, "ask", values)
        trust = out["mars-verdict"]
        assert "likely to be right" in trust and "n = 10 questions" in trust
        # the Evaluation view offers the run by name
        shown = page_event(url, "evaluation_show", ["tiny", None, None])
        assert "Confidence (LN)" in shown["mars-eval-table"]


# --- the Evaluation view ------------------------------------------------------------------------


def upload(tmp_path: pathlib.Path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return str(path)


def test_the_view_shows_a_runs_table_and_curves(given_run, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(given_run, runs / "facts")
    view = EvaluationView(runs)
    assert view.runs() == ["facts"]
    update = view.show("facts", None, None)
    assert update["eval_error"] == ""
    # what the page sends (kept per run) has the run's one-sentence answer too
    assert "Does MARS help here? " in view.shown("facts", None, None)["eval_verdict"]
    report = json.loads((given_run / "report.json").read_text())
    html = update["eval_table"]
    for m in MEASURES:
        for s in SCORINGS:
            entry = report["metrics"]["auroc"][m][s]
            lo, hi = entry["ci95"]
            assert f"{entry['value'] * 100:.2f}".replace("-", "−") in html
            assert f"[{lo * 100:.2f}, {hi * 100:.2f}]".replace("-", "−") in html
        diff = report["metrics"]["auroc"][m]["mars_minus_length_normalized"]["value"]
        assert f"{diff * 100:+.2f}".replace("-", "−") in html
    assert f"n = {report['n']} questions" in html
    assert 'class="mars-muted"' in html and "mars−muted" not in html  # the intervals' style
    assert str(ANSWERS) in html  # a local page names the data set's file
    public = EvaluationView(runs, public=True).show("facts", None, None)["eval_table"]
    assert str(ANSWERS) not in public and "facts_answers.jsonl" in public
    assert "/tmp" not in public and "/work" not in public
    # the curves: one ROC and one rejection line per measure and scoring, from the run's data
    roc, rej = update["eval_roc"], update["eval_rejection"]
    names = [t.name for t in roc.data]
    assert names.count("MARS") == 3 and names.count("length-normalized") == 3
    records = lines(given_run / "results.jsonl")
    correct = np.array([r["correct"] for r in records])
    assert rej.data[0].y[0] == pytest.approx(correct.mean())  # nothing rejected: the accuracy
    assert "results.jsonl (facts): 40 questions" in update["eval_note"]


def table_rows(html: str, cls: str) -> dict[str, list[str]]:
    """The rows of the view's table ``cls``: row header -> the cells' text (tags removed)."""
    import re

    table = html.split(f'class="mars-table {cls}', 1)[1].split("</table>", 1)[0]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>", 1)[1]):
        head = html_unescape(re.sub(r"<[^>]+>", "", re.search(r"<th[^>]*>(.*?)</th>",
                                                                row).group(1)))
        rows[head] = [html_unescape(re.sub(r"<[^>]+>", "", c))
                      for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
    return rows


def shown(entry: dict, signed: bool = False) -> str:
    fmt = "{:+.2f}" if signed else "{:.2f}"
    lo, hi = entry["ci95"]
    return (fmt.format(entry["value"] * 100) + f" [{lo * 100:.2f}, {hi * 100:.2f}]"
            ).replace("-", "−")


def test_the_view_shows_every_metric_the_judge_and_the_calibration(given_run):
    """AUROC, AUPRC, PRR and AURAC of every method with their intervals, the paired MARS - LN
    row of every measure, the judge and its judge check, the held-out calibration quality."""
    report = json.loads((given_run / "report.json").read_text())
    html = EvaluationView().show(None, str(given_run / "report.json"), None)["eval_table"]
    rows = table_rows(html, "mars-eval-table")
    names = {"length_normalized": " (LN)", "mars": " + MARS"}
    assert list(rows) == [texts.MEASURE_NAMES[m] + names[s] for s in SCORINGS for m in MEASURES]
    for m in MEASURES:
        for s in SCORINGS:
            assert rows[texts.MEASURE_NAMES[m] + names[s]] == [
                shown(report["metrics"][metric][m][s])
                for metric in ("auroc", "auprc", "prr", "aurac")]
    assert "<th scope=\"col\">PRR</th><th scope=\"col\">AURAC</th>" in html
    paired = table_rows(html, "mars-eval-diff")
    for m in MEASURES:
        assert paired[texts.MEASURE_NAMES[m]] == [
            shown(report["metrics"][metric][m]["mars_minus_length_normalized"], signed=True)
            for metric in ("auroc", "auprc", "prr", "aurac")]
    text = html_unescape(html)
    check = report["judge_check"]
    assert "(judge contains)" in text
    assert (f"On the judge check judge_check.jsonl (n = {check['n']}) this judge agreed with "
            f"the human labels on {check['agreement'] * 100:.1f}%") in text
    cal = report["calibration"]
    assert (f"Calibration of Semantic Entropy + MARS, held out by 5-fold cross-validation: "
            f"Brier score {cal['brier']:.3f} (the accuracy alone: "
            f"{cal['brier_constant']:.3f}), expected calibration error {cal['ece']:.3f}") in text


def test_the_views_rows_come_from_the_report(given_run, tmp_path):
    """A measure the view does not know is a row too (a later method needs no view code);
    labels given and the report's warnings are shown, escaped."""
    good = json.loads((given_run / "report.json").read_text())
    extra = {"raw": {"value": 0.61, "ci95": [0.5, 0.7]}}
    for metric in good["metrics"]:
        good["metrics"][metric]["p_true"] = extra
    good["labels"] = {"given": 3, "judged": 37}
    good["warnings"] = ["most answers are <long> sentences"]
    good["judge"] = {"name": "rouge", "threshold": 0.3}
    html = EvaluationView().show(None, upload(tmp_path, "report.json", json.dumps(good)),
                                 None)["eval_table"]
    rows = table_rows(html, "mars-eval-table")
    # a known method id by its name (evaluation.labels), its unknown variant in words
    assert rows["P(True) (raw)"] == ["61.00 [50.00, 70.00]"] * 4
    assert "P(True)" not in table_rows(html, "mars-eval-diff")  # no LN/MARS pair to subtract
    assert "(judge rouge ≥ 0.3; 3 labels given, 37 judged)" in html_unescape(html)
    assert "most answers are &lt;long&gt; sentences" in html
    good["warnings"] = ["PNG plots were not written (/srv/secret/kaleido/chrome: not found)"]
    path = upload(tmp_path, "report.json", json.dumps(good))
    public = EvaluationView(public=True).show(None, path, None)["eval_table"]
    assert "/srv/secret" not in public and "(chrome: not found)" in public
    assert "/srv/secret/kaleido/chrome" in EvaluationView().show(None, path, None)["eval_table"]
    old = json.loads((given_run / "report.json").read_text())
    del old["metrics"]["auprc"]  # a report written before AUPRC: the others still show
    del old["methods_table"]  # (and before the table of every method, which has AUPRC)
    html = EvaluationView().show(None, upload(tmp_path, "old.json", json.dumps(old)),
                                 None)["eval_table"]
    assert "AUPRC" not in html and "AURAC" in html


def test_uploaded_files_are_read_and_left_for_the_cache_cleanup(given_run, tmp_path):
    report = upload(tmp_path, "report.json", (given_run / "report.json").read_text())
    results = upload(tmp_path, "results.jsonl", (given_run / "results.jsonl").read_text())
    update = EvaluationView().show(None, report, results)
    assert update["eval_error"] == "" and update["eval_roc"] is not None
    assert "uploaded results.jsonl" in update["eval_note"]
    # Gradio stores uploads by content: another visitor's upload of the same file is this one
    assert os.path.exists(report) and os.path.exists(results)
    assert EvaluationView().show(None, report, results)["eval_error"] == ""
    # the upload boxes are left as they are (they show what was uploaded)
    assert "eval_report" not in update and "eval_results" not in update
    # the report alone: the table, and a note that the curves need results.jsonl
    alone = EvaluationView().show(None, upload(tmp_path, "r.json", (given_run / "report.json")
                                               .read_text()), None)
    assert alone["eval_table"] and alone["eval_roc"] is None
    assert "No curves: they need the run" in alone["eval_note"]


def hostile_reports(good: dict) -> dict[str, str | bytes]:
    deep = "[" * 100_000 + "]" * 100_000
    huge = json.loads(json.dumps(good))
    huge["metrics"]["auroc"]["entropy"]["mars"]["value"] = 1e308
    nan = json.dumps(good).replace('"n": ', '"n": NaN, "x": ', 1)
    inf = json.dumps(good).replace(
        json.dumps(good["metrics"]["auroc"]["confidence"]["mars"]["value"]), "1e999", 1)
    ci = json.loads(json.dumps(good))
    ci["metrics"]["auroc"]["confidence"]["mars"]["ci95"] = ["<b>", 2]
    big_n = {**good, "n": 10**30}
    return {
        "not json": "this is not JSON {",
        "a list": "[1, 2, 3]",
        "no metrics": json.dumps({"n": 3}),
        "huge number": json.dumps(huge),
        "infinity": inf,
        "NaN": nan,
        "deep": deep,
        "strings for numbers": json.dumps(ci),
        "huge n": json.dumps(big_n),
        "binary": b"\xff\xfe\x00garbage",
    }


def test_hostile_reports_get_a_clear_message(given_run, tmp_path):
    good = json.loads((given_run / "report.json").read_text())
    view = EvaluationView()
    for name, content in hostile_reports(good).items():
        path = upload(tmp_path, "report.json", content)
        update = view.show(None, path, None)
        assert "This is not a readable evaluation report" in update["eval_error"], name
        assert update["eval_table"] == "" and update["eval_roc"] is None, name
    # the view still works after all that
    ok = view.show(None, upload(tmp_path, "report.json", json.dumps(good)), None)
    assert ok["eval_error"] == "" and "MARS" in ok["eval_table"]


def test_html_in_a_report_is_shown_as_text(given_run, tmp_path):
    good = json.loads((given_run / "report.json").read_text())
    xss = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    good["data"] = xss
    good["models"]["llm"] = xss
    good["judge"] = {"name": xss, "threshold": xss}
    good["metrics"]["auroc"]["entropy"]["mars"] = {"value": None, "ci95": None, "reason": xss}
    update = EvaluationView().show(None, upload(tmp_path, "report.json", json.dumps(good)), None)
    html = update["eval_table"]
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "n/a (&lt;script&gt;" in html  # an undefined metric says why, escaped


def test_uploads_over_the_limit_and_mismatched_results_are_refused(given_run, tmp_path):
    view = EvaluationView(max_bytes=2_000)
    text = (given_run / "report.json").read_text()
    assert len(text.encode()) > 2_000
    update = view.show(None, upload(tmp_path, "report.json", text), None)
    assert "bytes; this page reads at most 2000 bytes" in update["eval_error"]
    records = (given_run / "results.jsonl").read_text().splitlines()
    # results of another run (fewer questions): table yes, curves no, and it says why
    update = EvaluationView().show(None, upload(tmp_path, "report.json", text),
                                   upload(tmp_path, "results.jsonl", "\n".join(records[:5])))
    assert update["eval_table"] and update["eval_roc"] is None
    assert "5 questions and the report 40" in update["eval_note"]
    broken = records[0].replace('"correct": ', '"correct": "yes", "was": ', 1)
    update = EvaluationView().show(None, upload(tmp_path, "report.json", text),
                                   upload(tmp_path, "results.jsonl", broken))
    assert "cannot be used for the curves" in update["eval_note"] and update["eval_roc"] is None


def test_only_the_servers_runs_can_be_opened(given_run, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(given_run, runs / "facts")
    view = EvaluationView(runs)
    for name in ("../facts", str(given_run), "/etc", "nope", 42):
        update = view.show(name, None, None)
        assert "There is no run" in update["eval_error"] and update["eval_table"] == ""
    # nothing chosen: what to do, as a note, not an error
    nothing = view.show(None, None, None)
    assert nothing["eval_error"] == "" and "Choose a run above" in nothing["eval_note"]
    assert "mars-error" not in nothing["eval_note"]
    alone = EvaluationView().show(None, None, None)  # no runs on the server: the upload
    assert "Upload a run's report.json" in html_unescape(alone["eval_note"])
    assert alone["eval_error"] == ""


def test_parse_report_keeps_undefined_metrics(given_run):
    good = json.loads((given_run / "report.json").read_text())
    good["metrics"]["auroc"]["confidence"]["mars"] = {"value": None, "ci95": None,
                                                     "reason": "one class"}
    parsed = parse_report(json.dumps(good))
    assert parsed.metrics["auroc"]["confidence"]["mars"] == Entry(None, None, "one class")
