"""Confidence, entropy and semantic entropy against hand-computed values."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@st.composite
def clustered_samples(draw):
    size = draw(st.integers(1, 10))
    scores = draw(st.lists(st.floats(-30.0, 0.0), min_size=size, max_size=size))
    clusters = draw(st.lists(st.integers(-3, 3), min_size=size, max_size=size))
    return scores, clusters


@settings(max_examples=150, deadline=None)
@given(clustered_samples())
def test_semantic_entropy_lies_between_cluster_extremes(samples):
    negated = [-value for value in cluster_log_scores(*samples).values()]
    assert min(negated) - 1e-9 <= semantic_entropy(*samples) <= max(negated) + 1e-9


@settings(max_examples=150, deadline=None)
@given(clustered_samples())
def test_normalized_and_discrete_semantic_entropy_bounds(samples):
    n_clusters = len(set(samples[1]))
    assert 0.0 <= semantic_entropy_normalized(*samples) <= LOG(n_clusters) + 1e-9
    assert 0.0 <= semantic_entropy_discrete(samples[1]) <= LOG(n_clusters) + 1e-9
