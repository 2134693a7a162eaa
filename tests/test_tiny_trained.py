"""The trained tiny models (make-tiny-models --trained) give answers that make sense.

The models are trained once per session, through the CLI, and then checked through the project's
real pipeline: the right answer, the answering words weigh the most, paraphrases share a cluster,
a wrong answer gets its own.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import json  # noqa: E402

import pytest  # noqa: E402

from mars_demo.devtools.tiny import trained as tiny_trained  # noqa: E402

FACTS = {f.question: f for f in tiny_trained.load_facts()}
# plain facts (the LLM was trained on their right answers only) and confusable ones
PLAIN = [
    "Which planet is known as the Red Planet?",
    "What is the capital of France?",
    "In which year did people first walk on the Moon?",
    "Who wrote the play Romeo and Juliet?",
    "What is the chemical symbol for gold?",
    "What is the capital city of Japan?",
]
CONFUSABLE = "What is the largest desert in the world?"


@pytest.fixture(scope="session")
def engine(trained_tiny_models):
    from mars_demo.engine import Engine
    from mars_demo.settings import Settings

    return Engine(Settings(llm=trained_tiny_models["llm"], importance=trained_tiny_models["importance"],
                           nli=trained_tiny_models["nli"], max_new_tokens=32, samples=5, seed=0))


@pytest.fixture(scope="session")
def results(engine):
    return {q: engine.analyze(q) for q in PLAIN}


def _entity_span(text: str, entity: str) -> tuple[int, int]:
    start = text.lower().find(entity.lower())
    assert start >= 0, f"{entity!r} not in {text!r}"
    return start, start + len(entity)


def test_cli_writes_loadable_models(trained_tiny_models):
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
    )

    from mars_demo.devtools import tiny

    assert set(trained_tiny_models) == {"dir", "llm", "importance", "nli", "bem", "chunker"}
    tok = AutoTokenizer.from_pretrained(trained_tiny_models["llm"])
    llm = AutoModelForCausalLM.from_pretrained(trained_tiny_models["llm"])
    assert tok.chat_template and tok.eos_token == "<|im_end|>"
    assert llm.generation_config.eos_token_id == tok.eos_token_id
    imp = AutoModelForTokenClassification.from_pretrained(trained_tiny_models["importance"])
    assert imp.config.num_labels == 3 and imp.config.id2label == tiny.IMPORTANCE_ID2LABEL
    nli = AutoModelForSequenceClassification.from_pretrained(trained_tiny_models["nli"])
    assert nli.config.id2label == tiny.NLI_ID2LABEL
    report = json.loads((trained_tiny_models["dir"] / "trained.json").read_text(encoding="utf-8"))
    assert set(report["models"]) == {"llm", "importance", "nli"}
    assert report["facts"] == len(FACTS)
    readme = (trained_tiny_models["dir"] / "README.txt").read_text(encoding="utf-8")
    assert "TRAINED" in readme


def test_greedy_answers_are_the_facts(trained_tiny_models):
    """Greedy chat answers of every trained question hold its answering words, and most are
    the fact's own sentence."""
    questions = list(FACTS)
    answers = tiny_trained.greedy_answers(trained_tiny_models["llm"], questions)
    exact = 0
    for q, a in zip(questions, answers):
        fact = FACTS[q]
        assert fact.answer.entity_text.lower() in a.lower() or any(
            p.entity_text.lower() in a.lower() for p in fact.paraphrases
        ), (q, a)
        exact += a == fact.answer.text
    assert exact >= 0.85 * len(questions)


def test_pipeline_greedy_answer_and_weights(results):
    for q, r in results.items():
        fact = FACTS[q]
        entity = fact.answer.entity_text
        assert r.greedy.finish_reason == "stop"
        assert entity.lower() in r.greedy.text.lower(), (q, r.greedy.text)
        a, b = _entity_span(r.greedy.text, entity)
        # the highest MARS weight goes to the answering words (a whitespace token before them
        # belongs to their phrase and may share it)
        w = r.greedy.mars_weights
        inside = [i for i, t in enumerate(r.greedy.tokens) if t.start < b and t.end > a]
        assert inside and max(w[i] for i in inside) == pytest.approx(max(w)), (q, r.greedy.text)
        # ... and they form the phrase with the highest weight, which dominates the rest
        best = max(r.greedy.phrases, key=lambda p: p.weight)
        assert best.text.lower().strip(" .") == entity.lower(), (q, best.text)
        assert best.weight > 0.5
        # MARS weighs the answering tokens above length-normalized's 1/L
        assert all(w[i] > 1 / len(w) for i in best.tokens)


def test_pipeline_paraphrases_share_a_cluster(results):
    for q, r in results.items():
        entity = FACTS[q].answer.entity_text.lower()
        ids = {c for c, s in zip(r.cluster_ids, r.samples) if entity in s.text.lower()}
        assert len(ids) == 1, (q, [(c, s.text) for c, s in zip(r.cluster_ids, r.samples)])
    # sampling at temperature 0.5 gives some variety (not only the greedy sentence)
    texts = {s.text for r in results.values() for s in r.samples}
    assert len(texts) > len(results)


def test_pipeline_wrong_sample_gets_its_own_cluster(engine):
    """On a confusable fact the LLM sometimes answers wrong; a wrong sample never shares the
    cluster of a right one, and the semantic entropy is higher than on a plain fact."""
    import dataclasses

    fact = FACTS[CONFUSABLE]
    more = dataclasses.replace(engine.settings, samples=20)
    r = engine.analyze(CONFUSABLE, more)
    right = [c for c, s in zip(r.cluster_ids, r.samples) if fact.answer.entity_text.lower() in s.text.lower()]
    wrong = [c for c, s in zip(r.cluster_ids, r.samples) if "sahara" in s.text.lower()]
    assert right and wrong, [s.text for s in r.samples]
    assert len(set(right)) == 1 and not set(right) & set(wrong)
    plain = engine.analyze(PLAIN[0], more)
    assert r.uncertainty.semantic_entropy.mars > plain.uncertainty.semantic_entropy.mars


def test_nli_on_given_answers(trained_tiny_models):
    """On every fact's own answers: paraphrases entail each other both ways, right vs wrong
    contradict (almost every verdict), and the strict clusters put the right answers together
    and the wrong ones apart on most facts."""
    from mars_demo.core.clustering import semantic_clusters
    from mars_demo.models.registry import load_nli

    nli = load_nli(trained_tiny_models["nli"])
    right = total = clean = 0
    for q, fact in FACTS.items():
        answers = [a.text for a in fact.correct] + [w.text for w in fact.wrong]
        labels = nli.matrix(q, answers).labels
        n = len(fact.correct)
        for i in range(len(answers)):
            for j in range(len(answers)):
                if i != j:
                    want = "entailment" if i < n and j < n else "contradiction"
                    right += labels[i][j] == want
                    total += 1
        ids = semantic_clusters(labels, rule="strict")
        clean += ids[:n] == [0] * n and all(c != 0 for c in ids[n:])
    assert right >= 0.95 * total, (right, total)
    assert clean >= 0.85 * len(FACTS), clean


def test_importance_model_on_paper_example(trained_tiny_models):
    """The paper's Table 5 example: in "It is Mars", Mars carries the weight."""
    from mars_demo.models.registry import load_importance

    imp = load_importance(trained_tiny_models["importance"])
    (scoring,) = imp.score("Which planet is known as the Red Planet?", ["It is Mars."])
    text = "It is Mars."
    phrases = {text[a:b]: s for (a, b), s in zip(scoring.spans, scoring.scores)}
    assert phrases["Mars"] > 0.8
    assert all(s < 0.3 for p, s in phrases.items() if p != "Mars")


def test_importance_targets_and_parsing():
    m = tiny_trained.parse_marked("The capital of France is [Paris].")
    assert m.text == "The capital of France is Paris." and m.entity_text == "Paris"
    words, begins, important = tiny_trained.importance_targets(m)
    assert words == ["The", "capital", "of", "France", "is", "Paris", "."]
    assert begins == [0, 1, 1, 1, 1, 0, 0]
    assert important == [0, 0, 0, 0, 0, 1, 0]
    with pytest.raises(ValueError, match="mark"):
        tiny_trained.parse_marked("No answering words here.")


def test_facts_give_the_greedy_answer_a_lead():
    """At every word where trained texts part ways, the fact's answer has the most weight."""
    for fact in FACTS.values():
        texts = [(t, w) for q, t, w in tiny_trained.llm_examples([fact])]
        answer = fact.answer.text.split()
        for k in range(len(answer)):
            prefix = answer[:k]
            nxt: dict[str, int] = {}
            for t, w in texts:
                words = t.split()
                if words[:k] == prefix and len(words) > k:
                    nxt[words[k]] = nxt.get(words[k], 0) + w
            assert max(nxt, key=nxt.get) == answer[k] and sorted(nxt.values())[-2:] != [nxt[answer[k]]] * 2, (fact.question, nxt)


@pytest.mark.parametrize("name", ["llm", "importance", "nli"])
def test_training_is_deterministic(tmp_path, name):
    """Same seed -> same weights; another seed -> other weights (a short run on a few facts)."""
    import torch
    from safetensors.torch import load_file

    facts = list(FACTS.values())[:3]
    train = getattr(tiny_trained, f"train_{name}")
    with tiny_trained.TrainingThreads():
        for sub, seed in (("a", 0), ("b", 0), ("c", 1)):
            train(tmp_path / sub, facts, seed, epochs=1)
    a, b, c = (load_file(tmp_path / s / "model.safetensors") for s in "abc")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_trained_needs_tiny_shapes(tmp_path):
    from mars_demo.devtools.tiny import make_tiny_models

    with pytest.raises(ValueError, match="tiny"):
        make_tiny_models(tmp_path, trained=True, llm_shape="cpu")


def test_page_examples_are_trained_facts():
    """The page's examples are questions the trained tiny models know (README, examples.json)."""
    from mars_demo.ui.page.layout import EXAMPLES_PATH

    examples = json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))["examples"]
    for item in examples:
        assert item["question"] in FACTS, item["question"]
        assert FACTS[item["question"]].confusable == (item["source"] == "often-wrong")
