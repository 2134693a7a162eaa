"""``python app.py`` with tiny models, driven through its API with ``gradio_client``."""

from __future__ import annotations

import json

import pytest

from mars_demo.result import AnalysisResult

QUESTION = "Which planet is known as the Red Planet?"
FIELDS = (
    "question",
    "prompt",
    "prompt_token_ids",
    "greedy",
    "samples",
    "nli",
    "cluster_ids",
    "uncertainty",
    "settings",
    "timings_s",
    "warnings",
)


def test_analyze_returns_the_full_json(client):
    data = client.predict(QUESTION, api_name="/analyze")
    for field in FIELDS:
        assert field in data, field
    assert data["question"] == QUESTION
    assert data["greedy"]["text"] and data["greedy"]["tokens"]
    assert len(data["samples"]) == len(data["cluster_ids"]) == 5  # the default settings
    for name in ("confidence", "entropy", "semantic_entropy"):
        assert set(data["uncertainty"][name]) == {"length_normalized", "mars"}
    assert data["settings"]["temperature"] == 0.5 and data["settings"]["cluster_rule"] == "strict"
    assert AnalysisResult.from_dict(data).to_dict() == data


def test_settings_are_optional_parameters(client):
    data = client.predict(
        QUESTION, samples=2, max_new_tokens=4, seed=7, cluster_rule="lenient", api_name="/analyze"
    )
    assert len(data["samples"]) == 2
    assert (data["settings"]["max_new_tokens"], data["settings"]["seed"]) == (4, 7)
    assert data["settings"]["cluster_rule"] == "lenient"
    assert all(len(a["tokens"]) <= 4 for a in [data["greedy"], *data["samples"]])


def test_bad_input_is_a_clear_error_and_the_server_keeps_serving(client):
    with pytest.raises(Exception, match="question is empty"):
        client.predict("", api_name="/analyze")
    with pytest.raises(Exception, match="samples must be an integer from 1 to 20"):
        client.predict(QUESTION, samples=0, api_name="/analyze")
    assert (
        client.predict(QUESTION, samples=1, max_new_tokens=3, api_name="/analyze")["question"]
        == QUESTION
    )


def test_the_api_page_lists_the_two_endpoints_with_every_option(client):
    from mars_demo.ui.work import controls

    endpoints = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert list(endpoints) == ["/analyze", "/score"]
    for name, first in (("/analyze", "question"), ("/score", "answers")):
        names = [p["parameter_name"] for p in endpoints[name]["parameters"]]
        assert names == [first, *controls.API_OPTIONS]


def test_the_api_computes_the_methods_asked_for(client):
    data = client.predict(QUESTION, samples=2, max_new_tokens=4, methods="eigv, semantic_entropy",
                          api_name="/analyze")
    assert list(data["methods"]) == ["eigv", "semantic_entropy"]
    assert set(data["methods"]["semantic_entropy"]) == {"length_normalized", "mars"}
    assert len(data["nli"]["probabilities"]) == 2
    again = client.predict(json.dumps(data), api_name="/score")  # "auto": the free methods
    assert "eigv" in again["methods"] and "kernel_language_entropy" in again["methods"]
    assert again["methods"]["eigv"] == pytest.approx(data["methods"]["eigv"], abs=1e-9)


def test_the_score_endpoint_rescores_an_analysis_without_generating(client):
    data = client.predict(QUESTION, samples=2, max_new_tokens=4, api_name="/analyze")
    again = client.predict(json.dumps(data), normalization="softmax", api_name="/score")
    assert again["settings"]["normalization"] == "softmax"
    assert again["settings"]["logprob_source"] == "generation"
    assert [a["text"] for a in again["samples"]] == [a["text"] for a in data["samples"]]
    assert again["uncertainty"]["entropy"]["length_normalized"] == pytest.approx(
        data["uncertainty"]["entropy"]["length_normalized"], abs=1e-9)
    with pytest.raises(Exception, match="has no tokens"):
        bad = {"question": QUESTION, "greedy": {"text": "x", "tokens": []}, "samples": ["y"]}
        client.predict(json.dumps(bad), api_name="/score")
