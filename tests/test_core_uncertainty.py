"""Confidence, entropy and semantic entropy against hand-computed values."""

import math
import re
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numeric_checks import finite_or_value_error

from mars_demo.core.uncertainty import (
    cluster_log_scores,
    confidence,
    entropy,
    semantic_entropy,
    semantic_entropy_discrete,
    semantic_entropy_normalized,
)

LOG = math.log
SCORES = [LOG(0.5), LOG(0.25), LOG(0.25)]


def test_confidence_is_negated_score():
    assert confidence(LOG(0.5)) == pytest.approx(LOG(2))
    assert confidence(np.float64(LOG(0.25))) == pytest.approx(2 * LOG(2))
    assert type(confidence(-1.0)) is float


def test_confidence_treats_rounding_above_zero_as_zero():
    assert confidence(1e-7) == 0.0


def test_entropy_is_mean_negated_score():
    # -(log 1/2 + 2 log 1/4) / 3 = (1 + 4) log 2 / 3
    assert entropy(SCORES) == pytest.approx(5 / 3 * LOG(2))


def test_semantic_entropy_paper_formula():
    # Clusters {0}, {1, 2}: log scores log 0.5 and log(0.25 + 0.25); SE = -(2 log 0.5) / 2
    assert semantic_entropy(SCORES, [0, 1, 1]) == pytest.approx(LOG(2))


def test_semantic_entropy_with_arbitrary_cluster_ids():
    # Clusters 7 = {0, 2} (mass 0.75) and 3 = {1} (mass 0.25)
    assert semantic_entropy(SCORES, [7, 3, 7]) == pytest.approx(-(LOG(0.75) + LOG(0.25)) / 2)


def test_semantic_entropy_counts_repeated_samples():
    # Two copies of a p = 0.9 answer: cluster score log 1.8 > 0, so SE = -log 1.8 < 0.
    assert semantic_entropy([LOG(0.9), LOG(0.9)], [0, 0]) == pytest.approx(-LOG(1.8))


def test_cluster_log_scores_in_order_of_first_appearance():
    scores = cluster_log_scores(SCORES, [7, 3, 7])
    assert list(scores) == [7, 3]
    assert scores[7] == pytest.approx(LOG(0.75))
    assert scores[3] == pytest.approx(LOG(0.25))
    assert all(type(key) is int and type(value) is float for key, value in scores.items())


def test_semantic_entropy_normalized():
    # Masses [0.5, 0.5] -> log 2; masses [0.75, 0.25] -> -(0.75 log 0.75 + 0.25 log 0.25)
    assert semantic_entropy_normalized(SCORES, [0, 1, 1]) == pytest.approx(LOG(2))
    expected = -(0.75 * LOG(0.75) + 0.25 * LOG(0.25))
    assert semantic_entropy_normalized(SCORES, [7, 3, 7]) == pytest.approx(expected)


def test_semantic_entropy_normalized_normalizes_over_all_clusters():
    # Scores 0.2 and 0.2 (total 0.4) are two clusters of mass 0.5 each.
    assert semantic_entropy_normalized([LOG(0.2), LOG(0.2)], [0, 1]) == pytest.approx(LOG(2))
    assert semantic_entropy_normalized([LOG(0.2), LOG(0.1)], [4, 4]) == 0.0


def test_semantic_entropy_discrete():
    # Counts 1 and 3 of 4: -(1/4 log 1/4 + 3/4 log 3/4)
    expected = -(0.25 * LOG(0.25) + 0.75 * LOG(0.75))
    assert semantic_entropy_discrete([0, 1, 1, 1]) == pytest.approx(expected)
    assert semantic_entropy_discrete([0, 1, 2]) == pytest.approx(LOG(3))
    assert semantic_entropy_discrete([5, 5]) == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: confidence(0.5), "score[0] = 0.5 is positive"),
        (lambda: confidence(float("nan")), "nan"),
        (lambda: confidence([-1.0, -2.0]), "single number"),
        (lambda: entropy([]), "sample_scores is empty"),
        (lambda: entropy([-1.0, float("inf")]), "sample_scores[1] = inf"),
        (lambda: entropy([-1.0, 0.2]), "sample_scores[1] = 0.2 is positive"),
        (lambda: semantic_entropy([-1.0, -2.0], [0]), "sample_scores has 2 entries but"),
        (lambda: semantic_entropy([-1.0], [0.5]), "cluster_ids[0] = 0.5 is not an integer"),
        (lambda: semantic_entropy([], []), "sample_scores is empty"),
        (lambda: semantic_entropy([-1.0, 3.0], [0, 1]), "sample_scores[1] = 3.0"),
        (lambda: cluster_log_scores([-1.0], [0, 1]), "cluster_ids has 2"),
        (lambda: semantic_entropy_normalized([-1.0, np.nan], [0, 1]), "sample_scores[1] = nan"),
        (lambda: semantic_entropy_discrete([]), "cluster_ids is empty"),
        (lambda: semantic_entropy_discrete(["a"]), "'a'"),
    ],
)
def test_bad_input_raises_value_error_naming_the_value(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# --- extreme magnitudes: the exact finite answer, or ValueError -----------------------------

MAX = sys.float_info.max  # 1.7976931348623157e308
TINY = 5e-324  # the smallest subnormal float64


def test_entropy_whose_sum_overflows():
    # -1e308 + -1e308 overflows (was inf); the mean is 1e308 * mean([-1, -1]).
    assert entropy([-1e308, -1e308]) == 1e308
    assert entropy([-MAX, -MAX, -MAX]) == MAX
    assert entropy([-MAX, 0.0]) == MAX / 2
    assert entropy([-TINY, -TINY]) == TINY


def test_semantic_entropy_whose_sum_overflows():
    # Two clusters of log score -1e308 each: SE = 1e308 (was inf).
    assert semantic_entropy([-1e308, -1e308], [0, 1]) == 1e308
    # One cluster: logsumexp = -MAX + log 2, which rounds to -MAX.
    assert semantic_entropy([-MAX, -MAX], [0, 0]) == MAX
    # Cluster log scores [-MAX, -MAX, 0]: SE = 2 MAX / 3.
    assert semantic_entropy([-MAX, -MAX, 0.0], [0, 1, 2]) == pytest.approx(MAX / 3 * 2)


def test_cluster_log_scores_and_confidence_at_the_float_limit():
    assert cluster_log_scores([-MAX, -MAX], [0, 0]) == {0: -MAX}
    assert cluster_log_scores([-MAX, 0.0], [0, 0]) == {0: 0.0}  # exp(-MAX) adds nothing
    assert cluster_log_scores([-TINY, -TINY], [3, 3]) == {3: pytest.approx(LOG(2))}
    assert confidence(-MAX) == MAX
    assert confidence(-TINY) == TINY


def test_semantic_entropy_normalized_at_the_float_limit():
    # Equal masses whatever their size: log 2.
    assert semantic_entropy_normalized([-MAX, -MAX], [0, 1]) == pytest.approx(LOG(2))
    assert semantic_entropy_normalized([-1e308, -1e308, -1e308], [0, 1, 2]) == pytest.approx(
        LOG(3)
    )
    # Mass exp(-MAX) is 0 next to exp(0): a single meaning.
    assert semantic_entropy_normalized([-MAX, 0.0], [0, 1]) == 0.0


def test_semantic_entropy_normalized_of_large_equal_scores():
    # -1e20 + log 2 rounds to -1e20, so both clusters' log scores equal the total's and their
    # masses came out as 1 and 1 (SE 0). Relative to the best score they are 1/2 and 1/2.
    assert semantic_entropy_normalized([-1e20, -1e20], [0, 1]) == pytest.approx(LOG(2))
    # Masses 2/3 and 1/3, as with any equal scores: the discrete SE of the clusters.
    expected = semantic_entropy_discrete([0, 0, 1])
    assert expected == pytest.approx(-(2 / 3) * LOG(2 / 3) - (1 / 3) * LOG(1 / 3))
    assert semantic_entropy_normalized([-1e20] * 3, [0, 0, 1]) == pytest.approx(expected)
    assert semantic_entropy_normalized([-MAX] * 3, [0, 0, 1]) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: entropy([-(10**400)]), "sample_scores must be a sequence of numbers"),
        (lambda: confidence(-(10**400)), "score must be a sequence of numbers"),
        # 1e300 and 2e300 both used to become -2**63 silently: one cluster, SE 0.
        (lambda: semantic_entropy_discrete([1e300, 2e300]), "cluster_ids[0] = 1e+300 is too"),
        (lambda: semantic_entropy([-1.0], [2.0**63]), "cluster_ids[0] = 9.223372036854776e+18"),
        (
            lambda: semantic_entropy_discrete(np.array([2**64 - 1], dtype=np.uint64)),
            "cluster_ids[0] = 18446744073709551615 is too large",
        ),
    ],
)
def test_huge_input_raises_value_error_naming_the_value(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# --- properties --------------------------------------------------------------------------

# Any finite score <= 0: subnormals, -0.0 and magnitudes up to 1.8e308, next to the ordinary
# range and the extremes themselves.
ANY_SCORE = st.floats(max_value=0.0, allow_nan=False, allow_infinity=False)
WIDE_SCORE = st.one_of(
    st.floats(-30.0, 0.0), ANY_SCORE, st.sampled_from([-MAX, -1e308, -TINY, 0.0])
)


@st.composite
def clustered_samples(draw):
    size = draw(st.integers(1, 10))
    scores = draw(st.lists(WIDE_SCORE, min_size=size, max_size=size))
    clusters = draw(st.lists(st.integers(-3, 3), min_size=size, max_size=size))
    return scores, clusters


def tolerance(*values):
    """1e-9 as for ordinary scores; relative (1e-12) beyond magnitude 1000."""
    return max(1e-9, 1e-12 * max(abs(value) for value in values))


@settings(max_examples=200, deadline=None)
@given(clustered_samples())
def test_semantic_entropy_lies_between_cluster_extremes(samples):
    negated = [-value for value in cluster_log_scores(*samples).values()]
    tol = tolerance(*negated)
    assert min(negated) - tol <= semantic_entropy(*samples) <= max(negated) + tol


@settings(max_examples=200, deadline=None)
@given(clustered_samples())
def test_normalized_and_discrete_semantic_entropy_bounds(samples):
    n_clusters = len(set(samples[1]))
    assert 0.0 <= semantic_entropy_normalized(*samples) <= LOG(n_clusters) + 1e-9
    assert 0.0 <= semantic_entropy_discrete(samples[1]) <= LOG(n_clusters) + 1e-9


@settings(max_examples=200, deadline=None)
@given(clustered_samples())
def test_semantic_entropy_normalized_ignores_a_common_shift(samples):
    # Masses depend only on score differences: shifting the best score to 0 changes nothing.
    scores, clusters = samples
    best = max(scores)
    shifted = [score - best for score in scores]  # no overflow: both are in [-MAX, 0]
    expected = semantic_entropy_normalized(shifted, clusters)
    assert semantic_entropy_normalized(scores, clusters) == pytest.approx(expected, abs=1e-9)
    # Equal scores (of any size) give the count-based entropy.
    equal = semantic_entropy_normalized([scores[0]] * len(scores), clusters)
    assert equal == pytest.approx(semantic_entropy_discrete(clusters), abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(clustered_samples())
def test_uncertainties_are_finite_and_bounded(samples):
    scores, clusters = samples
    low, high = min(scores), max(scores)
    for score in scores:
        assert 0.0 <= confidence(score) == -score
    # Entropy: the mean of the negated scores.
    value = entropy(scores)
    assert math.isfinite(value)
    assert -high - tolerance(low) <= value <= -low + tolerance(low)
    # Each cluster's log score: at least its best member, at most log(#members) (each <= 0).
    sizes = {c: clusters.count(c) for c in clusters}
    log_scores = cluster_log_scores(scores, clusters)
    for c, log_score in log_scores.items():
        best = max(s for s, k in zip(scores, clusters) if k == c)
        assert math.isfinite(log_score)
        assert best - tolerance(best) <= log_score <= LOG(sizes[c]) + 1e-12
    # Paper SE = -mean_c log P(c) >= -mean_c log|c| >= -log B; and <= -min score.
    value = semantic_entropy(scores, clusters)
    assert math.isfinite(value)
    lower = -sum(LOG(size) for size in sizes.values()) / len(sizes)
    assert lower - 1e-9 <= value <= -low + tolerance(low)
    assert lower >= -LOG(len(scores)) - 1e-12
    assert math.isfinite(semantic_entropy_normalized(scores, clusters))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.floats(), WIDE_SCORE), min_size=1, max_size=8),
    st.lists(
        st.one_of(
            st.integers(-(2**64), 2**64), st.floats(), st.sampled_from([2.0**63, -(2.0**63)])
        ),
        min_size=1,
        max_size=8,
    ),
)
def test_any_numbers_give_finite_results_or_value_error(scores, clusters):
    finite_or_value_error(lambda: confidence(scores[0]))
    finite_or_value_error(lambda: entropy(scores))
    finite_or_value_error(lambda: cluster_log_scores(scores, clusters))
    finite_or_value_error(lambda: semantic_entropy(scores, clusters))
    finite_or_value_error(lambda: semantic_entropy_normalized(scores, clusters))
    finite_or_value_error(lambda: semantic_entropy_discrete(clusters))
