"""An analysis that takes longer than those like it says so while it works, in headless Chromium
at 1280 and 390 px: the page first learns how long analyses of its kind take (the examples it
makes at start, quick here), then a question whose answer streams for a few seconds is asked,
and the verdict's place is read every 20 ms during the work (a recorder in the page, not a read
at the end). Before, the page kept saying "about 0.1 s lately" for as long as the work took.
"""

from __future__ import annotations

import threading
import time

import pytest
from test_browser import SHOWN_ANALYSIS, browser, open_page, wait_verdict  # noqa: F401
from ui_helpers import FakeEngine, free_port

from mars_demo import texts

pytestmark = pytest.mark.browser

WIDTHS = [1280, 390]
SLOW = "How long does a slow answer take?"
STREAM_S = 4.0  # the slow answer's streaming: far past the quick ones' median
WARM_TIMEOUT_S = 60

RECORD = """() => {
  const rec = {working: []};
  rec.timer = setInterval(() => {
    const working = document.querySelector('#mars-verdict .mars-verdict-working');
    if (working) rec.working.push(working.textContent);
  }, 20);
  window.__rec = rec;
}"""
STOP = "() => { clearInterval(window.__rec.timer); return window.__rec.working; }"


class SlowFakeEngine(FakeEngine):
    """Answers at once, but the question :data:`SLOW`, whose answer streams for
    :data:`STREAM_S` seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.analyzed = threading.Event()  # an analysis has ended (the examples' included)

    def analyze(self, question, settings=None, *, progress=None, on_text=None,
                should_stop=None):
        if question.strip() == SLOW and on_text:
            text, started = "", time.monotonic()
            while time.monotonic() - started < STREAM_S:
                time.sleep(0.1)
                text += "a"
                on_text(text)
        try:
            return super().analyze(question, settings, progress=progress, on_text=on_text,
                                   should_stop=should_stop)
        finally:
            self.analyzed.set()


@pytest.fixture(scope="module")
def slow_url(tmp_path_factory):
    from mars_demo.ui import build_demo, launch_options

    engine = SlowFakeEngine()
    demo = build_demo(engine, example_cache=tmp_path_factory.mktemp("examples"))
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **launch_options(demo))
    assert engine.analyzed.wait(WARM_TIMEOUT_S), "no analysis taught the page its waits"
    yield f"http://127.0.0.1:{port}"
    demo.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_wait_overrun_is_said_while_it_lasts(browser, slow_url, width):  # noqa: F811
    page = open_page(browser, slow_url, width=width)
    try:
        page.fill("#mars-question textarea", SLOW)
        before = page.evaluate(SHOWN_ANALYSIS)
        page.evaluate(RECORD)
        page.click("#mars-ask")
        wait_verdict(page, before)
        working = page.evaluate(STOP)
        said = [text for text in working if text.strip()]
        # the press's "working out" (from the browser), the wait of analyses like it, then,
        # once past it, that this one takes longer
        expected = [i for i, text in enumerate(said) if "took about" in text]
        overrun = [text for text in said if "taking longer" in text]
        assert expected and overrun, sorted(set(said))
        assert "taking longer" not in said[expected[0]]
        assert texts.VERDICT_OVERRUN.split("{")[0].strip() in overrun[-1]
        # and the seconds count on while it lasts
        counts = sorted({int(text.split("so far")[0].split()[-2]) for text in overrun})
        assert len(counts) >= 2, overrun[-3:]
        # the verdict replaces it at the end
        assert not page.locator("#mars-verdict .mars-verdict-working").count()
    finally:
        page.close()
