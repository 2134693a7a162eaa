"""``python -m mars_demo.bench --real-llm LLM`` on the tiny models (its figures are checked for
presence and consistency, never for speed; docs/benchmark.md holds SmolLM2's)."""

from __future__ import annotations

import json

import pytest

from mars_demo.devtools import bench
from mars_demo.devtools.bench import real_llm


@pytest.fixture(scope="module")
def data(tiny_models, tmp_path_factory):
    return real_llm.run(str(tiny_models["llm"]), n_questions=3, samples=2, max_new_tokens=6,
                        repeats=2, models_dir=tmp_path_factory.mktemp("helpers"),
                        helper_shape="tiny", log=lambda m: None)


def test_the_bare_generate_makes_the_same_rows_and_tokens_as_the_projects(data):
    d = json.loads(json.dumps(data))
    assert d["mode"] == "real-llm" and len(d["ask"]["runs"]) == 2
    ask, evaluate = d["ask"], d["evaluate"]
    # ask: the greedy answer and 2 samples in one call; evaluate: 3 questions' rows in one
    assert ask["generation_vs_bare"]["rows"] == 3 and evaluate["generation_vs_bare"]["rows"] == 9
    for versus in (ask["generation_vs_bare"], evaluate["generation_vs_bare"]):
        assert (versus["bare_rows"], versus["bare_new_tokens"]) == (versus["rows"],
                                                                    versus["new_tokens"])
        assert 1 <= versus["new_tokens"] <= 6 and len(versus["pairs"]) == 2
        for pair in versus["pairs"]:
            assert pair["cpu_ratio"] == pytest.approx(pair["project"]["cpu_s"]
                                                      / pair["bare"]["cpu_s"])
            assert pair["wall_ratio"] == pytest.approx(pair["project"]["wall_s"]
                                                       / pair["bare"]["wall_s"])
        assert versus["cpu_ratio_median"] == pytest.approx(
            sum(p["cpu_ratio"] for p in versus["pairs"]) / 2)
    for run in ask["runs"]:
        assert run["wall_s"] > 0 and all(v >= 0 for v in run["stages_s"].values())
        assert run["stages_s"]["generate"] > 0 and run["stages_s"]["nli"] > 0
    assert evaluate["answers"] == 9 and len(evaluate["greedy"]) == 3
    assert evaluate["s_per_question"] == pytest.approx(evaluate["wall_s"] / 3)
    text = real_llm.format_report(d)
    assert "bare transformers generate of the same tokens" in text and "importance" in text


def test_bench_dispatches_real_llm(monkeypatch, tmp_path):
    assert real_llm.main(["--real-llm", str(tmp_path / "missing.gguf")]) == 2  # said, not run
    seen = []
    monkeypatch.setattr(real_llm, "main", lambda argv: seen.append(argv) or 0)
    assert bench.main(["--real-llm", "x.gguf", "--questions", "3"]) == 0
    assert seen == [["--real-llm", "x.gguf", "--questions", "3"]]
