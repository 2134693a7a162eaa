"""Length-normalized scoring, MARS and token importance against hand-computed values."""

import math
import re
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numeric_checks import finite_or_value_error

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


# --- extreme magnitudes: the exact finite answer, or ValueError -----------------------------

MAX = sys.float_info.max  # 1.7976931348623157e308
TINY = 5e-324  # the smallest subnormal float64


def test_softmax_phrase_weights_whose_logits_overflow():
    # s / T = [1e310, 1e4] overflows (was [nan, nan]); softmax((s - max) / T) is the same
    # function: logits [0, (1 - 1e306) / 1e-4 = -1e310 -> -inf] give [1, 0].
    assert phrase_weights([1e306, 1.0], "softmax", 1e-4).tolist() == [1.0, 0.0]
    # Tied maxima share the weight.
    assert phrase_weights([1e306, 1e306, 1.0], "softmax", 1e-4).tolist() == [0.5, 0.5, 0.0]
    # A subnormal temperature: 1 / 5e-324 overflows, (s - 1) / T = [0, -inf].
    assert phrase_weights([1.0, 0.0], "softmax", TINY).tolist() == [1.0, 0.0]
    u = token_importance([0, 0, 1], [MAX, 0.0], [-1.0] * 3, normalization="softmax")
    assert u.tolist() == [0.5, 0.5, 0.0]


def test_sum_phrase_weights_whose_sum_overflows():
    # 1e308 + 1e308 overflows (was [0, 0]); dividing by the max first: [1, 1] / 2.
    assert phrase_weights([1e308, 1e308]).tolist() == [0.5, 0.5]
    # [1.5, 1, 0.5]e308 / 1.5e308 = [1, 2/3, 1/3], which sum to 2: [1/2, 1/3, 1/6].
    assert phrase_weights([1.5e308, 1e308, 5e307]) == pytest.approx([1 / 2, 1 / 3, 1 / 6])
    # U = [1/2, 1/2, 0], phrase 0 split over two tokens.
    u = token_importance([0, 0, 1, 2], [MAX, MAX, 0.0], [-1.0] * 4)
    assert u.tolist() == [0.25, 0.25, 0.5, 0.0]


def test_sum_phrase_weights_of_subnormal_scores():
    # Sums of subnormals are exact: [1, 3] * 5e-324 normalize like [1, 3].
    assert phrase_weights([TINY, 3 * TINY]).tolist() == [0.25, 0.75]
    assert phrase_weights([TINY, 0.0]).tolist() == [1.0, 0.0]


def test_bem_token_importance_with_subnormal_temperature():
    # I / T = 0.5 / 1e-310 = 5e309 overflows (was [nan]); a single token gets all.
    assert bem_token_importance([0], [0.5], temperature=1e-310).tolist() == [1.0]
    # I = [0.5/2, 0.5/2, 0.25] are equal, so (I - max) / T = 0 for all: uniform.
    u = bem_token_importance([0, 0, 1], [0.5, 0.25], temperature=1e-310)
    assert u == pytest.approx([1 / 3] * 3)
    # I = [0.5, 0.25]: (I - 0.5) / T = [0, -2.5e309 -> -inf] gives [1, 0].
    assert bem_token_importance([0, 1], [0.5, 0.25], temperature=1e-310).tolist() == [1.0, 0.0]


def test_length_normalized_whose_sum_overflows():
    # -1e308 + -1e308 overflows (was -inf); the mean is 1e308 * mean([-1, -1]) = -1e308.
    assert length_normalized([-1e308, -1e308]) == -1e308
    assert length_normalized([-MAX] * 3) == -MAX
    # (-MAX - MAX + 0 - 5e-324) / 4 = -MAX / 2 (the subnormal is below rounding).
    assert length_normalized([-MAX, -MAX, 0.0, -TINY]) == pytest.approx(-MAX / 2)
    assert length_normalized([-TINY, -TINY]) == -TINY


def test_mars_near_the_float_limit():
    # Uniform importance over 11 tokens: w_l = 1/22 + 1/22, whose rounded sum times -MAX
    # overflowed (was -inf); the exact convex combination of eleven -MAX is -MAX.
    assert mars([-MAX] * 11, [1 / 11] * 11) == -MAX
    assert mars([-MAX] * 11, [1 / 11] * 11) == length_normalized([-MAX] * 11)
    # w = [1/4, 3/4]: -MAX / 4
    assert mars([-MAX, 0.0], [0.0, 1.0]) == -MAX / 4
    assert mars([-1e308, -1e308], [0.5, 0.5]) == -1e308


def test_importance_whose_sum_overflows_is_refused_without_a_numpy_warning():
    huge = [8.988465674311579e307, 8.98846567431158e307]  # found by hypothesis
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="token_importance sums to inf, expected 1"):
            mars_weights(huge)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: length_normalized([-(10**400)]), "token_logprobs must be a sequence of numbers"),
        (lambda: phrase_weights([1, 1], "softmax", 10**400), "temperature must be a finite"),
        (lambda: phrase_weights([1, 10**400]), "phrase_scores must be a sequence of numbers"),
        (lambda: mars([-1.0, -MAX], [0.5, 0.50001]), "token_importance sums to 1.0000"),
        (
            lambda: token_importance([0, 1e300], [1, 1], [-1, -1]),
            "phrase_of_token[1] = 1e+300 is too large in magnitude",
        ),
        (
            lambda: token_importance(np.array([0, 2**63], dtype=np.uint64), [1, 1], [-1, -1]),
            "phrase_of_token[1] = 9223372036854775808 is too large",
        ),
        (
            lambda: bem_token_importance([0, -(2.0**63)], [0.5, 0.5]),
            "phrase_of_token[1] = -9.223372036854776e+18 is too large in magnitude",
        ),
    ],
)
def test_huge_or_out_of_range_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# --- properties --------------------------------------------------------------------------

LOGPROB = st.floats(min_value=-30.0, max_value=0.0)
# Any finite log-prob <= 0 or phrase score >= 0: subnormals, -0.0 and magnitudes up to 1.8e308.
ANY_LOGPROB = st.floats(max_value=0.0, allow_nan=False, allow_infinity=False)
ANY_SCORE = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False)
ANY_TEMPERATURE = st.floats(min_value=0.0, exclude_min=True, allow_infinity=False)
# Ordinary values, arbitrary ones, and the extremes themselves (drawn often this way).
WIDE_LOGPROB = st.one_of(LOGPROB, ANY_LOGPROB, st.sampled_from([-MAX, -1e308, -TINY, 0.0]))
WIDE_SCORE = st.one_of(st.floats(0.0, 1.0), ANY_SCORE, st.sampled_from([0.0, TINY, 1e308, MAX]))
UNIT_SCORE = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, TINY, 1.0]))
WIDE_TEMPERATURE = st.one_of(
    st.just(0.1), ANY_TEMPERATURE, st.sampled_from([TINY, 1e-310, 1e-4, MAX])
)


@st.composite
def phrased_answers(draw, score=UNIT_SCORE):
    """(phrase_of_token, phrase_scores, token_logprobs) with every phrase holding a token."""
    n_phrases = draw(st.integers(1, 6))
    extra_tokens = draw(st.lists(st.integers(0, n_phrases - 1), max_size=8))
    phrase_of_token = draw(st.permutations(list(range(n_phrases)) + extra_tokens))
    scores = draw(st.lists(score, min_size=n_phrases, max_size=n_phrases))
    # Often few distinct log-probs, so ties inside a phrase are common; else any finite <= 0.
    size = len(phrase_of_token)
    logprob = draw(st.sampled_from([st.sampled_from([-3.0, -1.0, -0.5, 0.0]), WIDE_LOGPROB]))
    logprobs = draw(st.lists(logprob, min_size=size, max_size=size))
    return phrase_of_token, scores, logprobs


def is_finite(values) -> bool:
    return bool(np.isfinite(np.asarray(values, dtype=np.float64)).all())


def within(value, low, high, rel=1e-12):
    """low <= value <= high, up to float rounding relative to the largest magnitude."""
    tol = rel * (1 + max(abs(low), abs(high)))
    return low - tol <= value <= high + tol


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 100), min_size=1, max_size=20).filter(any))
def test_mars_weights_are_positive_and_sum_to_one(counts):
    u = np.array(counts) / sum(counts)
    weights = mars_weights(u)
    assert weights.sum() == pytest.approx(1.0)
    assert (weights > 0).all()


@settings(max_examples=200, deadline=None)
@given(st.lists(WIDE_LOGPROB, min_size=1, max_size=20))
def test_mars_equals_length_normalized_for_uniform_importance(logprobs):
    uniform = np.full(len(logprobs), 1 / len(logprobs))
    expected = length_normalized(logprobs)
    # abs 1e-9 as before; for |LN| > 1000 the relative tolerance takes over
    assert mars(logprobs, uniform) == pytest.approx(expected, rel=1e-12, abs=1e-9)
    assert math.isfinite(expected)
    assert within(expected, min(logprobs), max(logprobs))


@settings(max_examples=200, deadline=None)
@given(
    phrased_answers(WIDE_SCORE),
    st.sampled_from(MODES),
    st.sampled_from(NORMALIZATIONS),
    WIDE_TEMPERATURE,
)
def test_token_importance_is_a_distribution(answer, mode, normalization, temperature):
    u = token_importance(*answer, mode=mode, normalization=normalization, temperature=temperature)
    assert u.shape == (len(answer[0]),)
    assert is_finite(u)
    assert u.sum() == pytest.approx(1.0, abs=1e-6)
    assert (u >= 0).all()
    mars_weights(u)  # accepted as importance
    # MARS is a convex combination of the log-probs.
    logprobs = answer[2]
    score = mars(logprobs, u)
    assert math.isfinite(score)
    assert within(score, min(logprobs), max(logprobs))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(WIDE_SCORE, min_size=1, max_size=8),
    st.sampled_from(NORMALIZATIONS),
    WIDE_TEMPERATURE,
)
def test_phrase_weights_are_a_distribution_ordered_like_the_scores(scores, normalization, temp):
    weights = phrase_weights(scores, normalization, temp)
    assert is_finite(weights)
    assert (weights >= 0).all()
    assert weights.sum() == pytest.approx(1.0, abs=1e-6)
    order = np.argsort(scores, kind="stable")
    assert (np.diff(weights[order]) >= 0).all()  # a higher score never gets less weight


@settings(max_examples=200, deadline=None)
@given(
    phrased_answers(WIDE_SCORE),
    st.sampled_from(MODES),
    st.sampled_from(NORMALIZATIONS),
    st.randoms(),
)
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


@settings(max_examples=200, deadline=None)
@given(phrased_answers(), st.one_of(st.just(0.01), WIDE_TEMPERATURE))
def test_bem_token_importance_is_a_distribution(answer, temperature):
    phrase_of_token, scores, logprobs = answer
    u = bem_token_importance(phrase_of_token, scores, temperature)
    assert is_finite(u)
    assert u.sum() == pytest.approx(1.0, abs=1e-6)
    assert (u >= 0).all()
    assert within(mars(logprobs, u), min(logprobs), max(logprobs))


@settings(max_examples=200, deadline=None)
@given(
    st.data(),
    st.lists(st.floats(), min_size=1, max_size=6),
    st.lists(st.one_of(st.floats(), WIDE_SCORE), min_size=1, max_size=4),
    st.one_of(st.floats(), WIDE_TEMPERATURE),
    st.sampled_from(MODES),
    st.sampled_from(NORMALIZATIONS),
)
def test_any_floats_give_finite_results_or_value_error(
    data, logprobs, scores, temperature, mode, normalization
):
    phrase_of_token = data.draw(
        st.lists(st.integers(-1, len(scores)), min_size=len(logprobs), max_size=len(logprobs))
    )
    importance = data.draw(st.lists(st.floats(), min_size=len(logprobs), max_size=len(logprobs)))
    finite_or_value_error(lambda: length_normalized(logprobs))
    finite_or_value_error(lambda: mars_weights(importance))
    finite_or_value_error(lambda: mars(logprobs, importance))
    finite_or_value_error(lambda: phrase_weights(scores, normalization, temperature))
    finite_or_value_error(
        lambda: token_importance(
            phrase_of_token, scores, logprobs, mode, normalization, temperature
        )
    )
    finite_or_value_error(lambda: bem_token_importance(phrase_of_token, scores, temperature))


# --- the published medical run: softmax over the already sum-normalized weights -----------


def test_sum_softmax_is_softmax_over_sum_normalized_weights_by_hand():
    from mars_demo.core.scoring import MEDICAL_TEMPERATURE

    assert MEDICAL_TEMPERATURE == 0.001
    scores = [0.2, 0.201]
    # Sum-normalized: [0.2, 0.201] / 0.401; their gap 0.001 / 0.401 over T = 0.001 is 2.4938.
    gap = (0.201 - 0.2) / 0.401 / 0.001
    by_hand = [1 / (1 + math.exp(gap)), math.exp(gap) / (1 + math.exp(gap))]
    got = phrase_weights(scores, "sum-softmax", temperature=MEDICAL_TEMPERATURE)
    assert got == pytest.approx(by_hand, rel=1e-9)
    assert got.round(4).tolist() == [0.0763, 0.9237]
    # Softmax over the raw scores is a different thing: a gap of 0.001 / 0.001 = 1.
    raw = phrase_weights(scores, "softmax", temperature=MEDICAL_TEMPERATURE)
    assert raw.round(4).tolist() == [0.2689, 0.7311]


def test_sum_softmax_in_token_importance_and_edge_cases():
    # Phrases [0, 0, 1] with scores [1, 3] at temperature 1: U = softmax([0.25, 0.75]).
    e = math.exp(0.5)
    u = token_importance([0, 0, 1], [1.0, 3.0], [-0.1, -0.2, -0.3], normalization="sum-softmax",
                         temperature=1.0)
    assert u == pytest.approx([0.5 / (1 + e), 0.5 / (1 + e), e / (1 + e)], rel=1e-12)
    # All-zero scores: uniform sum weights, uniform softmax.
    assert phrase_weights([0.0, 0.0, 0.0], "sum-softmax", 0.001) == pytest.approx([1 / 3] * 3)
    # Scores whose sum overflows still give finite weights.
    assert phrase_weights([1e308, 1e308], "sum-softmax", 0.001) == pytest.approx([0.5, 0.5])
