"""The page's tables, built from an :class:`~mars_demo.result.AnalysisResult`: the phrases of the
answer, the sampled answers, the uncertainty values and the token-by-token table.

Every cell carries ``data-col`` and ``data-label`` (its header, shown where rows stack on a phone);
the active scoring's column is highlighted. Pure functions: no gradio, no models.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mars_demo import texts
from mars_demo.evaluation.reference import Place, RunValues, place_words
from mars_demo.result import SCORINGS, AnalysisResult
from mars_demo.result import ScoredAnswer as Answer
from mars_demo.ui.draw.render import (
    active_attr,
    answer_tokens_html,
    esc,
    fmt,
    percent,
    phrase_index,
    token_text,
    token_weights,
)
from mars_demo.verdict import placement


@dataclass(frozen=True)
class Cell:
    """One table cell: already-escaped ``html`` and an optional (plain text) tooltip."""

    html: str
    title: str = ""


def _cell(text: str, title: str = "") -> Cell:
    return Cell(esc(text), title)


def _table(
    columns: Sequence[tuple[str, str]],
    rows: Iterable[tuple[str, dict[str, Cell]]],
    cls: str,
    scoring: str,
) -> str:
    """``columns``: (key, header); ``rows``: (tr attributes, {key: Cell}).

    Every cell carries ``data-col`` (its column key) and ``data-label`` (its header, shown on
    narrow screens where rows stack); the columns named like ``scoring`` get ``mars-active``.
    """
    head = "".join(
        f'<th scope="col" data-col="{key}"{active_attr(key, scoring)}>{esc(header)}</th>'
        for key, header in columns
    )
    body = []
    for attrs, cells in rows:
        tds = []
        for key, header in columns:
            cell = cells.get(key, Cell(""))
            title = f' title="{esc(cell.title)}"' if cell.title else ""
            tds.append(
                f'<td data-col="{key}" data-label="{esc(header)}"{active_attr(key, scoring)}{title}>{cell.html}</td>'
            )
        body.append(f"<tr{attrs}>{''.join(tds)}</tr>")
    return (
        f'<div class="mars-table-wrap"><table class="mars-table {cls}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


table = _table  # the same table for the other panels (mars_demo/ui/draw/methods_panel.py)


def score_shares(answer: Answer, scoring: str) -> tuple[list[float], float]:
    """Each phrase's share of sum_l w_l log p_l under ``scoring``, and the tokens-outside share.

    Every log p_l <= 0, so the shares are in [0, 1] and sum to 1. Returns NaNs when the score is
    exactly 0 (every token had probability 1).
    """
    weights = token_weights(answer, scoring)
    contributions = [w * t.logprob for w, t in zip(weights, answer.tokens)]
    total = sum(contributions)
    shares = [0.0] * len(answer.phrases)
    outside = 0.0
    for i, c in enumerate(contributions):
        k = phrase_index(answer, i)
        if k >= 0:
            shares[k] += c
        else:
            outside += c
    if total == 0:
        return [math.nan] * len(shares), math.nan
    return [s / total for s in shares], outside / total


def _weight_text(weight: float) -> str:
    """A phrase weight: 3 decimals, or 2 significant digits when that would show 0.000."""
    if 0 < weight < 0.0005:
        return f"{weight:.1e}"
    return fmt(weight)


def weight_notes(answer: Answer, settings: dict | None) -> tuple[str, dict[int, str]]:
    """How the phrase weights U came from the importances, in words and with this answer's
    numbers: (a paragraph, {phrase index: a note for a phrase whose weight is about 0}).

    A weight near 0 beside a sizeable importance has one of two causes: the phrase received no
    token (its weight went to the other phrases), or softmax normalization with a small
    temperature T, which makes every phrase well below the top one nearly weightless.
    """
    settings = settings or {}
    aligned = [p for p in answer.phrases if p.tokens]
    notes: dict[int, str] = {}
    if not aligned:
        return "", notes
    top = max(p.score for p in aligned)
    total = sum(p.score for p in aligned)
    normalization = settings.get("normalization", "sum")
    temperature = float(settings.get("softmax_temperature") or 0.1)
    factor = math.exp(min(0.1 / temperature, 700.0))
    if normalization == "softmax":
        paragraph = texts.PHRASES_WEIGHT_SOFTMAX.format(t=temperature, top=top, factor=factor)
    elif normalization == "sum-softmax":
        paragraph = texts.PHRASES_WEIGHT_SUM_SOFTMAX.format(t=temperature, total=total,
                                                            factor=factor)
    else:
        paragraph = texts.PHRASES_WEIGHT_SUM.format(total=total)
    for k, phrase in enumerate(answer.phrases):
        if not phrase.tokens:
            notes[k] = texts.PHRASE_NO_TOKEN
        elif phrase.weight < 0.0005 and normalization in ("softmax", "sum-softmax"):
            scale = total if normalization == "sum-softmax" and total > 0 else 1.0
            exponent = (phrase.score - top) / scale / temperature
            template = (texts.PHRASE_SOFTMAX_SMALL if scale == 1.0
                        else texts.PHRASE_SUM_SOFTMAX_SMALL)
            notes[k] = template.format(score=phrase.score, top=top, t=temperature, total=total,
                                       ratio=math.exp(max(exponent, -700.0)))
    return paragraph, notes


def phrase_table_html(answer: Answer, scoring: str, settings: dict | None = None) -> str:
    """Phrase, importance, phrase weight U_k, and its share of the LN and of the MARS score.

    ``settings`` (the result's) say how importances became weights; a paragraph says it with
    this answer's numbers, and a phrase whose weight is about 0 says why (:func:`weight_notes`).
    """
    if not answer.phrases:
        return f'<p class="mars-muted">{esc(texts.PHRASES_NONE)}</p>'
    columns = list(
        zip(
            ("index", "phrase", "score", "weight", "length_normalized", "mars"),
            texts.PHRASES_COLUMNS,
        )
    )
    shares = {key: score_shares(answer, key) for key in SCORINGS}
    paragraph, notes = weight_notes(answer, settings)
    rows = []
    for k, phrase in enumerate(answer.phrases):
        note = (
            f'<span class="mars-small mars-weight-note">{esc(notes[k])}</span>' if k in notes else ""
        )
        bar = (
            '<span class="mars-barcell">'
            f'<span class="mars-bar" style="width: {max(0.0, min(phrase.weight, 1.0)) * 100:.1f}%"></span>'
            f"<span>{_weight_text(phrase.weight)}</span></span>{note}"
        )
        rows.append(
            (
                f' data-phrase="{k}"',
                {
                    "index": _cell(str(k + 1)),
                    "phrase": _cell(phrase.text),
                    "score": _cell(fmt(phrase.score)),
                    "weight": Cell(bar),
                    **{key: _cell(percent(shares[key][0][k])) for key in SCORINGS},
                },
            )
        )
    if any(phrase_index(answer, i) < 0 for i in range(len(answer.tokens))):
        rows.append(
            (
                ' class="mars-muted"',
                {
                    "phrase": _cell(texts.PHRASES_OUTSIDE),
                    **{key: _cell(percent(shares[key][1])) for key in SCORINGS},
                },
            )
        )
    explain = f'<p class="mars-explain">{esc(texts.PHRASES_EXPLAIN)}</p>'
    if paragraph:
        explain += f'<p class="mars-explain mars-weight-explain">{esc(paragraph)}</p>'
    return explain + _table(columns, rows, "mars-phrases mars-stack", scoring)


def cluster_badge(cluster: int) -> str:
    return (
        f'<span class="mars-cluster mars-cluster-{cluster % 8}">'
        f"{esc(texts.PLOT_CLUSTER_NAME.format(number=cluster + 1))}</span>"
    )


def samples_table_html(result: AnalysisResult, scoring: str) -> str:
    """One row per sampled answer: colored text, meaning cluster (those that mean the same as
    the answer, by the verdict's placement, marked so), LN and MARS scores."""
    if not result.samples:
        return f'<p class="mars-muted">{esc(texts.SAMPLES_NONE)}</p>'
    columns = list(
        zip(("index", "answer", "cluster", "length_normalized", "mars"), texts.SAMPLES_COLUMNS)
    )
    rows = []
    members = placement(result).members  # the verdict's: the samples it counts as agreeing
    for b, sample in enumerate(result.samples):
        cluster = result.cluster_ids[b] if b < len(result.cluster_ids) else -1
        same = (f' <span class="mars-small mars-same-meaning">{esc(texts.SAMPLES_SAME_MEANING)}'
                "</span>" if b in members else "")
        cells = {
            "index": _cell(str(b + 1)),
            "answer": Cell(
                f'<span class="mars-answer-text">{answer_tokens_html(sample, scoring)}</span>'
            ),
            "cluster": Cell(cluster_badge(cluster) + same) if cluster >= 0 else _cell("–"),
        }
        for key in SCORINGS:
            value = getattr(sample.scores, key)
            cells[key] = _cell(fmt(value), texts.SCORE_TITLE.format(prob=math.exp(value)))
        rows.append((f' data-sample="{b}" data-same="{int(b in members)}"', cells))
    explain = f'<p class="mars-explain">{esc(texts.SAMPLES_EXPLAIN)}</p>'
    return explain + _table(columns, rows, "mars-samples mars-stack", scoring)


def placed_cell(value: float, where: Place | None, run: RunValues | None,
                cls: str = "mars-method") -> Cell:
    """A value, and under it where it falls among the answers of the page's run (``run``;
    ``where``: :meth:`RunValues.place`, None when the run has none of it). Without a run, the
    value alone: no scale the page cannot stand behind."""
    html = f'<span class="{cls}-value">{esc(fmt(value))}</span>'
    if run is None:
        return Cell(f'<span class="{cls}-cell">{html}</span>')
    if where is None:
        return Cell(f'<span class="{cls}-cell">{html}<span class="mars-small '
                    f'{cls}-absent">{esc(texts.METHODS_ABSENT)}</span></span>')
    line, title = place_words(where)
    return Cell(f'<span class="{cls}-cell">{html}<span class="mars-small '
                f'{cls}-place">{esc(line)}</span></span>', title)


def uncertainty_table_html(result: AnalysisResult, scoring: str,
                           run: RunValues | None = None) -> str:
    """The uncertainty values (the three measures with both scorings, and semantic entropy
    normalized); the active scoring's column is highlighted. With the page's evaluation run
    (``run``), each value says where it falls among that run's answers."""
    columns = list(zip(("measure", "length_normalized", "mars"), texts.UNCERTAINTY_COLUMNS))
    normalized = result.semantic_entropy_normalized()
    values = {key: {s: getattr(getattr(result.uncertainty, key), s) for s in SCORINGS}
              for key in texts.UNCERTAINTY_ROWS}
    values["semantic_entropy_normalized"] = {s: normalized[s] for s in SCORINGS}
    labels = {**texts.UNCERTAINTY_ROWS, "semantic_entropy_normalized": texts.SE_NORMALIZED_ROW}
    rows = []
    for key, (label, explanation) in labels.items():
        measure = (f'<span class="mars-measure">{esc(label)}</span>'
                   f'<span class="mars-small">{esc(explanation)}</span>')
        cells = {"measure": Cell(measure)}
        for s in SCORINGS:
            where = run.place(key, s, values[key][s]) if run is not None else None
            cells[s] = placed_cell(values[key][s], where, run, "mars-unc")
        rows.append((f' data-measure="{key}"', cells))
    negative = [
        f"{texts.SCORING_NAMES[key]} {fmt(getattr(result.uncertainty.semantic_entropy, key))}"
        for key in SCORINGS
        if getattr(result.uncertainty.semantic_entropy, key) < 0
    ]
    note = (
        f'<p class="mars-small mars-se-note">'
        f'{esc(texts.SE_NEGATIVE_NOTE.format(values=", ".join(negative)))}</p>'
        if negative else ""
    )
    scale = (texts.UNCERTAINTY_RUN.format(n=run.n, run=run.name) if run is not None
             else texts.UNCERTAINTY_NO_RUN)
    return (_table(columns, rows, "mars-uncertainty", scoring)
            + f'<p class="mars-small mars-unc-scale">{esc(scale)}</p>' + note)


def token_table_html(answer: Answer, scoring: str) -> str:
    """One row per token: log p, p, importance u, phrase, 1/L, w, and its part of each score;
    the last row sums the parts, which gives the answer's two scores."""
    n = len(answer.tokens)
    if n == 0:
        return f'<p class="mars-muted">{esc(texts.ANSWER_EMPTY)}</p>'
    keys = ("index", "token", "logprob", "prob", "importance", "phrase_number", "uniform",
            "weight", "length_normalized", "mars")
    columns = list(zip(keys, texts.TOKENS_COLUMNS))
    rows = []
    totals = {"length_normalized": 0.0, "mars": 0.0}
    for i, token in enumerate(answer.tokens):
        u = answer.token_importance[i] if i < len(answer.token_importance) else math.nan
        w = answer.mars_weights[i] if i < len(answer.mars_weights) else math.nan
        k = phrase_index(answer, i)
        parts = {"length_normalized": token.logprob / n, "mars": w * token.logprob}
        for key in parts:
            totals[key] += parts[key]
        shown = token_text(answer, i)
        rows.append((
            f' data-token="{i}"',
            {
                "index": _cell(str(i + 1)),
                "token": Cell(f"<code>{esc(repr(shown)) if shown else esc(texts.TOKENS_EMPTY)}</code>"),
                "logprob": _cell(fmt(token.logprob)),
                "prob": _cell(fmt(math.exp(token.logprob))),
                "importance": _cell(fmt(u)),
                "phrase_number": _cell(str(k + 1) if k >= 0 else "–"),
                "uniform": _cell(fmt(1.0 / n)),
                "weight": _cell(fmt(w)),
                **{key: _cell(fmt(value)) for key, value in parts.items()},
            },
        ))
    rows.append((
        ' class="mars-total-row"',
        {
            "token": _cell(texts.TOKENS_TOTAL),
            "importance": _cell(fmt(sum(answer.token_importance))),
            "uniform": _cell(fmt(1.0)),
            "weight": _cell(fmt(sum(answer.mars_weights))),
            **{key: _cell(fmt(value)) for key, value in totals.items()},
        },
    ))
    explain = f'<p class="mars-explain">{esc(texts.TOKENS_EXPLAIN)}</p>'
    # not stacked into cards on a phone (a card per token is too long): it scrolls instead
    return explain + _table(columns, rows, "mars-tokens", scoring)
