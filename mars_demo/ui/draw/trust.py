"""The verdict over the answer (``#mars-verdict``): the analysis' own verdict
(:attr:`AnalysisResult.verdict <mars_demo.result.AnalysisResult.verdict>`, which the engine
computed with the page's calibration and evaluation run) in a badge and a sentence, with its
calibrated chance of being right where the page has a calibration, how the answers at its level
fared in the page's evaluation run where it serves one, and, one click away, how the page judges
it and where the chance comes from. Nothing here judges: it renders the verdict it is given.

Its tone (the CSS class ``mars-verdict-tone-*``) reads as trust only for a calibrated chance:
without one it is neutral, or a caution for an unsure answer. Each verdict carries the id of its
analysis (``data-analysis``), by which the page's script announces every analysis once; while
an analysis runs, :func:`working_html` says that the verdict is being worked out.

With a calibration (``app.py --calibration FILE``, see :mod:`mars_demo.evaluation.calibration`)
the details say "About 72% likely to be right." and where that comes from (measure, scoring, data
set, n, judge, AUROC). Without one they say in words how to read the uncertainty values: lower =
more trustworthy, which scoring the paper found more reliable, and that a value alone is no
probability. Pure functions: no gradio, no models.
"""

from __future__ import annotations

from typing import Any

from mars_demo import texts
from mars_demo.ui.draw.render import esc
from mars_demo.verdict import Verdict, data_name


def _measure_name(measure: str) -> str:
    """"Semantic Entropy"; another method by the evaluation's name of it ("Eigenvalue
    (entail.)")."""
    from mars_demo.evaluation.labels import row_label

    return texts.MEASURE_NAMES.get(measure) or row_label(measure, "value")


def _judge(judge: dict[str, Any]) -> str:
    text = str(judge.get("name", "?"))
    if judge.get("threshold") is not None:
        text += f" ≥ {judge['threshold']}"
    return text


def working_html(expected: str = "") -> str:
    """The verdict's place while an analysis runs: it is being worked out, and (``expected``)
    how long analyses took here lately."""
    return ('<div class="mars-verdict mars-verdict-working" data-state="working" tabindex="-1">'
            f'<p class="mars-verdict-line">{esc(texts.VERDICT_WORKING)}'
            f'<span class="mars-small">{esc(expected)}</span></p></div>')


def verdict_html(result: Any, *, analysis: str = "") -> str:
    """The verdict of ``result`` (an AnalysisResult as visitors see it: its ``verdict``):
    badge, sentence, the calibrated chance where the calibration covers the answer, how answers
    at its level fared in the page's run, and the details (:func:`trust_html`) folded under it.
    Empty for a result without a verdict. ``analysis``: the id of the analysis (each one a new
    id, so that the page announces it)."""
    found: Verdict | None = result.verdict
    if found is None:
        return ""
    said = [("chance", found.calibrated)] if found.calibrated else []
    if found.record:
        said.append(("record", found.record))
    lines = "".join(f'<p class="mars-verdict-said mars-verdict-{kind}">{esc(text)}</p>'
                    for kind, text in said)
    return (
        f'<div class="mars-verdict mars-verdict-tone-{found.tone}" data-level="{found.level}" '
        f'data-tone="{found.tone}" data-analysis="{esc(analysis)}" tabindex="-1">'
        f'<p class="mars-verdict-line"><strong class="mars-verdict-badge">{esc(found.badge)}'
        f'<span class="mars-sr-only">:</span></strong> {esc(found.sentence)}</p>{lines}'
        f'<details class="mars-verdict-details" data-keep="verdict">'
        f"<summary>{esc(texts.VERDICT_DETAILS)}</summary>"
        f'<p class="mars-small">{esc(texts.VERDICT_HOW)} {esc(texts.VERDICT_NOT_RIGHT)}</p>'
        f"{trust_html(found)}</details></div>"
    )


def trust_html(found: Verdict) -> str:
    """How far to trust the answer beyond the verdict ``found``: with a calibration, its
    chance of being right and where that comes from (``found.calibration``, as visitors may
    read it: a public page's redaction names no server path); without one, how to read the
    uncertainty values."""
    estimate = found.calibration
    if estimate is None:
        return f'<div class="mars-trust mars-small" role="note">{texts.TRUST_WORDS}</div>'
    if estimate.get("chance_correct") is None:
        reason = str(estimate.get("reason", "")).rstrip(".")
        return ('<div class="mars-trust mars-small" role="note">'
                f"{esc(texts.TRUST_NO_CHANCE.format(reason=reason))}</div>")
    percent = round(100 * estimate["chance_correct"])
    auroc = "undefined" if estimate.get("auroc") is None else f"{estimate['auroc']:.2f}"
    source = texts.TRUST_SOURCE.format(
        measure=_measure_name(estimate["measure"]),
        scoring=texts.SCORING_NAMES.get(estimate["scoring"], texts.TRUST_NO_SCORING),
        value=f"{estimate['uncertainty']:.3f}".replace("-", "−"),
        data=data_name(estimate["data"]),
        n=estimate["n"],
        accuracy=f"{estimate['accuracy']:.0%}",
        judge=_judge(estimate.get("judge") or {}),
        auroc=auroc,
    )
    if estimate.get("auroc") is None:
        source += texts.TRUST_UNINFORMATIVE
    return (f'<div class="mars-trust"><span class="mars-trust-chance">'
            f"{texts.TRUST_CHANCE.format(percent=percent)}</span> "
            f'<span class="mars-small">{esc(source)}</span></div>')
