"""The verdict over the answer (``#mars-verdict``): :mod:`mars_demo.verdict` in a badge and a
sentence, with its calibrated chance of being right where the page has a calibration, how the
answers at its level fared in the page's evaluation run where it serves one, and, one click away,
how the page judges it and where the chance comes from.

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
from mars_demo.verdict import verdict
from mars_demo.ui.redact import public_model_name
from mars_demo.ui.reference import Reference, differences
from mars_demo.ui.render import esc


def calibration_estimate(result: Any, calibration: Any) -> dict[str, Any]:
    """The API's ``calibration`` field: :meth:`Calibration.estimate`, or, for a result that
    the calibration does not cover (other models or other settings), ``chance_correct`` None
    with the ``reason`` and what differs (``other``: "models" or "settings")."""
    from mars_demo.evaluation.calibration import CalibrationError, OtherSettings

    try:
        return calibration.estimate(result)
    except (CalibrationError, KeyError, TypeError, ValueError) as err:
        return {"chance_correct": None, "reason": str(err),
                "other": "settings" if isinstance(err, OtherSettings) else "models",
                "source": calibration.describe()}


def public_reason(estimate: dict[str, Any]) -> str:
    """Why an answer gets no chance, for a public page: other settings are named (they are the
    visitor's own), other models are not (the message would name the server's paths)."""
    if estimate.get("other") == "settings":
        return str(estimate["reason"])
    return texts.TRUST_OTHER_MODELS


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


def verdict_html(shown: Any, made: Any = None, calibration: Any = None, *,
                 public: bool = False, reference: Reference | None = None,
                 analysis: str = "") -> str:
    """The verdict on ``shown`` (an AnalysisResult as visitors see it; ``made``: as it was made,
    which the calibration checks): badge, sentence, the calibrated chance where the calibration
    covers the answer, how answers at its level fared in ``reference``'s run, and the details
    (:func:`trust_html`) folded under it. ``analysis``: the id of the analysis (each one a new
    id, so that the page announces it)."""
    made = made if made is not None else shown
    chance, data, n = None, "", None
    if calibration is not None:
        estimate = calibration_estimate(made, calibration)
        if estimate["chance_correct"] is not None:
            chance, n = estimate["chance_correct"], estimate["n"]
            data = public_model_name(estimate["data"])  # the page shows no server folder
    run = reference.run if reference is not None else None
    found = verdict(shown, chance, calibrated_on=str(data), n=n,
                    record=run.levels if run is not None else None)
    said = [found.calibrated] if found.calibrated else []
    if found.record:
        unlike = differences(made, run)
        said.append(found.record + (texts.VERDICT_RECORD_OTHER.format(what="; ".join(unlike))
                                    if unlike else ""))
    lines = "".join(f'<p class="mars-verdict-said mars-verdict-{kind}">{esc(text)}</p>'
                    for kind, text in zip(("chance" if found.calibrated else "record", "record"),
                                          said))
    return (
        f'<div class="mars-verdict mars-verdict-tone-{found.tone}" data-level="{found.level}" '
        f'data-tone="{found.tone}" data-analysis="{esc(analysis)}" tabindex="-1">'
        f'<p class="mars-verdict-line"><strong class="mars-verdict-badge">{esc(found.badge)}'
        f'<span class="mars-sr-only">:</span></strong> {esc(found.sentence)}</p>{lines}'
        f'<details class="mars-verdict-details" data-keep="verdict">'
        f"<summary>{esc(texts.VERDICT_DETAILS)}</summary>"
        f'<p class="mars-small">{esc(texts.VERDICT_HOW)} {esc(texts.VERDICT_NOT_RIGHT)}</p>'
        f"{trust_html(made, calibration, public=public)}</details></div>"
    )


def trust_html(result: Any, calibration: Any = None, *, public: bool = False) -> str:
    """How far to trust ``result`` (an AnalysisResult) beyond the verdict: with a calibration,
    its chance of being right and where that comes from; without one, how to read the
    uncertainty values."""
    if calibration is None:
        return f'<div class="mars-trust mars-small" role="note">{texts.TRUST_WORDS}</div>'
    estimate = calibration_estimate(result, calibration)
    if estimate["chance_correct"] is None:
        # a public page does not show the server's model paths the message names
        reason = (public_reason(estimate) if public else estimate["reason"]).rstrip(".")
        return ('<div class="mars-trust mars-small" role="note">'
                f"{esc(texts.TRUST_NO_CHANCE.format(reason=reason))}</div>")
    percent = round(100 * estimate["chance_correct"])
    auroc = "undefined" if estimate["auroc"] is None else f"{estimate['auroc']:.2f}"
    source = texts.TRUST_SOURCE.format(
        measure=_measure_name(estimate["measure"]),
        scoring=texts.SCORING_NAMES.get(estimate["scoring"], texts.TRUST_NO_SCORING),
        value=f"{estimate['uncertainty']:.3f}".replace("-", "−"),
        data=public_model_name(estimate["data"]),
        n=estimate["n"],
        accuracy=f"{estimate['accuracy']:.0%}",
        judge=_judge(estimate["judge"]),
        auroc=auroc,
    )
    if estimate["auroc"] is None:
        source += texts.TRUST_UNINFORMATIVE
    return (f'<div class="mars-trust"><span class="mars-trust-chance">'
            f"{texts.TRUST_CHANCE.format(percent=percent)}</span> "
            f'<span class="mars-small">{esc(source)}</span></div>')
