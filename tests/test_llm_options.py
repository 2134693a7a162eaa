"""The in-process LLM's operator options (mars_demo.models.llm_options): static-compiled decoding
gives dynamic decoding's tokens and log-probs, and what cannot run here is refused, saying why."""

from __future__ import annotations

import sys

import pytest
import torch
from numeric_checks import float32_order

from mars_demo import serve as app
from mars_demo.engine import Engine
from mars_demo.errors import ModelLoadError, OptionError
from mars_demo.models import llm_options
from mars_demo.models.contract import GenerationRequest, Prompt
from mars_demo.models.registry import load_llm, loaded_keys
from mars_demo.settings import Settings

PROMPTS = ([5, 17, 42, 8, 99, 3], [7, 7, 120, 64])


def answers_of(result):
    return [(a.token_ids, a.logprobs) for a in [result.greedy, *result.samples]]


def test_static_compiled_decoding_gives_the_tokens_and_logprobs_of_dynamic(tiny_models):
    """The compiled forward (torch.compile through transformers' static-cache path, told to
    compile on a CPU too) is really used, and changes no token; log-probs agree to float32
    order. Both one question (greedy row + samples) and two left-padded questions in one batch
    (the same batch size: the static cache and the compiled graph are reused)."""
    if torch.cuda.is_available():  # the tiny LLM would load in 4-bit, computing in bf16
        pytest.skip("a float32 check: on a GPU, python -m mars_demo.bench --llm-options "
                    "compares the options")
    path = str(tiny_models["llm"])
    dynamic = load_llm(path)
    compiled = load_llm(path, decoding="static-compiled")
    assert compiled is not dynamic and compiled.decoding == "static-compiled"
    assert ("llm", path, None, "nf4", "static-compiled") in loaded_keys()
    request = GenerationRequest(samples=3, temperature=1.0, top_p=0.9, max_new_tokens=10, seed=3)
    prompt = Prompt("", list(PROMPTS[0]), "paper", [])
    want = answers_of(dynamic.generate(prompt, request))
    got = answers_of(compiled.generate(prompt, request))
    assert hasattr(compiled.model, "_compiled_call")  # the compiled forward ran the steps
    assert not hasattr(dynamic.model, "_compiled_call")
    assert [ids for ids, _ in got] == [ids for ids, _ in want]
    for (_, lp), (_, want_lp) in zip(got, want):
        assert lp == float32_order(want_lp)

    two = [Prompt("", list(p), "paper", []) for p in PROMPTS]
    many = GenerationRequest(samples=1, temperature=1.0, top_p=1.0, max_new_tokens=6, seed=4)
    want = [answers_of(r) for r in dynamic.generate_many(two, many)]
    got = [answers_of(r) for r in compiled.generate_many(two, many)]
    assert [[ids for ids, _ in q] for q in got] == [[ids for ids, _ in q] for q in want]
    for q, want_q in zip(got, want):
        for (_, lp), (_, want_lp) in zip(q, want_q):
            assert lp == float32_order(want_lp)


def test_a_skipped_compilation_is_an_error_not_a_silent_fallback():
    class Uncompiled:  # a model generate left uncompiled (transformers' criteria not met)
        pass

    with pytest.raises(RuntimeError, match="did not compile the LLM's forward"):
        llm_options.check_compiled(Uncompiled(), "static-compiled")
    llm_options.check_compiled(Uncompiled(), "dynamic")  # nothing to check


def test_a_quantizer_transformers_will_not_compile_is_let_compile():
    class Quantizer:  # as transformers 4.57's bitsandbytes 4-bit quantizer says
        is_compileable = False

    class Model:
        device = torch.device("cpu")
        hf_quantizer = Quantizer()

    kwargs = llm_options.generate_kwargs("static-compiled", Model())
    assert kwargs["cache_implementation"] == "static"
    assert kwargs["compile_config"]._compile_all_devices  # compiled on a CPU too
    assert Model.hf_quantizer.is_compileable and isinstance(Model.hf_quantizer, Quantizer)
    assert llm_options.generate_kwargs("dynamic", Model()) == {}


def test_torchao_int4_is_refused_without_a_cuda_gpu(tiny_models):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(ModelLoadError, match="torchao-int4 needs a CUDA GPU .* use quantization "
                                             "nf4"):
        load_llm(str(tiny_models["llm"]), quantization="torchao-int4")
    settings = Settings(llm=str(tiny_models["llm"]), quantization="torchao-int4")
    with pytest.raises(ModelLoadError, match="needs a CUDA GPU"):
        Engine(settings).analyze("Which planet is red?")


def fake_gpu(monkeypatch, capability, name):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: name)


def test_torchao_int4_is_refused_on_an_older_gpu_and_without_torchao(monkeypatch):
    fake_gpu(monkeypatch, (7, 5), "Tesla T4")
    with pytest.raises(ModelLoadError, match=r"Tesla T4\) has 7\.5: use quantization nf4"):
        llm_options.check("torchao-int4", "dynamic", True)
    with pytest.raises(ModelLoadError, match="cannot go with load_in_4bit false"):
        llm_options.check("torchao-int4", "dynamic", False)
    fake_gpu(monkeypatch, (9, 0), "NVIDIA H100")
    monkeypatch.setitem(sys.modules, "torchao", None)  # not installed
    with pytest.raises(ModelLoadError, match=r"needs the torchao package \(pip install "
                                             r"'torchao>=0\.18,<0\.19'\)"):
        llm_options.check("torchao-int4", "dynamic", True)
    llm_options.check("nf4", "static-compiled", True)  # NF4 needs no more than before


def test_static_compiled_decoding_is_refused_on_zerogpu(tiny_models):
    zero = {"SPACES_ZERO_GPU": "true"}
    from mars_demo.hosting import zerogpu

    assert "ZeroGPU Space does not allow" in zerogpu.decoding_refusal("static-compiled", zero)
    assert zerogpu.decoding_refusal("dynamic", zero) is None
    assert zerogpu.decoding_refusal("static-compiled", {}) is None
    with pytest.raises(SystemExit) as stop:
        app.parse_args(["--decoding", "static-compiled"], env=zero)
    assert stop.value.code == 2
    assert app.parse_args(["--decoding", "static-compiled"]).settings.decoding == (
        "static-compiled")
    # torchao-int4 is 4-bit by itself: ZeroGPU's unquantized default does not turn it into an error
    on_zero = app.parse_args(["--quantization", "torchao-int4"], env=zero).settings
    assert (on_zero.quantization, on_zero.load_in_4bit) == ("torchao-int4", None)
    assert app.parse_args([], env={"MARS_DEMO_QUANTIZATION": "torchao-int4"}).settings.quantization == (
        "torchao-int4")


@pytest.mark.parametrize("changes, message", [
    ({"quantization": "int4"}, "quantization must be one of nf4, torchao-int4; got 'int4'"),
    ({"decoding": "compiled"}, "decoding must be one of dynamic, static-compiled; got 'compiled'"),
    ({"quantization": "torchao-int4", "load_in_4bit": False}, "cannot go with load_in_4bit false"),
    ({"decoding": "static-compiled", "llm_endpoint": "http://127.0.0.1:1/v1"},
     "quantization and decoding are the in-process LLM's"),
])
def test_bad_values_and_combinations_are_refused(changes, message):
    with pytest.raises(OptionError, match=message):
        Settings(**changes)


def test_the_analysis_records_how_its_answers_were_decoded(tiny_settings):
    result = Engine(tiny_settings.replace(samples=2, max_new_tokens=4)).analyze(
        "Which planet is red?")
    assert result.settings["decoding"] == "dynamic"
    assert result.settings["quantization"] is None  # float32 on a CPU: no 4-bit weights
    assert result.settings["load_in_4bit"] is False
    saved = result.to_dict()["settings"]
    assert (saved["decoding"], saved["quantization"]) == ("dynamic", None)
