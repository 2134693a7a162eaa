"""A public page's memory stays flat however many results it shows and however many sessions come
(mars_demo/ui/guards/memory.py): measured as the server's resident memory (RSS) over two batches of
equal size after a warm-up batch, the second batch may add at most half of what the first added
(or a few MiB of allocator noise). Before, Gradio kept a copy of every result's outputs per result
in the session (about 1 MB a result here) and about 0.2 MB per new session, for good.

Nothing asserts on time; timeouts only keep a hung server from hanging the run.
"""

from __future__ import annotations

import gc
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest
from test_hostile import QUESTION, GatedEngine, public_page, via_proxy
from ui_helpers import APP_PIDS, FakeEngine, page_event, queue_join, running_app

from mars_demo.engine import Engine
from mars_demo.ui.guards import kept_renders, memory

NOISE_MIB = 12.0  # what RSS moves by on its own over a batch (allocator, caches), with a margin
PAGE = [2, 0.5, 4, 0, "auto", "model", "sum", "equal", "strict", "default"]  # the page's options
SAMPLES = [f"Sample {i}: Mars is the red planet, the fourth from the Sun in our solar system."
           for i in range(20)]


def rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def settled_rss_mib(pid: int) -> float:
    """The server's RSS once what it freed is back with the system. A page served in this
    process: its garbage collected and its heap trimmed here, so that the reading is what the
    page keeps (uncollected garbage and the allocator moved a reading by up to 8 MiB from batch
    to batch, once the idle page trimmed its heap). Another process: read once its idle trim
    is done (within ``IDLE_TRIM_S``; a trim takes milliseconds)."""
    if pid == os.getpid():
        gc.collect()
        memory.trim_heap()
    else:
        time.sleep(memory.IDLE_TRIM_S + 0.5)
    return rss_mib(pid)


def batch_growth(pid: int, one, size: int) -> tuple[float, float]:
    """What the server's RSS grew by over a first and a second batch of ``size`` calls of
    ``one(i)``, after a warm-up batch of the same size (each read settled)."""
    marks = []
    for batch in range(3):
        for i in range(size):
            one(batch * size + i)
        marks.append(settled_rss_mib(pid))
    return marks[1] - marks[0], marks[2] - marks[1]


def assert_flat(first: float, second: float) -> None:
    print(f"RSS grew by {first:+.1f} MiB over the first batch, {second:+.1f} over the second")
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

        assert_flat(*batch_growth(os.getpid(), ask, 40))
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
    next sweep, and the task that processed it (Gradio kept every one for the server's life);
    an unread result after FINISHED_KEEP_S; a session with a result after SESSION_IDLE_S without
    an event; a session with no result at once. The sweep hands the C heap's free memory back
    to the system every TRIM_S."""
    monkeypatch.setattr(memory, "SWEEP_S", 0.0)
    monkeypatch.setattr(memory, "TRIM_S", 0.0)
    trims = []
    monkeypatch.setattr(memory, "trim_heap", lambda: trims.append(1))
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
        assert len(queue._asyncio_tasks) <= 3, len(queue._asyncio_tasks)
        assert len(trims) >= 30
        assert list(holder.session_data) == [session]  # the one with a result

        monkeypatch.setattr(memory, "SESSION_IDLE_S", 0.0)
        page_event(url, "banner", headers=via_proxy("81.2.82.2"), http=http)
        assert session not in holder.session_data


def test_the_heap_is_trimmed_once_the_page_is_idle(monkeypatch):
    """While an analysis runs, the events that finish beside it do not trim the heap (TRIM_S is
    not up); once the analysis is done and nothing else runs, the heap is trimmed; an idle
    moment that comes sooner than IDLE_TRIM_S after a trim is trimmed when that time is up. (The
    soak test reads the server's memory after these trims.)"""
    monkeypatch.setattr(memory, "TRIM_S", 1e9)
    monkeypatch.setattr(memory, "IDLE_TRIM_S", 2.0)
    trims: list[float] = []  # when the page decided on each trim (its clock)
    monkeypatch.setattr(memory, "trim_heap",
                        lambda: trims.append(demo._queue.mars_memory.last_trim))

    def trimmed(count: int) -> None:
        for _ in range(600):  # a hung server fails the test, nothing else waits this long
            if len(trims) >= count:
                return
            time.sleep(0.1)
        raise AssertionError(f"{len(trims)} trims, {count} expected")

    engine = GatedEngine()
    with (public_page(engine) as (demo, url), CachedConfig(timeout=60) as http,
          CachedConfig(timeout=60) as asker, ThreadPoolExecutor(1) as pool):
        asking = pool.submit(page_event, url, "ask", [QUESTION, "mars", *PAGE],
                             headers=via_proxy("81.2.83.1"), http=asker)
        while not engine.started:
            assert not asking.done(), asking.result()
            time.sleep(0.05)
        for i in range(5):
            page_event(url, "banner", headers=via_proxy(f"81.2.83.{i + 2}"), http=http)
        time.sleep(memory.IDLE_TRIM_S + 0.5)
        assert trims == []  # an analysis ran all along
        engine.gate.set()
        assert QUESTION in asking.result()["mars-answer"]
        trimmed(1)
        page_event(url, "banner", headers=via_proxy("81.2.83.9"), http=http)
        trimmed(2)
        assert trims[1] - trims[0] >= memory.IDLE_TRIM_S
        time.sleep(memory.IDLE_TRIM_S + 0.5)
        assert len(trims) == 2  # nothing more to hand back: no trim without an event


def test_the_toggles_views_of_a_result_nobody_holds_go():
    """The toggle's re-renders are kept by result, held weakly: a result replaced in its session
    (the visitor's next one) is gone, and its views go at the next render. They stayed until 32
    newer views pushed them out, about 1.4 MB a pasted scoring of a page (its views of the
    result it no longer holds)."""
    class Result:
        pass

    cache = kept_renders.RenderCache(lambda result, scoring, shade: {"x": f"<p>{scoring}</p>" * 999})
    first = Result()
    cache(first, "mars", "weight")
    cache(first, "length_normalized", "weight")
    assert len(cache._kept) == 2
    del first
    gc.collect()
    second = Result()
    assert cache(second, "mars", "weight") == cache(second, "mars", "weight")
    assert len(cache._kept) == 1  # the views of the result nobody holds went


def test_the_c_heaps_free_memory_can_be_handed_back():
    """glibc's malloc_trim, which the page's sweep calls, is there (Linux with glibc)."""
    assert memory.trim_heap() is True


# --- results nobody reads ----------------------------------------------------------------------

# How long the unread-results flood runs: seconds here; MARS_DEMO_FLOOD_S=200 gives the figure of
# docs/public-page.md.
FLOOD_S = float(os.environ.get("MARS_DEMO_FLOOD_S", "12"))
LIMIT_MIB = 50.0  # what the server's memory may grow by over the flood


def unread_flood(url: str, sessions: list[str], seconds: float, headers, http) -> int:
    """One client asks for the scoring toggle's re-render in ``sessions`` (in turn) again and
    again for ``seconds``, never opening ``/queue/data``; a refused request is sent again at
    once. Returns the re-renders the server took."""
    config = http.get(f"{url}/config").json()
    taken, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        scoring = ("mars", "length_normalized")[taken % 2]
        joined = queue_join(url, "show_scoring", [None, scoring, "weight"],
                            session_hash=sessions[taken % len(sessions)], http=http,
                            headers=headers, config=config)
        if joined.status_code == 200:
            taken += 1
        else:
            assert joined.status_code == 429, joined.text
            time.sleep(0.01)
    return taken


def wait_idle(demo) -> None:
    deadline = time.monotonic() + 120
    while len(demo._queue) or any(demo._queue.active_jobs):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def stream_results(url: str, session: str, http, wait_s: float = 3.0) -> list[dict]:
    """The results ("process_completed") that ``session``'s stream delivers now (it ends once
    the session has nothing pending, or after ``wait_s`` without a message; Gradio breaks off
    the stream of a session it holds no messages for)."""
    results = []
    try:
        with http.stream("GET", f"{url}/gradio_api/queue/data", params={"session_hash": session},
                         timeout=httpx.Timeout(wait_s + 10, read=wait_s)) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    message = json.loads(line[5:])
                    if message.get("msg") == "process_completed":
                        results.append(message)
    except (httpx.ReadTimeout, httpx.RemoteProtocolError):
        pass
    return results


@pytest.mark.slow  # a flood of FLOOD_S seconds
def test_results_nobody_reads_keep_the_servers_memory_flat(big_result, monkeypatch):
    """A client gets a result, then asks for the toggle's re-render again and again without
    reading a result: Gradio kept each one's messages (0.68 MiB an event; 846 to 1,648 MiB in
    200 s), past the keep time too. Now one client keeps MAX_UNREAD unread results, in all its
    sessions together, and the server's memory stays within LIMIT_MIB of where it started.
    Each re-render is made anew here (none kept, as before ui/guards/kept_renders.py), so that each result
    holds its own outputs."""
    monkeypatch.setattr(kept_renders, "MAX_RENDERS", 0)
    engine = FakeEngine(result=big_result)
    client = via_proxy("81.2.83.1")
    sessions = [uuid.uuid4().hex[:11] for _ in range(2)]
    # every re-render the queue takes (the per-client time share would refuse most of them)
    with public_page(engine, access={"view_share": None}) as (demo, url), \
            httpx.Client(timeout=60) as http:
        for session in sessions:
            page_event(url, "ask", [QUESTION, "mars", *PAGE], session_hash=session,
                       headers=client, http=http)
        unread_flood(url, sessions, 2.0, client, http)  # warm-up
        wait_idle(demo)
        before = psutil.Process().memory_info().rss / 2**20
        taken = unread_flood(url, sessions, FLOOD_S, client, http)
        wait_idle(demo)
        grown = psutil.Process().memory_info().rss / 2**20 - before
        queue = demo._queue
        unread = sum(len(queue.pending_event_ids_session.get(s, ())) for s in sessions)
        assert unread <= memory.MAX_UNREAD, (taken, unread)
        delivered = [stream_results(url, s, http) for s in sessions]
        assert sum(map(len, delivered)) <= memory.MAX_UNREAD, (taken, list(map(len, delivered)))
        assert grown <= LIMIT_MIB, f"{taken} re-renders grew the server by {grown:.1f} MiB"
        print(f"{taken} unread re-renders in {FLOOD_S:.0f} s: RSS {grown:+.1f} MiB")
        # the visitor's own result is still there, and shown again as it reads it
        shown = page_event(url, "show_scoring", [None, "length_normalized", "weight"],
                           session_hash=sessions[0], headers=client, http=http)
        assert 'data-scoring="length_normalized"' in shown["mars-answer"]


def test_an_expired_results_messages_leave_with_its_id(monkeypatch):
    """The sweep dropped an expired event's id but left its messages in the session's queue
    until the session had no id left: a later read still delivered 222 results, 198 of them
    older than the keep time. Now its messages go with it."""
    monkeypatch.setattr(memory, "SWEEP_S", 0.0)
    monkeypatch.setattr(memory, "FINISHED_KEEP_S", 0.5)
    monkeypatch.setattr(memory, "MAX_UNREAD", 1000)  # the keep time alone, here
    client = via_proxy("81.2.84.1")
    with public_page(FakeEngine(), access={"view_share": None}) as (demo, url), \
            httpx.Client(timeout=60) as http:
        session = uuid.uuid4().hex[:11]
        page_event(url, "ask", [QUESTION, "mars", *PAGE], session_hash=session, headers=client,
                   http=http)
        sent = 0
        while sent < 8:  # unread
            sent += queue_join(url, "show_scoring", [None, "mars", "weight"],
                               session_hash=session, http=http,
                               headers=client).status_code == 200
        wait_idle(demo)
        time.sleep(0.6)  # they expire; the next event's sweep lets them go
        last = queue_join(url, "show_scoring", [None, "mars", "weight"], session_hash=session,
                          http=http, headers=client)  # and this one is not read yet either
        assert last.status_code == 200
        wait_idle(demo)
        delivered = stream_results(url, session, http, wait_s=1.0)
        assert [m["event_id"] for m in delivered] == [last.json()["event_id"]]
