"""The vLLM tests' guard (tests/endpoint_servers.py): without the vLLM venv they skip and say
how to build it; under CI, which builds the venv first, they fail instead of skipping."""

from __future__ import annotations

import endpoint_servers
import pytest


def test_a_missing_vllm_venv_skips_with_the_command_that_builds_it(monkeypatch, tmp_path):
    monkeypatch.setattr(endpoint_servers, "VLLM_VENV", tmp_path / "none")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="bash scripts/vllm_venv.sh"):
        endpoint_servers.require_vllm()


def test_a_missing_vllm_venv_fails_under_ci(monkeypatch, tmp_path):
    monkeypatch.setattr(endpoint_servers, "VLLM_VENV", tmp_path / "none")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the vLLM tests"):
        endpoint_servers.require_vllm()


def test_a_built_venv_gives_its_python(monkeypatch, tmp_path):
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    monkeypatch.setattr(endpoint_servers, "VLLM_VENV", tmp_path / "venv")
    assert endpoint_servers.require_vllm() == python
