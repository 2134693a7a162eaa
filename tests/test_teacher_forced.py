"""The teacher-forced pass (answers given as text, scored by the in-process LLM): the same
log-probs as the pass it replaced, read at the answers' own positions only, answers batched by
length, token ids checked against the vocabulary before the model sees them, and the work cap
counted in the LLM's tokens (the main answer and the prompt included)."""

from __future__ import annotations

import functools
import math
import shutil

import pytest
import torch
from numeric_checks import float32_order

from mars_demo.answers import Answer, AnswerSet, WorkCap
from mars_demo.devtools.bench.reference import teacher_forced_logprobs
from mars_demo.engine import Engine
from mars_demo.errors import AnswerSetError, OptionError
from mars_demo.models import forced
from mars_demo.models.llm import LLM
from mars_demo.models.prompts import answer_ids
from mars_demo.models.registry import load_llm

QUESTION = "Which planet is known as the Red Planet?"
TEXTS = ["Mars", "It is Mars, the red planet of our solar system.", "M", "Jupiter is big",
         "Mars " * 40, "The fourth planet from the Sun, Mars."]


@pytest.fixture(scope="module")
def llm(tiny_models) -> LLM:
    return load_llm(str(tiny_models["llm"]))


def padded_pass(llm: LLM, prompt_ids: list[int], encoded: list[list[int]]) -> list[tuple]:
    """The pass this one replaced: every answer after the prompt in one batch, right-padded to
    the longest, the logits of every position, log-softmax over the vocabulary; per answer its
    log-probs and each position's entropy and KL from uniform."""
    rows = [list(prompt_ids) + ids for ids in encoded]
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), llm.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        input_ids[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1
    with torch.inference_mode():
        logits = llm.model(input_ids=input_ids, attention_mask=mask).logits.float()
    start = len(prompt_ids)
    out = []
    for i, ids in enumerate(encoded):
        logp = torch.log_softmax(logits[i, start - 1:start - 1 + len(ids)], -1)
        chosen = logp.gather(1, torch.tensor(ids).unsqueeze(1)).squeeze(1)
        entropy = -(logp.exp() * logp).sum(1)
        kl = -logp.mean(1) - math.log(logp.shape[1])
        out.append((chosen.tolist(), entropy.tolist(), kl.tolist()))
    return out


@pytest.mark.parametrize("preset", ["paper", "chat"])
def test_the_pass_gives_the_log_probs_of_the_pass_it_replaced(llm, preset, monkeypatch):
    """With batches of a few rows (small budgets), so that several batches, one-token answers
    and padding inside a batch are all exercised."""
    monkeypatch.setattr(forced, "BATCH_TOKENS", 400)
    monkeypatch.setattr(forced, "LOGIT_POSITIONS", 16)  # the long answer in a few steps
    prompt = llm.build_prompt(QUESTION, preset)
    answers = [Answer.text_only(t) for t in TEXTS]
    encoded = answer_ids(llm.tokenizer, prompt, answers)
    assert min(map(len, encoded)) == 1 and max(map(len, encoded)) > 40
    scored = llm.teacher_forced(prompt, answers)
    old = padded_pass(llm, prompt.token_ids, encoded)
    for answer, ids, (before, entropy, kl) in zip(scored, encoded, old):
        assert answer.token_ids == ids
        assert answer.logprobs == float32_order(before)
        assert answer.token_stats["entropy"] == float32_order(entropy)
        assert answer.token_stats["kl_uniform"] == float32_order(kl)
        assert answer.logprobs == float32_order(teacher_forced_logprobs(llm, prompt.token_ids, ids))


def test_logits_are_computed_at_the_answers_positions_only_and_short_answers_are_not_padded(
        llm, monkeypatch):
    """The model's head sees the prompt's last position once and each answer's positions (but
    its last), never the prompt's other positions, and at most LOGIT_POSITIONS of them in one
    pass (a longer answer is read in steps); a batch of short answers is as wide as its own
    longest answer, not as the longest answer of all."""
    monkeypatch.setattr(forced, "LOGIT_POSITIONS", 32)
    heads, widths = [], []
    head = llm.model.get_output_embeddings()
    forward = llm.model.forward

    def record_head(module, args):
        heads.append(args[0].shape[0] * args[0].shape[1])

    @functools.wraps(forward)  # the same signature: logits_to_keep is still offered
    def record_width(*args, **kwargs):
        widths.append(kwargs["input_ids"].shape[1])
        return forward(*args, **kwargs)

    hook = head.register_forward_pre_hook(record_head)
    monkeypatch.setattr(llm.model, "forward", record_width)
    try:
        prompt = llm.build_prompt(QUESTION, "paper")
        answers = [Answer.text_only(t) for t in ["Mars is red", "It is Mars"] * 3
                   + ["Mars " * 60]]
        encoded = answer_ids(llm.tokenizer, prompt, answers)
        llm.teacher_forced(prompt, answers)
    finally:
        hook.remove()
    answer_positions = sum(len(ids) - 1 for ids in encoded)
    assert widths[0] == len(prompt.token_ids)  # the prompt, read once
    assert sum(heads) == 1 + answer_positions  # its last position, then the answers'
    assert max(heads) <= 32
    longest = max(map(len, encoded)) - 1
    assert longest > 32 and sum(widths[2:]) == longest  # the long answer, in steps
    assert widths[1] == max(len(ids) for ids in encoded[:6]) - 1  # the short ones' batch


def test_the_batches_keep_within_their_budgets():
    lengths = [3, 300, 40, 1, 1, 90, 7, 7, 7, 250]
    out = forced.batches(lengths, prompt=100, tokens=1000, positions=300)
    assert sorted(i for batch in out for i in batch) == list(range(len(lengths)))
    for batch in out:
        longest = max(lengths[i] for i in batch)
        assert len(batch) == 1 or (len(batch) * (100 + longest) <= 1000
                                   and len(batch) * longest <= 300)
        assert [lengths[i] for i in batch] == sorted(lengths[i] for i in batch)


# --- token ids ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wide_llm(tiny_models, tmp_path_factory) -> LLM:
    """The tiny LLM with 24 embedding rows beyond its tokenizer's 1,000 tokens (as Qwen's
    151,936 rows hold 151,665 tokens)."""
    folder = tmp_path_factory.mktemp("wide-llm")
    shutil.copytree(tiny_models["llm"], folder, dirs_exist_ok=True)
    llm = LLM.from_pretrained(str(folder), "wide")
    llm.model.resize_token_embeddings(len(llm.tokenizer) + 24)
    return llm


@pytest.mark.parametrize(("bad", "shown"), [([5, 999999, 7], "id 999999 (position 2)"),
                                            ([1010], "id 1010 (position 1)"),
                                            ([2**40], f"id {2**40} (position 1)")])
def test_prompt_ids_outside_the_vocabulary_are_refused_before_the_model_reads_them(
        wide_llm, bad, shown, monkeypatch):
    calls = []
    monkeypatch.setattr(wide_llm.model, "forward", lambda *a, **k: calls.append(1))
    assert wide_llm.model.get_input_embeddings().num_embeddings == 1024  # 1010 fits it
    prompt = wide_llm.build_prompt(QUESTION, "paper")
    with pytest.raises(AnswerSetError) as refused:
        wide_llm.teacher_forced(prompt.__class__(prompt.text, bad, "paper", []),
                                [Answer.text_only("Mars")])
    assert shown in str(refused.value) and "ids 0 to 999" in str(refused.value)
    assert calls == []


def test_negative_prompt_ids_are_refused_when_read():
    with pytest.raises(AnswerSetError, match=r"id -3 \(position 2\) is negative"):
        AnswerSet.from_dict({"question": QUESTION, "greedy": "Mars", "samples": ["Mars"],
                             "prompt_token_ids": [1, -3]})


# --- the work cap, in tokens ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(tiny_settings) -> Engine:
    e = Engine(tiny_settings.replace(samples=3, max_new_tokens=8))
    e.load()
    return e


def test_the_cap_counts_the_main_answer_in_tokens(engine):
    """Two short samples and a long main answer: refused by the tokens of the main answer,
    saying which limit and by how much; the same answers within the cap are scored."""
    llm = engine.models.llm
    long_answer = " ".join(["Mars is the red planet."] * 12)
    prompt = llm.build_prompt(QUESTION, None)  # the prompt the engine builds
    tokens = len(answer_ids(llm.tokenizer, prompt, [Answer.text_only(long_answer)])[0])
    answers = {"question": QUESTION, "greedy": long_answer, "samples": ["Mars", "Mars"]}
    cap = WorkCap(sample_tokens=2 * tokens - 1, prompt_tokens=2048)
    with pytest.raises(OptionError) as refused:
        engine.score(answers, cap=cap)
    message = str(refused.value)
    assert f"2 x {tokens} = {2 * tokens} tokens" in message
    assert f"at most {2 * tokens - 1}" in message and "1 over" in message
    result = engine.score(answers, cap=WorkCap(sample_tokens=2 * tokens, prompt_tokens=2048))
    assert len(result.greedy.tokens) == tokens


def test_the_cap_counts_the_prompt_ids(engine):
    answers = {"question": QUESTION, "greedy": "Mars", "samples": ["Mars"],
               "prompt_token_ids": [5] * 300}
    with pytest.raises(OptionError, match=r"300 tokens of the LLM.*at most 256 \(44 over\)"):
        engine.score(answers, cap=WorkCap(sample_tokens=640, prompt_tokens=256))
    assert engine.score(answers, cap=WorkCap(sample_tokens=640, prompt_tokens=300)).prompt_token_ids
