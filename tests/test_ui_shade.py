"""The answer colored three ways (MARS weight, token probability, token entropy): each token's
intensity from its own number, the legend saying which, and the lightest and darkest colors
3:1 apart in contrast."""

from __future__ import annotations

import math
import re

import pytest

from mars_demo.result import Phrase, ScoredAnswer, Scores, Token
from mars_demo.ui import render


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


def colors(html: str) -> list[str]:
    return re.findall(r"background-color: (rgba\([^)]*\))", html)


def test_each_shade_reads_its_own_number():
    a = answer()
    assert render.token_intensities(a, "mars", "weight") == pytest.approx([1 / 3, 1 / 3, 1])
    assert render.token_intensities(a, "mars", "probability") == pytest.approx([0.1, 0.5, 0.8])
    # entropy over the largest (1.4 nats here); a token without one is not colored
    assert render.token_intensities(a, "mars", "entropy") == pytest.approx([0.1 / 1.4, 1, 0])
    low = answer((0.1, 0.2, 0.3))  # all below one bit: the scale is log 2
    assert render.token_intensities(low, "mars", "entropy") == pytest.approx(
        [x / math.log(2) for x in (0.1, 0.2, 0.3)])
    shown = {s: colors(render.answer_tokens_html(a, "mars", s)) for s in render.SHADES}
    assert shown["probability"] == [render.token_color(x) for x in (0.1, 0.5, 0.8)]
    assert len({tuple(v) for v in shown.values()}) == 3
    with pytest.raises(ValueError, match="shade must be one of weight, probability, entropy"):
        render.answer_tokens_html(a, "mars", "loudness")


def test_the_legend_says_which():
    assert "hesitated" in render.legend_html("entropy")
    assert "improbable" in render.legend_html("probability")
    assert "weight in the active score" in render.legend_html("weight")


def luminance(css: str) -> float:
    r, g, b, a = (float(x) for x in re.findall(r"[\d.]+", css))
    def lin(c: float) -> float:
        c = (255 - a * (255 - c)) / 255  # the color over the white page
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


def test_the_lightest_and_darkest_shades_are_3_to_1_apart_and_text_stays_readable():
    light, dark = luminance(render.token_color(0.0)), luminance(render.token_color(1.0))
    assert (light + 0.05) / (dark + 0.05) >= 3.0
    assert (dark + 0.05) / 0.05 >= 4.5  # black text on the darkest token
