"""The real LLM of the suite, SmolLM2-135M-Instruct (tests/real_llm.py), in-process: what the
tiny random models cannot show, on a real tokenizer, chat template and answers.

The fast loop checks the loaded folder (``smollm2_hf``, seconds to load) against plain
transformers: the prompt is the chat template's tokens, the greedy answer is ``generate``'s, the
log-probs are a teacher-forced pass's, a rambling answer is cut at max new tokens and says so.
The slow tests load the GGUF file itself with transformers, as ``--llm FILE.gguf --llm-backend
transformers`` does (``smollm2_llm``; llama.cpp's backend, which ``--llm FILE.gguf`` takes where
llama-cpp-python is installed, is tests/test_llama_cpp.py's): the alignment over every token of
real answers in several scripts, ``ask``, ``score`` and ``evaluate`` end to end, and the page
answering a question in a browser.
"""

from __future__ import annotations

import json
import re
import unicodedata

import pytest
from cli_helpers import cli
from real_llm import NON_ASCII_QUESTIONS, facts_questions, small_evaluate
from test_browser import browser, shots  # noqa: F401  (fixtures)

from mars_demo.engine import Engine
from mars_demo.models.contract import GenerationRequest
from mars_demo.models.prompts import chat_messages
from mars_demo.models.registry import load_llm

REQUEST = GenerationRequest(samples=2, temperature=0.5, top_p=1.0, max_new_tokens=40, seed=0)
#: The answers' log-probs come from generation (a batch of 3 rows, the KV cache, one step at a
#: time), the reference from one forward pass over prompt + answer: the same float32 numbers
#: summed in another order through 30 layers. Measured here: at most 8.5e-6 over 129 greedy
#: tokens of 6 questions (1.2e-5 over 40 questions before); 5e-5 leaves 4x headroom for another
#: CPU's kernels and is far below what a wrong token, position or prompt moves (1e-2 to nats).
TEACHER_FORCED_TOL = 5e-5
DEQUANTIZED = "holds Q4_1 weights; transformers dequantized to float32"


@pytest.fixture(scope="module")
def smollm2(smollm2_hf):
    """SmolLM2 from its folder through the registry, float32 on the CPU."""
    return load_llm(str(smollm2_hf), load_in_4bit=False)


@pytest.fixture(scope="module")
def answered(smollm2):
    """(question, prompt, result) of two questions with short answers (cheap for the fast
    loop): the greedy answer and two samples each."""
    out = []
    for question in ("What is the chemical symbol for gold?", "Who wrote the play Hamlet?"):
        prompt = smollm2.build_prompt(question, "chat")
        out.append((question, prompt, smollm2.generate(prompt, REQUEST)))
    return out


def test_the_prompt_is_the_chat_templates_own_tokens(smollm2, answered):
    """The chat prompt's ids are what ``apply_chat_template`` gives, starting with one
    ``<|im_start|>``: the template writes it, and the tokenizer (as the GGUF says) adds none."""
    tok = smollm2.tokenizer
    start = tok.convert_tokens_to_ids("<|im_start|>")
    for question, prompt, _ in answered:
        ids = list(tok.apply_chat_template(chat_messages(question), add_generation_prompt=True))
        assert prompt.token_ids == ids
        assert ids[0] == start != ids[1] and prompt.text.startswith("<|im_start|>system\n")
    paper = smollm2.build_prompt("Who wrote Hamlet?", "paper")
    assert paper.token_ids[0] != start and paper.text.startswith("Answer these questions:")


def test_greedy_answers_are_plain_generate_with_the_chat_template(smollm2, answered):
    """The greedy row of the batched call gives the tokens of a plain greedy ``generate`` over
    the chat template's ids, up to the end token (<|im_end|>, not part of the answer)."""
    import torch

    tok = smollm2.tokenizer
    for question, _, result in answered:
        ids = tok.apply_chat_template(chat_messages(question), add_generation_prompt=True,
                                      return_tensors="pt")
        with torch.inference_mode():
            out = smollm2.model.generate(ids, attention_mask=torch.ones_like(ids),
                                         do_sample=False, max_new_tokens=REQUEST.max_new_tokens,
                                         pad_token_id=smollm2.pad_token_id)
        plain = out[0, ids.shape[1]:].tolist()
        greedy = result.greedy
        n = len(greedy.token_ids)
        assert greedy.token_ids == plain[:n], question
        assert greedy.text == tok.decode(plain[:n]).strip()
        if greedy.finish_reason == "stop":
            assert plain[-1] in smollm2.eos_ids and tok.decode(plain[n:-1]).strip() == ""
        else:
            assert len(plain) == n == REQUEST.max_new_tokens


def test_logprobs_are_a_teacher_forced_pass(smollm2, answered):
    """Every token's log-prob, greedy and sampled (at temperature 0.5), is the model's own at
    temperature 1: a forward pass over prompt + answer gives it."""
    import torch

    worst = 0.0
    for _, prompt, result in answered:
        for answer in [result.greedy, *result.samples]:
            ids = torch.tensor([prompt.token_ids + answer.token_ids])
            with torch.inference_mode():
                logp = smollm2.model(ids).logits[0].float().log_softmax(-1)
            start = len(prompt.token_ids)
            forced = [float(logp[start - 1 + i, t]) for i, t in enumerate(answer.token_ids)]
            worst = max(worst, *(abs(a - b) for a, b in zip(answer.logprobs, forced)))
    assert worst <= TEACHER_FORCED_TOL


def test_a_rambling_answer_is_cut_at_max_new_tokens_and_says_so(smollm2, tiny_settings,
                                                                 smollm2_hf):
    settings = tiny_settings.replace(llm=str(smollm2_hf), load_in_4bit=False, samples=2,
                                     max_new_tokens=8)
    result = Engine(settings).analyze("Tell me the whole history of the Roman Empire.")
    for answer in [result.greedy, *result.samples]:
        assert answer.finish_reason == "length" and len(answer.tokens) == 8
    cut = [w for w in result.warnings if "max-new-tokens limit" in w]
    assert len(cut) == 1 and cut[0].startswith("Greedy answer, Sample 1, Sample 2: ")


def test_a_gguf_file_or_a_folder_holding_one_names_the_llm(smollm2_gguf, tmp_path):
    from mars_demo.errors import ModelLoadError
    from mars_demo.models import gguf
    from mars_demo.models.registry import check_source

    assert check_source(str(smollm2_gguf), "LLM") == str(smollm2_gguf)
    with pytest.raises(ModelLoadError, match="no directory"):
        check_source(str(smollm2_gguf), "importance model")  # the LLM alone comes as GGUF
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / smollm2_gguf.name).symlink_to(smollm2_gguf)
    assert gguf.gguf_file(str(folder)) == folder / smollm2_gguf.name
    (folder / "other.gguf").symlink_to(smollm2_gguf)
    with pytest.raises(ModelLoadError, match="holds 2 GGUF files.*name the one"):
        gguf.gguf_file(str(folder))
    (folder / "config.json").write_text("{}")  # a Hugging Face folder is loaded as one
    assert gguf.gguf_file(str(folder)) is None
    assert gguf.metadata(smollm2_gguf) == {"add_bos": False, "bos": 1, "eos": 2, "pad": 2,
                                           "quantization": "Q4_1"}


# --- slow: the GGUF file as --llm FILE.gguf loads it -----------------------------------------


def words(text: str) -> list[tuple[int, int]]:
    """The spans of the words of ``text`` (runs of letters and digits)."""
    return [m.span() for m in re.finditer(r"\w+", text)]


def check_alignment(answer) -> None:
    """The invariants of one scored answer: its tokens cover its text in order, each span
    holding the token's text; every token is in a phrase; no word is split across phrases."""
    text, tokens = answer.text, answer.tokens
    assert "".join(t.text for t in tokens) == text
    position = 0
    for t in tokens:
        assert t.start == position and text[t.start:t.end] == t.text
        position = t.end
    if not words(text):
        return
    assert len(answer.phrase_of_token) == len(tokens)
    assert all(0 <= k < len(answer.phrases) for k in answer.phrase_of_token), answer.text
    for p in answer.phrases:
        assert text[p.start:p.end] == p.text
    for a, b in words(text):
        holding = {k for k, t in zip(answer.phrase_of_token, tokens) if t.start < b and t.end > a}
        assert len(holding) == 1, (text[a:b], text)


def test_alignment_holds_on_every_token_of_real_answers(smollm2_llm, smollm2_gguf,
                                                        tiny_settings):
    """Eleven questions, five of them in other scripts and accents, six answers each, through
    the engine on the GGUF model: every token of every answer lines up with its text and its
    phrase, and every analysis says the weights were dequantized."""
    tok = smollm2_llm.tokenizer  # as the file says, not as transformers' conversion does:
    assert not tok.add_bos_token and tok.eos_token == "<|im_end|>" == tok.pad_token
    settings = tiny_settings.replace(llm=str(smollm2_gguf), llm_backend="transformers", samples=5,
                                     max_new_tokens=48)
    engine = Engine(settings)
    questions = facts_questions(5) + list(NON_ASCII_QUESTIONS)
    results = engine.score_many(engine.generate_many(questions, settings), settings)
    answers = [a for r in results for a in [r.greedy, *r.samples]]
    assert len(answers) == 66
    for answer in answers:
        check_alignment(answer)
    # the answers hold characters of several bytes (a byte-level token may end inside one)
    assert any(ord(ch) > 0x7F and unicodedata.category(ch).startswith("L")
               for a in answers for ch in a.text)
    assert sum(len(a.tokens) for a in answers) > 1000
    for r in results:
        assert any(DEQUANTIZED in w for w in r.warnings)


def test_ask_score_and_evaluate_end_to_end(smollm2_llm, smollm2_gguf, tiny_models, tmp_path):
    """The commands a user runs, on the GGUF file through transformers (``--llm-backend
    transformers``): ``ask`` answers and says it was dequantized;
    ``score`` of its saved answers gives the same numbers; a small ``evaluate`` over
    data/facts.jsonl writes its report, judged by ``contains``."""
    models = ["--llm", str(smollm2_gguf), "--importance", str(tiny_models["importance"]),
              "--nli", str(tiny_models["nli"])]
    small = ["--samples", "2", "--max-new-tokens", "32", "--llm-backend", "transformers"]
    code, out, err = cli("ask", "What is the capital city of Australia?", *models, *small,
                         "--json")
    assert code == 0, err
    asked = json.loads(out)
    assert "Canberra" in asked["greedy"]["text"]
    assert any(DEQUANTIZED in w for w in asked["warnings"])
    saved = tmp_path / "asked.json"
    saved.write_text(out, encoding="utf-8")
    code, out, err = cli("score", str(saved), *models[2:], "--details")
    assert code == 0, err
    u = asked["uncertainty"]
    for name in ("Confidence", "Entropy", "Semantic entropy"):
        key = name.lower().replace(" ", "_")
        pair = f"{u[key]['length_normalized']:17.4f} {u[key]['mars']:9.4f}"
        assert re.search(rf"^  {name} +{re.escape(pair.strip())}$", out, re.M), (name, out)
    assert out.splitlines()[1].startswith("Answer:") and "Canberra" in out.splitlines()[1]
    lines = out.splitlines()
    verdict_at = next(i for i, line in enumerate(lines) if line.startswith("Verdict: "))
    assert lines[verdict_at - 1] == "" and all(line.startswith(("Question:", "Answer:", " "))
                                               for line in lines[:verdict_at - 1])
    _, records = small_evaluate(tmp_path / "run", smollm2_gguf, *models[2:], *small)
    assert all(any(DEQUANTIZED in w for w in r["analysis"]["warnings"]) for r in records)


def test_the_page_answers_a_question_with_the_real_model(browser, smollm2_hf, tiny_models,
                                                         shots):
    """``app.py --llm`` on the real model (its folder: the page's loading is not what this
    checks), one question asked in Chromium: the real answer on the page, every token shown."""
    from test_browser import ask, open_page
    from ui_helpers import running_app

    with running_app({**tiny_models, "llm": smollm2_hf}) as url:
        page = open_page(browser, url)
        try:
            ask(page, "What is the capital city of Australia?")
            answer = page.locator("#mars-answer .mars-answer-text").first.inner_text()
            assert "Canberra" in answer
            shown = "".join(page.locator("#mars-answer .mars-tok").all_inner_texts())
            assert "".join(shown.split()) == "".join(answer.split())
            page.screenshot(path=str(shots / "real-llm-answer.png"), full_page=True)
        finally:
            page.close()
