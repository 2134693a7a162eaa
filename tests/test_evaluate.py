"""``python -m mars_demo evaluate`` end to end: pre-generated answers (no LLM) and tiny models,
kill and resume, every reported figure against an independent computation, refusals."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from cli_helpers import killed_after
from test_eval_metrics import average_precision_by_hand, loop_aurac, loop_prr, mann_whitney_auroc

from mars_demo.cli import main
from mars_demo.evaluation import MEASURES, METRICS, SCORINGS, calibration
from mars_demo.evaluation.judges import normalize_answer
from mars_demo.methods import FREE

ROOT = pathlib.Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "data" / "facts_answers.jsonl"
#: the free methods of answers given with their log-probs alone: no token entropies or
#: divergences from uniform came with them, so the methods reading those are left out (with a
#: warning each)
GIVEN_FREE = tuple(m for m in FREE if m not in ("mean_token_entropy", "self_certainty"))
FACTS = ROOT / "data" / "facts.jsonl"


def model_flags(tiny_models) -> list[str]:
    return ["--importance", str(tiny_models["importance"]), "--nli", str(tiny_models["nli"])]


def lines(path: pathlib.Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def pregenerated_run(tiny_models, tmp_path_factory):
    """A run of 12 questions of the pre-generated file, exact match judge, 300 resamples."""
    out = tmp_path_factory.mktemp("run") / "facts"
    code = main(["evaluate", "run", "--data", str(ANSWERS), "--out", str(out), "--limit", "12",
                 "--seed", "3", "--judge", "em", "--bootstrap", "300",
                 *model_flags(tiny_models)])
    assert code == 0
    return out


def test_pregenerated_answers_run_without_an_llm(tiny_models, tmp_path, no_llm, capsys):
    out = tmp_path / "run"
    code = main(["evaluate", "run", "--data", str(ANSWERS), "--out", str(out), "--limit", "3",
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
        assert list(r["methods"]) == list(GIVEN_FREE)
        assert r["methods"] == r["analysis"]["methods"]
        for m in MEASURES:
            for s in SCORINGS:
                assert r["uncertainty"][m][s] == r["analysis"]["uncertainty"][m][s]
        # the answers were scored as given: the greedy answer's LN is the mean of its log-probs
        lps = [t["logprob"] for t in row["greedy"]["tokens"]]
        assert r["analysis"]["greedy"]["scores"]["length_normalized"] == pytest.approx(
            sum(lps) / len(lps))
        assert r["analysis"]["settings"]["logprob_source"] == "given"


def test_the_files_are_the_typed_records_and_report_serialized(pregenerated_run):
    """results.jsonl and report.json hold exactly what the typed Record and Report write, and
    reading them back gives the same objects."""
    from mars_demo.evaluation.records import Record
    from mars_demo.evaluation.schema import Report

    for i, line in enumerate(lines(pregenerated_run / "results.jsonl"), 1):
        record = Record.from_dict(line, f"line {i}")
        assert record.to_dict() == line
        assert Record.from_dict(record.to_dict(), "again") == record
    raw = json.loads((pregenerated_run / "report.json").read_text(encoding="utf-8"))
    report = Report.from_dict(raw)
    assert report.to_dict() == raw
    assert Report.from_dict(report.to_dict()) == report


def test_every_reported_figure_matches_an_independent_computation(pregenerated_run):
    report = json.loads((pregenerated_run / "report.json").read_text())
    records = lines(pregenerated_run / "results.jsonl")
    correct = [r["correct"] for r in records]
    assert report["n"] == 12
    assert report["accuracy"] == pytest.approx(sum(correct) / 12)
    assert 0 < sum(correct) < 12  # both classes: every metric is defined
    assert report["judge"] == {"name": "em", "threshold": None}
    assert report["labels"] == {"given": 0, "judged": 12}
    assert report["settings"]["seed"] == 3
    rng_draws = np.random.default_rng(3).integers(0, 12, size=(300, 12))
    by_hand = {"auroc": mann_whitney_auroc, "auprc": average_precision_by_hand,
               "prr": loop_prr, "aurac": loop_aurac}
    assert set(METRICS) == set(by_hand)
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
    for name in ("roc.html", "rejection.html", "roc.png", "rejection.png", "roc_methods.html",
                 "roc_methods.png"):
        assert (pregenerated_run / name).stat().st_size > 1000, name
        assert name in report["plots"]
    assert (pregenerated_run / "roc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the table of every method: the three measures' six rows and every free method (the
    # default) with its variants, semantic entropy once; ranked by AUROC
    from mars_demo import methods
    from mars_demo.evaluation import methods_table

    ranked = report["methods_table"]["rows"]
    expected = {(m, s) for m in MEASURES for s in SCORINGS} | {
        (i, v) for i in GIVEN_FREE if i not in MEASURES for v in methods.METHODS[i].variants}
    assert {(r["name"], r["variant"]) for r in ranked} == expected
    assert len(ranked) == len(expected) and "## Every method, ranked by AUROC" in md
    # by AUROC, best first; a row whose values tell nothing after them, marked so
    out = [methods_table.unranked(r.get("degenerate", "")) for r in ranked]
    assert out == sorted(out), [(r["label"], r.get("degenerate")) for r in ranked]
    aurocs = [r["auroc"]["value"] for r, gone in zip(ranked, out) if not gone]
    assert None not in aurocs and aurocs == sorted(aurocs, reverse=True)
    for r in ranked:
        if r["name"] in MEASURES:
            assert r["auroc"]["value"] == report["metrics"]["auroc"][r["name"]][r["variant"]][
                "value"]


def test_a_finished_run_started_again_recomputes_nothing(pregenerated_run, tiny_models,
                                                         monkeypatch, capsys):
    from mars_demo.engine import Engine

    before = (pregenerated_run / "results.jsonl").read_bytes()

    def refuse(*a, **k):
        raise AssertionError("a finished question was scored again")

    monkeypatch.setattr(Engine, "score", refuse)
    code = main(["evaluate", "run", "--data", str(ANSWERS), "--out", str(pregenerated_run), "--limit",
                 "12", "--seed", "3", "--judge", "em", "--bootstrap", "300",
                 *model_flags(tiny_models)])
    assert code == 0
    assert (pregenerated_run / "results.jsonl").read_bytes() == before
    assert "12 of 12 questions already done" in capsys.readouterr().err


def test_a_run_with_methods_asked_for_resumes_with_the_same_methods(tiny_settings, tmp_path,
                                                                    no_llm):
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.run import EvalConfig, RunError, evaluate

    def config(settings, limit):
        return EvalConfig(data=str(ANSWERS), out=tmp_path / "run", judge=make_judge("em"),
                          settings=settings, limit=limit, resamples=20, plots=False,
                          messages=lambda m: None)

    asked = tiny_settings.replace(methods="eigv,semantic_entropy")
    evaluate(config(asked, 2))
    evaluate(config(tiny_settings.replace(methods=["eigv", "semantic_entropy"]), 2))  # resumes
    records = lines(tmp_path / "run" / "results.jsonl")
    assert len(records) == 2
    assert all(list(r["methods"]) == ["eigv", "semantic_entropy"] for r in records)
    with pytest.raises(RunError, match="methods"):
        evaluate(config(tiny_settings, 2))


def test_an_interrupted_run_resumes_where_it_stopped(tiny_settings, tmp_path, no_llm):
    """In-process, batches of 3: the 2nd batch is interrupted; the restart scores only the
    questions left (the first batch's 3 lines are kept)."""
    from mars_demo.engine import Engine
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.run import EvalConfig, evaluate

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
    assert after[:3] == done and len(after) == 7 and report.n == 7
    assert len({r["index"] for r in after}) == 7


def test_the_progress_bar_shows_each_question_as_its_line_is_written(tiny_settings, tmp_path,
                                                                     no_llm, monkeypatch):
    """Polled during the run: whenever the engine starts a batch, the bar shows as many
    questions as results.jsonl holds (tqdm alone draws at most every 0.1 s, so the lines a
    batch writes at once showed only with the next batch)."""
    import io
    import re

    from mars_demo.engine import Engine
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.run import EvalConfig, evaluate

    shown = io.StringIO()
    monkeypatch.setattr(sys, "stderr", shown)
    results = tmp_path / "run" / "results.jsonl"
    seen = []

    def look() -> tuple[int, int]:
        counts = re.findall(r"\b(\d+)/9\b", shown.getvalue())
        return int(counts[-1]), len(lines(results)) if results.exists() else 0

    class Watching(Engine):
        def score_many(self, answer_sets, settings=None, **kw):
            seen.append(look())
            return super().score_many(answer_sets, settings, **kw)

    config = EvalConfig(data=str(ANSWERS), out=tmp_path / "run", judge=make_judge("em"),
                        settings=tiny_settings, limit=9, resamples=20, plots=False,
                        messages=lambda m: None, batch_questions=3)
    evaluate(config, engine=Watching(tiny_settings))
    seen.append(look())
    assert seen == [(0, 0), (3, 3), (6, 6), (9, 9)]


def test_killed_process_resumes_without_duplicates_or_losses(tiny_models, tmp_path):
    """A real kill (SIGKILL) mid-run, then the same command again."""
    data = ANSWERS  # 40 questions: killed after the 2nd
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "mars_demo", "evaluate", "run", "--data", str(data), "--out", str(out),
           "--judge", "em", "--bootstrap", "50", "--no-plots", *model_flags(tiny_models)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    results = out / "results.jsonl"
    killed_after(cmd[3:], results)
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
    args = ["evaluate", "run", "--data", str(ANSWERS), "--out", str(out), "--limit", "3", "--judge",
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
    code = main(["evaluate", "run", "--data", str(ANSWERS), "--out", str(pregenerated_run), "--limit",
                 "12", "--seed", "3", "--judge", "em", "--bootstrap", "300",
                 "--normalization", "softmax", *model_flags(tiny_models)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1
    assert "other settings" in err and "normalization: 'sum' in the run, 'softmax' now" in err
    code = main(["evaluate", "run", "--data", str(ANSWERS), "--out", str(pregenerated_run), "--limit",
                 "12", "--seed", "3", "--judge", "f1", *model_flags(tiny_models)])
    assert code == 2 and "judge:" in capsys.readouterr().err


def test_a_hub_data_set_offline_fails_with_one_clear_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    code = main(["evaluate", "run", "--data", "hf:trivia_qa", "--out", str(tmp_path / "run")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err == (
        "error: cannot load the Hugging Face data set mandarjoshi/trivia_qa (rc.nocontext), "
        "split validation: offline (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set) and it is "
        "not in the local cache; run once with network access, or give a local JSONL file "
        "with --data"
    )
    assert main(["evaluate", "run", "--data", "hf:squad", "--out", str(tmp_path / "r2")]) == 2
    assert "unknown data set 'hf:squad'; known: hf:trivia_qa, hf:nq_open, hf:web_questions" in (
        capsys.readouterr().err)


def answer_rows() -> list[dict]:
    return [json.loads(x) for x in ANSWERS.read_text(encoding="utf-8").splitlines()]


def test_bad_lines_are_reported_and_skipped_and_the_run_goes_on(tiny_models, tmp_path, capsys):
    """As ``score`` does: line numbers from 1, every problem listed, the good lines evaluated,
    a summary, exit status 1."""
    rows = answer_rows()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([
        json.dumps(rows[0]), "{not json", json.dumps({"question": "Q?"}),
        json.dumps({**rows[1], "correct": "yes"}), "", json.dumps(rows[2]),
        json.dumps({k: v for k, v in rows[3].items() if k != "samples"}),  # greedy alone
    ]) + "\n", encoding="utf-8")
    out = tmp_path / "r"
    code = main(["evaluate", "run", "--data", str(bad), "--out", str(out), "--bootstrap", "20",
                 "--no-plots", *model_flags(tiny_models)])
    err = capsys.readouterr().err
    assert code == 1, err
    for expected in (f"{bad}, line 2: not valid JSON", f"{bad}, line 3: 'answers' must be",
                     f"{bad}, line 4: 'correct' must be true/false or 1/0",
                     f"{bad}, line 7: give both 'greedy' and 'samples'"):
        assert expected in err, expected
    assert "evaluated 2 questions (2 judged by contains, 0 labels given); 4 bad line(s) " \
        "skipped" in err.splitlines()[-1]
    records = lines(out / "results.jsonl")
    assert [r["line"] for r in records] == [1, 6]
    report = json.loads((out / "report.json").read_text())
    assert report["n"] == 2 and len(report["skipped_lines"]) == 4


def test_a_file_without_a_usable_line_says_so_and_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "Q2?", "answers": []}\n[1, 2]\n', encoding="utf-8")
    assert main(["evaluate", "run", "--data", str(bad), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl, line 1: 'answers' must be a non-empty list" in err
    assert "bad.jsonl, line 2: not a JSON object" in err
    assert err.strip().endswith("has no usable question (2 bad line(s))")
    assert not (tmp_path / "r").exists()


def test_given_labels_are_used_as_given(tiny_models, tmp_path, capsys):
    """Lines with ``correct`` are not judged; the run says how many were given; every metric
    is computed on exactly those labels (AUROC as scikit-learn's)."""
    from sklearn.metrics import roc_auc_score

    from mars_demo.evaluation.judges.contains import ContainsJudge

    rows = answer_rows()[:10]
    given = {0: False, 1: 1, 3: True, 4: 0, 6: False, 8: True}  # 0 and 6: right answers, "wrong"
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps({**r, **({"correct": given[k]} if k in given else {})})
                            + "\n" for k, r in enumerate(rows)), encoding="utf-8")
    asked = []
    real = ContainsJudge.judge_many

    def spy(self, items):
        asked.extend(q for q, _, _ in items)
        return real(self, items)

    out = tmp_path / "run"
    try:
        ContainsJudge.judge_many = spy
        assert main(["evaluate", "run", "--data", str(data), "--out", str(out), "--bootstrap", "50",
                     "--no-plots", *model_flags(tiny_models)]) == 0
    finally:
        ContainsJudge.judge_many = real
    assert sorted(asked) == sorted(rows[k]["question"] for k in range(10) if k not in given)
    records = sorted(lines(out / "results.jsonl"), key=lambda r: r["index"])
    for r in records:
        if r["index"] in given:
            assert r["label"] == "given" and r["correct"] is bool(given[r["index"]])
            assert r["judge"] is None
        else:
            assert r["label"] == "judged" and r["judge"]["detail"]
    report = json.loads((out / "report.json").read_text())
    assert report["labels"] == {"given": 6, "judged": 4}
    assert "6 labels given, 4 judged by contains" in (out / "report.md").read_text()
    assert "(6 labels given)" in capsys.readouterr().out
    wrong = [not r["correct"] for r in records]
    for m in MEASURES:
        for s in SCORINGS:
            u = [r["uncertainty"][m][s] for r in records]
            assert report["metrics"]["auroc"][m][s]["value"] == pytest.approx(
                roc_auc_score(wrong, u), abs=1e-12)


def sentence_rows() -> list[dict]:
    """Answer sets whose greedy answers are sentences (tokens: the words with their spaces)."""
    def answer(text: str, lp: float) -> dict:
        words = text.split(" ")
        return {"text": text, "tokens": [{"text": (" " if k else "") + w, "logprob": lp}
                                         for k, w in enumerate(words)]}

    facts = [("What is the capital city of Australia?", ["Canberra"],
              "The capital city of Australia is Canberra.", -0.1),
             ("Which planet is known as the Red Planet?", ["Mars"],
              "The Red Planet is Mars, the fourth planet.", -0.2),
             ("Who wrote the play Hamlet?", ["William Shakespeare"],
              "Hamlet was written by William Shakespeare.", -0.3),
             ("How many continents are there on Earth?", ["7"],
              "There are seven continents on Earth.", -0.4),
             ("What is the chemical symbol for gold?", ["Au"],
              "The chemical symbol for gold is Ag.", -1.5),
             ("In which year did the Berlin Wall fall?", ["1989"],
              "The Berlin Wall fell in the year 1991.", -1.9),
             ("Which organ produces insulin?", ["Pancreas"],
              "Insulin is made by the liver, I think.", -2.2),
             ("What is the largest ocean on Earth?", ["Pacific Ocean"],
              "It is the Pacific, the largest of all.", -0.5)]
    return [{"id": f"s{k}", "question": q, "answers": refs, "greedy": answer(text, lp),
             "samples": [answer(text, lp), answer("Something else", -2.0)]}
            for k, (q, refs, text, lp) in enumerate(facts)]


@pytest.fixture(scope="module")
def sentence_run(tiny_models, tmp_path_factory):
    """Eight questions answered in sentences (five right, three wrong), judged by em."""
    base = tmp_path_factory.mktemp("sentences")
    data = base / "sentences.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in sentence_rows()), encoding="utf-8")
    out = base / "em"
    assert main(["evaluate", "run", "--data", str(data), "--out", str(out), "--judge", "em",
                 "--bootstrap", "50", "--no-plots", *model_flags(tiny_models)]) == 0
    return out


def test_em_on_sentence_answers_warns_in_the_report(sentence_run):
    report = json.loads((sentence_run / "report.json").read_text())
    assert report["accuracy"] == 0.0  # em: no sentence equals a reference
    warning = next(w for w in report["warnings"] if "sentences" in w)
    assert warning.startswith("8 of 8 judged greedy answers are sentences (5 words or more), "
                              "and the em judge compares the whole answer")
    assert "evaluate rejudge RUN_DIR --judge contains" in warning
    assert f"Warning: {warning}" in (sentence_run / "report.md").read_text()


def test_tiny_llm_end_to_end(tiny_models, tmp_path, capsys):
    """Generation by the tiny random LLM: gibberish answers, all judged wrong, so AUROC and PRR
    are undefined and the report says why instead of crashing."""
    out = tmp_path / "run"
    code = main(["evaluate", "run", "--data", str(FACTS), "--out", str(out), "--limit", "2",
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


@pytest.fixture(scope="module")
def full_run(tiny_models, tmp_path_factory):
    """Every one of the 40 pre-generated questions (no LLM), the default judge with its judge
    check kept, calibrated (semantic entropy, MARS)."""
    out = tmp_path_factory.mktemp("run") / "facts-given"
    assert main(["evaluate", "run", "--data", str(ANSWERS), "--out", str(out), "--bootstrap", "200",
                 "--judge-check", str(ROOT / "data" / "judge_check.jsonl"),
                 *model_flags(tiny_models)]) == 0
    assert main(["evaluate", "calibrate", str(out)]) == 0
    return out


def test_compare_is_a_paired_bootstrap_over_the_shared_questions(pregenerated_run, full_run,
                                                                 capsys):
    """A: 12 questions judged by em; B: all 40 judged by contains. B - A over the 12 shared
    questions, each run with its own labels, every resample the same questions for both."""
    assert main(["evaluate", "compare", str(pregenerated_run), str(full_run), "--bootstrap",
                 "100", "--seed", "4", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    a = {r["question"]: r for r in lines(pregenerated_run / "results.jsonl")}
    b = {r["question"]: r for r in lines(full_run / "results.jsonl")}
    shared = [q for q in a if q in b]
    assert result["shared"] == len(shared) == 12
    ca = [a[q]["correct"] for q in shared]
    cb = [b[q]["correct"] for q in shared]
    assert result["a"]["accuracy_shared"] == pytest.approx(np.mean(ca))
    ua = [a[q]["uncertainty"]["entropy"]["mars"] for q in shared]
    ub = [b[q]["uncertainty"]["entropy"]["mars"] for q in shared]
    # the same answers, scored the same (up to float rounding across batches): the verdicts differ
    assert ua == pytest.approx(ub, abs=1e-6)
    entry = result["metrics"]["auroc"]["entropy"]["mars"]
    assert entry["a"] == pytest.approx(mann_whitney_auroc(ua, ca))
    assert entry["b"] == pytest.approx(mann_whitney_auroc(ub, cb))
    diffs = []
    for idx in np.random.default_rng(4).integers(0, 12, size=(100, 12)):
        ia, ib = [ca[i] for i in idx], [cb[i] for i in idx]
        if 0 < sum(ia) < 12 and 0 < sum(ib) < 12:
            diffs.append(mann_whitney_auroc([ub[i] for i in idx], ib)
                         - mann_whitney_auroc([ua[i] for i in idx], ia))
    assert entry["b_minus_a"]["value"] == pytest.approx(entry["b"] - entry["a"])
    assert entry["b_minus_a"]["ci95"] == pytest.approx(list(np.percentile(diffs, [2.5, 97.5])))
    warnings = " ".join(result["warnings"])
    assert "judged differently (A: em, B: contains)" in warnings
    assert "share 12 questions (A has 12, B 40)" in warnings
    assert "different models" not in warnings and "different data" not in warnings
    # the markdown says the same
    assert main(["evaluate", "compare", str(pregenerated_run), str(full_run), "--bootstrap",
                 "100", "--seed", "4"]) == 0
    text = capsys.readouterr().out
    assert f"| Entropy + MARS | {entry['a'] * 100:.2f} | {entry['b'] * 100:.2f} | " \
        f"{entry['b_minus_a']['value'] * 100:+.2f} [" in text
    assert "Warning: the runs were judged differently" in text


def test_compare_warns_about_other_data_and_models(pregenerated_run, tmp_path, capsys):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(pregenerated_run, other)
    report = json.loads((other / "report.json").read_text())
    report["models"]["nli"] = "another/nli"
    report["data"] = "another.jsonl"
    (other / "report.json").write_text(json.dumps(report))
    assert main(["evaluate", "compare", str(pregenerated_run), str(other), "--bootstrap",
                 "20"]) == 0
    text = capsys.readouterr().out
    assert "the runs used different data (A: " in text
    assert "different models (nli: " in text and "vs another/nli" in text
    assert main(["evaluate", "compare", str(pregenerated_run), str(tmp_path / "none")]) == 2
    assert "cannot compare: cannot read" in capsys.readouterr().err


def test_calibrate_reports_held_out_quality(full_run, capsys):
    """Brier score and calibration error of chances from fits that did not see the answer,
    recomputed here with scikit-learn's folds and isotonic fits."""
    from sklearn.isotonic import IsotonicRegression
    from sklearn.metrics import brier_score_loss
    from sklearn.model_selection import StratifiedKFold

    cal = calibration.load(full_run / "calibration.json")
    records = lines(full_run / "results.jsonl")
    u = np.array([r["uncertainty"]["semantic_entropy"]["mars"] for r in records])
    c = np.array([r["correct"] for r in records])
    assert cal.n == 40 and cal.measure == "semantic_entropy" and cal.scoring == "mars"
    chance = np.empty(40)
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(u, c):
        iso = IsotonicRegression(increasing=False, y_min=0, y_max=1, out_of_bounds="clip")
        chance[test] = iso.fit(u[train], c[train]).predict(u[test])
    assert cal.held_out["brier"] == pytest.approx(brier_score_loss(c, chance), abs=1e-12)
    report = json.loads((full_run / "report.json").read_text())
    assert report["calibration"]["brier"] == cal.held_out["brier"]
    assert report["calibration"]["ece"] == cal.held_out["ece"]
    md = (full_run / "report.md").read_text()
    assert "## Calibration of SE + MARS (held out)" in md
    assert f"Brier score {cal.held_out['brier']:.4f}" in md
    assert "reliability.html" in report["calibration"]["plots"]
    assert (full_run / "reliability.html").stat().st_size > 1000
    # the judge check the run was given
    check = report["judge_check"]
    assert check["file"] == "judge_check.jsonl" and check["n"] >= 150
    assert check["agreement"] >= 0.95 and check["judge"] == {"name": "contains",
                                                             "threshold": None}
    assert "this judge agreed with the human labels on" in md


def test_calibrate_refuses_too_few_of_a_class_with_the_reason(pregenerated_run, tmp_path,
                                                              capsys):
    records = lines(pregenerated_run / "results.jsonl")
    wrong = sum(not r["correct"] for r in records)
    assert wrong < 5  # 12 questions, em
    assert main(["evaluate", "calibrate", str(pregenerated_run)]) == 2
    err = capsys.readouterr().err
    assert f"only {wrong} of the 12 answers are wrong: at least 5 of each are needed" in err
    assert not (pregenerated_run / "calibration.json").exists()
    assert main(["evaluate", "calibrate", str(tmp_path / "nothing")]) == 2
    assert "cannot calibrate" in capsys.readouterr().err


def test_a_calibration_keeps_the_runs_settings(full_run):
    from mars_demo.evaluation.calibration import calibrate

    cal = calibration.load(calibrate(full_run, "entropy", "mars", full_run / "cal-entropy.json",
                           plots=False))
    first = lines(full_run / "results.jsonl")[0]["analysis"]["settings"]
    assert cal.settings == {k: first.get(k) for k in calibration.SETTING_KEYS}
    assert cal.models == {"llm": "hand-written (data/make_facts_answers.py)",
                          "importance": first["importance"], "nli": first["nli"]}
    # an analysis made by the calibrated models gets its chance; another model's is refused
    record = lines(full_run / "results.jsonl")[0]
    assert cal.chance(record["analysis"]) == pytest.approx(
        cal.predict(record["uncertainty"]["entropy"]["mars"]))
    with pytest.raises(calibration.CalibrationError, match="other models"):
        cal.chance({**record["analysis"], "settings": {**record["analysis"]["settings"],
                                                       "nli": "another/nli"}})


def test_png_export_that_fails_is_a_warning_not_a_fake_file(tiny_models, tmp_path, monkeypatch,
                                                            capsys):
    import plotly.graph_objects as go

    def broken(self, *a, **k):
        raise RuntimeError("Kaleido requires Google Chrome to be installed")

    monkeypatch.setattr(go.Figure, "write_image", broken)
    out = tmp_path / "run"
    assert main(["evaluate", "run", "--data", str(ANSWERS), "--out", str(out), "--limit", "4",
                 "--judge", "em", "--bootstrap", "20", *model_flags(tiny_models)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["plots"] == ["roc.html", "rejection.html", "roc_methods.html"]
    assert not list(out.glob("*.png"))
    warning = ("PNG plots were not written (plotly/kaleido image export failed: Kaleido "
               "requires Google Chrome to be installed); the HTML plots are complete")
    assert warning in report["warnings"]
    assert f"warning: {warning}" in capsys.readouterr().err
    assert f"Warning: {warning}" in (out / "report.md").read_text()


def test_calibrate_refuses_a_run_whose_report_is_behind_its_results(full_run,
                                                                     tmp_path, capsys):
    import shutil

    run = tmp_path / "behind"
    shutil.copytree(full_run, run)
    (run / "calibration.json").unlink(missing_ok=True)  # another test may have calibrated it
    report = json.loads((run / "report.json").read_text())
    report["n"] = 5  # as left by a run interrupted after resuming
    (run / "report.json").write_text(json.dumps(report))
    assert main(["evaluate", "calibrate", str(run)]) == 2
    assert "did not finish" in capsys.readouterr().err
    assert not (run / "calibration.json").exists()


def test_a_resume_with_other_models_is_refused(tiny_settings, tiny_models, tmp_path):
    from mars_demo.engine import Engine
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.run import EvalConfig, RunError, evaluate

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
    from mars_demo.engine import Engine
    from mars_demo.errors import InvalidModelOutput
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.run import EvalConfig, evaluate

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
    assert report.n == 3
    assert [f.error for f in report.failed] == ["the NLI model produced NaN"]
    assert "skipped: the NLI model produced NaN" in capsys.readouterr().err


def test_a_line_separator_inside_a_question_is_part_of_its_line(tmp_path, tiny_settings):
    from mars_demo.evaluation.data import load_source
    from mars_demo.evaluation.runs import parse_records

    data = tmp_path / "d.jsonl"
    row = {"question": "Which planet\u2028is red?", "answers": ["Mars"]}
    data.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    assert [i.question for i in load_source(str(data)).items] == ["Which planet\u2028is red?"]
    record = {"question": "a\u2028b", "correct": True,
              "uncertainty": {m: {s: 0.5 for s in SCORINGS} for m in MEASURES}}
    parsed = parse_records(json.dumps(record, ensure_ascii=False) + "\n")
    assert len(parsed) == 1


def test_the_llm_judge_on_the_llms_own_server_gets_its_api_key(monkeypatch, tmp_path):
    seen = {}

    def fake_make_judge(name, threshold, **options):
        seen.update(options)
        raise ValueError("stop here")

    monkeypatch.setattr("mars_demo.evaluation.judges.make_judge", fake_make_judge)
    code = main(["evaluate", "run", "--data", str(ANSWERS), "--out", str(tmp_path / "r"),
                 "--judge", "llm", "--llm-endpoint", "http://127.0.0.1:9/v1",
                 "--llm-api-key-env", "MY_KEY"])
    assert code == 2 and seen["api_key_env"] == "MY_KEY"
    code = main(["evaluate", "run", "--data", str(ANSWERS), "--out", str(tmp_path / "r"),
                 "--judge", "llm", "--llm-endpoint", "http://127.0.0.1:9/v1",
                 "--llm-api-key-env", "MY_KEY", "--judge-endpoint", "http://127.0.0.1:8/v1"])
    assert code == 2 and seen["api_key_env"] is None  # another server: not the LLM's key


def test_hub_rows_without_references_are_left_out_with_a_warning_in_the_report(
        monkeypatch, tiny_settings, tmp_path):
    import datasets

    from mars_demo.evaluation import run as evaluation_run
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
    monkeypatch.setattr(evaluation_run, "load_source", lambda data: given)
    messages = []
    config = evaluation_run.EvalConfig(data=str(ANSWERS), out=tmp_path / "run",
                                       judge=make_judge("em"), settings=tiny_settings, limit=2,
                                       resamples=20, plots=False, messages=messages.append)
    report = evaluation_run.evaluate(config)
    assert source.warnings[0] in report.warnings
    assert f"warning: {source.warnings[0]}" in messages
