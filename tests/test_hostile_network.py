"""Hostile clients against a public page's network side, round three: foreign host names (DNS
rebinding) on a bare host and behind the documented nginx on a port of its own, request bodies
that never end, and one IPv6 /48's many /64s. Everything on loopback; timeouts only keep a hung
server from hanging the run.
"""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from test_hostile import (
    QUESTION,
    GatedEngine,
    api_data,
    call,
    call_result,
    nginx_in_front,
    public_page,
    via_proxy,
)
from test_hostile_server import WAIT_S, address_of, is_closed
from ui_helpers import FakeEngine, event_of

from mars_demo import serve as app
from mars_demo import texts
from mars_demo.hosting.clients import ClientIdentity

BARE = ClientIdentity.for_deployment()


def post_analyze(url: str, host: str, origin: str | None, **headers: str) -> httpx.Response:
    """A browser's POST to /analyze, sent to ``url`` naming ``host`` (and ``origin``)."""
    data = api_data(url, "analyze", QUESTION)
    sent = {"Host": host, **({"Origin": origin} if origin else {}), **headers}
    return httpx.post(f"{url}/gradio_api/call/analyze", json={"data": data}, headers=sent,
                      timeout=WAIT_S)


# --- foreign host names ---------------------------------------------------------------------------


def test_a_foreign_host_name_is_refused_before_anything_runs_on_a_bare_host():
    """DNS rebinding: evil.example points its name at the page's address, and its visitors'
    browsers send ``Host: evil.example:PORT`` with ``Origin: http://evil.example:PORT``, the
    same origin. That was served, its origin reflected. Now only the page's own names are
    answered, and an Origin must match the host, the port and the scheme."""
    engine = FakeEngine()
    with public_page(engine, identity=BARE,
                     access={"hosts": ["mars.example.org"],
                             "allowed_origins": ["https://friend.example"]}) as (_, url):
        port = address_of(url)[1]
        for path in ("/", "/config", "/gradio_api/info"):
            page = httpx.get(url + path, headers={"Host": f"evil.example:{port}"},
                             timeout=WAIT_S)
            assert page.status_code == 421, path
            assert texts.ACCESS_UNKNOWN_HOST.format(host=f"evil.example:{port}") == (
                page.json()["detail"])
        for scheme in ("http", "https"):
            foreign = post_analyze(url, f"evil.example:{port}", f"{scheme}://evil.example:{port}")
            assert foreign.status_code == 421 and "access-control-allow-origin" not in foreign.headers
        # X-Forwarded-Host is no one's word on a bare host: the Host still counts
        forged = post_analyze(url, f"evil.example:{port}", None,
                              **{"X-Forwarded-Host": f"127.0.0.1:{port}"})
        assert forged.status_code == 421
        assert engine.calls == []
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"mars.example.org:{port}",
                     "friend.example"):
            own = post_analyze(url, host, f"http://{host}")
            assert own.status_code == 200, (host, own.text)
            assert own.headers["access-control-allow-origin"] == f"http://{host}"
            call_result(url, "analyze", own.json()["event_id"])
        for origin in (f"https://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}",
                       "http://127.0.0.1"):  # another scheme, another port, the default port
            assert post_analyze(url, f"127.0.0.1:{port}", origin).status_code == 403, origin


def test_the_page_names_come_from_flags():
    args = app.parse_args(["--host", "0.0.0.0", "--public-host", "mars.example.org, B.example",
                           "--allowed-origins", "https://friend.example:8443"], env={})
    assert args.access.hosts == ("mars.example.org", "b.example", "0.0.0.0", "friend.example")
    env = app.parse_args([], env={"SPACE_ID": "a/b", "MARS_DEMO_PUBLIC_HOST": "c.example"})
    assert env.access.hosts == ("c.example",)
    with pytest.raises(SystemExit):
        app.parse_args(["--host", "0.0.0.0", "--public-host", "evil example/x"], env={})


@pytest.mark.slow  # a real nginx
def test_behind_the_documented_nginx_on_a_port_of_its_own(tmp_path):
    """The documented nginx passed ``Host $host``, which drops the port: the page's own origin
    ``http://127.0.0.1:PORT`` was refused (403) for its own requests. With the documented
    ``$http_host`` it is served on any port, and a foreign host is refused whatever its scheme."""
    identity = ClientIdentity.for_deployment(trusted_proxies=["127.0.0.10"])
    engine = FakeEngine()
    with public_page(engine, identity=identity) as (_, app_url), \
            nginx_in_front(app_url, tmp_path) as url:
        host = url.removeprefix("http://")
        assert not host.endswith((":80", ":443"))
        own = post_analyze(url, host, f"http://{host}")
        assert own.status_code == 200, own.text
        call_result(url, "analyze", own.json()["event_id"])
        page = httpx.get(url, timeout=WAIT_S)  # the page itself, as a browser opens it
        assert page.status_code == 200
        for origin in ("http://evil.example", "https://evil.example"):
            assert post_analyze(url, "evil.example", origin).status_code == 421
        forged = post_analyze(url, host, f"http://{host}",
                              **{"X-Forwarded-Host": "evil.example"})
        assert forged.status_code == 421
        assert [question for question, _ in engine.calls] == [QUESTION]


# --- bodies that never end ------------------------------------------------------------------------


def test_a_body_that_trickles_or_stops_is_closed():
    """A bare host: headers at once, then one body byte every half second (or none at all).
    uvicorn waited for bodies without limit (3 of 3 such connections open at 45 s); now a body
    may pause ``--body-timeout`` seconds (2 here) and must average 8 KiB a second past it. A
    body sent in a few quick pieces is served as ever."""
    with public_page(FakeEngine(), identity=BARE, access={"body_timeout": 2}) as (_, url):
        host, port = address_of(url)
        head = (f"POST /gradio_api/queue/join HTTP/1.1\r\nHost: {host}:{port}\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n").encode()
        slow = []
        for _ in range(4):
            s = socket.create_connection((host, port), timeout=WAIT_S)
            s.sendall(head)
            slow.append(s)
        started, closed_after = time.monotonic(), {}
        try:
            while len(closed_after) < len(slow) and time.monotonic() - started < 20:
                for i, s in enumerate(slow):
                    if i in closed_after:
                        continue
                    if is_closed(s):
                        closed_after[i] = time.monotonic() - started
                    elif i % 2:  # every other one trickles; the others send nothing more
                        try:
                            s.sendall(b"[")
                        except OSError:
                            closed_after[i] = time.monotonic() - started
                time.sleep(0.5)
        finally:
            for s in slow:
                s.close()
        assert sorted(closed_after) == [0, 1, 2, 3], closed_after
        assert max(closed_after.values()) < 10, closed_after
        # a body in three pieces, a quarter of a second apart
        banner = event_of(httpx.get(f"{url}/config", timeout=WAIT_S).json(), "banner")["id"]
        with socket.create_connection((host, port), timeout=WAIT_S) as s:
            body = b'{"data": [], "fn_index": %d, "session_hash": "abcdefghijk"}' % banner
            s.sendall(head.replace(b"1000", str(len(body)).encode()))
            for piece in (body[:20], body[20:40], body[40:]):
                time.sleep(0.25)
                s.sendall(piece)
            answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


# --- one IPv6 allocation ------------------------------------------------------------------------


def test_the_64s_of_one_48_hold_a_few_more_places_than_one_64():
    """Ten /64s filled a queue of 32 places at 4 each, and a tunnel broker's /48 holds 65,536
    of them. Now a /48's /64s together hold one analysis place more than one /64 (and two more
    places in all): 100 /64s of one /48 get two analyses in; another /48 gets its own."""
    engine = GatedEngine()
    with public_page(engine, identity=ClientIdentity.for_deployment(space=True)) as (_, url):
        try:
            data = api_data(url, "analyze", QUESTION, samples=2, max_new_tokens=4)
            codes = [call(url, "analyze", data,
                          headers=via_proxy(f"2a01:4f8:7:{i:x}::1")).status_code
                     for i in range(100)]
            assert codes.count(200) == 2 and codes.count(429) == 98, codes
            other = call(url, "analyze", data, headers=via_proxy("2a01:4f8:8:1::1"))
            assert other.status_code == 200
            views = [call(url, "analyze", data, headers=via_proxy(f"81.2.87.{i}")).status_code
                     for i in range(1, 4)]  # IPv4 clients: one each, as ever
            assert views == [200] * 3
        finally:
            engine.gate.set()
