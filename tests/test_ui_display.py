"""What the page shows must not mislead: each test here failed on the page as it was before (the
numbers are the page's own, from hand-made results in ui_helpers)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ui_helpers import make_answer, make_result

from mars_demo import texts
from mars_demo.core.alignment import align_tokens_to_phrases
from mars_demo.models.prompts import PAPER_STOP_STRINGS, stop_strings
from mars_demo.recipes import recipe_of
from mars_demo.result import Pair, Phrase
from mars_demo.ui.draw import plots, render, tables

# --- the uncertainty plot -------------------------------------------------------------------------


def axis_ranges(fig) -> list[list[float]]:
    layout = fig.to_plotly_json()["layout"]
    return [v["range"] for k, v in layout.items() if k.startswith("yaxis") and "range" in v]


def test_the_uncertainty_plot_draws_every_value_on_one_axis_from_zero():
    """Each measure had its own axis fitted to its two values, so 0.160 against 0.157 was drawn
    as a steep drop; now the six values share one axis that holds 0, and a difference of 0.003
    takes about as little of it as it should."""
    result = make_result()
    result.uncertainty = dataclasses.replace(
        result.uncertainty,
        confidence=Pair(0.160, 0.157),
        entropy=Pair(3.0, 3.4),
        semantic_entropy=Pair(-0.20, -0.18),
    )
    fig = plots.uncertainty_figure(result, "mars")
    ranges = axis_ranges(fig)
    assert len(ranges) == 1, ranges  # one axis
    (lo, hi), = ranges
    values = [v for trace in fig.data for v in trace.y]
    assert len(values) == 6 and lo <= min(values) and max(values) <= hi and lo <= 0 <= hi
    assert (0.160 - 0.157) / (hi - lo) < 0.01
    shown = [t for trace in fig.data for t in (trace.text or ())]
    assert "0.160" in shown and "0.157" in shown and "−0.180" in shown  # the numbers are printed
    assert fig.layout.barmode == "group"


def test_the_axis_holds_zero_and_room_for_the_numbers():
    assert plots.value_range([0.0, 0.0]) == [0.0, 0.2]
    assert plots.value_range([2.1, 2.05, 0.5]) == [0.0, 2.52]
    lo, hi = plots.value_range([-1.5, 0.1])
    assert lo < -1.5 and 0.1 < hi


# --- warnings and tables count alike -----------------------------------------------------------


def test_a_warning_names_a_phrase_by_its_row_number_in_the_phrase_table():
    core = align_tokens_to_phrases("It is Mars", [(0, 10)], [(0, 2), (3, 10)]).warnings
    assert core and core[0].startswith("Phrase 1 'It'")  # the engine counts from 1, for people
    shown = render.warnings_html([f"greedy: {core[0]}"])
    assert "Phrase 1 &#x27;It&#x27; received no token" in shown
    answer = make_answer(["It", " is", " Mars"], [-0.1, -0.2, -0.3], [([0], 0.5), ([1, 2], 0.5)])
    table = tables.phrase_table_html(answer, "mars")
    row = re.search(r'<tr data-phrase="0">(.*?)</tr>', table).group(1)
    assert '<td data-col="index" data-label="#">1</td>' in row and ">It<" in row

    nearest = align_tokens_to_phrases("It is Mars xx", [(0, 5), (6, 10), (11, 13)],
                                      [(0, 5), (6, 10)]).warnings[0]
    assert nearest == (
        "Token 3 'xx' lies outside every phrase; it was attached to the nearest phrase, 2 'Mars'."
    )


# --- the NLI plot ----------------------------------------------------------------------------------


def test_the_nli_diagonal_is_blank_and_says_what_judged_it():
    result = make_result()
    assert all(result.nli.labels[i][i] == "entailment" for i in range(4))  # the model's verdict
    heatmap = plots.nli_figure(result).data[0]
    for i in range(4):
        assert heatmap.z[i][i] is None  # no colored cell: the clustering does not read it
        assert heatmap.text[i][i] == ""
        assert "the clustering does not read it" in heatmap.customdata[i][i]
        assert "entailment" in heatmap.customdata[i][i] and "rule" not in heatmap.customdata[i][i]
    assert heatmap.z[0][1] == 2 and heatmap.z[0][2] == 0  # the verdicts the model gave stay
    result.nli.by_rule = [[0, 0]]
    hover = plots.nli_figure(result).data[0].customdata
    assert "decided by the rule" in hover[0][0] and "rule" not in hover[1][1]


def test_identical_answers_say_when_the_rule_decided_them():
    result = make_result()
    result.nli.answers[3] = result.nli.answers[0]
    hover = plots.nli_figure(result).data[0].customdata
    assert "rule" not in hover[0][3]  # the model judged them: its verdict, nothing more
    result.nli.by_rule = [[0, 3], [3, 0]]
    hover = plots.nli_figure(result).data[0].customdata
    assert "decided by the rule" in hover[0][3] and "rule" not in hover[0][1]


# --- the clusters plot -------------------------------------------------------------------------


def test_cluster_bars_are_labelled_in_percent_like_their_axis():
    result = make_result()
    fig = plots.clusters_figure(result, "mars")
    assert fig.layout.yaxis.tickformat == ".0%"
    (active,) = [trace for trace in fig.data if trace.text is not None]
    for value, label in zip(active.y, active.text):
        assert label.endswith("%"), label
        assert abs(float(label.rstrip("%")) - value * 100) < 0.6, (label, value)
    assert "%{y:.1%}" in active.hovertemplate


# --- help texts ------------------------------------------------------------------------------------


def test_the_max_tokens_help_says_only_the_papers_prompt_stops_at_a_period():
    assert stop_strings("paper", recipe_of("default")) == PAPER_STOP_STRINGS == (".", "\n")
    assert stop_strings("chat", recipe_of("default")) == ()  # the chat template has none
    info = texts.MAX_NEW_TOKENS_INFO
    assert "With the paper's prompt, answers also stop at the first '.'" in info
    assert "chat template" in info


def test_the_color_legend_holds_in_the_dark_theme_too():
    """Tokens are one hue whose strength follows the weight: on a dark page the heaviest token
    is the brightest, so the legend must not say "darker"."""
    assert "darker" not in texts.LEGEND and "stronger the color" in texts.LEGEND
    shades = [float(render.token_shade(x / 4)) for x in range(5)]
    assert shades == sorted(shades) and (shades[0], shades[-1]) == (0.0, 1.0)
    assert render.token_shade(-1) == "0.000" and render.token_shade(7) == "1.000"


def _luminance(color: str) -> float:
    r, g, b = (int(color[k:k + 2], 16) / 255 for k in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_token_shading_is_readable_and_its_ends_are_told_apart(theme):
    """WCAG 1.4.3: the token's text keeps 4.5:1 on every shade (the ends are the extremes of
    a mix in sRGB); WCAG 1.4.11: the lightest and the heaviest weight differ by 3:1."""
    colors = render.TOKEN_PALETTE[theme]
    assert _contrast(colors["text"], colors["low"]) >= 4.5
    assert _contrast(colors["text"], colors["high"]) >= 4.5
    assert _contrast(colors["low"], colors["high"]) >= 3.0
    css = render.palette_css()
    assert all(f"--mars-tok-{name}: {value};" in css for name, value in colors.items())
    # the check can fail: the old shading (indigo at 6% and 76% over white) kept only 2.8:1
    assert _contrast("#f6f6fe", "#888bf4") < 3.0


# --- phrase weights near 0 say why -------------------------------------------------------------


def softmax_answer():
    """"It is" (importance 0.2) and "Mars" (1.0), weights from softmax with T = 0.1."""
    answer = make_answer(["It", " is", " Mars"], [-0.1, -0.2, -0.3], [([0, 1], 0.2), ([2], 1.0)])
    import math

    raw = [math.exp(0.2 / 0.1), math.exp(1.0 / 0.1)]
    weights = [w / sum(raw) for w in raw]
    answer.phrases = [dataclasses.replace(p, weight=w) for p, w in zip(answer.phrases, weights)]
    return answer


def test_a_softmax_weight_near_zero_is_shown_with_its_cause():
    answer = softmax_answer()
    assert answer.phrases[0].weight < 0.0005  # 3.4e-4: shown as 0.000 before
    table = tables.phrase_table_html(answer, "mars", {"normalization": "softmax",
                                                      "softmax_temperature": 0.1})
    row = re.search(r'<tr data-phrase="0">(.*?)</tr>', table).group(1)
    assert "0.000" not in row and "3.4e-04" in row
    assert "softmax: e^((0.200 − 1.000) / 0.1) = 3.4e-04 of the top phrase" in row
    assert "softmax(importance / T) with T = 0.1" in table
    assert "divides the weight by e^(0.1/T) = 2.72" in table


def test_a_phrase_without_tokens_says_its_weight_went_to_the_others():
    answer = make_answer(["It", " is", " Mars"], [-0.1, -0.2, -0.3], [([0, 1, 2], 1.0)])
    answer.phrases.insert(0, Phrase(text="It", start=0, end=2, score=0.377, weight=0.0, tokens=[]))
    answer.phrase_of_token = [1, 1, 1]
    table = tables.phrase_table_html(answer, "mars", {"normalization": "sum"})
    row = re.search(r'<tr data-phrase="0">(.*?)</tr>', table).group(1)
    assert "0.377" in row and "no token" in row and "went to the others" in row
    assert "the sum of the importances of the phrases that hold tokens (1.000)" in table


def test_the_controller_passes_the_results_settings_to_the_phrase_table():
    from ui_helpers import FakeEngine

    from mars_demo.ui.page.controller import Controller
    from mars_demo.ui.work.host import EngineHost

    result = make_result()
    result.greedy = softmax_answer()
    result.settings = {**result.settings, "normalization": "softmax", "softmax_temperature": 0.1}
    shown = Controller(EngineHost(FakeEngine())).show_scoring(result, "mars")["phrases"]
    assert "softmax(importance / T) with T = 0.1" in shown


def test_a_sum_softmax_weight_says_its_formula():
    answer = softmax_answer()
    table = tables.phrase_table_html(answer, "mars", {"normalization": "sum-softmax",
                                                      "softmax_temperature": 0.01})
    assert "softmax((importance / 1.200) / T) with T = 0.01" in table
    row = re.search(r'<tr data-phrase="0">(.*?)</tr>', table).group(1)
    assert "sum-softmax: e^((0.200 − 1.000) / 1.200 / 0.01)" in row
