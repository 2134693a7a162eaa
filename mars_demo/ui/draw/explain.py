"""The answer block and what explains it: the colored greedy answer with its two scores, why MARS
moves its uncertainty (in words), its meaning cluster, the prompt and settings behind it, and the
formulas. Pure functions: no gradio, no models.
"""

from __future__ import annotations

import math

from mars_demo import texts
from mars_demo.result import AnalysisResult
from mars_demo.ui.draw.render import (
    answer_tokens_html,
    esc,
    legend_html,
    scores_html,
    token_text,
)
from mars_demo.ui.guards.redact import public_model_name
from mars_demo.verdict import placement


def answer_html(result: AnalysisResult, scoring: str, shade: str = "weight") -> str:
    """The greedy answer, colored by ``shade`` (:data:`mars_demo.ui.draw.render.SHADES`), with its
    two scores and the color legend."""
    answer = result.greedy
    parts = [
        f'<div class="mars-answer" data-scoring="{esc(scoring)}">',
        f'<p class="mars-question">{esc(result.question)}</p>',
        f'<p class="mars-answer-text" role="group" aria-label="{esc(texts.ANSWER_TOKENS_ARIA)}">'
        f'{answer_tokens_html(answer, scoring, shade)}</p>',
    ]
    if answer.finish_reason == "length":
        parts.append(f'<p class="mars-note">{esc(texts.ANSWER_TRUNCATED)}</p>')
    parts += [
        legend_html(shade),
        # the numbers one click away; page.js keeps the fold as the visitor left it
        f'<details class="mars-answer-more" data-keep="answer-numbers">'
        f"<summary>{esc(texts.ANSWER_MORE)}</summary>",
        scores_html(answer, scoring),
        explain_html(result, scoring),
        f'<p class="mars-legend-text mars-small">{esc(texts.LEGENDS[shade][2])}</p>',
        "</details></div>",
    ]
    return "".join(parts)


def why_text(result: AnalysisResult) -> str:
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
        return texts.WHY_SAME.format(mars=mars, ln=ln)
    template = texts.WHY_LESS if diff > 0 else texts.WHY_MORE
    sentence = template.format(mars=mars, ln=ln, diff=abs(diff))
    n = len(answer.tokens)
    if n == 0 or len(answer.token_importance) != n:
        return sentence
    # each token's part of the confidence difference: −(u_l − 1/L)/2 · log p_l
    parts = [-(u - 1.0 / n) / 2 * t.logprob for u, t in zip(answer.token_importance, answer.tokens)]
    i = max(range(n), key=lambda k: parts[k] if diff > 0 else -parts[k])
    u = answer.token_importance[i]
    sentence += texts.WHY_BECAUSE.format(
        token=repr(token_text(answer, i)),
        prob=math.exp(answer.tokens[i].logprob),
        u=u,
        uniform=1.0 / n,
        direction=texts.WHY_MORE_WEIGHT if u > 1.0 / n else texts.WHY_LESS_WEIGHT,
    )
    return sentence


def _samples(numbers: tuple[int, ...], verb: str = "") -> str:
    """"sampled answer #2 has" / "sampled answers #1, #3 have" (``verb``: "has", or none)."""
    one = len(numbers) == 1
    said = ("sampled answer " if one else "sampled answers ") + ", ".join(
        f"#{b + 1}" for b in numbers)
    return f"{said} {verb if one else 'have'}" if verb else said


def greedy_cluster_text(result: AnalysisResult, scoring: str) -> str:
    """Which meaning cluster the greedy answer falls in: the verdict's own placement
    (:func:`mars_demo.verdict.placement`), with the samples that placed it and the samples
    that share its cluster (as many as the verdict counts); no NLI is run here."""
    placed = placement(result)
    if not placed.clusters:
        return texts.GREEDY_CLUSTER_NONE
    masses = result.cluster_masses(scoring)
    ids = result.cluster_ids
    spread = len({ids[b] for b in placed.matched if b < len(ids)}) > 1
    return (texts.GREEDY_CLUSTER if placed.by == "words" else texts.GREEDY_CLUSTER_NLI).format(
        matched=_samples(placed.matched, "has" if placed.by == "words" else ""),
        clusters=", ".join(texts.PLOT_CLUSTER_NAME.format(number=c + 1) for c in placed.clusters),
        most=texts.GREEDY_CLUSTER_MOST if spread else "",
        members=_samples(placed.members),
        share=f"{sum(masses.get(c, 0.0) for c in placed.clusters):.0%}",
        scoring=texts.SCORING_NAMES[scoring],
    )


def explain_html(result: AnalysisResult, scoring: str) -> str:
    """Why MARS moves the answer's uncertainty, in words, and its meaning cluster, shown under
    its scores."""
    return (
        '<div class="mars-explain-answer">'
        f'<p class="mars-why">{esc(why_text(result))}</p>'
        f'<p class="mars-greedy-cluster mars-small">{esc(greedy_cluster_text(result, scoring))}</p>'
        "</div>"
    )


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
            shown = public_model_name(value)
        else:
            shown = str(value)
        items.append(f'<dt>{esc(label)}</dt><dd data-setting="{esc(key)}">{esc(shown)}</dd>')
    return (
        f'<h3 class="mars-chart-title">{esc(texts.CONTEXT_PROMPT)}</h3>{prompt}'
        f'<h3 class="mars-chart-title">{esc(texts.CONTEXT_SETTINGS)}</h3>'
        f'<dl class="mars-settings-list">{"".join(items)}</dl>'
    )


def formulas_html() -> str:
    """The formulas of the scores and uncertainties (as in docs/formulas.md)."""
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
