"""The MARS Demo web page (Gradio).

>>> from mars_demo.engine import Engine                         # doctest: +SKIP
>>> from mars_demo.ui import build_demo, launch_options         # doctest: +SKIP
>>> build_demo(Engine()).launch(**launch_options())             # doctest: +SKIP

:mod:`panels` declares every result panel once (its component, renderer, and whether the
scoring toggle redraws it), the list the layout, the events and the controller loop over;
:mod:`render`, :mod:`tables`, :mod:`explain`, :mod:`captions`, :mod:`trust` (the verdict) and
:mod:`plots` turn an :class:`~mars_demo.result.AnalysisResult` into HTML and Plotly figures;
:mod:`controller` holds the page's event handlers and :mod:`api` the API's; :mod:`worker` runs
the work in a thread and relays its progress; :mod:`host` serializes the engine and tracks model loading; :mod:`redact` is
the one redaction of what visitors get; :mod:`route_list`, :mod:`limits`, :mod:`uploads`,
:mod:`connections` and :mod:`origins` enforce the visitor policy (:mod:`mars_demo.access`) on
the server; :mod:`layout` builds the page and :mod:`launch` what ``demo.launch`` needs (and
:func:`stop`, what a stop does).
"""

from mars_demo.ui.launch import launch_options, stop
from mars_demo.ui.layout import QUEUE_MAX_SIZE, build_demo, load_examples

__all__ = ["QUEUE_MAX_SIZE", "build_demo", "launch_options", "load_examples", "stop"]
