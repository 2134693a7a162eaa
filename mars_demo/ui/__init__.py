"""The MARS Demo web page (Gradio).

>>> from mars_demo.engine import Engine                         # doctest: +SKIP
>>> from mars_demo.ui import build_demo, launch_options         # doctest: +SKIP
>>> build_demo(Engine()).launch(**launch_options())             # doctest: +SKIP

Five folders, each on a floor of its own (tests/test_layers.py): :mod:`~mars_demo.ui.page`, the
Ask page (its layout, events, panels' declaration and handlers); :mod:`~mars_demo.ui.work`, what
a request starts (its inputs checked, the engine's host, the worker thread, the API);
:mod:`~mars_demo.ui.draw`, an analysis drawn as HTML and figures; :mod:`~mars_demo.ui.views`, the
Evaluation view; :mod:`~mars_demo.ui.guards`, a public page's guards, which enforce the visitor
policy (:mod:`mars_demo.hosting.access`) on the server. :mod:`~mars_demo.ui.launch` gives what
``demo.launch`` needs (and :func:`stop`, what a stop does).
"""

from mars_demo.ui.launch import launch_options, stop
from mars_demo.ui.page.layout import QUEUE_MAX_SIZE, build_demo, load_examples

__all__ = ["QUEUE_MAX_SIZE", "build_demo", "launch_options", "load_examples", "stop"]
