"""EndpointLLM against a REAL OpenAI-compatible server: llama.cpp's (llama-cpp-python[server]),
serving the tiny test LLM written to GGUF offline (float32 weights).

Only the error cases that a real server cannot be made to produce on demand (malformed JSON, a
completion without log-probs, a server that hangs, an API-key echo) use a tiny local http.server.
"""

from __future__ import annotations

import http.server
import json
import math
import os
import threading
import time

import pytest
from endpoint_servers import API_KEY, API_KEY_ENV, free_port

from mars_demo.answers import Answer
from mars_demo.errors import EndpointError, GenerationCancelled, ModelLoadError
from mars_demo.models.completions import parse_choice, to_answer
from mars_demo.models.contract import GenerationRequest, Prompt
from mars_demo.models.endpoint import SOURCE_SERVER, EndpointLLM
from mars_demo.models.prompts import PAPER_PROMPT, PAPER_STOP_STRINGS, stop_strings
from mars_demo.models.registry import load_llm
from mars_demo.recipes import recipe_of

QUESTION = "What is the capital of France?"

#: The GGUF holds the transformers weights as float32, llama.cpp computes in float32 on CPU, and the
#: test server keeps its KV cache in float32 too (``--type_k 0 --type_v 0``; llama.cpp's default
#: float16 cache moved these log-probs by up to 3.8e-5). What remains is the order of float32
#: operations (matmul blocking, RMSNorm and softmax reductions): measured max difference 4.8e-7,
#: one float32 step at |log-prob| ~ 7. 2e-5 leaves 40x headroom for other CPUs' SIMD kernels and
#: is still far below what any mistake gives (a wrong token, position or temperature moves
#: log-probs by 1e-2 to several nats).
LOGPROB_TOL = 2e-5


# --------------------------------------------------------------------------------------------
# the real server
# --------------------------------------------------------------------------------------------


@pytest.fixture
def api_key(llama_api_key):
    return llama_api_key


@pytest.fixture
def endpoint(llama_server, tiny_models, api_key):
    return EndpointLLM.load(llama_server, api_key_env=API_KEY_ENV,
                            tokenizer=str(tiny_models["llm"]))


@pytest.fixture(scope="module")
def hf(tiny_models):
    """The same weights in transformers (float32, CPU), through the in-process LLM class."""
    return load_llm(str(tiny_models["llm"]), load_in_4bit=False)


def _post(url: str, body: dict) -> dict:
    import httpx

    r = httpx.post(url + "/completions", json=body, timeout=120,
                   headers={"Authorization": f"Bearer {API_KEY}"})
    r.raise_for_status()
    return r.json()


def _ids_of(hf, tokens: list[str]) -> list[int]:
    """Token ids for the server's token strings, up to the first one that has no unique id
    (an empty string: a lone byte of a multi-byte character or a control token)."""
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    byte_map = bytes_to_unicode()
    vocab = hf.tokenizer.get_vocab()
    ids = []
    for tok in tokens:
        key = "".join(byte_map[b] for b in tok.encode("utf-8"))
        if not tok or key not in vocab:
            break
        ids.append(vocab[key])
    return ids


def _teacher_forced(hf, prompt_ids: list[int], answer_ids: list[int]) -> list[float]:
    import torch

    ids = torch.tensor([prompt_ids + answer_ids])
    with torch.no_grad():
        logp = hf.model(ids).logits[0].float().log_softmax(-1)
    n = len(prompt_ids)
    return [float(logp[n - 1 + i, t]) for i, t in enumerate(answer_ids)]


def _check_spans(gen) -> None:
    assert len(gen.spans) == len(gen.token_texts) == len(gen.logprobs) == len(gen.token_ids) >= 1
    pos = 0
    for (a, b), piece in zip(gen.spans, gen.token_texts):
        assert pos <= a <= b <= len(gen.text) or (a == b == 0 and gen.text == "")
        assert gen.text[a:b] == piece
        pos = b
    # the spans cover the text without gaps: every character belongs to a token
    assert "".join(gen.token_texts) == gen.text


# --------------------------------------------------------------------------------------------
# the GGUF and the real server
# --------------------------------------------------------------------------------------------


def test_gguf_tokenizes_like_transformers(llama_server, hf, api_key):
    """The server's tokenizer (from the GGUF) gives the transformers tokenizer's ids."""
    import httpx

    base = llama_server[: -len("/v1")]
    chat = hf.build_prompt(QUESTION, "chat")[0]
    texts = [PAPER_PROMPT.format(question="Who wrote Hamlet"), chat, " é€ 1969 naïve 😀 end."]
    for text in texts:
        r = httpx.post(base + "/extras/tokenize", json={"input": text}, timeout=60,
                       headers={"Authorization": f"Bearer {api_key}"})
        r.raise_for_status()
        assert r.json()["tokens"] == hf.tokenizer(text)["input_ids"]


def test_server_logprobs_match_transformers_teacher_forced(llama_server, hf):
    """Raw /completions log-probs of the real server = a teacher-forced transformers pass, for
    the greedy answer and for samples at temperature 0.5 (so they are raw, temperature 1)."""
    prompt = PAPER_PROMPT.format(question="What is the capital of France")
    prompt_ids = hf.tokenizer(prompt)["input_ids"]
    diffs: list[float] = []
    runs = [(0.0, 0), (0.5, 1), (0.5, 2), (0.5, 3), (0.5, 6), (0.5, 8), (1.0, 4), (1.0, 5)]
    for temperature, seed in runs:
        data = _post(llama_server, {
            "prompt": prompt, "max_tokens": 16, "temperature": temperature, "top_k": 0,
            "min_p": 0.0, "repeat_penalty": 1.0, "logprobs": 1, "seed": seed,
        })
        lp = data["choices"][0]["logprobs"]
        ids = _ids_of(hf, lp["tokens"])
        ref = _teacher_forced(hf, prompt_ids, ids)
        diffs += [abs(a - b) for a, b in zip(lp["token_logprobs"], ref)]
        if temperature == 0.0:  # greedy: every token is the argmax of the transformers model
            import torch

            full = torch.tensor([prompt_ids + ids])
            with torch.no_grad():
                logits = hf.model(full).logits[0]
            n = len(prompt_ids)
            assert [int(logits[n - 1 + i].argmax()) for i in range(len(ids))] == ids
    assert len(diffs) >= 30, "too few tokens could be compared"
    print(f"max |server - transformers| log-prob difference over {len(diffs)} tokens: "
          f"{max(diffs):.3g}")
    assert max(diffs) <= LOGPROB_TOL


def test_llama_cpp_python_echo_logprobs_are_shifted(llama_server, hf):
    """Why teacher forcing is refused with this server: its echo log-probs are not those of
    the echoed tokens (llama-cpp-python 0.3.36 reads each token's log-prob from the row that
    predicts the next one). If this test fails, the bug is fixed upstream."""
    prompt = PAPER_PROMPT.format(question="What is the capital of France")
    ids = hf.tokenizer(prompt)["input_ids"]
    data = _post(llama_server, {"prompt": prompt, "max_tokens": 1, "temperature": 0.0,
                                "echo": True, "logprobs": 1})
    server = data["choices"][0]["logprobs"]["token_logprobs"][1 : len(ids)]
    ref = _teacher_forced(hf, ids[:1], ids[1:])
    assert max(abs(a - b) for a, b in zip(server, ref)) > 0.01


# --------------------------------------------------------------------------------------------
# EndpointLLM against the real server
# --------------------------------------------------------------------------------------------


def _generated(llm, question=QUESTION, preset="paper", on_text=None, should_stop=None, **kw):
    """The prompt and the :class:`GenerationResult` of ``llm.generate`` as the engine asks
    (``kw``: the request's fields)."""
    prompt = llm.build_prompt(question, preset)
    opts = dict(samples=5, temperature=0.5, top_p=1.0, max_new_tokens=12, seed=7,
                stop_strings=stop_strings(prompt.preset, recipe_of("default")))
    opts.update(kw)
    return prompt, llm.generate(prompt, GenerationRequest(**opts), on_text=on_text,
                                should_stop=should_stop)


def _generate(llm, question=QUESTION, preset="paper", **kw):
    prompt, result = _generated(llm, question, preset, **kw)
    return prompt.text, result.greedy, result.samples, prompt.warnings


def test_load_picks_the_served_model(endpoint, tiny_gguf):
    assert endpoint.model_id == str(tiny_gguf)
    assert endpoint.quantized is False
    assert endpoint.default_prompt() == "chat"  # the tokenizer's chat template is known


def test_greedy_matches_in_process_generation(endpoint, hf):
    """The endpoint's greedy answer = the in-process greedy answer of the same weights: the same
    tokens with the same log-probs (within LOGPROB_TOL), the same text except characters the
    server does not render (lone bytes of multi-byte characters).

    The random tiny model's next-token distribution is nearly uniform, so two tokens can tie to
    float precision and the two engines may break the tie differently: the answers are compared
    up to the first such tie, where both chosen tokens must have the same log-prob."""
    built, result = _generated(endpoint, max_new_tokens=16)
    prompt, greedy = built.text, result.greedy
    assert result.logprob_source == SOURCE_SERVER
    ids = hf.build_prompt(QUESTION, "paper")[1]
    assert prompt == hf.build_prompt(QUESTION, "paper")[0]
    ref = hf.generate(Prompt(prompt, ids, "paper", []), GenerationRequest(
        samples=1, temperature=0.5, top_p=1.0, max_new_tokens=16, seed=7,
        stop_strings=PAPER_STOP_STRINGS)).greedy
    _check_spans(greedy)
    same = 0
    for mine, theirs in zip(greedy.token_texts, ref.token_texts):
        if mine != theirs.replace("\ufffd", ""):
            break
        same += 1
    assert same >= 5, (greedy.token_texts, ref.token_texts)
    n = min(len(greedy.logprobs), len(ref.logprobs), same + 1)  # + the tie, if any
    assert max(abs(a - b) for a, b in zip(greedy.logprobs[:n], ref.logprobs[:n])) <= LOGPROB_TOL
    if same == len(greedy.token_texts) == len(ref.token_texts):
        assert greedy.text == ref.text.replace("\ufffd", "")
        assert greedy.finish_reason == ref.finish_reason


def test_samples_carry_the_servers_raw_logprobs(endpoint, hf, llama_server):
    """Each sample is the server's answer for seed + i, with its log-probs unchanged (and those
    equal transformers' teacher-forced ones), spans consistent with the text."""
    prompt, greedy, samples, _ = _generate(endpoint, samples=4, temperature=0.5, seed=11)
    prompt_ids = hf.tokenizer(prompt)["input_ids"]
    compared = 0
    for i, gen in enumerate(samples):
        _check_spans(gen)
        data = _post(llama_server, endpoint.completion_body(prompt, max_tokens=12, temperature=0.5,
                                                  top_p=1.0, seed=11 + i, stop=[".", "\n"],
                                                  logprobs=1))
        raw = data["choices"][0]["logprobs"]
        assert gen.logprobs == raw["token_logprobs"][: len(gen.logprobs)]
        ids = _ids_of(hf, raw["tokens"])[: len(gen.logprobs)]
        ref = _teacher_forced(hf, prompt_ids, ids)
        assert max((abs(a - b) for a, b in zip(gen.logprobs, ref)), default=0.0) <= LOGPROB_TOL
        compared += len(ids)
    assert compared >= 10
    assert len({g.text for g in samples}) >= 2  # different seeds, different answers


def test_same_seed_same_answers(endpoint):
    _, g1, s1, _ = _generate(endpoint, seed=3, samples=3)
    _, g2, s2, _ = _generate(endpoint, seed=3, samples=3)
    assert [g1.text, *[s.text for s in s1]] == [g2.text, *[s.text for s in s2]]
    assert [g1.logprobs, *[s.logprobs for s in s1]] == [g2.logprobs, *[s.logprobs for s in s2]]


def test_stop_strings_end_answers(endpoint):
    """The paper prompt's stop strings ("." and newline) end answers; the stop is not scored."""
    _, greedy, samples, _ = _generate(endpoint, samples=12, temperature=1.0, max_new_tokens=40,
                                      seed=0)
    stopped = [g for g in [greedy, *samples] if g.finish_reason == "stop"]
    assert stopped, "no answer hit a stop string; pick another seed"
    for gen in [greedy, *samples]:
        _check_spans(gen)
        assert "." not in gen.text and "\n" not in gen.text
        if gen.finish_reason == "length":
            assert any("max-new-tokens" in w for w in gen.warnings)
            assert len(gen.logprobs) == 40
        else:
            assert len(gen.logprobs) < 40


def test_chat_prompt_through_the_local_template(endpoint, hf, llama_server, monkeypatch):
    prompt, greedy, samples, warnings = _generate(endpoint, preset="chat")
    assert prompt == hf.build_prompt(QUESTION, "chat")[0]
    assert warnings == []
    # without a tokenizer, "chat" falls back to the paper prompt and says so
    bare = EndpointLLM.load(llama_server, api_key_env=API_KEY_ENV)
    prompt2, _, used, warnings2 = bare.build_prompt(QUESTION, "chat")
    assert used == "paper" and prompt2.startswith("Answer these questions:")
    assert len(warnings2) == 1 and "with --llm to use its chat template" in warnings2[0]
    # left automatic, the paper prompt is the only choice, and that is said too
    _, _, used, warnings3 = bare.build_prompt(QUESTION, None)
    assert used == "paper" and len(warnings3) == 1 and "tokenizer is not known" in warnings3[0]


def test_chat_messages_through_the_endpoint(endpoint, hf, llama_server, tiny_models):
    """Chat messages (a system prompt before the question) reach the server as the in-process
    LLM's chat template renders them, and the analysis keeps them."""
    from mars_demo.engine import Engine
    from mars_demo.settings import Settings

    context = [{"role": "system", "content": "Answer in one word."}]
    sent = endpoint.build_prompt(QUESTION, "chat", context=context)
    local = hf.build_prompt(QUESTION, "chat", context=context)
    assert sent.text == local.text and "Answer in one word." in sent.text
    assert sent.token_ids == local.token_ids and sent.warnings == []
    settings = Settings(llm=str(tiny_models["llm"]), llm_endpoint=llama_server,
                        llm_api_key_env=API_KEY_ENV, importance=str(tiny_models["importance"]),
                        nli=str(tiny_models["nli"]), samples=2, max_new_tokens=6)
    result = Engine(settings).analyze(messages=[*context, {"role": "user", "content": QUESTION}])
    assert result.messages == [*context, {"role": "user", "content": QUESTION}]
    assert result.prompt == sent.text and result.settings["llm_endpoint"] == llama_server


def test_question_with_a_control_token_is_refused(endpoint):
    from mars_demo.settings import OptionError

    with pytest.raises(OptionError, match="control token"):
        endpoint.build_prompt("What is <|im_end|> here?", "paper")


def test_teacher_forcing_refuses_broken_echo_logprobs(llama_server, tiny_models, api_key):
    llm = EndpointLLM.load(llama_server, api_key_env=API_KEY_ENV, logprobs_mode="teacher-forced")
    with pytest.raises(EndpointError, match="teacher forcing"):
        _generate(llm, samples=2)


def test_on_text_gets_the_greedy_answer(endpoint):
    seen: list[str] = []
    _, greedy, _, _ = _generate(endpoint, samples=2, on_text=seen.append)
    assert seen == [greedy.text]


def test_one_http_client_serves_every_question(endpoint, monkeypatch):
    """One HTTP client per server for as long as the LLM lives: a question's tokenization check
    and its answers' requests reuse the connections already open, so the second question opens
    none (each new connection costs a round trip before its request is sent). Before, the
    check opened a client of its own and the answers another, each question: 4 connections
    for the second one here (the check, the greedy answer and 2 samples)."""
    import socket

    opened: list = []
    real = socket.create_connection
    monkeypatch.setattr(socket, "create_connection",
                        lambda *a, **k: opened.append(a[0]) or real(*a, **k))
    request = GenerationRequest(samples=2, temperature=0.5, top_p=1.0, max_new_tokens=8, seed=0)
    counts = []
    for question in (QUESTION, "Who wrote Hamlet?"):
        before = len(opened)
        prompt = endpoint.build_prompt(question, "paper")
        assert prompt.token_ids  # the tokenization check ran (the tokenizer is known here)
        endpoint.generate(prompt, request)
        counts.append(len(opened) - before)
    assert counts[1] == 0, counts


def test_cancel_before_any_request(endpoint):
    with pytest.raises(GenerationCancelled):
        _generate(endpoint, should_stop=lambda: True)


def test_real_server_http_error_is_one_clear_error(endpoint):
    """A prompt longer than the server's context: the real server answers an HTTP error."""
    with pytest.raises(EndpointError, match=r"answered HTTP \d{3}") as info:
        _generate(endpoint, question="word " * 3000)
    assert API_KEY not in str(info.value)


def test_wrong_or_missing_api_key(llama_server, monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, "sk-wrong-key-123")
    with pytest.raises(ModelLoadError, match="--llm-api-key-env") as info:
        EndpointLLM.load(llama_server, api_key_env=API_KEY_ENV)
    assert "sk-wrong-key-123" not in str(info.value)
    monkeypatch.delenv(API_KEY_ENV)
    with pytest.raises(ModelLoadError, match=API_KEY_ENV):
        EndpointLLM.load(llama_server, api_key_env=API_KEY_ENV)
    with pytest.raises(ModelLoadError, match="HTTP 401"):
        EndpointLLM.load(llama_server)  # no key at all


def test_unknown_model_name(llama_server, api_key, tiny_gguf):
    with pytest.raises(ModelLoadError, match="does not serve 'nope'") as info:
        EndpointLLM.load(llama_server, model="nope", api_key_env=API_KEY_ENV)
    assert str(tiny_gguf) in str(info.value)


# --------------------------------------------------------------------------------------------
# a server that is down, and bad payloads (tiny local http.server)
# --------------------------------------------------------------------------------------------


def test_server_down_at_load_and_at_generate():
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with pytest.raises(ModelLoadError, match="Cannot reach the LLM server"):
        EndpointLLM.load(url)
    llm = EndpointLLM(url, "m")
    with pytest.raises(EndpointError, match="Cannot reach the LLM server"):
        _generate(llm, samples=1)


def test_bad_urls():
    for url in ["", "ftp://x/v1", "localhost:8000"]:
        with pytest.raises(ModelLoadError, match="URL|http"):
            EndpointLLM.load(url)
    assert EndpointLLM("http://h:8000", "m").base_url == "http://h:8000/v1"
    assert EndpointLLM("http://h:8000/v1/", "m").base_url == "http://h:8000/v1"


class _Fake(http.server.BaseHTTPRequestHandler):
    """Answers with ``server.reply(handler)`` -> (status, body bytes); records headers."""

    def do_GET(self):
        self.body = None
        self._answer()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.body = json.loads(self.rfile.read(length) or b"null")
        self.server.bodies.append(self.body)
        self._answer()

    def _answer(self):
        self.server.auth.append(self.headers.get("Authorization"))
        status, body = self.server.reply(self)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that went away (a cancelled or timed-out request) is expected here


@pytest.fixture
def fake():
    """Start a fake server with a reply function; returns (url, server)."""
    servers = []

    def start(reply):
        srv = _QuietServer(("127.0.0.1", 0), _Fake)
        srv.daemon_threads = True
        srv.reply, srv.auth, srv.bodies = reply, [], []
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}/v1", srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def _models(*names):
    data = [{"id": n, "object": "model"} for n in names]
    return json.dumps({"object": "list", "data": data}).encode()


def _completion(text, tokens, logprobs, offsets=None, finish="stop"):
    if offsets is None:
        offsets, pos = [], 100
        for t in tokens:
            offsets.append(pos)
            pos += len(t)
    lp = {"tokens": tokens, "token_logprobs": logprobs, "text_offset": offsets,
          "top_logprobs": [{t: v} for t, v in zip(tokens, logprobs)]}
    return {"choices": [{"index": 0, "text": text, "logprobs": lp, "finish_reason": finish}]}


def _router(completion_reply):
    def reply(handler):
        if handler.command == "GET":
            return 200, _models("fake-model")
        return completion_reply(handler)

    return reply


def test_api_key_is_sent_as_bearer_and_never_shown(fake, monkeypatch):
    secret = "sk-very-secret-4242"
    monkeypatch.setenv("MY_LLM_KEY", secret)

    def echo_auth(handler):  # an error body that quotes the request's header
        message = f"bad auth {handler.headers['Authorization']}"
        return 500, json.dumps({"error": {"message": message}}).encode()

    url, srv = fake(_router(echo_auth))
    llm = EndpointLLM.load(url, api_key_env="MY_LLM_KEY")
    assert llm.model_id == "fake-model"
    with pytest.raises(EndpointError) as info:
        _generate(llm, samples=1)
    assert srv.auth and all(a == f"Bearer {secret}" for a in srv.auth)
    assert secret not in str(info.value) and "***" in str(info.value)
    assert secret not in repr(llm.__dict__)


@pytest.mark.parametrize(
    "status, body, match",
    [
        (200, b"<html>not json</html>", "not JSON"),
        (200, json.dumps({"choices": [{"text": "Paris", "logprobs": None,
                                       "finish_reason": "stop"}]}).encode(), "no token log-probs"),
        (200, json.dumps({"choices": []}).encode(), "without choices"),
        (200, json.dumps(_completion(" Paris", [" Paris"], [None])).encode(), "without a log-prob"),
        (200, json.dumps(_completion(" Paris", [" Lyon"], [-1.0])).encode(), "do not match"),
        (503, json.dumps({"error": {"message": "model is loading"}}).encode(),
         "HTTP 503.*model is loading"),
    ],
)
def test_bad_payloads_give_one_clear_error(fake, status, body, match):
    url, _ = fake(_router(lambda h: (status, body)))
    llm = EndpointLLM.load(url)
    with pytest.raises(EndpointError, match=match):
        _generate(llm, samples=2)


def test_a_server_that_says_it_returns_other_logprobs_is_refused(fake):
    """vLLM's /server_info answer (development mode) with --logprobs-mode processed_logprobs;
    the real server's raw_logprobs is read in tests/test_vllm.py."""
    info = {"vllm_config": {"model_config": {"logprobs_mode": "processed_logprobs"}}}

    def reply(handler):
        if handler.path.startswith("/server_info"):
            return 200, json.dumps(info).encode()
        return 200, _models("fake-model")

    url, _ = fake(reply)
    with pytest.raises(ModelLoadError, match="--logprobs-mode raw_logprobs"):
        EndpointLLM.load(url)
    # re-scoring every answer by teacher forcing does not use the sampled log-probs
    llm = EndpointLLM.load(url, logprobs_mode="teacher-forced")
    assert llm.server_logprobs_mode == "processed_logprobs"


def test_load_errors_from_the_model_list(fake):
    url, _ = fake(lambda h: (200, _models("a", "b")))
    with pytest.raises(ModelLoadError, match="serves 2 models.*--llm-model"):
        EndpointLLM.load(url)
    assert EndpointLLM.load(url, model="b").model_id == "b"
    url2, _ = fake(lambda h: (200, b'{"unexpected": 1}'))
    with pytest.raises(ModelLoadError, match="not an OpenAI model list"):
        EndpointLLM.load(url2)


def test_slow_server_times_out(fake):
    def slow(handler):
        time.sleep(3)
        return 200, _models("m")

    url, _ = fake(slow)
    with pytest.raises(ModelLoadError, match="Timed out after 0.5 s"):
        EndpointLLM.load(url, timeout=0.5)


def test_the_timeout_setting_reaches_the_server_requests(fake):
    from mars_demo.engine import Engine
    from mars_demo.settings import Settings

    def slow(handler):
        time.sleep(2.5)
        return 200, _models("m")

    url, _ = fake(slow)
    engine = Engine(Settings(llm_endpoint=url, llm_timeout=1.0))
    with pytest.raises(ModelLoadError, match=r"Timed out after 1 s .*--llm-timeout"):
        engine.generate("Which planet is known as the Red Planet?")
    with pytest.raises(Exception, match="llm_timeout must be a number from 1 to 3600"):
        Settings(llm_endpoint=url, llm_timeout=0.5)


def test_cancel_while_requests_run(fake):
    release = threading.Event()

    def hang(handler):
        release.wait(30)
        return 200, json.dumps(_completion(" x", [" x"], [-1.0])).encode()

    url, _ = fake(_router(hang))
    llm = EndpointLLM.load(url)
    calls = []

    def should_stop():
        calls.append(1)
        return len(calls) > 3  # asked while the requests hang

    try:
        with pytest.raises(GenerationCancelled):
            _generate(llm, samples=2, should_stop=should_stop)
    finally:
        release.set()
    assert len(calls) == 4


def test_request_body_is_plain_sampling(fake):
    answer = json.dumps(_completion(" x", [" x"], [-1.0])).encode()
    url, srv = fake(_router(lambda h: (200, answer)))
    llm = EndpointLLM.load(url)
    _generate(llm, samples=2, temperature=1.0, seed=5, max_new_tokens=9)
    bodies = sorted(srv.bodies, key=lambda b: b["temperature"])
    assert [b["temperature"] for b in bodies] == [0.0, 1.0, 1.0]
    assert sorted(b["seed"] for b in bodies[1:]) == [5, 6]
    for b in bodies:
        # the top log-probs (as many as vLLM allows) give each token's entropy
        assert b["model"] == "fake-model" and b["max_tokens"] == 9 and b["logprobs"] == 20
        assert b["top_k"] == 0 and b["min_p"] == 0.0 and b["repeat_penalty"] == 1.0
        assert b["stop"] == [".", "\n"] and b["n"] == 1
        # special tokens in the text; no token ids asked for without the model's tokenizer
        assert b["skip_special_tokens"] is False and b["spaces_between_special_tokens"] is False
        assert "return_tokens_as_token_ids" not in b


# --------------------------------------------------------------------------------------------
# turning server token lists into answers (llama.cpp- and vLLM-shaped payloads)
# --------------------------------------------------------------------------------------------


def test_stop_token_past_the_text_is_cut_and_not_scored():
    # llama.cpp: text cut before the stop string, the token holding it still listed
    data = _completion(" Paris is", [" Paris", " is", "."], [-1.0, -2.0, -3.0])
    gen, raw = to_answer(parse_choice(data, "u"), (".", "\n"))
    assert (gen.text, gen.token_texts, gen.logprobs, gen.finish_reason) == (
        "Paris is", ["Paris", " is"], [-1.0, -2.0], "stop")
    assert gen.spans == [(0, 5), (5, 8)] and raw == " Paris is"
    # the token holding answer characters and the stop: kept, clipped
    data = _completion(" Paris", [" Par", "is."], [-1.0, -2.0])
    gen, _ = to_answer(parse_choice(data, "u"), (".", "\n"))
    assert gen.token_texts == ["Par", "is"] and gen.logprobs == [-1.0, -2.0]


def test_empty_answer_is_scored_by_its_stop_token():
    data = _completion("", ["\n"], [-0.5])
    gen, _ = to_answer(parse_choice(data, "u"), (".", "\n"))
    assert gen.text == "" and gen.logprobs == [-0.5] and gen.spans == [(0, 0)]
    assert "empty answer" in gen.warnings[0]
    with pytest.raises(EndpointError, match="empty answer"):
        to_answer(parse_choice(_completion("", [], []), "u"), ())


def test_partial_utf8_tokens_get_empty_spans():
    # llama.cpp: "é" split over two byte tokens, both rendered "" with correct offsets
    text = " café ok"
    data = _completion(text, [" caf", "", "", " ok"], [-1.0, -2.0, -3.0, -4.0],
                       offsets=[10, 14, 14, 15])
    gen, _ = to_answer(parse_choice(data, "u"), ())
    assert gen.token_texts == ["caf", "", "é", " ok"]
    assert gen.spans == [(0, 3), (3, 3), (3, 4), (4, 7)]
    # vLLM-style: replacement characters in the token strings, offsets counting them
    data = _completion(text, [" caf", "\ufffd", "\ufffd", " ok"], [-1.0, -2.0, -3.0, -4.0])
    gen, _ = to_answer(parse_choice(data, "u"), ())
    assert gen.token_texts == ["caf", "", "é", " ok"]
    assert gen.logprobs == [-1.0, -2.0, -3.0, -4.0]


def test_end_of_sequence_token_past_the_text_is_not_scored():
    data = _completion(" Paris", [" Paris", "<|im_end|>"], [-1.0, -0.1])
    gen, _ = to_answer(parse_choice(data, "u"), ())
    assert gen.token_texts == ["Paris"] and gen.logprobs == [-1.0]


def test_length_finish_warns():
    data = _completion(" a b", [" a", " b"], [-1.0, -2.0], finish="length")
    gen, _ = to_answer(parse_choice(data, "u"), ())
    assert gen.finish_reason == "length" and "max-new-tokens" in gen.warnings[0]
    assert all(math.isfinite(x) for x in gen.logprobs)


def test_api_key_env_never_in_settings_like_output(monkeypatch):
    monkeypatch.setenv("K_ENV", "sk-abc-999")
    llm = EndpointLLM("http://127.0.0.1:9/v1", "m", api_key_env="K_ENV")
    assert "sk-abc-999" not in repr(vars(llm))
    assert os.environ["K_ENV"] == "sk-abc-999"


# --------------------------------------------------------------------------------------------
# teacher-forced re-scoring
# --------------------------------------------------------------------------------------------
# No real server available here returns *processed* log-probs with *correct* echo log-probs
# (vLLM's old engine did; llama-cpp-python's echo log-probs are wrong, see above), so this path
# runs against a minimal reference server that computes everything with the transformers weights:
# sampled log-probs processed by the temperature (as vLLM V0 returned them), echo log-probs raw.


def _reference_reply(hf):
    import torch

    from mars_demo.models.decoding import IncrementalDecoder

    tok, model = hf.tokenizer, hf.model

    def pieces(ids):
        dec = IncrementalDecoder(tok)
        return [dec.push(t) for t in ids]

    def top(logp, k):
        vals, idx = logp.topk(k)
        return {tok.decode([int(i)]): float(v) for v, i in zip(vals, idx)}

    def reply(handler):
        if handler.command == "GET":
            return 200, _models("ref")
        body = handler.body
        prompt, k = body["prompt"], max(1, body.get("logprobs") or 1)
        temp, stops = body["temperature"], body.get("stop") or []
        ids = tok(prompt)["input_ids"]
        gen_ids, gen_lp, gen_top, finish = [], [], [], "length"
        g = torch.Generator().manual_seed(int(body.get("seed") or 0))
        with torch.no_grad():
            for _ in range(body["max_tokens"]):
                logits = model(torch.tensor([ids + gen_ids])).logits[0, -1].float()
                processed = (logits / temp if temp > 0 else logits).log_softmax(-1)
                t = int(processed.argmax()) if temp == 0 else int(
                    torch.multinomial(processed.exp(), 1, generator=g))
                if t in hf.eos_ids:
                    finish = "stop"
                    break
                gen_ids.append(t)
                gen_lp.append(float(processed[t]))
                gen_top.append(top(processed, k))
                if any(s in "".join(pieces(gen_ids)) for s in stops):
                    finish = "stop"
                    break
            text = "".join(pieces(gen_ids))
            cuts = [text.index(s) for s in stops if s in text]
            text = text[: min(cuts)] if cuts else text
            toks, lps, tops = [tok.decode([t]) for t in gen_ids], gen_lp, gen_top
            offset = len(prompt)
            if body.get("echo"):
                raw = model(torch.tensor([ids])).logits[0].float().log_softmax(-1)
                toks = pieces(ids) + toks
                lps = [None] + [float(raw[i - 1, ids[i]]) for i in range(1, len(ids))] + lps
                tops = [None] + [top(raw[i - 1], k) for i in range(1, len(ids))] + tops
                text, offset = prompt + text, 0
        offsets = []
        for t in toks:
            offsets.append(offset)
            offset += len(t)
        lp = {"tokens": toks, "token_logprobs": lps, "text_offset": offsets, "top_logprobs": tops}
        out = {"choices": [{"index": 0, "text": text, "logprobs": lp, "finish_reason": finish}]}
        return 200, json.dumps(out).encode()

    return reply


def test_processed_logprobs_are_detected_and_rescored(fake, hf):
    url, srv = fake(_reference_reply(hf))
    prompt = PAPER_PROMPT.format(question="What is the capital of France")
    prompt_ids = hf.tokenizer(prompt)["input_ids"]

    trusting = EndpointLLM.load(url, logprobs_mode="server")
    _, _, processed, _ = _generate(trusting, samples=2, temperature=0.5, max_new_tokens=6, seed=4)

    llm = EndpointLLM.load(url)  # auto: the probe finds processed log-probs
    _, result = _generated(llm, samples=2, temperature=0.5, max_new_tokens=6, seed=4)
    samples = result.samples
    assert result.logprob_source == "endpoint-teacher-forced"
    assert [s.text for s in samples] == [s.text for s in processed]
    for i, gen in enumerate(samples):
        _check_spans(gen)
        data = json.loads(_reference_reply(hf)(_Req({
            "prompt": prompt, "max_tokens": 6, "temperature": 0.5, "seed": 4 + i,
            "stop": [".", "\n"], "logprobs": 1}))[1])
        raw = data["choices"][0]["text"]
        answer_ids = hf.tokenizer(prompt + raw)["input_ids"][len(prompt_ids):]
        ref = _teacher_forced(hf, prompt_ids, answer_ids)
        assert len(gen.logprobs) == len(ref)
        assert max(abs(a - b) for a, b in zip(gen.logprobs, ref)) <= 1e-4
        # the server's own (temperature-processed) log-probs were not used
        assert max(abs(a - b) for a, b in zip(gen.logprobs, processed[i].logprobs)) > 0.1
    echoed = [b for b in srv.bodies if b.get("echo")]
    assert len(echoed) >= 3 and all(b["max_tokens"] == 1 for b in echoed)


class _Req:
    """Just enough of a request handler for calling a reply function directly."""

    command = "POST"

    def __init__(self, body):
        self.body = body


# --------------------------------------------------------------------------------------------
# the LLM contract
# --------------------------------------------------------------------------------------------


def test_both_adapters_satisfy_the_llm_contract(hf):
    """The in-process LLM and the server's client are both a ``LanguageModel``, with the
    contract's parameters, so the engine calls either the same way."""
    import inspect

    from mars_demo.models.contract import LanguageModel

    server = EndpointLLM("http://127.0.0.1:9/v1", "m")
    for adapter in (hf, server):
        assert isinstance(adapter, LanguageModel)
        for name in ("build_prompt", "generate", "generate_many", "teacher_forced"):
            wanted = list(inspect.signature(getattr(LanguageModel, name)).parameters)[1:]
            got = list(inspect.signature(getattr(adapter, name)).parameters)
            assert got[: len(wanted)] == wanted, (type(adapter).__name__, name, got)
    assert hf.bos_token_id == hf.tokenizer.bos_token_id and server.bos_token_id is None


def test_answers_given_as_text_through_llama_cpp_are_refused_with_a_message(
        llama_server, llama_api_key, tiny_settings):
    """Answers without log-probs are scored by teacher forcing on the server (echo), whose
    log-probs are checked first: llama-cpp-python's are missing or shifted by one position, so
    it is refused with a message rather than giving wrong numbers (vLLM's pass:
    tests/test_vllm.py)."""
    from mars_demo.engine import Engine

    engine = Engine(tiny_settings.replace(llm_endpoint=llama_server, llm_api_key_env=API_KEY_ENV))
    # (llama-cpp-python 0.3.36 gives no log-prob for this answer's echoed token at all)
    with pytest.raises(EndpointError, match=r"no log-prob for a re-scored answer token|echo\) "
                                            r"log-probs that do not belong"):
        engine.score({"question": QUESTION, "greedy": "Paris", "samples": ["Paris"]})


@pytest.mark.parametrize("next_top, ok", [(-0.5, True), (-1.5, False)])
def test_answers_given_as_text_check_the_echo_first(fake, next_top, ok):
    """Teacher forcing of answers given as text reads the echo's log-probs only when the most
    probable token right after the prompt has there the log-prob a generation gives it (a
    server whose echo is shifted by one position fails this)."""
    def reply(handler):
        if handler.command == "GET":
            return 200, _models("fake-model")
        body = handler.body
        if not body.get("echo"):  # the one-token greedy request for the prompt
            return 200, json.dumps(_completion(" X", [" X"], [next_top])).encode()
        prompt, n = body["prompt"], len(body["prompt"]) - len(" Mars")
        lp = {"tokens": [prompt[:n], " Mars"], "token_logprobs": [None, -2.0],
              "text_offset": [0, n], "top_logprobs": [None, {" Mars": -0.5}]}
        return 200, json.dumps({"choices": [{"text": prompt, "logprobs": lp,
                                             "finish_reason": "length"}]}).encode()

    url, _ = fake(reply)
    llm = EndpointLLM.load(url)
    prompt = llm.build_prompt(QUESTION, "paper")
    given = [Answer.text_only("Mars")]
    if ok:
        (scored,) = llm.teacher_forced(prompt, given)
        assert (scored.text, scored.token_texts, scored.logprobs) == ("Mars", ["Mars"], [-2.0])
    else:
        with pytest.raises(EndpointError, match="do not belong to their tokens"):
            llm.teacher_forced(prompt, given)
