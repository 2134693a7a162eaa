"""An analysis drawn for the page: the panels' HTML (``render.py``: escaping, numbers, errors;
``tables.py``, ``captions.py``, ``explain.py``, ``methods_panel.py``, ``trust.py``: the verdict's
HTML, rendering the analysis' own verdict) and its Plotly figures (``plots.py``).

Pure functions of an :class:`~mars_demo.result.AnalysisResult`; it may import
:mod:`mars_demo.ui.guards` (what a public page shows of a model), never the page, the views or
the work (tests/test_layers.py).
"""
