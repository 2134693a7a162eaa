"""A visitor's result is theirs until they leave (mars_demo/ui/guards/sessions.py): one client's cheap
requests, each naming a new browser session, never erase another visitor's result, and one client
keeps a few sessions. Against a public page served on loopback; timeouts only keep a hung server
from hanging the run.
"""

from __future__ import annotations

import html
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest
from test_hostile import PAGE_OPTIONS, QUESTION, public_page, via_proxy
from test_hostile_memory import CachedConfig
from ui_helpers import FakeEngine, event_of, page_event, queue_join

from mars_demo import texts
from mars_demo.ui.guards import sessions

ATTACKER, VISITOR = "81.2.86.1", "81.2.86.2"
FLOOD = 2000  # cheap requests of the attacker, each in a new session
LIMIT_MIB = 50.0  # what the server's memory (this process's, it serves here) may grow by over them


def cheap_request(url: str, config: dict, i: int, http: httpx.Client) -> int:
    """The ``i``-th of the attacker's cheap requests, in turn through every route that made a
    session: a component server function, the page's two events outside the queue (Ask's ready
    state, the re-score check) and a queued banner. Its HTTP status."""
    session = uuid.uuid4().hex[:11]
    headers = via_proxy(ATTACKER)
    kind = i % 4
    if kind == 0:
        return http.post(f"{url}/gradio_api/component_server", headers=headers, json={
            "data": None, "component_id": 1, "session_hash": session,
            "fn_name": "nothing"}).status_code
    if kind == 3:
        return queue_join(url, "banner", [], session_hash=session, http=http, headers=headers,
                          config=config).status_code
    dep = event_of(config, ("_ask_ready", "rescore_wanted")[kind - 1])
    data = [] if kind == 1 else [None, *PAGE_OPTIONS]
    return http.post(f"{url}/gradio_api/run/predict", headers=headers, json={
        "data": data, "fn_index": dep["id"], "session_hash": session}).status_code


def check_the_visitors_result(url: str, session: str, http: httpx.Client) -> None:
    """The visitor's toggle, colouring and re-scoring still show its own result."""
    headers = via_proxy(VISITOR)
    toggled = page_event(url, "show_scoring", [None, "length_normalized", "weight"],
                         session_hash=session, headers=headers, http=http)
    assert 'data-scoring="length_normalized"' in toggled["mars-answer"]
    assert html.escape(QUESTION) in toggled["mars-answer"]
    coloured = page_event(url, "show_scoring", [None, "mars", "probability"],
                          session_hash=session, headers=headers, http=http)
    assert html.escape(texts.LEGENDS["probability"][2]) in coloured["mars-answer"]
    options = [*PAGE_OPTIONS[:6], "softmax", *PAGE_OPTIONS[7:]]
    rescored = page_event(url, "rescore_options", [None, "mars", *options],
                          session_hash=session, headers=headers, http=http)
    assert "normalization softmax" in rescored["mars-progress"]
    assert html.escape(QUESTION) in rescored["mars-answer"]


@pytest.mark.slow  # 2,000 requests, twice
@pytest.mark.parametrize("rate", ["page", "none"])
def test_cheap_requests_never_erase_another_visitors_result(rate):
    """Before, about 520 of them (``/component_server``: each made a session, then answered
    404; ``/run/predict`` of a non-queued event) made Gradio drop its least recently used
    session, result or not: the visitor's toggle then returned empty updates. Now
    ``/component_server`` is closed, a request outside the queue leaves no session, and a
    session holding a result is never dropped for an empty one; also with the page's rate of
    requests outside the queue turned off (``rate="none"``), so that all of them run. The
    server's memory grows by at most LIMIT_MIB over them."""
    access = {} if rate == "page" else {"direct_rate": None, "view_share": None}
    with public_page(FakeEngine(), access=access) as (demo, url), \
            httpx.Client(timeout=60) as http:
        config = http.get(f"{url}/config").json()
        session = uuid.uuid4().hex[:11]
        page_event(url, "ask", [QUESTION, "mars", *PAGE_OPTIONS], session_hash=session,
                   headers=via_proxy(VISITOR), http=http)
        before = psutil.Process().memory_info().rss / 2**20
        with ThreadPoolExecutor(max_workers=8) as pool:
            codes = list(pool.map(lambda i: cheap_request(url, config, i, http), range(FLOOD)))
        grown = psutil.Process().memory_info().rss / 2**20 - before
        print(f"{FLOOD} cheap requests ({rate}): RSS {grown:+.1f} MiB")
        assert grown <= LIMIT_MIB, f"{FLOOD} cheap requests grew the server by {grown:.1f} MiB"
        assert codes[0::4] == [404] * (FLOOD // 4)  # no server functions on this page
        # the re-score check with nothing on screen stops its chain with a (hidden) error
        assert set(codes[1::4]) | set(codes[3::4]) <= {200, 429}
        assert set(codes[2::4]) <= {500, 429}
        if rate == "none":
            assert codes[1::4].count(200) == FLOOD // 4
        holder = demo.server_app.state_holder
        assert session in holder.session_data
        assert len(holder.session_data) <= 1 + 4  # the visitor's, and banners still queued
        check_the_visitors_result(url, session, http)


def test_one_client_keeps_a_few_sessions_with_results():
    """A client with results in many sessions keeps the most recently used
    RESULTS_PER_CLIENT of them; another visitor's result stays."""
    with public_page(FakeEngine()) as (demo, url), httpx.Client(timeout=60) as http:
        visitor = uuid.uuid4().hex[:11]
        page_event(url, "ask", [QUESTION, "mars", *PAGE_OPTIONS], session_hash=visitor,
                   headers=via_proxy(VISITOR), http=http)
        mine = [uuid.uuid4().hex[:11] for _ in range(sessions.RESULTS_PER_CLIENT + 4)]
        for i, session in enumerate(mine):
            page_event(url, "ask", [f"Question {i}?", "mars", *PAGE_OPTIONS],
                       session_hash=session, headers=via_proxy(ATTACKER), http=http)
        held = demo.server_app.state_holder.session_data
        assert [s for s in mine if s in held] == mine[-sessions.RESULTS_PER_CLIENT:]
        check_the_visitors_result(url, visitor, http)


def test_sessions_without_a_result_make_way_for_none_with_one(monkeypatch):
    """The holder's order of letting go, on a served page's holder: past MAX_EMPTY sessions
    without a result the oldest of those go, never one with a result, and one client makes at
    most EMPTY_PER_CLIENT of them."""
    monkeypatch.setattr(sessions, "MAX_EMPTY", 30)
    with public_page(FakeEngine()) as (demo, url), httpx.Client(timeout=60) as http:
        visitor = uuid.uuid4().hex[:11]
        page_event(url, "ask", [QUESTION, "mars", *PAGE_OPTIONS], session_hash=visitor,
                   headers=via_proxy(VISITOR), http=http)
        holder = demo.server_app.state_holder
        for i in range(100):  # each its own client
            with sessions.made_by(f"10.0.{i // 200}.{i % 200}"):
                holder[f"empty-{i}"]
        assert visitor in holder.session_data
        assert len(holder.session_data) == 1 + 30
        assert "empty-99" in holder.session_data and "empty-69" not in holder.session_data
        with sessions.made_by("10.9.9.9"):
            for i in range(sessions.EMPTY_PER_CLIENT + 5):
                holder[f"mine-{i}"]
        mine = [s for s in holder.session_data if s.startswith("mine-")]
        assert len(mine) == sessions.EMPTY_PER_CLIENT and visitor in holder.session_data


@pytest.mark.slow  # 512 analyses
def test_one_48_keeps_its_share_of_the_stored_results():
    """The attack: 512 Asks (the example store answers them in a tenth of a second) from 64 /64s
    of one IPv6 /48, two at a time (what the queue lets a /48 run), each /64 keeping its 8
    results. The /64s of a /48 were not grouped: they filled the 500 places and erased another
    visitor's result (its re-render went from 293,517 bytes to 682). Now a /48 keeps
    RESULTS_PER_NETWORK of them together, and the visitor's result stays."""
    with public_page(FakeEngine()) as (demo, url), CachedConfig(timeout=60) as http:
        visitor = uuid.uuid4().hex[:11]
        page_event(url, "ask", [QUESTION, "mars", *PAGE_OPTIONS], session_hash=visitor,
                   headers=via_proxy(VISITOR), http=http)

        def ask(i: int) -> None:
            page_event(url, "ask", [f"Question {i}?", "mars", *PAGE_OPTIONS],
                       headers=via_proxy(f"2a01:4f8:9:{i % 64:x}::1"), http=http)

        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(ask, range(64 * sessions.RESULTS_PER_CLIENT)))
        holder = demo.server_app.state_holder
        assert visitor in holder.session_data
        check_the_visitors_result(url, visitor, http)
        theirs = [s for s in holder.results if holder.client.get(s, "").startswith("2a01:4f8:9:")]
        assert len(theirs) == sessions.RESULTS_PER_NETWORK == 32, len(theirs)
