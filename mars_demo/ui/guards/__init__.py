"""A public page's guards, on the server: every route and its policy (``route_list.py``), the
queue's door and request limits (``limits.py``), file inputs that must name uploads
(``uploads.py``), timeouts and connections per client (``connections.py``), the page's host names
and web origins (``origins.py``), what Gradio keeps per visitor and request (``sessions.py``,
``memory.py``), the toggle's re-renders kept (``kept_renders.py``) and the one redaction of what
visitors get (``redact.py``); the visitor policy itself is :mod:`mars_demo.hosting.access`.

It imports nothing else of the page (tests/test_layers.py): the guards hold whatever the page
becomes.
"""
