"""The real LLM served by llama.cpp (``python -m llama_cpp.server`` on SmolLM2's Q4_1 GGUF file)
held against the same model in-process: the server reads the prompt the in-process LLM reads,
token for token, whatever BOS rule the local tokenizer has, or the analysis says how the two
differ; and its log-probs of the same answers differ only as its Q4_1 arithmetic explains (the
rounding of its activations, measured in-process), while a prompt read otherwise does not.
"""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
from cli_helpers import cli
from endpoint_servers import API_KEY, API_KEY_ENV
from real_llm import facts_questions

from mars_demo.models.contract import GenerationRequest, Prompt
from mars_demo.models.endpoint import EndpointLLM
from mars_demo.models.prompts import chat_messages
from mars_demo.models.registry import load_llm

#: llama.cpp multiplies the Q4_1 weight blocks with the activations rounded to 8 bits, block by
#: block of 32 values (its Q8_1 blocks: q = round(x / d), d = max|x| / 127 stored as float16);
#: in-process, transformers multiplies the same weights, dequantized, with the float32
#: activations as they are. That rounding is noise on every layer's input, which the network
#: carries to a token's log-prob: :func:`q8_rounded` measures it, the in-process model with
#: every linear layer's input rounded as llama.cpp rounds it. Over the greedy answers of the
#: first 8 questions of data/facts.jsonl (192 tokens) it moves the log-probs by 0.036 nats on
#: average, and the server's differ from the float32 ones by 0.037: the same noise, drawn
#: twice. A single token can carry it far (0.32 at most for the rounding, 0.22 to 0.48 for the
#: server depending on the machine), so the largest gap is no bound; the mean is steady, and it
#: is what a wrong prompt moves: with its <|im_start|> dropped (as the server used to read the
#: prompt) the mean gap is 0.108. The bound is twice the rounding's own mean gap: the two means
#: differ by their sampling error alone (0.0015 here, with a standard error of 0.003 from the
#: spread of the 8 answers' own means, 0.003 to 0.054), so twice is more than ten of those
#: above, and the dropped BOS's mean is three times the rounding's.
MEAN_GAP_FACTOR = 2.0
QUESTION = "What is the capital city of Australia?"


@pytest.fixture(scope="module")
def served(smollm2_gguf, tmp_path_factory):
    """The URL (".../v1") of llama.cpp's server on the GGUF file; it wants
    ``endpoint_servers.API_KEY`` (the ``llama_api_key`` fixture sets it for the client)."""
    from endpoint_servers import llama_server

    with llama_server(smollm2_gguf, tmp_path_factory.mktemp("smollm2-server")) as url:
        yield url


@pytest.fixture(scope="module")
def smollm2(smollm2_hf):
    return load_llm(str(smollm2_hf), load_in_4bit=False)


def server_ids(url: str, text: str) -> list[int]:
    """llama-cpp-python's own tokenization of ``text`` (as its completions read a prompt)."""
    import httpx

    r = httpx.post(url[: -len("/v1")] + "/extras/tokenize", json={"input": text}, timeout=60,
                   headers={"Authorization": f"Bearer {API_KEY}"})
    r.raise_for_status()
    return r.json()["tokens"]


def test_the_server_reads_the_in_process_prompt(served, smollm2, smollm2_hf, llama_api_key):
    """The GGUF's tokenizer as the project reads it: chat and paper prompts go to the server as
    the in-process LLM builds them, and the server reads the same ids."""
    llm = EndpointLLM.load(served, api_key_env=API_KEY_ENV, tokenizer=str(smollm2_hf))
    for question in facts_questions(3):
        for preset in ("chat", "paper"):
            local, sent = smollm2.build_prompt(question, preset), llm.build_prompt(question,
                                                                                   preset)
            assert (sent.text, sent.token_ids, sent.warnings) == (local.text, local.token_ids,
                                                                  [])
            assert server_ids(served, sent.text) == local.token_ids


def test_a_tokenizer_that_adds_a_bos_the_server_does_not_is_matched(served, smollm2_hf,
                                                                   llama_api_key):
    """transformers' own conversion of the GGUF tokenizer adds a BOS (<|im_start|>) in front of
    every text, which the GGUF (and so the server) does not: the chat prompt, whose template
    writes <|im_start|> itself, is sent whole (it was sent without it, and the server read one
    token less), and the paper prompt, which that tokenizer reads with a BOS, is sent with the
    BOS written in front, so the server reads exactly what the in-process LLM with that
    tokenizer reads."""
    llm = EndpointLLM.load(served, api_key_env=API_KEY_ENV, tokenizer=str(smollm2_hf))
    tok = llm.tokenizer
    tok.add_bos_token = True  # as AutoTokenizer.from_pretrained(folder, gguf_file=...) says
    start = tok.convert_tokens_to_ids("<|im_start|>")
    chat = llm.build_prompt(QUESTION, "chat")
    in_process = list(tok.apply_chat_template(chat_messages(QUESTION),
                                              add_generation_prompt=True))
    assert chat.token_ids == in_process == server_ids(served, chat.text)
    assert chat.text.startswith("<|im_start|>system") and chat.warnings == []
    paper = llm.build_prompt(QUESTION, "paper")
    assert paper.token_ids[0] == start and paper.token_ids == tok(paper.text.removeprefix(
        "<|im_start|>"))["input_ids"] == server_ids(served, paper.text)
    assert paper.text.startswith("<|im_start|>Answer these questions:")


@contextlib.contextmanager
def q8_rounded(model):
    """``model`` with each linear layer's input rounded as llama.cpp rounds the activations it
    multiplies with quantized weights: blocks of 32 values along the last axis, each value to
    round(x / d) * d with d = max|x| / 127 of its block, d as float16 (Q8_1's scale; the LM
    head's Q8_0 rounds alike)."""
    import torch

    def rounded(module, args):
        x = args[0]
        blocks = x.reshape(-1, 32)
        top = blocks.abs().amax(-1, keepdim=True)
        scale = (top / 127).half().float()
        inverse = torch.where(top > 0, 127 / top, torch.zeros_like(top))
        return ((torch.round(blocks * inverse) * scale).reshape(x.shape), *args[1:])

    hooks = [m.register_forward_pre_hook(rounded) for m in model.modules()
             if isinstance(m, torch.nn.Linear)]
    try:
        yield model
    finally:
        for hook in hooks:
            hook.remove()


def gaps(answer, forced) -> list[float]:
    """|log-prob difference| of each token of two scorings of the same answer."""
    assert forced.token_texts == answer.token_texts
    return [abs(a - b) for a, b in zip(forced.logprobs, answer.logprobs)]


def test_server_logprobs_are_in_process_ones_within_q4_1_arithmetic(served, smollm2, smollm2_hf,
                                                                   llama_api_key):
    """The server's greedy answers to 8 questions, teacher-forced in-process after the same
    prompt ids: the same tokens, log-probs within what llama.cpp's Q8_1 rounding of the
    activations explains (their mean gap at most twice that rounding's own, measured here). The
    same bound refuses the answers of the prompt the server used to read, its BOS dropped."""
    llm = EndpointLLM.load(served, api_key_env=API_KEY_ENV, tokenizer=str(smollm2_hf))
    request = GenerationRequest(samples=0, temperature=0.5, top_p=1.0, max_new_tokens=40,
                                seed=0)
    server, rounding, dropped = [], [], []
    for question in facts_questions(8):
        prompt, local = llm.build_prompt(question, "chat"), smollm2.build_prompt(question, "chat")
        answer = llm.generate(prompt, request).greedy
        forced = smollm2.teacher_forced(local, [answer])[0]
        server += gaps(answer, forced)
        with q8_rounded(smollm2.model):
            rounding += gaps(smollm2.teacher_forced(local, [answer])[0], forced)
        assert prompt.text.startswith("<|im_start|>")
        wrong = Prompt(prompt.text.removeprefix("<|im_start|>"), prompt.token_ids[1:],
                       prompt.preset, [])
        answer = llm.generate(wrong, request).greedy
        dropped += gaps(answer, smollm2.teacher_forced(local, [answer])[0])
    bound = MEAN_GAP_FACTOR * np.mean(rounding)
    said = {name: (round(float(np.mean(g)), 4), round(float(np.percentile(g, 95)), 4))
            for name, g in (("server", server), ("rounding", rounding), ("dropped", dropped))}
    assert np.mean(server) <= bound, said
    assert np.mean(dropped) > bound, said


def test_ask_through_llama_cpp_records_what_the_server_read(served, smollm2, smollm2_hf,
                                                            tiny_models, llama_api_key):
    """``ask --llm-endpoint``: the recorded prompt ids are the in-process ones; with the
    tokenizer of another model the analysis says how the server's reading differs, and records
    the server's."""
    flags = ["--llm-endpoint", served, "--llm-api-key-env", API_KEY_ENV, "--importance",
             str(tiny_models["importance"]), "--nli", str(tiny_models["nli"]), "--samples",
             "1", "--max-new-tokens", "16", "--json"]
    code, out, err = cli("ask", QUESTION, "--llm", str(smollm2_hf), *flags)
    assert code == 0, err
    data = json.loads(out)
    assert data["prompt_token_ids"] == smollm2.build_prompt(QUESTION, None).token_ids
    assert "Canberra" in data["greedy"]["text"]
    assert not any("reads this prompt as" in w for w in data["warnings"])
    code, out, err = cli("ask", QUESTION, "--llm", str(tiny_models["llm"]), *flags)
    assert code == 0, err
    data = json.loads(out)
    said = [w for w in data["warnings"] if "reads this prompt as" in w]
    assert len(said) == 1 and str(tiny_models["llm"]) in said[0]
    assert data["prompt_token_ids"] == server_ids(served, data["prompt"])
