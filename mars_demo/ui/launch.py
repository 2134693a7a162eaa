"""What ``demo.launch`` needs besides the page itself: the CSS, the page's script, the theme, the
upload limit, the bounds of what the server keeps per visitor (:mod:`mars_demo.ui.guards.memory`,
:mod:`mars_demo.ui.guards.uploads`) and, on a public page, the routes it serves
(:mod:`mars_demo.ui.guards.route_list`) and the request and connection limits
(:mod:`mars_demo.ui.guards.limits`, :mod:`mars_demo.ui.guards.connections`)."""

from __future__ import annotations

import contextlib
import functools
import json
from pathlib import Path
from typing import Any

import gradio as gr

from mars_demo import texts
from mars_demo.hosting.access import Access
from mars_demo.ui.draw import render
from mars_demo.ui.guards import connections, limits, memory, route_list, sessions, uploads
from mars_demo.ui.page import ASSETS

CSS_PATH = ASSETS / "style.css"
JS_PATH = ASSETS / "page.js"  # keyboard and touch access to the tokens, the queue line...
MAX_UPLOAD = 1_000_000  # bytes per uploaded file (the Evaluation view reads report.json)
UPLOADS_PER_HOUR = 30  # per client on a public page (uploads stay on disk 1-2 hours)
# The texts ui/assets/page.js writes into the page (window.marsTexts).
PAGE_TEXTS = ("QUEUE_PLACE", "QUEUE_ELAPSED", "ACCESS_WORK_NOTE", "ACCESS_WORK_OVER",
              "VERDICT_DONE", "VERDICT_WORKING", "ASK_BUSY", "ANSWER_WAITING", "SCROLL_REGION",
              "ASK_STARTED", "ASK_STILL_WORKING")

# Font weights the page's theme loads. Gradio bundles its default fonts (served offline too),
# but its 600 ("SemiBold") files of Source Sans Pro and IBM Plex Mono hold a few glyphs only
# (of basic Latin, just "A" and "B"), so semibold text mixed fonts letter by letter. With only
# 400 and 700 declared, CSS draws weight 600 with the complete 700 face.
FONT_WEIGHTS = (400, 700)


#: Colors of Gradio's default theme that read below WCAG 2.2 AA's 4.5:1 (its subdued text, gray
#: 400 on white, 2.6:1; white on the orange 500 of Ask, 2.8:1), set where the theme sets them, so
#: that Gradio's own parts follow as well as the page's (tests/test_browser_a11y.py checks them
#: with axe-core in both themes).
READABLE = {
    "body_text_color_subdued": "*neutral_600",  # 7.7:1 on white
    "body_text_color_subdued_dark": "*neutral_400",  # 7.8:1 on neutral 950, 5.3:1 on 800
    "input_placeholder_color": "*neutral_500",
    "input_placeholder_color_dark": "*neutral_400",
    "button_primary_background_fill": "*primary_700",  # white on orange 700: 5.2:1
    "button_primary_background_fill_hover": "*primary_800",
    "button_primary_background_fill_dark": "*primary_700",
    "button_primary_background_fill_hover_dark": "*primary_800",
}


def theme() -> gr.themes.Base:
    """Gradio's default theme with fonts whose every declared face is complete, and text colors
    that everyone can read (:data:`READABLE`)."""
    return gr.themes.Default(
        font=[gr.themes.LocalFont("Source Sans Pro", weights=FONT_WEIGHTS),
              "ui-sans-serif", "system-ui", "sans-serif"],
        font_mono=[gr.themes.LocalFont("IBM Plex Mono", weights=FONT_WEIGHTS),
                   "ui-monospace", "Consolas", "monospace"],
    ).set(**READABLE)


def head() -> str:
    """The page's ``<head>``: the token shading of both themes and the texts the style sheet
    shows (CSS variables), then a script of its texts and ui/assets/page.js."""
    strings = json.dumps({name: getattr(texts, name) for name in PAGE_TEXTS}, ensure_ascii=False)
    drawing = json.dumps(texts.CHART_DRAWING, ensure_ascii=False)
    return (f"<style>\n{render.palette_css()}\n:root {{ --mars-text-drawing: {drawing}; }}\n"
            f"</style>\n<script>\nwindow.marsTexts = {strings};\n"
            f"{JS_PATH.read_text(encoding='utf-8')}\n</script>")


def launch_options(demo: gr.Blocks | None = None) -> dict[str, Any]:
    """Keyword arguments of ``demo.launch`` that belong to the page: the CSS, the script and the
    theme (Gradio 6 takes them there) and the upload limit. With ``demo`` (built by
    :func:`~mars_demo.ui.page.layout.build_demo`) also what runs when the server starts
    (:func:`on_start`) and, on a public page, the list of routes it serves
    (:class:`~mars_demo.ui.guards.route_list.RouteList`) and the request limits
    (:class:`~mars_demo.ui.guards.limits.RequestLimits`); the server then keeps each connection's own
    address (:func:`~mars_demo.ui.guards.limits.keep_peer_addresses`), so that only the page's
    :class:`~mars_demo.hosting.clients.ClientIdentity` reads X-Forwarded-For; and on every page the
    sessions' scope (:class:`~mars_demo.ui.guards.sessions.SessionScope`: who makes a session, and no
    session left behind by a request outside the queue)."""
    options: dict[str, Any] = {
        "css_paths": [CSS_PATH],
        "head": head(),
        "theme": theme(),
        "max_file_size": MAX_UPLOAD,
    }
    if demo is None:
        return options
    from starlette.middleware import Middleware

    access = getattr(demo, "mars_access", None) or Access()
    middleware = [Middleware(connections.OnStart,
                             hook=functools.partial(on_start, demo=demo, access=access))]
    if access.public:
        limits.keep_peer_addresses()
        middleware.append(Middleware(
            route_list.RouteList, access=access,
            server_functions=route_list.has_server_functions(demo)))
        middleware.append(Middleware(
            limits.RequestLimits, access=access,
            max_upload_bytes=MAX_UPLOAD + limits.UPLOAD_FRAMING_BYTES,
            uploads_per_hour=UPLOADS_PER_HOUR))
    middleware.append(Middleware(sessions.SessionScope, access=access))
    options["app_kwargs"] = {"middleware": middleware}
    return options


def on_start(app: Any, config: Any, *, demo: gr.Blocks, access: Access) -> None:
    """When ``demo``'s server starts (``app`` its Starlette app, ``config`` uvicorn's): bound
    what it keeps per visitor and request (:func:`~mars_demo.ui.guards.memory.bound_memory`, which
    keeps sessions by what they hold; :func:`~mars_demo.ui.guards.uploads.bounded_upload_progress`); on
    a public page also guard its connections, hosts and
    origins (:func:`~mars_demo.ui.guards.connections.guard_server`)."""
    memory.bound_memory(demo, app, client_of=lambda event: access.client_of(
        getattr(getattr(event, "request", None), "scope", None) or {}))
    uploads.bounded_upload_progress()
    if access.public:
        connections.guard_server(app, config, access,
                                 share_url=lambda: getattr(demo, "share_url", None))


def stop(demo: gr.Blocks) -> None:
    """Stop ``demo``'s server as a normal shutdown does (its queue, then its connections), and
    remove the files Gradio made for it in its cache folder (the downloads it served, the
    uploads): Gradio removes them in its server's shutdown, which a stop by signal (SIGTERM) did
    not reach, so they stayed there for good. Called by ``app.py`` however the page ends."""
    from gradio.route_utils import delete_files_created_by_app

    folders = {Path(file).parent for files in demo.temp_file_sets for file in list(files)}
    demo.close(verbose=False)
    delete_files_created_by_app(demo, age=None)
    for folder in folders:  # Gradio's folder per file (named by its hash), now empty
        with contextlib.suppress(OSError):
            folder.rmdir()
