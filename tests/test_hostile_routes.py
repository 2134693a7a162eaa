"""Hostile clients against a public page's routes, round four: every route the server answers is
on a list (mars_demo/ui/guards/route_list.py), nothing is sent into an event after the queue admitted
it, a file input that is no upload is refused whatever route delivers it, and upload progress
keeps no entry for ids no upload carries (mars_demo/ui/guards/uploads.py). Everything on loopback; no
name is looked up (a resolver in the serving process fails the test when asked for one);
timeouts only keep a hung server from hanging the run.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import re
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from test_hostile import (
    DOCS,
    PAGE_OPTIONS,
    QUESTION,
    Recorder,
    api_data,
    call,
    loopback_client,
    nginx_in_front,
    public_page,
    via_proxy,
    write_run,
)
from ui_helpers import FakeEngine, event_of, free_port, queue_join

from mars_demo import texts
from mars_demo.hosting.clients import ClientIdentity
from mars_demo.ui import build_demo, launch_options
from mars_demo.ui.guards import route_list
from mars_demo.ui.views.eval_view import EvaluationView

WAIT_S = 60
ATTACKER, VISITOR = "81.2.95.1", "81.2.95.2"
DEPLOYMENTS = ["space", "bare", pytest.param("nginx", marks=pytest.mark.slow)]


@pytest.fixture
def no_lookups(monkeypatch):
    """The names this process (where the page serves) is asked to resolve: any name but
    ``localhost`` fails at once (and is listed), so nothing leaves the machine."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def local(host) -> bool:
        name = host.decode() if isinstance(host, bytes) else str(host)
        try:
            ipaddress.ip_address(name.strip("[]"))
            return True
        except ValueError:
            return name in ("localhost", "")

    def getaddrinfo(host, *args, **kwargs):
        if host is not None and not local(host):
            asked.append(str(host))
            raise socket.gaierror(socket.EAI_NONAME, "the tests resolve no name")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket, "gethostbyname",
                        lambda host: getaddrinfo(host, None)[0][4][0])
    return asked


@contextlib.contextmanager
def deployed(engine, kind: str, tmp_path: Path, **build):
    """A public page over ``engine`` as ``kind`` deploys it: "space" (a client is the address
    the Space's proxy appended), "bare" (the connection's address) or "nginx" (the documented
    nginx in front, a real one); yields (demo, url, attacker, visitor), an HTTP client for each
    of two clients."""
    if kind == "space":
        with public_page(engine, **build) as (demo, url), \
                httpx.Client(headers=via_proxy(ATTACKER), timeout=WAIT_S) as attacker, \
                httpx.Client(headers=via_proxy(VISITOR), timeout=WAIT_S) as visitor:
            yield demo, url, attacker, visitor
        return
    proxy = ["127.0.0.10"] if kind == "nginx" else []
    identity = ClientIdentity.for_deployment(trusted_proxies=proxy)
    with public_page(engine, identity=identity, **build) as (demo, app_url), \
            (nginx_in_front(app_url, tmp_path) if proxy else contextlib.nullcontext(app_url)
             ) as url, \
            loopback_client("127.0.0.2") as attacker, loopback_client("127.0.0.3") as visitor:
        yield demo, url, attacker, visitor


# --- every route on a list ---------------------------------------------------------------------


def test_every_route_the_server_answers_has_a_policy_and_an_unlisted_one_is_refused():
    """The routes are those of the live app's router (Starlette's, with the routes of Gradio's
    included router), not a list of this test's. A route added without a policy is reported and
    refused on a public page; every refused one answers 404 before anything runs."""
    engine = FakeEngine()
    with public_page(engine) as (demo, url):
        app = demo.server_app
        keys = [key for route in route_list.live_routes(app) for key in route_list.route_keys(route)]
        assert len(keys) > 60 and f"POST {route_list.API}/queue/join" in keys
        assert route_list.unlisted(app) == []

        @app.get("/new-door")
        def new_door():  # what a Gradio upgrade might add
            engine.calls.append(("new door", None))
            return {"opened": True}

        assert route_list.unlisted(app) == ["GET /new-door"]
        assert httpx.get(f"{url}/new-door", timeout=WAIT_S).status_code == 404
        assert engine.calls == []
        for path in ("/gradio_api/openapi.json", "/gradio_api/user", "/pwa_icon/99999",
                     "/gradio_api/vibe-code", "/gradio_api/stream/x/1/2/playlist.m3u8",
                     "/gradio_api/proxy=http://127.0.0.1:1/x", "/no/such/route"):
            assert httpx.get(f"{url}{path}", timeout=WAIT_S).status_code == 404, path
        for path in ("/gradio_api/stream/some-event", "/gradio_api/stream/some-event/close",
                     "/gradio_api/vibe-edit", "/login"):
            assert httpx.post(f"{url}{path}", json={}, timeout=WAIT_S).status_code == 404, path
        for path in ("/", "/config", "/gradio_api/info", "/gradio_api/queue/status",
                     "/theme.css"):
            assert httpx.get(f"{url}{path}", timeout=WAIT_S).status_code == 200, path
    # a local page keeps Gradio's routes as they are
    local = build_demo(FakeEngine())
    local.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True,
                 quiet=True, **launch_options(local))
    try:
        assert httpx.get(f"{local.local_url}gradio_api/openapi.json",
                         timeout=WAIT_S).status_code == 200
    finally:
        local.close()


def test_the_docs_list_every_route_with_its_policy():
    """docs/public-page.md's table of routes is route_list.ROUTES, policy by policy."""
    text = DOCS.read_text(encoding="utf-8")
    listed: dict[str, set[str]] = {}
    for line in text.splitlines():
        row = re.match(r"\s*\|\s*(served[^|]*|refused)\s*\|(.*)\|\s*$", line)
        if row:
            listed[row.group(1).strip()] = set(re.findall(r"`([A-Z*]+ [^`]+)`", row.group(2)))
    expected: dict[str, set[str]] = {}
    for key, policy in route_list.ROUTES.items():
        expected.setdefault(policy, set()).add(key)
    assert listed == expected


# --- nothing sent into an admitted event -------------------------------------------------------


class SlowEngine(FakeEngine):
    """Each analysis takes a moment, as a real one does."""

    def analyze(self, question, settings=None, **kwargs):
        time.sleep(0.2)
        return super().analyze(question, settings, **kwargs)


@pytest.mark.parametrize("kind", DEPLOYMENTS)
def test_an_admitted_ask_cannot_be_sent_new_data_and_another_visitor_is_served(kind, tmp_path):
    """The attack: join an Ask, then, while it runs, ``POST /gradio_api/stream/{event_id}`` with
    the same body, and never read the result. The swapped-in body has no event id, so Gradio's
    generator loop called Ask afresh on every step, for ever: the engine ran the attacker's
    question again and again and another visitor's /analyze never started. Now the route is
    refused, the attacker's question runs once, and the visitor's analysis is the engine's next
    (the documented wait: at most the one analysis of that client that came first)."""
    engine = SlowEngine()
    with deployed(engine, kind, tmp_path) as (_, url, attacker, visitor):
        config = attacker.get(f"{url}/config").json()
        body = {"data": [QUESTION, "mars", *PAGE_OPTIONS], "fn_index": event_of(config, "ask")["id"],
                "trigger_id": None, "session_hash": uuid.uuid4().hex[:11], "event_data": None}
        joined = attacker.post(f"{url}/gradio_api/queue/join", json=body)
        assert joined.status_code == 200, joined.text
        event_id = joined.json()["event_id"]
        deadline = time.monotonic() + WAIT_S
        while not engine.calls:
            assert time.monotonic() < deadline, "the attacker's Ask never started"
            time.sleep(0.02)
        sent = attacker.post(f"{url}/gradio_api/stream/{event_id}", json=body)
        mine = call(url, "analyze", api_data(url, "analyze", "The visitor's question?"),
                    http=visitor)
        assert mine.status_code == 200, mine.text
        result = threading.Thread(target=lambda: visitor.get(
            f"{url}/gradio_api/call/analyze/{mine.json()['event_id']}", timeout=WAIT_S).read(),
            daemon=True)
        result.start()
        deadline = time.monotonic() + WAIT_S
        asked = [question for question, _ in engine.calls]
        while "The visitor's question?" not in asked and asked.count(QUESTION) <= 3:
            assert time.monotonic() < deadline, asked
            time.sleep(0.05)
            asked = [question for question, _ in engine.calls]
        assert asked.count(QUESTION) == 1, f"the attacker's Ask ran {asked.count(QUESTION)} times"
        assert asked[:2] == [QUESTION, "The visitor's question?"], asked
        assert sent.status_code == 404, sent.text
        result.join(WAIT_S)
        closing = attacker.post(f"{url}/gradio_api/stream/{event_id}/close", json={})
        assert closing.status_code == 404, closing.text


# --- the file-input door on every route --------------------------------------------------------


@contextlib.contextmanager
def gated_show(monkeypatch):
    """The Evaluation view's "Show" waits for the gate it yields (so that another "Show" waits
    in the queue behind it)."""
    gate = threading.Event()
    slow = EvaluationView.shown  # what the event calls, kept or not

    @functools.wraps(slow)  # the event keeps its name
    def gated(self, *args, **kwargs):
        gate.wait(WAIT_S)
        return slow(self, *args, **kwargs)

    monkeypatch.setattr(EvaluationView, "shown", gated)
    try:
        yield gate
    finally:
        gate.set()


def read_result(url: str, session: str, event_id: str, http=httpx) -> dict:
    """The completed message of ``event_id`` in ``session``'s queue stream."""
    with http.stream("GET", f"{url}/gradio_api/queue/data", params={"session_hash": session},
                     timeout=WAIT_S) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if message.get("event_id") == event_id and message.get("msg") == (
                        "process_completed"):
                    return message
    raise AssertionError("no result")


@pytest.mark.parametrize(("public", "route"), [(True, "stream"), (False, "stream"),
                                               (False, "run"), (True, "join")])
def test_a_file_input_that_is_no_upload_is_refused_whatever_route_delivers_it(
        tmp_path, monkeypatch, no_lookups, public, route):
    """The Evaluation view's "Show" given an address (a public name, and this machine's own
    server) or a server path in its report file, through every route that delivers an event's
    data: sent into a "Show" waiting in the queue (``/stream/{event_id}``: on a public page
    refused; on a page only the host opens it reaches the event), a direct ``/run/`` call (a page
    only the host opens has them) and the queue's own door. Before, the first two ran Gradio's
    downloader (it looked the public name up, and made a cache folder named after the address's
    hash). Now nothing is fetched, read or looked up: the queue's door answers 400, the others
    the refusal in the event's own error."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Recorder.hits = []
    runs = tmp_path / "runs"
    write_run(runs / "small", 10)
    addresses = ["https://files.example.org/report.json",
                 f"http://127.0.0.1:{server.server_address[1]}/report.json", "/etc/hostname"]
    outcomes = []
    with gated_show(monkeypatch) as gate:
        if public:
            page = public_page(FakeEngine(), runs_dir=runs)
        else:
            page = contextlib.nullcontext(build_demo(FakeEngine(), runs_dir=runs))
        with page as served:
            demo = served[0] if public else served
            if not public:
                demo.launch(server_name="127.0.0.1", server_port=free_port(),
                            prevent_thread_lock=True, quiet=True, **launch_options(demo))
            url = served[1] if public else demo.local_url.rstrip("/")
            try:
                for address in addresses:
                    outcomes.append(send_file(url, route, address, gate))
            finally:
                gate.set()
                if not public:
                    demo.close()
    server.shutdown()
    for address, (status, detail) in zip(addresses, outcomes):
        if route == "join":
            assert (status, detail) == (400, texts.ACCESS_NO_URLS), address
        elif public and route == "stream":
            assert status == 404, address
        else:
            assert texts.ACCESS_NO_URLS in detail, (address, status, detail)
    assert no_lookups == []  # no name looked up
    assert Recorder.hits == []  # this machine's own server never got a request
    cache = tmp_path / "gradio"
    assert not cache.exists() or list(cache.iterdir()) == []  # nothing downloaded into it


def send_file(url: str, route: str, address: str, gate: threading.Event) -> tuple[int, str]:
    """"Show" with ``address`` as its report file, delivered through ``route``; (the HTTP status,
    what the refusal or the event's error said)."""
    file = {"path": address, "url": address, "orig_name": "report.json",
            "meta": {"_type": "gradio.FileData"}}
    data = [None, file, None]
    headers = via_proxy(ATTACKER)
    gate.set()
    if route == "join":
        joined = queue_join(url, "evaluation_show", data, headers=headers)
        return joined.status_code, joined.json().get("detail", "")
    if route == "run":
        sent = httpx.post(f"{url}/gradio_api/run/evaluation_show", json={"data": data},
                          headers=headers, timeout=WAIT_S)
        return sent.status_code, json.dumps(sent.json())
    gate.clear()
    first = queue_join(url, "evaluation_show", ["small", None, None], headers=headers)  # holds
    session = uuid.uuid4().hex[:11]  # "Show" while the next one waits
    waiting = queue_join(url, "evaluation_show", ["small", None, None], session_hash=session,
                         headers=headers)
    assert first.status_code == waiting.status_code == 200, (first.text, waiting.text)
    event_id = waiting.json()["event_id"]
    config = httpx.get(f"{url}/config", timeout=WAIT_S).json()
    body = {"data": data, "fn_index": event_of(config, "evaluation_show")["id"],
            "session_hash": uuid.uuid4().hex[:11], "event_data": None}
    sent = httpx.post(f"{url}/gradio_api/stream/{event_id}", json=body, headers=headers,
                      timeout=WAIT_S)
    gate.set()
    message = read_result(url, session, event_id)
    return sent.status_code, json.dumps(message.get("output"))


# --- upload progress ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", DEPLOYMENTS)
def test_upload_progress_keeps_nothing_of_ids_no_upload_carries(kind, tmp_path):
    """``GET /gradio_api/upload_progress?upload_id=<made up>`` made Gradio keep an entry per id
    for good (1,200 requests with 60 KB ids: +70 MiB). Now such an id has an entry only while a
    request waits for it (3 s, then 404); the route is under the per-client rate (one client's
    burst, then 429); and a real upload's progress is still reported to the page."""
    import gradio.routes

    with deployed(FakeEngine(), kind, tmp_path, access={"direct_rate": None}) as (
            _, url, attacker, _):
        progress = gradio.routes.file_upload_statuses  # the one the server's routes read

        def made_up(i: int) -> int:
            upload_id = f"{i:05d}" + "x" * 6000
            return attacker.get(f"{url}/gradio_api/upload_progress",
                                params={"upload_id": upload_id}).status_code

        with ThreadPoolExecutor(max_workers=25) as pool:  # within the nginx's 64 connections
            codes = list(pool.map(made_up, range(50)))
        assert set(codes) == {404}, codes
        assert progress._statuses == {} and progress._signals == {}, len(progress._signals)
        # the page's own use: progress asked for, then the upload that carries the id
        upload_id = uuid.uuid4().hex[:11]
        with ThreadPoolExecutor(max_workers=1) as pool:
            asked = pool.submit(attacker.get, f"{url}/gradio_api/upload_progress",
                                params={"upload_id": upload_id})
            time.sleep(0.3)
            uploaded = attacker.post(f"{url}/gradio_api/upload", params={"upload_id": upload_id},
                                     files={"files": ("report.json", b"{}", "application/json")})
            reported = asked.result(WAIT_S)
        assert uploaded.status_code == 200, uploaded.text
        assert reported.status_code == 200 and '"msg": "done"' in reported.text, reported.text
        assert progress._statuses == {} and progress._signals == {}
    (tmp_path / "rated").mkdir()
    with deployed(FakeEngine(), kind, tmp_path / "rated") as (_, url, attacker, visitor):
        with ThreadPoolExecutor(max_workers=30) as pool:  # at once: each 404 takes 3 s
            codes = list(pool.map(lambda i: attacker.get(
                f"{url}/gradio_api/upload_progress", params={"upload_id": f"id{i}"},
                timeout=WAIT_S).status_code, range(30)))
        assert codes.count(429) >= 5 and set(codes) <= {404, 429}, codes
        assert visitor.get(f"{url}/gradio_api/upload_progress", params={"upload_id": "v"}
                           ).status_code == 404  # another client is not held back
