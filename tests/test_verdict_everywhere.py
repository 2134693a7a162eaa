"""One answer to "should you trust this answer?" in every interface: the verdict is part of the
analysis (computed once, by the engine), and ``ask``, ``ask --json``, ``score --json``, the
library and the page say the same of the same analysis; a toy model is said as such everywhere;
the command line's first screen holds the verdict."""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
import shutil

import pytest

from mars_demo.cli import main
from mars_demo.models.toy import MARKER
from mars_demo.result import AnalysisResult
from mars_demo.verdict import Verdict, verdict

QUESTION = "Which planet is known as the Red Planet?"
FLAGS = ("--samples", "3", "--max-new-tokens", "8", "--seed", "4")


def models_of(paths) -> list[str]:
    return ["--llm", str(paths["llm"]), "--importance", str(paths["importance"]),
            "--nli", str(paths["nli"])]


def run(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    """``python -m mars_demo ARGV`` in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        if stdin is not None:
            import sys

            saved, sys.stdin = sys.stdin, io.StringIO(stdin)
        try:
            code = main(list(argv))
        finally:
            if stdin is not None:
                sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def report_verdict(report: str) -> str:
    """The verdict as the readable report prints it, unwrapped: the "Verdict:" line and the
    indented lines that follow it, up to the first blank line."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Verdict: "))
    said = []
    for line in lines[start:]:
        if not line.strip():
            break
        said.append(line.strip())
    return " ".join(said).removeprefix("Verdict: ")


def page_verdict(verdict_html: str) -> str:
    """The text of the page's ``#mars-verdict`` as a reader sees it: the verdict's line and the
    lines said under it (not the folded details)."""
    shown = re.findall(r'<p class="mars-verdict-(?:line|said[^"]*)">(.*?)</p>', verdict_html)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", part)) for part in shown)
    return " ".join(text.split())


@pytest.fixture(scope="module")
def asked(tiny_models, tmp_path_factory):
    """The same question asked twice with the same seed: ``ask --json`` (saved to a file) and
    the readable report of ``ask``."""
    code, out, err = run("ask", QUESTION, *models_of(tiny_models), *FLAGS, "--json")
    assert code == 0, err
    saved = tmp_path_factory.mktemp("asked") / "analysis.json"
    saved.write_text(out, encoding="utf-8")
    code, report, err = run("ask", QUESTION, *models_of(tiny_models), *FLAGS)
    assert code == 0, err
    return {"data": json.loads(out), "file": saved, "report": report}


def test_ask_and_ask_json_give_the_same_verdict_in_the_first_lines(asked):
    data, report = asked["data"], asked["report"]
    made = Verdict.from_dict(data["verdict"])
    assert data["verdict"]["text"] == made.text and made.level in ("consistent", "mostly",
                                                                   "unsure", "few")
    assert report_verdict(report) == made.text
    first = report.splitlines()[:8]  # the question, the answer, then the verdict
    assert first[0].startswith("Question: ") and any(x.startswith("Verdict: ") for x in first)
    # about 25 lines by default: the details are one flag away
    assert len(report.splitlines()) <= 30, report


def test_score_json_and_the_library_recompute_the_same_verdict(asked, tiny_models):
    data = asked["data"]
    code, out, err = run("score", str(asked["file"]), "--json")
    assert code == 0, err
    assert json.loads(out)["verdict"] == data["verdict"]
    # the library: read back, and scored again
    from mars_demo import score

    assert AnalysisResult.from_dict(data).verdict == Verdict.from_dict(data["verdict"])
    assert score(data).verdict.to_dict() == data["verdict"]


def test_a_re_score_computes_the_verdict_again(asked):
    """A saved verdict is not carried over when the answers are scored again: a re-score
    computes its own (the saved one here says something no analysis would)."""
    tampered = json.loads(json.dumps(asked["data"]))
    tampered["verdict"]["sentence"] = "Trust me."
    tampered["verdict"]["level"] = "consistent"
    code, out, err = run("score", "-", "--json", stdin=json.dumps(tampered))
    assert code == 0, err
    assert json.loads(out)["verdict"] == asked["data"]["verdict"]


def test_the_page_shows_the_cli_verdict_of_a_saved_analysis(asked):
    from ui_helpers import FakeEngine

    from mars_demo.ui.page.controller import Controller
    from mars_demo.ui.work.host import EngineHost

    saved = AnalysisResult.from_dict(json.loads(asked["file"].read_text(encoding="utf-8")))
    page = Controller(EngineHost(FakeEngine()))
    shown = page_verdict(page.show(saved, "mars")["verdict"])
    assert shown == report_verdict(asked["report"])
    # and the page renders the analysis' own verdict, it does not judge again
    saved.verdict = Verdict.from_dict({**saved.verdict.to_dict(), "sentence": "Said once."})
    assert "Said once." in page.show(saved, "mars")["verdict"]


def test_the_page_asked_with_the_real_engine_shows_the_engine_verdict(tiny_settings):
    """The page's Ask on the real engine: the verdict it shows is the one the engine put in the
    analysis (the page's calibration and run went to the engine)."""
    from mars_demo.engine import Engine
    from mars_demo.ui.page.controller import Controller
    from mars_demo.ui.work.host import EngineHost

    page = Controller(EngineHost(Engine(tiny_settings)))
    last = list(page.ask(QUESTION, "mars", *DEFAULT_OPTIONS))[-1]
    result = last["result"]
    assert isinstance(result, AnalysisResult) and result.verdict is not None
    assert page_verdict(last["verdict"]) == " ".join(result.verdict.text.split())
    assert result.verdict == verdict(result)  # the engine's, with no calibration here


DEFAULT_OPTIONS = (3, 0.5, 8, 0, "auto", "model", "sum", "equal", "strict")


# --- toy models ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_looking(tiny_models, tmp_path_factory):
    """The tiny models copied with the toy marker taken out of their configs: the same
    weights, as a model from elsewhere would load."""
    out = tmp_path_factory.mktemp("not-toy")
    paths = {}
    for name in ("llm", "importance", "nli"):
        shutil.copytree(tiny_models[name], out / name)
        config = out / name / "config.json"
        data = json.loads(config.read_text(encoding="utf-8"))
        assert data.pop(MARKER) is True  # make-tiny-models wrote it
        config.write_text(json.dumps(data), encoding="utf-8")
        paths[name] = out / name
    return paths


def test_an_analysis_on_toy_models_says_so_everywhere(asked):
    data, report = asked["data"], asked["report"]
    toy = [w for w in data["warnings"] if w.startswith("Toy models:")]
    assert len(toy) == 1, data["warnings"]
    for part in ("the LLM, the importance model and the NLI model", "make-tiny-models",
                 "the answers, the MARS weights and the meanings (clusters) mean nothing"):
        assert part in toy[0]
    assert data["settings"]["toy_models"] == ["llm", "importance", "nli"]
    assert "Toy models: the LLM" in report  # the report's warnings, the toy first
    warnings = report.split("Warnings (", 1)[1].splitlines()
    assert warnings[1].startswith("  - Toy models:")
    # the page's warnings box
    from ui_helpers import FakeEngine

    from mars_demo.ui.page.controller import Controller
    from mars_demo.ui.work.host import EngineHost

    shown = Controller(EngineHost(FakeEngine())).show(AnalysisResult.from_dict(data), "mars")
    assert "Toy models: the LLM" in html.unescape(shown["warnings"])


def test_a_re_score_of_toy_answers_still_says_their_llm_was_a_toy(asked, real_looking):
    """Re-scored with models that are no toys, the answers still came from the toy LLM."""
    code, out, err = run("score", str(asked["file"]), "--json", "--importance",
                         str(real_looking["importance"]), "--nli", str(real_looking["nli"]))
    assert code == 0, err
    data = json.loads(out)
    assert data["settings"]["toy_models"] == ["llm"]
    assert any(w.startswith("Toy model: the LLM was written by make-tiny-models")
               for w in data["warnings"])


def test_an_analysis_on_other_models_does_not(real_looking):
    code, out, err = run("ask", QUESTION, *models_of(real_looking), *FLAGS, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert "toy_models" not in data["settings"]
    assert not any("Toy model" in w or "make-tiny-models" in w for w in data["warnings"])
    code, report, err = run("ask", QUESTION, *models_of(real_looking), *FLAGS)
    assert "Toy model" not in report


def test_the_marker_is_read_from_the_loaded_config(tiny_models, real_looking):
    """Through the normal loading path: the registry's model, its config as loaded."""
    from mars_demo.models import registry, toy

    assert toy.is_toy(registry.load_importance(str(tiny_models["importance"])))
    assert not toy.is_toy(registry.load_importance(str(real_looking["importance"])))


# --- with a calibration and a reference run ------------------------------------------------


@pytest.fixture(scope="module")
def calibrated(tiny_models, tmp_path_factory):
    """An evaluate run of 10 questions (labels given: half right) on the tiny models, with
    ask's FLAGS, calibrated: RUN/calibration.json."""
    from pathlib import Path

    facts = Path(__file__).resolve().parents[1] / "data" / "facts.jsonl"
    rows = [json.loads(x) for x in facts.read_text(encoding="utf-8").splitlines()][:10]
    base = tmp_path_factory.mktemp("calibrated")
    data = base / "labelled.jsonl"
    data.write_text("".join(json.dumps({**r, "correct": k % 2 == 0}) + "\n"
                            for k, r in enumerate(rows)), encoding="utf-8")
    out = base / "run"
    code, _, err = run("evaluate", "run", "--data", str(data), "--out", str(out),
                       *models_of(tiny_models), *FLAGS, "--bootstrap", "50", "--no-plots")
    assert code == 0, err
    code, _, err = run("evaluate", "calibrate", str(out), "--no-plots")
    assert code == 0, err
    return out


def test_a_calibration_and_its_run_reach_the_verdict_in_every_interface(calibrated, tiny_models):
    cal = calibrated / "calibration.json"
    argv = ("ask", QUESTION, *models_of(tiny_models), *FLAGS, "--calibration", str(cal))
    code, out, err = run(*argv, "--json")
    assert code == 0, err
    data = json.loads(out)
    made = Verdict.from_dict(data["verdict"])
    assert made.chance is not None and 0 <= made.chance <= 1
    assert made.calibrated == (f"About {round(100 * made.chance)}% likely right (calibrated on "
                               "labelled.jsonl, 10 questions).")
    assert made.calibration["measure"] == "semantic_entropy" and made.tone in (
        "likely", "maybe", "unlikely")
    # the calibration's run is the reference: its record at this level, and the places
    # (10 answers: too few to tell its levels apart, and the record says so, naming the judge)
    assert made.record.startswith("The evaluation run run (judged by contains) cannot tell this "
                                  "level from the others: it holds ")
    assert "were right" not in made.record
    code, report, err = run(*argv)
    assert code == 0, err
    assert report_verdict(report) == made.text
    assert "placed among the answers of run run" in report
    assert "of the run's answers" in report.split("Key uncertainties", 1)[1].split("\n\n")[0]
    # the page with the same calibration and run, on the real engine, says the same
    from mars_demo.engine import Engine
    from mars_demo.evaluation.calibration import load
    from mars_demo.evaluation.reference import load_reference
    from mars_demo.ui.page.controller import Controller
    from mars_demo.ui.work.host import EngineHost

    settings = Engine().settings.replace(
        llm=str(tiny_models["llm"]), importance=str(tiny_models["importance"]),
        nli=str(tiny_models["nli"]))
    page = Controller(EngineHost(Engine(settings)), calibration=load(cal),
                      reference=load_reference(calibrated))
    last = list(page.ask(QUESTION, "mars", 3, 0.5, 8, 4, "auto", "model", "sum", "equal",
                         "strict"))[-1]
    assert page_verdict(last["verdict"]) == report_verdict(report)
    # a bad calibration file is one line and status 2
    code, _, err = run("ask", QUESTION, "--calibration", str(calibrated / "report.json"))
    assert code == 2 and err.startswith("error: --calibration: ")
