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


def test_one_and_two_processes_are_measured_in_one_run(tmp_path):
    """``--evaluate --processes 1,2`` on tiny models: both counts run the same questions
    through torchrun and evaluate, give the same records, and are reported side by side."""
    from mars_demo.devtools.bench import processes

    d = json.loads(json.dumps(processes.run_in_processes(
        "tiny", processes=(1, 2), n_questions=4, batch_questions=2, samples=2,
        answer_tokens=4, repeats=2, models_dir=tmp_path / "models", log=lambda m: None)))
    assert d["mode"] == "evaluate-processes"
    one, two = d["runs"]
    assert (one["processes"], two["processes"]) == (1, 2)
    assert one["questions"] == two["questions"] == 4
    for r in (one, two):  # each count ran twice, taking turns, and keeps its best round
        assert r["questions_per_s"] == pytest.approx(4 / r["seconds"])
        assert len(r["every_round_seconds"]) == 2 and r["seconds"] == min(
            r["every_round_seconds"])
        assert r["command_seconds"] > r["seconds"] > 0
    assert one["speedup_vs_1"] == 1.0
    assert two["speedup_vs_1"] == pytest.approx(two["questions_per_s"] / one["questions_per_s"])
    assert d["records_identical_across_processes"] is True
    text = processes.format_report(d)
    assert "questions/s" in text and "records identical at every process count: yes" in text
