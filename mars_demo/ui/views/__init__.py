"""The views beside the Ask page: the Evaluation view (``eval_view.py``: a run's report and
records read, checked and shown) and its charts (``eval_charts.py``).

It may import :mod:`mars_demo.ui.draw` and :mod:`mars_demo.ui.guards`, never the page or the
work (tests/test_layers.py).
"""
