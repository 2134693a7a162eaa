"""A public page's connections, where the web server (uvicorn, which Gradio 6.17 starts) accepts
them (covered by tests/test_hostile_server.py).

:func:`guarded_protocol` (:class:`GuardedConnection`, :class:`ConnectionLimits`): a connection
must send a request's headers within :attr:`Access.header_timeout
<mars_demo.hosting.access.Access.header_timeout>` seconds, on its opening and between two requests
(uvicorn waits for them without limit: a connection that never finishes them holds a file
descriptor for good, and ~1,000 of them made the server refuse every connection);
a request's body may pause at most :attr:`Access.body_timeout
<mars_demo.hosting.access.Access.body_timeout>` seconds and, past that time from its headers, must
average :data:`~mars_demo.hosting.access.MIN_BODY_RATE` (uvicorn waits for a body without limit too: one
byte every few seconds held a connection for good); and one client holds at most
:attr:`Access.connections_per_client` connections (more are answered HTTP 429 and closed). Behind
a proxy (a Space, ``--trusted-proxy``) the connections are the proxy's, so only the timeouts apply
here: the proxy limits its clients (docs/public-page.md says what to set in nginx).

Which hosts and web sites the page answers is :mod:`mars_demo.ui.guards.origins`. Neither can be set
through ``demo.launch``: :class:`OnStart` installs both when the server starts (its lifespan),
before it accepts a connection.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import resource
from collections.abc import Callable
from typing import Any

from mars_demo import texts
from mars_demo.hosting.access import MIN_BODY_RATE, Access
from mars_demo.ui.guards.origins import replace_cors

log = logging.getLogger(__name__)

NO_GUARD_LOG = ("the header and body timeouts and the per-client connection limit are not in "
                "force: the page does not run in Gradio's uvicorn server")


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
    (:func:`more_open_files`), and Gradio's CORS middleware replaced by the page's own host and
    origin checks (:func:`~mars_demo.ui.guards.origins.replace_cors`; ``share_url``: the page's
    ``*.gradio.live`` address once it has one)."""
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

BODY_CHECK_S = 1.0  # how often a request's body on its way is looked at
REFUSED = ("HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
           "connection: close\r\ncontent-length: {length}\r\n\r\n{body}")


def guarded_protocol(base: type, access: Access) -> type:
    """A subclass of uvicorn's HTTP protocol class ``base`` (h11 or httptools) with the header
    and body timeouts and the per-client connection cap of ``access``: :class:`GuardedConnection`
    before ``base``, with the :class:`ConnectionLimits` of ``access``."""
    return type(f"Guarded{base.__name__}", (GuardedConnection, base),
                {"limits": ConnectionLimits(access), "__module__": __name__})


class ConnectionLimits:
    """What the guard of one server's connections enforces (``access``'s header and body
    timeouts and connections per client), and the connections it counts: those of each client,
    by transport, so that a connection handed to another protocol (a WebSocket) still counts
    while open."""

    def __init__(self, access: Access) -> None:
        self.header_timeout = access.header_timeout
        self.body_timeout = access.body_timeout
        self.per_client = access.connections_per_client
        self.identity = access.identity
        self.held: dict[str, set] = collections.defaultdict(set)  # client -> open transports
        body = json.dumps({"detail": texts.ACCESS_TOO_MANY_CONNECTIONS.format(
            limit=self.per_client)})
        self.refused = REFUSED.format(length=len(body.encode()), body=body).encode()

    def admit(self, transport: Any) -> str | None | bool:
        """Count a new connection: the client key it counts under (None: not counted, a
        proxy's or one without an address), or False when its client holds
        :attr:`per_client` already."""
        peer = transport.get_extra_info("peername")
        key = self.identity.connection_key(str(peer[0])) if peer else None
        if key is None or self.per_client is None:
            return None
        mine = self.held[key]
        mine.difference_update([t for t in mine if t.is_closing()])
        if len(mine) >= self.per_client:
            return False
        mine.add(transport)
        return key

    def release(self, key: str, transport: Any) -> None:
        mine = self.held.get(key)
        if mine is not None:
            mine.discard(transport)
            if not mine:
                self.held.pop(key, None)


class GuardedConnection:
    """The guard of a connection, put before uvicorn's protocol class (:func:`guarded_protocol`
    sets :attr:`limits`).

    A request's headers are complete when the protocol starts its request cycle (both of
    uvicorn's protocols assign ``self.cycle`` then); the header timer runs from the connection's
    opening and again from the end of each response until then. From then until its body is in
    (the cycle's ``more_body`` turns False) or the response is sent, the body is watched every
    :data:`BODY_CHECK_S`: closed when it paused ``body_timeout`` seconds, or when it is past
    ``body_timeout`` + its bytes / :data:`~mars_demo.hosting.access.MIN_BODY_RATE` seconds from the
    headers; time the server itself does not read (uvicorn pauses reading a body the app has not
    taken yet, or waits for the app before answering ``Expect: 100-continue``) does not count.
    A client past its connections is answered 429 and closed."""

    limits: ConnectionLimits
    _mars_timer = None
    _mars_key = None
    _mars_body = None  # the body's timer, while one is on its way
    _mars_body_start = _mars_body_last = _mars_body_checked = 0.0
    _mars_body_bytes = 0

    @property
    def cycle(self):
        return self.__dict__.get("_mars_cycle")

    @cycle.setter
    def cycle(self, value):
        self.__dict__["_mars_cycle"] = value
        if value is not None:  # a request's headers are in: its body may follow
            self._mars_stop()
            self._mars_body_watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._mars_body is not None:
            if self._mars_body_done():
                self._mars_body_stop()
            else:
                self._mars_body_last = self.loop.time()
                self._mars_body_bytes += len(data)

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        key = self.limits.admit(transport)
        if key is False:
            transport.write(self.limits.refused)
            transport.close()
            return
        self._mars_key = key
        self._mars_wait()

    def connection_lost(self, exc) -> None:
        self._mars_stop()
        self._mars_body_stop()
        if self._mars_key is not None:
            self.limits.release(self._mars_key, self.transport)
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._mars_wait()  # the next request's headers, on a kept-alive connection

    # --- the headers' timer ----------------------------------------------------------------------

    def _mars_wait(self) -> None:
        if self.limits.header_timeout is None:
            return
        self._mars_stop()
        self._mars_timer = self.loop.call_later(self.limits.header_timeout, self._mars_timed_out)

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

    # --- the body's watch ------------------------------------------------------------------------

    def _mars_body_watch(self) -> None:
        body_timeout = self.limits.body_timeout
        if body_timeout is None:
            return
        self._mars_body_stop()
        now = self.loop.time()
        self._mars_body_start = self._mars_body_last = self._mars_body_checked = now
        self._mars_body_bytes = 0
        self._mars_body = self.loop.call_later(min(BODY_CHECK_S, body_timeout),
                                               self._mars_body_check)

    def _mars_body_stop(self) -> None:
        if self._mars_body is not None:
            self._mars_body.cancel()
            self._mars_body = None

    def _mars_body_done(self) -> bool:
        cycle = self.cycle
        return cycle is None or not cycle.more_body or cycle.response_complete

    def _mars_body_check(self) -> None:
        self._mars_body = None
        transport = self.transport
        if (transport.is_closing() or transport.get_protocol() is not self
                or self._mars_body_done()):
            return
        now = self.loop.time()
        if self.flow.read_paused or getattr(self.cycle, "waiting_for_100_continue", False):
            # the server's pause, not the client's: its time does not count
            self._mars_body_start += now - self._mars_body_checked
            self._mars_body_last = now
        self._mars_body_checked = now
        body_timeout = self.limits.body_timeout
        deadline = min(self._mars_body_last + body_timeout,
                       self._mars_body_start + body_timeout
                       + self._mars_body_bytes / MIN_BODY_RATE)
        if now >= deadline:
            transport.close()  # the app reads http.disconnect
            return
        self._mars_body = self.loop.call_later(min(BODY_CHECK_S, deadline - now),
                                               self._mars_body_check)
