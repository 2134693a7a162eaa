"""``python -m mars_demo evaluate`` end to end: pre-generated answers (no LLM) and tiny models,
kill and resume, every reported figure against an independent computation, refusals."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from mars_demo.cli import main
from mars_demo.evaluation import MEASURES, METRICS, SCORINGS
from mars_demo.evaluation import calibration as K
from mars_demo.evaluation.judges import normalize_answer
from test_eval_metrics import loop_aurac, loop_prr, mann_whitney_auroc

ROOT = pathlib.Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "data" / "facts_answers.jsonl"
FACTS = ROOT / "data" / "facts.jsonl"


def model_flags(tiny_models) -> list[str]:
    return ["--importance", str(tiny_models["importance"]), "--nli", str(tiny_models["nli"])]


def lines(path: pathlib.Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def pregenerated_run(tiny_models, tmp_path_factory):
    """A run of 12 questions of the pre-generated file, exact match judge, 300 resamples."""
    out = tmp_path_factory.mktemp("run") / "facts"
    code = main(["evaluate", "--data", str(ANSWERS), "--out", str(out), "--limit", "12",
                 "--seed", "3", "--judge", "em", "--bootstrap", "300",
                 *model_flags(tiny_models)])
    assert code == 0
    return out


def test_pregenerated_answers_run_without_an_llm(tiny_models, tmp_path, no_llm, capsys):
    out = tmp_path / "run"
    code = main(["evaluate", "--data", str(ANSWERS), "--out", str(out), "--limit", "3",
                 "--bootstrap", "20", "--no-plots", *model_flags(tiny_models)])
    assert code == 0, capsys.readouterr().err
    assert len(lines(out / "results.jsonl")) == 3
    assert "3 questions, accuracy" in capsys.readouterr().out


def test_results_lines_hold_what_the_issue_asks(pregenerated_run):
    source = {i: json.loads(x) for i, x in enumerate(ANSWERS.read_text().splitlines())}
    records = lines(pregenerated_run / "results.jsonl")
    assert len(records) == 12
    assert len({r["index"] for r in records}) == 12
    # a seeded subset, in the source's order
    expected = sorted(np.random.default_rng(3).choice(40, size=12, replace=False).tolist())
    assert [r["index"] for r in records] == expected
    for r in records:
        row = source[r["index"]]
        assert r["question"] == row["question"] and r["references"] == row["answers"]
        assert r["greedy"] == row["greedy"]["text"] == r["analysis"]["greedy"]["text"]
        # the exact-match verdict, recomputed here
        ok = any(normalize_answer(r["greedy"]) == normalize_answer(a) for a in row["answers"])
        assert r["correct"] is ok
        assert set(r["uncertainty"]) == set(MEASURES)
        for m in MEASURES:
            for s in SCORINGS:
                assert r["uncertainty"][m][s] == r["analysis"]["uncertainty"][m][s]
        # the answers were scored as given: the greedy answer's LN is the mean of its log-probs
        lps = [t["logprob"] for t in row["greedy"]["tokens"]]
        assert r["analysis"]["greedy"]["scores"]["length_normalized"] == pytest.approx(
            sum(lps) / len(lps))
        assert r["analysis"]["settings"]["logprob_source"] == "given"


def test_every_reported_figure_matches_an_independent_computation(pregenerated_run):
    report = json.loads((pregenerated_run / "report.json").read_text())
    records = lines(pregenerated_run / "results.jsonl")
    correct = [r["correct"] for r in records]
    assert report["n"] == 12
    assert report["accuracy"] == pytest.approx(sum(correct) / 12)
    assert 0 < sum(correct) < 12  # both classes: every metric is defined
    assert report["judge"] == {"name": "em", "threshold": None}
    assert report["settings"]["seed"] == 3
    rng_draws = np.random.default_rng(3).integers(0, 12, size=(300, 12))
    by_hand = {"auroc": mann_whitney_auroc, "prr": loop_prr, "aurac": loop_aurac}
    for m in MEASURES:
        u = {s: [r["uncertainty"][m][s] for r in records] for s in SCORINGS}
        for name in METRICS:
            f = by_hand[name]
            for s in SCORINGS:
                entry = report["metrics"][name][m][s]
                assert entry["value"] == pytest.approx(f(u[s], correct), abs=1e-9), (name, m, s)
                lo, hi = entry["ci95"]
                assert lo <= entry["value"] + 1e-9 and entry["value"] - 1e-9 <= hi
            diff = report["metrics"][name][m]["mars_minus_length_normalized"]
            assert diff["value"] == pytest.approx(
                f(u["mars"], correct) - f(u["length_normalized"], correct), abs=1e-9)
        # the AUROC interval of MARS, from the same seeded resamples, computed here
        vals = []
        for idx in rng_draws:
            cc = [correct[i] for i in idx]
            if 0 < sum(cc) < 12:
                vals.append(mann_whitney_auroc([u["mars"][i] for i in idx], cc))
        assert report["metrics"]["auroc"][m]["mars"]["ci95"] == pytest.approx(
            list(np.percentile(vals, [2.5, 97.5])), abs=1e-9)


def test_report_md_is_laid_out_like_table_1_and_plots_exist(pregenerated_run):
    md = (pregenerated_run / "report.md").read_text()
    report = json.loads((pregenerated_run / "report.json").read_text())
    rows = [line.split(" | ")[0].lstrip("| ") for line in md.splitlines()
            if line.startswith("| ") and not line.startswith("| Method")]
    assert rows[:6] == ["Confidence", "Entropy", "SE", "Confidence + MARS", "Entropy + MARS",
                        "SE + MARS"]
    value = report["metrics"]["auroc"]["entropy"]["mars"]["value"]
    assert f"| Entropy + MARS | {value * 100:.2f} [" in md
    for name in ("roc.html", "rejection.html", "roc.png", "rejection.png"):
        assert (pregenerated_run / name).stat().st_size > 1000, name
        assert name in report["plots"]
    assert (pregenerated_run / "roc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_finished_run_started_again_recomputes_nothing(pregenerated_run, tiny_models,
                                                         monkeypatch, capsys):
    from mars_demo.engine import Engine

    before = (pregenerated_run / "results.jsonl").read_bytes()

    def refuse(*a, **k):
        raise AssertionError("a finished question was scored again")

    monkeypatch.setattr(Engine, "score", refuse)
    code = main(["evaluate", "--data", str(ANSWERS), "--out", str(pregenerated_run), "--limit",
                 "12", "--seed", "3", "--judge", "em", "--bootstrap", "300",
                 *model_flags(tiny_models)])
    assert code == 0
    assert (pregenerated_run / "results.jsonl").read_bytes() == before
    assert "12 of 12 questions already done" in capsys.readouterr().err


def test_an_interrupted_run_resumes_where_it_stopped(tiny_settings, tmp_path, no_llm):
    """In-process, batches of 3: the 2nd batch is interrupted; the restart scores only the
    questions left (the first batch's 3 lines are kept)."""
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.run import EvalConfig, evaluate
    from mars_demo.engine import Engine

    class Counting(Engine):
        calls: list[str] = []
        stop_after: int | None = None

        def score_many(self, answer_sets, settings=None, **kw):
            if self.stop_after is not None and len(self.calls) >= self.stop_after:
                raise KeyboardInterrupt
            self.calls += [a.question for a in answer_sets]
            return super().score_many(answer_sets, settings, **kw)

    config = EvalConfig(data=str(ANSWERS), out=tmp_path / "run", judge=make_judge("em"),
                        settings=tiny_settings, limit=7, resamples=20, plots=False,
                        messages=lambda m: None, batch_questions=3)
    first = Counting(tiny_settings)
    first.stop_after = 3
    with pytest.raises(KeyboardInterrupt):
        evaluate(config, engine=first)
    done = lines(tmp_path / "run" / "results.jsonl")
    assert len(done) == 3
    second = Counting(tiny_settings)
    second.calls = []
    report = evaluate(config, engine=second)
    assert len(second.calls) == 4  # only the questions left (batches of 3 and 1)
    assert not set(second.calls) & {r["question"] for r in done}
    after = lines(tmp_path / "run" / "results.jsonl")
    assert after[:3] == done and len(after) == 7 and report["n"] == 7
    assert len({r["index"] for r in after}) == 7


def test_killed_process_resumes_without_duplicates_or_losses(tiny_models, tmp_path):
    """A real kill (SIGKILL) mid-run, then the same command again."""
    data = ANSWERS  # 40 questions: killed after the 2nd
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "mars_demo", "evaluate", "--data", str(data), "--out", str(out),
           "--judge", "em", "--bootstrap", "50", "--no-plots", *model_flags(tiny_models)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    results = out / "results.jsonl"
    try:
        while proc.poll() is None:
            if results.exists() and results.read_bytes().count(b"\n") >= 2:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    killed = results.read_bytes()
    finished = killed[: killed.rfind(b"\n") + 1]
    k = finished.count(b"\n")
    assert 2 <= k < 40
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{k} of 40 questions already done" in done.stderr
    after = results.read_bytes()
    assert after.startswith(finished)  # finished lines kept byte for byte, never rewritten
    records = lines(results)
    assert len(records) == 40 and sorted(r["index"] for r in records) == list(range(40))
    stamps_first = [json.loads(x)["finished_at"] for x in finished.decode().splitlines()]
    assert [r["finished_at"] for r in records[:k]] == stamps_first


def test_a_torn_last_line_is_dropped_and_redone(tiny_models, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["evaluate", "--data", str(ANSWERS), "--out", str(out), "--limit", "3", "--judge",
            "em", "--bootstrap", "20", "--no-plots", *model_flags(tiny_models)]
    assert main(args) == 0
    full = (out / "results.jsonl").read_bytes()
    first_two = b"".join(full.splitlines(keepends=True)[:2])
    (out / "results.jsonl").write_bytes(first_two + full.splitlines(keepends=True)[2][:50])
    assert main(args) == 0
    again = lines(out / "results.jsonl")
    assert len(again) == 3 and [r["index"] for r in again] == [r["index"] for r in
                                                               lines_of(full)]
    assert "2 of 3 questions already done" in capsys.readouterr().err


def lines_of(raw: bytes) -> list[dict]:
    return [json.loads(x) for x in raw.decode().splitlines()]


def test_a_run_dir_of_other_settings_is_refused(pregenerated_run, tiny_models, capsys):
    code = main(["evaluate", "--data", str(ANSWERS), "--out", str(pregenerated_run), "--limit",
                 "12", "--seed", "3", "--judge", "em", "--bootstrap", "300",
                 "--normalization", "softmax", *model_flags(tiny_models)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1
    assert "other settings" in err and "normalization: 'sum' in the run, 'softmax' now" in err
    code = main(["evaluate", "--data", str(ANSWERS), "--out", str(pregenerated_run), "--limit",
                 "12", "--seed", "3", "--judge", "f1", *model_flags(tiny_models)])
    assert code == 2 and "judge:" in capsys.readouterr().err


def test_a_hub_data_set_offline_fails_with_one_clear_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    code = main(["evaluate", "--data", "hf:trivia_qa", "--out", str(tmp_path / "run")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err == (
        "error: cannot load the Hugging Face data set mandarjoshi/trivia_qa (rc.nocontext), "
        "split validation: offline (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set) and it is "
        "not in the local cache; run once with network access, or give a local JSONL file "
        "with --data"
    )
    assert main(["evaluate", "--data", "hf:squad", "--out", str(tmp_path / "r2")]) == 2
    assert "unknown data set 'hf:squad'; known: hf:trivia_qa, hf:nq_open, hf:web_questions" in (
        capsys.readouterr().err)


def test_bad_data_lines_are_named(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "Q?", "answers": ["a"]}\n{"question": "Q2?", "answers": []}\n')
    assert main(["evaluate", "--data", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert "bad.jsonl, line 2: 'answers' must be a non-empty list" in capsys.readouterr().err


def test_tiny_llm_end_to_end(tiny_models, tmp_path, capsys):
    """Generation by the tiny random LLM: gibberish answers, all judged wrong, so AUROC and PRR
    are undefined and the report says why instead of crashing."""
    out = tmp_path / "run"
    code = main(["evaluate", "--data", str(FACTS), "--out", str(out), "--limit", "2",
                 "--judge", "em", "--llm", str(tiny_models["llm"]), "--max-new-tokens", "6", "--samples", "2",
                 "--bootstrap", "20", *model_flags(tiny_models)])
    assert code == 0, capsys.readouterr().err
    records = lines(out / "results.jsonl")
    assert len(records) == 2
    assert all(r["analysis"]["settings"]["llm"] == str(tiny_models["llm"]) for r in records)
    assert all(r["analysis"]["settings"]["logprob_source"] == "generation" for r in records)
    assert all(len(r["analysis"]["samples"]) == 2 for r in records)
    report = json.loads((out / "report.json").read_text())
    assert report["models"]["llm"] == str(tiny_models["llm"])
    assert not any(r["correct"] for r in records)  # random weights: no exact match
    entry = report["metrics"]["auroc"]["confidence"]["mars"]
    assert entry["value"] is None and "every one of the 2 answers is wrong" in entry["reason"]
    assert report["metrics"]["aurac"]["confidence"]["mars"]["value"] == 0.0
    assert "n/a (every one of the 2 answers is wrong" in (out / "report.md").read_text()


def test_compare_and_calibrate(pregenerated_run, tiny_models, tmp_path, capsys):
    other = tmp_path / "softmax"
    assert main(["evaluate", "--data", str(ANSWERS), "--out", str(other), "--limit", "12",
                 "--seed", "3", "--judge", "em", "--bootstrap", "300", "--no-plots",
                 "--normalization", "softmax", *model_flags(tiny_models)]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--compare", str(pregenerated_run), str(other)]) == 0
    text = capsys.readouterr().out
    a = json.loads((pregenerated_run / "report.json").read_text())
    b = json.loads((other / "report.json").read_text())
    va = a["metrics"]["auroc"]["entropy"]["mars"]["value"]
    vb = b["metrics"]["auroc"]["entropy"]["mars"]["value"]
    assert f"{(vb - va) * 100:+.2f} |" in text
    assert "Settings that differ: normalization ('sum' vs 'softmax')" in text

    assert main(["evaluate", "--calibrate", str(pregenerated_run), "--measure", "confidence",
                 "--scoring", "mars"]) == 0
    cal = K.load(pregenerated_run / "calibration.json")
    records = lines(pregenerated_run / "results.jsonl")
    assert cal.n == 12 and cal.measure == "confidence" and cal.scoring == "mars"
    assert cal.auroc == a["metrics"]["auroc"]["confidence"]["mars"]["value"]
    assert cal.models == {"llm": "hand-written (data/make_facts_answers.py)",
                          "importance": str(tiny_models["importance"]),
                          "nli": str(tiny_models["nli"])}
    u = sorted(r["uncertainty"]["confidence"]["mars"] for r in records)
    p = cal.predict(np.linspace(u[0] - 1, u[-1] + 1, 50))
    assert np.all(np.diff(p) <= 1e-12)
    # an analysis made by the calibrated models gets its chance; another model's is refused
    analysis = records[0]["analysis"]
    assert cal.chance(analysis) == pytest.approx(
        cal.predict(records[0]["uncertainty"]["confidence"]["mars"]))
    with pytest.raises(K.CalibrationError, match="other models"):
        cal.chance({**analysis, "settings": {**analysis["settings"], "nli": "another/nli"}})
    assert main(["evaluate", "--calibrate", str(tmp_path / "nothing")]) == 2
    assert "cannot calibrate" in capsys.readouterr().err


def test_png_export_that_fails_is_a_warning_not_a_fake_file(tiny_models, tmp_path, monkeypatch,
                                                            capsys):
    import plotly.graph_objects as go

    def broken(self, *a, **k):
        raise RuntimeError("Kaleido requires Google Chrome to be installed")

    monkeypatch.setattr(go.Figure, "write_image", broken)
    out = tmp_path / "run"
    assert main(["evaluate", "--data", str(ANSWERS), "--out", str(out), "--limit", "4",
                 "--judge", "em", "--bootstrap", "20", *model_flags(tiny_models)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["plots"] == ["roc.html", "rejection.html"]
    assert not list(out.glob("*.png"))
    warning = ("PNG plots were not written (plotly/kaleido image export failed: Kaleido "
               "requires Google Chrome to be installed); the HTML plots are complete")
    assert warning in report["warnings"]
    assert f"warning: {warning}" in capsys.readouterr().err
    assert f"Warning: {warning}" in (out / "report.md").read_text()


def test_calibrate_refuses_a_run_whose_report_is_behind_its_results(pregenerated_run,
                                                                     tmp_path, capsys):
    import shutil

    run = tmp_path / "behind"
    shutil.copytree(pregenerated_run, run)
    (run / "calibration.json").unlink(missing_ok=True)  # another test may have calibrated it
    report = json.loads((run / "report.json").read_text())
    report["n"] = 5  # as left by a run interrupted after resuming
    (run / "report.json").write_text(json.dumps(report))
    assert main(["evaluate", "--calibrate", str(run)]) == 2
    assert "did not finish" in capsys.readouterr().err
    assert not (run / "calibration.json").exists()


def test_a_calibration_keeps_the_runs_settings(pregenerated_run):
    from mars_demo.evaluation.run import calibrate

    cal = K.load(calibrate(pregenerated_run, "entropy", "mars",
                           pregenerated_run / "cal-entropy.json"))
    first = lines(pregenerated_run / "results.jsonl")[0]["analysis"]["settings"]
    assert cal.settings == {k: first.get(k) for k in K.SETTING_KEYS}


def test_a_resume_with_other_models_is_refused(tiny_settings, tiny_models, tmp_path):
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.run import EvalConfig, RunError, evaluate
    from mars_demo.engine import Engine

    class Stop(Engine):
        def score_many(self, answer_sets, settings=None, **kw):
            if len(answer_sets) and answer_sets[0].question != first_question:
                raise KeyboardInterrupt
            return super().score_many(answer_sets, settings, **kw)

    config = EvalConfig(data=str(ANSWERS), out=str(tmp_path / "run"), judge=make_judge("em"),
                        settings=tiny_settings, limit=3, resamples=20, plots=False,
                        messages=lambda m: None, batch_questions=1)
    from mars_demo.evaluation.data import load_source, select

    first_question = select(load_source(str(ANSWERS)).items, 3, tiny_settings.seed)[0].question
    with pytest.raises(KeyboardInterrupt):
        evaluate(config, engine=Stop(tiny_settings))
    assert len(lines(tmp_path / "run" / "results.jsonl")) == 1

    class OtherNLI(Engine):  # the defaults resolved to another model on another machine
        def score_many(self, answer_sets, settings=None, **kw):
            results = super().score_many(answer_sets, settings, **kw)
            for r in results:
                r.settings["nli"] = "microsoft/deberta-large-mnli"
            return results

    with pytest.raises(RunError, match="other models .*nli: .* in the run, "
                       "'microsoft/deberta-large-mnli' now"):
        evaluate(config, engine=OtherNLI(tiny_settings))
    assert len(lines(tmp_path / "run" / "results.jsonl")) == 1  # nothing of theirs was written


def test_one_question_with_invalid_scores_is_skipped_and_the_run_goes_on(tiny_settings,
                                                                        tmp_path, capsys):
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.run import EvalConfig, evaluate
    from mars_demo.errors import InvalidModelOutput
    from mars_demo.engine import Engine

    class OneBad(Engine):
        def score_many(self, answer_sets, settings=None, **kw):
            if any("Australia" in a.question for a in answer_sets):
                raise InvalidModelOutput("the NLI model produced NaN")
            return super().score_many(answer_sets, settings, **kw)

    data = tmp_path / "data.jsonl"
    rows = [json.loads(x) for x in ANSWERS.read_text(encoding="utf-8").split("\n") if x.strip()]
    rows = [r for r in rows if "Australia" in r["question"]] + [
        r for r in rows if "Australia" not in r["question"]][:3]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = EvalConfig(data=str(data), out=tmp_path / "run", judge=make_judge("em"),
                        settings=tiny_settings, resamples=20, plots=False,
                        messages=lambda m: None, batch_questions=4)
    report = evaluate(config, engine=OneBad(tiny_settings))
    assert report["n"] == 3
    assert [f["error"] for f in report["failed"]] == ["the NLI model produced NaN"]
    assert "skipped: the NLI model produced NaN" in capsys.readouterr().err


def test_a_line_separator_inside_a_question_is_part_of_its_line(tmp_path, tiny_settings):
    from mars_demo.evaluation.data import load_source
    from mars_demo.ui.evaluation import parse_results

    data = tmp_path / "d.jsonl"
    row = {"question": "Which planet\u2028is red?", "answers": ["Mars"]}
    data.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    assert [i.question for i in load_source(str(data)).items] == ["Which planet\u2028is red?"]
    record = {"question": "a\u2028b", "correct": True,
              "uncertainty": {m: {s: 0.5 for s in SCORINGS} for m in MEASURES}}
    parsed = parse_results(json.dumps(record, ensure_ascii=False) + "\n")
    assert len(parsed) == 1


def test_the_llm_judge_on_the_llms_own_server_gets_its_api_key(monkeypatch, tmp_path):
    seen = {}

    def fake_make_judge(name, threshold, **options):
        seen.update(options)
        raise ValueError("stop here")

    monkeypatch.setattr("mars_demo.evaluation.judges.make_judge", fake_make_judge)
    code = main(["evaluate", "--data", str(ANSWERS), "--out", str(tmp_path / "r"),
                 "--judge", "llm", "--llm-endpoint", "http://127.0.0.1:9/v1",
                 "--llm-api-key-env", "MY_KEY"])
    assert code == 2 and seen["api_key_env"] == "MY_KEY"
    code = main(["evaluate", "--data", str(ANSWERS), "--out", str(tmp_path / "r"),
                 "--judge", "llm", "--llm-endpoint", "http://127.0.0.1:9/v1",
                 "--llm-api-key-env", "MY_KEY", "--judge-endpoint", "http://127.0.0.1:8/v1"])
    assert code == 2 and seen["api_key_env"] is None  # another server: not the LLM's key


def test_hub_rows_without_references_are_left_out_with_a_warning_in_the_report(
        monkeypatch, tiny_settings, tmp_path):
    import datasets

    from mars_demo.evaluation import run as R
    from mars_demo.evaluation.data import load_source, read_jsonl
    from mars_demo.evaluation.judges import make_judge

    rows = [{"question": "Q1?", "answer": ["a"]}, {"question": "Q2?", "answer": [" "]},
            {"question": "Q3?", "answer": ["c", "C"]}]
    monkeypatch.setattr(datasets, "load_dataset",
                        lambda *a, **k: datasets.Dataset.from_list(rows))
    source = load_source("hf:nq_open")
    assert [i.question for i in source.items] == ["Q1?", "Q3?"]
    assert source.warnings == [
        "1 of 3 rows of hf:nq_open have no reference answer and are left out"]
    fingerprint = datasets.Dataset.from_list(rows)._fingerprint
    assert source.fingerprint == f"google-research-datasets/nq_open::validation:{fingerprint}"
    # the warning reaches report.json (and stderr) of a run
    given = read_jsonl(str(ANSWERS))
    given.warnings = list(source.warnings)
    monkeypatch.setattr(R, "load_source", lambda data: given)
    messages = []
    report = R.evaluate(R.EvalConfig(data=str(ANSWERS), out=tmp_path / "run",
                                     judge=make_judge("em"), settings=tiny_settings, limit=2,
                                     resamples=20, plots=False, messages=messages.append))
    assert source.warnings[0] in report["warnings"]
    assert f"warning: {source.warnings[0]}" in messages
