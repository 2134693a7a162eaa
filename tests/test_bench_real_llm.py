"""``python -m mars_demo.bench --real-llm LLM`` on the tiny LLM's GGUF file, through llama.cpp and
transformers side by side (its figures are checked for presence and consistency, never for speed;
docs/benchmark.md holds SmolLM2's)."""

from __future__ import annotations

import json

import pytest

from mars_demo.devtools import bench
from mars_demo.devtools.bench import real_llm


@pytest.fixture(scope="module")
def data(tiny_gguf, tmp_path_factory):
    return real_llm.run(str(tiny_gguf), n_questions=3, samples=2, max_new_tokens=6,
                        repeats=2, models_dir=tmp_path_factory.mktemp("helpers"),
                        helper_shape="tiny", log=lambda m: None)


def test_both_backends_run_the_same_file_side_by_side(data):
    d = json.loads(json.dumps(data))
    assert d["mode"] == "real-llm" and list(d["backends"]) == ["llama.cpp", "transformers"]
    for run in d["backends"].values():
        assert len(run["ask"]["runs"]) == 2 and run["llm_load_s"] > 0
        for one in run["ask"]["runs"]:
            assert one["wall_s"] > 0 and all(v >= 0 for v in one["stages_s"].values())
            assert one["stages_s"]["generate"] > 0 and one["stages_s"]["nli"] > 0
        evaluate = run["evaluate"]
        assert evaluate["answers"] == 9 and len(evaluate["greedy"]) == 3
        assert evaluate["s_per_question"] == pytest.approx(evaluate["wall_s"] / 3)
    assert any("dequantized" in n for n in d["backends"]["transformers"]["llm_notes"])
    assert d["backends"]["llama.cpp"]["llm_notes"] == []
    text = real_llm.format_report(d)
    assert "llama.cpp ask s" in text and "transformers ask s" in text
    assert "target: generation within 1.3x of llama.cpp's own" in text


def test_the_bare_generate_makes_the_same_rows_and_tokens_as_the_projects(data):
    hf = data["backends"]["transformers"]
    # ask: the greedy answer and 2 samples in one call; evaluate: 3 questions' rows in one
    assert hf["ask_generation_vs_bare"]["rows"] == 3
    assert hf["evaluate_generation_vs_bare"]["rows"] == 9
    for versus in (hf["ask_generation_vs_bare"], hf["evaluate_generation_vs_bare"]):
        assert (versus["bare_rows"], versus["bare_new_tokens"]) == (versus["rows"],
                                                                    versus["new_tokens"])
        assert 1 <= versus["new_tokens"] <= 6 and len(versus["pairs"]) == 2
        for pair in versus["pairs"]:
            assert pair["cpu_ratio"] == pytest.approx(pair["project"]["cpu_s"]
                                                      / pair["bare"]["cpu_s"])
        assert versus["cpu_ratio_median"] == pytest.approx(
            sum(p["cpu_ratio"] for p in versus["pairs"]) / 2)


def test_llama_cpps_own_completion_makes_the_same_tokens(data):
    versus = data["backends"]["llama.cpp"]["generation_vs_llama_cpp"]
    assert versus["same_tokens"] and 1 <= versus["greedy_tokens"] <= 6
    assert len(versus["pairs"]) == 2 and versus["request"]["rows"] == 3
    for pair in versus["pairs"]:
        assert pair["cpu_ratio"] == pytest.approx(pair["project"]["cpu_s"]
                                                  / pair["llama_cpp"]["cpu_s"])
    targets = data["targets"]
    assert targets["generation_vs_llama_cpp_cpu"] == versus["cpu_ratio_median"]
    assert targets["generation_vs_llama_cpp_met"] == (versus["cpu_ratio_median"] <= 1.3)
    llama, hf = data["backends"]["llama.cpp"], data["backends"]["transformers"]
    assert targets["load_speedup"] == pytest.approx(hf["llm_load_s"] / llama["llm_load_s"])


def test_bench_dispatches_real_llm(monkeypatch, tmp_path):
    assert real_llm.main(["--real-llm", str(tmp_path / "missing.gguf")]) == 2  # said, not run
    seen = []
    monkeypatch.setattr(real_llm, "main", lambda argv: seen.append(argv) or 0)
    assert bench.main(["--real-llm", "x.gguf", "--questions", "3"]) == 0
    assert seen == [["--real-llm", "x.gguf", "--questions", "3"]]
