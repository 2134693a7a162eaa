"""The page answers "should I trust this answer, and why does MARS differ?": the token table, the
verdict in words, the greedy answer's cluster, the prompt and settings, the formulas, and the
normalized semantic entropy beside the paper's. Hand-made results (ui_helpers); no model, no
browser. Numbers are checked against the answers' own fields, not against the page's code."""

from __future__ import annotations

import dataclasses
import html
import math
import re

from ui_helpers import FakeEngine, make_answer, make_result

from mars_demo import texts
from mars_demo.result import Pair
from mars_demo.ui import build_demo
from mars_demo.ui.draw import explain, tables
from mars_demo.ui.page.controller import ASK_OUTPUTS, SCORING_VIEW_OUTPUTS, Controller
from mars_demo.ui.work.host import EngineHost

QUESTION = "Which planet is known as the Red Planet?"
TOL = 6e-4  # the page shows 3 decimals


def cells(table: str, row_attr: str) -> list[dict[str, str]]:
    """{data-col: text} of each row whose <tr> has ``row_attr``."""
    rows = re.findall(rf"<tr{row_attr}>(.*?)</tr>", table)
    out = []
    for row in rows:
        found = re.findall(r'<td data-col="(\w+)"[^>]*>(.*?)</td>', row)
        out.append({k: html.unescape(re.sub(r"<[^>]+>", "", v)) for k, v in found})
    return out


def number(text: str) -> float:
    return float(text.replace("−", "-"))


def with_greedy(greedy):
    """make_result with ``greedy``: its uncertainty values follow from the answers."""
    return make_result(greedy=greedy)


# --- token by token ------------------------------------------------------------------------------


def test_token_table_has_every_tokens_logprob_importance_and_both_weights():
    result = make_result()
    answer = result.greedy
    table = tables.token_table_html(answer, "mars")
    rows = cells(table, r' data-token="\d+"')
    assert len(rows) == len(answer.tokens) == 4
    n = len(answer.tokens)
    for i, (row, token) in enumerate(zip(rows, answer.tokens)):
        assert row["token"] == repr(answer.text[token.start:token.end])
        assert math.isclose(number(row["logprob"]), token.logprob, abs_tol=TOL)
        assert math.isclose(number(row["prob"]), math.exp(token.logprob), abs_tol=TOL)
        assert math.isclose(number(row["importance"]), answer.token_importance[i], abs_tol=TOL)
        assert math.isclose(number(row["uniform"]), 1 / n, abs_tol=TOL)
        assert math.isclose(number(row["weight"]), answer.mars_weights[i], abs_tol=TOL)
        assert math.isclose(number(row["length_normalized"]), token.logprob / n, abs_tol=TOL)
        assert math.isclose(number(row["mars"]), answer.mars_weights[i] * token.logprob,
                            abs_tol=TOL)
    total = cells(table, ' class="mars-total-row"')[0]
    # the sums are the answer's two scores: the difference can be read off the table
    assert math.isclose(number(total["length_normalized"]), answer.scores.length_normalized,
                        abs_tol=TOL)
    assert math.isclose(number(total["mars"]), answer.scores.mars, abs_tol=TOL)


def test_token_table_and_phrase_table_agree_on_each_phrase_weight():
    """The importances u of a phrase's tokens add up to the phrase weight U of the phrase
    table's row with the same number."""
    answer = make_result().samples[1]  # three phrases, one of three tokens
    tokens = cells(tables.token_table_html(answer, "mars"), r' data-token="\d+"')
    phrases = cells(tables.phrase_table_html(answer, "mars"), r' data-phrase="\d+"')
    assert len(phrases) == 3
    for row in phrases:
        members = [t for t in tokens if t["phrase_number"] == row["index"]]
        assert members
        u_sum = sum(number(t["importance"]) for t in members)
        weight = number(row["weight"].split()[0])
        assert math.isclose(u_sum, weight, abs_tol=2e-3), (row, members)
        share = sum(number(t["mars"]) for t in members) / answer.scores.mars
        assert math.isclose(share * 100, number(row["mars"].rstrip("%")), abs_tol=0.2)


# --- why MARS differs, in words ---------------------------------------------------------------------


def test_why_mars_differs_says_it_trusts_less_by_how_much_and_which_token():
    result = make_result()  # ' Mars' has p = 0.41 and most of the importance
    ln = -result.greedy.scores.length_normalized
    mars = -result.greedy.scores.mars
    assert mars > ln
    text = explain.why_text(result)
    assert text.startswith("MARS finds this answer less trustworthy")
    assert f"{mars:.3f} vs {ln:.3f} (+{mars - ln:.3f} nats)" in text
    mars_token = next(i for i, t in enumerate(result.greedy.tokens) if t.text == " Mars")
    u = result.greedy.token_importance[mars_token]
    assert "' Mars' (probability 0.41)" in text and f"{u:.1%} of the importance" in text
    assert 0.47 < u < 0.49  # most of the importance
    assert "1/L = 25.0%" in text and "counts it more" in text
    assert html.escape(text) in explain.answer_html(result, "mars")  # under the answer's scores


def test_why_mars_differs_says_it_trusts_more_when_the_important_token_is_probable():
    greedy = make_answer(["Um", " it", " is", " Mars"], [-2.0, -1.5, -0.3, -0.01],
                         [([0, 1, 2], 0.05), ([3], 0.95)])
    result = with_greedy(greedy)
    ln, mars = -greedy.scores.length_normalized, -greedy.scores.mars
    assert mars < ln
    text = explain.why_text(result)
    assert text.startswith("MARS finds this answer more trustworthy")
    assert f"(−{ln - mars:.3f} nats)" in text
    # the improbable filler 'Um' loses weight: it moves the score most
    assert "'Um' (probability 0.14)" in text and "counts it less" in text


def test_why_mars_differs_says_when_both_scores_agree():
    greedy = make_answer(["Mars"], [-0.2], [([0], 1.0)])  # one token: w = 1 = 1/L
    assert explain.why_text(with_greedy(greedy)).startswith(
        "MARS and length-normalized scoring agree")


# --- the greedy answer's cluster ------------------------------------------------------------------


def test_the_greedy_answer_is_placed_by_the_samples_with_its_text():
    greedy = make_answer(["Mars", "."], [-0.3, -0.01], [([0, 1], 1.0)])  # sample #1's text
    result = with_greedy(greedy)
    text = explain.greedy_cluster_text(result, "mars")
    assert "sampled answer #1 has the same words" in text and "cluster 1" in text
    # cluster 1 holds samples 1, 2, 4: its share of the MARS mass, computed here from the scores
    scores = [s.scores.mars for s in result.samples]
    mass = [math.exp(s) for s in scores]
    share = (mass[0] + mass[1] + mass[3]) / sum(mass)
    assert f"({share:.0%} of the MARS probability mass" in text


def test_a_greedy_answer_no_sample_repeats_is_in_no_cluster():
    text = explain.greedy_cluster_text(make_result(), "mars")  # "It is Mars." is no sample
    assert text == texts.GREEDY_CLUSTER_NONE and "no cluster" in text


def test_the_cluster_line_places_the_answer_as_the_verdict_does():
    """Case and end punctuation aside, as mars_demo.verdict.same_words: "mars" is sample #1's
    "Mars." and both the line and the verdict say so."""
    from mars_demo.verdict import evidence

    result = with_greedy(make_answer(["mars"], [-0.3], [([0], 1.0)]))
    assert "sampled answer #1 has the same words" in explain.greedy_cluster_text(result, "mars")
    assert evidence(result).agreeing == 3  # cluster 1: samples 1, 2 and 4


# --- prompt, settings, formulas -------------------------------------------------------------------


def test_the_prompt_and_the_settings_behind_the_result_are_shown_as_text():
    result = make_result(question='<img src=x onerror="alert(1)"> Which planet?')
    result.settings.update(llm="/srv/secret/models/tiny-llm", nli="microsoft/deberta-base-mnli",
                           logprob_source="generation", recipe="paper-code", prompt="paper")
    shown = explain.context_html(result)
    assert "<img" not in shown and html.escape(result.prompt) in shown
    settings = dict(re.findall(r'<dd data-setting="(\w+)">(.*?)</dd>', shown))
    assert settings["llm"] == "tiny-llm" and "/srv" not in shown  # no server path
    assert settings["nli"] == "microsoft/deberta-base-mnli"
    for key, expected in (("recipe", "paper-code"), ("prompt", "paper"), ("samples", "5"),
                          ("temperature", "0.5"), ("normalization", "sum"),
                          ("distribution", "equal"), ("cluster_rule", "strict"),
                          ("logprob_source", "generation")):
        assert settings[key] == expected, key


def test_the_formulas_are_those_of_the_docs():
    shown = html.unescape(explain.formulas_html())
    page = open("docs/formulas.md", encoding="utf-8").read()
    for formula in ("LN = (1/L) Σ_l log p_l", "w_l = 1/(2L) + u_l/2", "MARS = Σ_l w_l log p_l",
                    "−(1/B) Σ_b score(sample_b)"):
        assert formula in shown and formula in page
    assert "Semantic entropy" in shown and "normalized" in shown


# --- semantic entropy: negative, and the normalized form ---------------------------------------------


def test_a_negative_semantic_entropy_is_explained_and_the_normalized_one_is_beside_it():
    result = make_result()
    same = make_answer(["Mars"], [-0.05], [([0], 1.0)])
    result.samples = [same] * 3 + [make_answer(["Venus"], [-1.0], [([0], 1.0)])]
    result.cluster_ids = [0, 0, 0, 1]
    # paper eq. (8), by hand: clusters log(3 e^-0.05) and -1.0
    se = -((math.log(3) - 0.05) + (-1.0)) / 2
    result.uncertainty = dataclasses.replace(result.uncertainty, semantic_entropy=Pair(se, se))
    assert se < 0
    table = tables.uncertainty_table_html(result, "mars")
    p = [3 * math.exp(-0.05), math.exp(-1.0)]
    p = [x / sum(p) for x in p]
    normalized = -sum(x * math.log(x) for x in p)
    row = cells(table, ' data-measure="semantic_entropy_normalized"')[0]
    assert number(row["mars"]) == round(normalized, 3) == number(row["length_normalized"])
    assert 0 <= normalized <= math.log(2)
    note = re.search(r'<p class="mars-small mars-se-note">(.*?)</p>', table).group(1)
    assert "not a true entropy" in note and "not normalized" in note
    assert f"{se:.3f}".replace("-", "−") in html.unescape(note)


def test_no_note_when_semantic_entropy_is_not_negative():
    table = tables.uncertainty_table_html(make_result(), "mars")
    assert "mars-se-note" not in table
    assert 'data-measure="semantic_entropy_normalized"' in table


# --- on the page ----------------------------------------------------------------------------------


def test_ask_and_the_scoring_toggle_fill_the_token_table_and_the_context():
    controller = Controller(EngineHost(FakeEngine()))
    final = list(controller.ask(QUESTION, "mars", 5, 0.5, 64, 0, "auto", "model", "sum",
                                "equal", "strict"))[-1]
    assert {"tokens", "context"} <= set(ASK_OUTPUTS) and "tokens" in SCORING_VIEW_OUTPUTS
    result = final["result"]
    assert final["tokens"].count("data-token=") == len(result.greedy.tokens)
    assert "Question: Which planet" in final["context"]
    flipped = controller.show_scoring(result, "length_normalized")
    assert 'data-col="length_normalized" class="mars-active"' in flipped["tokens"]
    assert 'data-col="mars" class="mars-active"' in final["tokens"]


def test_the_page_has_the_three_accordions_in_the_results():
    demo = build_demo(FakeEngine(), load=False)
    config = demo.get_config_file()
    ids = {c.get("props", {}).get("elem_id") for c in config["components"]}
    assert {"mars-tokens-box", "mars-tokens", "mars-context-box", "mars-context",
            "mars-formulas-box", "mars-formulas"} <= ids
    formulas = next(c for c in config["components"]
                    if c.get("props", {}).get("elem_id") == "mars-formulas")
    assert "MARS = Σ_l w_l log p_l" in html.unescape(formulas["props"]["value"])
