"""Uncertainty estimates from answer scores (Bakman et al., ACL 2024, section 2).

A *score* is an answer's natural-log score, length-normalized or MARS
(:mod:`mars_demo.core.scoring`), so it is <= 0. Every estimate here is an uncertainty:
higher = less trustworthy. Equation numbers refer to ``paper/mars-paper.tex`` as typeset:
entropy is eq. (6), the cluster score eq. (7), semantic entropy eq. (8).

:func:`confidence`, :func:`entropy` and :func:`semantic_entropy` follow the paper's formulas.
:func:`semantic_entropy_normalized` and :func:`semantic_entropy_discrete` are the later
estimators of Farquhar et al. (Nature, 2024), offered for comparison.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from . import _validation as check

MASS_TOLERANCE = 1e-12  # cluster masses summing further from 1 lost precision to rounding


def confidence(score) -> float:
    """Confidence uncertainty: the negated score of the most probable (greedy) answer.

    ``-score``, in nats (natural log), >= 0; higher = less trustworthy. The paper's
    "Confidence" baseline with a length-normalized score (eq. (5)), "+ MARS" with eq. (9).

    Args:
        score: the greedy answer's natural-log score, <= 0.

    Example: an answer with length-normalized probability 0.5 has uncertainty log 2.

    >>> import math
    >>> round(confidence(math.log(0.5)), 4)
    0.6931
    """
    return -check.log_score(score, "score")


def entropy(sample_scores) -> float:
    """Monte-Carlo sequence entropy, paper eq. (6) (``entropy``).

    ``H = -(1/B) * sum_b score_b`` over B sampled answers, in nats (natural log), >= 0;
    higher = less trustworthy.

    Args:
        sample_scores: natural-log scores of the B sampled answers, each <= 0.

    Example: scores [log 0.5, log 0.25] give -(log 0.5 + log 0.25) / 2 = 1.0397.

    >>> import math
    >>> round(entropy([math.log(0.5), math.log(0.25)]), 4)
    1.0397
    """
    return -check.mean(check.log_scores(sample_scores, "sample_scores"), "sample_scores")


def cluster_log_scores(sample_scores, cluster_ids) -> dict[int, float]:
    """Log cluster score per semantic cluster, paper eq. (7) (``cluster-prob``) in log form.

    ``log P(c) = logsumexp_{b in c} score_b``: the log of the summed (not normalized) scores of
    the cluster's samples, every sample counted, repeats included. Natural log; it can exceed 0
    when a cluster holds several probable samples. Higher = more probable meaning.

    Args:
        sample_scores: natural-log scores of the B sampled answers, each <= 0.
        cluster_ids: an integer cluster id per sample (any ints; e.g. from
            :func:`mars_demo.core.clustering.semantic_clusters`).

    Returns:
        ``{cluster_id: log score}``, in order of each id's first appearance.

    Example: scores [log .5, log .25, log .25] with clusters [0, 1, 1] give
    {0: log 0.5, 1: log(0.25 + 0.25) = log 0.5}.

    >>> import math
    >>> scores = cluster_log_scores([math.log(.5), math.log(.25), math.log(.25)], [0, 1, 1])
    >>> {c: round(s, 4) for c, s in scores.items()}
    {0: -0.6931, 1: -0.6931}
    """
    ids, log_scores = _log_scores_by_cluster(*_scores_and_clusters(sample_scores, cluster_ids))
    return dict(zip(ids, log_scores.tolist()))


def semantic_entropy(sample_scores, cluster_ids) -> float:
    """Semantic entropy as in the paper, eq. (8) (``semantic-entropy``).

    ``SE = -(1/|C|) * sum_c logsumexp_{b in c} score_b``: the mean negated log cluster score
    (:func:`cluster_log_scores`), in nats (natural log); higher = less trustworthy. As in the
    paper and the original code, cluster scores are not normalized, so SE can be negative
    when a cluster's summed score exceeds 1. (The published code also subtracts 5 from every
    cluster's log score, which adds 5 to SE and changes no ranking; that shift is not copied.)

    Args:
        sample_scores: natural-log scores of the B sampled answers, each <= 0.
        cluster_ids: an integer cluster id per sample.

    Example: scores [log .5, log .25, log .25] with clusters [0, 1, 1] give
    -(log 0.5 + log 0.5) / 2 = log 2.

    >>> import math
    >>> round(semantic_entropy([math.log(.5), math.log(.25), math.log(.25)], [0, 1, 1]), 4)
    0.6931
    """
    _, log_scores = _log_scores_by_cluster(*_scores_and_clusters(sample_scores, cluster_ids))
    return -check.mean(log_scores, "sample_scores")


def semantic_entropy_normalized(sample_scores, cluster_ids) -> float:
    """Semantic entropy over normalized cluster masses (Farquhar et al., Nature 2024).

    Not a paper equation of MARS: ``log p(c) = logsumexp_{b in c} s_b - logsumexp_all s_b``
    turns the cluster scores of eq. (7) into a distribution, and
    ``SE = -sum_c p(c) log p(c)`` is its entropy, in nats (natural log), within
    [0, log |C|]; higher = less trustworthy.

    Args:
        sample_scores: natural-log scores of the B sampled answers, each <= 0.
        cluster_ids: an integer cluster id per sample.

    Example: scores [log .5, log .25, log .25] with clusters [0, 1, 1] give two clusters of
    mass 0.5 each, so SE = log 2.

    >>> import math
    >>> scores = [math.log(.5), math.log(.25), math.log(.25)]
    >>> round(semantic_entropy_normalized(scores, [0, 1, 1]), 4)
    0.6931
    """
    scores, clusters = _scores_and_clusters(sample_scores, cluster_ids)
    _, log_scores = _log_scores_by_cluster(scores, clusters)
    log_mass = log_scores - logsumexp(scores)
    if abs(np.exp(log_mass).sum() - 1) > MASS_TOLERANCE:
        # Scores so large in magnitude that the log-sizes added to them were rounded away
        # (e.g. -1e20 + log 2 == -1e20), so the masses do not sum to 1: work with scores
        # relative to the best one, the same masses, where nothing is lost.
        shifted = scores - scores.max()
        _, log_scores = _log_scores_by_cluster(shifted, clusters)
        log_mass = log_scores - logsumexp(shifted)
    return max(0.0, float(-np.sum(np.exp(log_mass) * log_mass)))  # max: no -0.0 from rounding


def semantic_entropy_discrete(cluster_ids) -> float:
    """Discrete (count-based) semantic entropy (Farquhar et al., Nature 2024).

    Not a paper equation of MARS: ``SE = -sum_c (n_c/N) log(n_c/N)`` with n_c the number of
    the N samples in cluster c. Ignores scores. In nats (natural log), within [0, log |C|];
    higher = less trustworthy.

    Args:
        cluster_ids: an integer cluster id per sample.

    Example: clusters [0, 1, 1, 1] give -(1/4 log 1/4 + 3/4 log 3/4) = 0.5623.

    >>> round(semantic_entropy_discrete([0, 1, 1, 1]), 4)
    0.5623
    """
    clusters = check.index_vector(cluster_ids, "cluster_ids")
    _, counts = np.unique(clusters, return_counts=True)
    fractions = counts / clusters.size
    return max(0.0, float(-np.sum(fractions * np.log(fractions))))


def _scores_and_clusters(sample_scores, cluster_ids) -> tuple[np.ndarray, np.ndarray]:
    scores = check.log_scores(sample_scores, "sample_scores")
    clusters = check.index_vector(cluster_ids, "cluster_ids")
    check.same_length(scores, "sample_scores", clusters, "cluster_ids")
    return scores, clusters


def _log_scores_by_cluster(
    scores: np.ndarray, clusters: np.ndarray
) -> tuple[list[int], np.ndarray]:
    """Cluster ids in order of first appearance and each cluster's logsumexp of scores."""
    ids = list(dict.fromkeys(clusters.tolist()))
    return ids, np.array([logsumexp(scores[clusters == c]) for c in ids])
