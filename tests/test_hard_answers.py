"""Hard answers (empty, cut off, punctuation only, unknown characters, longer than a model's
window, all alike, all different): finite numbers and a warning that says what happened, never a
traceback. The answers are forced (see ``forced_answers``); everything after generation is real.
"""

from __future__ import annotations

import numpy as np
import pytest
from forced_answers import check_result, forced, has_warning, loaded_engine, run_forced

from mars_demo.models.nli import PairVerdicts
from mars_demo.settings import MAX_QUESTION_CHARS, clean_question


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return loaded_engine(tiny_settings)


def self_entailing(pairs, input_format="pair"):
    """An NLI model's verdicts where a text entails itself and contradicts any other (the tiny
    random model is not sure even of a text against itself; the default recipe asks the model
    for identical texts too, so their clusters follow what it says)."""
    return PairVerdicts(
        ["entailment" if a == b else "contradiction" for a, b in pairs],
        [[1.0, 0.0, 0.0] if a == b else [0.0, 0.0, 1.0] for a, b in pairs])


def test_empty_generation_scores_the_stop_and_warns(engine, monkeypatch):
    monkeypatch.setattr(engine.models.nli, "judge", self_entailing)
    r = run_forced(engine, monkeypatch, "", "")
    check_result(r)
    for a in [r.greedy] + r.samples:
        assert a.text == "" and len(a.tokens) == 1 and a.phrases == []
    assert has_warning(r, "Greedy answer", "empty answer")
    assert has_warning(r, "No words to score")
    assert r.cluster_ids == [0, 0, 0]  # identical (empty) answers share one meaning


def test_whitespace_only_generation_is_an_empty_answer_with_a_warning(engine, monkeypatch):
    r = run_forced(engine, monkeypatch, "  \n ", [" ", "\t\t", "\n\n"])
    check_result(r)
    assert all(a.text == "" for a in [r.greedy] + r.samples)
    assert has_warning(r, "empty answer", "whitespace")


def test_generation_that_hits_the_token_limit(engine, monkeypatch):
    long = "Mars is known as the Red Planet and the fourth planet from the Sun " * 3
    r = run_forced(engine, monkeypatch, long, long, max_new_tokens=6)
    check_result(r)
    assert all(a.finish_reason == "length" and len(a.tokens) == 6 for a in [r.greedy] + r.samples)
    assert has_warning(r, "max-new-tokens limit")


def test_answer_of_only_punctuation(engine, monkeypatch):
    r = run_forced(engine, monkeypatch, "?!...", ["?!...", "!!!", "..."])
    check_result(r)
    assert r.greedy.text == "?!..."
    assert len(r.greedy.phrases) >= 1


def test_answers_with_unk_for_the_importance_tokenizer(engine, monkeypatch):
    r = run_forced(engine, monkeypatch, "火星 ☃ Mars", ["Ω≈ç√", "火星", "Mars ⚛ red"])
    check_result(r)
    assert r.greedy.text == "火星 ☃ Mars"
    assert has_warning(r, "[UNK]", "火星")
    assert has_warning(r, "Sample 1", "[UNK]")


def test_answer_longer_than_the_importance_window(engine, monkeypatch):
    long = " ".join(["planet"] * 600)
    r = run_forced(engine, monkeypatch, long, [long, "Mars", long], max_new_tokens=512)
    check_result(r)
    assert len(r.greedy.tokens) == 512 and r.greedy.finish_reason == "length"
    assert has_warning(r, "Greedy answer", "512-token window")
    scored = [p for p in r.greedy.phrases if p.tokens]
    assert scored and sum(p.weight for p in scored) == pytest.approx(1.0)
    assert sum(len(p.tokens) for p in r.greedy.phrases) == 512  # the tail joined a phrase


def test_longest_question_with_a_long_answer(engine, monkeypatch):
    question = ("Why " * 300)[: MAX_QUESTION_CHARS - 1] + "?"
    long = " ".join(["planet"] * 300)  # one LLM token per word
    monkeypatch.setattr(engine.models.llm, "generate_rows", forced(engine.models.llm, long, long))
    r = engine.analyze(question, engine.settings.replace(max_new_tokens=300))
    check_result(r, clean_question(question))
    assert has_warning(r, "512-token window")


def test_all_samples_identical(engine, monkeypatch):
    monkeypatch.setattr(engine.models.nli, "judge", self_entailing)
    r = run_forced(engine, monkeypatch, "Mars", "Mars is red")
    check_result(r)
    assert r.cluster_ids == [0, 0, 0]
    assert len({a.text for a in r.samples}) == 1
    # one cluster holding every sample: SE = -logsumexp(scores) = entropy - log B
    scores = [s.scores.mars for s in r.samples]
    assert r.uncertainty.semantic_entropy.mars == pytest.approx(-np.log(np.sum(np.exp(scores))))


def test_all_samples_different(engine, monkeypatch):
    monkeypatch.setattr(engine.models.nli, "judge", self_entailing)
    r = run_forced(engine, monkeypatch, "Mars", ["Mars", "Venus is hot", "the Pacific Ocean"])
    check_result(r)
    assert [a.text for a in r.samples] == ["Mars", "Venus is hot", "the Pacific Ocean"]
    assert r.cluster_ids == [0, 1, 2]
    assert all(r.nli.labels[i][j] == "contradiction" for i in range(3) for j in range(3) if i != j)
    assert r.methods["eigv"]["value"] == pytest.approx(3.0)  # three meanings, none alike
    # one sample per cluster: SE = -(1/3) sum of the scores = the entropy
    for kind in ("length_normalized", "mars"):
        scores = [getattr(a.scores, kind) for a in r.samples]
        se = getattr(r.uncertainty.semantic_entropy, kind)
        assert se == pytest.approx(-np.mean(scores))
        assert se == pytest.approx(getattr(r.uncertainty.entropy, kind))


def test_nli_pairs_longer_than_its_window_are_reported(engine, monkeypatch):
    planets, mars = " ".join(["planet"] * 300), " ".join(["Mars"] * 300)
    r = run_forced(engine, monkeypatch, "Mars", [planets, mars, "Mars"], max_new_tokens=300)
    check_result(r)
    (note,) = [w for w in r.warnings if "NLI model reads at most 512 tokens" in w]
    # the 9 ordered pairs of 3 texts (each against itself too): all but those with "Mars"
    assert "4 of 9 comparisons (samples 1 and 1; 1 and 2; 2 and 1; 2 and 2)" in note
    short = run_forced(engine, monkeypatch, "Mars", ["Mars", "Venus", "red"])
    assert not [w for w in short.warnings if "NLI model" in w and not w.startswith("Toy model")]


def test_answers_with_replacement_characters_and_markup(engine, monkeypatch):
    odd = ["\ufffd\ufffd", "a\ufffd [SEP] b", "[UNK] [CLS] <|im_start|>"]
    r = run_forced(engine, monkeypatch, "\ufffd", odd)
    check_result(r)
    assert [a.text for a in r.samples] == odd


def test_answers_with_invisible_and_rtl_characters(engine, monkeypatch):
    odd = ["Mars\u200b is\u200d red", "\u202eمرحبا\u202c שלום", "\u200b\u200c\u2060"]
    r = run_forced(engine, monkeypatch, "Mars\u00ad\u200e", odd, max_new_tokens=64)
    check_result(r)
    assert [a.text for a in r.samples] == odd


def test_nli_input_with_unknown_characters_is_reported(engine, monkeypatch):
    """Byte-level tokenizers (deberta's, the tiny model's) never emit [UNK]; WordPiece NLI
    models do. Here the first byte of "☃" stands in for the unknown token."""
    tok = engine.models.nli.tokenizer
    real_unk = tok.unk_token
    tok.unk_token = tok.convert_ids_to_tokens(tok("☃")["input_ids"][1])
    try:
        r = run_forced(engine, monkeypatch, "Mars", ["火星 ☃", "Mars", "red"])
        plain = run_forced(engine, monkeypatch, "Mars", ["Mars", "Venus", "red"])
    finally:
        tok.unk_token = real_unk
    check_result(r)
    (note,) = [w for w in r.warnings if "NLI model does not know some characters" in w]
    # the 9 ordered pairs of 3 texts: the 5 that hold the first one (itself too)
    assert "5 of 9 comparisons" in note and "samples 1 and 1; 1 and 2; 1 and 3" in note
    assert not [w for w in plain.warnings if "NLI model" in w and not w.startswith("Toy model")]
