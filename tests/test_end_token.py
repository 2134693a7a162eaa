"""The end-of-sequence token on record: an answer that ended on it stores its log-prob, entropy,
KL from uniform and (for CCP) its alternatives, in-process and from a server's answer; the
token-level methods leave it out by default and count it with ``end_token="include"``
(lm-polygraph's convention), and a saved analysis re-scores either way without a model."""

from __future__ import annotations

import json
import math

import pytest
import torch
from forced_answers import EOS, QUESTION, forced, loaded_engine

from mars_demo.core import token_level
from mars_demo.methods import compute_methods
from mars_demo.models.completions import parse_choice, to_answer
from mars_demo.result import AnalysisResult

TOKEN_LEVEL = ("msp", "mean_token_entropy", "self_certainty", "answer_length", "ccp")


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return loaded_engine(tiny_settings)


@pytest.fixture(scope="module")
def ended(engine):
    """An analysis whose greedy answer ended on the end token (forced ids, random logits, the
    logits kept), and those logits."""
    llm = engine.models.llm
    long = " ".join(["the red planet Mars"] * 8)  # past the 16-token limit: no end token
    made = forced(llm, "It is Mars", ["Mars", "Venus", long])
    seen = {}

    def generate_rows(*args, **kwargs):
        seen["ids"], seen["logits"] = made(*args, **kwargs)
        return seen["ids"], seen["logits"]

    llm.generate_rows, before = generate_rows, llm.generate_rows
    try:
        result = engine.analyze(QUESTION, engine.settings.replace(methods=",".join(TOKEN_LEVEL)))
    finally:
        llm.generate_rows = before
    return result, seen


def test_the_end_token_is_stored_with_its_statistics(ended, engine):
    result, seen = ended
    tok = engine.models.llm.tokenizer
    g = result.greedy
    n = len(g.tokens)
    end = g.end_token
    assert end is not None and end.id == tok.convert_tokens_to_ids(EOS) and end.text == EOS
    assert end.start == end.end == len(g.text)  # not part of the text, no phrase
    logp = torch.log_softmax(seen["logits"][n][0].double(), -1).numpy()
    assert int(seen["ids"][0, n]) == end.id
    assert end.logprob == pytest.approx(logp[end.id], abs=1e-5)
    assert end.entropy == pytest.approx(token_level.entropy_of(logp), abs=1e-6)
    assert end.kl_uniform == pytest.approx(token_level.kl_from_uniform(logp), abs=1e-4)
    assert end.alternatives[0][0] == EOS and len(end.alternatives) == 10  # CCP was asked
    # a sample ended on it too; the one that ran to the token limit did not
    assert result.samples[0].end_token is not None and result.samples[2].end_token is None
    # the scores leave it out: the answer's tokens alone
    assert g.scores.length_normalized == pytest.approx(
        sum(t.logprob for t in g.tokens) / n, abs=1e-12)
    data = result.to_dict()
    assert data["greedy"]["end_token"]["logprob"] == end.logprob
    assert "end_token" not in data["samples"][2]  # none: left out of the JSON
    again = AnalysisResult.from_dict(json.loads(json.dumps(data)))
    assert again.greedy.end_token == end
    assert again.answer_set().greedy.end_token["logprob"] == end.logprob


def test_the_ccp_stage_judged_the_end_tokens_alternatives_both_ways(ended):
    result, _ = ended
    entry = result.method_inputs["ccp"]
    words = entry["end_words"]
    assert words[0] == "im_end"  # "<|im_end|>" stripped of punctuation, as the authors strip
    assert len(entry["end_labels"]) == len(entry["end_backward_labels"]) == len(words)


def test_exclude_is_the_default_and_include_counts_the_end_token(ended, engine):
    result, _ = ended
    g = result.greedy
    end, n = g.end_token, len(g.tokens)
    assert result.settings["end_token"] == "exclude"
    lp = [t.logprob for t in g.tokens]
    h = [t.entropy for t in g.tokens]
    kl = [t.kl_uniform for t in g.tokens]
    assert result.methods["msp"]["value"] == pytest.approx(-sum(lp), abs=1e-12)
    data = result.to_dict()
    inc = compute_methods(data, TOKEN_LEVEL, end_token="include")
    assert inc["msp"]["value"] == pytest.approx(-sum(lp) - end.logprob, abs=1e-12)
    assert inc["mean_token_entropy"]["length_normalized"] == pytest.approx(
        (sum(h) + end.entropy) / (n + 1), abs=1e-12)
    # MARS weights over L + 1 tokens: the end token belongs to no phrase (importance 0)
    u = g.token_importance
    weights = [1 / (2 * (n + 1)) + x / 2 for x in u] + [1 / (2 * (n + 1))]
    assert sum(weights) == pytest.approx(1.0)
    assert inc["mean_token_entropy"]["mars"] == pytest.approx(
        sum(w * x for w, x in zip(weights, h + [end.entropy])), abs=1e-12)
    assert inc["self_certainty"]["value"] == pytest.approx(-(sum(kl) + end.kl_uniform) / (n + 1),
                                                           abs=1e-12)
    assert inc["answer_length"] == result.methods["answer_length"]  # the answer's own tokens
    assert inc["ccp"]["length_normalized"] != result.methods["ccp"]["length_normalized"]
    # the engine with include gives what re-scoring the saved analysis gives
    again = engine.rescore(result, engine.settings.replace(methods=",".join(TOKEN_LEVEL),
                                                           end_token="include"))
    assert again.settings["end_token"] == "include"
    for m, values in inc.items():
        for k, v in values.items():
            assert again.methods[m][k] == pytest.approx(v, abs=1e-12), (m, k)
    # and the default again from the saved include analysis
    back = compute_methods(again.to_dict(), TOKEN_LEVEL, end_token="exclude")
    for m, values in result.methods.items():
        assert back[m] == pytest.approx(values, abs=1e-12), m


def test_an_analysis_without_an_end_token_scores_the_same_either_way(ended):
    data = ended[0].to_dict()
    del data["greedy"]["end_token"]
    ids = ("msp", "mean_token_entropy", "self_certainty")
    assert compute_methods(data, ids, "include") == compute_methods(data, ids, "exclude")


def test_a_servers_end_token_is_stored_with_its_top_logprob_entropy():
    """A server that returns the end token after the answer's text (vLLM does) gives it on
    record, with the entropy of its top log-probs (a lower bound, as the answer's own)."""
    data = {"choices": [{"text": " Mars", "finish_reason": "stop", "logprobs": {
        "tokens": [" Mars", EOS], "text_offset": [0, 5], "token_logprobs": [-0.1, -0.3],
        "top_logprobs": [{" Mars": -0.1, " Venus": -2.4}, {EOS: -0.3, ".": -1.5}]}}]}
    answer, _ = to_answer(parse_choice(data, "http://x/v1"), [], alternatives=2)
    assert answer.text == "Mars" and answer.logprobs == [-0.1]
    end = answer.end_token
    assert end["text"] == EOS and end["logprob"] == -0.3
    assert end["entropy"] == pytest.approx(token_level.top_k_entropy([-0.3, -1.5])[0])
    assert end["alternatives"] == [[EOS, -0.3], [".", -1.5]]
    # cut at a stop string or at the token limit: no end token
    data["choices"][0]["finish_reason"] = "length"
    assert to_answer(parse_choice(data, "http://x/v1"), [])[0].end_token is None
    assert math.isfinite(end["logprob"])
