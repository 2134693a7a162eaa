"""Questions batched together: Engine.generate_many / score_many give each question what it
gets alone (CPU float32, tiny models), in one batched call per model."""

from __future__ import annotations

import json
import pathlib

import pytest
from numeric_checks import float32_order

from mars_demo.engine import Engine
from mars_demo.models.nli import NLIModel
from mars_demo.models.registry import load_importance, load_nli

# every test here compares a batched pass with single ones (float32_order, some through
# assert_same_result): CI runs them again on one torch thread
pytestmark = pytest.mark.float_order

ROOT = pathlib.Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "data" / "facts_answers.jsonl"
QUESTIONS = ["Which planet is known as the Red Planet?", "Who wrote Hamlet?",
             "What is the capital of France?", "In which year did humans first land on the Moon?"]
MEASURES = ("confidence", "entropy", "semantic_entropy")
SCORINGS = ("length_normalized", "mars")


def given_answer_sets(n: int) -> list[dict]:
    rows = [json.loads(x) for x in ANSWERS.read_text(encoding="utf-8").splitlines()[:n]]
    return [{"question": r["question"], "greedy": r["greedy"], "samples": r["samples"]}
            for r in rows]


def uncertainties(result) -> list[float]:
    u = result.uncertainty
    return [getattr(getattr(u, m), k) for m in MEASURES for k in SCORINGS]


def assert_same_result(batched, alone) -> None:
    assert batched.question == alone.question
    assert batched.greedy.text == alone.greedy.text
    assert [a.text for a in batched.samples] == [a.text for a in alone.samples]
    # the importance and NLI passes run over the batch's answers together: float32 order
    assert uncertainties(batched) == float32_order(uncertainties(alone))
    for a, b in zip([batched.greedy, *batched.samples], [alone.greedy, *alone.samples]):
        assert [(p.start, p.end) for p in a.phrases] == [(p.start, p.end) for p in b.phrases]
        assert a.token_importance == float32_order(b.token_importance)
    assert batched.nli.labels == alone.nli.labels
    assert batched.cluster_ids == alone.cluster_ids
    assert batched.warnings == alone.warnings


@pytest.fixture(scope="module")
def engine(tiny_settings):
    e = Engine(tiny_settings)
    e.load()
    return e


def counting_calls(monkeypatch, obj, name):
    calls = []
    original = getattr(obj, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    if isinstance(obj, type):  # a method patched on the class: keep ``self``
        def counted(self, *args, **kwargs):
            calls.append(1)
            return original(self, *args, **kwargs)

    monkeypatch.setattr(obj, name, counted)
    return calls


@pytest.mark.parametrize("recipe", ["default", "paper-code"])
def test_score_many_equals_one_score_per_question(engine, tiny_settings, recipe, monkeypatch):
    settings = tiny_settings.replace(recipe=recipe)
    sets = given_answer_sets(6)
    alone = [engine.score(a, settings) for a in sets]
    importance_passes = counting_calls(monkeypatch, engine.models.importance.model, "forward")
    nli_calls = counting_calls(monkeypatch, NLIModel, "judge")  # paper-code: an fp32 copy
    batched = engine.score_many(sets, settings)
    assert len(importance_passes) == 1  # every question's answers in one pass
    assert len(nli_calls) == 1  # every question's needed pairs in one judge call
    assert len(batched) == 6
    for b, a in zip(batched, alone):
        assert_same_result(b, a)
    # the answers really differ between questions: the comparison is not vacuous
    assert len({tuple(uncertainties(r)) for r in batched}) == 6


def test_score_many_with_bem_importance_equals_per_question(engine, tiny_settings):
    settings = tiny_settings.replace(importance_method="bem")
    sets = given_answer_sets(3)
    alone = [engine.score(a, settings) for a in sets]
    for b, a in zip(engine.score_many(sets, settings), alone):
        assert_same_result(b, a)


def test_generate_many_gives_each_question_its_greedy_answer(engine, tiny_settings,
                                                            monkeypatch):
    settings = tiny_settings.replace(max_new_tokens=10, samples=3)
    alone = [engine.generate(q, settings) for q in QUESTIONS]
    generate_calls = counting_calls(monkeypatch, engine.models.llm.model, "generate")
    batched = engine.generate_many(QUESTIONS, settings)
    assert len(generate_calls) == 1
    for b, a in zip(batched, alone):
        assert b.question == a.question and b.prompt == a.prompt
        assert b.greedy.token_ids == a.greedy.token_ids and b.greedy.text == a.greedy.text
        assert b.greedy.logprobs == pytest.approx(a.greedy.logprobs, abs=1e-4)
        assert len(b.samples) == 3 and b.generation == a.generation
        assert b.prompt_token_ids == a.prompt_token_ids
    # scoring the batch's answers together = scoring each alone
    results = engine.score_many(batched, settings)
    for r, answers in zip(results, batched):
        assert_same_result(r, engine.score(answers, settings))


def test_importance_score_many_pairs_each_answer_with_its_own_question(tiny_models):
    model = load_importance(str(tiny_models["importance"]))
    answers = [["Mars.", "It is Mars"], [], ["Shakespeare wrote it", ""]]
    many = model.score_many(["Red planet?", "Nothing?", "Who wrote Hamlet?"], answers)
    assert [len(x) for x in many] == [2, 0, 2]
    for q, a, got in zip(["Red planet?", "Nothing?", "Who wrote Hamlet?"], answers, many):
        for x, y in zip(got, model.score(q, a)):
            assert x.spans == y.spans
            assert x.scores == float32_order(y.scores)  # three questions' answers in one batch
    # the question matters: the same answer after another question scores differently
    other = model.score("Who wrote Hamlet?", ["Mars.", "It is Mars"])
    assert any(a.scores != float32_order(b.scores) for a, b in zip(many[0], other))


def test_nli_matrices_equal_one_matrix_per_question(tiny_models):
    nli = load_nli(str(tiny_models["nli"]))
    questions = ["Red planet?", "Who wrote Hamlet?"]
    answers = [["Mars.", "mars", "Venus"], ["Shakespeare", "Marlowe", "Bacon", "marlowe"]]
    many = nli.matrices(questions, answers)
    for q, a, m in zip(questions, answers, many):
        one = nli.matrix(q, a)
        assert m.labels == one.labels
        assert m.probabilities == float32_order(one.probabilities)  # shared batches vs alone
        assert m.warnings == one.warnings == []


def test_evaluate_batch_1_and_4_give_the_same_results(tiny_settings, tmp_path):
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.run import EvalConfig, evaluate

    def run(k: int) -> list[dict]:
        config = EvalConfig(data=str(ANSWERS), out=tmp_path / f"b{k}", judge=make_judge("em"),
                            settings=tiny_settings, limit=9, resamples=20, plots=False,
                            messages=lambda m: None, batch_questions=k)
        evaluate(config)
        return [json.loads(x) for x in (tmp_path / f"b{k}" / "results.jsonl").read_text(
            encoding="utf-8").splitlines()]

    one, four = run(1), run(4)
    assert [r["index"] for r in one] == [r["index"] for r in four] and len(one) == 9
    for a, b in zip(one, four):
        assert a["greedy"] == b["greedy"] and a["correct"] == b["correct"]
        for m in MEASURES:
            for k in SCORINGS:
                # batches of 1 and of 4 questions: float32 order
                assert a["uncertainty"][m][k] == float32_order(b["uncertainty"][m][k])


def test_evaluate_generated_greedy_answers_do_not_depend_on_the_batch(tiny_models, tiny_settings,
                                                                     tmp_path):
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.run import EvalConfig, evaluate

    settings = tiny_settings.replace(max_new_tokens=6, samples=2)
    facts = ROOT / "data" / "facts.jsonl"

    def run(k: int) -> list[dict]:
        config = EvalConfig(data=str(facts), out=tmp_path / f"g{k}", judge=make_judge("em"),
                            settings=settings, limit=5, resamples=20, plots=False,
                            messages=lambda m: None, batch_questions=k)
        evaluate(config)
        return [json.loads(x) for x in (tmp_path / f"g{k}" / "results.jsonl").read_text(
            encoding="utf-8").splitlines()]

    one, four = run(1), run(4)
    assert len(one) == len(four) == 5
    assert [r["greedy"] for r in one] == [r["greedy"] for r in four]
    assert all(len(r["analysis"]["samples"]) == 2 for r in four)
    assert all(r["analysis"]["settings"]["logprob_source"] == "generation" for r in four)


def test_batch_questions_must_be_positive(tmp_path, capsys):
    from mars_demo.cli import main

    code = main(["evaluate", "run", "--data", str(ANSWERS), "--out", str(tmp_path / "r"),
                 "--batch-questions", "0"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: argument --batch-questions: --batch-questions must be a positive "
                   "integer; got '0' (see --help)")
    assert not (tmp_path / "r").exists()


def test_many_questions_answers_go_to_the_importance_model_in_bounded_chunks(engine,
                                                                              tiny_settings,
                                                                              monkeypatch):
    import math

    import mars_demo.models.importance as importance

    sets = given_answer_sets(6)
    whole = engine.score_many(sets, tiny_settings)
    monkeypatch.setattr(importance, "BATCH", 5)
    passes = counting_calls(monkeypatch, engine.models.importance.model, "forward")
    chunked = engine.score_many(sets, tiny_settings)
    answers = sum(1 + len(a["samples"]) for a in sets)
    assert len(passes) == math.ceil(answers / 5) > 1
    for b, a in zip(chunked, whole):
        assert_same_result(b, a)
