"""Length-normalized scoring, MARS and token importance against hand-computed values."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mars_demo.core.scoring import (
    MODES,
    NORMALIZATIONS,
    bem_token_importance,
    length_normalized,
    mars,
    mars_weights,
    phrase_weights,
    token_importance,
)

LOG = math.log


# --- length-normalized scoring and MARS --------------------------------------------------


def test_length_normalized_is_mean_log_prob():
    # (log 0.5 + log 0.25) / 2 = log(0.125) / 2
    assert length_normalized([LOG(0.5), LOG(0.25)]) == pytest.approx(LOG(0.125) / 2)


def test_length_normalized_returns_python_float():
    assert type(length_normalized(np.array([LOG(0.5)]))) is float


def test_mars_weights_hand_computed():
    # L = 2: w = 1/4 + u/2
    weights = mars_weights([0.2, 0.8])
    assert weights.dtype == np.float64
    assert weights == pytest.approx([0.25 + 0.1, 0.25 + 0.4])


def test_mars_hand_computed():
    # w = [0.35, 0.65]: 0.35 log 0.5 + 0.65 log 0.25 = (0.35 + 2 * 0.65) log 0.5
    assert mars([LOG(0.5), LOG(0.25)], [0.2, 0.8]) == pytest.approx(1.65 * LOG(0.5))


def test_mars_weights_all_importance_on_last_token():
    # "It is Mars" with all importance on "Mars": w = [1/6, 1/6, 1/6 + 1/2]
    assert mars_weights([0.0, 0.0, 1.0]) == pytest.approx([1 / 6, 1 / 6, 2 / 3])
    logprobs = [LOG(0.9), LOG(0.9), LOG(0.2)]
    expected = (1 / 6) * 2 * LOG(0.9) + (2 / 3) * LOG(0.2)
    assert mars(logprobs, [0.0, 0.0, 1.0]) == pytest.approx(expected)
    assert mars(logprobs, [0.0, 0.0, 1.0]) < length_normalized(logprobs)


def test_paper_table5_values_as_printed_do_not_sum_to_one():
    # Table 5 prints "It 0.017, is 0.017, Mars 0.956": rounded, they sum to 0.990.
    with pytest.raises(ValueError, match=r"sums to 0\.99"):
        mars_weights([0.017, 0.017, 0.956])


def test_paper_table5_weights_after_sum_normalization():
    # Phrase scores [0.017, 0.017, 0.956] (sum 0.99) sum-normalize to u = s / 0.99,
    # so w = 1/6 + u/2 = [1/6 + 0.0085/0.99, 1/6 + 0.0085/0.99, 1/6 + 0.478/0.99].
    u = token_importance([0, 1, 2], [0.017, 0.017, 0.956], [LOG(0.9)] * 3)
    assert u == pytest.approx([0.017 / 0.99, 0.017 / 0.99, 0.956 / 0.99])
    assert mars_weights(u) == pytest.approx(
        [1 / 6 + 0.0085 / 0.99, 1 / 6 + 0.0085 / 0.99, 1 / 6 + 0.478 / 0.99]
    )
    # ... which matches the table's rounded u = [0.017, 0.017, 0.956] to its rounding.
    table = [1 / 6 + 0.0085, 1 / 6 + 0.0085, 1 / 6 + 0.478]
    assert mars_weights(u) == pytest.approx(table, abs=5e-3)


def test_log_probs_slightly_above_zero_count_as_zero():
    assert length_normalized([1e-7, LOG(0.5)]) == LOG(0.5) / 2
    assert mars([1e-7, LOG(0.5)], [0.5, 0.5]) == LOG(0.5) / 2


# --- phrase weights and token importance -------------------------------------------------

LOGP = [LOG(0.5), LOG(0.9), LOG(0.8)]  # tokens a, b (phrase 0) and c (phrase 1)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("equal", [0.125, 0.125, 0.75]),  # U = [0.25, 0.75]; phrase 0 split over 2 tokens
        ("max", [0.25, 0.0, 0.75]),  # phrase 0's weight to a, its least probable token
        ("min", [0.0, 0.25, 0.75]),  # phrase 0's weight to b, its most probable token
    ],
)
def test_token_importance_distribution_modes(mode, expected):
    u = token_importance([0, 0, 1], [1.0, 3.0], LOGP, mode=mode)
    assert u.dtype == np.float64
    assert u == pytest.approx(expected)


@pytest.mark.parametrize(
    ("mode", "expected"), [("max", [0.5, 0, 0.5, 0, 0]), ("min", [0.5, 0.5, 0, 0, 0])]
)
def test_token_importance_ties_go_to_earliest_token(mode, expected):
    # Phrase 1 = tokens 1..4; lowest log p tied at tokens 2 and 3, highest tied at 1 and 4.
    logprobs = [LOG(0.5), LOG(0.9), LOG(0.4), LOG(0.4), LOG(0.9)]
    u = token_importance([0, 1, 1, 1, 1], [1.0, 1.0], logprobs, mode=mode)
    assert u == pytest.approx(expected)


def test_token_importance_phrase_tokens_need_not_be_contiguous():
    # Phrase 1 holds tokens 0 and 2: each gets 0.5 / 2.
    u = token_importance([1, 0, 1], [1.0, 1.0], LOGP)
    assert u == pytest.approx([0.25, 0.5, 0.25])


def test_phrase_weights_sum_normalization():
    assert phrase_weights([1.0, 3.0]) == pytest.approx([0.25, 0.75])


def test_phrase_weights_all_zero_scores_are_uniform():
    assert phrase_weights([0, 0, 0, 0]) == pytest.approx([0.25] * 4)
    # Uniform U = [0.5, 0.5], then split equally inside phrase 0.
    assert token_importance([0, 0, 1], [0.0, 0.0], LOGP) == pytest.approx([0.25, 0.25, 0.5])


def test_phrase_weights_softmax_with_temperature():
    # s / T = [2, 1]: softmax = [e^2, e] / (e^2 + e) = [e / (e + 1), 1 / (e + 1)]
    e = math.e
    weights = phrase_weights([0.2, 0.1], "softmax", temperature=0.1)
    assert weights == pytest.approx([e / (e + 1), 1 / (e + 1)])
    u = token_importance([0, 0, 1], [0.2, 0.1], LOGP, normalization="softmax", temperature=0.1)
    assert u == pytest.approx([e / (e + 1) / 2, e / (e + 1) / 2, 1 / (e + 1)])


def test_phrase_weights_softmax_is_numerically_stable():
    # s / T = [1000, 0] would overflow a naive exp.
    weights = phrase_weights([1.0, 0.0], "softmax", temperature=0.001)
    assert weights.tolist() == [1.0, 0.0]


def test_bem_token_importance_hand_computed():
    # Algorithm 1: I = [0.04/2, 0.04/2, 0.01/1] = [0.02, 0.02, 0.01]; I / 0.01 = [2, 2, 1]
    # softmax = [e^2, e^2, e] / (2 e^2 + e) = [e, e, 1] / (2e + 1)
    e = math.e
    u = bem_token_importance([0, 0, 1], [0.04, 0.01])
    assert u.dtype == np.float64
    assert u == pytest.approx([e / (2 * e + 1), e / (2 * e + 1), 1 / (2 * e + 1)])


def test_bem_token_importance_temperature():
    # temperature 1: I = [0.5, 0.5, 1.0] -> [e^0.5, e^0.5, e] / (2 e^0.5 + e)
    r, e = math.exp(0.5), math.e
    u = bem_token_importance([0, 0, 1], [1.0, 1.0], temperature=1.0)
    assert u == pytest.approx([r / (2 * r + e), r / (2 * r + e), e / (2 * r + e)])


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: length_normalized([]), "token_logprobs is empty"),
        (lambda: length_normalized([LOG(0.5), float("nan")]), "token_logprobs[1] = nan"),
        (lambda: length_normalized([float("-inf")]), "token_logprobs[0] = -inf"),
        (lambda: length_normalized([-0.1, 0.5]), "token_logprobs[1] = 0.5 is positive"),
        (lambda: length_normalized([[-0.1]]), "one-dimensional"),
        (lambda: length_normalized(["x"]), "'x'"),
        (lambda: mars_weights([0.5, 0.6]), "sums to 1.1"),
        (lambda: mars_weights([-0.1, 1.1]), "token_importance[0] = -0.1 is negative"),
        (lambda: mars_weights([]), "token_importance is empty"),
        (lambda: mars([LOG(0.5)], [0.5, 0.5]), "token_importance has 2 entries but"),
        (lambda: mars([0.3, -1.0], [0.5, 0.5]), "token_logprobs[0] = 0.3"),
        (lambda: token_importance([0, 1], [1, 1], [-1, -1], mode="avg"), "unknown mode 'avg'"),
        (lambda: phrase_weights([1, 1], normalization="l2"), "unknown normalization 'l2'"),
        (lambda: token_importance([0, 1], [1, 1], [-1, -1], temperature=0), "got 0"),
        (lambda: phrase_weights([1, 1], "softmax", temperature=-1), "got -1"),
        (lambda: phrase_weights([-0.5, 1.0]), "phrase_scores[0] = -0.5 is negative"),
        (lambda: phrase_weights([]), "phrase_scores is empty"),
        (lambda: token_importance([0, 2], [1, 1], [-1, -1]), "phrase_of_token[1] = 2 is not"),
        (lambda: token_importance([0, -1], [1, 1], [-1, -1]), "phrase_of_token[1] = -1"),
        (lambda: token_importance([0, 0, 2], [1, 1, 1], [-1, -1, -1]), "phrases [1] hold no token"),
        (lambda: token_importance([0, 1], [1, 1], [-1, -1, -1]), "token_logprobs has 3 entries but"),
        (lambda: token_importance([0, 1.5], [1, 1], [-1, -1]), "phrase_of_token[1] = 1.5"),
        (lambda: token_importance([], [1], []), "is empty"),
        (lambda: bem_token_importance([0, 1], [0.5, 1.5]), "phrase_scores[1] = 1.5 is above 1"),
        (lambda: bem_token_importance([0, 1], [0.5, -0.5]), "phrase_scores[1] = -0.5 is negative"),
        (lambda: bem_token_importance([0, 1], [0.5, 0.5], temperature=0.0), "got 0.0"),
        (lambda: bem_token_importance([1, 1], [0.5, 0.5]), "phrases [0] hold no token"),
    ],
)
def test_bad_input_raises_value_error_naming_the_value(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# --- properties --------------------------------------------------------------------------

LOGPROB = st.floats(min_value=-30.0, max_value=0.0)


@st.composite
def phrased_answers(draw):
    """(phrase_of_token, phrase_scores, token_logprobs) with every phrase holding a token."""
    n_phrases = draw(st.integers(1, 6))
    extra_tokens = draw(st.lists(st.integers(0, n_phrases - 1), max_size=8))
    phrase_of_token = draw(st.permutations(list(range(n_phrases)) + extra_tokens))
    scores = draw(st.lists(st.floats(0.0, 1.0), min_size=n_phrases, max_size=n_phrases))
    # Few distinct log-probs, so ties inside a phrase are common.
    size = len(phrase_of_token)
    logprobs = draw(st.lists(st.sampled_from([-3.0, -1.0, -0.5, 0.0]), min_size=size, max_size=size))
    return phrase_of_token, scores, logprobs


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 100), min_size=1, max_size=20).filter(any))
def test_mars_weights_are_positive_and_sum_to_one(counts):
    u = np.array(counts) / sum(counts)
    weights = mars_weights(u)
    assert weights.sum() == pytest.approx(1.0)
    assert (weights > 0).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(LOGPROB, min_size=1, max_size=20))
def test_mars_equals_length_normalized_for_uniform_importance(logprobs):
    uniform = np.full(len(logprobs), 1 / len(logprobs))
    assert mars(logprobs, uniform) == pytest.approx(length_normalized(logprobs), abs=1e-9)


@settings(max_examples=150, deadline=None)
@given(phrased_answers(), st.sampled_from(MODES), st.sampled_from(NORMALIZATIONS))
def test_token_importance_is_a_distribution(answer, mode, normalization):
    u = token_importance(*answer, mode=mode, normalization=normalization)
    assert u.shape == (len(answer[0]),)
    assert u.sum() == pytest.approx(1.0)
    assert (u >= 0).all()
    mars_weights(u)  # accepted as importance


@settings(max_examples=150, deadline=None)
@given(phrased_answers(), st.sampled_from(MODES), st.sampled_from(NORMALIZATIONS), st.randoms())
def test_token_importance_ignores_phrase_order(answer, mode, normalization, random):
    phrase_of_token, scores, logprobs = answer
    new_index = list(range(len(scores)))
    random.shuffle(new_index)  # phrase k becomes phrase new_index[k]
    permuted_scores = [0.0] * len(scores)
    for k, score in enumerate(scores):
        permuted_scores[new_index[k]] = score
    permuted_phrases = [new_index[k] for k in phrase_of_token]
    u = token_importance(phrase_of_token, scores, logprobs, mode, normalization)
    permuted = token_importance(permuted_phrases, permuted_scores, logprobs, mode, normalization)
    assert permuted == pytest.approx(u, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(phrased_answers())
def test_bem_token_importance_is_a_distribution(answer):
    phrase_of_token, scores, _ = answer
    u = bem_token_importance(phrase_of_token, scores)
    assert u.sum() == pytest.approx(1.0)
    assert (u >= 0).all()
