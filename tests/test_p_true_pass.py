"""P(True)'s extra LLM pass, end to end on the tiny models: the next-token log-prob
in-process against transformers' own logits, the ``p_true`` methods of ``ask --methods``, the
pass saved so ``score --methods-only`` recomputes them without a model, the LLM loaded only
when asked, the same pass through the real llama.cpp server, and the public API's refusal."""

from __future__ import annotations

import json
import math

import pytest
from cli_helpers import check_methods_only, cli, model_flags
from numeric_checks import float32_order

from mars_demo.core import p_true
from mars_demo.core.p_true import TARGET
from mars_demo.engine import Engine, stages
from mars_demo.engine.job import RESULT_NEEDS
from mars_demo.methods import FREE, llm_pass_prompt
from mars_demo.models.registry import load_llm
from mars_demo.recipes import resolve

QUESTION = "Which planet is known as the Red Planet?"
PASSES = ("p_true", "p_true_sampling")


@pytest.fixture(scope="module")
def hf(tiny_models):
    return load_llm(str(tiny_models["llm"]), load_in_4bit=False)


def transformers_logprob(path, text: str, target: str) -> float:
    """log softmax of the logits at the last position of ``text``, at the first token of
    ``target``: transformers alone, not the project's code."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    ids = torch.tensor([tok(text)["input_ids"]])
    with torch.no_grad():
        logits = model(ids).logits[0, -1]
    return float(logits.log_softmax(-1)[tok(target, add_special_tokens=False)["input_ids"][0]])


@pytest.fixture(scope="module")
def asked(tiny_models, tmp_path_factory):
    """``ask --methods p_true,p_true_sampling,num_sets --json``, saved to a file."""
    code, out, err = cli("ask", QUESTION, *model_flags(tiny_models), "--samples", "3",
                         "--max-new-tokens", "6", "--methods", "p_true,p_true_sampling,num_sets",
                         "--json")
    assert code == 0, err
    path = tmp_path_factory.mktemp("p_true") / "analysis.json"
    path.write_text(out, encoding="utf-8")
    return json.loads(out), path


def test_in_process_logprob_is_the_log_softmax_of_the_last_logits(hf, tiny_models):
    text = llm_pass_prompt("p_true", QUESTION, "Mars", ["Mars", "Venus"])
    got = hf.next_token_logprob(text, TARGET)
    want = transformers_logprob(tiny_models["llm"], text, TARGET)
    assert got.logprob == pytest.approx(want, abs=1e-5) and got.logprob < 0
    # the tiny tokenizer splits "True": its first token is read, and a warning says so
    assert got.token == "T"
    assert got.warnings == ["The LLM's tokenizer splits 'True' into 3 tokens; the log-prob of "
                            "the first one ('T') was read, as the next token."]
    # a target of one token: no warning, and another number (the target is really read)
    one = hf.next_token_logprob(text, "T")
    assert one.warnings == [] and one.logprob == got.logprob
    other = hf.next_token_logprob(text, " the")
    assert other.logprob == pytest.approx(transformers_logprob(tiny_models["llm"], text, " the"),
                                          abs=1e-5)
    assert other.logprob != got.logprob


def test_ask_gives_p_true_from_the_pass(asked, hf):
    data, _ = asked
    assert list(data["methods"]) == ["p_true", "p_true_sampling", "num_sets"]
    samples = [s["text"] for s in data["samples"]]
    for method_id in PASSES:
        saved = data["method_inputs"][method_id]
        assert saved["prompt"] == llm_pass_prompt(method_id, QUESTION, data["greedy"]["text"],
                                                  samples)
        assert saved["target"] == "T" and saved["llm"]
        # the stage's pass over both prompts (padded) against this prompt alone: float32 order
        assert saved["logprob"] == float32_order(
            hf.next_token_logprob(saved["prompt"], TARGET).logprob)
        value = data["methods"][method_id]["value"]
        assert math.isfinite(value) and value == p_true.p_true(saved["logprob"]) > 0
    # two prompts, two passes: the samples change the number
    assert data["methods"]["p_true"] != data["methods"]["p_true_sampling"]
    assert any("splits 'True' into 3 tokens" in w for w in data["warnings"])
    assert "methods" in data["timings_s"]


def test_score_methods_only_recomputes_p_true_without_a_model(asked, no_llm, tiny_models):
    data, path = asked
    # an analysis without the saved pass says what to do
    check_methods_only(data, path, PASSES, "p_true",
                       "no log-prob of the extra LLM pass that p_true reads")

def test_the_llm_is_needed_only_when_a_pass_is_asked_for(tiny_settings, asked, no_llm):
    from mars_demo.engine import job as job_module
    from mars_demo.result import AnalysisResult

    result = AnalysisResult.from_dict(asked[0])
    planned = stages.plan(RESULT_NEEDS)
    jobs = [job_module.ScoringJob(answers=result.answer_set(), question=QUESTION, reuse=None,
                                  logprob_source="generation")]
    for methods, needed in ((None, False), ("p_true", True), ("num_sets,p_true_sampling", True)):
        run = resolve(tiny_settings.replace(methods=methods))
        assert ("llm" in stages.models_needed(planned, jobs, run)) == needed, methods
    # scoring these answers again with the same LLM reuses the saved pass: no LLM (no_llm)
    again = Engine(tiny_settings.replace(methods="p_true,p_true_sampling,eigv")).rescore(result)
    assert again.method_inputs == result.method_inputs
    assert {k: again.methods[k] for k in PASSES} == {k: result.methods[k] for k in PASSES}
    # the free methods alone: no pass; only what the analysis' own NLI model said (semantic
    # density's greedy-to-sample pairs) is saved
    free = Engine(tiny_settings).rescore(result)
    assert list(free.methods) == list(FREE) and set(free.method_inputs) == {"greedy_nli"}


def test_a_fresh_pass_loads_the_llm(tiny_settings, asked, monkeypatch):
    from mars_demo.models import registry
    from mars_demo.result import AnalysisResult

    result = AnalysisResult.from_dict(asked[0])
    result.method_inputs = {}  # as an analysis made without the pass
    from mars_demo.models.llm import LLM

    loaded = []
    real = LLM.from_pretrained
    monkeypatch.setattr(LLM, "from_pretrained", lambda *a, **k: loaded.append(a) or real(*a, **k))
    registry.release(set())  # nothing cached: a load is seen
    again = Engine(tiny_settings.replace(methods="p_true")).rescore(result)
    assert loaded and again.methods["p_true"] == asked[0]["methods"]["p_true"]


# --- through the real llama.cpp server ------------------------------------------------------------


@pytest.fixture
def endpoint(llama_server, tiny_models, llama_api_key):
    from endpoint_servers import API_KEY_ENV

    from mars_demo.models.endpoint import EndpointLLM

    return EndpointLLM.load(llama_server, api_key_env=API_KEY_ENV,
                            tokenizer=str(tiny_models["llm"]))


def test_the_server_pass_agrees_with_in_process(endpoint, hf, monkeypatch):
    from mars_demo.models.endpoint import EndpointLLM

    text = llm_pass_prompt("p_true_sampling", QUESTION, "Mars", ["Mars", "Venus"])
    local = hf.next_token_logprob(text, TARGET)
    monkeypatch.setattr(EndpointLLM, "top_logprobs", 1000)  # the tiny model's whole vocabulary
    served = endpoint.next_token_logprob(text, TARGET)
    assert served.token == "T" and served.warnings == local.warnings
    assert served.logprob == pytest.approx(local.logprob, abs=1e-3)


def test_a_target_below_the_servers_top_logprobs_is_said_not_guessed(endpoint, hf, monkeypatch):
    import torch

    from mars_demo.models.endpoint import EndpointLLM

    text = llm_pass_prompt("p_true", QUESTION, "Mars", [])
    ids = torch.tensor([hf.tokenizer(text)["input_ids"]])
    with torch.no_grad():
        logp = hf.model(ids).logits[0, -1].float().log_softmax(-1)
    target_id = hf.tokenizer(TARGET, add_special_tokens=False)["input_ids"][0]
    above = int((logp > logp[target_id] + 1e-3).sum())  # tokens more probable than the target
    assert above >= 1
    monkeypatch.setattr(EndpointLLM, "top_logprobs", above)
    got = endpoint.next_token_logprob(text, TARGET)
    assert got.logprob is None
    assert any(f"did not return the log-prob of the token 'T' among the {above} most "
               "probable next tokens" in w for w in got.warnings)


def test_ask_through_the_server_gives_p_true(llama_server, llama_api_key, tiny_settings, hf,
                                             monkeypatch, tmp_path, no_llm):
    from endpoint_servers import API_KEY_ENV

    from mars_demo.models.endpoint import EndpointLLM

    monkeypatch.setattr(EndpointLLM, "top_logprobs", 1000)
    settings = tiny_settings.replace(llm_endpoint=llama_server, llm_api_key_env=API_KEY_ENV,
                                     samples=3, max_new_tokens=6, methods="p_true,num_sets")
    result = Engine(settings).analyze(QUESTION)
    saved = result.method_inputs["p_true"]
    monkeypatch.undo()  # the in-process reference below may load now
    local = hf.next_token_logprob(saved["prompt"], TARGET).logprob
    assert saved["logprob"] == pytest.approx(local, abs=1e-3)
    assert result.methods["p_true"]["value"] == p_true.p_true(saved["logprob"])
    path = tmp_path / "served.json"
    path.write_text(json.dumps(result.to_dict()), encoding="utf-8")
    code, out, err = cli("score", str(path), "--methods-only", "--json")
    assert code == 0, err
    assert abs(json.loads(out)["methods"]["p_true"]["value"]
               - result.methods["p_true"]["value"]) <= 1e-9


def test_through_the_server_a_missing_logprob_leaves_p_true_out_with_warnings(
        llama_server, llama_api_key, tiny_settings, monkeypatch):
    from endpoint_servers import API_KEY_ENV

    from mars_demo.models.endpoint import EndpointLLM

    monkeypatch.setattr(EndpointLLM, "top_logprobs", 1)
    settings = tiny_settings.replace(llm_endpoint=llama_server, llm_api_key_env=API_KEY_ENV,
                                     samples=2, max_new_tokens=4, methods="p_true,num_sets")
    result = Engine(settings).analyze(QUESTION)
    if "p_true" in result.method_inputs:  # "T" happened to be the most probable next token
        pytest.fail("the tiny model's most probable token after the prompt is 'T'; pick another "
                    "question for this test")
    assert list(result.methods) == ["num_sets"]
    assert any("did not return the log-prob of the token 'T' among the 1 most probable" in w
               for w in result.warnings)
    assert any("method p_true could not be computed" in w for w in result.warnings)


# --- the public page ------------------------------------------------------------------------------


def test_a_public_page_names_the_passs_llm_as_it_names_the_model(asked):
    from mars_demo.ui.guards.redact import Redactor

    data = asked[0]
    path = data["method_inputs"]["p_true"]["llm"]
    assert path.startswith("/")
    shown = Redactor(public=True, models=[("llm", path)]).result_dict(data)
    name = path.rstrip("/").rsplit("/", 1)[-1]
    assert shown["method_inputs"]["p_true"]["llm"] == shown["settings"]["llm"] == name
    assert shown["method_inputs"]["p_true"]["logprob"] == data["method_inputs"]["p_true"]["logprob"]
    served = Redactor(public=True).result_dict(  # a served model's name the page never saw
        {**data, "method_inputs": {"p_true": {**data["method_inputs"]["p_true"],
                                              "llm": "/srv/models/llama.gguf"}}})
    assert served["method_inputs"]["p_true"]["llm"] == "llama.gguf"
    host = Redactor(public=False, names={"llm": "Tiny"}).result_dict(data)
    assert host["method_inputs"]["p_true"]["llm"] == "Tiny"
    assert Redactor().result_dict(data) is data  # a host's own page: as it is
