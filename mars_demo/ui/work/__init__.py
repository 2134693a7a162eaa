"""What a request starts: its inputs checked (``controls.py``: the page's controls and options;
``pasted.py``: answers pasted to be scored), the engine's host (``host.py``: one analysis at a
time, model loading), the worker thread that runs an analysis and relays its events
(``worker.py``) and the API's handlers (``api.py``).

It may import :mod:`mars_demo.ui.draw` and :mod:`mars_demo.ui.guards`, never the page
(tests/test_layers.py).
"""
