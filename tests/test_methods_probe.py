"""A new method is one entry in one family file: a probe method added to the registry (as a
family file's entry would be) reaches every place that lists, parses, computes or shows the
methods, with no other edit: ``--methods``, the analysis JSON, ``score --methods-only``,
``evaluate``'s ranked table, the page's methods panel and the docs' list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import cli, model_flags

from mars_demo import methods
from mars_demo.cli import main
from mars_demo.engine import Engine
from mars_demo.methods import listing
from mars_demo.methods.base import method

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Which planet is known as the Red Planet?"


def _probe(x, variant):
    """The samples' mean score under one scoring plus the greedy answer's length: reads two
    existing inputs, distinct per scoring."""
    scores = x.sample_scores(variant)
    return -sum(scores) / len(scores) + len(x.greedy_answer.token_logprobs)


PROBE = method("probe_method", "Probe method", "a probe that reads the samples' scores",
               ["greedy", "samples"], True, "a test", _probe)


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.setitem(methods.METHODS, PROBE.id, PROBE)
    return PROBE


@pytest.fixture(scope="module")
def saved(tiny_settings, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("probe") / "analysis.json"
    result = Engine(tiny_settings.replace(methods="eigv")).analyze(QUESTION)
    path.write_text(json.dumps(result.to_dict()), encoding="utf-8")
    return path


def expected(data: dict) -> dict:
    inputs = methods.inputs_of(data)
    return {v: _probe(inputs, v) for v in methods.SCORED_VARIANTS}


def test_the_command_line_computes_it_into_the_json(probe, saved, tiny_models):
    assert methods.parse_methods("eigv, probe_method") == ("eigv", "probe_method")
    code, out, err = cli("score", str(saved), *model_flags(tiny_models), "--json",
                         "--methods", "eigv,probe_method")
    assert code == 0, err
    data = json.loads(out)
    assert list(data["methods"]) == ["eigv", "probe_method"]
    assert data["methods"]["probe_method"] == pytest.approx(expected(data), abs=1e-12)
    assert data["settings"]["methods"] == ["eigv", "probe_method"]


def test_score_methods_only_recomputes_it_without_models(probe, saved, capsys):
    code = main(["score", str(saved), "--methods-only", "--json", "--methods", "probe_method"])
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    assert data["methods"] == {"probe_method": expected(data)}


def test_evaluate_ranks_it(probe):
    from mars_demo.evaluation import methods_table
    from mars_demo.evaluation.records import Record

    records = [Record(correct=bool(k % 2), uncertainty={},
                      methods={"probe_method": {"length_normalized": float(k % 2 == 0) + k / 100,
                                                "mars": float(k)},
                               "answer_length": {"value": float(k % 3)}})
               for k in range(12)]
    table = methods_table.compute(records, resamples=50, seed=0)
    rows = {(r.name, r.variant): r for r in table.rows}
    assert rows["probe_method", "length_normalized"].label == "Probe method (LN)"
    assert rows["probe_method", "length_normalized"].metrics["auroc"].value == 1.0
    assert rows["probe_method", "mars"].metrics["prr_0.5"].value is not None
    assert "Probe method (MARS)" in "\n".join(methods_table.markdown_lines(table))


def test_the_page_panel_shows_it_with_its_explanation(probe, saved):
    from mars_demo.result import AnalysisResult
    from mars_demo.ui.draw.methods_panel import methods_panel_html

    result = AnalysisResult.from_dict(json.loads(saved.read_text(encoding="utf-8")))
    result.methods = {**result.methods, "probe_method": {"length_normalized": 1.5, "mars": 2.5}}
    html = methods_panel_html(result, "mars")
    assert 'data-method="probe_method"' in html
    assert "Probe method" in html and "a probe that reads the samples&#x27; scores" in html


def test_the_docs_list_it(probe):
    page = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    assert listing.START in page and "`probe_method`" not in page
    filled = listing.fill(page)
    row = next(line for line in filled.splitlines() if line.startswith("| `probe_method`"))
    assert "Probe method" in row and "LN and MARS" in row and "a test" in row
    # every registered method is in the list, as the docs hook builds it
    for method_id in methods.METHODS:
        assert f"| `{method_id}` |" in filled
    assert "probe_method (Probe method; LN and MARS; free)" in listing.text()
