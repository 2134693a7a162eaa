"""Density methods: Semantic Density (Qiu and Miikkulainen, NeurIPS 2024) and EigenScore (Chen
et al., ICLR 2024). Every function returns an uncertainty: higher = less trustworthy."""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh

from . import _validation as check

EIGENSCORE_ALPHA = 1e-3  # the covariance's ridge (lm-polygraph's default)


def semantic_density(greedy_score: float, sample_scores, sample_nli, sample_texts) -> float:
    """Semantic density of the greedy answer among the samples, negated (lm-polygraph
    ``estimators/semantic_density.py``, ``SemanticDensity``): each DISTINCT sample text k
    (the first of its copies) weighs ``exp(score_k)``, the greedy answer ``exp(greedy_score)``;
    a sample's kernel is ``1 - d_k`` with ``d_k = p_contra + p_neutral / 2`` from the NLI of
    "greedy answer" (premise) against "sample k" (0 when d_k > 1); the greedy answer's kernel
    is 1::

        -(exp(g) + sum_k exp(s_k) (1 - d_k)) / (exp(g) + sum_k exp(s_k))

    ``sample_nli[k]``: (entailment, neutral, contradiction) probabilities. With
    length-normalized scores ``exp(score)`` is lm-polygraph's probability normalized by length.

    >>> semantic_density(0.0, [0.0, 0.0], [[1, 0, 0], [0, 0, 1]], ["a", "b"])
    -0.6666666666666666
    """
    g = check.log_score(greedy_score, "greedy_score")
    s = check.log_scores(sample_scores, "sample_scores")
    nli = np.asarray(sample_nli, dtype=np.float64)
    if nli.shape != (s.size, 3) or not np.all(np.isfinite(nli)):
        raise ValueError(f"sample_nli must hold one finite probability triple per sample, got "
                         f"shape {nli.shape}")
    texts = list(sample_texts)
    check.same_length(texts, "sample_texts", s, "sample_scores")
    first = [k for k, t in enumerate(texts) if t not in texts[:k]]
    distance = nli[first, 2] + nli[first, 1] / 2.0
    kernel = np.where(distance <= 1.0, 1.0 - distance, 0.0)
    shift = max(g, float(s[first].max()))  # exp of scores relative to the largest: no underflow
    w = np.exp(s[first] - shift)
    wg = np.exp(g - shift)
    return -float((wg + np.dot(w, kernel)) / (wg + w.sum()))


def eigenscore(embeddings, alpha: float = EIGENSCORE_ALPHA) -> float:
    """EigenScore (lm-polygraph ``estimators/eigenscore.py``): the mean log-eigenvalue of the
    samples' regularized covariance ``Z J_d Z^T + alpha I``, ``Z`` (K x d) holding each sample's
    embedding as a row and ``J_d = I - 11^T / d`` centring each embedding over its d features
    (as lm-polygraph does); eigenvalues <= 0 count as 1e-10.

    >>> round(eigenscore([[1.0, -1.0], [1.0, -1.0]]), 4)
    -2.7606
    """
    z = np.asarray(embeddings, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] == 0 or z.shape[1] == 0 or not np.all(np.isfinite(z)):
        raise ValueError(f"embeddings must be a non-empty finite K x d array, got shape "
                         f"{z.shape}")
    centred = z - z.mean(axis=1, keepdims=True)  # Z J_d, without the d x d matrix
    covariance = centred @ centred.T
    eigenvalues = eigh(covariance + alpha * np.eye(z.shape[0]), eigvals_only=True)
    return float(np.mean(np.log(np.where(eigenvalues > 0, eigenvalues, 1e-10))))
