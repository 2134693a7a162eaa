"""HTML fragments of the page, built from an :class:`AnalysisResult`.

Pure functions: no gradio, no models. Every piece of text that comes from a question, an answer,
a model name or an exception goes through :func:`esc` before it is put into HTML, so a question
like ``<img src=x onerror=...>`` is shown as text and runs nothing.

Scoring names are the JSON keys: ``"length_normalized"`` (every token weighs 1/L) and ``"mars"``
(token weights w_l = 1/(2L) + u_l/2).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mars_demo import texts
from mars_demo.progress import STAGES  # the engine's progress stages, in order
from mars_demo.result import SCORINGS, AnalysisResult
from mars_demo.result import ScoredAnswer as Answer


#: Token color: one hue (indigo), its alpha follows the token's weight. Chosen so that both the
#: light theme's dark text and the dark theme's light text keep a contrast above 4.5:1.
TOKEN_RGB = (99, 102, 241)
TOKEN_ALPHA_MIN = 0.06  # alpha of a weightless token
TOKEN_ALPHA_RANGE = 0.70  # alpha added for the answer's heaviest token
WARNINGS_SHOWN = 3  # warnings listed in full; the others behind a "more" toggle


def esc(text: object) -> str:
    """HTML-escape any value (quotes included, so it is safe inside attributes too)."""
    return html.escape(str(text), quote=True)


def check_scoring(scoring: str) -> str:
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}; got {scoring!r}")
    return scoring


def token_weights(answer: Answer, scoring: str) -> list[float]:
    """The weight of each token under ``scoring``: 1/L each, or the MARS weights."""
    n = len(answer.tokens)
    if check_scoring(scoring) == "mars":
        return [float(w) for w in answer.mars_weights]
    return [1.0 / n] * n


def token_color(intensity: float) -> str:
    """CSS color of a token whose weight is ``intensity`` (0..1) of the answer's largest weight."""
    alpha = TOKEN_ALPHA_MIN + TOKEN_ALPHA_RANGE * min(max(intensity, 0.0), 1.0)
    r, g, b = TOKEN_RGB
    return f"rgba({r}, {g}, {b}, {alpha:.3f})"


def _fmt(value: float, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return _unsigned_zero(f"{value:.{digits}f}").replace("-", "−")


def _unsigned_zero(text: str) -> str:
    """``text`` without its minus sign when the number it shows is zero ("-0.0" -> "0.0")."""
    if text.startswith("-") and not text.strip("-0.%"):
        return text[1:]
    return text


def _active(column: str, scoring: str) -> str:
    return ' class="mars-active"' if column == scoring else ""


def _phrase_index(answer: Answer, token: int) -> int:
    """The phrase of a token, or -1 when it belongs to none."""
    if token < len(answer.phrase_of_token):
        k = answer.phrase_of_token[token]
        if 0 <= k < len(answer.phrases):
            return k
    return -1


# --- the colored answer ------------------------------------------------------------------------


def _token_title(answer: Answer, i: int, weight: float, scoring: str) -> str:
    token = answer.tokens[i]
    k = _phrase_index(answer, i)
    if k >= 0:
        phrase = answer.phrases[k]
        phrase_line = texts.TOKEN_TITLE_PHRASE.format(
            phrase=repr(phrase.text), score=phrase.score, weight=phrase.weight
        )
    else:
        phrase_line = texts.TOKEN_TITLE_NO_PHRASE
    return texts.TOKEN_TITLE.format(
        token=repr(answer.text[token.start : token.end]),
        prob=math.exp(token.logprob),
        logprob=token.logprob,
        phrase_line=phrase_line,
        weight=weight,
        scoring=texts.SCORING_NAMES[scoring],
        mars=answer.mars_weights[i],
        uniform=1.0 / len(answer.tokens),
    )


def _groups(answer: Answer) -> list[tuple[int, list[int]]]:
    """Consecutive tokens of the same phrase: [(phrase index or -1, [token indices])]."""
    groups: list[tuple[int, list[int]]] = []
    for i in range(len(answer.tokens)):
        k = _phrase_index(answer, i)
        if groups and groups[-1][0] == k and k >= 0:
            groups[-1][1].append(i)
        else:
            groups.append((k, [i]))
    return groups


def answer_tokens_html(answer: Answer, scoring: str) -> str:
    """The answer's text with every token colored by its weight and phrases boxed.

    Colors use one scale for both scorings (the answer's largest MARS weight, at least 1/L), so
    switching the scoring shows how MARS moves weight onto the important tokens.

    Each token's details are in ``data-tip`` (shown by the page's CSS as a tooltip on hover and
    on keyboard focus or a tap, which the native ``title`` never shows) and in ``aria-label``.
    Only the first token is a tab stop (``tabindex="0"``, the others -1): the arrow keys move
    between the tokens (``assets/page.js``), so one answer is one stop of the Tab key.
    An empty answer (the engine keeps one zero-width token for it) says so instead.
    """
    n = len(answer.tokens)
    if n == 0 or not answer.text.strip():
        return f'<span class="mars-empty">{esc(texts.ANSWER_EMPTY)}</span>'
    weights = token_weights(answer, scoring)
    scale = max(max(answer.mars_weights, default=0.0), 1.0 / n)
    text = answer.text
    out: list[str] = []
    pos = 0
    stop = "0"  # one tab stop per answer: its first token (assets/page.js moves it)
    for k, members in _groups(answer):
        opened = False
        for i in members:
            tok = answer.tokens[i]
            start, end = max(tok.start, pos), tok.end
            if end <= start:
                continue  # empty token (part of a multi-byte character, or already shown)
            if start > pos:
                out.append(esc(text[pos:start]))  # characters no token covers
            piece = text[start:end]
            core = piece.lstrip()
            lead = piece[: len(piece) - len(core)]
            if lead:
                out.append(esc(lead))
            pos = end
            if not core:
                continue  # whitespace-only token: nothing to color
            if not opened:
                cls = "mars-phrase" if k >= 0 else "mars-nophrase"
                out.append(f'<span class="{cls}" data-phrase="{k}">')
                opened = True
            tip = esc(_token_title(answer, i, weights[i], scoring))
            out.append(
                f'<span class="mars-tok" data-token="{i}" data-weight="{weights[i]:.4f}" '
                f'style="background-color: {token_color(weights[i] / scale)}" '
                f'data-tip="{tip}" aria-label="{tip}" tabindex="{stop}">{esc(core)}</span>'
            )
            stop = "-1"
        if opened:
            out.append("</span>")
    if pos < len(text):
        out.append(esc(text[pos:]))
    return "".join(out)


def scores_html(answer: Answer, scoring: str) -> str:
    cells = []
    for key in SCORINGS:
        value = getattr(answer.scores, key)
        cells.append(
            f'<span class="mars-score{" mars-active" if key == scoring else ""}" data-scoring="{key}" '
            f'title="{esc(texts.SCORE_TITLE.format(prob=math.exp(value)))}">'
            f"{esc(texts.SCORING_NAMES[key])} <b>{_fmt(value)}</b></span>"
        )
    return f'<div class="mars-scores">{esc(texts.ANSWER_SCORES)} {" ".join(cells)}</div>'


def legend_html() -> str:
    stops = ", ".join(token_color(x / 4) for x in range(5))
    return (
        '<div class="mars-legend">'
        f'<span class="mars-legend-end">{esc(texts.LEGEND_LOW)}</span>'
        f'<span class="mars-legend-bar" style="background: linear-gradient(to right, {stops})"></span>'
        f'<span class="mars-legend-end">{esc(texts.LEGEND_HIGH)}</span>'
        f'<p class="mars-legend-text">{esc(texts.LEGEND)}</p>'
        "</div>"
    )


def answer_html(result: AnalysisResult, scoring: str) -> str:
    """The greedy answer, colored, with its two scores and the color legend."""
    answer = result.greedy
    parts = [
        f'<div class="mars-answer" data-scoring="{esc(scoring)}">',
        f'<p class="mars-question">{esc(result.question)}</p>',
        f'<p class="mars-answer-text" role="group" aria-label="{esc(texts.ANSWER_TOKENS_ARIA)}">'
        f'{answer_tokens_html(answer, scoring)}</p>',
        scores_html(answer, scoring),
        explain_html(result, scoring),
    ]
    if answer.finish_reason == "length":
        parts.append(f'<p class="mars-note">{esc(texts.ANSWER_TRUNCATED)}</p>')
    parts.append(legend_html())
    parts.append("</div>")
    return "".join(parts)


def streaming_html(question: str, partial: str) -> str:
    """The answer while it is being generated: plain text, escaped."""
    body = (
        esc(partial)
        if partial
        else f'<span class="mars-muted">{esc(texts.ANSWER_STREAMING)}</span>'
    )
    return (
        '<div class="mars-answer mars-streaming" aria-live="polite">'
        f'<p class="mars-question">{esc(question)}</p>'
        f'<p class="mars-answer-text">{body}<span class="mars-cursor" aria-hidden="true"></span></p>'
        "</div>"
    )


def placeholder_html() -> str:
    return f'<div class="mars-answer mars-muted">{esc(texts.ANSWER_PLACEHOLDER)}</div>'


# --- tables ------------------------------------------------------------------------------------


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
        f'<th scope="col" data-col="{key}"{_active(key, scoring)}>{esc(header)}</th>'
        for key, header in columns
    )
    body = []
    for attrs, cells in rows:
        tds = []
        for key, header in columns:
            cell = cells.get(key, Cell(""))
            title = f' title="{esc(cell.title)}"' if cell.title else ""
            tds.append(
                f'<td data-col="{key}" data-label="{esc(header)}"{_active(key, scoring)}{title}>{cell.html}</td>'
            )
        body.append(f"<tr{attrs}>{''.join(tds)}</tr>")
    return (
        f'<div class="mars-table-wrap"><table class="mars-table {cls}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


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
        k = _phrase_index(answer, i)
        if k >= 0:
            shares[k] += c
        else:
            outside += c
    if total == 0:
        return [math.nan] * len(shares), math.nan
    return [s / total for s in shares], outside / total


def _percent(share: float) -> str:
    return "–" if math.isnan(share) else _unsigned_zero(f"{share * 100:.1f}%")


def _weight_text(weight: float) -> str:
    """A phrase weight: 3 decimals, or 2 significant digits when that would show 0.000."""
    if 0 < weight < 0.0005:
        return f"{weight:.1e}"
    return _fmt(weight)


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
                    "score": _cell(_fmt(phrase.score)),
                    "weight": Cell(bar),
                    **{key: _cell(_percent(shares[key][0][k])) for key in SCORINGS},
                },
            )
        )
    if any(_phrase_index(answer, i) < 0 for i in range(len(answer.tokens))):
        rows.append(
            (
                ' class="mars-muted"',
                {
                    "phrase": _cell(texts.PHRASES_OUTSIDE),
                    **{key: _cell(_percent(shares[key][1])) for key in SCORINGS},
                },
            )
        )
    explain = f'<p class="mars-explain mars-weight-explain">{esc(paragraph)}</p>' if paragraph else ""
    return explain + _table(columns, rows, "mars-phrases mars-stack", scoring)


def cluster_badge(cluster: int) -> str:
    return (
        f'<span class="mars-cluster mars-cluster-{cluster % 8}">'
        f"{esc(texts.PLOT_CLUSTER_NAME.format(number=cluster + 1))}</span>"
    )


def samples_table_html(result: AnalysisResult, scoring: str) -> str:
    """One row per sampled answer: colored text, meaning cluster, LN and MARS scores."""
    if not result.samples:
        return f'<p class="mars-muted">{esc(texts.SAMPLES_NONE)}</p>'
    columns = list(
        zip(("index", "answer", "cluster", "length_normalized", "mars"), texts.SAMPLES_COLUMNS)
    )
    rows = []
    for b, sample in enumerate(result.samples):
        cluster = result.cluster_ids[b] if b < len(result.cluster_ids) else -1
        cells = {
            "index": _cell(str(b + 1)),
            "answer": Cell(
                f'<span class="mars-answer-text">{answer_tokens_html(sample, scoring)}</span>'
            ),
            "cluster": Cell(cluster_badge(cluster)) if cluster >= 0 else _cell("–"),
        }
        for key in SCORINGS:
            value = getattr(sample.scores, key)
            cells[key] = _cell(_fmt(value), texts.SCORE_TITLE.format(prob=math.exp(value)))
        rows.append((f' data-sample="{b}"', cells))
    return _table(columns, rows, "mars-samples mars-stack", scoring)


def uncertainty_table_html(result: AnalysisResult, scoring: str) -> str:
    """The six uncertainty values; the active scoring's column is highlighted."""
    columns = list(zip(("measure", "length_normalized", "mars"), texts.UNCERTAINTY_COLUMNS))
    rows = []
    for key, (label, explanation) in texts.UNCERTAINTY_ROWS.items():
        pair = getattr(result.uncertainty, key)
        measure = f'<span class="mars-measure">{esc(label)}</span><span class="mars-small">{esc(explanation)}</span>'
        rows.append(
            (
                f' data-measure="{key}"',
                {
                    "measure": Cell(measure),
                    "length_normalized": _cell(_fmt(pair.length_normalized)),
                    "mars": _cell(_fmt(pair.mars)),
                },
            )
        )
    normalized = normalized_semantic_entropy(result)
    label, explanation = texts.SE_NORMALIZED_ROW
    rows.append((
        ' data-measure="semantic_entropy_normalized"',
        {
            "measure": Cell(f'<span class="mars-measure">{esc(label)}</span>'
                            f'<span class="mars-small">{esc(explanation)}</span>'),
            **{key: _cell(_fmt(normalized[key])) for key in SCORINGS},
        },
    ))
    explain = f'<p class="mars-explain">{esc(texts.UNCERTAINTY_EXPLAIN)}</p>'
    negative = [
        f"{texts.SCORING_NAMES[key]} {_fmt(getattr(result.uncertainty.semantic_entropy, key))}"
        for key in SCORINGS
        if getattr(result.uncertainty.semantic_entropy, key) < 0
    ]
    note = (
        f'<p class="mars-small mars-se-note">'
        f'{esc(texts.SE_NEGATIVE_NOTE.format(values=", ".join(negative)))}</p>'
        if negative else ""
    )
    return explain + _table(columns, rows, "mars-uncertainty", scoring) + note


# --- progress, warnings, errors, banner --------------------------------------------------------


@dataclass(frozen=True)
class StageProgress:
    """Where an analysis is: the engine's current stage and the fraction of it done (0..1).

    Stages outside :data:`STAGES` (e.g. "loading llm" when models load on first use) come before
    the first stage.
    """

    stage: str = "generate"
    fraction: float = 0.0

    @property
    def overall(self) -> float:
        if self.stage not in STAGES:
            return 0.0
        return (STAGES.index(self.stage) + min(max(self.fraction, 0.0), 1.0)) / len(STAGES)


def _stage_item(key: str, name: str, state: str, detail: str) -> str:
    return (
        f'<li class="mars-stage mars-stage-{state}" data-stage="{esc(key)}">'
        f'<span class="mars-stage-name">{esc(name)}</span>'
        f'<span class="mars-stage-time">{esc(detail)}</span></li>'
    )


def progress_html(
    progress: StageProgress | None = None, timings_s: dict[str, float] | None = None
) -> str:
    """A bar over the four stages; with ``timings_s`` (a finished analysis) the time of each."""
    items = []
    note = ""
    if timings_s is not None:
        overall = 1.0
        for key, seconds in timings_s.items():  # the engine's order: load, generate, logprobs...
            name = texts.STAGES.get(key) or texts.STAGES_EXTRA.get(key, key)
            items.append(
                _stage_item(key, name, "done", texts.STAGE_SECONDS.format(seconds=seconds))
            )
        note = texts.PROGRESS_TOTAL.format(seconds=sum(timings_s.values()))
    else:
        progress = progress or StageProgress()
        overall = progress.overall
        position = STAGES.index(progress.stage) if progress.stage in STAGES else -1
        for index, stage in enumerate(STAGES):
            state = "done" if index < position else "active" if index == position else "pending"
            items.append(_stage_item(stage, texts.STAGES[stage], state, ""))
        if position < 0:
            note = f"{progress.stage} ({round(min(max(progress.fraction, 0.0), 1.0) * 100)}%)"
    percent = round(overall * 100)
    note_html = f'<p class="mars-total">{esc(note)}</p>' if note else ""
    return (
        f'<div class="mars-progress" data-state="{"done" if timings_s is not None else "running"}">'
        f'<div class="mars-progress-track" role="progressbar" aria-valuemin="0" aria-valuemax="100" '
        f'aria-valuenow="{percent}"><div class="mars-progress-fill" style="width: {percent}%"></div></div>'
        f'<ol class="mars-stages">{"".join(items)}</ol>{note_html}</div>'
    )


def warnings_html(warnings: Sequence[str]) -> str:
    """The engine's warnings: the first few in full, the rest behind a "more" toggle. (They
    number phrases and tokens from 1, as the page's tables do.)"""
    if not warnings:
        return ""
    shown = "".join(f"<li>{esc(w)}</li>" for w in warnings[:WARNINGS_SHOWN])
    more = ""
    if len(warnings) > WARNINGS_SHOWN:
        rest = "".join(f"<li>{esc(w)}</li>" for w in warnings[WARNINGS_SHOWN:])
        summary = texts.WARNINGS_MORE.format(count=len(warnings) - WARNINGS_SHOWN)
        more = f"<details><summary>{esc(summary)}</summary><ul>{rest}</ul></details>"
    heading = texts.WARNINGS_HEADING.format(count=len(warnings))
    return f'<div class="mars-warnings" role="status"><b>{esc(heading)}</b><ul>{shown}</ul>{more}</div>'


def error_html(message: str) -> str:
    return f'<div class="mars-error" role="alert">{esc(message)}</div>'


def banner_html(lines: Sequence[tuple[str, str]]) -> str:
    """``lines``: (kind, html) with kind "info", "warn" or "error"; the html must be escaped already."""
    return "".join(
        f'<div class="mars-banner mars-banner-{kind}">{content}</div>' for kind, content in lines
    )


# --- why MARS differs: the answer explained ------------------------------------------------------


def _token_text(answer: Answer, i: int) -> str:
    token = answer.tokens[i]
    return answer.text[token.start:token.end] or token.text


def verdict_text(result: AnalysisResult) -> str:
    """Which way MARS moves the confidence uncertainty of the answer on screen, by how much,
    and the token that moves it most.

    MARS − LN = Σ_l (w_l − 1/L) log p_l = Σ_l (u_l − 1/L)/2 · log p_l, so the token with the
    largest |(u_l − 1/L) log p_l| (in the direction of the difference) is named.
    """
    answer = result.greedy
    ln = result.uncertainty.confidence.length_normalized
    mars = result.uncertainty.confidence.mars
    diff = mars - ln
    if abs(diff) < 0.0005:
        return texts.VERDICT_SAME.format(mars=mars, ln=ln)
    template = texts.VERDICT_LESS if diff > 0 else texts.VERDICT_MORE
    sentence = template.format(mars=mars, ln=ln, diff=abs(diff))
    n = len(answer.tokens)
    if n == 0 or len(answer.token_importance) != n:
        return sentence
    # each token's part of the confidence difference: −(u_l − 1/L)/2 · log p_l
    parts = [-(u - 1.0 / n) / 2 * t.logprob for u, t in zip(answer.token_importance, answer.tokens)]
    i = max(range(n), key=lambda k: parts[k] if diff > 0 else -parts[k])
    u = answer.token_importance[i]
    sentence += texts.VERDICT_BECAUSE.format(
        token=repr(_token_text(answer, i)),
        prob=math.exp(answer.tokens[i].logprob),
        u=u,
        uniform=1.0 / n,
        direction=texts.VERDICT_MORE_WEIGHT if u > 1.0 / n else texts.VERDICT_LESS_WEIGHT,
    )
    return sentence


def greedy_cluster_text(result: AnalysisResult, scoring: str) -> str:
    """Which meaning cluster the greedy answer falls in, as far as the result can tell: the
    clusters are over the sampled answers only, so the greedy answer is placed by the samples
    whose text is the same (whitespace at the ends ignored); no NLI is run here."""
    from mars_demo.ui.plots import cluster_masses  # plots imports this module

    greedy = result.greedy.text.strip()
    same = [b for b, s in enumerate(result.samples)
            if s.text.strip() == greedy and b < len(result.cluster_ids)]
    if not same:
        return texts.GREEDY_CLUSTER_NONE
    clusters = sorted({result.cluster_ids[b] for b in same})
    masses = cluster_masses(result, scoring)
    share = sum(masses.get(c, 0.0) for c in clusters)
    return texts.GREEDY_CLUSTER.format(
        samples=(f"sampled answer #{same[0] + 1} has" if len(same) == 1 else
                 "sampled answers " + ", ".join(f"#{b + 1}" for b in same) + " have"),
        are="is" if len(same) == 1 else "are",
        clusters=", ".join(texts.PLOT_CLUSTER_NAME.format(number=c + 1) for c in clusters),
        share=f"{share:.0%}",
        scoring=texts.SCORING_NAMES[scoring],
    )


def explain_html(result: AnalysisResult, scoring: str) -> str:
    """The answer's verdict in words and its meaning cluster, shown under its scores."""
    return (
        '<div class="mars-explain-answer">'
        f'<p class="mars-verdict">{esc(verdict_text(result))}</p>'
        f'<p class="mars-greedy-cluster mars-small">{esc(greedy_cluster_text(result, scoring))}</p>'
        "</div>"
    )


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
        k = _phrase_index(answer, i)
        parts = {"length_normalized": token.logprob / n, "mars": w * token.logprob}
        for key in parts:
            totals[key] += parts[key]
        shown = _token_text(answer, i)
        rows.append((
            f' data-token="{i}"',
            {
                "index": _cell(str(i + 1)),
                "token": Cell(f"<code>{esc(repr(shown)) if shown else esc(texts.TOKENS_EMPTY)}</code>"),
                "logprob": _cell(_fmt(token.logprob)),
                "prob": _cell(_fmt(math.exp(token.logprob))),
                "importance": _cell(_fmt(u)),
                "phrase_number": _cell(str(k + 1) if k >= 0 else "–"),
                "uniform": _cell(_fmt(1.0 / n)),
                "weight": _cell(_fmt(w)),
                **{key: _cell(_fmt(value)) for key, value in parts.items()},
            },
        ))
    rows.append((
        ' class="mars-total-row"',
        {
            "token": _cell(texts.TOKENS_TOTAL),
            "importance": _cell(_fmt(sum(answer.token_importance))),
            "uniform": _cell(_fmt(1.0)),
            "weight": _cell(_fmt(sum(answer.mars_weights))),
            **{key: _cell(_fmt(value)) for key, value in totals.items()},
        },
    ))
    explain = f'<p class="mars-explain">{esc(texts.TOKENS_EXPLAIN)}</p>'
    # not stacked into cards on a phone (a card per token is too long): it scrolls instead
    return explain + _table(columns, rows, "mars-tokens", scoring)


def _model_name(value: object) -> str:
    """A model as the page names it: a Hub id as it is, a local folder by its last part (a
    public page must not show the server's paths)."""
    text = str(value)
    if text.startswith(("/", "~", ".", "\\")) or "\\" in text or text.count("/") > 1:
        return text.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] or "local model"
    return text


def context_html(result: AnalysisResult) -> str:
    """The prompt (as text) and the settings that made this result."""
    settings = result.settings or {}
    prompt = (
        f'<pre class="mars-prompt">{esc(result.prompt)}</pre>'
        if result.prompt
        else f'<p class="mars-muted">{esc(texts.CONTEXT_NO_PROMPT)}</p>'
    )
    items = []
    for key, label in texts.CONTEXT_NAMES.items():
        if key == "softmax_temperature" and settings.get("normalization") not in (
                "softmax", "sum-softmax"):
            continue
        value = settings.get(key)
        if value is None:
            shown = texts.CONTEXT_UNSET
        elif key in ("llm", "importance", "nli"):
            shown = _model_name(value)
        else:
            shown = str(value)
        items.append(f'<dt>{esc(label)}</dt><dd data-setting="{esc(key)}">{esc(shown)}</dd>')
    return (
        f'<h4>{esc(texts.CONTEXT_PROMPT)}</h4>{prompt}'
        f'<h4>{esc(texts.CONTEXT_SETTINGS)}</h4><dl class="mars-settings-list">{"".join(items)}</dl>'
    )


def formulas_html() -> str:
    """The formulas of the scores and uncertainties (as in the README)."""
    parts = []
    rows = []
    for item in texts.FORMULAS:
        if isinstance(item, str):
            if rows:
                parts.append(_formula_table(rows))
                rows = []
            parts.append(f'<p class="mars-explain">{esc(item)}</p>')
        else:
            rows.append(item)
    if rows:
        parts.append(_formula_table(rows))
    return "".join(parts)


def _formula_table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th scope=\"row\">{esc(name)}</th><td><code>{esc(formula)}</code></td></tr>"
                   for name, formula in rows)
    return f'<div class="mars-table-wrap"><table class="mars-table mars-formulas">{body}</table></div>'


def normalized_semantic_entropy(result: AnalysisResult) -> dict[str, float]:
    """The normalized semantic entropy (Farquhar et al. 2024) of the result's samples under
    both scorings, from the scores and cluster ids already in the result (no model runs)."""
    from mars_demo.core.uncertainty import semantic_entropy_normalized

    if not result.samples or len(result.cluster_ids) != len(result.samples):
        return {key: math.nan for key in SCORINGS}
    return {
        key: semantic_entropy_normalized(
            [getattr(s.scores, key) for s in result.samples], result.cluster_ids)
        for key in SCORINGS
    }
