"""Properties on arbitrary input (hypothesis): one answer's scoring on any Unicode, token partition
and log-probs; the incremental decoder and answer building on any text or ids, also with a
SentencePiece-style tokenizer; the whole analysis on arbitrary answers.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from forced_answers import EOS, check_result, forced, loaded_engine
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mars_demo.answers import Answer
from mars_demo.core.alignment import phrase_spans_from_starts, word_spans
from mars_demo.engine.stages.alignment import score_answer
from mars_demo.errors import OptionError
from mars_demo.models.decoding import IncrementalDecoder, build_answer
from mars_demo.models.importance import PhraseScoring
from mars_demo.settings import Settings, clean_question

FIXTURES = [HealthCheck.function_scoped_fixture]  # module/session fixtures only, in fact


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return loaded_engine(tiny_settings)


@st.composite
def scored_answers(draw):
    """An Answer over arbitrary unicode with an arbitrary token partition and log-probs,
    and phrases that are word runs, arbitrary spans, or none."""
    text = draw(st.text(max_size=40)).strip()
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    spans = list(zip(bounds, bounds[1:])) or [(0, 0)]
    logprobs = draw(st.lists(st.floats(-1e4, 0.0), min_size=len(spans), max_size=len(spans)))
    words = word_spans(text)
    kind = draw(st.sampled_from(["words", "arbitrary", "none"]))
    if kind == "words" and words:
        starts = sorted({0} | draw(st.sets(st.integers(0, len(words) - 1))))
        phrases = phrase_spans_from_starts(words, starts)
    elif kind == "arbitrary" and text:
        points = sorted(draw(st.sets(st.integers(0, len(text)), min_size=2, max_size=8)))
        phrases = list(zip(points[::2], points[1::2]))
    else:
        phrases = []
    scores = draw(st.lists(st.floats(0.0, 1.0), min_size=len(phrases), max_size=len(phrases)))
    gen = Answer(
        text=text, token_ids=list(range(len(spans))), token_texts=[text[a:b] for a, b in spans],
        spans=spans, logprobs=logprobs, finish_reason="stop",
    )
    s = Settings(
        llm="x",
        importance_method=draw(st.sampled_from(["model", "token", "bem"])),
        distribution=draw(st.sampled_from(["equal", "max", "min"])),
        normalization=draw(st.sampled_from(["sum", "softmax"])),
        softmax_temperature=draw(st.sampled_from([1e-4, 0.1, 10.0])),
    )
    return gen, PhraseScoring(phrases, scores), s


@settings(max_examples=400, deadline=None)
@given(scored_answers())
def test_score_answer_on_arbitrary_unicode_partitions_and_logprobs(case):
    gen, ph, s = case
    answer, notes = score_answer(gen, ph, s)
    json.dumps(dataclasses.asdict(answer), allow_nan=False)
    assert sum(answer.token_importance) == pytest.approx(1.0)
    assert sum(answer.mars_weights) == pytest.approx(1.0)
    lps = np.array(gen.logprobs)
    assert answer.scores.length_normalized == pytest.approx(lps.mean())
    assert answer.scores.mars == pytest.approx(float(np.dot(answer.mars_weights, lps)))
    tol = 1e-9 * (1 + abs(min(lps)))
    assert min(lps) - tol <= answer.scores.mars <= max(lps) + tol
    assert len(answer.phrase_of_token) == len(gen.token_ids)
    if ph.spans:
        assert all(0 <= k < len(ph.spans) for k in answer.phrase_of_token)
        aligned = [p for p in answer.phrases if p.tokens]
        assert sum(p.weight for p in aligned) == pytest.approx(1.0)
    else:
        L = len(gen.token_ids)
        assert answer.token_importance == pytest.approx([1 / L] * L)
    assert all(isinstance(n, str) and n.endswith(".") for n in notes)


@pytest.fixture(scope="module")
def llm_tokenizer(engine):
    return engine.models.llm.tokenizer


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURES)
@given(text=st.text(max_size=60), stops=st.booleans())
def test_decoder_and_build_generation_on_arbitrary_unicode(llm_tokenizer, text, stops):
    tok = llm_tokenizer
    assume(not any(t in text for t in tok.all_special_tokens))
    eos = tok.convert_tokens_to_ids(EOS)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    decoder = IncrementalDecoder(tok)
    pieces = [decoder.push(t) for t in ids]
    assert "".join(pieces) + decoder.flush() == text
    stop_strings = (".", "\n") if stops else ()
    lps = [-0.1 * (i + 1) for i in range(len(ids) + 1)]
    g = build_answer(tok, ids + [eos], lps, {eos}, stop_strings)
    check_generation(g)
    cut = min([text.find(s_) for s_ in stop_strings if s_ in text], default=len(text))
    assert g.text == text[:cut].strip()
    assert g.finish_reason == "stop"
    assert eos not in g.token_ids or (g.text == "" and g.token_ids == [eos])  # empty: EOS scored
    assert g.logprobs == lps[: len(g.token_ids)]


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURES)
@given(
    ids=st.lists(st.integers(0, 999), max_size=30), stops=st.booleans(), eos_at=st.integers(0, 40)
)
def test_decoder_and_build_generation_on_arbitrary_ids(llm_tokenizer, ids, stops, eos_at):
    tok = llm_tokenizer
    ids = [i % len(tok) for i in ids]
    eos = tok.convert_tokens_to_ids(EOS)
    decoder = IncrementalDecoder(tok)
    pieces = [decoder.push(t) for t in ids]
    full = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    assert "".join(pieces) + decoder.flush() == full  # invalid UTF-8 included
    gen_ids = ids[:eos_at] + [eos] + ids[eos_at:]
    g = build_answer(tok, gen_ids, [-1.0] * len(gen_ids), {eos}, (".", "\n") if stops else ())
    check_generation(g)


@pytest.fixture(scope="module")
def sentencepiece_style_tokenizer():
    """A Llama-2 / Mistral style tokenizer (metaspace, byte fallback, leading space stripped on
    decode), trained on the tiny corpus: the paper's models decode this way."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import PreTrainedTokenizerFast

    from mars_demo.devtools.tiny import corpus

    tk = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tk.normalizer = normalizers.Sequence(
        [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]
    )
    tk.decoder = decoders.Sequence([
        decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(" ", 1, 0),
    ])
    special = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tk.train_from_iterator(corpus(), trainers.BpeTrainer(vocab_size=800, special_tokens=special))
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        model_input_names=["input_ids", "attention_mask"],
    )


@settings(max_examples=200, deadline=None, suppress_health_check=FIXTURES)
@given(text=st.text(max_size=40))
def test_decoder_with_a_sentencepiece_style_tokenizer(sentencepiece_style_tokenizer, text):
    tok = sentencepiece_style_tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"]
    full = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    decoder = IncrementalDecoder(tok)
    pieces = [decoder.push(t) for t in ids]
    assert "".join(pieces) + decoder.flush() == full  # leading spaces of later tokens kept
    eos = tok.eos_token_id
    g = build_answer(tok, ids + [eos], [-1.0] * (len(ids) + 1), {eos}, (".", "\n"))
    check_generation(g)
    assert g.text == full.split(".")[0].split("\n")[0].strip()


def check_generation(g):
    assert len(g.token_ids) == len(g.spans) == len(g.logprobs) == len(g.token_texts) >= 1
    assert g.text == g.text.strip()
    end = 0
    for a, b in g.spans:
        assert end <= a <= b <= len(g.text)
        end = b
    assert "".join(g.text[a:b] for a, b in g.spans) == g.text
    assert g.finish_reason in ("stop", "length")
    assert all(w.endswith(".") for w in g.warnings)


@settings(
    max_examples=25, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    question=st.text(min_size=1, max_size=30),
    answers=st.lists(st.text(max_size=25), min_size=3, max_size=3),
    method=st.sampled_from(["model", "token"]),
)
def test_whole_analysis_on_arbitrary_unicode_answers(engine, question, answers, method):
    try:
        q = clean_question(question)
    except OptionError:
        return
    llm = engine.models.llm
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(llm, "generate_rows", forced(llm, answers[0], answers[1:] + [answers[0]]))
        r = engine.analyze(question, engine.settings.replace(importance_method=method))
    check_result(r, q)
    if any(t in a for a in answers for t in llm.tokenizer.all_special_tokens):
        return  # such text is generated as a control token (end of answer)
    texts = [a.text for a in [r.greedy] + r.samples]
    expected = [a.strip() for a in answers[:1] + answers[1:] + [answers[0]]]
    truncated = [a.finish_reason == "length" for a in [r.greedy] + r.samples]
    for got, want, cut in zip(texts, expected, truncated):
        assert got == want or (cut and want.startswith(got.rstrip("\ufffd")))
