"""Server answers whose tokens come back as ids (vLLM's ``return_tokens_as_token_ids``), decoded
with the served model's tokenizer as in-process; the same payload shapes the real vLLM server
gives in tests/test_vllm.py, here without a server."""

from __future__ import annotations

import pytest

from mars_demo.errors import EndpointError
from mars_demo.models.completions import parse_choice, to_answer, token_ids_of
from mars_demo.models.decoding import build_answer


@pytest.fixture(scope="module")
def tok(tiny_models):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_models["llm"])


def _payload(text: str, ids: list[int], finish: str = "stop") -> dict:
    logprobs = [-0.5 - i for i in range(len(ids))]
    lp = {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": logprobs,
          "text_offset": [0] * len(ids), "top_logprobs": None}
    return {"choices": [{"text": text, "logprobs": lp, "finish_reason": finish}]}


def test_token_ids_are_read_only_when_every_token_is_one():
    assert token_ids_of(["token_id:5", "token_id:12"]) == [5, 12]
    assert token_ids_of(["token_id:5", " Paris"]) is None
    assert token_ids_of([]) is None


def test_special_token_inside_the_answer_is_kept_as_in_process(tok):
    eot, end = tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>"])
    ids = tok(" Mars", add_special_tokens=False)["input_ids"] + [eot] + \
        tok(" is red", add_special_tokens=False)["input_ids"] + [end]
    # the server's own text (skip_special_tokens=false) ends before the end-of-sequence token
    data = _payload(" Mars<|endoftext|> is red", ids)
    gen, _ = to_answer(parse_choice(data, "u", tok), ())
    ref = build_answer(tok, ids, data["choices"][0]["logprobs"]["token_logprobs"], {end}, ())
    assert gen.text == ref.text == "Mars<|endoftext|> is red"
    assert "<|endoftext|>" in gen.token_texts and end not in gen.token_ids
    assert (gen.token_ids, gen.token_texts, gen.spans, gen.logprobs, gen.warnings,
            gen.finish_reason) == (ref.token_ids, ref.token_texts, ref.spans, ref.logprobs,
                                   ref.warnings, ref.finish_reason)


def test_a_stop_string_is_cut_as_in_process(tok):
    ids = tok(" It is Mars. Yes", add_special_tokens=False)["input_ids"]
    data = _payload(" It is Mars", ids)  # the server's text ends before its stop string
    gen, _ = to_answer(parse_choice(data, "u", tok), (".", "\n"))
    ref = build_answer(tok, ids, data["choices"][0]["logprobs"]["token_logprobs"], set(),
                       (".", "\n"))
    assert (gen.text, gen.token_ids, gen.token_texts, gen.spans) == (
        ref.text, ref.token_ids, ref.token_texts, ref.spans)
    assert gen.text == "It is Mars" and gen.finish_reason == "stop"


def test_ids_of_another_tokenizer_are_refused(tok):
    ids = tok(" Mars is red", add_special_tokens=False)["input_ids"]
    with pytest.raises(EndpointError, match="not decode to the server's text"):
        parse_choice(_payload(" Venus is hot", ids), "u", tok)


def test_without_a_tokenizer_ids_are_not_decoded(tok):
    ids = tok(" Mars", add_special_tokens=False)["input_ids"]
    with pytest.raises(EndpointError, match="do not match the answer text"):
        parse_choice(_payload(" Mars", ids), "u")


def test_tokens_a_server_returned_without_text_are_said():
    """llama.cpp's server: a special token (or a byte that forms no character) comes back as an
    empty token the text leaves out; scored, and the answer says so. A character split over
    byte tokens is not such a case."""
    text = " Mars is red"
    data = {"choices": [{"text": text, "finish_reason": "length", "logprobs": {
        "tokens": [" Mars", "", " is", " red"], "token_logprobs": [-1.0, -2.0, -3.0, -4.0],
        "text_offset": [5, 10, 10, 13]}}]}
    gen, _ = to_answer(parse_choice(data, "u"), ())
    assert gen.text == "Mars is red" and gen.token_texts == ["Mars", "", " is", " red"]
    assert gen.logprobs == [-1.0, -2.0, -3.0, -4.0]
    assert any("1 token(s) of this answer without any text" in w for w in gen.warnings)
    split = {"choices": [{"text": " café ok", "finish_reason": "stop", "logprobs": {
        "tokens": [" caf", "", "", " ok"], "token_logprobs": [-1.0, -2.0, -3.0, -4.0],
        "text_offset": [10, 14, 14, 15]}}]}
    gen, _ = to_answer(parse_choice(split, "u"), ())
    assert gen.token_texts == ["caf", "", "é", " ok"] and gen.warnings == []
