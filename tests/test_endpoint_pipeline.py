"""The whole analysis with the LLM behind a real llama.cpp server (``--llm-endpoint``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from endpoint_servers import API_KEY, API_KEY_ENV

from mars_demo.engine import Engine
from mars_demo.errors import ModelLoadError

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Which planet is known as the Red Planet?"


@pytest.fixture()
def endpoint_settings(tiny_settings, llama_server, llama_api_key):
    return tiny_settings.replace(llm_endpoint=llama_server, llm_api_key_env=API_KEY_ENV,
                                 samples=3, max_new_tokens=8)


def test_the_engine_generates_through_the_server_and_scores_in_process(endpoint_settings):
    result = Engine(endpoint_settings).analyze(QUESTION)
    assert len(result.samples) == 3 and len(result.cluster_ids) == 3
    assert result.settings["llm_endpoint"] == endpoint_settings.llm_endpoint
    assert result.settings["logprob_source"].startswith("endpoint")
    assert "llm_api_key_env" not in result.settings  # not even the variable's name
    assert API_KEY not in json.dumps(result.to_dict())
    for answer in [result.greedy, *result.samples]:
        assert answer.tokens, answer.text
        for tok in answer.tokens:
            assert tok.logprob <= 0 and answer.text[tok.start:tok.end] == tok.text or \
                tok.start == tok.end
    # the served model's tokenizer (the LLM's directory) gives the chat prompt, as in-process
    assert result.settings["prompt"] == "chat"


def test_without_the_models_tokenizer_the_paper_prompt_is_used_and_said(endpoint_settings):
    result = Engine(endpoint_settings.replace(llm=None)).analyze(QUESTION)
    assert result.settings["prompt"] == "paper"
    assert any("paper" in w for w in result.warnings)


def test_a_server_that_is_down_is_one_clear_error(endpoint_settings):
    with pytest.raises(ModelLoadError, match="127.0.0.1:9"):
        Engine(endpoint_settings.replace(llm_endpoint="http://127.0.0.1:9/v1")).analyze(QUESTION)


def test_the_cli_asks_through_the_server(endpoint_settings, tiny_models):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", API_KEY_ENV: API_KEY}
    proc = subprocess.run(
        [sys.executable, "-m", "mars_demo", "ask", QUESTION, "--llm-endpoint",
         endpoint_settings.llm_endpoint, "--llm-api-key-env", API_KEY_ENV,
         "--llm", str(tiny_models["llm"]), "--importance", str(tiny_models["importance"]),
         "--nli", str(tiny_models["nli"]), "--samples", "2", "--max-new-tokens", "6", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["settings"]["logprob_source"].startswith("endpoint")
    assert len(data["samples"]) == 2
    assert API_KEY not in proc.stdout + proc.stderr


def test_the_paper_code_recipe_through_the_server(endpoint_settings):
    result = Engine(endpoint_settings.replace(recipe="paper-code")).analyze(QUESTION)
    assert result.prompt.endswith("Answer: ")
    assert result.settings["recipe"] == "paper-code" and result.settings["prompt"] == "paper"
    assert any("cannot ban tokens" in w for w in result.warnings)
    for answer in [result.greedy, *result.samples]:
        assert "\n" not in answer.text and ":" not in answer.text
        if "." in answer.text:  # kept and scored, as in-process
            assert answer.text.endswith(".") and answer.tokens[-1].text.endswith(".")
