"""The LLM adapter: log-probs from generation, exact offsets, stop handling, streaming, 4-bit."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch

from mars_demo.errors import OptionError
from mars_demo.models.contract import GenerationRequest, Prompt
from mars_demo.models.decoding import IncrementalDecoder, TextStreamer, build_answer
from mars_demo.models.llm import LLM
from mars_demo.models.prompts import PAPER_PROMPT, PAPER_STOP_STRINGS
from mars_demo.models.registry import load_llm
from mars_demo.recipes import recipe_of


@pytest.fixture(scope="module")
def llm(tiny_models):
    return load_llm(str(tiny_models["llm"]))


def stops_of(prompt_preset: str) -> tuple[str, ...]:
    """The stop strings of a prompt preset: the paper prompt's "." and newline, chat none."""
    return PAPER_STOP_STRINGS if prompt_preset == "paper" else ()


def request(prompt_preset, *, banned_strings=(), **options) -> GenerationRequest:
    """The request the engine makes for a prompt of ``prompt_preset``: its stop strings
    without the banned ones."""
    stops = tuple(x for x in stops_of(prompt_preset) if x not in banned_strings)
    return GenerationRequest(stop_strings=stops, banned_strings=tuple(banned_strings), **options)


def generate(llm, prompt_ids, *, prompt_preset, on_text=None, **options):
    """(greedy answer, samples) of ``llm.generate`` for ``prompt_ids`` (options: the request's)."""
    out = llm.generate(Prompt("", list(prompt_ids), prompt_preset, []),
                       request(prompt_preset, **options), on_text=on_text)
    return out.greedy, out.samples


def generate_many(llm, prompts_ids, *, prompt_preset, **options):
    """[(greedy answer, samples)] of ``llm.generate_many`` for each of ``prompts_ids``."""
    outs = llm.generate_many([Prompt("", list(p), prompt_preset, []) for p in prompts_ids],
                             request(prompt_preset, **options))
    return [(out.greedy, out.samples) for out in outs]


def teacher_forced_logprobs(llm, prompt_ids, answer_ids):
    ids = torch.tensor([prompt_ids + answer_ids], device=llm.device)
    with torch.inference_mode():
        logits = llm.model(ids).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    start = len(prompt_ids)
    return [float(logp[start - 1 + i, t]) for i, t in enumerate(answer_ids)]


def test_logprobs_equal_a_teacher_forced_pass(llm):
    prompt, prompt_ids, preset, _ = llm.build_prompt("Which planet is known as the Red Planet?", "paper")
    assert preset == "paper"
    greedy, samples = generate(
        llm, prompt_ids, samples=3, temperature=0.9, top_p=1.0, max_new_tokens=10, seed=1,
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
    gen = build_answer(tok, ids, lps, eos_ids=set(), stop_strings=(".", "\n"))
    assert gen.text == "Mars is red"
    assert gen.finish_reason == "stop"
    assert "".join(gen.text[a:b] for a, b in gen.spans) == gen.text
    assert gen.logprobs == lps[: len(gen.token_ids)]
    assert "." not in "".join(tok.decode([t]) for t in gen.token_ids)


def test_build_generation_cuts_at_eos_and_flags_length(llm):
    tok = llm.tokenizer
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    ids = tok(" Paris", add_special_tokens=False)["input_ids"] + [eos, 5, 6]
    gen = build_answer(tok, ids, [-1.0] * len(ids), {eos}, ())
    assert gen.text == "Paris" and gen.finish_reason == "stop" and eos not in gen.token_ids
    long = build_answer(tok, ids[:-3], [-1.0] * (len(ids) - 3), {eos}, ())
    assert long.finish_reason == "length"
    assert any("max-new-tokens" in w for w in long.warnings)


def test_empty_answer_scores_the_stop_token_and_warns(llm):
    tok = llm.tokenizer
    ids = tok(".", add_special_tokens=False)["input_ids"]
    gen = build_answer(tok, ids, [-0.5] * len(ids), set(), (".",))
    assert gen.text == "" and gen.token_ids == ids[:1] and gen.logprobs == [-0.5]
    assert any("empty answer" in w for w in gen.warnings)


def test_greedy_answer_streams(llm):
    _, prompt_ids, _, _ = llm.build_prompt("Who wrote Hamlet?", "chat")
    seen: list[str] = []
    greedy, _ = generate(
        llm, prompt_ids, samples=1, temperature=0.5, top_p=1.0, max_new_tokens=8, seed=0,
        prompt_preset="chat", on_text=seen.append,
    )
    assert len(seen) >= 2
    assert all(b.startswith(a) for a, b in zip(seen, seen[1:]))  # text only grows
    assert seen[-1].startswith(greedy.text)


def test_same_seed_same_samples_other_seed_differs(llm):
    _, ids, _, _ = llm.build_prompt("Who wrote Hamlet?", "chat")
    kw = dict(samples=3, temperature=1.0, top_p=1.0, max_new_tokens=8, prompt_preset="chat")
    a = [g.token_ids for g in generate(llm, ids, seed=7, **kw)[1]]
    b = [g.token_ids for g in generate(llm, ids, seed=7, **kw)[1]]
    c = [g.token_ids for g in generate(llm, ids, seed=8, **kw)[1]]
    assert a == b
    assert a != c


def test_4bit_loading_runs_on_cpu(tiny_models):
    llm4 = load_llm(str(tiny_models["llm"]), load_in_4bit=True)
    assert llm4.quantized
    assert any("4bit" in type(m).__name__ for m in llm4.model.modules())
    _, ids, _, _ = llm4.build_prompt("Who wrote Hamlet?", "chat")
    greedy, samples = generate(
        llm4, ids, samples=2, temperature=0.5, top_p=1.0, max_new_tokens=5, seed=0,
        prompt_preset="chat",
    )
    assert len(samples) == 2
    assert all(lp <= 0 for lp in greedy.logprobs)


# --- one batched generate call: greedy row + samples ---------------------------------------------


@contextlib.contextmanager
def counting(llm):
    """Count ``model.generate`` calls and forward passes of the LLM; ``seen`` notes the forward
    count at each ``on_text`` call made through ``note``."""
    counts = {"generate": 0, "forward": 0}
    original = llm.model.generate

    def generate(*args, **kwargs):
        counts["generate"] += 1
        return original(*args, **kwargs)

    def hook(module, args):
        counts["forward"] += 1

    llm.model.generate = generate
    handle = llm.model.register_forward_pre_hook(hook)
    try:
        yield counts
    finally:
        handle.remove()
        del llm.model.generate


def standalone_greedy(llm, prompt_ids, max_new_tokens, stop_strings=()):
    """A plain ``model.generate(do_sample=False)`` run: (new ids, their log-probs)."""
    x = torch.tensor([prompt_ids], device=llm.device)
    extra = {"stop_strings": list(stop_strings), "tokenizer": llm.tokenizer} if stop_strings else {}
    with torch.inference_mode():
        out = llm.model.generate(
            input_ids=x, attention_mask=torch.ones_like(x), do_sample=False, num_beams=1,
            temperature=None, top_p=None, top_k=None, max_new_tokens=max_new_tokens,
            output_logits=True, return_dict_in_generate=True, pad_token_id=llm.pad_token_id,
            **extra,
        )
    new = out.sequences[:, len(prompt_ids):]
    return new[0].tolist(), LLM.token_logprobs(new, out.logits)[0]


QUESTIONS = ["Which planet is known as the Red Planet?", "Who wrote Hamlet?",
             "What is the capital of France?"]


@pytest.mark.parametrize("preset", ["chat", "paper"])
def test_greedy_row_equals_a_standalone_greedy_run(llm, preset):
    # CPU, float32: the same token ids, and log-probs equal to float rounding (the batch of 6
    # and the batch of 1 add up in another order). On a GPU in bf16 a near-tie may flip.
    assert next(llm.model.parameters()).dtype == torch.float32
    for question in QUESTIONS:
        _, ids, _, _ = llm.build_prompt(question, preset)
        greedy, samples = generate(
            llm, ids, samples=5, temperature=1.0, top_p=1.0, max_new_tokens=16, seed=3,
            prompt_preset=preset,
        )
        ref_ids, ref_lps = standalone_greedy(llm, ids, 16, stops_of(preset))
        n = len(greedy.token_ids)
        assert greedy.token_ids == ref_ids[:n]
        assert greedy.logprobs == pytest.approx(ref_lps[:n], abs=1e-5)
        # the samples are samples (temperature 1 over a random model), not the greedy answer
        assert any(s.token_ids != greedy.token_ids for s in samples)


def test_one_generate_call_and_per_row_ends(llm):
    _, ids, _, _ = llm.build_prompt(QUESTIONS[0], "paper")
    seen: list[tuple[str, int]] = []
    with counting(llm) as counts:
        def note(text):
            seen.append((text, counts["forward"]))

        greedy, samples = generate(
            llm, ids, samples=5, temperature=1.0, top_p=1.0, max_new_tokens=24, seed=0,
            prompt_preset="paper", on_text=note,
        )
    assert counts["generate"] == 1  # greedy answer and samples in one batched call
    # this greedy answer ends at a stop string after a few tokens while samples run to the limit
    assert greedy.finish_reason == "stop" and len(greedy.token_ids) < 10
    assert any(s.finish_reason == "length" for s in samples)
    assert counts["forward"] == 24
    # the final greedy text was reported at the step that ended its row, not at the end
    final = [i for i, (text, _) in enumerate(seen) if text == greedy.text]
    assert final and seen[final[0]][1] <= len(greedy.token_ids) + 1 < counts["forward"]
    assert seen[-1][0] == greedy.text
    assert all(b.startswith(a) for (a, _), (b, _) in zip(seen, seen[1:]))  # text only grows


def test_a_stopped_row_is_padded_and_the_others_go_on(llm):
    _, ids, _, _ = llm.build_prompt(QUESTIONS[0], "paper")
    new_ids, logits = llm.generate_rows(
        ids, n=4, sample=True, greedy_row=True, temperature=1.0, top_p=1.0, max_new_tokens=24,
        stop_strings=(".", "\n"),
    )
    assert new_ids.shape == (4, 24) and len(logits) == 24
    text = llm.tokenizer.decode(new_ids[0].tolist())
    row0 = new_ids[0].tolist()
    stop_at = next(i for i in range(len(row0))
                   if any(s in llm.tokenizer.decode(row0[: i + 1]) for s in (".", "\n")))
    assert stop_at < 23, text
    assert set(row0[stop_at + 1:]) == {llm.pad_token_id}  # padding after its stop
    assert any(llm.pad_token_id not in r.tolist()[stop_at + 1:] for r in new_ids[1:])


def test_same_seed_same_answers_in_one_call(llm):
    _, ids, _, _ = llm.build_prompt("Who wrote Hamlet?", "chat")
    kw = dict(samples=4, temperature=1.0, top_p=0.9, max_new_tokens=8, prompt_preset="chat")
    a = generate(llm, ids, seed=5, **kw)
    b = generate(llm, ids, seed=5, **kw)
    c = generate(llm, ids, seed=6, **kw)
    assert [g.token_ids for g in [a[0], *a[1]]] == [g.token_ids for g in [b[0], *b[1]]]
    assert a[0].token_ids == c[0].token_ids  # greedy: seed-free
    assert [g.token_ids for g in a[1]] != [g.token_ids for g in c[1]]


def test_two_call_reference_gives_the_same_greedy_answer(llm):
    _, ids, _, _ = llm.build_prompt(QUESTIONS[1], "chat")
    kw = dict(samples=3, temperature=0.7, top_p=1.0, max_new_tokens=10, seed=0,
              prompt_preset="chat")
    prompt, req = Prompt("", ids, "chat", []), request(**kw)
    with counting(llm) as counts:  # the greedy answer alone, then the samples alone
        g2 = llm.generate(prompt, dataclasses.replace(req, samples=0)).greedy
        s2 = llm.generate(prompt, dataclasses.replace(req, greedy=False)).samples
    assert counts["generate"] == 2 and len(s2) == 3
    g1, _ = generate(llm, ids, **kw)
    assert g1.token_ids == g2.token_ids
    assert g1.logprobs == pytest.approx(g2.logprobs, abs=1e-5)


def test_streamer_follows_row_0_only_and_ends_with_it(llm):
    tok = llm.tokenizer
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    words = tok(" Mars is red", add_special_tokens=False)["input_ids"]
    other = tok(" Venus", add_special_tokens=False)["input_ids"][0]
    seen: list[str] = []
    streamer = TextStreamer(tok, seen.append, eos_ids={eos})
    streamer.put(torch.tensor([[1, 2, 3]] * 3))  # the prompt, one row per answer
    for t in words + [eos, eos, eos]:
        streamer.put(torch.tensor([t, other, other]))
    streamer.end()
    assert seen[-1] == "Mars is red" and seen.count("Mars is red") == 2  # grown, then final
    assert "Venus" not in "".join(seen)
    # a stop string ends it as build_answer does, the stop cut off (or kept)
    for keep, want in ((False, "Mars is red"), (True, "Mars is red.")):
        seen = []
        streamer = TextStreamer(tok, seen.append, eos_ids={eos}, stop_strings=(".",),
                                 keep_stop=keep)
        streamer.put(torch.tensor([[1]]))
        ids = tok(" Mars is red. It is", add_special_tokens=False)["input_ids"]
        for t in ids:
            streamer.put(torch.tensor([t]))
        streamer.end()
        assert seen[-1] == want
        assert seen[-1] == build_answer(tok, ids, [-1.0] * len(ids), {eos}, (".",), keep).text


# --- the paper-code recipe's generation knobs ----------------------------------------------------


def test_paper_code_prompt_ends_with_a_space(llm):
    prompt, ids, preset, _ = llm.build_prompt("What is the capital city of Japan?", "paper",
                                              recipe=recipe_of("paper-code"))
    assert prompt == PAPER_PROMPT.format(question="What is the capital city of Japan") + " "
    assert prompt.endswith("Answer: ") and llm.tokenizer.decode(ids) == prompt
    default, _, _, _ = llm.build_prompt("What is the capital city of Japan?", "paper")
    assert default.endswith("Answer:")
    chat, _, _, _ = llm.build_prompt("Who?", "chat", recipe=recipe_of("paper-code"))
    assert chat == llm.build_prompt("Who?", "chat")[0]
    with pytest.raises(OptionError, match="recipe"):
        llm.build_prompt("Who?", "paper", recipe=recipe_of("paper"))


def test_top_k_reaches_the_sampler(llm):
    _, ids, _, _ = llm.build_prompt(QUESTIONS[2], "chat")
    kw = dict(samples=4, temperature=1.0, top_p=1.0, max_new_tokens=8, seed=0,
              prompt_preset="chat")
    greedy, samples = generate(llm, ids, top_k=1, **kw)  # top-1 sampling = greedy
    assert all(s.token_ids == greedy.token_ids for s in samples)
    greedy, samples = generate(llm, ids, **kw)  # default: top-k off
    assert any(s.token_ids != greedy.token_ids for s in samples)


def test_keep_stop_keeps_and_scores_the_stop_token(llm):
    tok = llm.tokenizer
    ids = tok(" Mars is red. It is", add_special_tokens=False)["input_ids"]
    lps = [-0.1 * (i + 1) for i in range(len(ids))]
    cut = build_answer(tok, ids, lps, eos_ids=set(), stop_strings=(".", "\n"))
    kept = build_answer(tok, ids, lps, eos_ids=set(), stop_strings=(".", "\n"),
                            keep_stop=True)
    assert cut.text == "Mars is red" and kept.text == "Mars is red."
    assert kept.token_ids == ids[: len(cut.token_ids) + 1]
    assert kept.logprobs == lps[: len(kept.token_ids)]
    assert kept.token_texts[-1].endswith(".") and kept.finish_reason == "stop"
    assert "".join(kept.text[a:b] for a, b in kept.spans) == kept.text
    # a token holding more than the stop: its text is clipped right after the stop
    dot_quote = tok('."', add_special_tokens=False)["input_ids"]
    ids2 = tok(" Mars is red", add_special_tokens=False)["input_ids"] + dot_quote
    g = build_answer(tok, ids2, [-1.0] * len(ids2), set(), (".",), keep_stop=True)
    assert g.text == "Mars is red." and g.token_ids == ids2[: len(ids2) - len(dot_quote) + 1]

    # in generation: the same tokens, the kept answers one stop token longer
    _, pids, _, _ = llm.build_prompt(QUESTIONS[0], "paper")
    kw = dict(samples=12, temperature=1.0, top_p=1.0, max_new_tokens=24, seed=0,
              prompt_preset="paper")
    plain = generate(llm, pids, **kw)
    keep = generate(llm, pids, keep_stop=True, **kw)
    ended = 0
    for a, b in zip([plain[0], *plain[1]], [keep[0], *keep[1]]):
        if a.finish_reason == "stop" and "." in b.text:
            ended += 1
            assert b.text.endswith(".") and b.text[:-1].strip() == a.text
            assert b.token_ids[: len(a.token_ids)] == a.token_ids
            assert len(b.logprobs) == len(b.token_ids) >= len(a.token_ids)
    assert ended >= 1


def test_banned_strings_never_appear_and_are_no_stop_strings(llm):
    tok = llm.tokenizer
    banned = llm.banned_token_ids(("\n", ":"))
    texts = tok.batch_decode([[i] for i in range(len(tok))])
    assert banned == [i for i, t in enumerate(texts)
                      if ("\n" in t or ":" in t) and i not in llm.eos_ids]
    assert tok("\n", add_special_tokens=False)["input_ids"][0] in banned
    assert tok(":", add_special_tokens=False)["input_ids"][0] in banned

    _, ids, _, _ = llm.build_prompt(QUESTIONS[2], "paper")
    kw = dict(n=8, sample=True, greedy_row=True, temperature=1.0, top_p=1.0,
              max_new_tokens=32, stop_strings=())
    from transformers import set_seed

    set_seed(0)
    free, _ = llm.generate_rows(ids, **kw)
    assert any("\n" in t or ":" in t for t in tok.batch_decode(free))  # it would happen
    set_seed(0)
    held, _ = llm.generate_rows(ids, banned_ids=banned, **kw)
    assert not any("\n" in t or ":" in t for t in tok.batch_decode(held))

    # in generate: newline is no stop string any more, only "."
    greedy, samples = generate(
        llm, ids, samples=8, temperature=1.0, top_p=1.0, max_new_tokens=32, seed=0,
        prompt_preset="paper", banned_strings=("\n", ":"), keep_stop=True, top_k=50,
    )
    for g in [greedy, *samples]:
        assert "\n" not in g.text and ":" not in g.text
        assert g.finish_reason == "length" or g.text.endswith(".") or not g.text


@pytest.mark.parametrize("preset", ["chat", "paper"])
def test_generate_many_gives_each_question_its_standalone_greedy_answer(llm, preset):
    # CPU float32: prompts of different lengths (left padding) in one generate call; each
    # question's greedy answer is the one it gets alone, with the same log-probs
    questions = QUESTIONS + ["Is it?", "In which year did the first person walk on the Moon?"]
    prompts = [llm.build_prompt(q, preset)[1] for q in questions]
    assert len({len(p) for p in prompts}) > 1  # padding really happens
    kw = dict(samples=3, temperature=1.0, top_p=1.0, max_new_tokens=12, prompt_preset=preset)
    with counting(llm) as counts:
        many = generate_many(llm, prompts, seed=4, **kw)
    assert counts["generate"] == 1 and len(many) == len(questions)
    for ids, (greedy, samples) in zip(prompts, many):
        alone, _ = generate(llm, ids, seed=4, **kw)
        assert greedy.token_ids == alone.token_ids and greedy.text == alone.text
        assert greedy.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        assert len(samples) == 3
        for s in samples:  # every sample's log-probs are its own, left padding or not
            assert s.logprobs == pytest.approx(
                teacher_forced_logprobs(llm, ids, s.token_ids), abs=1e-4)
    # same seed, same batch: same answers; the samples are samples, not the greedy answer
    again = generate_many(llm, prompts, seed=4, **kw)
    assert [[g.token_ids for g in [a, *s]] for a, s in many] == \
        [[g.token_ids for g in [a, *s]] for a, s in again]
    assert any(s.token_ids != g.token_ids for g, ss in many for s in ss)
