"""The scoring toggle's re-renders, kept (covered by tests/test_hostile_load.py).

A re-render of a stored result (:meth:`~mars_demo.ui.page.controller.Controller.show_scoring`) is
pure Python: its plotly figures alone take a few tenths of a second for a result of 20 samples,
and Python work beside the engine slows it through the interpreter's lock far more than its
share of time. :class:`RenderCache` keeps the :data:`MAX_RENDERS` re-renders asked for last, by
result (while it lives), scoring and colouring, each chart serialized once (:func:`plot_data`),
so flipping a toggle back and forth renders each view of a result once.
"""

from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Callable
from typing import Any

MAX_RENDERS = 32  # re-renders kept (about 0.4 MB each for a result of 20 samples)


def plot_data(fig: Any) -> Any:
    """A plotly figure as ``gr.Plot`` sends it: Gradio 6.17's ``PlotData``, what its
    ``postprocess`` makes of a figure and passes on as it is (tests/test_gradio_internals.py
    pins both)."""
    from gradio.components.plot import PlotData

    return PlotData(type="plotly", plot=fig.to_json())


def _frozen(value: Any) -> Any:
    """A rendered output as it can be sent again: a figure serialized, an update's figure too."""
    if hasattr(value, "to_plotly_json"):
        return plot_data(value)
    if isinstance(value, dict) and hasattr(value.get("value"), "to_plotly_json"):
        return {**value, "value": plot_data(value["value"])}
    return value


class RenderCache:
    """``render(result, scoring, shade) -> {output: value}``, kept: the same result (the same
    object, held weakly), scoring and colouring give the outputs made the first time (a copy of
    each update dict, which Gradio takes apart as it sends it). An output with an ``"error"``
    (a renderer that failed) is not kept, nor is anything for no result; the views of a result
    nobody holds any more (its session has a newer one, or is gone) go at the next render.
    (They stayed until 32 newer views pushed them out: a visitor scoring pasted answers again
    and again grew the server by about 1.4 MB a scoring, up to some 40 MB.)"""

    def __init__(self, render: Callable[..., dict[str, Any]], size: int | None = None) -> None:
        self.render = render
        self.size = MAX_RENDERS if size is None else size
        self._kept: collections.OrderedDict[tuple, tuple[weakref.ref, dict]] = (
            collections.OrderedDict())
        self._lock = threading.Lock()
        self.__name__ = getattr(render, "__name__", "render")  # the event's name

    def __call__(self, result: Any, scoring: str, *rest: Any) -> dict[str, Any]:
        if result is None:
            return self.render(result, scoring, *rest)
        key = (id(result), scoring, *rest)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept[0]() is result:
                self._kept.move_to_end(key)
                return {k: dict(v) if isinstance(v, dict) else v for k, v in kept[1].items()}
        update = self.render(result, scoring, *rest)
        if "error" in update:
            return update
        frozen = {k: _frozen(v) for k, v in update.items()}
        with self._lock:
            for gone in [k for k, (ref, _) in self._kept.items() if ref() is None]:
                del self._kept[gone]  # the views of results nobody holds any more
            self._kept[key] = (weakref.ref(result), frozen)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return {k: dict(v) if isinstance(v, dict) else v for k, v in frozen.items()}
