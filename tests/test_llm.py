"""The LLM adapter: log-probs from generation, exact offsets, stop handling, streaming, 4-bit."""

from __future__ import annotations

import pytest
import torch

from mars_demo.models.llm import LLM, PAPER_PROMPT, IncrementalDecoder, build_generation


@pytest.fixture(scope="module")
def llm(tiny_models):
    return LLM.load(str(tiny_models["llm"]))


def teacher_forced_logprobs(llm, prompt_ids, answer_ids):
    ids = torch.tensor([prompt_ids + answer_ids])
    with torch.inference_mode():
        logits = llm.model(ids).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    start = len(prompt_ids)
    return [float(logp[start - 1 + i, t]) for i, t in enumerate(answer_ids)]


def test_logprobs_equal_a_teacher_forced_pass(llm):
    prompt, prompt_ids, preset, _ = llm.build_prompt("Which planet is known as the Red Planet?", "paper")
    assert preset == "paper"
    greedy, samples = llm.generate(
        prompt_ids, samples=3, temperature=0.9, top_p=1.0, max_new_tokens=10, seed=1,
        prompt_preset="chat",  # no stop strings: every generated token is kept
    )
    for gen in [greedy] + samples:
        assert len(gen.logprobs) == len(gen.token_ids) > 0
        expected = teacher_forced_logprobs(llm, prompt_ids, gen.token_ids)
        assert gen.logprobs == pytest.approx(expected, abs=1e-4)


def test_paper_prompt_is_the_papers_few_shot_prompt(llm):
    prompt, ids, _, _ = llm.build_prompt("What is the capital city of Japan?", "paper")
    assert prompt == PAPER_PROMPT.format(question="What is the capital city of Japan")
    assert prompt.endswith("Question: What is the capital city of Japan?\nAnswer:")
    assert llm.tokenizer.decode(ids) == prompt


def test_chat_prompt_uses_the_chat_template(llm):
    prompt, ids, preset, warnings = llm.build_prompt("Who wrote Hamlet?", None)
    assert preset == "chat" and not warnings  # the tiny tokenizer has a chat template
    assert "<|im_start|>user\nWho wrote Hamlet?<|im_end|>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_incremental_decoder_pieces_rebuild_the_text(llm):
    text = "Mars is known as the Red Planet. 🚀 Ünïcode naïve résumé"
    ids = llm.tokenizer(text, add_special_tokens=False)["input_ids"]
    dec = IncrementalDecoder(llm.tokenizer)
    pieces = [dec.push(t) for t in ids]
    assert "".join(pieces) + dec.flush() == text
    assert len(pieces) == len(ids)


def test_build_generation_stops_before_the_stop_string(llm):
    tok = llm.tokenizer
    ids = tok(" Mars is red. It is", add_special_tokens=False)["input_ids"]
    lps = [-0.1 * (i + 1) for i in range(len(ids))]
    gen = build_generation(tok, ids, lps, eos_ids=set(), stop_strings=(".", "\n"))
    assert gen.text == "Mars is red"
    assert gen.finish_reason == "stop"
    assert "".join(gen.text[a:b] for a, b in gen.spans) == gen.text
    assert gen.logprobs == lps[: len(gen.token_ids)]
    assert "." not in "".join(tok.decode([t]) for t in gen.token_ids)


def test_build_generation_cuts_at_eos_and_flags_length(llm):
    tok = llm.tokenizer
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    ids = tok(" Paris", add_special_tokens=False)["input_ids"] + [eos, 5, 6]
    gen = build_generation(tok, ids, [-1.0] * len(ids), {eos}, ())
    assert gen.text == "Paris" and gen.finish_reason == "stop" and eos not in gen.token_ids
    long = build_generation(tok, ids[:-3], [-1.0] * (len(ids) - 3), {eos}, ())
    assert long.finish_reason == "length"
    assert any("max-new-tokens" in w for w in long.warnings)


def test_empty_answer_scores_the_stop_token_and_warns(llm):
    tok = llm.tokenizer
    ids = tok(".", add_special_tokens=False)["input_ids"]
    gen = build_generation(tok, ids, [-0.5] * len(ids), set(), (".",))
    assert gen.text == "" and gen.token_ids == ids[:1] and gen.logprobs == [-0.5]
    assert any("empty answer" in w for w in gen.warnings)


def test_greedy_answer_streams(llm):
    _, prompt_ids, _, _ = llm.build_prompt("Who wrote Hamlet?", "chat")
    seen: list[str] = []
    greedy, _ = llm.generate(
        prompt_ids, samples=1, temperature=0.5, top_p=1.0, max_new_tokens=8, seed=0,
        prompt_preset="chat", on_text=seen.append,
    )
    assert len(seen) >= 2
    assert all(b.startswith(a) for a, b in zip(seen, seen[1:]))  # text only grows
    assert seen[-1].startswith(greedy.text)


def test_same_seed_same_samples_other_seed_differs(llm):
    _, ids, _, _ = llm.build_prompt("Who wrote Hamlet?", "chat")
    kw = dict(samples=3, temperature=1.0, top_p=1.0, max_new_tokens=8, prompt_preset="chat")
    a = [g.token_ids for g in llm.generate(ids, seed=7, **kw)[1]]
    b = [g.token_ids for g in llm.generate(ids, seed=7, **kw)[1]]
    c = [g.token_ids for g in llm.generate(ids, seed=8, **kw)[1]]
    assert a == b
    assert a != c


def test_4bit_loading_runs_on_cpu(tiny_models):
    llm4 = LLM.load(str(tiny_models["llm"]), load_in_4bit=True)
    assert llm4.quantized
    assert any("4bit" in type(m).__name__ for m in llm4.model.modules())
    _, ids, _, _ = llm4.build_prompt("Who wrote Hamlet?", "chat")
    greedy, samples = llm4.generate(
        ids, samples=2, temperature=0.5, top_p=1.0, max_new_tokens=5, seed=0, prompt_preset="chat"
    )
    assert len(samples) == 2
    assert all(lp <= 0 for lp in greedy.logprobs)
