"""CoCoA (Vashurin et al., NeurIPS 2025): the greedy answer's own uncertainty times how much the
sampled answers disagree with it. lm-polygraph ``estimators/cocoa.py`` (``CocoaMSP``,
``CocoaPPL``, ``CocoaMTE``) with the similarity of ``stat_calculators/
greedy_cross_encoder_similarity.py``: a cross-encoder's similarity of the greedy answer and
each sample, the mean of both orders, bare answers (no question).
"""

from __future__ import annotations

import numpy as np

from . import _validation as check


def greedy_dissimilarity(forward, backward) -> float:
    """``mean_k (1 - (g(greedy, s_k) + g(s_k, greedy)) / 2)`` over the samples, similarities
    in [0, 1].

    >>> greedy_dissimilarity([1.0, 0.5], [0.8, 0.5])
    0.3
    """
    f = check.float_vector(forward, "forward")
    b = check.float_vector(backward, "backward")
    check.same_length(f, "forward", b, "backward")
    for name, v in (("forward", f), ("backward", b)):
        if np.any((v < 0) | (v > 1)):
            raise ValueError(f"{name} similarities must lie in [0, 1]: {v.tolist()!r}")
    return float(round(np.mean(1.0 - (f + b) / 2.0), 15))


def cocoa(confidence_uncertainty: float, forward, backward) -> float:
    """CoCoA: ``u * mean_k(1 - sim(greedy, s_k))`` where ``u`` is the greedy answer's
    uncertainty (its negative log-probability for ``CocoaMSP``, its negative length-normalized
    or MARS log score for ``CocoaPPL``, its mean or MARS-weighted token entropy for
    ``CocoaMTE``).

    >>> cocoa(2.0, [1.0, 0.5], [0.8, 0.5])
    0.6
    """
    u = float(check.float_vector([confidence_uncertainty], "confidence_uncertainty")[0])
    return u * greedy_dissimilarity(forward, backward)
