"""TokenSAR, SentenceSAR and SAR (Duan et al. 2024) against hand-computed values."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numeric_checks import finite_or_value_error

from mars_demo.core.sar import (
    relevance_pairs,
    sar,
    sentence_sar,
    token_dropped_answers,
    token_relevance,
    token_sar,
    token_sar_score,
)
from mars_demo.core.scoring import length_normalized

LOG = math.log


def test_token_dropped_answers_remove_exactly_one_token_by_offsets():
    # "a" occurs inside "Canberra" too: only the token's own characters go
    answer = "Canberra is a city"
    spans = [(0, 8), (8, 11), (11, 13), (13, 18)]
    assert token_dropped_answers(answer, spans) == [
        " is a city",
        "Canberra a city",
        "Canberra is city",
        "Canberra is a",
    ]
    # gaps between spans are kept
    assert token_dropped_answers("ab  cd", [(0, 2), (4, 6)]) == ["  cd", "ab  "]


def test_relevance_pairs_put_the_question_in_front_of_both_texts():
    pairs = relevance_pairs("Who wrote Hamlet?", "Shakespeare did", [(0, 11), (11, 15)])
    assert pairs == [
        ("Who wrote Hamlet? Shakespeare did", "Who wrote Hamlet?  did"),
        ("Who wrote Hamlet? Shakespeare did", "Who wrote Hamlet? Shakespeare"),
    ]


def test_token_relevance_normalizes_one_minus_similarity():
    np.testing.assert_allclose(token_relevance([0.9, 0.3]), [0.1 / 0.8, 0.7 / 0.8])
    np.testing.assert_allclose(token_relevance([0.0, 0.0, 0.0]), [1 / 3] * 3)
    np.testing.assert_allclose(token_relevance([0.5, 0.5]), [0.5, 0.5])  # a tie
    np.testing.assert_allclose(token_relevance([1.0, 0.2]), [0.0, 1.0])
    assert token_relevance([1.0]).tolist() == [1.0]  # one token: weight 1 whatever g


def test_token_sar_score_is_relevance_weighted_mean_log_prob():
    logprobs = [LOG(0.9), LOG(0.5), LOG(0.2)]
    sims = [0.95, 0.4, 0.1]
    r = np.array([0.05, 0.6, 0.9]) / 1.55
    assert token_sar_score(logprobs, sims) == pytest.approx(float(r @ np.array(logprobs)))
    # equal relevance: the length-normalized score
    assert token_sar_score(logprobs, [0.3] * 3) == pytest.approx(length_normalized(logprobs))


def test_token_sar_score_at_the_float_limit_stays_finite():
    # these weights sum to a hair over 1 in float64, so sum(w * -MAX) overflowed to -inf
    sims = [0.7222015953741584, 0.5381887415507687, 0.9257216995498906, 0.8076950185803168]
    sims.append(0.002711115168446614)
    maximum = np.finfo(np.float64).max
    assert token_sar_score([-maximum] * 5, sims) == -maximum
    assert token_sar([[-maximum] * 5], [sims]) == maximum


def test_token_sar_is_mean_over_answers():
    answers = [[LOG(0.9), LOG(0.5)], [LOG(0.3)]]
    sims = [[0.8, 0.2], [0.6]]
    first = -(0.2 / 1.0 * LOG(0.9) + 0.8 / 1.0 * LOG(0.5))
    second = -LOG(0.3)
    assert token_sar(answers, sims) == pytest.approx((first + second) / 2)
    assert token_sar(answers[:1], sims[:1]) == pytest.approx(first)


# SentenceSAR by hand: E_S(j) = -log(p_j + sum_{k != j} g[j, k] p_k / t), mean over j.


def test_sentence_sar_generic_three_answers():
    p = [0.5, 0.25, 0.125]
    g = [[0.99, 0.8, 0.05], [0.7, 0.98, 0.1], [0.02, 0.15, 0.97]]
    t = 0.001
    terms = [
        -LOG(0.5 + (0.8 * 0.25 + 0.05 * 0.125) / t),
        -LOG(0.25 + (0.7 * 0.5 + 0.1 * 0.125) / t),
        -LOG(0.125 + (0.02 * 0.5 + 0.15 * 0.25) / t),
    ]
    scores = [LOG(x) for x in p]
    assert sentence_sar(scores, g) == pytest.approx(sum(terms) / 3)
    # another temperature: t = 1
    terms1 = [
        -LOG(0.5 + 0.8 * 0.25 + 0.05 * 0.125),
        -LOG(0.25 + 0.7 * 0.5 + 0.1 * 0.125),
        -LOG(0.125 + 0.02 * 0.5 + 0.15 * 0.25),
    ]
    assert sentence_sar(scores, g, temperature=1.0) == pytest.approx(sum(terms1) / 3)


def test_sentence_sar_one_identical_and_unrelated_answers():
    assert sentence_sar([LOG(0.4)], [[1.0]]) == pytest.approx(-LOG(0.4))
    # three identical answers with p = 0.2 and similarity 1: -log(0.2 + 2 * 0.2 / 0.001)
    assert sentence_sar([LOG(0.2)] * 3, np.ones((3, 3))) == pytest.approx(-LOG(0.2 + 400))
    # no similarity at all: the mean negated score (predictive entropy)
    assert sentence_sar([LOG(0.5), LOG(0.25)], np.eye(2)) == pytest.approx(
        -(LOG(0.5) + LOG(0.25)) / 2
    )


def test_sentence_sar_ignores_the_diagonal():
    scores = [LOG(0.5), LOG(0.25)]
    base = sentence_sar(scores, [[1.0, 0.3], [0.6, 1.0]])
    assert sentence_sar(scores, [[math.nan, 0.3], [0.6, 7.0]]) == base


def test_sentence_sar_survives_scores_whose_probabilities_underflow():
    # exp(-800) is 0 in float64; in log space the terms stay exact
    expected = -(-800 + LOG(1 + 0.5 / 0.001))
    assert sentence_sar([-800.0, -800.0], [[1, 0.5], [0.5, 1]]) == pytest.approx(expected)


def test_sar_is_sentence_sar_over_token_sar_scores():
    logprobs = [[LOG(0.9), LOG(0.5), LOG(0.2)], [LOG(0.7), LOG(0.6)], [LOG(0.3)]]
    sims = [[0.95, 0.4, 0.1], [0.8, 0.6], [0.5]]
    g = [[1, 0.8, 0.05], [0.7, 1, 0.1], [0.02, 0.15, 1]]
    r0 = np.array([0.05, 0.6, 0.9]) / 1.55
    r1 = np.array([0.2, 0.4]) / 0.6
    p = [
        math.exp(float(r0 @ np.array(logprobs[0]))),
        math.exp(float(r1 @ np.array(logprobs[1]))),
        0.3,
    ]
    t = 0.001
    terms = [
        -LOG(p[0] + (0.8 * p[1] + 0.05 * p[2]) / t),
        -LOG(p[1] + (0.7 * p[0] + 0.1 * p[2]) / t),
        -LOG(p[2] + (0.02 * p[0] + 0.15 * p[1]) / t),
    ]
    assert sar(logprobs, sims, g) == pytest.approx(sum(terms) / 3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: token_relevance([]), "token_similarities is empty"),
        (lambda: token_relevance([0.5, 1.2]), "token_similarities[1] = 1.2 is outside [0, 1]"),
        (lambda: token_relevance([-0.1]), "token_similarities[0] = -0.1 is outside [0, 1]"),
        (lambda: token_relevance([1.0, 1.0]), "are all 1"),
        (lambda: token_sar_score([-1.0, -2.0], [0.5]), "token_logprobs has 2 entries"),
        (lambda: token_sar_score([0.5], [0.5]), "token_logprobs[0] = 0.5 is positive"),
        (lambda: token_sar([[-1.0]], [[0.5], [0.5]]), "sample_token_logprobs has 1 entries"),
        (lambda: token_sar([], []), "sample_token_logprobs is empty"),
        (lambda: token_sar("ab", "ab"), "one entry per answer"),
        (lambda: token_sar(3, 3), "one entry per answer"),
        (lambda: token_sar([[-1.0], [-1.0, -2.0]], [[0.5], [1.0, 1.0]]), "answer 1: token_sim"),
        (lambda: sentence_sar([-1.0, -2.0], [[1.0]]), "similarity must be 2 x 2"),
        (lambda: sentence_sar([-1.0, -2.0], [[1, -0.5], [0, 1]]), "similarity[0, 1] = -0.5"),
        (lambda: sentence_sar([-1.0, -2.0], [[1, math.inf], [0, 1]]), "similarity[0, 1] = inf"),
        (lambda: sentence_sar([-1.0], [[1]], temperature=0), "temperature must be"),
        (lambda: sentence_sar([], np.zeros((0, 0))), "sample_scores is empty"),
        (lambda: sentence_sar([-1.0, -2.0], "ab"), "square matrix of numbers, got 'ab'"),
        (lambda: token_dropped_answers("abc", []), "token_spans is empty"),
        (lambda: token_dropped_answers("abc", [(0, 2), (1, 3)]), "must not overlap"),
        (lambda: token_dropped_answers("abc", [(0, 4)]), "out of range"),
        (lambda: token_dropped_answers(None, [(0, 1)]), "answer must be a string"),
        (lambda: relevance_pairs(3, "abc", [(0, 1)]), "question must be a string"),
    ],
)
def test_bad_input_raises_value_error_naming_the_value(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


@st.composite
def sampled_answers(draw):
    k = draw(st.integers(1, 5))
    logprobs = [draw(st.lists(st.floats(-30, 0), min_size=1, max_size=6)) for _ in range(k)]
    sims = [
        draw(st.lists(st.floats(0, 0.99), min_size=len(lp), max_size=len(lp))) for lp in logprobs
    ]
    g = np.array(draw(st.lists(st.floats(0, 1), min_size=k * k, max_size=k * k))).reshape(k, k)
    return logprobs, sims, g


@settings(max_examples=200, deadline=None)
@given(sampled_answers(), st.randoms(use_true_random=False))
def test_permuting_the_answers_changes_no_value(answers, random):
    logprobs, sims, g = answers
    order = list(range(len(logprobs)))
    random.shuffle(order)
    permuted = ([logprobs[i] for i in order], [sims[i] for i in order], g[order][:, order])
    assert sar(*permuted) == pytest.approx(sar(logprobs, sims, g), abs=1e-9)
    assert token_sar(*permuted[:2]) == pytest.approx(token_sar(logprobs, sims), abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(sampled_answers())
def test_bounds(answers):
    logprobs, sims, g = answers
    for lp, s in zip(logprobs, sims):
        weights = token_relevance(s)
        assert weights.min() >= 0 and weights.sum() == pytest.approx(1.0)
        assert min(lp) - 1e-9 <= token_sar_score(lp, s) <= max(lp) + 1e-9
    # more similarity can only lower SentenceSAR; none gives the mean negated score
    scores = [token_sar_score(lp, s) for lp, s in zip(logprobs, sims)]
    k = len(scores)
    assert sentence_sar(scores, g) <= sentence_sar(scores, np.zeros((k, k))) + 1e-9
    assert sentence_sar(scores, np.zeros((k, k))) == pytest.approx(-np.mean(scores))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=4),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=16),
    st.floats(allow_nan=True, allow_infinity=True),
)
def test_any_numbers_give_finite_results_or_value_error(scores, matrix, temperature):
    k = len(scores)
    shaped = np.array(matrix).reshape(k, k) if len(matrix) == k * k else matrix
    finite_or_value_error(lambda: sentence_sar(scores, shaped, temperature))
    finite_or_value_error(lambda: token_sar([scores], [matrix[: len(scores)]]))
