"""Kernel language entropy (Nikitin et al., NeurIPS 2024), from NLI probabilities.

"Kernel Language Entropy: Fine-grained Uncertainty Quantification for LLMs from Semantic
Similarities" (arXiv 2405.20003; reference code: AlexanderVNikitin/kernel-language-entropy).
The von Neumann entropy of a unit-trace positive semidefinite kernel over the m sampled answers:
a soft version of semantic entropy that sees how alike the meanings are, not only whether they
are equal. Uncertainty: higher = less trustworthy. It does not use the answers' scores.
"""

from __future__ import annotations

import numpy as np

from . import _validation as check
from .graph import nli_probabilities

HEAT_TIME = 0.3  # heat kernel's t: lm-polygraph's default (the reference code sweeps t)
# edge weight of each NLI verdict (entailment, neutral, contradiction), as in the paper
LABEL_WEIGHTS = (1.0, 0.5, 0.0)


def semantic_graph(nli, label_weights=LABEL_WEIGHTS) -> np.ndarray:
    """Weighted semantic graph of the paper: ``W_ij = w . nli[i, j] + w . nli[j, i]``.

    ``w`` weighs the (entailment, neutral, contradiction) probabilities, (1, 0.5, 0) in the
    paper, so ``W_ij`` lies in [0, 2]. With probabilities this is lm-polygraph's graph; with
    one-hot verdicts (the arg-max labels) it is the reference code's "manual" weighted graph.
    The diagonal plays no part in the Laplacian ``D - W``. Unitless; higher = more alike.

    Example: entailment one way, neutral the other: 1 + 0.5.

    >>> float(semantic_graph([[[1, 0, 0], [1, 0, 0]], [[0, 1, 0], [1, 0, 0]]])[0, 1])
    1.5
    """
    probabilities = nli_probabilities(nli)
    weights = check.nonnegative_vector(label_weights, "label_weights")
    if weights.size != 3:
        raise ValueError(
            f"label_weights must hold 3 weights (entailment, neutral, contradiction), "
            f"got {label_weights!r}"
        )
    one_way = probabilities @ weights
    return one_way + one_way.T


def kernel_language_entropy(nli, t: float = HEAT_TIME, label_weights=LABEL_WEIGHTS) -> float:
    """KLE with the heat kernel of the semantic graph (Nikitin et al. 2024, KLE(K_heat)).

    1. ``W`` = :func:`semantic_graph` (weights (1, 0.5, 0) summed over both directions);
    2. ``L = D - W``, the graph Laplacian (``D = diag(W 1)``);
    3. ``K = expm(-t L)``, the heat kernel, positive definite;
    4. unit trace: ``K~_ij = K_ij / sqrt(K_ii K_jj) / m``;
    5. ``KLE = VNE(K~) = -trace(K~ log K~) = -sum_k lambda_k log lambda_k`` over its
       eigenvalues.

    In nats (natural log), within [0, log m]: log m when no two answers are related (W = 0,
    K~ = I/m); it falls towards 0 as the answers entail each other and t grows (exactly 0 for
    one answer). Higher = less trustworthy. lm-polygraph's ``KernelLanguageEntropy()`` is the
    same with, by default, the result divided by log m (``scale=True``; for a fixed m that
    changes no ranking) and eigenvalues below 1e-8 left out of the sum (here every positive
    eigenvalue counts).

    Args:
        nli: (m, m, 3) NLI probabilities (entailment, neutral, contradiction) for every ordered
            pair, premise first; see :mod:`mars_demo.core.graph`.
        t: heat kernel time, > 0 (lm-polygraph's default 0.3). Larger t spreads similarity
            further along the graph, so related answers look more alike.
        label_weights: weights of (entailment, neutral, contradiction), each >= 0.

    Example: two answers that contradict each other both ways have W = 0, K = I and
    K~ = I/2: entropy log 2.

    >>> c = [0, 0, 1]
    >>> round(kernel_language_entropy([[c, c], [c, c]]), 4)
    0.6931
    """
    t = check.positive(t, "t")
    graph = semantic_graph(nli, label_weights)
    laplacian = np.diag(graph.sum(axis=1)) - graph
    mu, vectors = np.linalg.eigh(laplacian)
    # expm(-t L) from the eigen-decomposition of the symmetric L. L is positive semidefinite
    # with an exact eigenvalue 0 per connected part of the graph; rounding leaves them at
    # +-1e-16, which a large t would turn into exp(+huge) or 0. Snap them to 0. Their rounding
    # is that of L's entries, D - W: a few ulps of the largest degree (the graph's self-loops
    # make D and W much larger than L itself), so the tolerance scales with it, not with L's
    # largest eigenvalue (which, for two answers with self-loops of 2 and a link of 0.07, left
    # an exact 0 at 1.4e-16, above 0.14 * 2 ulps: exp(-t * 1.4e-16) then underflowed for a
    # huge t and the kernel's diagonal was 0).
    scale = max(float(mu.max()), float(graph.sum(axis=1).max()), 0.0)
    rank_tolerance = scale * mu.size * np.finfo(np.float64).eps
    mu = np.where(mu <= rank_tolerance, 0.0, mu)
    with np.errstate(under="ignore"):
        kernel = (vectors * np.exp(-t * mu)) @ vectors.T
    diagonal = np.sqrt(np.diag(kernel))
    unit_trace = kernel / np.outer(diagonal, diagonal) / kernel.shape[0]
    eigenvalues = np.linalg.eigvalsh((unit_trace + unit_trace.T) / 2)
    positive = eigenvalues[eigenvalues > 0]
    return float(max(0.0, -np.sum(positive * np.log(positive))))
