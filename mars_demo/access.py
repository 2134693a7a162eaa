"""What a visitor of a served page may do: public mode, the model switch, BEM, per-visitor limits.

A page is **public** when anyone but the host can reach it: ``--share`` (a *.gradio.live link), a
``--host`` that is not a loopback address (0.0.0.0, a LAN address...), or a Hugging Face Space
(the ``SPACE_ID`` variable is set). Then:

- nobody can switch or load models: the switch is not on the page and its handler does not exist
  on the server (the host chooses every model with flags or variables);
- each request may ask for at most :attr:`Access.max_sample_tokens` = samples x max new tokens;
- each client (its IP address) has at most :attr:`Access.per_client` analyses running or waiting
  in the queue; more are refused at once (HTTP 429), so one client cannot fill the queue;
- uploads are bounded per request and per client and hour (:class:`UploadLimit`).

Everywhere, BEM importance (``importance_method="bem"``) is offered only when the host named its
two models (``--bem`` and ``--chunker``); in public mode they must be local paths, so that no
visitor's request ever starts a download.

No gradio import at module level: :func:`limit_per_client` wraps the queue of a built page,
:class:`UploadLimit` is a plain ASGI middleware.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mars_demo import texts
from mars_demo.options import OptionError

PUBLIC_MAX_SAMPLE_TOKENS = 640  # samples x max new tokens per request, public default (5 x 128)
PUBLIC_PER_CLIENT = 1  # analyses one client may have running or waiting, public default


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address app.py listens on; None = Gradio's default, 127.0.0.1) is
    reachable only from this machine."""
    if host is None:
        host = "127.0.0.1"
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost: others may resolve it too
        return False


def public_reasons(host: str | None, share: bool, env: Mapping[str, str]) -> list[str]:
    """Why a page is public (empty: it is not): "--share", "--host X", "SPACE_ID"."""
    reasons = []
    if share:
        reasons.append("--share")
    if host is None:  # Gradio listens where GRADIO_SERVER_NAME says (a Space sets 0.0.0.0)
        host = env.get("GRADIO_SERVER_NAME") or None
    if not is_loopback(host):
        reasons.append(f"--host {host}")
    if env.get("SPACE_ID"):
        reasons.append("SPACE_ID")
    return reasons


@dataclass(frozen=True)
class Access:
    """What visitors may do. The defaults are a local page without the model switch.

    ``max_sample_tokens`` / ``per_client``: None = no limit. ``bem``: the host named BEM's models,
    so BEM importance is offered. ``client_header``: the request header that names the client
    behind a trusted proxy (a Space's ``X-Forwarded-For``); None = the connection's address."""

    public: bool = False
    allow_model_switch: bool = False
    bem: bool = False
    max_sample_tokens: int | None = None
    per_client: int | None = None
    client_header: str | None = None

    def check_models(self, settings: Any) -> None:
        """Raise :class:`OptionError` when ``settings`` need models the host did not set up."""
        if settings.importance_method == "bem" and not self.bem:
            raise OptionError(texts.ACCESS_NO_BEM)

    def check_work(self, settings: Any) -> None:
        """Raise :class:`OptionError` when a question asks for more generated tokens
        (samples x max new tokens) than this page allows."""
        if self.max_sample_tokens is None:
            return
        from mars_demo.recipes import apply_recipe

        settings = apply_recipe(settings)  # a recipe may fix max_new_tokens (paper-code: 128)
        work = settings.samples * settings.max_new_tokens
        if work > self.max_sample_tokens:
            raise OptionError(
                texts.ACCESS_TOO_MUCH.format(
                    samples=settings.samples,
                    tokens=settings.max_new_tokens,
                    work=work,
                    limit=self.max_sample_tokens,
                )
            )

    def client_of(self, scope: Mapping[str, Any]) -> str:
        """The client a request (an ASGI scope) comes from: an IP address.

        Behind a proxy (``client_header``): the LAST address of the header, the one the proxy in
        front of this server added. Earlier ones are what the client itself sent, which anyone
        can make up (a new "client" per request would undo every per-client limit)."""
        if self.client_header:
            name = self.client_header.lower().encode("latin-1")
            for key, value in scope.get("headers") or ():
                if key == name:
                    parts = [p.strip() for p in value.decode("latin-1").split(",")]
                    if parts and parts[-1]:
                        return parts[-1]
        client = scope.get("client")
        return client[0] if client else "unknown"


def public_access(
    *,
    allow_model_switch: bool = False,
    bem: bool = False,
    max_sample_tokens: int | None = PUBLIC_MAX_SAMPLE_TOKENS,
    per_client: int | None = PUBLIC_PER_CLIENT,
    behind_proxy: bool = False,
) -> Access:
    """The access of a public page. ``allow_model_switch`` is refused: nobody switches there."""
    if allow_model_switch:
        raise ValueError(texts.ACCESS_SWITCH_PUBLIC)
    return Access(
        public=True,
        allow_model_switch=False,
        bem=bem,
        max_sample_tokens=max_sample_tokens or None,
        per_client=per_client or None,
        client_header="x-forwarded-for" if behind_proxy else None,
    )


def check_bem_models(bem: str | None, chunker: str | None, public: bool) -> bool:
    """Whether BEM is offered: both models named. On a public page they must be local paths
    (a Hub id would be downloaded when the first visitor picks BEM). Raises ValueError."""
    given = [name for name, value in (("--bem", bem), ("--chunker", chunker)) if value]
    if not given:
        return False
    if len(given) == 1:
        raise ValueError(texts.ACCESS_BEM_BOTH)
    if public:
        for flag, value in (("--bem", bem), ("--chunker", chunker)):
            if not os.path.exists(os.path.expanduser(value)):
                raise ValueError(texts.ACCESS_BEM_LOCAL.format(flag=flag, value=value))
    return True


# --- one analysis at a time per client; uploads within bounds ------------------------------------


def limit_per_client(demo: Any, access: Access, groups: Iterable[str]) -> None:
    """Refuse (HTTP 429, :data:`texts.ACCESS_ONE_AT_A_TIME`) an event of the concurrency groups
    ``groups`` when its client already has ``access.per_client`` of them running or waiting.

    The check wraps the queue's ``push``, the one door of every queued call (``/queue/join``,
    ``/call/<api_name>``, ``/call/v2/...``; Gradio 6.17, covered by tests/test_public.py), after
    Gradio has parsed the request, so the function is the one Gradio runs whatever form its
    index came in. The count (:func:`queue_counter`) and the push run under one lock, so parallel
    requests cannot slip through together. ``demo.queue()`` must have been called."""
    import asyncio

    from fastapi import HTTPException

    limit = access.per_client
    if limit is None:
        return
    groups = set(groups)
    queue = demo._queue
    push = queue.push
    pending = queue_counter(demo, groups, access)
    lock = asyncio.Lock()

    async def limited_push(body: Any, request: Any, username: Any):
        fn = demo.fns.get(getattr(body, "fn_index", None))
        if fn is None or fn.concurrency_id not in groups:
            return await push(body=body, request=request, username=username)
        client = access.client_of(getattr(request, "scope", None) or {})
        async with lock:
            if pending(client) >= limit:
                raise HTTPException(status_code=429, detail=texts.ACCESS_ONE_AT_A_TIME)
            return await push(body=body, request=request, username=username)

    queue.push = limited_push


class UploadLimit:
    """ASGI middleware of a public page: a POST to Gradio's upload route may carry at most
    ``max_bytes`` (HTTP 413 beyond; Gradio's own ``max_file_size`` is per file, and one request
    may carry many files), and one client may upload at most ``per_hour`` times an hour (HTTP
    429), so that nobody fills the disk: uploads stay on disk until Gradio's cache cleaning
    removes them (one to two hours)."""

    SUFFIX = "/upload"
    WINDOW_S = 3600.0

    def __init__(self, app: Callable, access: Access, max_bytes: int, per_hour: int) -> None:
        self.app = app
        self.access = access
        self.max_bytes = max_bytes
        self.per_hour = per_hour
        self._times: dict[str, list[float]] = {}

    async def __call__(self, scope, receive, send) -> None:
        if (scope.get("type") != "http" or scope.get("method") != "POST"
                or not scope.get("path", "").rstrip("/").endswith(self.SUFFIX)):
            await self.app(scope, receive, send)
            return
        import time

        client = self.access.client_of(scope)
        now = time.monotonic()
        times = [t for t in self._times.get(client, ()) if now - t < self.WINDOW_S]
        if len(times) >= self.per_hour:
            self._times[client] = times
            await _send_json(send, 429, {"detail": texts.ACCESS_UPLOADS_PER_HOUR.format(
                limit=self.per_hour)})
            return
        for key, value in scope.get("headers") or ():
            if key == b"content-length" and value.strip().isdigit() and int(value) > self.max_bytes:
                await _send_json(send, 413, {"detail": texts.ACCESS_UPLOAD_TOO_BIG.format(
                    limit=self.max_bytes)})
                return
        body = await _read_body(receive, self.max_bytes)
        if body is None:  # no (or a false) length, and more bytes than allowed
            await _send_json(send, 413, {"detail": texts.ACCESS_UPLOAD_TOO_BIG.format(
                limit=self.max_bytes)})
            return
        times.append(now)
        self._times[client] = times
        if len(self._times) > 10_000:  # forget clients whose uploads are all older than the window
            self._times = {c: ts for c, ts in self._times.items()
                           if ts and now - ts[-1] < self.WINDOW_S}
        await self.app(scope, _replayer(body, receive), send)


async def _read_body(receive, limit: int) -> bytes | None:
    """The request's body, or None as soon as it is longer than ``limit`` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
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


async def _send_json(send, status: int, payload: dict) -> None:
    data = json.dumps(payload).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def queue_counter(demo: Any, groups: Iterable[str], access: Access) -> Callable[[str], int]:
    """``pending(client)``: the events of concurrency groups ``groups`` that ``client`` has
    waiting in ``demo``'s queue or running.

    Reads Gradio's queue (``Queue.event_queue_per_concurrency_id``, ``Queue.active_jobs``; Gradio
    6.17, covered by tests/test_public.py)."""
    groups = set(groups)

    def client_of_event(event: Any) -> str:
        request = getattr(event, "request", None)
        scope = getattr(request, "scope", None) or {}
        return access.client_of(scope)

    def pending(client: str) -> int:
        queue = demo._queue
        events = []
        for group, waiting in queue.event_queue_per_concurrency_id.items():
            if group in groups:
                events += list(waiting.queue)
        for job in queue.active_jobs:
            for event in job or ():
                if event.fn.concurrency_id in groups:
                    events.append(event)
        return sum(1 for event in events if client_of_event(event) == client)

    return pending
