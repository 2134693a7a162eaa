"""Offline, a missing model is named at once: before anything loads, every model a call needs
that is neither loaded, nor a folder here, nor in the Hugging Face cache is named in one
message with its option and the way to run offline; the Hub is asked once per process, with no
retries, and when it does not answer the process stops asking it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mars_demo.engine import Engine
from mars_demo.errors import ModelLoadError
from mars_demo.models import hub, registry
from mars_demo.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def nothing_loads(monkeypatch):
    """Loading any model fails the test: the check must answer first."""
    from mars_demo.models.importance import ImportanceModel
    from mars_demo.models.llm import LLM
    from mars_demo.models.nli import NLIModel

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the missing ones were named")

    for cls in (LLM, ImportanceModel, NLIModel):
        monkeypatch.setattr(cls, "from_pretrained", refuse)


def test_every_missing_model_is_named_at_once(nothing_loads, tiny_models):
    settings = Settings(llm=str(tiny_models["llm"]), importance="nobody/importance-xyz",
                        nli="/no/such/nli", methods="sar", similarity="nobody/sim-xyz")
    with pytest.raises(ModelLoadError) as info:
        Engine(settings).analyze("Which planet is known as the Red Planet?")
    message = str(info.value)
    assert message.startswith("These models are not on this machine: the importance model "
                              "nobody/importance-xyz (--importance: not in the Hugging Face "
                              "cache); the NLI model /no/such/nli (--nli: no such folder or "
                              "file); the similarity (SAR) model nobody/sim-xyz (--similarity: "
                              "not in the Hugging Face cache).")
    assert "HF_HUB_OFFLINE is set" in message and "make-tiny-models DIR" in message
    assert str(tiny_models["llm"]) not in message  # it is here


def test_scoring_names_only_what_it_needs(nothing_loads, tiny_settings):
    """An answer set with its log-probs needs no LLM: a missing one is not named."""
    answers = {"question": "Which planet?", "greedy": {"text": "Mars", "tokens": [
        {"text": "Mars", "logprob": -0.1}]}, "samples": [{"text": "Mars", "tokens": [
            {"text": "Mars", "logprob": -0.2}]}]}
    settings = tiny_settings.replace(llm="nobody/llm-xyz", nli="nobody/nli-xyz")
    with pytest.raises(ModelLoadError) as info:
        Engine(settings).score(answers)
    assert "the NLI model nobody/nli-xyz" in str(info.value)
    assert "LLM" not in str(info.value)


def test_the_hub_is_asked_once_and_then_left_alone(monkeypatch):
    """HF_HUB_OFFLINE unset and a Hub that does not answer: one probe, then offline (the
    cache's models load without the network) and the missing ones named."""
    from huggingface_hub import constants

    asked = []
    monkeypatch.setattr(hub, "_probe", lambda repo: asked.append(repo) or False)
    monkeypatch.setattr(hub, "_REACHABLE", [])
    monkeypatch.setattr(hub, "_WENT_OFFLINE", [])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "")
    named = [hub.Named("NLI model", "--nli", "nobody/a"),
             hub.Named("importance model", "--importance", "nobody/b")]
    for _ in range(3):
        gone = hub.missing(named)
    assert asked == ["nobody/a"]  # once, for the whole process
    assert constants.HF_HUB_OFFLINE is True and os.environ["HF_HUB_OFFLINE"] == "1"
    assert [m.source for m, _ in gone] == ["nobody/a", "nobody/b"]
    assert "cannot be reached from here" in hub.message(gone)


def test_a_reachable_hub_leaves_downloads_to_transformers(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(hub, "_probe", lambda repo: True)
    monkeypatch.setattr(hub, "_REACHABLE", [])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    assert hub.missing([hub.Named("NLI model", "--nli", "nobody/a")]) == []
    assert constants.HF_HUB_OFFLINE is False


def test_the_command_line_answers_without_retries(tmp_path):
    """Offline for real: a Hub address where nothing listens, HF_HUB_OFFLINE unset. One error
    line names both models; no retry or warning lines come before it."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf"))
    answers = ROOT / "data" / "facts_answers.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "mars_demo", "score", str(answers), "--importance",
         "nobody/importance-xyz", "--nli", "nobody/nli-xyz"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert "nobody/importance-xyz (--importance" in errors[0]
    assert "nobody/nli-xyz (--nli" in errors[0]
    assert "The Hugging Face Hub cannot be reached from here" in errors[0]
    assert "HF_HUB_OFFLINE=1 skips the Hub" in errors[0]
    assert "Retrying" not in done.stderr and "Traceback" not in done.stderr


def test_loaded_models_and_given_ones_count_as_here(tiny_settings):
    engine = Engine(tiny_settings)
    engine.load()
    registry.check_available(tiny_settings, ("llm", "importance", "nli"))  # nothing to say
