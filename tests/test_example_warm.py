"""Every example analyzed once at start, in the background (ui/page/example_warm.py), without a
browser: no visitor's Ask needed, a visitor never waits behind it, nothing a visitor does starts
it, and a running analysis past its expected wait says so."""

from __future__ import annotations

import logging
import threading
import time

from ui_helpers import FakeEngine

from mars_demo import texts
from mars_demo.errors import AnalysisCancelled
from mars_demo.ui.draw.render import esc
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.page.example_store import ExampleStore
from mars_demo.ui.page.example_warm import WARM_THREAD
from mars_demo.ui.work import controls
from mars_demo.ui.work.host import EngineHost
from mars_demo.ui.work.worker import CANCELLED_LOG

EXAMPLES = ["Which planet is known as the Red Planet?", "What is the capital city of Japan?",
            "Which country has the most time zones?"]
DEFAULTS = tuple(controls.page_default(name) for name in controls.PAGE_OPTIONS)


class SlowEngine(FakeEngine):
    """An analysis of ``steps`` x ``step_s`` seconds that stops at its next step once told to,
    as the engine stops at its next token; ``started`` and ``ended`` record each one."""

    def __init__(self, steps: int = 20, step_s: float = 0.05) -> None:
        super().__init__()
        self.steps, self.step_s = steps, step_s
        self.log: list[tuple[str, str, float]] = []
        self.running = threading.Event()

    def analyze(self, question, settings=None, *, progress=None, on_text=None,
                should_stop=None):
        self.log.append(("start", question, time.monotonic()))
        self.running.set()
        for _ in range(self.steps):
            if should_stop is not None and should_stop():
                self.log.append(("cancelled", question, time.monotonic()))
                raise AnalysisCancelled("stopped")
            time.sleep(self.step_s)
            if progress:
                progress("generate", 0.5)
        self.log.append(("end", question, time.monotonic()))
        return super().analyze(question, settings, progress=progress, on_text=on_text)


def page(engine, folder) -> Controller:
    return Controller(EngineHost(engine), examples=ExampleStore(folder, EXAMPLES))


def test_every_example_is_made_in_the_background_and_then_answers_at_once(tmp_path):
    engine = FakeEngine()
    ctrl = page(engine, tmp_path)
    ctrl.warmer.start()
    assert ctrl.warmer.done.wait(30)
    assert sorted(q for q, _ in engine.calls) == sorted(EXAMPLES)  # no visitor asked any
    assert len(list(tmp_path.glob("*.json"))) == len(EXAMPLES)
    # the background analyses' times are the first visitor's expected wait
    assert ctrl.waits.expected(_kind(ctrl)) is not None
    for question in EXAMPLES:  # each one: one update with the whole analysis, no model call
        shown = list(ctrl.ask(question, "mars", *DEFAULTS))
        assert len(shown) == 1 and esc(texts.EXAMPLE_KEPT) in shown[0]["progress"], question
    assert len(engine.calls) == len(EXAMPLES)
    # a page started again over the same folder finds them all: nothing is made twice
    again = FakeEngine()
    ctrl = page(again, tmp_path)
    ctrl.warmer.start()
    assert ctrl.warmer.done.wait(30) and again.calls == []


def _kind(ctrl):
    from mars_demo.ui.page.waits import kind

    return kind(ctrl.page_defaults())


def test_a_visitor_never_waits_behind_the_background_work(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    engine = SlowEngine(steps=40, step_s=0.05)  # 2 s an analysis
    ctrl = page(engine, tmp_path)
    ctrl.warmer.start()
    assert engine.running.wait(10)
    time.sleep(0.2)  # the first example is under way
    asked = time.monotonic()
    shown = list(ctrl.ask("Who wrote Hamlet?", "mars", *DEFAULTS))
    assert "data-level=" in shown[-1]["verdict"]
    start = next(t for kind, q, t in engine.log if kind == "start" and q == "Who wrote Hamlet?")
    # the example under way stopped at its next step, and the visitor's analysis began at
    # once: well before the 2 s the example would have taken (its steps are 0.05 s)
    assert ("cancelled", EXAMPLES[0]) in [(k, q) for k, q, _ in engine.log]
    assert start - asked < 1.0, engine.log
    # and the example was made again afterwards, with the others
    assert ctrl.warmer.done.wait(60)
    # its stop was no visitor's cancel: not logged as one
    assert CANCELLED_LOG not in caplog.text
    assert len(list(tmp_path.glob("*.json"))) == len(EXAMPLES)


def test_nothing_a_visitor_does_starts_the_background_work(tmp_path):
    engine = FakeEngine()
    ctrl = page(engine, tmp_path)  # the host did not start it
    for question in (EXAMPLES[0], "Who wrote Hamlet?"):
        list(ctrl.ask(question, "mars", *DEFAULTS))
    time.sleep(0.3)
    assert WARM_THREAD not in [t.name for t in threading.enumerate()]
    assert [q for q, _ in engine.calls] == [EXAMPLES[0], "Who wrote Hamlet?"]
    # without a folder there is nothing to keep, so nothing is made
    plain = page(FakeEngine(), None)
    assert plain.warmer.start() is None


def test_an_analysis_past_its_expected_wait_says_so_while_it_runs():
    engine = SlowEngine(steps=70, step_s=0.05)  # 3.5 s
    ctrl = page(engine, None)
    ctrl.waits.add(0.3, _kind(ctrl))  # analyses like it took 0.3 s: an overrun past 2.3 s
    updates = list(ctrl.ask("Who wrote Hamlet?", "mars", *DEFAULTS))
    verdicts = [u["verdict"] for u in updates if "verdict" in u]
    assert "took about 0.3 s" in verdicts[0] and "taking longer" not in verdicts[0]
    assert any("This one is taking longer: 3 s so far." in v for v in verdicts), verdicts
    # never before it is well past the wait said (half as long again, and 2 s more)
    assert not any("taking longer: 0 s" in v or "taking longer: 1 s" in v for v in verdicts)
