"""The Evaluation view's charts (:mod:`mars_demo.ui.views.eval_view`): a run's ROC and rejection
curves sized for the page, each curve thinned to :data:`MAX_POINTS` points, split one chart per
measure, and serialized once for the page's cache.
"""

from __future__ import annotations

from typing import Any

from mars_demo.evaluation.records import Record
from mars_demo.evaluation.schema import Report
from mars_demo.ui.draw.plots import GRID
from mars_demo.ui.guards.kept_renders import plot_data

MAX_POINTS = 500  # points of one curve sent to the page
#: the figures of one column per measure (report.figures): drawn one chart per measure, side by
#: side where there is room and stacked on a phone
SPLIT = ("eval_roc", "eval_rejection")
#: the view's outputs in words: the error, the run's one-sentence answer, the table, the note
TEXTS = ("eval_error", "eval_verdict", "eval_table", "eval_note")


def thin(fig: Any, points: int = MAX_POINTS) -> None:
    """Keep at most ``points`` points of each curve of ``fig``, evenly spaced along it, its
    first and last always (a curve of a 3,500-question run has as many; the page's chart is a
    few hundred pixels wide, and every point is sent to the browser)."""
    import numpy as np

    for trace in fig.data:
        x, y = getattr(trace, "x", None), getattr(trace, "y", None)
        if x is None or y is None or len(x) <= points or len(x) != len(y):
            continue
        keep = np.unique(np.linspace(0, len(x) - 1, points).round().astype(int))
        trace.update(x=np.asarray(x)[keep], y=np.asarray(y)[keep])


def curves(records: list[Record], report: Report | None = None) -> tuple[Any, Any, Any, list[str]]:
    """The run's ROC and rejection figures (:func:`mars_demo.evaluation.report.figures`) and
    the ROC curves of the report's top methods
    (:func:`mars_demo.evaluation.methods_table.roc_figure`; None without a methods table),
    sized for the page, each curve of at most :data:`MAX_POINTS` points (:func:`thin`)."""
    from mars_demo.evaluation.methods_table import roc_figure
    from mars_demo.evaluation.report import figures

    roc, rej, warnings = figures(records)
    top = None
    if report is not None and report.methods_table.rows:
        top, more = roc_figure(records, [(r.name, r.variant)
                                         for r in report.methods_table.rows])
        warnings += more
    for fig in (roc, rej, top):
        if fig is not None:
            thin(fig)
            # see-through, so the theme's background shows and the page's CSS (.mars-plot)
            # writes the axes' text in the theme's text color, light or dark
            fig.update_layout(width=None, height=380, autosize=True,
                              margin=dict(l=50, r=20, t=70, b=50),
                              paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)")
            fig.update_xaxes(gridcolor=GRID, zerolinecolor=GRID)
            fig.update_yaxes(gridcolor=GRID, zerolinecolor=GRID)
    if top is not None:  # its heading is on the page (texts.EVAL_TOP_TITLE)
        top.update_layout(height=480, title=None, margin=dict(t=24))
    return roc, rej, top, warnings


# --- the handlers ---------------------------------------------------------------------------


def page_outputs(update: dict[str, Any]) -> dict[str, Any]:
    """:meth:`EvaluationView.show`'s update as the page shows it: the texts, and each chart row
    of :data:`SPLIT` and the top methods' ROC as a list of charts, one per column
    (:func:`split_columns`), each serialized once (Gradio's ``PlotData``, which ``gr.Plot``
    sends as it is)."""
    out = {name: update.get(name, "") for name in TEXTS}
    for name in SPLIT:
        out[name] = [plot_data(fig) for fig in split_columns(update.get(name))]
    top = update.get("eval_roc_methods")
    out["eval_roc_methods"] = [plot_data(top)] if top is not None and top.data else []
    return out


def split_columns(fig: Any) -> list[Any]:
    """A figure of one row of subplots (:func:`mars_demo.evaluation.report.figures`) as one
    figure per subplot, titled by its subplot's title, each with its own legend and the axis
    titles of the first: charts that sit side by side where the page is wide and stack on a
    phone, instead of three squeezed into one. Being compared, they share their axes
    (:func:`shared_range`: one x and one y range for all, which the subplots' own autoscaling
    made differ, e.g. accuracies from 0.75 in one and from 0.85 in the next). None or no
    traces: no figure."""
    import plotly.graph_objects as go

    if fig is None or not fig.data:
        return []
    layout = fig.layout
    titles = [a.text for a in layout.annotations or ()]
    x_title = layout.xaxis.title.text if layout.xaxis.title else None
    y_title = layout.yaxis.title.text if layout.yaxis.title else None
    columns: dict[str, list[Any]] = {}
    for trace in fig.data:
        columns.setdefault(trace.xaxis or "x", []).append(trace)
    out = []
    x_range = shared_range([layout["xaxis" + a[1:]].range for a in columns],
                           [t.x for t in fig.data])
    y_range = shared_range([layout["yaxis" + a[1:]].range for a in columns],
                           [t.y for t in fig.data])
    for k, (axis, traces) in enumerate(sorted(columns.items(), key=lambda kv: _axis_number(kv[0]))):
        x_axis = layout["xaxis" + axis[1:]]
        y_axis = layout["yaxis" + axis[1:]]
        one = go.Figure()
        for trace in traces:
            one.add_trace(trace.update(xaxis="x", yaxis="y", showlegend=True))
        one.update_layout(
            title={"text": titles[k] if k < len(titles) else "", "x": 0.02, "font": {"size": 15}},
            template=layout.template, height=360, autosize=True, width=None,
            margin=dict(l=56, r=16, t=48, b=56),
            legend=dict(orientation="h", yanchor="top", y=-0.22, x=0),
            paper_bgcolor=layout.paper_bgcolor, plot_bgcolor=layout.plot_bgcolor,
        )
        one.update_xaxes(title_text=x_title, range=x_range, gridcolor=x_axis.gridcolor,
                         zerolinecolor=x_axis.zerolinecolor)
        one.update_yaxes(title_text=y_title, range=y_range, gridcolor=y_axis.gridcolor,
                         zerolinecolor=y_axis.zerolinecolor)
        out.append(one)
    return out


PAD = 0.04  # of a shared range made from the data, added on each side (as Plotly pads)


def shared_range(given: list[Any], data: list[Any]) -> list[float] | None:
    """One range for the axes of charts that are compared: the union of the ranges the
    figure set (``given``, None where it set none) and, where any axis had none, of the values
    drawn (``data``), padded by :data:`PAD` of its span. None when there is nothing to span.

    >>> shared_range([[0, 1], None], [[0.2, 0.9], [0.85, 1.0]])
    [0.0, 1.032]
    >>> shared_range([None, None], [[0.75, 1.0], [0.85, 1.0]])
    [0.74, 1.01]
    """
    import numpy as np

    lows, highs = [r[0] for r in given if r], [r[1] for r in given if r]
    if any(r is None for r in given):
        values = np.concatenate([np.asarray(v, dtype=float).ravel() for v in data
                                 if v is not None] or [np.empty(0)])
        values = values[np.isfinite(values)]
        if values.size:
            low, high = float(values.min()), float(values.max())
            pad = PAD * (high - low) if high > low else 0.05
            lows.append(low - pad)
            highs.append(high + pad)
    if not lows:
        return None
    return [round(float(min(lows)), 6), round(float(max(highs)), 6)]


def _axis_number(axis: str) -> int:
    return int(axis[1:] or 1)
