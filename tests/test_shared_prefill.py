"""The prompt's prefill, made once for the greedy row and the samples
(``llm_options.shared_prompt_cache``): the same answers as a prefill per row, one pass over the
prompt for one row, and the cases where generate keeps its own prefill."""

from __future__ import annotations

import pytest

from mars_demo.devtools.bench.compare import TOLERANCE_BY_DTYPE
from mars_demo.models import llm_options
from mars_demo.models.contract import GenerationRequest, Prompt
from mars_demo.models.registry import load_llm

QUESTION = "Which planet is known as the Red Planet?"
#: the two prefills add the same products in another order (other matrix shapes): float32
#: summation order, the bound the benchmark's float32 comparison uses
FLOAT32 = TOLERANCE_BY_DTYPE["float32"]


@pytest.fixture(scope="module")
def llm(tiny_models):
    return load_llm(str(tiny_models["llm"]))


def passes_over_body(llm):
    """The (rows, tokens) of every pass through the LLM's body, recorded by a hook."""
    seen: list[tuple[int, int]] = []

    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen.append(tuple(ids.shape))

    handle = llm.model.base_model.register_forward_pre_hook(hook, with_kwargs=True)
    return seen, handle


def answer(llm, samples: int, seed: int = 3):
    _, ids, _, _ = llm.build_prompt(QUESTION, "chat")
    request = GenerationRequest(samples=samples, temperature=1.0, top_p=1.0, max_new_tokens=10,
                                seed=seed)
    return ids, llm.generate(Prompt(QUESTION, list(ids), "chat", []), request)


def rows(out):
    return [out.greedy, *out.samples] if out.greedy else list(out.samples)


def test_the_prompt_goes_through_the_model_once_for_all_rows(llm):
    before = llm.prefix_passes
    seen, handle = passes_over_body(llm)
    try:
        ids, out = answer(llm, samples=5)
    finally:
        handle.remove()
    assert llm.prefix_passes == before + 1
    # one row of the prompt but its last token, then the 6 rows' last prompt token, then steps
    assert seen[0] == (1, len(ids) - 1)
    assert seen[1] == (6, 1)
    assert all(shape == (6, 1) for shape in seen[2:])
    assert len(seen) == 1 + max(len(a.token_ids) + (a.end_token is not None) for a in rows(out))


def test_the_same_answers_as_a_prefill_per_row(llm, monkeypatch):
    _, shared = answer(llm, samples=5)
    monkeypatch.setattr(llm_options, "shared_prompt_cache", lambda *args: None)
    before = llm.prefix_passes
    _, own = answer(llm, samples=5)
    assert llm.prefix_passes == before  # the stand-in made generate prefill every row
    for a, b in zip(rows(shared), rows(own), strict=True):
        assert a.token_ids == b.token_ids and a.text == b.text
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) <= FLOAT32
        assert max(abs(x - y) for x, y in zip(a.token_stats["entropy"],
                                              b.token_stats["entropy"])) <= FLOAT32


def test_one_row_and_a_named_cache_keep_generates_own_prefill(llm):
    before = llm.prefix_passes
    answer(llm, samples=0)  # the greedy answer alone: one row, nothing to share
    assert llm.prefix_passes == before
    config = llm.model.generation_config
    was = getattr(config, "cache_implementation", None)
    config.cache_implementation = "static"  # generate makes that cache itself
    try:
        seen, handle = passes_over_body(llm)
        try:
            ids, _ = answer(llm, samples=2)
        finally:
            handle.remove()
    finally:
        config.cache_implementation = was
    assert llm.prefix_passes == before
    assert seen[0] == (3, len(ids))  # every row prefilled by generate, as before


def test_several_questions_left_padded_share_their_prefills(llm, monkeypatch):
    questions = [QUESTION, "Who wrote Hamlet?", "What is the capital of the country of France?"]
    prompts = [Prompt(q, list(llm.build_prompt(q, "chat")[1]), "chat", []) for q in questions]
    assert len({len(p.token_ids) for p in prompts}) > 1  # padding is needed
    request = GenerationRequest(samples=3, temperature=1.0, top_p=1.0, max_new_tokens=8, seed=4)
    seen, handle = passes_over_body(llm)
    try:
        shared = llm.generate_many(prompts, request)
    finally:
        handle.remove()
    width = max(len(p.token_ids) for p in prompts)
    assert seen[0] == (3, width - 1) and seen[1] == (12, 1)
    monkeypatch.setattr(llm_options, "shared_prompt_cache", lambda *args: None)
    own = llm.generate_many(prompts, request)
    for s, o in zip(shared, own, strict=True):
        for a, b in zip(rows(s), rows(o), strict=True):
            assert a.token_ids == b.token_ids
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) <= FLOAT32
