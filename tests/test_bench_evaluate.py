"""``python -m mars_demo.bench --evaluate`` on tiny random models (figures are checked for
presence and consistency, never for speed)."""

from __future__ import annotations

import json

import pytest

from mars_demo.devtools import bench
from mars_demo.devtools.bench import evaluate as bench_evaluate


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return bench_evaluate.run("tiny", n_questions=5, batch_sizes=(1, 4), samples=2,
                              answer_tokens=4, models_dir=tmp_path_factory.mktemp("models"),
                              log=lambda m: None)


def test_every_batch_size_is_measured_with_its_own_batching(data):
    d = json.loads(json.dumps(data))
    assert d["mode"] == "evaluate" and d["settings"]["questions"] == 5
    one, four = d["batches"]
    assert (one["batch_questions"], four["batch_questions"]) == (1, 4)
    # 5 questions: 5 generate calls one at a time, 2 in batches of 4 (4 + 1); likewise the
    # importance and NLI passes (one each per batch)
    assert (one["generate_calls"], four["generate_calls"]) == (5, 2)
    assert (one["importance_passes"], four["importance_passes"]) == (5, 2)
    for r in (one, four):
        assert r["all_answers_full_length"] is True
        assert r["s_per_question"] == pytest.approx(r["seconds"] / 5)
        assert r["s_per_question"] > 0
    assert one["speedup_vs_batch_1"] == 1.0
    assert four["speedup_vs_batch_1"] == pytest.approx(one["s_per_question"]
                                                       / four["s_per_question"])
    assert d["greedy_identical_across_batch_sizes"] is True
    # the GPU target is only judged for the 7B shape on a GPU
    assert d["target"]["met"] is None and "not measured" in d["target"]["note"]
    text = bench_evaluate.format_report(d)
    assert "s/question" in text and "not measured" in text


def test_questions_are_distinct():
    qs = bench_evaluate.questions(90)
    assert len(set(qs)) == 90


def test_bench_dispatches_evaluate(monkeypatch):
    real = bench_evaluate.main
    assert real(["--evaluate", "--batch-sizes", "1,x"]) == 2  # a clear error, nothing run
    seen = []
    monkeypatch.setattr(bench_evaluate, "main", lambda argv: seen.append(argv) or 0)
    assert bench.main(["--evaluate", "--questions", "3"]) == 0
    assert seen == [["--evaluate", "--questions", "3"]]
