"""Every HTTP route a public page's server answers, on a list (Gradio 6.17's and the page's own;
covered by tests/test_hostile_routes.py).

:data:`ROUTES` gives each route, by method and path as the web server declares it, one policy:

- :data:`SERVED`: served as it is (the page, its files and configuration, reading results);
- :data:`QUEUED`: served under the per-client places of the queue (the queue's door,
  :class:`~mars_demo.ui.guards.limits.QueueDoor`);
- :data:`RATED`: served under the per-client rate of requests outside the queue
  (:attr:`Access.direct_rate <mars_demo.hosting.access.Access.direct_rate>`, checked here);
- :data:`UPLOADS`: served under the per-client uploads an hour
  (:class:`~mars_demo.ui.guards.limits.RequestLimits`);
- :data:`REFUSED`: answered 404 before anything runs.

:class:`RouteList` (ASGI middleware of a public page) finds the route a request goes to the way
the web server's router does (each live route of the app in order, its own ``matches``), and
applies its policy; a route that is not on the list, or a request that matches no route, is
refused. So a Gradio upgrade that adds a route cannot open a door: the route is refused until it
is put on the list (tests/test_hostile_routes.py enumerates the live app's routes and fails on
one without a policy).

Refused, among others: ``/stream/{event_id}``, which replaced a queued event's whole request
(its data, its session) after the queue's door had admitted it; a generator such as Ask then
started afresh on every step, for ever, and a file input it carried skipped the door that refuses
URLs. The page takes no streamed input, so nothing may be sent into an event after its admission.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from mars_demo import texts
from mars_demo.hosting.access import DIRECT_BURST, Access
from mars_demo.hosting.clients import Allowance
from mars_demo.ui.guards.limits import send_json

SERVED = "served"
QUEUED = "served under the per-client queue places"
RATED = "served under the per-client rate"
UPLOADS = "served under the per-client uploads an hour"
REFUSED = "refused"
POLICIES = (SERVED, QUEUED, RATED, UPLOADS, REFUSED)

API = "/gradio_api"
#: a component's server functions (what ``/component_server`` calls): rated where a component of
#: the page has some, refused where none has (Gradio made a session for each request there)
SERVER_FUNCTIONS = (f"POST {API}/component_server", f"POST {API}/component_server/")

#: "METHOD path" (the path as the route declares it) -> its policy on a public page
ROUTES: dict[str, str] = {
    # the page itself, its files, configuration and style
    "GET /": SERVED,
    "HEAD /": SERVED,
    "GET /config": SERVED,
    "GET /config/": SERVED,
    "GET /svelte/{path:path}": SERVED,
    "GET /static/{path:path}": SERVED,
    "GET /assets/{path:path}": SERVED,
    "GET /favicon.ico": SERVED,
    "GET /theme.css": SERVED,
    f"GET {API}/theme.css": SERVED,
    "GET /robots.txt": SERVED,
    "GET /manifest.json": SERVED,
    f"GET {API}/info": SERVED,  # the API's parameters (no server paths: tests/test_public.py)
    f"GET {API}/info/": SERVED,
    f"GET {API}/app_id": SERVED,  # the page asks it when it reconnects
    f"GET {API}/app_id/": SERVED,
    f"GET {API}/startup-events": SERVED,  # Gradio's launch calls it to start the queue
    # files the server made or a visitor uploaded (Gradio serves only those), the download too
    f"GET {API}/file={{path_or_url:path}}": SERVED,
    f"HEAD {API}/file={{path_or_url:path}}": SERVED,
    f"GET {API}/file/{{path:path}}": SERVED,
    # waiting and reading results: streams of what the queue already holds
    f"GET {API}/heartbeat/{{session_hash}}": SERVED,
    f"GET {API}/queue/data": SERVED,
    f"GET {API}/queue/status": SERVED,
    f"GET {API}/call/{{api_name}}/{{event_id}}": SERVED,
    f"GET {API}/call/v2/{{api_name}}/{{event_id}}": SERVED,
    # into the queue: its door counts each client's places (and refuses URLs in file inputs)
    f"POST {API}/queue/join": QUEUED,
    f"POST {API}/call/{{api_name}}": QUEUED,
    f"POST {API}/call/{{api_name}}/": QUEUED,
    f"POST {API}/call/v2/{{api_name}}": QUEUED,
    f"POST {API}/call/v2/{{api_name}}/": QUEUED,
    # outside the queue: the page's quick checks, a stop (cancel, then reset), upload progress
    f"POST {API}/run/{{api_name}}": RATED,
    f"POST {API}/run/{{api_name}}/": RATED,
    f"POST {API}/api/{{api_name}}": RATED,
    f"POST {API}/api/{{api_name}}/": RATED,
    f"POST {API}/cancel": RATED,
    f"POST {API}/reset": RATED,
    f"POST {API}/reset/": RATED,
    f"GET {API}/upload_progress": RATED,
    **{route: RATED for route in SERVER_FUNCTIONS},
    f"POST {API}/upload": UPLOADS,
    # sending into an event after the queue admitted it (its data, its session): the page takes
    # no streamed input; and the media streams of outputs, which the page has none of
    f"POST {API}/stream/{{event_id}}": REFUSED,
    f"POST {API}/stream/{{event_id}}/close": REFUSED,
    f"GET {API}/stream/{{session_hash}}/{{run}}/{{component_id}}/playlist.m3u8": REFUSED,
    f"GET {API}/stream/{{session_hash}}/{{run}}/{{component_id}}/{{segment_id}}.{{ext}}": REFUSED,
    f"GET {API}/stream/{{session_hash}}/{{run}}/{{component_id}}/playlist-file": REFUSED,
    # fetching what a visitor names (another Gradio app's files)
    f"GET {API}/proxy={{url_path:path}}": REFUSED,
    f"HEAD {API}/proxy={{url_path:path}}": REFUSED,
    # every visitor's request counts and latencies; any session's components written to disk;
    # a screen recording re-encoded with ffmpeg
    "GET /monitoring": REFUSED,
    "GET /monitoring/summary": REFUSED,
    "GET /monitoring/{key}": REFUSED,
    f"GET {API}/deep_link": REFUSED,
    f"POST {API}/process_recording": REFUSED,
    # logins (the page has none), the development reload, custom components (none), the schema
    # of Gradio's own routes, and the editor that rewrites the app's code
    "POST /login": REFUSED,
    "POST /login/": REFUSED,
    "GET /logout": REFUSED,
    f"GET {API}/user": REFUSED,
    f"GET {API}/user/": REFUSED,
    f"GET {API}/login_check": REFUSED,
    f"GET {API}/login_check/": REFUSED,
    f"GET {API}/token": REFUSED,
    f"GET {API}/token/": REFUSED,
    f"GET {API}/dev/reload": REFUSED,
    f"GET {API}/custom_component/{{id}}/{{environment}}/{{type}}/{{file_name}}": REFUSED,
    "GET /openapi.json": REFUSED,
    "HEAD /openapi.json": REFUSED,
    f"GET {API}/openapi.json": REFUSED,
    "GET /pwa_icon": REFUSED,  # the page is no installable app, and has no icon to resize
    "GET /pwa_icon/{size}": REFUSED,
    f"POST {API}/vibe-edit": REFUSED,
    f"POST {API}/vibe-edit/": REFUSED,
    f"POST {API}/undo-vibe-edit": REFUSED,
    f"POST {API}/undo-vibe-edit/": REFUSED,
    f"GET {API}/vibe-code": REFUSED,
    f"GET {API}/vibe-code/": REFUSED,
    f"POST {API}/vibe-code": REFUSED,
    f"POST {API}/vibe-code/": REFUSED,
    f"POST {API}/vibe-starter-queries": REFUSED,
    f"POST {API}/vibe-starter-queries/": REFUSED,
    f"GET {API}/profiling/traces": REFUSED,
}


def live_routes(app: Any) -> Iterator[Any]:
    """The routes of the Starlette (FastAPI) ``app`` in the order its router tries them, those of
    included routers (Gradio's ``/gradio_api`` router) with their full path."""
    from fastapi.routing import iter_route_contexts

    return iter(iter_route_contexts(app.routes))


def route_keys(route: Any) -> list[str]:
    """The "METHOD path" keys of a route: one per method ("*" for a route of any method, such as
    a mounted app; "WEBSOCKET" for a WebSocket's)."""
    methods = getattr(route, "methods", None)
    if not methods:
        kind = type(getattr(route, "original_route", route)).__name__
        methods = ["WEBSOCKET"] if "WebSocket" in kind else ["*"]
    return [f"{method} {route.path}" for method in sorted(methods)]


def unlisted(app: Any, routes: dict[str, str] = ROUTES) -> list[str]:
    """The live routes of ``app`` without a policy in ``routes``."""
    return [key for route in live_routes(app) for key in route_keys(route) if key not in routes]


class RouteList:
    """ASGI middleware of a public page, in front of Gradio's routes: each request (and WebSocket)
    goes to the route the app's router would pick, and its policy in :data:`ROUTES` decides;
    :data:`REFUSED`, unlisted and unmatched requests are answered 404 before anything runs, and
    :data:`RATED` ones beyond the client's :attr:`Access.direct_rate` (at most
    :data:`~mars_demo.hosting.access.DIRECT_BURST` at once) 429. ``server_functions``: whether a
    component of the page has server functions (:data:`SERVER_FUNCTIONS`).

    The live routes are read once and again whenever the app's router says they changed (its
    routes' version), each with its path's pattern compiled as the router compiles it: a request
    is matched in some tens of microseconds (reading them for each request took about half a
    millisecond)."""

    def __init__(self, app: Callable, access: Access, server_functions: bool = True,
                 routes: dict[str, str] = ROUTES) -> None:
        self.app = app
        self.access = access
        self.routes = dict(routes)
        if not server_functions:
            self.routes.update({route: REFUSED for route in SERVER_FUNCTIONS})
        self.rate = (Allowance(access.direct_rate, DIRECT_BURST)
                     if access.direct_rate is not None else None)
        self._table: tuple[Any, int, list[tuple[Any, frozenset | None, Any]]] | None = None

    def table(self, app: Any) -> list[tuple[Any, frozenset | None, Any]]:
        """The live routes of ``app`` in the router's order: (the pattern of its path, its
        methods, the route), the pattern None for a route of any method (a mounted app, a
        WebSocket), matched by the route itself."""
        from starlette.routing import compile_path

        version = app.router._get_routes_version()
        if self._table is None or self._table[0] is not app or self._table[1] != version:
            rows = []
            for route in live_routes(app):
                methods = getattr(route, "methods", None)
                pattern = compile_path(route.path)[0] if methods else None
                rows.append((pattern, frozenset(methods) if methods else None, route))
            self._table = (app, version, rows)
        return self._table[2]

    def policy(self, scope) -> str:
        """The policy of the route a request (an ASGI scope) goes to; :data:`REFUSED` when it
        is not on the list or matches no route."""
        from starlette._utils import get_route_path
        from starlette.routing import Match

        app = scope.get("app")
        if app is None:
            return REFUSED
        http = scope["type"] == "http"
        method = scope.get("method") if http else "WEBSOCKET"
        path = get_route_path(scope)
        for pattern, methods, route in self.table(app):
            if pattern is not None:
                if http and method in methods and pattern.match(path):
                    return self.routes.get(f"{method} {route.path}", REFUSED)
            elif route.matches(scope)[0] == Match.FULL:
                return self.routes.get(route_keys(route)[0], REFUSED)
        return REFUSED

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        policy = self.policy(scope)
        if policy == REFUSED:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                await send_json(send, 404, {"detail": "Not Found"})
            return
        if policy == RATED and self.rate is not None and not self.rate.take(
                self.access.client_of(scope), 1.0, time.monotonic()):
            await send_json(send, 429, {"detail": texts.ACCESS_TOO_FAST})
            return
        await self.app(scope, receive, send)


def has_server_functions(demo: Any) -> bool:
    """Whether a component of ``demo`` offers server functions (what ``/component_server``
    calls: Gradio lists them in a component's ``server_fns``)."""
    return any(getattr(block, "server_fns", None) for block in demo.blocks.values())
