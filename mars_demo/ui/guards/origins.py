"""Which host names a public page answers to, and which web sites may call it from a browser
(covered by tests/test_hostile_server.py and tests/test_hostile_hosts.py).

- :class:`KnownHosts`: a request must name a host of the page (:meth:`PageHosts.named`), or it is
  refused (HTTP 421) before anything else runs. Without it, DNS rebinding passed the origin check:
  a foreign site points its own name at the page's address, and its visitors' browsers then take
  the page for that site (``Host: evil.example``, ``Origin: http://evil.example``: the same
  origin), calling ``/analyze`` each from its own address, past the per-client limits.
- :class:`SameOrigin`: Gradio answers a browser's cross-origin request from any web site (it
  reflects any ``Origin`` with credentials once the page is reached by a host name). A public
  page answers only its own pages (an ``Origin`` of the host, port and scheme the request was
  sent to, :meth:`PageHosts.own_origins`) and the origins the host names
  (``--allowed-origins``, a Space's, the share link's); any other origin is refused (HTTP 403)
  and never reflected.

Both replace Gradio's CORS middleware when the server starts (:func:`replace_cors`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from mars_demo import texts
from mars_demo.hosting.access import Access
from mars_demo.hosting.clients import host_name, web_origin
from mars_demo.ui.guards.limits import send_json


class PageHosts:
    """The host names and origins of a public page, and what a request says of them.

    Known hosts (:meth:`Access.knows_host`): the host's own (``--public-host``, the hosts of
    ``--allowed-origins``, the address the page listens on), a Space's (``SPACE_HOST``, where
    ``SPACE_ID`` is set), the share link's once it has one (``share_url``), ``localhost`` and any
    address. Only the deployment's proxy (:meth:`ClientIdentity.connection_key`) is believed
    about ``X-Forwarded-Host`` and ``X-Forwarded-Proto``."""

    def __init__(self, access: Access, share_url: Callable[[], str | None] = lambda: None,
                 env: Any = os.environ) -> None:
        self.access = access
        self.share_url = share_url
        self.space = [h.strip() for h in env.get("SPACE_HOST", "").split(",")
                      if h.strip()] if env.get("SPACE_ID") else []
        self.origins = set(access.allowed_origins) | {web_origin(f"https://{h}")
                                                      for h in self.space}

    def shared(self) -> str | None:
        """The origin of the page's share link (``--share``), once it has one."""
        url = self.share_url()
        try:
            return web_origin(url.rstrip("/")) if url else None
        except ValueError:
            return None

    def _also(self) -> list[str]:
        shared = self.shared()
        return [h for h in (*(host_name(h) for h in self.space),
                            host_name(shared.split("://", 1)[1]) if shared else None) if h]

    def _from_proxy(self, scope) -> bool:
        client = scope.get("client")
        return bool(client) and self.access.identity.connection_key(str(client[0])) is None

    @staticmethod
    def _header(scope, name: bytes) -> list[str]:
        return [value.decode("latin-1") for key, value in scope.get("headers") or ()
                if key == name]

    def named(self, scope) -> list[str]:
        """The hosts a request names, as sent (with their port): its ``Host``, and where the
        deployment's proxy sends one the first entry of ``X-Forwarded-Host`` (on a Space, whose
        proxy routes by host, that entry alone where there is one)."""
        hosts = self._header(scope, b"host")
        forwarded = [v.split(",")[0].strip() for v in self._header(scope, b"x-forwarded-host")]
        if forwarded and self._from_proxy(scope):
            return forwarded[:1] if self.access.identity.any_peer else hosts + forwarded[:1]
        return hosts

    def unknown(self, scope) -> str | None:
        """The first host the request names that is not the page's (or "" when it names none);
        None when every one is known."""
        named = self.named(scope)
        if not named:
            return ""
        also = self._also()
        return next((h for h in named if not self.access.knows_host(host_name(h), also)), None)

    def scheme(self, scope) -> str:
        """The scheme the visitor used: the deployment's proxy's ``X-Forwarded-Proto`` (which
        may end TLS in front of the page), else the connection's."""
        forwarded = self._header(scope, b"x-forwarded-proto")
        if forwarded and self._from_proxy(scope):
            return forwarded[0].split(",")[0].strip().lower()
        return str(scope.get("scheme") or "http")

    def own_origins(self, scope) -> set[str]:
        """The page's own origins for a request: the scheme it was sent with, and each host
        (and port) it names."""
        scheme, own = self.scheme(scope), set()
        for host in self.named(scope):
            try:
                own.add(web_origin(f"{scheme}://{host.strip()}"))
            except ValueError:
                continue
        return own

    def allows_origin(self, origin: str, scope) -> bool:
        return origin in self.origins or origin == self.shared() or origin in self.own_origins(scope)


def replace_cors(app: Any, access: Access,
                 share_url: Callable[[], str | None] = lambda: None) -> None:
    """Put :class:`KnownHosts` and :class:`SameOrigin`, in that order, where Gradio's CORS
    middleware is in ``app``'s middleware (the stack is built again at the next request)."""
    from gradio.route_utils import CustomCORSMiddleware
    from starlette.middleware import Middleware

    hosts = PageHosts(access, share_url)
    ours = [Middleware(KnownHosts, hosts=hosts), Middleware(SameOrigin, hosts=hosts)]
    at = next((i for i, entry in enumerate(app.user_middleware)
               if getattr(entry, "cls", None) is CustomCORSMiddleware), None)
    if at is None:
        app.user_middleware[0:0] = ours
    else:
        app.user_middleware[at:at + 1] = ours
    app.middleware_stack = None


class KnownHosts:
    """ASGI middleware: a request (or WebSocket) that names a host the page does not know
    (:meth:`PageHosts.unknown`) is refused before anything runs: HTTP 421 with the reason."""

    def __init__(self, app: Callable, hosts: PageHosts) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        unknown = self.hosts.unknown(scope)
        if unknown is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send_json(send, 421, {"detail": texts.ACCESS_UNKNOWN_HOST.format(
            host=unknown[:100] or "(none)")})


class SameOrigin:
    """CORS of a public page: a browser's request that carries an ``Origin`` is answered only
    when that origin is the page's own or one the host allowed (:meth:`PageHosts.allows_origin`),
    with the headers that let the browser read the answer (as Gradio's own middleware does for
    its origins); any other origin gets HTTP 403 before anything runs, and no CORS header."""

    METHODS = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"

    def __init__(self, app: Callable, hosts: PageHosts) -> None:
        self.app = app
        self.hosts = hosts

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
        if origin is None or not self.hosts.allows_origin(origin, scope):
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
