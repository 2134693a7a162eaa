"""A public page's connections, where the web server (uvicorn, which Gradio 6.17 starts) accepts
them, and which web sites may call the page from a browser (covered by
tests/test_hostile_server.py).

- :func:`guarded_protocol`: a connection must send a request's headers within
  :attr:`Access.header_timeout <mars_demo.access.Access.header_timeout>` seconds, on its opening
  and between two requests (uvicorn waits for them without limit: a connection that never
  finishes them holds a file descriptor for good, and ~1,000 of them made the server refuse every
  connection), and one client holds at most :attr:`Access.connections_per_client` connections
  (more are answered HTTP 429 and closed). Behind a proxy (a Space, ``--trusted-proxy``) the
  connections are the proxy's, so only the header timeout applies here: the proxy limits its
  clients (docs/public-page.md says what to set in nginx).
- :class:`SameOrigin`: Gradio answers a browser's cross-origin request from any web site (it
  reflects any ``Origin`` with credentials once the page is reached by a host name), so any site
  could make its visitors' browsers call ``/analyze``, each from its own address, past the
  per-client limits. A public page answers only its own pages (the request's ``Host``, the
  ``X-Forwarded-Host`` of the deployment's proxy, a Space's ``SPACE_HOST``) and the origins the
  host names (``--allowed-origins``); any other origin is refused (HTTP 403) and never reflected.

Neither can be set through ``demo.launch``: :class:`OnStart` installs both when the server starts
(its lifespan), before it accepts a connection.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import resource
from collections.abc import Callable
from typing import Any

from mars_demo import texts
from mars_demo.access import Access, web_origin
from mars_demo.ui.limits import send_json

log = logging.getLogger(__name__)

NO_GUARD_LOG = ("the header timeout and the per-client connection limit are not in force: "
                "the page does not run in Gradio's uvicorn server")


# --- the server's start ---------------------------------------------------------------------------


class OnStart:
    """ASGI middleware that calls ``hook(app, config)`` once, when the server starts: ``app`` the
    Starlette app, ``config`` uvicorn's ``Config`` of the server (None when the page does not run
    in uvicorn, :func:`server_config`). The lifespan's startup comes before the server listens,
    so what the hook changes holds for every connection."""

    def __init__(self, app: Callable, hook: Callable[[Any, Any], None]) -> None:
        self.app = app
        self.hook = hook
        self.started = False

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") == "lifespan" and not self.started:
            self.started = True
            self.hook(scope.get("app"), server_config())
        await self.app(scope, receive, send)


def server_config() -> Any:
    """uvicorn's ``Config`` of the server whose lifespan runs now, or None: uvicorn runs the
    lifespan in a task of its own, ``LifespanOn.main``, whose object holds the config (the
    ``receive`` it passes may be wrapped by middleware, FastAPI's own included)."""
    try:
        coroutine = asyncio.current_task().get_coro()
        owner = coroutine.cr_frame.f_locals.get("self")
    except (AttributeError, RuntimeError):
        return None
    config = getattr(owner, "config", None)
    return config if hasattr(config, "http_protocol_class") else None


def guard_server(app: Any, config: Any, access: Access,
                 share_url: Callable[[], str | None] = lambda: None) -> None:
    """On a public page's start: the connection guard in uvicorn's HTTP protocol
    (:func:`guarded_protocol`), the open-file limit raised to what the system allows
    (:func:`more_open_files`), and Gradio's CORS middleware replaced by :class:`SameOrigin`
    (``share_url``: the page's ``*.gradio.live`` address once it has one)."""
    if config is not None and hasattr(config, "http_protocol_class"):
        config.http_protocol_class = guarded_protocol(config.http_protocol_class, access)
        more_open_files()
    else:
        log.warning(NO_GUARD_LOG)
    replace_cors(app, access, share_url)


def more_open_files() -> None:
    """Raise this process's soft limit of open files to its hard limit (often 1,024 against
    hundreds of thousands), so that many clients' connections do not run the server out of
    file descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return
        log.info("open files: at most %d (was %d)", target, soft)


# --- uvicorn's HTTP protocol --------------------------------------------------------------------

REFUSED = ("HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
           "connection: close\r\ncontent-length: {length}\r\n\r\n{body}")


def guarded_protocol(base: type, access: Access) -> type:
    """A subclass of uvicorn's HTTP protocol class ``base`` (h11 or httptools) with the header
    timeout and the per-client connection cap of ``access``.

    A request's headers are complete when the protocol starts its request cycle (both of
    uvicorn's protocols assign ``self.cycle`` then); the timer runs from the connection's opening
    and again from the end of each response until then. The connections of a client are counted
    by transport, so a connection handed to another protocol (a WebSocket) still counts while
    open."""
    timeout = access.header_timeout
    limit = access.connections_per_client
    identity = access.identity
    held: dict[str, set] = collections.defaultdict(set)  # client -> its open transports
    body = json.dumps({"detail": texts.ACCESS_TOO_MANY_CONNECTIONS.format(limit=limit)})
    refused = REFUSED.format(length=len(body.encode()), body=body).encode()

    class Guarded(base):
        _mars_timer = None
        _mars_key = None

        @property
        def cycle(self):
            return self.__dict__.get("_mars_cycle")

        @cycle.setter
        def cycle(self, value):
            self.__dict__["_mars_cycle"] = value
            if value is not None:  # a request's headers are in
                self._mars_stop()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            peer = transport.get_extra_info("peername")
            key = identity.connection_key(str(peer[0])) if peer else None
            if key is not None and limit is not None:
                mine = held[key]
                mine.difference_update([t for t in mine if t.is_closing()])
                if len(mine) >= limit:
                    transport.write(refused)
                    transport.close()
                    return
                mine.add(transport)
                self._mars_key = key
            self._mars_wait()

        def connection_lost(self, exc) -> None:
            self._mars_stop()
            if self._mars_key is not None:
                mine = held.get(self._mars_key)
                if mine is not None:
                    mine.discard(self.transport)
                    if not mine:
                        held.pop(self._mars_key, None)
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._mars_wait()  # the next request's headers, on a kept-alive connection

        def _mars_wait(self) -> None:
            if timeout is None:
                return
            self._mars_stop()
            self._mars_timer = self.loop.call_later(timeout, self._mars_timed_out)

        def _mars_stop(self) -> None:
            if self._mars_timer is not None:
                self._mars_timer.cancel()
                self._mars_timer = None

        def _mars_timed_out(self) -> None:
            self._mars_timer = None
            transport = self.transport
            if transport.is_closing() or transport.get_protocol() is not self:
                return  # closed, or handed to another protocol
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a request is running
            transport.close()

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


# --- which web pages may call this one ----------------------------------------------------------


def replace_cors(app: Any, access: Access,
                 share_url: Callable[[], str | None] = lambda: None) -> None:
    """Put :class:`SameOrigin` where Gradio's CORS middleware is in ``app``'s middleware (the
    stack is built again at the next request)."""
    from starlette.middleware import Middleware

    from gradio.route_utils import CustomCORSMiddleware

    replaced = False
    for i, entry in enumerate(app.user_middleware):
        if getattr(entry, "cls", None) is CustomCORSMiddleware:
            app.user_middleware[i] = Middleware(SameOrigin, access=access, share_url=share_url)
            replaced = True
    if not replaced:
        app.user_middleware.insert(0, Middleware(SameOrigin, access=access, share_url=share_url))
    app.middleware_stack = None


class SameOrigin:
    """CORS of a public page: a browser's request that carries an ``Origin`` is answered only
    when that origin is the page's own (:meth:`own`, or its share link) or one the host allowed
    (:attr:`Access.allowed_origins <mars_demo.access.Access.allowed_origins>`), with the headers
    that let the browser read the answer (as Gradio's own middleware does for its origins); any
    other origin gets HTTP 403 before anything runs, and no CORS header."""

    METHODS = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"

    def __init__(self, app: Callable, access: Access,
                 share_url: Callable[[], str | None] = lambda: None) -> None:
        self.app = app
        self.access = access
        self.share_url = share_url
        spaces = [h.strip() for h in os.environ.get("SPACE_HOST", "").split(",") if h.strip()]
        self.allowed = set(access.allowed_origins) | {
            web_origin(f"https://{host}") for host in spaces if os.environ.get("SPACE_ID")}

    def own(self, origin: str, scope) -> bool:
        """Whether ``origin`` (normalized) is the page's own: the host the request was sent to
        (``Host``; through the deployment's proxy also its ``X-Forwarded-Host``), on any scheme
        (a proxy in front may end TLS)."""
        hosts = [value.decode("latin-1") for key, value in scope.get("headers") or ()
                 if key == b"host"]
        client = scope.get("client")
        if client and self.access.identity.connection_key(str(client[0])) is None:
            hosts += [value.decode("latin-1").split(",")[0]
                      for key, value in scope.get("headers") or () if key == b"x-forwarded-host"]
        scheme = origin.split("://", 1)[0]
        for host in hosts:
            try:
                if web_origin(f"{scheme}://{host.strip()}") == origin:
                    return True
            except ValueError:
                continue
        return False

    def _shared(self) -> str | None:
        """The origin of the page's share link (``--share``), whatever Host its tunnel sends."""
        url = self.share_url()
        try:
            return web_origin(url.rstrip("/")) if url else None
        except ValueError:
            return None

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = {key: value for key, value in scope.get("headers") or ()}
        sent = headers.get(b"origin")
        if sent is None:
            await self.app(scope, receive, send)
            return
        text = sent.decode("latin-1")
        try:
            origin = web_origin(text)
        except ValueError:
            origin = None
        if origin is None or not (origin in self.allowed or self.own(origin, scope)
                                  or origin == self._shared()):
            await send_json(send, 403, {"detail": texts.ACCESS_FOREIGN_ORIGIN.format(
                origin=text[:100])})
            return
        cors = [(b"access-control-allow-origin", sent),
                (b"access-control-allow-credentials", b"true"), (b"vary", b"Origin")]
        if scope.get("method") == "OPTIONS" and b"access-control-request-method" in headers:
            cors += [(b"access-control-allow-methods", self.METHODS.encode()),
                     (b"access-control-max-age", b"600")]
            if b"access-control-request-headers" in headers:
                cors.append((b"access-control-allow-headers",
                             headers[b"access-control-request-headers"]))
            await send({"type": "http.response.start", "status": 200,
                        "headers": [*cors, (b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"OK"})
            return

        async def with_cors(message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [
                    (k, v) for k, v in message.get("headers", ())
                    if not k.lower().startswith(b"access-control-")] + cors}
            await send(message)

        await self.app(scope, receive, with_cors)
