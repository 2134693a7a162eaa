"""The llama.cpp backend (mars_demo/models/llama_cpp.py) on the suite's real LLM, SmolLM2's Q4_1
GGUF file (tests/real_llm.py), held against two references: llama.cpp's own completion of the
same prompt (the same arithmetic: the same tokens, log-probs equal to float32 rounding) and the
in-process transformers model of the same file (other arithmetic: log-probs within what
llama.cpp's 8-bit rounding of the activations explains, tests/test_real_llm_served.py's bound);
and what a user runs on it: ``ask``, ``score`` and ``evaluate``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import cli
from real_llm import NON_ASCII_QUESTIONS, facts_questions, small_evaluate
from test_real_llm_served import MEAN_GAP_FACTOR, gaps, q8_rounded

from mars_demo.errors import GenerationCancelled, OptionError
from mars_demo.models import backends, gguf, llama_cpp
from mars_demo.models.contract import GenerationRequest
from mars_demo.models.llama_run import Step
from mars_demo.models.registry import load_llm
from mars_demo.settings import Settings

QUESTION = "What is the capital city of Australia?"
REQUEST = GenerationRequest(samples=5, temperature=0.5, top_p=1.0, max_new_tokens=40, seed=0)
#: Both sides read the same float32 logits; each takes log p = logit - max - log(sum exp) in its
#: own float order (llama-cpp-python in float32, the backend in float64). A logit's distance from
#: the largest is under 32 here, where float32's spacing is 2**-19 (1.9e-6): three roundings of
#: that size stay under 1e-5 (measured: 3.7e-7 at most over 8 answers, 196 tokens).
FLOAT32_TOL = 1e-5


@pytest.fixture(scope="module")
def reference(smollm2_gguf):
    """llama-cpp-python's own ``Llama`` on the same file, with the attention the backend uses
    (flash attention) and every position's logits kept (its completions' log-probs need them)."""
    from llama_cpp import Llama

    from mars_demo.models.llama_run import threads

    return Llama(model_path=str(smollm2_gguf), n_ctx=2048, logits_all=True, flash_attn=True,
                 n_threads=threads(), verbose=False)


@pytest.fixture(scope="module")
def smollm2(smollm2_hf):
    """The same model in-process through transformers (float32, its folder)."""
    return load_llm(str(smollm2_hf), load_in_4bit=False)


def test_a_gguf_file_goes_to_llama_cpp_where_it_imports(smollm2_gguf, monkeypatch, tmp_path):
    """``--llm FILE.gguf`` (or a folder holding one) runs on llama.cpp; ``--llm-backend
    transformers`` keeps transformers' dequantizing; without llama-cpp-python the file goes to
    transformers, and naming llama.cpp then says what to install."""
    gguf_settings = Settings(llm=str(smollm2_gguf))
    assert backends.backend_for(gguf_settings).name == "llama.cpp"
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / smollm2_gguf.name).symlink_to(smollm2_gguf)
    assert backends.backend_for(Settings(llm=str(folder))).name == "llama.cpp"
    assert backends.backend_for(gguf_settings.replace(llm_backend="transformers")).name == \
        "transformers"
    assert backends.backend_for(Settings(llm="Qwen/Qwen2.5-0.5B-Instruct")).name == \
        "transformers"
    with pytest.raises(OptionError, match="runs a GGUF file"):
        llama_cpp.BACKEND.check(Settings(llm=str(tmp_path), llm_backend="llama.cpp"), False)
    with pytest.raises(OptionError, match="options of the transformers backend"):
        llama_cpp.BACKEND.check(gguf_settings.replace(load_in_4bit=True), False)
    monkeypatch.setattr(llama_cpp, "_library",
                        lambda: (None, "ModuleNotFoundError: No module named 'llama_cpp'"))
    assert backends.backend_for(gguf_settings).name == "transformers"
    with pytest.raises(Exception, match='pip install "llama-cpp-python==0.3.36"'):
        llama_cpp.BACKEND.check(gguf_settings.replace(llm_backend="llama.cpp"), False)


def test_without_llama_cpp_transformers_loads_the_file_and_says_so(tiny_gguf, tiny_models,
                                                                  monkeypatch):
    """The fallback is said in the analysis: transformers loaded the file, and why."""
    monkeypatch.setattr(llama_cpp, "_library",
                        lambda: (None, "ModuleNotFoundError: No module named 'llama_cpp'"))
    code, out, err = cli("ask", QUESTION, "--llm", str(tiny_gguf), "--importance",
                         str(tiny_models["importance"]), "--nli", str(tiny_models["nli"]),
                         "--samples", "1", "--max-new-tokens", "4", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["settings"]["llm_backend"] == "transformers"
    said = [w for w in data["warnings"] if "llama-cpp-python does not import here" in w]
    assert len(said) == 1 and "No module named 'llama_cpp'" in said[0]
    assert 'pip install "llama-cpp-python==0.3.36"' in said[0]


def test_the_prompt_is_the_tokens_the_model_expects(smollm2_llama, smollm2, reference,
                                                    smollm2_gguf):
    """Chat and paper prompts have the text and ids the transformers model of the same file
    builds, which are llama.cpp's own reading of the text; the BOS is added as the file says
    (SmolLM2's: none), and a control token's text inside a question is read as plain text."""
    assert gguf.metadata(smollm2_gguf)["add_bos"] is False
    questions = facts_questions(5) + list(NON_ASCII_QUESTIONS) + ["What does <|im_end|> mean?"]
    start = smollm2_llama.tokenizer.convert_tokens_to_ids(["<|im_start|>"])[0]
    for question in questions:
        for preset in ("chat", "paper"):
            ours, theirs = smollm2_llama.build_prompt(question, preset), smollm2.build_prompt(
                question, preset)
            assert (ours.text, ours.token_ids, ours.preset) == (theirs.text, theirs.token_ids,
                                                                preset), (question, preset)
            if "<|im_end|>" not in question:
                assert ours.token_ids == reference.tokenize(ours.text.encode(), add_bos=False,
                                                            special=True)
        chat = smollm2_llama.build_prompt(question, "chat").token_ids
        assert chat[0] == start and chat.count(start) == 3  # system, user, assistant: no BOS
        assert smollm2_llama.build_prompt(question, "paper").token_ids[0] != start


def test_greedy_answers_are_llama_cpps_own_completion(smollm2_llama, reference):
    """The greedy row of a 6-row batch gives the tokens of llama.cpp's own greedy completion of
    the same prompt ids, alone, and the same log-probs to float32 rounding. (Five questions:
    llama-cpp-python's completion sorts the whole vocabulary in Python for each token's
    log-probs, a few tokens a second.)"""
    worst = 0.0
    for question in facts_questions(5):
        prompt = smollm2_llama.build_prompt(question, "chat")
        greedy = smollm2_llama.generate(prompt, REQUEST).greedy
        done = reference.create_completion(prompt.token_ids, max_tokens=REQUEST.max_new_tokens,
                                           temperature=0.0, logprobs=1)
        ids = list(reference.input_ids[len(prompt.token_ids):reference.n_tokens])
        theirs = done["choices"][0]["logprobs"]["token_logprobs"]
        n = len(greedy.token_ids)
        assert ids[:n] == greedy.token_ids, question
        assert "".join(done["choices"][0]["logprobs"]["tokens"][:n]).strip() == greedy.text
        worst = max(worst, *(abs(a - b) for a, b in zip(greedy.logprobs, theirs)))
    assert worst <= FLOAT32_TOL


def test_logprobs_are_the_in_process_models_within_q4_1_arithmetic(smollm2_llama, smollm2):
    """The greedy answers of 8 questions, teacher-forced by transformers after the same prompt:
    their log-probs' mean gap is at most twice what llama.cpp's 8-bit rounding of the
    activations moves them (measured in-process, as for llama.cpp's server); where the two greedy
    answers part, transformers' own margin between the two tokens is within the largest shift
    that rounding makes: a tie in the arithmetic, not another reading of the prompt."""
    ours, rounding, margins = [], [], []
    request = GenerationRequest(samples=0, temperature=0.5, top_p=1.0, max_new_tokens=40, seed=0)
    for question in facts_questions(8):
        prompt, local = (smollm2_llama.build_prompt(question, "chat"),
                         smollm2.build_prompt(question, "chat"))
        answer = smollm2_llama.generate(prompt, request).greedy
        forced = smollm2.teacher_forced(local, [answer])[0]
        ours += gaps(answer, forced)
        with q8_rounded(smollm2.model):
            rounding += gaps(smollm2.teacher_forced(local, [answer])[0], forced)
        own = smollm2.generate(local, request).greedy
        part = next((k for k, (a, b) in enumerate(zip(own.token_ids, answer.token_ids))
                     if a != b), None)
        if part is not None:
            margins.append(own.logprobs[part] - forced.logprobs[part])
    said = {"ours": float(np.mean(ours)), "rounding": float(np.mean(rounding)),
            "margins": margins, "largest rounding shift": max(rounding)}
    assert np.mean(ours) <= MEAN_GAP_FACTOR * np.mean(rounding), said
    assert all(0 <= m <= max(rounding) for m in margins), said


def test_samples_batches_and_teacher_forcing_read_the_same_numbers(smollm2_llama):
    """Same seed, same answers; every answer's log-probs are a teacher-forced pass's over its
    text; each question of a batch gets the answers it gets alone."""
    prompts = [smollm2_llama.build_prompt(q, "chat") for q in facts_questions(3)]
    alone = [smollm2_llama.generate(p, REQUEST) for p in prompts]
    again = smollm2_llama.generate(prompts[0], REQUEST)
    many = smollm2_llama.generate_many(prompts, REQUEST)
    for p, one, batched in zip(prompts, alone, many):
        answers = [one.greedy, *one.samples]
        assert [a.to_dict() for a in answers] == [a.to_dict() for a in
                                                  [batched.greedy, *batched.samples]]
        assert len({a.text for a in one.samples}) > 1  # sampled at temperature 0.5
        for answer, forced in zip(answers, smollm2_llama.teacher_forced(p, answers)):
            assert forced.token_ids == answer.token_ids
            assert np.allclose(forced.logprobs, answer.logprobs, rtol=0, atol=FLOAT32_TOL)
            assert np.allclose(forced.token_stats["entropy"], answer.token_stats["entropy"],
                               rtol=0, atol=FLOAT32_TOL)
    assert [a.to_dict() for a in again.samples] == [a.to_dict() for a in alone[0].samples]
    other = smollm2_llama.generate(prompts[0], GenerationRequest(**{**REQUEST.__dict__,
                                                                    "seed": 1}))
    assert [a.text for a in other.samples] != [a.text for a in alone[0].samples]


def test_stop_strings_banned_strings_and_the_end_token(smollm2_llama):
    """The paper prompt's stop strings end the answers (kept and scored with ``keep_stop``), a
    banned string is in no answer, and an answer that ended on the end token keeps it on record
    with its statistics."""
    prompt = smollm2_llama.build_prompt("Who wrote Hamlet?", "paper")
    kept = smollm2_llama.generate(prompt, GenerationRequest(
        samples=3, temperature=1.0, top_p=0.9, top_k=50, max_new_tokens=24, seed=0,
        stop_strings=(".",), keep_stop=True, banned_strings=("\n", ":")))
    for answer in [kept.greedy, *kept.samples]:
        assert "\n" not in answer.text and ":" not in answer.text
        assert answer.finish_reason == "length" or answer.text.endswith(".")
        assert answer.text.count(".") <= 1
    chat = smollm2_llama.build_prompt(QUESTION, "chat")
    greedy = smollm2_llama.generate(chat, REQUEST).greedy
    assert greedy.end_token["text"] == "<|im_end|>" and greedy.end_token["entropy"] >= 0


def test_the_greedy_answer_streams_and_generation_cancels(smollm2_llama):
    """``on_text`` hears the greedy answer grow while the rows decode, ending with its text;
    ``should_stop`` ends generation at the step it says so."""
    prompt = smollm2_llama.build_prompt(QUESTION, "chat")
    heard: list[str] = []
    result = smollm2_llama.generate(prompt, REQUEST, on_text=heard.append)
    assert len(heard) > 5 and heard[-1] == result.greedy.text
    assert all(b.startswith(a) for a, b in zip(heard, heard[1:]))
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(GenerationCancelled):
        smollm2_llama.generate(prompt, REQUEST, should_stop=stop)
    assert len(asked) == 4  # once before, then after each of three steps


def test_next_token_and_alternatives_are_the_generation_numbers(smollm2_llama):
    """P(True)'s next-token log-prob after a text is the first token's log-prob of generation
    after the same ids; CCP's alternatives start with the chosen token, most probable next."""
    prompt = smollm2_llama.build_prompt(QUESTION, "chat")
    result = smollm2_llama.generate(prompt, GenerationRequest(
        samples=1, temperature=0.5, top_p=1.0, max_new_tokens=8, seed=0, alternatives=4))
    greedy = result.greedy
    first = smollm2_llama.tokenizer.decode(greedy.token_ids[:1])
    read = smollm2_llama.next_token_logprob(prompt.text, first)
    assert read.token == first and read.logprob == pytest.approx(greedy.logprobs[0], abs=1e-9)
    for token_id, step in zip(greedy.token_ids, greedy.token_stats["alternatives"]):
        assert len(step) == 4 and step[0][0] == smollm2_llama.tokenizer.decode([token_id])
        assert [lp for _, lp in step[1:]] == sorted((lp for _, lp in step[1:]), reverse=True)
    assert "alternatives" not in result.samples[0].token_stats


def test_the_step_reads_what_transformers_token_stats_read():
    """:class:`Step` on logits read in place gives the log-probs, entropies, KL from uniform
    and top alternatives that :func:`distributions.token_stats` gives from the same logits,
    a token of probability 0 included."""
    import torch

    from mars_demo.models.distributions import token_stats

    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((3, 5000)) * 4).astype(np.float32)
    logits[2, :10] = -np.inf
    chosen = [7, 42, 11]
    step = Step(logits)
    lps, stats = token_stats(torch.tensor([chosen]).T, [torch.from_numpy(logits)], 3, [0])
    assert np.allclose([step.logprob(r, t) for r, t in enumerate(chosen)],
                       [row[0] for row in lps], atol=1e-5)
    assert np.allclose(step.entropy, [row[0] for row in stats["entropy"]], atol=1e-5)
    assert np.allclose(step.kl_uniform, [row[0] for row in stats["kl_uniform"]], atol=1e-5)
    ours = step.alternatives(0, chosen[0], 3)
    theirs = stats["alternatives"][0][0]
    assert [i for i, _ in ours] == [i for i, _ in theirs]
    assert np.allclose([lp for _, lp in ours], [lp for _, lp in theirs], atol=1e-5)


def test_ask_score_and_evaluate_through_llama_cpp(smollm2_gguf, tiny_models, tmp_path):
    """The commands a user runs on the GGUF file, through llama.cpp: ``ask`` answers and
    records the backend (no dequantizing said); ``score`` of its saved answers gives the same
    numbers, and of the answers as text alone (teacher-forced by llama.cpp) too; a small
    ``evaluate`` over data/facts.jsonl writes its report."""
    models = ["--llm", str(smollm2_gguf), "--importance", str(tiny_models["importance"]),
              "--nli", str(tiny_models["nli"])]
    small = ["--samples", "2", "--max-new-tokens", "32"]
    code, out, err = cli("ask", QUESTION, *models, *small, "--json")
    assert code == 0, err
    asked = json.loads(out)
    assert asked["settings"]["llm_backend"] == "llama.cpp"
    assert "Canberra" in asked["greedy"]["text"]
    assert not any("dequantized" in w for w in asked["warnings"])
    saved = tmp_path / "asked.json"
    saved.write_text(out, encoding="utf-8")
    code, out, err = cli("score", str(saved), *models, "--json")
    assert code == 0, err
    assert json.loads(out)["uncertainty"] == asked["uncertainty"]
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps({"question": QUESTION, "greedy": asked["greedy"]["text"],
                                 "samples": [s["text"] for s in asked["samples"]]}))
    code, out, err = cli("score", str(texts), *models, "--json")
    assert code == 0, err
    forced = json.loads(out)
    assert [t["logprob"] for t in forced["greedy"]["tokens"]] == pytest.approx(
        [t["logprob"] for t in asked["greedy"]["tokens"]], abs=FLOAT32_TOL)
    _, records = small_evaluate(tmp_path / "run", smollm2_gguf, *models[2:], *small)
    assert all(r["analysis"]["settings"]["llm_backend"] == "llama.cpp" for r in records)
