"""The MARS Demo web page (Gradio).

>>> from mars_demo.engine import Engine                         # doctest: +SKIP
>>> from mars_demo.ui import build_demo, launch_options         # doctest: +SKIP
>>> build_demo(Engine()).launch(**launch_options())             # doctest: +SKIP

:mod:`render` and :mod:`plots` turn an :class:`~mars_demo.result.AnalysisResult` into HTML and
Plotly figures; :mod:`controller` holds the event handlers; :mod:`host` serializes the engine and
tracks model loading; :mod:`layout` builds the page.
"""

from mars_demo.ui.layout import QUEUE_MAX_SIZE, build_demo, launch_options, load_examples

__all__ = ["QUEUE_MAX_SIZE", "build_demo", "launch_options", "load_examples"]
