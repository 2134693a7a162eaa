"""Hard answers forced through the real engine, and checks that what a user sees is sound.

:func:`forced` stands in for the LLM's one ``generate`` call (``LLM.generate_rows``, the seam
for this): it returns chosen token ids (text encoded with the tiny LLM tokenizer, then the EOS id)
with random logits, so everything after generation (offsets, importance model, alignment, NLI,
scores) runs for real on the tiny models.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from mars_demo.engine import Engine

QUESTION = "Which planet is known as the Red Planet?"
EOS = "<|im_end|>"


def loaded_engine(tiny_settings) -> Engine:
    """An engine of the tiny models with their models loaded (3 samples, 16 new tokens)."""
    e = Engine(tiny_settings.replace(samples=3, max_new_tokens=16))
    e.load()
    return e


def forced(llm, greedy: str | None, samples: list[str | None] | str | None):
    """A stand-in for ``LLM.generate_rows`` returning the given answers' ids (then EOS), in rows
    as the real one returns them: greedy answer first, then the samples.

    ``None`` as an answer means "no EOS within max_new_tokens": the text fills the whole budget.
    """
    tok = llm.tokenizer
    eos = tok.convert_tokens_to_ids(EOS)
    vocab = llm.model.config.vocab_size
    gen = torch.Generator().manual_seed(0)

    def rows_for(texts, max_new_tokens):
        rows = []
        for text in texts:
            ids = tok(text, add_special_tokens=False)["input_ids"][:max_new_tokens]
            if len(ids) < max_new_tokens:
                ids.append(eos)
            rows.append(ids)
        steps = max(len(r) for r in rows)
        return torch.tensor([r + [eos] * (steps - len(r)) for r in rows])

    def generate_rows(prompt_ids, *, n, sample, max_new_tokens, greedy_row=False, **_):
        # one batched call: row 0 is the greedy answer, the rest are samples (greedy_row);
        # the two-call reference asks for the greedy answer, then the samples
        rows = n - 1 if greedy_row else n
        sampled = samples if isinstance(samples, list) else [samples] * rows
        texts = ([greedy] + sampled if greedy_row else sampled) if sample else [greedy]
        assert len(texts) == n
        new_ids = rows_for(texts, max_new_tokens)
        logits = tuple(torch.randn(n, vocab, generator=gen) * 3 for _ in range(new_ids.shape[1]))
        return new_ids, logits

    return generate_rows


def all_numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from all_numbers(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from all_numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


def check_result(result, question: str | None = None) -> dict:
    """Everything a user sees is finite, JSON without NaN, and the weights are distributions."""
    d = result.to_dict()
    json.dumps(d, allow_nan=False)  # raises on NaN / inf
    assert all(math.isfinite(x) for x in all_numbers(d))
    if question is not None:
        assert result.question == question
    for a in [result.greedy] + result.samples:
        L = len(a.tokens)
        assert L == len(a.token_importance) == len(a.mars_weights) >= 1
        assert sum(a.token_importance) == pytest.approx(1.0)
        assert sum(a.mars_weights) == pytest.approx(1.0)
        assert all(x >= 0 for x in a.token_importance)
        assert a.scores.length_normalized <= 0 and a.scores.mars <= 0
        for t in a.tokens:
            assert 0 <= t.start <= t.end <= len(a.text)
        for p in a.phrases:
            assert a.text[p.start : p.end] == p.text
    for w in result.warnings:
        assert isinstance(w, str) and w.strip() and w.rstrip().endswith((".", ")"))
        assert "Traceback" not in w and "nan" not in w.lower().split()
    return d


def run_forced(engine, monkeypatch, greedy, samples, **changes):
    llm = engine.models.llm
    monkeypatch.setattr(llm, "generate_rows", forced(llm, greedy, samples))
    return engine.analyze(QUESTION, engine.settings.replace(**changes) if changes else None)


def has_warning(result, *parts: str) -> bool:
    return any(all(p in w for p in parts) for w in result.warnings)
