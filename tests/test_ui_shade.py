"""The answer colored three ways (MARS weight, token probability, token entropy): each token's
intensity from its own number and the legend saying which. The palette's contrast (text on every
shade, 3:1 between the ends) is tests/test_ui_display.py's."""

from __future__ import annotations

import math
import re

import pytest
from ui_helpers import make_result

from mars_demo.result import Phrase, ScoredAnswer, Scores, Token
from mars_demo.ui.draw import render


def answer(entropies=(0.1, 1.4, None)) -> ScoredAnswer:
    text = "It is Mars"
    spans = [(0, 2), (2, 5), (5, 10)]
    logprobs = [math.log(0.9), math.log(0.5), math.log(0.2)]
    tokens = [Token(id=i, text=text[a:b], start=a, end=b, logprob=lp, entropy=h)
              for i, ((a, b), lp, h) in enumerate(zip(spans, logprobs, entropies))]
    return ScoredAnswer(text=text, tokens=tokens,
                        phrases=[Phrase("It is Mars", 0, 10, 0.9, 1.0, [0, 1, 2])],
                        token_importance=[0.1, 0.1, 0.8], mars_weights=[0.2, 0.2, 0.6],
                        scores=Scores(-0.7, -1.0), phrase_of_token=[0, 0, 0])


def shades(html: str) -> list[float]:
    """Each token's share of the palette's strongest color (its CSS ``--w``)."""
    return [float(x) for x in re.findall(r'style="--w: ([\d.]+)"', html)]


def test_each_shade_reads_its_own_number():
    a = answer()
    assert render.token_intensities(a, "mars", "weight") == pytest.approx([1 / 3, 1 / 3, 1])
    assert render.token_intensities(a, "mars", "probability") == pytest.approx([0.1, 0.5, 0.8])
    # entropy over the largest (1.4 nats here); a token without one is not colored
    assert render.token_intensities(a, "mars", "entropy") == pytest.approx([0.1 / 1.4, 1, 0])
    low = answer((0.1, 0.2, 0.3))  # all below one bit: the scale is log 2
    assert render.token_intensities(low, "mars", "entropy") == pytest.approx(
        [x / math.log(2) for x in (0.1, 0.2, 0.3)])
    shown = {s: shades(render.answer_tokens_html(a, "mars", s)) for s in render.SHADES}
    assert shown["probability"] == pytest.approx([0.1, 0.5, 0.8], abs=1e-3)
    assert len({tuple(v) for v in shown.values()}) == 3
    with pytest.raises(ValueError, match="shade must be one of weight, probability, entropy"):
        render.answer_tokens_html(a, "mars", "loudness")


def test_the_legend_says_which():
    from mars_demo import texts
    from mars_demo.ui.draw import explain

    for shade in render.SHADES:
        low, high, words = texts.LEGENDS[shade]
        legend = render.legend_html(shade)
        assert f'data-shade="{shade}"' in legend and low in legend and high in legend
        # what the colors mean, in words, in the answer's fold of details
        assert render.esc(words) in explain.answer_html(make_result(), "mars", shade)
    assert "hesitant" in render.legend_html("entropy")
    assert "improbable" in render.legend_html("probability")
    assert "high weight" in render.legend_html("weight")
