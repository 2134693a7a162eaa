"""``evaluate`` against a real llama.cpp server (the ``llama_server`` fixture): answers generated
through ``--llm-endpoint``, and the LLM judge's requests understood by a real server."""

from __future__ import annotations

import json
import pathlib

import pytest
from endpoint_servers import API_KEY, API_KEY_ENV

from mars_demo.cli import main
from mars_demo.evaluation import judges
from mars_demo.evaluation.judges.llm import LLMJudge

ROOT = pathlib.Path(__file__).resolve().parents[1]
FACTS = ROOT / "data" / "facts.jsonl"


def test_evaluate_generates_through_the_server(llama_server, llama_api_key, tiny_models,
                                               tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["evaluate", "run", "--data", str(FACTS), "--out", str(out), "--limit", "2",
                 "--judge", "em", "--bootstrap", "20", "--no-plots",
                 "--llm-endpoint", llama_server, "--llm-api-key-env", API_KEY_ENV,
                 "--llm", str(tiny_models["llm"]), "--importance", str(tiny_models["importance"]),
                 "--nli", str(tiny_models["nli"]), "--samples", "2", "--max-new-tokens", "6"])
    assert code == 0, capsys.readouterr().err
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for r in records:
        assert r["analysis"]["settings"]["llm_endpoint"] == llama_server
        assert r["analysis"]["settings"]["logprob_source"].startswith("endpoint")
        assert len(r["analysis"]["samples"]) == 2
    for name in ("run.json", "results.jsonl", "report.json", "report.md"):
        assert API_KEY not in (out / name).read_text(), name


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_the_llm_judge_talks_to_a_real_server(llama_server, llama_api_key, api):
    """The tiny model's reply is random text: the judge must get it through the real server's
    API and then either read a verdict or say that the reply was neither word; an HTTP error or
    a reply of the wrong shape would be a different error."""
    judge = judges.make_judge("llm", endpoint=llama_server, api=api, api_key_env=API_KEY_ENV)
    assert judge.model  # listed by the server's /v1/models
    try:
        verdict = judge("Which planet is known as the Red Planet?", "Mars", ["Mars"])
    except judges.JudgeError as err:
        assert str(err).startswith("the judge replied "), err
    else:
        assert isinstance(verdict.correct, bool) and isinstance(verdict.detail, str)


def test_the_llm_judge_reports_a_refused_api_key(llama_server, monkeypatch):
    monkeypatch.setenv("WRONG_KEY", "not-the-key")
    judge = LLMJudge(llama_server, model="any", api_key_env="WRONG_KEY")
    with pytest.raises(judges.JudgeError, match="answered HTTP 401"):
        judge("q?", "a", ["b"])
