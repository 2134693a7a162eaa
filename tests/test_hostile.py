"""Hostile clients against a public page: what one client tries in order to hurt every other
visitor, through raw HTTP and the way the page itself sends its events. Everything stays on
loopback, every loop is bounded, timeouts only keep a hung server from hanging the run.

1. one client holds at most a few queue places, whatever events it calls (the Evaluation view's
   "Show" included), and another visitor's analysis starts in its turn while the flood runs;
2. a 100 MB request body is refused before it is read (the server's memory barely moves);
3. a file input that names a URL is refused, and no request leaves the machine;
4. no result, warning, error or download names the server's model folders;
5. the client is who the deployment's proxy says it is: a bare ``--host``, a Space, the share
   tunnel, the host's own nginx (a real one, on loopback);
6. one file per upload; pasted answers within the work cap; a failed request frees its place at
   once; absurd numbers get a bad-input message.
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
import os
import random
import select
import shutil
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psutil
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from ui_helpers import (
    APP_PIDS,
    FakeEngine,
    free_port,
    page_event,
    queue_join,
    running_app,
)

from mars_demo import texts
from mars_demo.evaluation import MEASURES, SCORINGS
from mars_demo.hosting.access import QUEUE_PLACES, VIEW_PLACES, public_access
from mars_demo.hosting.clients import ClientIdentity
from mars_demo.ui import build_demo, launch_options
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.views.eval_view import EvaluationView

WAIT_S = 120
QUESTION = "Which planet is known as the Red Planet?"
PAGE_OPTIONS = [2, 0.5, 4, 0, "auto", "model", "sum", "equal", "strict", "default"]
SPACE = ClientIdentity.for_deployment(space=True)
HOSTILE, VISITOR = "81.2.69.1", "81.2.69.2"  # public addresses, as a Space's proxy appends them
ENGINE_EVENTS = ("ask", "rescore_options", "score_own", "analyze", "score")
GROUPS = {"show_scoring": "view", "banner": "view", "banner_1": "view",
          "evaluation_show": "view", **{name: "engine" for name in ENGINE_EVENTS}}
OWN = [QUESTION, "Mars", "Mars\nJupiter", ""]  # score_own's pasted answers (before scoring)


def via_proxy(client: str, sent: str | None = None) -> dict[str, str]:
    """The X-Forwarded-For a proxy passes on: what the client sent (made up), then the client's
    address, which the proxy appends."""
    sent = sent if sent is not None else f"{random.randint(1, 223)}.{random.randint(0, 255)}.7.7"
    return {"X-Forwarded-For": f"{sent}, {client}"}


def loopback_client(address: str) -> httpx.Client:
    """An HTTP client whose connections come from ``address`` (any 127.x.y.z is loopback)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=60)


class GatedEngine(FakeEngine):
    """Every analysis or scoring waits for ``gate``; ``started`` lists their questions in the
    order they began."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.started: list[str] = []

    def analyze(self, question, settings=None, **kwargs):
        self.started.append(question)
        self.gate.wait(WAIT_S)
        return super().analyze(question, settings, **kwargs)

    def score(self, answers, settings=None, **kwargs):
        self.started.append(getattr(answers, "question", "?"))
        self.gate.wait(WAIT_S)
        return super().score(answers, settings, **kwargs)


@contextlib.contextmanager
def public_page(engine, identity: ClientIdentity = SPACE, runs_dir=None, access=None, **build):
    """A public page over ``engine`` served in this process on 127.0.0.1, with the launch
    options app.py uses (the request limits); yields (demo, url). ``access``: other options of
    its :func:`~mars_demo.hosting.access.public_access`."""
    access = public_access(identity=identity, **(access or {}))
    demo = build_demo(engine, access=access, runs_dir=runs_dir, **build)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **launch_options(demo))
    try:
        yield demo, f"http://127.0.0.1:{port}"
    finally:
        demo.close()


def api_data(url: str, api_name: str, first: str, **values) -> list:
    """An API endpoint's data in parameter order: ``first``, ``values``, the defaults."""
    info = httpx.get(f"{url}/gradio_api/info", timeout=30).json()["named_endpoints"]
    parameters = info[f"/{api_name}"]["parameters"]
    values = {parameters[0]["parameter_name"]: first, **values}
    return [values.get(p["parameter_name"], p.get("parameter_default")) for p in parameters]


def call(url: str, api_name: str, data: list, http=httpx, headers=None) -> httpx.Response:
    """``POST /gradio_api/call/<api_name>``: the API's door into the queue."""
    return http.post(f"{url}/gradio_api/call/{api_name}", json={"data": data},
                     headers=headers, timeout=60)


def call_result(url: str, api_name: str, event_id: str, http=httpx, headers=None) -> list:
    """The data of a ``/call`` event once it completes (raises on its error)."""
    with http.stream("GET", f"{url}/gradio_api/call/{api_name}/{event_id}", headers=headers,
                     timeout=WAIT_S) as stream:
        kind = None
        for line in stream.iter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and kind in ("complete", "error"):
                data = json.loads(line[5:])
                if kind == "error":
                    raise AppError(str(data))
                return data
    raise AssertionError(f"no result for {api_name}")


def write_run(folder: Path, n: int) -> Path:
    """An evaluation run of ``n`` made-up questions (a report.json and its results.jsonl)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    lines = []
    for _ in range(n):
        unc = {m: {s: rng.uniform(0, 5) for s in SCORINGS} for m in MEASURES}
        lines.append(json.dumps({"correct": rng.random() < 0.5, "uncertainty": unc,
                                 "question": "q" * 60}))
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    entry = {"value": 0.6, "ci95": [0.5, 0.7]}
    auroc = {m: {"length_normalized": entry, "mars": entry,
                 "mars_minus_length_normalized": {"value": 0.0, "ci95": [-0.1, 0.1]}}
             for m in MEASURES}
    (folder / "report.json").write_text(json.dumps({
        "metrics": {"auroc": auroc}, "n": n, "accuracy": 0.5, "data": "made-up",
        "models": {"llm": "a", "importance": "b", "nli": "c"}, "judge": {"name": "em"},
        "bootstrap": {"resamples": 10}}))
    return folder


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    """A folder with one run whose results.jsonl is about 1 MB (its "Show" takes a while)."""
    runs = tmp_path_factory.mktemp("runs")
    write_run(runs / "big", 3500)
    assert (runs / "big" / "results.jsonl").stat().st_size > 900_000
    return runs


# --- 1. one client, every event it can call ----------------------------------------------------


def flood_once(url: str, name: str, ip: str, http=httpx) -> int:
    """One hostile request of event ``name`` (a page event, or the API's analyze / score),
    from client ``ip`` behind the Space's proxy; its HTTP status."""
    headers = via_proxy(ip)
    if name in ("analyze", "score"):
        first = QUESTION if name == "analyze" else json.dumps(
            {"question": QUESTION, "greedy": "Mars", "samples": ["Mars", "Jupiter"]})
        return call(url, name, api_data(url, name, first, samples=2, max_new_tokens=4),
                    http, headers).status_code
    data = {
        "ask": [QUESTION, "mars", *PAGE_OPTIONS],
        "show_scoring": [None, "length_normalized", "weight"],
        "rescore_options": [None, "mars", *PAGE_OPTIONS],
        "score_own": [*OWN, "mars", *PAGE_OPTIONS],
        "banner": [], "banner_1": [],
        "evaluation_show": ["big", None, None],
    }[name]
    return queue_join(url, name, data, http=http, headers=headers).status_code


@contextlib.contextmanager
def show_flood(url: str, client: str = HOSTILE):
    """One client re-sending the Evaluation view's "Show" from 4 threads as fast as it can
    (bounded: 80 requests a thread) until the block ends; yields the list of its statuses."""
    stop = threading.Event()
    codes: list[int] = []

    def flood() -> None:
        for _ in range(80):
            if stop.is_set():
                return
            codes.append(flood_once(url, "evaluation_show", client))

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)  # the flood is on
        yield codes
    finally:
        stop.set()
        for thread in threads:
            thread.join(WAIT_S)


def test_one_client_holds_a_few_queue_places_whatever_it_calls(runs_dir, monkeypatch):
    """Every kind of event, sent in parallel by one client while nothing it started can finish:
    it gets a place for at most one analysis, two of any other event and four in all; the rest
    is refused at once (429), never with "queue full". Another visitor is let in meanwhile and
    its analysis starts right after the one of the flood's that was running."""
    engine = GatedEngine()
    for cls, name in ((Controller, "banner"), (Controller, "show_scoring"),
                      (Controller, "rescore_options"), (EvaluationView, "show")):
        slow = getattr(cls, name)

        @functools.wraps(slow)  # the events keep their names
        def gated(self, *args, _slow=slow, **kwargs):
            engine.gate.wait(WAIT_S)
            return _slow(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, gated)
    with public_page(engine, runs_dir=runs_dir, queue_max_size=8) as (_, url):
        names = [*GROUPS] * 4
        random.Random(1).shuffle(names)
        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(pool.map(lambda n: (n, flood_once(url, n, HOSTILE)), names))
        accepted = [n for n, code in statuses if code == 200]
        assert {code for _, code in statuses} <= {200, 429}, statuses
        per_group = {g: sum(GROUPS[n] == g for n in accepted) for g in set(GROUPS.values())}
        # docs/public-page.md's promise: one analysis, two of any other request, four in all
        assert per_group["engine"] == 1 and max(per_group.values()) <= 2, per_group
        assert len(accepted) <= 4 and (VIEW_PLACES, QUEUE_PLACES) == (2, 4), accepted
        assert flood_once(url, "ask", HOSTILE) == 429  # still held: nothing has finished

        mine = call(url, "analyze", api_data(url, "analyze", "The visitor's question?"),
                    headers=via_proxy(VISITOR))
        assert mine.status_code == 200, mine.text
        engine.gate.set()
        data = call_result(url, "analyze", mine.json()["event_id"], headers=via_proxy(VISITOR))
        assert data[0]["question"] == "The visitor's question?"
        assert engine.started.index("The visitor's question?") <= 1  # after the flood's one
        # Once its requests are done, the flooding client is served again like anyone.
        deadline = time.monotonic() + WAIT_S
        while flood_once(url, "ask", HOSTILE) != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)


def test_resending_show_as_fast_as_it_can_does_not_fill_the_queue(runs_dir):
    """The audit's attack: "Show" of a 1 MB run re-sent as fast as one client can (the audit
    sent it 12 times a second). Another visitor's analyses and page questions are never refused
    (no "queue full")."""
    with public_page(FakeEngine(), runs_dir=runs_dir) as (_, url), show_flood(url) as codes:
        visitor = Client(url, verbose=False, headers=via_proxy(VISITOR))
        for i in range(6):
            question = f"Visitor question {i}?"
            assert visitor.predict(question, api_name="/analyze")["question"] == question
        shown = page_event(url, "ask", [QUESTION, "mars", *PAGE_OPTIONS],
                           headers=via_proxy("81.2.69.3"))
        assert shown["mars-error"] == "" and html.escape(QUESTION) in shown["mars-answer"]
    assert 429 in codes and 503 not in codes, codes


def test_a_client_whose_request_just_failed_may_ask_again_at_once(monkeypatch):
    """40 bad requests back to back, each sent the moment the last one's error came back: each
    gets its own message, never "you already have an analysis running". (After sending an
    error Gradio sums up its analytics before it clears the event; on a server with a long
    history that takes a while, played here by a pause.)"""
    from gradio.queueing import Queue

    summary = Queue.compute_analytics_summary

    def slow_summary(self, *args, **kwargs):
        time.sleep(0.1)
        return summary(self, *args, **kwargs)

    monkeypatch.setattr(Queue, "compute_analytics_summary", slow_summary)
    with public_page(FakeEngine()) as (_, url):
        headers = via_proxy(HOSTILE)
        bad = api_data(url, "analyze", QUESTION, samples=0)
        refused = []
        for _ in range(40):
            sent = call(url, "analyze", bad, headers=headers)
            if sent.status_code != 200:
                refused.append(sent.json()["detail"])
                continue
            with pytest.raises(AppError, match="samples must be an integer from 1 to 20"):
                call_result(url, "analyze", sent.json()["event_id"], headers=headers)
        assert refused == []
        good = call(url, "analyze", api_data(url, "analyze", QUESTION, samples=2),
                    headers=headers)
        assert call_result(url, "analyze", good.json()["event_id"])[0]["question"] == QUESTION


# --- 2, 4, 6 against app.py itself -------------------------------------------------------------


@pytest.fixture(scope="module")
def space(tiny_models, tmp_path_factory):
    """``app.py`` as a Space (SPACE_ID) with the tiny models, a name for its LLM, and Gradio's
    uploads in a folder of its own; yields (url, that folder)."""
    uploads = tmp_path_factory.mktemp("gradio-cache")
    with running_app(tiny_models, "--llm-name", "Tiny test LLM",
                     env={"SPACE_ID": "someone/mars-demo", "GRADIO_TEMP_DIR": str(uploads)}) as url:
        yield url, uploads


def rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


def post_big_body(url: str, path: str, size: int, chunked: bool) -> tuple[int | None, int]:
    """POST ``size`` bytes to ``path`` over a raw socket, stopping as soon as the server
    answers; (the HTTP status, or None, and the bytes sent)."""
    host, port = url.removeprefix("http://").split(":")
    head = f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {size}\r\n"
    piece = b"[" * (1 << 20)
    sent = 0
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as s:
        s.sendall((head + "\r\n").encode())
        while sent < size:
            readable, _, _ = select.select([s], [], [], 0)
            if readable:
                break
            try:
                s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            except OSError:  # the server answered and closed
                break
            sent += len(piece)
        try:
            first = s.recv(4096).decode("latin-1")
        except OSError:
            first = ""
    status = int(first.split()[1]) if first.startswith("HTTP/") else None
    return status, sent


def test_a_hundred_megabyte_body_is_refused_before_it_is_read(space):
    url, _ = space
    pid = APP_PIDS[url]
    before = rss(pid)
    peak = [before]
    watching = threading.Event()

    def watch() -> None:
        while not watching.is_set():
            peak[0] = max(peak[0], rss(pid))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            outcomes = list(pool.map(
                lambda chunked: post_big_body(url, "/gradio_api/queue/join", 100 << 20, chunked),
                [False, False, True, True]))
    finally:
        watching.set()
        watcher.join()
    assert [status for status, _ in outcomes] == [413] * 4, outcomes
    assert peak[0] - before < 50 << 20, (before, peak[0])
    # A declared length is refused at once; a chunked body after at most the cap (512 KiB),
    # give or take what the sockets' buffers took in before the answer came back.
    assert all(sent < 100 << 20 for _, sent in outcomes), outcomes
    too_big = httpx.post(f"{url}/gradio_api/queue/join", content=b"[" * (600 << 10), timeout=60,
                         headers={"Content-Type": "application/json"})
    assert too_big.status_code == 413
    assert too_big.json()["detail"] == texts.ACCESS_BODY_TOO_BIG.format(limit=512 * 1024)
    assert httpx.get(url, timeout=30).status_code == 200  # and it keeps serving


def test_no_result_warning_or_download_names_the_servers_folders(space, tiny_models):
    """Answers pasted without log-probs get the teacher-forced pass of the LLM, whose warning
    named the LLM's folder: the API's JSON, the warnings box, the settings shown and the
    download name the LLM by the name the host gave it."""
    url, _ = space
    folders = {str(Path(path).parent) for path in tiny_models.values()}
    folders |= {str(path) for path in tiny_models.values()}

    def no_folders(text: str) -> None:
        for folder in folders:
            assert folder not in text, (folder, text[:500])

    answers = {"question": QUESTION, "greedy": "Mars", "samples": ["Mars", "It is Mars"]}
    result = Client(url, verbose=False, headers=via_proxy("81.2.70.1")).predict(
        json.dumps(answers), api_name="/score")
    no_folders(json.dumps(result))
    analyzed = Client(url, verbose=False, headers=via_proxy("81.2.70.4")).predict(
        QUESTION, samples=2, max_new_tokens=4, api_name="/analyze")
    no_folders(json.dumps(analyzed))
    assert analyzed["settings"]["llm"] == "Tiny test LLM"  # the host's name for it
    assert any("teacher-forced pass of Tiny test LLM" in w for w in result["warnings"]), result

    shown = page_event(url, "score_own", [*OWN[:1], "Mars", "Mars\nIt is Mars", "", "mars",
                                          *PAGE_OPTIONS], headers=via_proxy("81.2.70.2"))
    assert "teacher-forced pass of Tiny test LLM" in html.unescape(shown["mars-warnings"])
    for key in ("mars-warnings", "mars-context", "mars-answer", "mars-error"):
        no_folders(html.unescape(shown[key]))
    download = Path(shown["mars-download"]["value"]["path"])
    saved = download.read_text(encoding="utf-8")
    no_folders(saved)
    assert "teacher-forced pass of Tiny test LLM" in saved
    banner = html.unescape(page_event(url, "banner", headers=via_proxy("81.2.70.3"))["mars-banner"])
    assert "Tiny test LLM" in banner
    no_folders(banner)


def test_one_file_per_upload_and_nothing_left_of_a_refused_one(space):
    url, uploads = space
    before = sorted(p.name for p in uploads.rglob("*"))
    files = [("files", (f"r{i}.json", b"{}", "application/json")) for i in range(999)]
    many = httpx.post(f"{url}/gradio_api/upload", files=files, headers=via_proxy("81.2.71.1"),
                      timeout=60)
    assert many.status_code == 413 and many.json()["detail"] == texts.ACCESS_ONE_FILE
    assert sorted(p.name for p in uploads.rglob("*")) == before  # no cache folder was made
    one = httpx.post(f"{url}/gradio_api/upload", headers=via_proxy("81.2.71.1"), timeout=60,
                     files={"files": ("report.json", b"{}", "application/json")})
    assert one.status_code == 200, one.text


def test_the_screen_recording_route_is_closed(space):
    url, _ = space
    recording = httpx.post(f"{url}/gradio_api/process_recording", timeout=60,
                           files={"video": ("v.mp4", b"\0" * 1000, "video/mp4")})
    assert recording.status_code == 404


def test_pasted_answers_within_the_work_cap_and_absurd_numbers_refused_by_name(space):
    url, _ = space
    client = Client(url, verbose=False, headers=via_proxy("81.2.72.1"))
    heavy = {"question": QUESTION, "greedy": "Mars", "samples": ["Mars is red. " * 73] * 20}
    with pytest.raises(AppError) as refused:
        client.predict(json.dumps(heavy), api_name="/score")
    assert "this public page allows at most 2560" in str(refused.value)
    shown = page_event(url, "score_own", [QUESTION, "Mars", "\n".join(heavy["samples"]), "",
                                          "mars", *PAGE_OPTIONS], headers=via_proxy("81.2.72.2"))
    assert "allows at most 2560" in html.unescape(shown["mars-error"])
    light = {**heavy, "samples": ["Mars is red."] * 20}  # 20 x 12 characters: allowed
    assert len(client.predict(json.dumps(light), api_name="/score")["samples"]) == 20

    huge = '{"question": "Q?", "greedy": "Mars", "samples": ["Mars"], "x": ' + "9" * 5000 + "}"
    with pytest.raises(AppError) as refused:
        client.predict(huge, api_name="/score")
    message = str(refused.value)
    assert "Please check the input" in message and "Something went wrong" not in message


# --- 3. a file input that names a URL ----------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802  (the standard library's name)
        Recorder.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"metrics": {}}')

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("public", [True, False])
def test_a_url_in_a_file_input_is_refused_and_nothing_is_fetched(runs_dir, monkeypatch, public):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    looked_up: list[str] = []
    lookup = socket.getaddrinfo

    def recorded(host, *args, **kwargs):
        looked_up.append(str(host))
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", recorded)
    local = f"http://127.0.0.1:{server.server_address[1]}/report.json"
    remote = "https://files.example.org/report.json"
    page = public_page(FakeEngine(), runs_dir=runs_dir) if public else contextlib.nullcontext()
    try:
        with page as served:
            if served is None:  # a page only the host opens refuses them too
                demo = build_demo(FakeEngine(), runs_dir=runs_dir)
                demo.launch(server_name="127.0.0.1", server_port=free_port(),
                            prevent_thread_lock=True, quiet=True, **launch_options(demo))
                url = demo.local_url.rstrip("/")
            else:
                url = served[1]
            for address in (local, remote):
                file = {"path": address, "url": address, "orig_name": "report.json",
                        "meta": {"_type": "gradio.FileData"}}
                joined = queue_join(url, "evaluation_show", [None, file, None],
                                    headers=via_proxy("81.2.73.1"))
                assert joined.status_code == 400, joined.text
                assert joined.json()["detail"] == texts.ACCESS_NO_URLS
            if served is None:
                demo.close()
    finally:
        server.shutdown()
    assert Recorder.hits == []  # the local server never got a request
    assert not any("example.org" in host for host in looked_up), looked_up  # no DNS lookup


# --- 5. who the client is, deployment by deployment ---------------------------------------------


def ten_analyses(url: str, http=httpx, headers_of=lambda i: None) -> list[int]:
    """Ten analyses sent one after another while the first one cannot finish; their statuses."""
    data = api_data(url, "analyze", QUESTION, samples=2, max_new_tokens=4)
    return [call(url, "analyze", data, http, headers_of(i)).status_code for i in range(10)]


def test_on_a_space_the_client_is_the_address_its_proxy_appended():
    engine = GatedEngine()
    with public_page(engine, identity=SPACE) as (_, url):
        try:
            # a made-up address per request before the one the proxy appended: one client
            assert ten_analyses(url, headers_of=lambda i: via_proxy(HOSTILE)) == [200] + [429] * 9
            # two header lines, the client's own first: read as one list, so the same client
            lines = [("X-Forwarded-For", f"9.9.9.{i}") for i in range(3)]
            assert ten_analyses(url, headers_of=lambda i: [*lines, ("X-Forwarded-For", HOSTILE)]
                                ) == [429] * 10
            # internal hops of the host after the client's address are passed over
            assert ten_analyses(url, headers_of=lambda i: {
                "X-Forwarded-For": f"5.5.5.{i}, {HOSTILE}, 10.16.3.80"}) == [429] * 10
            assert ten_analyses(url, headers_of=lambda i: via_proxy(VISITOR))[0] == 200
        finally:
            engine.gate.set()


def test_on_a_bare_host_the_client_is_the_connection():
    """What uvicorn did before: it trusted X-Forwarded-For from 127.0.0.1, so a client there
    chose a new identity per request (10 of 10 analyses accepted)."""
    engine = GatedEngine()
    with public_page(engine, identity=ClientIdentity.for_deployment()) as (_, url):
        try:
            with loopback_client("127.0.0.1") as first, loopback_client("127.0.0.2") as other:
                codes = ten_analyses(url, first, lambda i: via_proxy(f"81.2.74.{i}"))
                assert codes == [200] + [429] * 9
                assert ten_analyses(url, other, lambda i: via_proxy(HOSTILE))[0] == 200
        finally:
            engine.gate.set()


def test_behind_the_share_tunnel_the_client_is_the_address_the_share_server_appended():
    """The share tunnel's client connects from this machine; gradio's share server (a Go reverse
    proxy) appends the address it saw to X-Forwarded-For. Played here by requests from loopback
    carrying what it would pass on."""
    engine = GatedEngine()
    with public_page(engine, identity=ClientIdentity.for_deployment(share=True)) as (_, url):
        try:
            assert ten_analyses(url, headers_of=lambda i: via_proxy(HOSTILE)) == [200] + [429] * 9
            assert ten_analyses(url, headers_of=lambda i: via_proxy(VISITOR))[0] == 200
        finally:
            engine.gate.set()
    share = ClientIdentity.for_deployment(share=True)
    lan = {"client": ("192.168.1.20", 5000), "headers": [(b"x-forwarded-for", b"81.2.69.9")]}
    assert share.of(lan) == "192.168.1.20"  # not through the tunnel: the connection


DOCS = Path(__file__).resolve().parents[1] / "docs" / "public-page.md"
NGINX_CONF = """
daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi; uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
{docs}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://127.0.0.1:{app_port};
      proxy_bind 127.0.0.10;
      proxy_http_version 1.1;
      proxy_buffering off;
    }}
  }}
}}
"""


def docs_nginx() -> str:
    """The nginx lines of docs/public-page.md, as written there (its proxy headers included:
    the location above sets none of its own, so it takes them all)."""
    import re

    block = re.search(r"```nginx\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert block, "docs/public-page.md has no nginx block"
    return block.group(1)


@contextlib.contextmanager
def nginx_in_front(app_url: str, tmp: Path):
    """A real nginx on 127.0.0.1, configured as docs/public-page.md says, that forwards to
    ``app_url`` from 127.0.0.10 on a port of its own; yields its URL."""
    nginx = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.path.exists(p)), None)
    if nginx is None:
        pytest.fail("the reverse-proxy test needs nginx: apt-get install -y nginx-light "
                    "(.ci/run installs it)")
    port = free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=tmp, port=port, app_port=app_url.rsplit(":", 1)[1],
                                      docs=docs_nginx()))
    proc = subprocess.Popen([nginx, "-c", str(conf), "-p", str(tmp)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=5)
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(15)


@pytest.mark.slow
def test_behind_nginx_the_client_is_the_address_nginx_appended(tmp_path):
    engine = GatedEngine()
    identity = ClientIdentity.for_deployment(trusted_proxies=["127.0.0.10"])
    with public_page(engine, identity=identity) as (_, app_url):
        try:
            with nginx_in_front(app_url, tmp_path) as url, \
                    loopback_client("127.0.0.2") as hostile, \
                    loopback_client("127.0.0.3") as visitor:
                codes = ten_analyses(url, hostile, lambda i: via_proxy(f"81.2.75.{i}"))
                assert codes == [200] + [429] * 9  # made-up addresses: still one client
                assert ten_analyses(url, visitor, lambda i: via_proxy("127.0.0.2"))[0] == 200
                # past nginx, straight to the app: the connection is the client
                assert ten_analyses(app_url, hostile, lambda i: via_proxy("81.2.75.99")
                                    )[0] == 429
        finally:
            engine.gate.set()


# --- 1 again, in a real browser -----------------------------------------------------------------


@pytest.mark.browser
def test_a_page_visitor_asks_and_shows_undisturbed_while_show_is_flooded(runs_dir):
    """The audit's attack seen from a page: while one client re-sends "Show" as fast as it can
    (raw HTTP; a page itself sends a button's event once until it ends), another visitor's page
    asks a question and opens the run, with no "busy" or error pop-up."""
    from playwright import sync_api
    from test_browser import CHROMIUM, CHROMIUM_ARGS

    with public_page(FakeEngine(), runs_dir=runs_dir) as (_, url), \
            sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900},
                                          extra_http_headers={"X-Forwarded-For": VISITOR})
            visitor = context.new_page()
            visitor.goto(url)
            visitor.wait_for_selector("#mars-banner")
            with show_flood(url) as codes:
                visitor.fill("#mars-question textarea", QUESTION)
                visitor.click("#mars-ask")
                visitor.wait_for_selector("#mars-progress .mars-progress[data-state='done']",
                                          timeout=WAIT_S * 1000)
                assert QUESTION in visitor.inner_text("#mars-answer .mars-question")
                visitor.locator("#mars-eval").get_by_text("Evaluation:", exact=False).first.click()
                visitor.click("#mars-eval-show")
                visitor.wait_for_selector("#mars-eval-table table", timeout=WAIT_S * 1000)
                assert visitor.locator(".toast-body").count() == 0  # no "busy", no error pop-up
        finally:
            browser.close()
        assert 429 in codes and 503 not in codes


def test_the_identity_rules_read_no_header_the_client_alone_controls():
    bare = ClientIdentity.for_deployment()
    scope = {"client": ("127.0.0.1", 1), "headers": [(b"x-forwarded-for", b"81.2.69.9")]}
    assert bare.of(scope) == "127.0.0.1"
    space = ClientIdentity.for_deployment(space=True)
    assert space.of({"client": ("10.0.0.1", 1), "headers": []}) == "10.0.0.1"
    assert space.of({"client": ("10.0.0.1", 1),
                     "headers": [(b"x-forwarded-for", b"10.1.1.1, 192.168.0.1")]}) == "10.0.0.1"
    proxy = ClientIdentity.for_deployment(trusted_proxies=["10.0.0.0/8"])
    scope = {"client": ("10.0.0.5", 1),
             "headers": [(b"x-forwarded-for", b"1.1.1.1, 192.168.7.7, 10.0.0.9")]}
    assert proxy.of(scope) == "192.168.7.7"  # a LAN client behind the host's proxy
    with pytest.raises(ValueError, match="not an IP address or network"):
        ClientIdentity.for_deployment(trusted_proxies=["proxy.local"])
