"""HTML fragments of the page: escaping, numbers, the colored tokens of an answer, the progress
bar, warnings, errors and the banner. The tables are in :mod:`mars_demo.ui.draw.tables`, the answer
block with its explanation in :mod:`mars_demo.ui.draw.explain`, the figures in :mod:`mars_demo.ui.draw.plots`.

Pure functions: no gradio, no models. Every piece of text that comes from a question, an answer,
a model name or an exception goes through :func:`esc` before it is put into HTML, so a question
like ``<img src=x onerror=...>`` is shown as text and runs nothing.

Scoring names are the JSON keys: ``"length_normalized"`` (every token weighs 1/L) and ``"mars"``
(token weights w_l = 1/(2L) + u_l/2).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from mars_demo import texts
from mars_demo.progress import STAGES  # the engine's progress stages, in order
from mars_demo.result import SCORINGS
from mars_demo.result import ScoredAnswer as Answer

#: Token shading: one hue (indigo) from the lightest weight ("low") to the answer's heaviest
#: ("high"), mixed in between, and the tokens' text, per theme. Chosen so that the text keeps
#: at least 4.5:1 on every shade (WCAG 1.4.3) and the two ends at least 3:1 between them, so the
#: weights can be told apart (WCAG 1.4.11); tests/test_ui_display.py checks the ratios. The
#: page's head writes them as CSS variables (:func:`mars_demo.ui.launch.head`).
TOKEN_PALETTE = {
    "light": {"low": "#f5f6ff", "high": "#7972eb", "text": "#000000"},
    "dark": {"low": "#1e1b3c", "high": "#6169b8", "text": "#ffffff"},
}
WARNINGS_SHOWN = 3  # warnings listed in full; the others behind a "more" toggle
TOY_WARNING = "Toy model"  # how a toy model's warning starts (mars_demo.models.toy): always shown


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


#: What the answer's tokens may be colored by: the weight in the active score, how improbable
#: each token was (1 - p), or the entropy of the model's next-token distribution there.
SHADES = ("weight", "probability", "entropy")
DEFAULT_SHADE = "weight"


def check_shade(shade: str) -> str:
    if shade not in SHADES:
        raise ValueError(f"shade must be one of {', '.join(SHADES)}; got {shade!r}")
    return shade


def token_intensities(answer: Answer, scoring: str, shade: str = DEFAULT_SHADE) -> list[float]:
    """Each token's color intensity (0..1) under ``shade``: its weight over one scale for both
    scorings (the answer's largest MARS weight, at least 1/L); ``1 - p`` (an improbable token
    is dark); or its entropy over the answer's largest (at least log 2, one bit), 0 where the
    entropy is not known."""
    n = len(answer.tokens)
    if check_shade(shade) == "probability":
        return [1.0 - math.exp(t.logprob) for t in answer.tokens]
    if shade == "entropy":
        known = [t.entropy for t in answer.tokens if t.entropy is not None]
        scale = max([math.log(2), *known])
        return [0.0 if t.entropy is None else t.entropy / scale for t in answer.tokens]
    scale = max(max(answer.mars_weights, default=0.0), 1.0 / n)
    return [w / scale for w in token_weights(answer, scoring)]


def token_shade(intensity: float) -> str:
    """The shade of a token whose weight is ``intensity`` (0..1) of the answer's largest weight:
    the share of :data:`TOKEN_PALETTE`'s "high" in its color (CSS ``--w``, mixed in the page's
    style sheet)."""
    return f"{min(max(intensity, 0.0), 1.0):.3f}"


def palette_css() -> str:
    """:data:`TOKEN_PALETTE` as CSS variables of the light and the dark theme."""
    def block(selector: str, colors: dict[str, str]) -> str:
        return selector + " { " + " ".join(
            f"--mars-tok-{name}: {value};" for name, value in colors.items()) + " }"

    return "\n".join((block(":root", TOKEN_PALETTE["light"]),
                      block(".dark", TOKEN_PALETTE["dark"])))


def fmt(value: float, digits: int = 3) -> str:
    """A number as the page shows it: ``digits`` decimals, a true minus sign, "–" for NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return _unsigned_zero(f"{value:.{digits}f}").replace("-", "−")


def _unsigned_zero(text: str) -> str:
    """``text`` without its minus sign when the number it shows is zero ("-0.0" -> "0.0")."""
    if text.startswith("-") and not text.strip("-0.%"):
        return text[1:]
    return text


def active_attr(column: str, scoring: str) -> str:
    """The class attribute that highlights the column (or cell) of the active scoring."""
    return ' class="mars-active"' if column == scoring else ""


def phrase_index(answer: Answer, token: int) -> int:
    """The phrase of a token, or -1 when it belongs to none."""
    if token < len(answer.phrase_of_token):
        k = answer.phrase_of_token[token]
        if 0 <= k < len(answer.phrases):
            return k
    return -1



def percent(share: float) -> str:
    """A share as the page shows it: 0.25 -> "25.0%", "–" for NaN."""
    return "–" if math.isnan(share) else _unsigned_zero(f"{share * 100:.1f}%")


def token_text(answer: Answer, i: int) -> str:
    """The text of token ``i`` as it stands in the answer."""
    token = answer.tokens[i]
    return answer.text[token.start:token.end] or token.text


# --- the colored answer ------------------------------------------------------------------------


def share_words(share: float) -> str:
    """A share as a token's details say it: 0.17 -> "17%", 0.012 -> "1.2%", 0.0004 -> "under
    0.1%"; never 0% or 100% for what is not."""
    if share >= 0.995 and share < 1:
        return "over 99%"
    if share >= 0.1:
        return f"{share:.0%}"
    if share >= 0.001:
        return f"{share:.1%}"
    return "under 0.1%" if share > 0 else "0%"


def _token_title(answer: Answer, i: int, weight: float, scoring: str) -> str:
    """A token's details in words: how likely the model found it, its share of the answer's
    weight, and its phrase."""
    token = answer.tokens[i]
    k = phrase_index(answer, i)
    if k >= 0:
        phrase = answer.phrases[k]
        phrase_line = texts.TOKEN_TITLE_PHRASE.format(
            phrase=" ".join(phrase.text.split()), score=f"{phrase.score:.2f}",
            weight=share_words(phrase.weight))
    else:
        phrase_line = texts.TOKEN_TITLE_NO_PHRASE
    return texts.TOKEN_TITLE.format(
        token=answer.text[token.start: token.end].strip() or token.text,
        prob=share_words(math.exp(token.logprob)),
        phrase_line=phrase_line,
        weight=share_words(weight),
        scoring=texts.SCORING_NAMES[scoring],
        uniform=share_words(1.0 / len(answer.tokens)),
    )


def _groups(answer: Answer) -> list[tuple[int, list[int]]]:
    """Consecutive tokens of the same phrase: [(phrase index or -1, [token indices])]."""
    groups: list[tuple[int, list[int]]] = []
    for i in range(len(answer.tokens)):
        k = phrase_index(answer, i)
        if groups and groups[-1][0] == k and k >= 0:
            groups[-1][1].append(i)
        else:
            groups.append((k, [i]))
    return groups


def answer_tokens_html(answer: Answer, scoring: str, shade: str = DEFAULT_SHADE) -> str:
    """The answer's text with every token colored by its weight (or, ``shade``, by how
    improbable it was or by the entropy there: :func:`token_intensities`) and phrases boxed.

    Colors use one scale for both scorings (the answer's largest MARS weight, at least 1/L), so
    switching the scoring shows how MARS moves weight onto the important tokens.

    Each token's details are in ``data-tip`` (shown by the page's CSS as a tooltip on hover and
    on keyboard focus or a tap, which the native ``title`` never shows) and in ``aria-label``.
    Only the first token is a tab stop (``tabindex="0"``, the others -1): the arrow keys move
    between the tokens (``ui/assets/page.js``), so one answer is one stop of the Tab key.
    An empty answer (the engine keeps one zero-width token for it) says so instead.
    """
    n = len(answer.tokens)
    if n == 0 or not answer.text.strip():
        return f'<span class="mars-empty">{esc(texts.ANSWER_EMPTY)}</span>'
    weights = token_weights(answer, scoring)
    shades = token_intensities(answer, scoring, shade)
    text = answer.text
    out: list[str] = []
    pos = 0
    stop = "0"  # one tab stop per answer: its first token (ui/assets/page.js moves it)
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
                f'style="--w: {token_shade(shades[i])}" '
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
            f"{esc(texts.SCORING_NAMES[key])} <b>{fmt(value)}</b></span>"
        )
    return f'<div class="mars-scores">{esc(texts.ANSWER_SCORES)} {" ".join(cells)}</div>'


def legend_html(shade: str = DEFAULT_SHADE) -> str:
    """The shading's scale for ``shade``, from its low to its high end (the style sheet draws
    the bar)."""
    low, high, _ = texts.LEGENDS[check_shade(shade)]
    return (
        f'<div class="mars-legend" data-shade="{shade}">'
        f'<span class="mars-legend-end">{esc(low)}</span>'
        '<span class="mars-legend-bar" aria-hidden="true"></span>'
        f'<span class="mars-legend-end">{esc(high)}</span>'
        "</div>"
    )


def streaming_html(question: str, partial: str) -> str:
    """The answer while it is being generated: plain text, escaped."""
    body = (
        esc(partial)
        if partial
        else f'<span class="mars-muted">{esc(texts.ANSWER_STREAMING)}</span>'
    )
    return (  # not a live region: a screen reader would read the tokens as they come
        '<div class="mars-answer mars-streaming">'
        f'<p class="mars-question">{esc(question)}</p>'
        f'<p class="mars-answer-text">{body}<span class="mars-cursor" aria-hidden="true"></span></p>'
        "</div>"
    )


def placeholder_html() -> str:
    return f'<div class="mars-answer mars-muted">{esc(texts.ANSWER_PLACEHOLDER)}</div>'


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
    """A bar over the four stages while an analysis runs; with ``timings_s`` (a finished
    analysis) one line with the total, the time of each stage folded under it."""
    items = []
    if timings_s is not None:
        for key, seconds in timings_s.items():  # the engine's order: load, generate, logprobs...
            name = texts.STAGES.get(key) or texts.STAGES_EXTRA.get(key, key)
            items.append(
                _stage_item(key, name, "done", texts.STAGE_SECONDS.format(seconds=seconds))
            )
        total = texts.PROGRESS_TOTAL.format(seconds=sum(timings_s.values()))
        return (f'<details class="mars-progress" data-state="done" data-keep="timings">'
                f'<summary class="mars-total">{esc(total)}</summary>'
                f'<ol class="mars-stages">{"".join(items)}</ol></details>')
    progress = progress or StageProgress()
    position = STAGES.index(progress.stage) if progress.stage in STAGES else -1
    for index, stage in enumerate(STAGES):
        state = "done" if index < position else "active" if index == position else "pending"
        items.append(_stage_item(stage, texts.STAGES[stage], state, ""))
    note = ""
    if position < 0:
        note = f"{progress.stage} ({round(min(max(progress.fraction, 0.0), 1.0) * 100)}%)"
    percent = round(progress.overall * 100)
    note_html = f'<p class="mars-total">{esc(note)}</p>' if note else ""
    return (
        '<div class="mars-progress" data-state="running">'
        f'<div class="mars-progress-track" role="progressbar" aria-valuemin="0" '
        f'aria-valuemax="100" aria-valuenow="{percent}" aria-label="{esc(texts.PROGRESS_LABEL)}">'
        f'<div class="mars-progress-fill" style="width: {percent}%"></div></div>'
        f'<ol class="mars-stages">{"".join(items)}</ol>{note_html}</div>'
    )


def warnings_html(warnings: Sequence[str]) -> str:
    """The engine's warnings: a toy model's always in full and first, then the first few of
    the others in full, the rest behind a "more" toggle. (They number phrases and tokens from
    1, as the page's tables do.)"""
    if not warnings:
        return ""
    toy = [w for w in warnings if w.startswith(TOY_WARNING)]
    others = [w for w in warnings if not w.startswith(TOY_WARNING)]
    shown = "".join(f"<li>{esc(w)}</li>" for w in toy + others[:WARNINGS_SHOWN])
    more = ""
    if len(others) > WARNINGS_SHOWN:
        rest = "".join(f"<li>{esc(w)}</li>" for w in others[WARNINGS_SHOWN:])
        summary = texts.WARNINGS_MORE.format(count=len(others) - WARNINGS_SHOWN)
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
