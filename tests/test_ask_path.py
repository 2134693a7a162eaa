"""The Ask path, straight: from the Ask button to the verdict, the question is cleaned once (at
the engine's door), one worker thread runs the analysis, and the result is redacted once, the
same JSON shown and offered for download."""

from __future__ import annotations

import json
import sys
import threading

import pytest
from test_verdict_everywhere import page_verdict
from ui_helpers import FakeEngine, make_result

from mars_demo import settings as settings_module
from mars_demo.engine import Engine
from mars_demo.hosting.access import public_access
from mars_demo.result import AnalysisResult
from mars_demo.ui.guards.redact import Redactor
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.work.host import EngineHost

ASK = ("  Which planet\u200b is known as the Red Planet? ", "mars", 2, 0.5, 6, 0, "auto",
       "model", "sum", "equal", "strict")


@pytest.fixture
def cleanings(monkeypatch):
    """Every call of ``clean_question``, wherever a module imported it from."""
    original = settings_module.clean_question
    calls = []

    def counted(question):
        calls.append(question)
        return original(question)

    for module in list(sys.modules.values()):
        if (getattr(module, "__name__", "").startswith("mars_demo")
                and getattr(module, "clean_question", None) is original):
            monkeypatch.setattr(module, "clean_question", counted)
    return calls


def test_the_question_is_cleaned_once_on_its_way_to_the_verdict(tiny_settings, cleanings):
    page = Controller(EngineHost(Engine(tiny_settings)))
    last = list(page.ask(*ASK))[-1]
    assert last["result"].question == "Which planet is known as the Red Planet?"
    assert last["result"].verdict is not None and "mars-verdict-line" in last["verdict"]
    assert cleanings == [ASK[0]]


def test_a_bad_question_is_the_engines_message_before_anything_is_shown(tiny_settings):
    page = Controller(EngineHost(Engine(tiny_settings)))
    updates = list(page.ask("   ", *ASK[1:]))
    assert len(updates) == 1 and "question is empty" in updates[0]["error"]
    assert updates[0]["result"] is None


class Watching(FakeEngine):
    """A fake engine that notes the threads alive while it analyzes."""

    def analyze(self, *args, **kwargs):
        self.threads = [t.name for t in threading.enumerate() if t.name.startswith("mars-")]
        self.running_in = threading.current_thread().name
        return super().analyze(*args, **kwargs)


def test_one_worker_thread_runs_an_analysis():
    engine = Watching()
    before = [t.name for t in threading.enumerate() if t.name.startswith("mars-")]
    updates = list(Controller(EngineHost(engine)).ask(*ASK))
    assert updates[-1]["result"] is not None
    assert engine.running_in == "mars-analyze"
    started = list(engine.threads)
    for name in before:
        started.remove(name)
    assert started == ["mars-analyze"]


def test_the_result_is_redacted_once_and_the_download_is_what_is_shown(monkeypatch):
    dicts, redactions = [], []
    to_dict, result_dict = AnalysisResult.to_dict, Redactor.result_dict
    monkeypatch.setattr(AnalysisResult, "to_dict",
                        lambda self: dicts.append(1) or to_dict(self))
    monkeypatch.setattr(Redactor, "result_dict",
                        lambda self, data: redactions.append(1) or result_dict(self, data))
    page = Controller(EngineHost(FakeEngine()), public_access())
    result = make_result()
    update = page.show(result, "mars")
    assert (len(dicts), len(redactions)) == (1, 1)
    downloaded = json.loads(open(update["download"]["value"], encoding="utf-8").read())
    assert downloaded == result_dict(page.redactor(), to_dict(result))
    assert page_verdict(update["verdict"]) == downloaded["verdict"]["text"]
