"""Hostile clients against a public page's server, round two: half-open connections, one client's
many connections, IPv6 neighbours, foreign web sites, Gradio's monitoring, a long main answer and
made-up token ids. Everything on loopback; timeouts only keep a hung server from hanging the run.
"""

from __future__ import annotations

import json
import select
import socket
import time

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from test_hostile import (
    QUESTION,
    GatedEngine,
    api_data,
    call_result,
    public_page,
    ten_analyses,
    via_proxy,
)
from ui_helpers import FakeEngine, running_app

from mars_demo import serve as app
from mars_demo.hosting.clients import ClientIdentity

WAIT_S = 60
HEADER_TIMEOUT_S = 2


@pytest.fixture(scope="module")
def space(tiny_models):
    """``app.py`` as a Space with the tiny models and a 2-second header timeout."""
    with running_app(tiny_models, "--header-timeout", str(HEADER_TIMEOUT_S),
                     env={"SPACE_ID": "someone/mars-demo"}) as url:
        yield url


def address_of(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def is_closed(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (what it sent before, if anything, is read)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        while sock.recv(65536):
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
    except OSError:
        pass
    return True


def wait_closed(socks: list[socket.socket]) -> list[socket.socket]:
    """The sockets still open after waiting up to WAIT_S for the server to close them all."""
    deadline = time.monotonic() + WAIT_S
    open_ = list(socks)
    while open_ and time.monotonic() < deadline:
        open_ = [s for s in open_ if not is_closed(s)]
        time.sleep(0.2)
    return open_


# --- half-open connections ----------------------------------------------------------------------


def test_connections_that_never_finish_their_headers_are_closed(space):
    """Before, uvicorn kept them open for good (1,030 of them refused every other connection).
    Now each is closed once it has taken the header timeout, also a kept-alive connection that
    starts a second request and stops; the server goes on serving."""
    host, port = address_of(space)
    half_open = []
    for i in range(50):
        s = socket.create_connection((host, port), timeout=WAIT_S)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 81.2.90.%d\r\n" % (i + 1))
        half_open.append(s)
    kept = socket.create_connection((host, port), timeout=WAIT_S)
    kept.sendall(b"GET /gradio_api/info HTTP/1.1\r\nHost: x\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += kept.recv(65536)
    kept.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # the second request stops half-way
    half_open.append(kept)
    try:
        assert wait_closed(half_open) == []
        assert httpx.get(space, timeout=WAIT_S).status_code == 200
    finally:
        for s in half_open:
            s.close()


def test_one_client_holds_a_limited_number_of_connections():
    """A bare host (the connection is the client): a client that opens 100 connections keeps 20
    (the limit here); the others are answered 429 and closed. Another client is served
    meanwhile, and the first one again once its connections are gone."""
    with public_page(FakeEngine(), identity=ClientIdentity.for_deployment(),
                     access={"connections_per_client": 20}) as (_, url):
        host, port = address_of(url)
        socks = [socket.create_connection((host, port), source_address=("127.0.0.2", 0),
                                          timeout=WAIT_S) for _ in range(100)]
        try:
            time.sleep(0.5)
            refused = []
            for s in socks:
                readable, _, _ = select.select([s], [], [], 0.05)
                if readable and s.recv(4096).startswith(b"HTTP/1.1 429"):
                    refused.append(s)
            assert len(refused) == 80
            with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3")) as other:
                assert other.get(url, timeout=WAIT_S).status_code == 200
        finally:
            for s in socks:
                s.close()
        deadline = time.monotonic() + WAIT_S
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")) as first:
            while first.get(url, timeout=WAIT_S).status_code != 200:
                assert time.monotonic() < deadline
                time.sleep(0.2)


# --- IPv6 ----------------------------------------------------------------------------------------


def v6(network: str, i: int) -> str:
    return f"{network}::{i + 1:x}"


@pytest.mark.parametrize("deployment", ["space", "proxy"])
def test_an_ipv6_client_is_its_64_network(deployment):
    """Ten analyses from ten addresses of one /64 (a Space's proxy, or the host's own proxy,
    appended them): one client, as one address would be; another /64 is another client."""
    engine = GatedEngine()
    identity = (ClientIdentity.for_deployment(space=True) if deployment == "space"
                else ClientIdentity.for_deployment(trusted_proxies=["127.0.0.1"]))
    with public_page(engine, identity=identity) as (_, url):
        try:
            codes = ten_analyses(url, headers_of=lambda i: via_proxy(v6("2a01:4f8:1:2", i)))
            assert codes == [200] + [429] * 9
            other = ten_analyses(url, headers_of=lambda i: via_proxy(v6("2a01:4f8:1:3", i)))
            assert other[0] == 200
        finally:
            engine.gate.set()


def test_the_host_may_widen_an_ipv6_client_to_its_56_network():
    engine = GatedEngine()
    identity = ClientIdentity.for_deployment(space=True, ipv6_prefix=56)
    with public_page(engine, identity=identity) as (_, url):
        try:  # ten /64 networks of one /56
            codes = ten_analyses(url, headers_of=lambda i: via_proxy(f"2a01:4f8:1:2{i:02x}::1"))
            assert codes == [200] + [429] * 9
            assert ten_analyses(url, headers_of=lambda i: via_proxy("2a01:4f8:1:300::1"))[0] == 200
        finally:
            engine.gate.set()


def test_the_connections_own_ipv6_address_is_keyed_by_its_network_too():
    bare = ClientIdentity.for_deployment()
    assert bare.of({"client": ("2a01:4f8:1:2::7", 1), "headers": []}) == "2a01:4f8:1:2::/64"
    assert bare.connection_key("2a01:4f8:1:2:ffff::1") == "2a01:4f8:1:2::/64"
    assert bare.of({"client": ("::ffff:81.2.3.4", 1), "headers": []}) == "81.2.3.4"
    proxy = ClientIdentity.for_deployment(trusted_proxies=["127.0.0.1"])
    assert proxy.of({"client": ("::ffff:127.0.0.1", 1),  # a server listening on "::"
                     "headers": [(b"x-forwarded-for", b"2a01:4f8:1:2::9")]}) == "2a01:4f8:1:2::/64"
    assert proxy.connection_key("127.0.0.1") is None  # the proxy's connections: not capped here


@pytest.mark.parametrize(("argv", "env"), [(["--ipv6-prefix", "56"], {}),
                                           ([], {"MARS_DEMO_IPV6_PREFIX": "56"})])
def test_the_ipv6_prefix_comes_from_a_flag_or_its_variable(argv, env):
    access = app.parse_args(argv, env={"SPACE_ID": "a/b", **env}).access
    assert access.identity.ipv6_prefix == 56
    assert access.client_of({"client": ("10.0.0.1", 1), "headers": [
        (b"x-forwarded-for", b"2a01:4f8:1:2ff::1")]}) == "2a01:4f8:1:200::/56"


def test_bad_server_options_are_refused_by_name(capsys):
    for argv in (["--ipv6-prefix", "7"], ["--header-timeout", "soon"],
                 ["--allowed-origins", "evil.example/path"]):
        with pytest.raises(SystemExit):
            app.parse_args(argv, env={"SPACE_ID": "a/b"})
        assert argv[0] in capsys.readouterr().err


# --- foreign web sites ---------------------------------------------------------------------------


def preflight(url: str, host: str, origin: str, **headers: str) -> httpx.Response:
    """The browser's question before a cross-origin POST of ``origin``'s page to /analyze."""
    return httpx.options(f"{url}/gradio_api/call/analyze", timeout=WAIT_S, headers={
        "Host": host, "Origin": origin, "Access-Control-Request-Method": "POST", **headers})


def test_a_foreign_web_site_is_refused_and_its_origin_never_reflected(monkeypatch):
    """Reached by a host name, Gradio reflected any Origin with credentials: any web site could
    make its visitors' browsers call /analyze. Now only the page's own origin and those the host
    named are answered; a foreign one is refused before anything runs."""
    monkeypatch.setenv("SPACE_ID", "someone/mars-demo")
    monkeypatch.setenv("SPACE_HOST", "someone-mars-demo.hf.space")
    engine = FakeEngine()
    with public_page(engine, access={"allowed_origins": ["https://friend.example"],
                                     "hosts": ["mars.example.org", "mars.proxy.example"]}
                     ) as (demo, url):
        demo.share_url = "https://abc123.gradio.live/"  # as --share would have it
        data = api_data(url, "analyze", QUESTION)
        host = "mars.example.org"
        evil = preflight(url, host, "https://evil.example")
        assert evil.status_code == 403 and "access-control-allow-origin" not in evil.headers
        sent = httpx.post(f"{url}/gradio_api/call/analyze", json={"data": data}, timeout=WAIT_S,
                          headers={"Host": host, "Origin": "https://evil.example"})
        assert sent.status_code == 403 and "access-control-allow-origin" not in sent.headers
        assert "evil.example" in sent.json()["detail"]
        assert engine.calls == []
        for origin, via in ((f"https://{host}", {"X-Forwarded-Proto": "https"}),
                            ("https://friend.example", {}),
                            ("https://someone-mars-demo.hf.space", {}),
                            ("https://abc123.gradio.live", {}),
                            ("https://mars.proxy.example",  # a proxy that ends TLS
                             {"X-Forwarded-Host": "mars.proxy.example",
                              "X-Forwarded-Proto": "https"})):
            ok = preflight(url, host, origin, **via)
            assert ok.status_code == 200, origin
            assert ok.headers["access-control-allow-origin"] == origin
            sent = httpx.post(f"{url}/gradio_api/call/analyze", json={"data": data},
                              timeout=WAIT_S, headers={"Host": host, "Origin": origin, **via,
                                                       **via_proxy(f"81.2.91.{len(origin)}")})
            assert sent.status_code == 200 and sent.headers["access-control-allow-origin"] == origin
            call_result(url, "analyze", sent.json()["event_id"])
        # X-Forwarded-Host counts only from the deployment's proxy: not on a bare host
    with public_page(FakeEngine(), identity=ClientIdentity.for_deployment()) as (_, url):
        forged = preflight(url, "127.0.0.1", "http://evil.example",
                           **{"X-Forwarded-Host": "evil.example"})
        assert forged.status_code == 403


def test_allowed_origins_come_from_a_flag():
    access = app.parse_args(["--host", "0.0.0.0", "--allowed-origins",
                             "https://a.example, HTTPS://B.example:443"], env={}).access
    assert access.allowed_origins == ("https://a.example", "https://b.example")


# --- Gradio's routes a public page closes -------------------------------------------------------


def test_monitoring_and_deep_links_are_closed(space):
    for path in ("/monitoring", "/monitoring/summary", "/monitoring/some-key",
                 "/monitoring/some-key/dashboard", "/gradio_api/deep_link?session_hash=x"):
        assert httpx.get(f"{space}{path}", timeout=WAIT_S).status_code == 404, path


# --- the LLM's work -----------------------------------------------------------------------------


def test_a_long_main_answer_counts_and_is_refused_by_how_much(space):
    """The audit's /score: a 1,500-character main answer with two short samples kept the engine
    busy for seconds and took gigabytes. It counts with the samples now."""
    client = Client(space, verbose=False, headers=via_proxy("81.2.92.1"))
    long_answer = ("Mars is the red planet of the solar system. " * 40)[:1500]
    with pytest.raises(AppError) as refused:
        client.predict(json.dumps({"question": QUESTION, "greedy": long_answer,
                                   "samples": ["Mars", "It is Mars"]}), api_name="/score")
    message = str(refused.value)
    assert "2 x 1500 = 3000 characters" in message and "at most 2560" in message
    assert "440 over" in message
    one = client.predict(json.dumps({"question": QUESTION, "greedy": long_answer,
                                     "samples": ["Mars"]}), api_name="/score")
    assert one["greedy"]["text"] == long_answer.strip()


@pytest.mark.parametrize(("ids", "shown"), [([999999], "id 999999 (position 1)"),
                                            ([5, -3], "id -3 (position 2) is negative"),
                                            ([2**40], f"id {2**40} (position 1)")])
def test_made_up_token_ids_are_refused_by_name(space, ids, shown):
    client = Client(space, verbose=False, headers=via_proxy("81.2.93.1"))
    answers = {"question": QUESTION, "greedy": "Mars", "samples": ["Mars"], "prompt_token_ids": ids}
    with pytest.raises(AppError) as refused:
        client.predict(json.dumps(answers), api_name="/score")
    message = str(refused.value)
    assert shown in message and "Something went wrong" not in message
    ok = client.predict(json.dumps({**answers, "prompt_token_ids": [5, 6, 7]}), api_name="/score")
    assert ok["prompt_token_ids"] == [5, 6, 7]


def test_a_long_prompt_is_refused_before_the_model_reads_it(space):
    client = Client(space, verbose=False, headers=via_proxy("81.2.94.1"))
    answers = {"question": QUESTION, "greedy": "Mars", "samples": ["Mars"],
               "prompt_token_ids": [5] * 2100}
    with pytest.raises(AppError, match=r"2100 token ids; this public page allows at most 2048 "
                                       r"\(52 over\)"):
        client.predict(json.dumps(answers), api_name="/score")
