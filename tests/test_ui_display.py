"""What the page shows must not mislead: each test here failed on the page as it was before (the
numbers are the page's own, from hand-made results in ui_helpers)."""

from __future__ import annotations

import dataclasses
import html
import math
import re

import pytest
from ui_helpers import make_answer, make_result

from mars_demo import texts
from mars_demo.core.alignment import align_tokens_to_phrases
from mars_demo.models.prompts import PAPER_STOP_STRINGS, stop_strings
from mars_demo.recipes import recipe_of
from mars_demo.result import Pair, Phrase
from mars_demo.ui.draw import captions, plots, render, tables

# --- the uncertainty plot -------------------------------------------------------------------------


def axis_ranges(fig) -> list[list[float]]:
    layout = fig.to_plotly_json()["layout"]
    return [list(layout[k]["range"]) for k in sorted(layout) if k.startswith("xaxis")]


def bars(fig) -> dict[tuple[str, str], tuple[float, float, str]]:
    """(row name, scoring) -> (where the bar starts, its length, its number) of the chart."""
    titles = [a.text for a in fig.layout.annotations]
    out = {}
    for trace in fig.data:
        row = int((trace.xaxis or "x")[1:] or 1) - 1
        out[titles[row], trace.y[0]] = (trace.base[0], trace.x[0], trace.text[0])
    return out


def with_values(confidence, entropy, semantic_entropy):
    result = make_result()
    result.uncertainty = dataclasses.replace(
        result.uncertainty, confidence=Pair(*confidence), entropy=Pair(*entropy),
        semantic_entropy=Pair(*semantic_entropy))
    return result


def test_the_uncertainty_chart_keeps_one_scale_for_every_answer():
    """The y-axis was fitted to each answer's values (0 to 1, -0.2 to 0.45, -1.5 to 0.2): the
    same bar length meant other things on two answers. Each measure now has a fixed scale."""
    # (4 samples here: the paper's semantic entropy goes down to -log 4 = -1.386)
    consistent = with_values((0.19, 0.21), (0.17, 0.18), (-1.35, -1.30))
    doubtful = with_values((2.1, 1.7), (4.5, 4.0), (1.2, 1.1))
    one, other = plots.uncertainty_figure(consistent, "mars"), plots.uncertainty_figure(
        doubtful, "mars")
    b = len(consistent.samples)
    assert axis_ranges(one) == axis_ranges(other) == [
        list(plots.measure_scale(k, b)) for k in texts.UNCERTAINTY_ROWS]
    assert axis_ranges(one)[2][0] == pytest.approx(-math.log(b))
    # the paper's negative semantic entropy is a short bar from its floor, not the longest one
    drawn = bars(one)
    se = drawn[texts.UNCERTAINTY_ROWS["semantic_entropy"][0], "MARS"]
    assert se[0] == pytest.approx(-math.log(b)) and se[1] == pytest.approx(-1.30 + math.log(b))
    assert max(drawn, key=lambda k: drawn[k][1])[0] != texts.UNCERTAINTY_ROWS[
        "semantic_entropy"][0]
    assert se[2] == "−1.300"  # its number as it is
    # a value past the scale's end is drawn to it and marked
    past = bars(other)[texts.UNCERTAINTY_ROWS["entropy"][0], "LN"]
    assert past[1] == plots.SCALE_NATS and past[2] == "4.500" + plots.CLIPPED


def test_the_chart_and_its_caption_name_the_tables_rows_and_a_share_is_not_called_one():
    result = make_result()
    fig = plots.uncertainty_figure(result, "mars")
    names = [label for label, _ in texts.UNCERTAINTY_ROWS.values()]
    assert [a.text for a in fig.layout.annotations] == names
    caption = html.unescape(captions.uncertainty_caption_html())
    assert all(name in caption for name in names)
    assert "Confidence, Entropy and Semantic entropy" not in caption
    table = html.unescape(tables.uncertainty_table_html(result, "mars"))
    assert all(name in table for name in names)
    # the normalized semantic entropy is nats, up to log of the number of meanings: no "share"
    value = result.semantic_entropy_normalized()["mars"]
    assert "as a share" not in table and "in nats" in texts.SE_NORMALIZED_ROW[1]
    assert 0 <= value <= math.log(len(set(result.cluster_ids))) + 1e-12


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
