"""Scoring again uses the models that scored the answers: ``score`` (CLI and library) takes the
importance and NLI models the analysis recorded, ``evaluate rejudge --judge nli`` the run's NLI
model, unless a flag or keyword names others; each says which it used. Offline (as every test
runs), a default model would fail: these pass only when the recorded ones are used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import cli

from mars_demo import score
from mars_demo.engine import Engine
from mars_demo.settings import Settings, for_answers, recorded_models

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Which planet is known as the Red Planet?"


@pytest.fixture(scope="module")
def analysis(tiny_settings) -> dict:
    """An analysis made on the tiny models (its settings name them), as JSON."""
    return Engine(tiny_settings.replace(samples=3, max_new_tokens=6)).analyze(QUESTION).to_dict()


def test_recorded_models_doctests():
    import doctest

    import mars_demo.settings

    assert doctest.testmod(mars_demo.settings).failed == 0


def test_the_library_score_takes_the_recorded_models(analysis, tiny_models):
    again = score(analysis, normalization="softmax")
    assert again.settings["importance"] == str(tiny_models["importance"])
    assert again.settings["nli"] == str(tiny_models["nli"])
    assert again.settings["normalization"] == "softmax"
    # the other scoring options stay as recorded: the same numbers as the analysis
    same = score(analysis)
    assert same.uncertainty.semantic_entropy.mars == pytest.approx(
        analysis["uncertainty"]["semantic_entropy"]["mars"], abs=1e-6)


def test_a_keyword_names_another_model(analysis, tmp_path):
    from mars_demo.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match=r"the NLI model nobody/nli \(--nli: not in the "):
        score(analysis, nli="nobody/nli")


def test_for_answers_keeps_generation_options_out():
    made = for_answers({"importance": "/m/i", "nli": "/m/n", "samples": 9,
                        "normalization": "softmax", "llm": "/m/llm"}, {"nli": "/other"})
    assert (made.importance, made.nli, made.llm) == ("/m/i", "/other", "/m/llm")
    assert made.normalization == "softmax" and made.samples == Settings().samples
    assert recorded_models({"llm": "served", "llm_endpoint": "http://h/v1"}) == {
        "llm_endpoint": "http://h/v1", "llm_model": "served"}


def test_the_cli_score_uses_and_names_the_recorded_models(analysis, tiny_models, tmp_path):
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(analysis), encoding="utf-8")
    code, out, err = cli("score", str(path), "--json", "--normalization", "softmax")
    assert code == 0, err
    assert json.loads(out)["settings"]["nli"] == str(tiny_models["nli"])
    assert (f"scoring with importance {tiny_models['importance']} (recorded in the file), "
            f"NLI {tiny_models['nli']} (recorded in the file)") in err
    code, _, err = cli("score", str(path), "--nli", "nobody/nli")
    assert code == 1
    assert "NLI nobody/nli (--nli)" in err and "the NLI model nobody/nli (--nli:" in err


def test_rejudge_with_the_nli_judge_uses_the_runs_nli_model(tiny_models, tmp_path):
    answers = tmp_path / "answers.jsonl"
    rows = [json.loads(line) for line in
            (ROOT / "data" / "facts_answers.jsonl").read_text(encoding="utf-8").splitlines()[:6]]
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = tmp_path / "run"
    code, _, err = cli("evaluate", "run", "--data", str(answers), "--out", str(run),
                       "--bootstrap", "20", "--no-plots", "--importance",
                       str(tiny_models["importance"]), "--nli", str(tiny_models["nli"]))
    assert code == 0, err
    code, _, err = cli("evaluate", "rejudge", str(run), "--out", str(tmp_path / "nli"),
                       "--judge", "nli", "--bootstrap", "20", "--no-plots")
    assert code == 0, err
    assert f"the nli judge uses the NLI model {tiny_models['nli']} (the one {run} recorded" in err
    report = json.loads((tmp_path / "nli" / "report.json").read_text())
    assert report["judge"] == {"name": "nli", "threshold": None, "model": str(tiny_models["nli"])}
