"""A public page's memory stays flat however many results it shows and however many sessions come
(mars_demo/ui/memory.py): measured as the server's resident memory (RSS) over two batches of
equal size after a warm-up batch, the second batch may add at most half of what the first added
(or a few MiB of allocator noise). Before, Gradio kept a copy of every result's outputs per result
in the session (about 1 MB a result here) and about 0.2 MB per new session, for good.

Nothing asserts on time; timeouts only keep a hung server from hanging the run.
"""

from __future__ import annotations

import time
import uuid

import httpx
import psutil
import pytest
from test_hostile import QUESTION, public_page, via_proxy
from ui_helpers import APP_PIDS, FakeEngine, page_event, running_app

from mars_demo.engine import Engine
from mars_demo.ui import memory

NOISE_MIB = 12.0  # what RSS moves by on its own over a batch (allocator, caches), with a margin
SAMPLES = [f"Sample {i}: Mars is the red planet, the fourth from the Sun in our solar system."
           for i in range(20)]


def rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def batch_growth(pid: int, one, size: int) -> tuple[float, float]:
    """What the server's RSS grew by over a first and a second batch of ``size`` calls of
    ``one(i)``, after a warm-up batch of the same size."""
    marks = []
    for batch in range(3):
        for i in range(size):
            one(batch * size + i)
        time.sleep(0.5)
        marks.append(rss_mib(pid))
    return marks[1] - marks[0], marks[2] - marks[1]


def assert_flat(first: float, second: float) -> None:
    assert second <= max(first / 2, NOISE_MIB), (
        f"RSS grew by {first:.1f} MiB over the first batch and {second:.1f} MiB over the second")


class CachedConfig(httpx.Client):
    """An HTTP client that fetches the page's /config once (page_event reads it every time)."""

    def get(self, url, *args, **kwargs):
        if str(url).endswith("/config"):
            if not hasattr(self, "config"):
                self.config = super().get(url, *args, **kwargs)
            return self.config
        return super().get(url, *args, **kwargs)


@pytest.fixture(scope="module")
def space(tiny_models):
    with running_app(tiny_models, env={"SPACE_ID": "someone/mars-demo"}) as url:
        yield url


def test_new_sessions_leave_nothing_behind(space):
    """300 page loads a batch (the banner, each in a new browser session): about 64 MiB a
    batch before, nothing now."""
    with CachedConfig(timeout=60) as http:
        def banner(i: int) -> None:
            page_event(space, "banner", headers=via_proxy(f"81.2.{i // 200}.{i % 200 + 1}"),
                       http=http)

        assert_flat(*batch_growth(APP_PIDS[space], banner, 300))


@pytest.fixture(scope="module")
def big_result(tiny_settings):
    """A real analysis of 20 pasted samples of about 80 characters (the tiny models)."""
    engine = Engine(tiny_settings)
    engine.load()
    return engine.score({"question": QUESTION, "greedy": SAMPLES[0], "samples": SAMPLES})


@pytest.mark.slow  # 120 results (about a minute and a half)
def test_results_in_one_session_leave_nothing_behind(big_result):
    """A visitor asks again and again in one session (each result of 20 samples, about 1 MB of
    tables and plots on the page): 40 results a batch kept about 40 MiB before."""
    engine = FakeEngine(result=big_result)
    session = uuid.uuid4().hex[:11]
    page = [2, 0.5, 4, 0, "auto", "model", "sum", "equal", "strict", "default"]
    with public_page(engine) as (demo, url), CachedConfig(timeout=60) as http:
        def ask(i: int) -> None:
            shown = page_event(url, "ask", [f"Question {i}?", "mars", *page],
                               session_hash=session, headers=via_proxy("81.2.80.1"), http=http)
            assert f"Question {i}?" in shown["mars-answer"]

        assert_flat(*batch_growth(psutil.Process().pid, ask, 40))
        # the page still re-scores the visitor's last result from the session
        again = page_event(url, "rescore_options", [None, "mars", *page[:6], "softmax",
                                                    *page[7:]],
                           session_hash=session, headers=via_proxy("81.2.80.1"), http=http)
        assert "Question 119?" in again["mars-answer"]
        held = demo.server_app.state_holder.session_data[session]
        assert held.config_values == {}
        assert set(held.blocks_config.blocks) <= set(demo.default_config.blocks)


def test_finished_events_and_idle_sessions_are_let_go(monkeypatch):
    """What the memory test measures, counted: once read, a finished event's records go at the
    next sweep; an unread result after FINISHED_KEEP_S; a session with a result after
    SESSION_IDLE_S without an event; a session with no result at once."""
    monkeypatch.setattr(memory, "SWEEP_S", 0.0)
    engine = FakeEngine()
    page = [2, 0.5, 4, 0, "auto", "model", "sum", "equal", "strict", "default"]
    with public_page(engine) as (demo, url), CachedConfig(timeout=60) as http:
        queue, holder = demo._queue, demo.server_app.state_holder
        for i in range(30):
            page_event(url, "banner", headers=via_proxy(f"81.2.81.{i + 1}"), http=http)
        session = uuid.uuid4().hex[:11]
        page_event(url, "ask", [QUESTION, "mars", *page], session_hash=session,
                   headers=via_proxy("81.2.82.1"), http=http)
        assert len(queue.event_ids_to_events) <= 3  # the last events, not yet swept
        assert len(queue.event_analytics) <= 3
        assert list(holder.session_data) == [session]  # the one with a result

        monkeypatch.setattr(memory, "SESSION_IDLE_S", 0.0)
        page_event(url, "banner", headers=via_proxy("81.2.82.2"), http=http)
        assert session not in holder.session_data
