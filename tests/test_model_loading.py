"""Models that cannot load (a missing directory, corrupt weights, an unknown or gated Hub id, no
memory): one ModelLoadError that says what to do, and the engine still works afterwards.
"""

from __future__ import annotations

import importlib.util
import shutil

import pytest
import torch
from forced_answers import QUESTION, check_result, loaded_engine

from mars_demo.engine import Engine
from mars_demo.errors import ModelLoadError, explain_load_error
from mars_demo.models import registry
from mars_demo.settings import Settings


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return loaded_engine(tiny_settings)


def test_unknown_local_directory(tmp_path):
    with pytest.raises(ModelLoadError, match="no directory .*save_pretrained"):
        registry.load_llm(str(tmp_path / "missing" / "model"))


def test_directory_without_a_usable_model(tmp_path, tiny_models):
    bad = tmp_path / "llm"
    shutil.copytree(tiny_models["llm"], bad)
    (bad / "model.safetensors").write_bytes(b"\x00" * 64)  # corrupt weights
    with pytest.raises(ModelLoadError, match="does not hold a usable model.*save_pretrained"):
        registry.load_llm(str(bad))
    with pytest.raises(ModelLoadError, match="does not hold a usable model"):
        registry.load_importance(str(tmp_path))  # a directory that is no model at all


def test_unknown_hub_id_offline_says_what_to_do():
    with pytest.raises(ModelLoadError) as info:
        Engine(Settings(llm="nobody-here/no-such-model-xyz")).load()
    msg = str(info.value)
    assert "the LLM nobody-here/no-such-model-xyz (--llm: not in the Hugging Face cache)" in msg
    assert "HF_HUB_OFFLINE" in msg and "make-tiny-models" in msg and "local folders" in msg
    with pytest.raises(ModelLoadError, match="not a valid Hub id"):
        registry.load_llm("not a model id")


def test_gated_model_without_token_says_what_to_do(monkeypatch, tmp_path, tiny_models):
    import transformers

    def gated(*args, **kwargs):
        raise OSError(
            "You are trying to access a gated repo.\nMake sure to have access to it at "
            "https://huggingface.co/meta-llama/Llama-2-7b-hf.\n401 Client Error."
        )

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", gated)
    with pytest.raises(ModelLoadError, match="gated repository.*HF_TOKEN") as info:
        registry.load_llm("meta-llama/Llama-2-7b-hf")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "make_error",
    [
        MemoryError,
        lambda: torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4030.00 MiB"),
    ],
)
def test_memory_error_during_load(monkeypatch, tmp_path, tiny_models, make_error):
    import transformers

    freed = []
    monkeypatch.setattr(registry, "free_memory", lambda: freed.append(1))

    def no_memory(*args, **kwargs):
        raise make_error()

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_memory)
    copy = tmp_path / "llm"  # a path never loaded, so the model cache cannot answer
    shutil.copytree(tiny_models["llm"], copy)
    with pytest.raises(ModelLoadError, match="not enough memory.*smaller model") as info:
        registry.load_llm(str(copy))
    assert "gated" not in str(info.value)
    assert freed
    # Through an analysis too: still the load's advice, not "fewer samples".
    s = Settings(
        llm=str(copy), importance=str(tiny_models["importance"]), nli=str(tiny_models["nli"])
    )
    with pytest.raises(ModelLoadError, match="not enough memory.*smaller model"):
        Engine(s).analyze(QUESTION)


def test_explain_load_error_does_not_take_sizes_for_http_codes():
    oom = RuntimeError("CUDA out of memory. Tried to allocate 4030.00 MiB (403 MiB free)")
    assert "not enough memory" in str(explain_load_error("m/x", "LLM", oom))
    other = OSError("weights file is 14030 bytes short")
    assert "gated" not in str(explain_load_error("m/x", "LLM", other))
    assert "gated" in str(explain_load_error("m/x", "LLM", OSError("HTTP 403 Forbidden")))


def quantized_copy(tiny_models, tmp_path, which: str, config: dict):
    """The tiny ``which`` model with ``config`` as its config.json's ``quantization_config``,
    as a folder saved quantized says."""
    import json

    folder = tmp_path / f"{which}-{config['quant_method']}"
    shutil.copytree(tiny_models[which], folder)
    data = json.loads((folder / "config.json").read_text())
    data["quantization_config"] = config
    (folder / "config.json").write_text(json.dumps(data))
    return folder


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU loads these folders")
@pytest.mark.parametrize("which, load", [("llm", registry.load_llm), ("nli", registry.load_nli)])
@pytest.mark.parametrize("config, said", [
    # transformers on this CPU: "No GPU or XPU found. A GPU or XPU is needed for FP8
    # quantization." / "HIGGS quantization is only supported on GPU. ..."
    ({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
     "No GPU or XPU found"),
    ({"quant_method": "higgs", "bits": 4, "p": 2}, "only supported on GPU"),
])
def test_a_folder_saved_with_gpu_only_quantization_says_it_needs_a_cuda_gpu(
        tmp_path, tiny_models, which, load, config, said):
    folder = quantized_copy(tiny_models, tmp_path, which, config)
    with pytest.raises(ModelLoadError) as info:
        load(str(folder))
    message = str(info.value)
    assert (f"needs a CUDA GPU (it was saved quantized with {config['quant_method']})"
            in message), message
    assert "unquantized" in message and said in message
    assert "does not hold a usable model" not in message


@pytest.mark.parametrize("config, module, words", [
    # transformers' own words when the package is missing
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True},
     "optimum", "Loading a GPTQ quantized model requires optimum (`pip install optimum`)"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
      "version": "gemm"}, "awq",
     "Loading an AWQ quantized model requires auto-awq library (`pip install autoawq`)"),
    ({"quant_method": "aqlm", "in_group_size": 8, "out_group_size": 1, "num_codebooks": 1,
      "nbits_per_codebook": 16}, "aqlm",
     "Using `aqlm` quantization requires AQLM: `pip install aqlm[gpu,cpu]`"),
])
def test_a_folder_whose_quantization_needs_a_missing_package_names_it(
        tmp_path, tiny_models, config, module, words):
    folder = quantized_copy(tiny_models, tmp_path, "llm", config)
    if importlib.util.find_spec(module) is None:  # missing here: transformers' own error
        with pytest.raises(ModelLoadError) as info:
            registry.load_llm(str(folder))
        message = str(info.value)
    else:  # installed here: the error it gives where it is missing
        message = str(explain_load_error(str(folder), "LLM", ImportError(words)))
    command = words[words.index("`pip install") + 1:words.rindex("`")]
    assert (f"needs a Python package that is not installed here (it was saved quantized with "
            f"{config['quant_method']}): {command}.") in message, message
    assert "does not hold a usable model" not in message
    # an ImportError that names no install command says nothing it does not know
    plain = str(explain_load_error(str(folder), "LLM", ImportError("No module named 'x'")))
    assert "not installed here" not in plain and "does not hold a usable model" in plain


@pytest.mark.parametrize("text", [
    # transformers' words where bitsandbytes cannot run without CUDA (a bitsandbytes before
    # 0.43.1, or one without a CPU backend; the installed one quantizes on CPU too)
    "CUDA is required but not available for bitsandbytes. Please consider installing the "
    "multi-platform enabled version of bitsandbytes, which is currently a work in progress.",
    "The installed version of bitsandbytes (<0.43.1) requires CUDA, but CUDA is not available. "
    "You may need to install PyTorch with CUDA support or upgrade bitsandbytes to >=0.43.1.",
    "None of the available devices `available_devices = {'cpu'}` are supported by the "
    "bitsandbytes version you have installed: `bnb_supported_devices = {'cuda'}`.",
    "No CUDA GPUs are available",
])
def test_a_bitsandbytes_folder_that_needs_cuda_says_so(tmp_path, tiny_models, text):
    folder = quantized_copy(tiny_models, tmp_path, "llm", {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"})
    message = str(explain_load_error(str(folder), "LLM", RuntimeError(text)))
    assert "needs a CUDA GPU (it was saved quantized with bitsandbytes)" in message
    assert "does not hold a usable model" not in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="torch here is built with CUDA")
def test_torch_without_cuda_is_said_plainly(tmp_path):
    with pytest.raises((AssertionError, RuntimeError)) as info:  # torch's own words
        torch.empty(1, device="cuda")
    message = str(explain_load_error(str(tmp_path), "NLI model", info.value))
    assert f"{str(tmp_path)!r} needs a CUDA GPU, and none is usable here" in message, message
    assert "does not hold a usable model" not in message
    # an error that names CUDA for running out of memory stays a memory error
    oom = RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB; CUDA is not available")
    assert "not enough memory" in str(explain_load_error(str(tmp_path), "LLM", oom))


def test_engine_works_after_a_load_failure(engine, tiny_settings):
    with pytest.raises(ModelLoadError):
        engine.analyze(QUESTION, tiny_settings.replace(nli="/no/such/nli"))
    check_result(engine.analyze(QUESTION, engine.settings.replace(samples=1, max_new_tokens=3)))
