"""Small-sample honesty: a run too small to trust its intervals says so, and why, in report.md
and on the page's Evaluation view; an interval without width is never shown without that
caution; the columns name the model as the page does (the full path stays in run.json)."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib

import pytest

from mars_demo.cli import main
from mars_demo.evaluation import sample_size
from mars_demo.evaluation.runs import parse_report
from mars_demo.evaluation.schema import Entry, Report
from mars_demo.ui.views.eval_view import EvaluationView

FACTS = pathlib.Path(__file__).resolve().parents[1] / "data" / "facts.jsonl"


def report(n: int, accuracy: float, ci=(0.6, 0.8)) -> Report:
    return Report(data="facts.jsonl", n=n, accuracy=accuracy, judge={}, models={}, settings={},
                  resamples=200, metrics={"auroc": {"confidence": {"mars": Entry(0.7, ci)}}})


@pytest.mark.parametrize("n, accuracy, ci, said", [
    (29, 0.5, (0.6, 0.8), ["only 29 questions (at least 30 are needed)"]),
    (100, 0.95, (0.6, 0.8), ["only 5 wrong answers (at least 10 right and 10 wrong"]),
    (100, 0.05, (0.6, 0.8), ["only 5 right answers"]),
    (100, 0.5, (1.0, 1.0), ["some intervals have no width (such as [100.00, 100.00]"]),
    (5, 0.4, (1.0, 1.0), ["only 5 questions", "only 2 right answers", "no width"]),
])
def test_a_run_too_small_or_too_lopsided_is_cautioned_with_its_reasons(n, accuracy, ci, said):
    found = sample_size.reasons(report(n, accuracy, ci))
    assert len(found) == len(said)
    for reason, part in zip(found, said):
        assert part in reason
    assert sample_size.caution(report(n, accuracy, ci)).startswith(
        "Caution: these intervals cannot be trusted: ")


def test_a_large_balanced_run_is_not_cautioned():
    assert sample_size.reasons(report(30, 0.5)) == [] and sample_size.caution(report(30, 0.5)) is None
    assert sample_size.caution(report(100, 0.9)) is None  # 10 wrong answers are enough


@pytest.fixture(scope="module")
def five(tiny_models, tmp_path_factory):
    """An ``evaluate run`` of five questions (labels given: 3 right, 2 wrong)."""
    base = tmp_path_factory.mktemp("five")
    rows = [json.loads(line) for line in FACTS.read_text(encoding="utf-8").splitlines()][:5]
    data = base / "five.jsonl"
    data.write_text("".join(json.dumps({**r, "correct": k < 3}) + "\n"
                            for k, r in enumerate(rows)), encoding="utf-8")
    out = base / "run"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["evaluate", "run", "--data", str(data), "--out", str(out),
                     "--llm", str(tiny_models["llm"]), "--importance",
                     str(tiny_models["importance"]), "--nli", str(tiny_models["nli"]),
                     "--samples", "2", "--max-new-tokens", "6", "--bootstrap", "50",
                     "--no-plots"]) == 0
    (out / "printed.txt").write_text(printed.getvalue(), encoding="utf-8")
    return out


def test_a_five_question_run_cautions_in_its_report(five, tiny_models):
    md = (five / "report.md").read_text(encoding="utf-8")
    assert ("**Caution: these intervals cannot be trusted: only 5 questions (at least 30 are "
            "needed); only 2 wrong answers") in md
    # the figures evaluate prints are cautioned too
    printed = (five / "printed.txt").read_text(encoding="utf-8")
    assert "Caution: these intervals cannot be trusted: only 5 questions" in printed
    # the caution comes before the first table, and every interval is under it
    assert md.index("Caution:") < md.index("| Method |")
    # the column names the model as the page does; the full path stays in run.json
    llm = str(tiny_models["llm"])
    header = next(line for line in md.splitlines() if line.startswith("| Method |"))
    assert llm not in header and header == f"| Method | {pathlib.Path(llm).parent.name}/llm |"
    assert json.loads((five / "run.json").read_text(encoding="utf-8"))["settings"]["llm"] == llm


def test_a_five_question_run_cautions_on_the_page(five):
    view = EvaluationView(five.parent)
    shown = view.show("run", None, None)
    for key in ("eval_table", "eval_verdict"):
        if shown[key]:
            assert "Caution: these intervals cannot be trusted: only 5 questions" in shown[key]
    assert "Caution: these intervals cannot be trusted" in shown["eval_table"]
    parsed = parse_report((five / "report.json").read_text(encoding="utf-8"))
    assert sample_size.caution(parsed) is not None
