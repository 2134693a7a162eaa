"""The public page's limits, where requests come in: Gradio's queue and an ASGI middleware.

What is allowed is decided in :mod:`mars_demo.hosting.access` (the visitor policy); this module enforces
it on the web server (Gradio 6.17, covered by tests/test_hostile.py and tests/test_public.py):

- :func:`limit_queue` wraps the queue's ``push``, the one door of every queued call
  (``/queue/join``, ``/call/<api_name>``, ``/call/v2/...``): a client holds at most a few places
  (:meth:`Access.places_for`, :attr:`Access.queue_places`), and its IPv6 /48 a few more, whatever
  events it calls; it may keep the view group busy only so long (:attr:`Access.view_share`); and
  a file input that is no upload (an address, a server path) is refused before Gradio would
  download or read it (:mod:`mars_demo.ui.guards.uploads`);
- :class:`RequestLimits` caps every request body before it is read (HTTP 413), and uploads to one
  file per request and a few per client and hour (which routes a public page serves, and which
  it serves under the per-client rate, is :mod:`mars_demo.ui.guards.route_list`);
- :func:`keep_peer_addresses` keeps uvicorn from replacing the connection's address with
  ``X-Forwarded-For``, so that only :class:`~mars_demo.hosting.clients.ClientIdentity` reads that header.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import weakref
from collections.abc import Callable
from typing import Any

from mars_demo import texts
from mars_demo.hosting.access import (
    ENGINE_GROUP,
    VIEW_BURST_S,
    VIEW_GROUP,
    VIEW_MIN_COST_S,
    Access,
)
from mars_demo.hosting.clients import Allowance
from mars_demo.ui.guards.uploads import guard_file_inputs, refused_files

MAX_REQUEST_BYTES = 512 * 1024  # any request body but an upload (the largest form is ~250 KB)
UPLOAD_FRAMING_BYTES = 64 * 1024  # multipart framing around one uploaded file
UPLOAD_ROUTE = "/upload"
COMPONENT_SERVER = "/component_server"  # calls a component's server function by name
# Requests outside the queue: a non-queued event (/run/<api_name>, /api/<api_name>) or a
# component's server function.
DIRECT_ROUTE = re.compile(r"/(run|api)/[^/]+$|/component_server$")


def keep_peer_addresses() -> None:
    """Make the server keep each connection's own address as the request's client.

    uvicorn (which Gradio starts without a ``forwarded_allow_ips``) otherwise trusts
    ``X-Forwarded-For`` from 127.0.0.1 and puts its client address in place of the connection's:
    then anything on the same machine that forwards a visitor's header (a reverse proxy, the
    share tunnel) would let that visitor choose a new identity per request. uvicorn reads its
    default from ``FORWARDED_ALLOW_IPS``; an empty list trusts nobody. Call it before launch."""
    os.environ["FORWARDED_ALLOW_IPS"] = ""


# --- the queue ---------------------------------------------------------------------------------


def limit_queue(demo: Any, access: Access) -> QueueDoor:
    """Enforce the visitor policy at the queue's door (``demo.queue()`` must have been called):
    see :class:`QueueDoor`; and refuse a file input that is no upload wherever an event runs
    (:func:`~mars_demo.ui.guards.uploads.guard_file_inputs`). Returns the door."""
    door = QueueDoor(demo, access)
    door.install()
    guard_file_inputs(demo)
    return door


class QueueDoor:
    """The visitor policy at the queue's door: Gradio's ``Queue.push`` (every queued call) and
    ``Queue.send_message`` (an event started, an event sent its result), wrapped once.

    - A file input whose path is an address or lies outside Gradio's upload folder is refused
      (HTTP 400), on every page (:func:`~mars_demo.ui.guards.uploads.refused_files`): Gradio would fetch
      an address (from any public host, with no size limit), and a visitor must never make the
      server fetch anything.
    - On a page with per-client limits, an event is refused (HTTP 429) when its client already
      holds :meth:`Access.places_for` places of its concurrency group, or
      :attr:`Access.queue_places` in all, waiting or running; or when the clients of its network
      (an IPv6 /48, :meth:`ClientIdentity.network`) hold :meth:`Access.network_places_for` /
      :attr:`Access.network_queue_places` together. The count and the push run under one lock,
      so parallel requests cannot slip through together.
    - An event of :data:`VIEW_GROUP` is refused (HTTP 429) while its client owes time of the
      group's worker (:class:`~mars_demo.hosting.clients.Allowance` of :attr:`Access.view_share`); each
      one that ran is charged its time there, at least :data:`VIEW_MIN_COST_S`.

    An event stops counting once its result was sent ("process_completed"), not when Gradio
    clears it a moment later, so a client whose last request just ended (or failed) may send
    the next at once. Reads Gradio's queue (``event_queue_per_concurrency_id``, ``active_jobs``;
    Gradio 6.17, pinned by tests/test_gradio_internals.py)."""

    def __init__(self, demo: Any, access: Access) -> None:
        self.demo = demo
        self.access = access
        self.queue = demo._queue
        self.finished: weakref.WeakSet = weakref.WeakSet()
        self.started: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.view = (Allowance(access.view_share, VIEW_BURST_S)
                     if access.view_share is not None else None)
        self.lock = asyncio.Lock()
        self.now = time.monotonic

    def install(self) -> None:
        push, send = self.queue.push, self.queue.send_message

        async def limited_push(body: Any, request: Any, username: Any):
            await self.check(body, request)
            fn = self.demo.fns.get(getattr(body, "fn_index", None))
            if fn is None or self.access.queue_places is None:
                return await push(body=body, request=request, username=username)
            async with self.lock:
                self.check_places(fn.concurrency_id, self.client_of(request))
                return await push(body=body, request=request, username=username)

        def send_message(event: Any, message: Any) -> Any:
            self.sent(event, getattr(message, "msg", None))
            return send(event, message)

        self.queue.push = limited_push
        self.queue.send_message = send_message

    def client_of(self, request: Any) -> str:
        return self.access.client_of(getattr(request, "scope", None) or {})

    async def check(self, body: Any, request: Any) -> None:
        """Refuse a file input that is no upload, and a view event of a client that owes the
        group's time."""
        from fastapi import HTTPException

        if refused_files(getattr(body, "data", None)):
            raise HTTPException(status_code=400, detail=texts.ACCESS_NO_URLS)
        fn = self.demo.fns.get(getattr(body, "fn_index", None))
        if (self.view is not None and fn is not None and fn.concurrency_id == VIEW_GROUP
                and not self.view.allows(self.client_of(request), self.now())):
            raise HTTPException(status_code=429, detail=texts.ACCESS_TOO_FAST)

    def check_places(self, group: str, client: str) -> None:
        from fastapi import HTTPException

        access = self.access
        network = access.identity.network(client)
        in_group, in_all, net_group, net_all = self.pending(client, network, group)
        if (in_group >= access.places_for(group) or in_all >= access.queue_places
                or net_group >= access.network_places_for(group)
                or net_all >= access.network_queue_places):
            message = (texts.ACCESS_ONE_AT_A_TIME if group == ENGINE_GROUP
                       else texts.ACCESS_TOO_MANY_EVENTS)
            raise HTTPException(status_code=429, detail=message)

    def events(self) -> list[Any]:
        """The events waiting or running whose result was not sent yet."""
        events = []
        for waiting in list(self.queue.event_queue_per_concurrency_id.values()):
            events += list(waiting.queue)
        for job in list(self.queue.active_jobs):
            events += list(job or ())
        return [e for e in events if e not in self.finished]

    def pending(self, client: str, network: str | None, group: str
                ) -> tuple[int, int, int, int]:
        """How many events ``client`` has waiting or running, of concurrency group ``group``
        and in all; and the same for the clients of ``network`` together (0 without one)."""
        counts = [0, 0, 0, 0]
        identity = self.access.identity
        for event in self.events():
            request = getattr(event, "request", None)
            of = self.access.client_of(getattr(request, "scope", None) or {})
            same_group = event.concurrency_id == group
            if of == client:
                counts[0] += same_group
                counts[1] += 1
            if network is not None and identity.network(of) == network:
                counts[2] += same_group
                counts[3] += 1
        return counts[0], counts[1], counts[2], counts[3]

    def sent(self, event: Any, msg: Any) -> None:
        """Gradio sends ``event`` a message: note when it starts, and once it completed, stop
        counting it and charge a view event's time to its client."""
        if msg == "process_starts":
            self.started[event] = self.now()
        elif msg == "process_completed" and event not in self.finished:
            self.finished.add(event)
            began = self.started.pop(event, None)
            if self.view is not None and getattr(event, "concurrency_id", None) == VIEW_GROUP:
                cost = max(VIEW_MIN_COST_S, self.now() - began if began is not None else 0.0)
                self.view.charge(self.client_of(getattr(event, "request", None)), cost,
                                 self.now())


# --- every request -----------------------------------------------------------------------------


class RequestLimits:
    """ASGI middleware of a public page, in front of Gradio's routes.

    - Every request body is capped (``max_bytes``; an upload ``max_upload_bytes``) before it is
      read: a declared length beyond the cap is refused at once (HTTP 413, nothing read), a body
      without a declared length is read only up to the cap. (Gradio parses a request, e.g. a
      ``/queue/join``, whole before any of its own checks.)
    - An upload carries one file (HTTP 413 for more; Gradio's own ``max_file_size`` is per file)
      and a client may upload ``uploads_per_hour`` times an hour (HTTP 429): uploads stay on
      disk until Gradio's cache cleaning removes them (one to two hours).
    """

    WINDOW_S = 3600.0

    def __init__(self, app: Callable, access: Access, max_upload_bytes: int,
                 uploads_per_hour: int, max_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.access = access
        self.max_bytes = max_bytes
        self.max_upload_bytes = max_upload_bytes
        self.uploads_per_hour = uploads_per_hour
        self._times: dict[str, list[float]] = {}

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "").rstrip("/")
        upload = scope.get("method") == "POST" and path.endswith(UPLOAD_ROUTE)
        limit = self.max_upload_bytes if upload else self.max_bytes
        too_big = {"detail": texts.ACCESS_BODY_TOO_BIG.format(limit=limit)}
        length = _declared_length(scope)
        if length is not None and length > limit:
            await send_json(send, 413, too_big)
            return
        if upload:
            await self._upload(scope, receive, send, limit, too_big)
        elif length is None and scope.get("method") not in ("GET", "HEAD", "OPTIONS"):
            body = await _read_body(receive, limit)  # chunked: read no more than the cap
            if body is None:
                await send_json(send, 413, too_big)
                return
            await self.app(scope, _replayer(body, receive), send)
        else:  # a declared length within the cap: the server reads no more than that
            await self.app(scope, receive, send)

    async def _upload(self, scope, receive, send, limit: int, too_big: dict) -> None:
        client = self.access.client_of(scope)
        now = time.monotonic()
        times = [t for t in self._times.get(client, ()) if now - t < self.WINDOW_S]
        self._times[client] = times
        if len(times) >= self.uploads_per_hour:
            await send_json(send, 429, {"detail": texts.ACCESS_UPLOADS_PER_HOUR.format(
                limit=self.uploads_per_hour)})
            return
        body = await _read_body(receive, limit)
        if body is None:
            await send_json(send, 413, too_big)
            return
        if _multipart_parts(scope, body) > 1:
            await send_json(send, 413, {"detail": texts.ACCESS_ONE_FILE})
            return
        times.append(now)
        if len(self._times) > 10_000:  # forget clients whose uploads are all older than the window
            self._times = {c: ts for c, ts in self._times.items()
                           if ts and now - ts[-1] < self.WINDOW_S}
        await self.app(scope, _replayer(body, receive), send)


def _declared_length(scope) -> int | None:
    for key, value in scope.get("headers") or ():
        if key == b"content-length":
            text = value.strip()
            return int(text) if text.isdigit() else None
    return None


def _multipart_parts(scope, body: bytes) -> int:
    """The parts of a multipart/form-data body: its delimiter lines ("--boundary" at the start
    or after a line break, followed by a line break), the way a multipart parser splits it."""
    boundary = b""
    for key, value in scope.get("headers") or ():
        if key == b"content-type":
            match = re.search(rb'boundary="?([^";]+)"?', value)
            boundary = match.group(1) if match else b""
    if not boundary:
        return 0
    delimiter = b"--" + boundary + b"\r\n"
    return body.count(b"\r\n" + delimiter) + (1 if body.startswith(delimiter) else 0)


async def _read_body(receive, limit: int) -> bytes | None:
    """The request's body, or None as soon as it is longer than ``limit`` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _replayer(body: bytes, receive):
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def send_json(send, status: int, payload: dict) -> None:
    data = json.dumps(payload).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
