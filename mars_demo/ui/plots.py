"""Plotly figures of an analysis: meaning clusters, NLI verdicts, uncertainty values.

Backgrounds are transparent and text colors are set by the page's CSS (``.mars-plot``), so the
figures follow Gradio's light and dark themes. Text from answers is HTML-escaped because Plotly
interprets a few tags (``<b>``, ``<a>``...) in labels and hover text.
"""

from __future__ import annotations

import math
from collections import defaultdict

import plotly.graph_objects as go

from mars_demo import texts
from mars_demo.result import AnalysisResult
from mars_demo.ui.render import SCORINGS, check_scoring, esc

#: Bar colors of the two scorings (readable on light and dark backgrounds).
SCORING_COLORS = {"length_normalized": "#94a3b8", "mars": "#6366f1"}
INACTIVE_OPACITY = 0.35  # bars of the scoring that is not selected
NLI_COLORS = {"contradiction": "#ef4444", "neutral": "#a3a3a3", "entailment": "#22c55e"}
NLI_ORDER = ("contradiction", "neutral", "entailment")
FONT = {"family": "ui-sans-serif, system-ui, sans-serif", "size": 13, "color": "#6b7280"}
GRID = "rgba(128, 128, 128, 0.25)"
MAX_LABEL_CHARS = 40
# Axis labels of the clusters: longer ones are turned upright and squeeze the bars into a strip
# (five clusters on a phone); the whole answers are in the hover text.
MAX_TICK_CHARS = 12


def _short(text: str, limit: int = MAX_LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _layout(fig: go.Figure, *, height: int, y_title: str = "", legend: bool = True) -> go.Figure:
    fig.update_layout(
        height=height,
        margin={"l": 56, "r": 16, "t": 16, "b": 48},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        font=FONT,
        showlegend=legend,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0},
        hoverlabel={"align": "left"},
    )
    fig.update_xaxes(gridcolor=GRID, zerolinecolor=GRID, automargin=True)
    fig.update_yaxes(gridcolor=GRID, zerolinecolor=GRID, automargin=True, title_text=y_title)
    return fig


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


def cluster_masses(result: AnalysisResult, scoring: str) -> dict[int, float]:
    """Each cluster's probability mass exp(logsumexp of its members' log scores), normalized to
    sum to 1 over the clusters. E.g. scores [-0.1, -0.2, -2.0] with cluster ids [0, 0, 1] give
    masses {0: 0.88, 1: 0.12}."""
    check_scoring(scoring)
    members: dict[int, list[float]] = defaultdict(list)
    for sample, cluster in zip(result.samples, result.cluster_ids):
        members[cluster].append(getattr(sample.scores, scoring))
    log_mass = {c: _logsumexp(v) for c, v in members.items()}
    if not log_mass:
        return {}
    norm = _logsumexp(list(log_mass.values()))
    if norm == -math.inf:
        return {c: 1.0 / len(log_mass) for c in sorted(log_mass)}
    return {c: math.exp(v - norm) for c, v in sorted(log_mass.items())}


def clusters_figure(result: AnalysisResult, scoring: str) -> go.Figure:
    """Grouped bars: each meaning cluster's share of probability mass under both scorings."""
    clusters = sorted(set(result.cluster_ids))
    names, hovers = [], []
    for c in clusters:
        texts_in = [s.text for s, cid in zip(result.samples, result.cluster_ids) if cid == c]
        name = texts.PLOT_CLUSTER_NAME.format(number=c + 1)
        names.append(f"{name}<br>{esc(_short(texts_in[0], MAX_TICK_CHARS))}")
        lines = [esc(texts.PLOT_CLUSTER_HOVER.format(members=len(texts_in)))]
        lines += [f"• {esc(_short(t, 80))}" for t in texts_in]
        hovers.append("<br>".join(lines))
    fig = go.Figure()
    for key in SCORINGS:
        masses = cluster_masses(result, key)
        values = [masses.get(c, 0.0) for c in clusters]
        fig.add_bar(
            name=texts.SCORING_NAMES[key],
            x=names,
            y=values,
            text=[f"{v:.2f}" for v in values]
            if key == scoring
            else None,  # values of the active scoring
            textposition="outside",
            textfont_size=11,
            cliponaxis=False,
            customdata=hovers,
            hovertemplate="%{customdata}<br>"
            + texts.SCORING_NAMES[key]
            + ": %{y:.3f}<extra></extra>",
            marker_color=SCORING_COLORS[key],
            opacity=1.0 if key == scoring else INACTIVE_OPACITY,
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%")
    return _layout(fig, height=340, y_title=texts.PLOT_CLUSTERS_Y)


def nli_figure(result: AnalysisResult) -> go.Figure:
    """Heatmap of the NLI verdicts; cell (i, j) = answer i as premise, answer j as hypothesis."""
    answers = result.nli.answers
    labels = result.nli.labels
    code = {name: i for i, name in enumerate(NLI_ORDER)}
    n = len(answers)
    axis = [f"#{i + 1}" for i in range(n)]
    z = [[code.get(labels[i][j], 1) for j in range(n)] for i in range(n)]
    text = [
        [
            texts.PLOT_NLI_LABELS.get(labels[i][j], labels[i][j])[:1].upper() if i != j else ""
            for j in range(n)
        ]
        for i in range(n)
    ]
    hover = [
        [
            texts.PLOT_NLI_HOVER.format(
                premise=esc(_short(answers[i], 80)),
                hypothesis=esc(_short(answers[j], 80)),
                label=esc(texts.PLOT_NLI_LABELS.get(labels[i][j], labels[i][j])),
            )
            for j in range(n)
        ]
        for i in range(n)
    ]
    # A discrete colorscale: three flat bands for codes 0, 1, 2.
    scale = []
    for i, name in enumerate(NLI_ORDER):
        scale += [[i / 3, NLI_COLORS[name]], [(i + 1) / 3, NLI_COLORS[name]]]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=axis,
            y=axis,
            zmin=-0.5,
            zmax=2.5,
            colorscale=scale,
            text=text,
            texttemplate="%{text}",
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
            xgap=2,
            ygap=2,
            colorbar={
                "tickvals": [0, 1, 2],
                "ticktext": [texts.PLOT_NLI_LABELS[name] for name in NLI_ORDER],
                "thickness": 12,
                "len": 0.9,
            },
        )
    )
    _layout(fig, height=340, legend=False)
    fig.update_yaxes(autorange="reversed", title_text=texts.PLOT_NLI_PREMISE)
    fig.update_xaxes(side="top", title_text=texts.PLOT_NLI_HYPOTHESIS)
    fig.update_layout(margin={"l": 56, "r": 16, "t": 48, "b": 16})
    return fig


def uncertainty_figure(result: AnalysisResult, scoring: str) -> go.Figure:
    """The six uncertainty values: Confidence, Entropy, Semantic entropy, baseline vs MARS."""
    check_scoring(scoring)
    keys = list(texts.UNCERTAINTY_ROWS)
    names = [texts.UNCERTAINTY_ROWS[k][0] for k in keys]
    fig = go.Figure()
    for key in SCORINGS:
        values = [getattr(getattr(result.uncertainty, k), key) for k in keys]
        fig.add_bar(
            name=texts.SCORING_NAMES[key],
            x=names,
            y=values,
            text=[f"{v:.2f}" for v in values]
            if key == scoring
            else None,  # values of the active scoring
            textposition="outside",
            textfont_size=11,
            cliponaxis=False,
            hovertemplate="%{x}, " + texts.SCORING_NAMES[key] + ": %{y:.3f}<extra></extra>",
            marker_color=SCORING_COLORS[key],
            opacity=1.0 if key == scoring else INACTIVE_OPACITY,
        )
    fig.update_layout(barmode="group")
    top = max([getattr(getattr(result.uncertainty, k), s) for k in keys for s in SCORINGS] + [0.0])
    fig.update_yaxes(range=[min(0.0, _min_value(result)) * 1.2, top * 1.2 if top > 0 else 1.0])
    return _layout(fig, height=320, y_title=texts.PLOT_UNCERTAINTY_Y)


def _min_value(result: AnalysisResult) -> float:
    keys = list(texts.UNCERTAINTY_ROWS)
    return min(getattr(getattr(result.uncertainty, k), s) for k in keys for s in SCORINGS)
