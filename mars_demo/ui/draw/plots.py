"""Plotly figures of an analysis: meaning clusters, NLI verdicts, uncertainty values.

Backgrounds are transparent and text colors are set by the page's CSS (``.mars-plot``), so the
figures follow Gradio's light and dark themes. Text from answers goes through :func:`plot_text`:
Plotly interprets a few tags (``<b>``, ``<a>``...) in labels and hover text, so ``<``, ``>`` and
``&`` are escaped; quotes are not, as Plotly shows ``&quot;`` as it is.
"""

from __future__ import annotations

import html
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mars_demo import texts
from mars_demo.result import SCORINGS, AnalysisResult
from mars_demo.ui.draw.render import check_scoring
from mars_demo.verdict import placement

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


def plot_text(text: object) -> str:
    """Text for a Plotly label or hover: ``<``, ``>`` and ``&`` escaped (Plotly reads a few
    HTML tags and only the entities ``&lt;``, ``&gt;``, ``&amp;``...), quotes kept as they are.

    >>> plot_text('He said "<b>hi</b>" & left')
    'He said "&lt;b&gt;hi&lt;/b&gt;" &amp; left'
    """
    return html.escape(str(text), quote=False)


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


def _percent_label(value: float) -> str:
    """A share as the cluster axis shows it: 0.2 -> "20%" (one decimal below 10%)."""
    return f"{value:.1%}" if value < 0.1 else f"{value:.0%}"


def cluster_name(cluster: int, answers: tuple[int, ...]) -> str:
    """"cluster 2", or "cluster 2, the answer's" for a cluster in ``answers`` (those the
    verdict placed the answer in)."""
    name = texts.PLOT_CLUSTER_NAME.format(number=cluster + 1)
    return texts.PLOT_CLUSTER_ANSWER.format(name=name) if cluster in answers else name


def clusters_figure(result: AnalysisResult, scoring: str) -> go.Figure:
    """Grouped bars: each meaning cluster's share of probability mass under both scorings; the
    cluster the verdict placed the answer in is named so."""
    clusters = sorted(set(result.cluster_ids))
    answers = placement(result).clusters  # the verdict's placement of the answer
    names, hovers = [], []
    for c in clusters:
        texts_in = [s.text for s, cid in zip(result.samples, result.cluster_ids) if cid == c]
        name = cluster_name(c, answers)
        names.append(f"{name}<br>{plot_text(_short(texts_in[0], MAX_TICK_CHARS))}")
        lines = [plot_text(texts.PLOT_CLUSTER_HOVER.format(members=len(texts_in)))]
        lines += [f"• {plot_text(_short(t, 80))}" for t in texts_in]
        hovers.append("<br>".join(lines))
    fig = go.Figure()
    for key in SCORINGS:
        masses = result.cluster_masses(key)
        values = [masses.get(c, 0.0) for c in clusters]
        fig.add_bar(
            name=texts.SCORING_NAMES[key],
            x=names,
            y=values,
            # Labelled like the axis (percent), not as fractions on a percent axis.
            text=[_percent_label(v) for v in values]
            if key == scoring
            else None,  # values of the active scoring
            textposition="outside",
            textfont_size=11,
            cliponaxis=False,
            customdata=hovers,
            hovertemplate="%{customdata}<br>"
            + texts.SCORING_NAMES[key]
            + ": %{y:.1%}<extra></extra>",
            marker_color=SCORING_COLORS[key],
            opacity=1.0 if key == scoring else INACTIVE_OPACITY,
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%")
    _layout(fig, height=340, y_title=texts.PLOT_CLUSTERS_Y)
    fig.update_layout(margin={"t": 40})
    return fig


def nli_figure(result: AnalysisResult) -> go.Figure:
    """Heatmap of the NLI verdicts; cell (i, j) = answer i as premise, answer j as hypothesis."""
    answers = result.nli.answers
    labels = result.nli.labels
    code = {name: i for i, name in enumerate(NLI_ORDER)}
    n = len(answers)
    axis = [f"#{i + 1}" for i in range(n)]
    # The diagonal (an answer with itself) is not read by the clustering: it is left blank
    # (None = no cell) and its hover says what judged it, instead of looking like a verdict the
    # clustering used; so is a pair the NLI was not asked (None: the clustering did not read it).
    blank = [[i == j or labels[i][j] is None for j in range(n)] for i in range(n)]
    z = [[None if blank[i][j] else code.get(labels[i][j], 1) for j in range(n)]
         for i in range(n)]
    text = [
        [
            "" if blank[i][j] else texts.PLOT_NLI_LABELS.get(labels[i][j], labels[i][j])[:1].upper()
            for j in range(n)
        ]
        for i in range(n)
    ]

    by_rule = {tuple(pair) for pair in result.nli.by_rule}

    def verdict(i: int, j: int) -> str:
        if labels[i][j] is None:
            return texts.NLI_TABLE_NOT_JUDGED
        label = plot_text(texts.PLOT_NLI_LABELS.get(labels[i][j], labels[i][j]))
        return texts.PLOT_NLI_BY_RULE.format(label=label) if (i, j) in by_rule else label

    def hover_of(i: int, j: int) -> str:
        if i == j:
            answer = plot_text(_short(answers[i], 80))
            return texts.PLOT_NLI_SELF.format(number=i + 1, answer=answer, label=verdict(i, i))
        if labels[i][j] is None:
            return texts.PLOT_NLI_NOT_JUDGED.format(premise=i + 1, hypothesis=j + 1)
        label = verdict(i, j)
        return texts.PLOT_NLI_HOVER.format(
            premise=plot_text(_short(answers[i], 80)),
            hypothesis=plot_text(_short(answers[j], 80)),
            label=label,
        )

    hover = [[hover_of(i, j) for j in range(n)] for i in range(n)]
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
            hoverongaps=False,
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


#: each measure's bars run from its floor, no doubt at all, to this many nats past it (a
#: per-token chance of e^-3, 5%, on average); a value past the end is drawn to it
SCALE_NATS = 3.0
CLIPPED = " ▸"  # after the number of a value drawn to the end of its scale


def measure_floor(measure: str, samples: int) -> float:
    """Where a measure's scale starts, no doubt at all: 0 nats for Confidence and Entropy; for
    the paper's Semantic entropy, −log B with B sampled answers (every try means the same and
    each is certain: its estimator goes below 0 when the answers repeat).

    >>> measure_floor("confidence", 5), round(measure_floor("semantic_entropy", 5), 3)
    (0.0, -1.609)
    """
    if measure == "semantic_entropy" and samples > 1:
        return -math.log(samples)
    return 0.0


def measure_scale(measure: str, samples: int) -> tuple[float, float]:
    """The fixed scale of ``measure``'s bars: from its floor (:func:`measure_floor`) to
    :data:`SCALE_NATS` past it, the same for every answer with as many samples."""
    floor = measure_floor(measure, samples)
    return floor, floor + SCALE_NATS


def uncertainty_figure(result: AnalysisResult, scoring: str) -> go.Figure:
    """The three measures, each in a row of its own named as the table's row, its
    length-normalized and MARS values as bars on a fixed scale (:func:`measure_scale`): a bar
    starts at no doubt and grows to the right with doubt, so a longer bar is always more
    doubt, and the paper's negative semantic entropy is a short bar, never a long one. Each bar
    carries its number; a value past the scale's end is drawn to it, its number marked ▸."""
    check_scoring(scoring)
    keys = list(texts.UNCERTAINTY_ROWS)
    fig = make_subplots(rows=len(keys), cols=1, vertical_spacing=0.22,
                        subplot_titles=[plot_text(texts.UNCERTAINTY_ROWS[k][0]) for k in keys])
    for row, key in enumerate(keys, start=1):
        low, high = measure_scale(key, len(result.samples))
        for s in reversed(SCORINGS):  # MARS drawn lowest, LN above it, as the table reads
            value = getattr(getattr(result.uncertainty, key), s)
            shown = min(max(value, low), high) if math.isfinite(value) else low
            past = math.isfinite(value) and value > high
            fig.add_bar(
                y=[texts.SCORING_SHORT[s]], x=[shown - low], base=[low], orientation="h",
                name=texts.SCORING_NAMES[s], marker={"color": SCORING_COLORS[s]},
                opacity=1.0 if s == scoring else INACTIVE_OPACITY + 0.25,
                text=[f"{value:.3f}".replace("-", "−") + (CLIPPED if past else "")],
                textposition="inside" if past else "outside", textfont={"size": 11},
                insidetextanchor="end", cliponaxis=False, showlegend=False,
                customdata=[f"{value:.4f}".replace("-", "−")],
                hovertemplate=(plot_text(texts.UNCERTAINTY_ROWS[key][0]) + ", "
                               + texts.SCORING_NAMES[s] + ": %{customdata}<extra></extra>"),
                row=row, col=1,
            )
        fig.update_xaxes(range=[low, high], tick0=low, dtick=1.0, tickformat=".2~f",
                         row=row, col=1)
    _layout(fig, height=300, legend=False)
    fig.update_layout(bargap=0.25, margin={"l": 56, "r": 48, "t": 28, "b": 24})
    for title in fig.layout.annotations:  # the rows' names, over their bars, on the left
        title.update(x=0, xanchor="left", font={"size": 13})
    return fig


def _lines(name: str, width: int = 12) -> list[str]:
    """``name`` in lines of about ``width`` characters (a chart's axis on a phone)."""
    lines: list[str] = []
    for word in name.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines
