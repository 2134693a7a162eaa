"""``evaluate rejudge`` (new verdicts, the same uncertainties, no model loaded) and
``evaluate check-judge`` (a judge's agreement with human labels), end to end through the CLI."""

from __future__ import annotations

import json
import shutil

import pytest
from test_evaluate import ROOT, lines, sentence_run  # noqa: F401  (a fixture)

from mars_demo.cli import main
from mars_demo.evaluation import MEASURES, METRICS, SCORINGS
from mars_demo.evaluation.judges import make_judge

CHECK = ROOT / "data" / "judge_check.jsonl"
HOLDOUT = ROOT / "data" / "judge_check_holdout.jsonl"  # a second annotator's; now for development
HOLDOUT2 = ROOT / "data" / "judge_check_holdout2.jsonl"  # a third annotator's, measured once


@pytest.fixture()
def no_models(monkeypatch):
    """Loading any model (LLM, importance, NLI) or scoring anything fails the test."""
    from mars_demo.engine import Engine
    from mars_demo.models import registry
    from mars_demo.models.llm import LLM

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded or an answer scored")

    for name in ("llm_for", "load_llm", "load_importance", "load_bem", "load_nli"):
        monkeypatch.setattr(registry, name, refuse)
    for cls, names in ((LLM, ("from_pretrained", "generate", "teacher_forced")),
                       (Engine, ("score", "score_many", "generate_many", "load"))):
        for name in names:
            monkeypatch.setattr(cls, name, refuse)


def test_rejudge_gives_new_verdicts_and_metrics_and_loads_no_model(sentence_run, tmp_path,
                                                                   no_models, capsys):
    from sklearn.metrics import roc_auc_score

    before = {p.name: p.read_bytes() for p in sentence_run.iterdir() if p.is_file()}
    out = tmp_path / "contains"
    assert main(["evaluate", "rejudge", str(sentence_run), "--out", str(out), "--judge",
                 "contains", "--bootstrap", "50", "--no-plots", "--judge-check",
                 str(CHECK)]) == 0
    assert "re-judged 8 questions (8 judged by contains" in capsys.readouterr().err
    old = lines(sentence_run / "results.jsonl")
    new = lines(out / "results.jsonl")
    judge = make_judge("contains")
    assert [r["correct"] for r in new] == [
        judge(r["question"], r["greedy"], r["references"]).correct for r in old]
    assert sum(r["correct"] for r in new) == 5 and not any(r["correct"] for r in old)
    for a, b in zip(old, new):  # everything but the verdict as it was
        assert {k: v for k, v in a.items() if k not in ("correct", "judge", "label")} == {
            k: v for k, v in b.items() if k not in ("correct", "judge", "label")}
        assert b["label"] == "judged" and b["judge"]["detail"]
    report = json.loads((out / "report.json").read_text())
    assert report["judge"] == {"name": "contains", "threshold": None}
    assert report["accuracy"] == 5 / 8 and set(report["metrics"]) == set(METRICS)
    wrong = [not r["correct"] for r in new]
    for m in MEASURES:
        for s in SCORINGS:
            u = [r["uncertainty"][m][s] for r in new]
            assert report["metrics"]["auroc"][m][s]["value"] == pytest.approx(
                roc_auc_score(wrong, u), abs=1e-12)
    assert not any("sentences" in w for w in report["warnings"])  # contains reads them
    assert report["judge_check"]["judge"] == report["judge"]  # the check it was given
    assert report["judge_check"]["agreement"] >= 0.95
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["rejudged_from"] == {"run": str(sentence_run),
                                         "judge": {"name": "em", "threshold": None},
                                         "labels": None}
    # the old run is untouched
    assert {p.name: p.read_bytes() for p in sentence_run.iterdir() if p.is_file()} == before


def test_rejudge_with_a_label_file(sentence_run, tmp_path, no_models, capsys):
    records = lines(sentence_run / "results.jsonl")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join([
        json.dumps({"index": records[0]["index"], "correct": False}),
        json.dumps({"id": records[1]["id"], "correct": 1}),
        json.dumps({"question": records[2]["question"], "correct": True}),
        json.dumps({"index": 999, "correct": True}),  # names no question of the run
        "{broken", json.dumps({"index": 3}),  # bad lines: reported and skipped
    ]) + "\n", encoding="utf-8")
    out = tmp_path / "labelled"
    code = main(["evaluate", "rejudge", str(sentence_run), "--out", str(out), "--labels",
                 str(labels), "--bootstrap", "20", "--no-plots"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{labels}, line 5: not valid JSON" in err
    assert f"{labels}, line 6: 'correct' (the label) is missing" in err
    new = lines(out / "results.jsonl")
    assert [(r["label"], r["correct"]) for r in new[:3]] == [("given", False), ("given", True),
                                                             ("given", True)]
    assert all(r["label"] == "judged" for r in new[3:])  # by the default judge, contains
    report = json.loads((out / "report.json").read_text())
    assert report["labels"] == {"given": 3, "judged": 5}
    assert any("1 label(s) of" in w and "(lines 4)" in w for w in report["warnings"])
    assert len(report["skipped_lines"]) == 2
    # a re-judge of the labelled run keeps the given labels
    again = tmp_path / "again"
    assert main(["evaluate", "rejudge", str(out), "--out", str(again), "--judge", "em",
                 "--bootstrap", "20", "--no-plots"]) == 0
    assert [r["correct"] for r in lines(again / "results.jsonl")[:3]] == [False, True, True]


def test_rejudge_refusals(sentence_run, tmp_path, capsys):
    from mars_demo.evaluation.rejudge import rejudge
    from mars_demo.evaluation.run import RunError

    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    assert main(["evaluate", "rejudge", str(sentence_run), "--out", str(full)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert main(["evaluate", "rejudge", str(sentence_run), "--out", str(sentence_run)]) == 2
    assert "a new directory" in capsys.readouterr().err
    assert main(["evaluate", "run", "--labels", "x.jsonl", "--data", "d", "--out", "o"]) == 2
    assert "unrecognized arguments: --labels x.jsonl" in capsys.readouterr().err  # rejudge's
    behind = tmp_path / "behind"
    shutil.copytree(sentence_run, behind)
    (behind / "results.jsonl").write_text(
        "".join(x + "\n" for x in (behind / "results.jsonl").read_text().splitlines()[:5]))
    assert main(["evaluate", "rejudge", str(behind), "--out", str(tmp_path / "n")]) == 2
    assert "did not finish" in capsys.readouterr().err
    with pytest.raises(RunError, match="8 of 8 questions have no label; give --judge"):
        rejudge(sentence_run, tmp_path / "nolabels", None)


def test_rejudge_with_the_nli_judge_loads_the_nli_model_only(sentence_run, tiny_models,
                                                             tmp_path, no_llm, monkeypatch):
    from mars_demo.engine import Engine
    from mars_demo.models import registry

    def refuse(*a, **k):
        raise AssertionError("only the NLI model may be loaded")

    monkeypatch.setattr(registry, "load_importance", refuse)
    monkeypatch.setattr(registry, "load_bem", refuse)
    monkeypatch.setattr(Engine, "score_many", refuse)
    out = tmp_path / "nli"
    assert main(["evaluate", "rejudge", str(sentence_run), "--out", str(out), "--judge",
                 "nli", "--nli", str(tiny_models["nli"]), "--bootstrap", "20",
                 "--no-plots"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["judge"] == {"name": "nli", "threshold": None,
                               "model": str(tiny_models["nli"])}
    assert all(r["judge"]["detail"] for r in lines(out / "results.jsonl"))


# ---- the judge check --------------------------------------------------------------------------


def test_judge_check_prints_each_judges_figures(capsys):
    """The printed figures equal a count made here, row by row."""
    rows = [json.loads(x) for x in CHECK.read_text(encoding="utf-8").splitlines()]
    assert main(["evaluate", "check-judge", str(CHECK), "--judge", "contains,em,f1,rouge",
                 "--threshold", "0.4"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"judge check on {CHECK}: {len(rows)} labelled answers")
    for name, shown in (("contains", "contains"), ("em", "em"), ("f1", "f1 >= 0.4"),
                        ("rouge", "rouge >= 0.4")):
        judge = make_judge(name, 0.4 if name in ("f1", "rouge") else None)
        said = [judge(r["question"], r["answer"], r["answers"]).correct for r in rows]
        fa = sum(s and not r["correct"] for s, r in zip(said, rows))
        fr = sum(r["correct"] and not s for s, r in zip(said, rows))
        agree = 1 - (fa + fr) / len(rows)
        line = next(x for x in text.splitlines() if x.startswith(shown + " "))
        assert line.split()[-3:] == [f"{agree * 100:.1f}%", str(fa), str(fr)], line
    assert "agreement by kind of row:" in text and "\ndenial " in text
    assert main(["evaluate", "check-judge", str(CHECK), "--judge", "contains",
                 "--json", "--disagreements"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["judge"] == {"name": "contains", "threshold": None}
    assert data[0]["n"] == len(rows) and data[0]["agreement"] >= 0.95


def test_judge_check_lists_disagreements_and_bad_lines(tmp_path, capsys):
    check = tmp_path / "check.jsonl"
    check.write_text("\n".join([
        json.dumps({"question": "Capital of Australia?", "answers": ["Canberra"],
                    "answer": "Not Canberra but Sydney.", "correct": True}),  # a wrong label
        json.dumps({"question": "Capital of Australia?", "answers": ["Canberra"],
                    "answer": "It is Canberra.", "correct": 1}),
        "nope", json.dumps({"question": "Q?", "answers": ["a"], "correct": True}),
    ]) + "\n", encoding="utf-8")
    code = main(["evaluate", "check-judge", str(check), "--judge", "contains",
                 "--disagreements"])
    captured = capsys.readouterr()
    assert code == 1
    assert f"{check}, line 3: not valid JSON" in captured.err
    assert f"{check}, line 4: 'answer' must be text" in captured.err
    assert "checked 2 rows; 2 bad line(s) skipped" in captured.err
    assert "contains      50.0%              0              1" in captured.out
    assert "line 1: rejects 'Not Canberra but Sydney.'" in captured.out
    check.write_text("[]\n")
    assert main(["evaluate", "check-judge", str(check)]) == 2
    assert "has no usable row" in capsys.readouterr().err
    assert main(["evaluate", "check-judge", str(CHECK), "--judge", "contains,bleu"]) == 2
    assert "--judge must be one of" in capsys.readouterr().err
    assert main(["evaluate", "run", "--data", "x", "--out", str(tmp_path / "o"), "--judge",
                 "em,f1"]) == 2
    assert "this takes one --judge (several only with evaluate check-judge)" in (
        capsys.readouterr().err)


def test_the_docs_give_each_judges_figures_on_every_labelled_set():
    """The tables of docs/judges.md for data/judge_check.jsonl and the two held-out sets equal the
    figures counted here; each table is the first one after its file's description."""
    import re

    from mars_demo.evaluation.judge_check import check_judge, read_check_set

    page = (ROOT / "docs" / "judges.md").read_text(encoding="utf-8")
    for path in (CHECK, HOLDOUT, HOLDOUT2):
        rows = read_check_set(str(path)).rows
        intro = f"`data/{path.name}`: {len(rows)} answers to {len({r.question for r in rows})} "
        assert intro in page, intro
        after = page[page.index(intro):]
        table = after[after.index("| judge | agreement |"):]
        table = table[:table.index("\n\n")]
        for name, shown in (("contains", "`contains`"), ("em", "`em`"),
                            ("f1", "`f1` (>= 0.5)"), ("rouge", "`rouge` (>= 0.3)")):
            r = check_judge(make_judge(name), rows)
            line = re.search(r"^\s*\| " + re.escape(shown) + r" \| (.*) \|$", table, re.M)
            assert line, (path.name, shown)
            assert [c.strip() for c in line.group(1).split("|")] == [
                f"{r.agreement * 100:.1f}%", str(r.false_accepts), str(r.false_rejects)], \
                (path.name, name)
    said = " ".join(page.split())
    assert ("written independently by a second annotator who never saw the judge; `contains` "
            "was measured on it once before the judge's second round of rules (82.0%") in said

def test_the_docs_say_where_contains_misses_on_the_never_seen_set():
    """The account in docs/judges.md of the third annotator's set: every false reject is a right
    answer by an unlisted alias, and the rest agree on the figure it gives."""
    from mars_demo.evaluation.judge_check import check_judge, read_check_set

    rows = read_check_set(str(HOLDOUT2)).rows
    alias = [r for r in rows if r.kind == "alias_right"]
    rest = [r for r in rows if r.kind != "alias_right"]
    on_alias = check_judge(make_judge("contains"), alias)
    on_rest = check_judge(make_judge("contains"), rest)
    assert on_alias.false_rejects == len(alias) == 11
    assert on_rest.false_rejects == 0
    said = " ".join((ROOT / "docs" / "judges.md").read_text(encoding="utf-8").split())
    assert (f"on the other {len(rest)} rows `contains` agrees on "
            f"{on_rest.agreement * 100:.1f}% ({on_rest.false_accepts} false accepts") in said
