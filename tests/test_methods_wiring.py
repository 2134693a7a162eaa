"""The uncertainty methods of the registry through the engine, the JSON, the command line, the
library and the page's access: computed when asked (default: the free ones), saved in the
analysis, and recomputed from a saved analysis alone, without any model."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import cli, model_flags

import mars_demo
from mars_demo import methods
from mars_demo.engine import Engine
from mars_demo.errors import OptionError
from mars_demo.hosting.access import Access, public_access
from mars_demo.methods import FREE, METHODS, compute_methods
from mars_demo.result import AnalysisResult
from mars_demo.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Which planet is known as the Red Planet?"


@pytest.fixture(scope="module")
def analysis(tiny_settings) -> AnalysisResult:
    return Engine(tiny_settings).analyze(QUESTION)


@pytest.fixture(scope="module")
def saved(analysis, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "analysis.json"
    path.write_text(json.dumps(analysis.to_dict()), encoding="utf-8")
    return path


def close(a: dict, b: dict, tol: float = 1e-9) -> bool:
    return a.keys() == b.keys() and all(
        a[m].keys() == b[m].keys() and all(abs(a[m][k] - b[m][k]) <= tol for k in a[m])
        for m in a)


def test_an_analysis_computes_every_free_method_by_default(analysis):
    assert list(analysis.methods) == list(FREE) and Settings().methods is None
    for method_id, values in analysis.methods.items():
        assert tuple(values) == METHODS[method_id].variants
        assert all(isinstance(v, float) and math.isfinite(v) for v in values.values())
    # the paper's semantic entropy is the measure's own number, under both scorings
    u = analysis.uncertainty.semantic_entropy
    assert analysis.methods["semantic_entropy"] == {"length_normalized": u.length_normalized,
                                                    "mars": u.mars}
    assert analysis.methods == compute_methods(analysis, FREE)
    assert analysis.settings["methods"] == list(FREE)
    assert "methods" in analysis.timings_s


def test_only_the_methods_asked_for_are_computed(tiny_settings, analysis):
    again = Engine(tiny_settings.replace(methods="eccentricity_contra, semantic_entropy")).rescore(
        analysis)
    assert list(again.methods) == ["eccentricity_contra", "semantic_entropy"]
    assert again.methods == {k: analysis.methods[k] for k in again.methods}
    assert again.settings["methods"] == ["eccentricity_contra", "semantic_entropy"]


def test_the_methods_round_trip_through_the_json(analysis):
    data = json.loads(json.dumps(analysis.to_dict()))
    assert data["methods"] == analysis.methods and data["schema_version"] == 4
    assert AnalysisResult.from_dict(data).methods == analysis.methods


def test_a_saved_analysis_gives_every_method_again_without_any_model(saved):
    """In a fresh process: the methods from the saved JSON alone, torch never imported."""
    code = (
        "import json, sys\n"
        "from mars_demo.methods import compute_methods\n"
        f"data = json.load(open({str(saved)!r}, encoding='utf-8'))\n"
        "values = compute_methods(data, data['settings']['methods'])\n"
        "assert not {'torch', 'transformers'} & set(sys.modules), 'a model library was loaded'\n"
        "print(json.dumps(values))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    recomputed = json.loads(proc.stdout)
    stored = json.loads(saved.read_text(encoding="utf-8"))["methods"]
    assert list(recomputed) == list(FREE) and close(recomputed, stored)


def test_score_on_a_saved_analysis_recomputes_every_method(saved, tiny_models):
    code, out, err = cli("score", str(saved), *model_flags(tiny_models), "--json")
    assert code == 0, err
    again = json.loads(out)
    stored = json.loads(saved.read_text(encoding="utf-8"))
    assert list(again["methods"]) == stored["settings"]["methods"] == list(FREE)
    assert close(again["methods"], stored["methods"])


def test_score_methods_only_recomputes_them_without_loading_a_model(saved, tmp_path):
    """``score --methods-only`` in a fresh process: every method within 1e-9 of the saved
    value, torch never imported; with --methods, only those; an answer set is refused."""
    code = (
        "import sys\n"
        "from mars_demo.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "assert not {'torch', 'transformers'} & set(sys.modules), 'a model library was loaded'\n"
        "sys.exit(code)\n"
    )

    def run(*args):
        return subprocess.run([sys.executable, "-c", code, "score", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)

    stored = json.loads(saved.read_text(encoding="utf-8"))
    proc = run(str(saved), "--methods-only", "--json")
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    assert list(again["methods"]) == list(FREE) and close(again["methods"], stored["methods"])
    assert {k: v for k, v in again.items() if k != "methods"} == {
        k: v for k, v in stored.items() if k != "methods"}
    proc = run(str(saved), "--methods-only", "--json", "--methods", "eigv_contra")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["methods"] == {"eigv_contra": stored["methods"]["eigv_contra"]}
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"question": QUESTION, "samples": [{"text": "Mars"}]}))
    proc = run(str(answers), "--methods-only")
    assert proc.returncode == 2 and "--methods-only needs a saved analysis" in proc.stderr


def test_score_and_the_library_take_the_methods_asked_for(saved, tiny_models, tiny_settings):
    code, out, err = cli("score", str(saved), *model_flags(tiny_models), "--json",
                         "--methods", "kernel_language_entropy,num_sets")
    assert code == 0, err
    assert list(json.loads(out)["methods"]) == ["kernel_language_entropy", "num_sets"]
    stored = json.loads(saved.read_text(encoding="utf-8"))
    result = mars_demo.score(stored, **{**tiny_settings.to_dict(), "methods": ["degree"]})
    assert list(result.methods) == ["degree"]
    assert abs(result.methods["degree"]["value"] - stored["methods"]["degree"]["value"]) < 1e-9


@pytest.mark.parametrize("value, message", [
    ("eigv,eigenvalues", "unknown method 'eigenvalues'; known: confidence, entropy, semantic_entropy"),
])
def test_a_bad_method_is_one_line_and_exit_status_2(value, message, saved, tiny_models):
    code, out, err = cli("score", str(saved), *model_flags(tiny_models), "--methods", value)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1
    code, out, err = cli("ask", QUESTION, *model_flags(tiny_models), "--methods", value)
    assert code == 2 and message in err
    with pytest.raises(OptionError, match=message):
        Settings(methods=value)


def test_the_methods_flag_is_documented():
    for command in ("ask", "score"):
        code, out, err = cli(command, "--help")
        assert code == 0 and err == ""
        assert "--methods METHODS" in out and "docs/methods.md" in out


def test_a_method_that_fails_for_some_answers_is_left_out_with_a_warning(
        tiny_settings, analysis, monkeypatch):
    import dataclasses

    broken = dataclasses.replace(METHODS["degree"],  # ValueError: math domain error
                                 compute=lambda inputs, variant: math.log(-1.0))
    monkeypatch.setitem(METHODS, "degree", broken)
    again = Engine(tiny_settings.replace(methods="eigv,degree")).rescore(analysis)
    assert list(again.methods) == ["eigv"]
    assert any("method degree could not be computed" in w and "math domain error" in w
               for w in again.warnings)


# --- what a visitor may ask for -------------------------------------------------------------------


def test_visitors_may_ask_only_for_the_methods_the_server_offers():
    from ui_helpers import FakeEngine

    from mars_demo.ui.page.controller import Controller
    from mars_demo.ui.work.host import EngineHost

    assert public_access().methods == Access().methods == frozenset(FREE)
    page = Controller(EngineHost(FakeEngine()), access=public_access())
    assert page.settings_from("eigv, degree", names=("methods",)).methods == ("eigv", "degree")
    assert page.settings_from("auto", names=("methods",)).methods is None  # the API's default
    # an extra LLM pass or model is not a visitor's to ask for, unless the host offers it
    with pytest.raises(OptionError, match="token_sar are not offered on this server"):
        page.settings_from("token_sar", names=("methods",))
    with pytest.raises(OptionError, match="p_true are not offered on this server"):
        page.settings_from("eigv,p_true", names=("methods",))
    host_allows = Controller(EngineHost(FakeEngine()),
                             access=Access(public=True, methods=frozenset(FREE) | {"p_true"}))
    assert host_allows.settings_from("p_true", names=("methods",)).methods == ("p_true",)
    narrow = Controller(EngineHost(FakeEngine()),
                        access=Access(public=True, methods=frozenset({"eigv"})))
    with pytest.raises(OptionError, match="degree are not offered on this server.*offered: eigv"):
        narrow.settings_from("eigv,degree", names=("methods",))
    with pytest.raises(OptionError, match="not offered"):  # the default asks for every free one
        narrow.settings_from("auto", names=("methods",))


@pytest.mark.parametrize("method_id", [m for m in METHODS if m not in FREE])
def test_the_public_api_refuses_an_opt_in_method_unless_the_host_offers_it(method_id):
    """Every method that needs an extra pass or model (P(True), SAR, LARS, any added later):
    the raw API of a public page refuses it, and a host that offers it lets it through."""
    import gradio as gr
    from ui_helpers import FakeEngine

    from mars_demo.ui.page.controller import Controller
    from mars_demo.ui.work.api import Api
    from mars_demo.ui.work.host import EngineHost

    api = Api(Controller(EngineHost(FakeEngine()), access=public_access()))
    with pytest.raises(gr.Error, match=f"{method_id} are not offered on this server"):
        api.analyze("Which planet is known as the Red Planet?", methods=f"eigv,{method_id}")
    assert method_id not in public_access().methods and method_id not in Access().methods
    offered = Access(public=True, methods=frozenset(FREE) | {method_id})
    host = Controller(EngineHost(FakeEngine()), access=offered)
    assert host.settings_from(method_id, names=("methods",)).methods == (method_id,)


def test_the_readable_report_shows_each_measure_once(analysis):
    """Confidence, Entropy and Semantic entropy are methods too (their values are in
    ``methods``): the report's details list them in their uncertainty table, and only there
    (the first screen shows their MARS values with a scale)."""
    import re

    from mars_demo.readable import detail_lines

    assert {"confidence", "entropy", "semantic_entropy"} <= set(analysis.methods)
    report = "\n".join(detail_lines(analysis))
    for name in ("Confidence", "Entropy", "Semantic entropy"):
        rows = [line for line in report.splitlines() if re.match(rf"  {name}  ", line)]
        assert len(rows) == 1, (name, rows)
        value = analysis.methods[name.lower().replace(" ", "_")]["length_normalized"]
        assert f"{value:17.4f}" in rows[0]


def test_the_readable_report_lists_the_methods(analysis):
    from mars_demo.cli import format_report

    report = format_report(analysis, details=True)
    assert "Other methods (higher = less trustworthy" in report
    eigv = analysis.methods["eigv"]["value"]
    se = analysis.methods["semantic_entropy_normalized"]
    assert f"Eigenvalue (entail.){'':<19} {eigv:9.4f}" in report
    assert (f"Semantic entropy, normalized{'':<11} {se['length_normalized']:9.4f} (LN) "
            f"{se['mars']:9.4f} (MARS)") in report
