"""Graph uncertainties over the sampled answers from NLI probabilities (Lin, Trivedi and Sun).

"Generating with Confidence: Uncertainty Quantification for Black-box Large Language Models"
(Lin, Trivedi and Sun, TMLR 2024, arXiv 2305.19187; reference code: zlin7/UQ-NLG). The m sampled
answers are the nodes of a weighted graph whose edge weights are NLI similarities; how spread out
that graph is measures uncertainty. Every function returns an uncertainty: higher = less
trustworthy. None uses the answers' scores (they are black-box measures).

Input: ``nli[i, j]`` holds the NLI model's probabilities ``(entailment, neutral, contradiction)``
(in this order, :data:`~mars_demo.core.clustering.NLI_LABELS`) with answer i as premise and answer
j as hypothesis, for every ORDERED pair, so ``nli`` has shape (m, m, 3) and each ``nli[i, j]``
sums to 1. Models order their labels differently (``microsoft/deberta-large-mnli``: contradiction,
neutral, entailment): reorder by ``id2label`` before calling. The diagonal ``nli[i, i]`` is read
as given: the reference code sets every self-similarity to 1, i.e. ``nli[i, i] = (1, 0, 0)``;
lm-polygraph puts the model's own verdict of each answer against itself there.

Similarity ``a_ij`` (``affinity``), symmetrized as ``W_ij = (a_ij + a_ji) / 2``:

- ``"entail"``: ``a_ij = p_entail(i, j)``, so ``W = (E + E^T) / 2``;
- ``"contra"``: ``a_ij = 1 - p_contra(i, j)``, so ``W = 1 - (C + C^T) / 2``.

``temperature`` T sharpens (T < 1) or flattens (T > 1) each probability triple before use, as
the reference code's ``softmax(logits / T)``: from probabilities, ``p^(1/T) / sum p^(1/T)``, which
is the same thing since ``log p`` are the logits up to a constant. T = 1 (default, as
lm-polygraph) leaves them unchanged; the reference code's default is T = 3.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import connected_components

from . import _validation as check

AFFINITIES = ("entail", "contra")  # similarity from entailment, or from (1 - contradiction)
ECCENTRICITY_THRESHOLD = 0.9  # eigenvectors of eigenvalues below this embed the answers
PROBABILITY_TOLERANCE = 1e-6  # how far each NLI probability triple may stray from summing to 1


def nli_probabilities(nli, name: str = "nli") -> np.ndarray:
    """Return ``nli`` as a float64 (m, m, 3) array of probability triples, or raise ValueError.

    Each ``nli[i, j]`` must be finite, within [0, 1] and sum to 1 (tolerance 1e-6), in the order
    (entailment, neutral, contradiction).
    """
    try:
        array = np.asarray(nli, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as error:
        raise ValueError(f"{name} must be an (m, m, 3) array of numbers, got {nli!r}") from error
    if array.ndim != 3 or array.shape[2] != 3 or array.shape[0] != array.shape[1]:
        raise ValueError(
            f"{name} must have shape (m, m, 3): (entailment, neutral, contradiction) for every "
            f"ordered pair of m answers; got shape {array.shape}"
        )
    if array.shape[0] == 0:
        raise ValueError(f"{name} is empty; expected at least one answer")
    bad = np.argwhere(~np.isfinite(array) | (array < 0) | (array > 1))
    if bad.size:
        i, j, k = bad[0]
        raise ValueError(
            f"{name}[{i}, {j}, {k}] = {float(array[i, j, k])} is not a probability in [0, 1]"
        )
    sums = array.sum(axis=2)
    bad = np.argwhere(np.abs(sums - 1) > PROBABILITY_TOLERANCE)
    if bad.size:
        i, j = bad[0]
        raise ValueError(
            f"{name}[{i}, {j}] = {array[i, j].tolist()} sums to {float(sums[i, j])}, expected 1 "
            f"(entailment, neutral, contradiction probabilities)"
        )
    return array


def similarity_matrix(nli, affinity: str = "entail", temperature: float = 1.0) -> np.ndarray:
    """Symmetric similarity ``W`` among the answers, Lin et al. (``W_ij`` in [0, 1]).

    ``W_ij = (a_ij + a_ji) / 2`` with ``a_ij = p_entail(i, j)`` (``"entail"``) or
    ``1 - p_contra(i, j)`` (``"contra"``); see the module docstring for ``nli`` and
    ``temperature``. Unitless; higher = more alike.

    Example: two answers that entail each other with probability 0.8 and 0.6.

    >>> nli = [[[1, 0, 0], [.8, .2, 0]], [[.6, .3, .1], [1, 0, 0]]]
    >>> similarity_matrix(nli).round(4).tolist()
    [[1.0, 0.7], [0.7, 1.0]]
    >>> similarity_matrix(nli, "contra").round(4).tolist()
    [[1.0, 0.95], [0.95, 1.0]]
    """
    probabilities = _tempered(nli_probabilities(nli), temperature)
    affinity = check.one_of(affinity, AFFINITIES, "affinity")
    if affinity == "entail":
        a = probabilities[:, :, 0]
    else:
        a = 1.0 - probabilities[:, :, 2]
    return (a + a.T) / 2


def eigv(nli, affinity: str = "entail", temperature: float = 1.0) -> float:
    """Sum of the graph Laplacian's eigenvalues, ``U_EigV`` (Lin et al.).

    ``U_EigV = sum_k max(0, 1 - lambda_k)`` over the eigenvalues of the symmetric normalized
    Laplacian ``L = I - D^(-1/2) W D^(-1/2)``, with ``W`` from :func:`similarity_matrix` and
    ``D = diag(W 1)`` (row sums, the diagonal of ``W`` included). A continuous count of meaning
    clusters: in [1, m] when every ``W_ii`` > 0; 1 when all answers are alike, m when none are.
    Unitless; higher = less trustworthy. Same as lm-polygraph's ``EigValLaplacian``.

    Args:
        nli: (m, m, 3) NLI probabilities, (entailment, neutral, contradiction).
        affinity: ``"entail"`` or ``"contra"``.
        temperature: a number > 0; 1 leaves the probabilities as they are.

    Raises:
        ValueError: bad ``nli``; an answer with zero similarity to every answer, itself
            included (its degree is 0, so ``D^(-1/2)`` does not exist).

    Example: two answers that fully entail each other form one cluster; two that do not at all
    form two.

    >>> same = [[[1, 0, 0], [1, 0, 0]], [[1, 0, 0], [1, 0, 0]]]
    >>> apart = [[[1, 0, 0], [0, 0, 1]], [[0, 0, 1], [1, 0, 0]]]
    >>> round(eigv(same), 4), round(eigv(apart), 4)
    (1.0, 2.0)
    """
    eigenvalues = np.linalg.eigvalsh(
        _normalized_laplacian(similarity_matrix(nli, affinity, temperature))
    )
    return float(np.maximum(0.0, 1.0 - eigenvalues).sum())


def degree(nli, affinity: str = "entail", temperature: float = 1.0) -> float:
    """Mean dissimilarity from the degree matrix, ``U_Deg`` (Lin et al.).

    ``U_Deg = trace(m I - D) / m^2 = 1 - (1/m^2) sum_ij W_ij``, with ``D = diag(W 1)`` and ``W``
    from :func:`similarity_matrix` (its diagonal included). In [0, 1] for similarities in [0, 1];
    0 when all answers are alike. Unitless; higher = less trustworthy. Same as lm-polygraph's
    ``DegMat``. (The reference code divides by m instead of m^2, which for a fixed m only
    rescales.)

    Example: two answers with similarity 0.5 and self-similarity 1:
    1 - (1 + 0.5 + 0.5 + 1) / 4 = 0.25.

    >>> half = [[[1, 0, 0], [.5, .5, 0]], [[.5, .5, 0], [1, 0, 0]]]
    >>> degree(half)
    0.25
    """
    similarity = similarity_matrix(nli, affinity, temperature)
    return float(max(0.0, 1.0 - similarity.sum() / similarity.size))


def eccentricity(
    nli,
    affinity: str = "entail",
    threshold: float = ECCENTRICITY_THRESHOLD,
    temperature: float = 1.0,
) -> float:
    """Spread of the answers' spectral embeddings, ``U_Ecc`` (Lin et al.).

    Take the eigenvectors ``u_1..u_k`` of the normalized Laplacian (see :func:`eigv`) whose
    eigenvalues are below ``threshold`` (0.9, as the reference code and lm-polygraph); answer j
    is embedded as ``v_j = (u_1[j], ..., u_k[j])``. Centre the embeddings,
    ``v'_j = v_j - (1/m) sum_l v_l``; then ``U_Ecc = || [v'_1, ..., v'_m] ||`` (Frobenius norm).
    The value does not depend on which orthonormal eigenvectors are chosen within an
    eigenspace. 0 when all answers are alike; ``sqrt(m - 1)`` when none are. Unitless;
    higher = less trustworthy. Same as lm-polygraph's ``Eccentricity``.

    Args:
        nli: (m, m, 3) NLI probabilities, (entailment, neutral, contradiction).
        affinity: ``"entail"`` or ``"contra"``.
        threshold: eigenvalue cut, > 0 (the normalized Laplacian's eigenvalues lie in [0, 2]).
        temperature: a number > 0; 1 leaves the probabilities as they are.

    Example: three answers, none alike: sqrt(3 - 1).

    >>> e, c = [1, 0, 0], [0, 0, 1]
    >>> round(eccentricity([[e, c, c], [c, e, c], [c, c, e]]), 4)
    1.4142
    """
    threshold = check.positive(threshold, "threshold")
    laplacian = _normalized_laplacian(similarity_matrix(nli, affinity, temperature))
    eigenvalues, eigenvectors = np.linalg.eigh(laplacian)
    embedding = eigenvectors[:, eigenvalues < threshold]  # row j: answer j's v_j
    centred = embedding - embedding.mean(axis=0, keepdims=True)
    return float(np.linalg.norm(centred))


def num_sets(cluster_ids) -> int:
    """Number of meaning clusters among the answers, ``U_NumSet`` (Lin et al.; Kuhn et al.).

    The count of distinct ids, e.g. from :func:`mars_demo.core.clustering.semantic_clusters`
    (this project's clusters, the ones semantic entropy uses) or from :func:`entailment_sets`
    (lm-polygraph's rule). In [1, m]; higher = less trustworthy.

    Example: clusters [0, 1, 1, 2] are three meanings.

    >>> num_sets([0, 1, 1, 2])
    3
    """
    return int(np.unique(check.index_vector(cluster_ids, "cluster_ids")).size)


def entailment_sets(nli) -> list[int]:
    """Cluster id per answer by lm-polygraph's ``NumSemSets`` rule, from NLI probabilities.

    Answers i and j are linked when ``p_entail > p_contra`` in BOTH directions; the clusters are
    the connected components of those links (so the relation is closed transitively, unlike
    :func:`~mars_demo.core.clustering.semantic_clusters`' first-member algorithm). Ids are 0, 1,
    2, ... in order of first appearance. ``num_sets(entailment_sets(nli))`` is lm-polygraph's
    ``NumSemSets``. The reference code of Lin et al. instead clusters like Kuhn et al.: neither
    direction's most probable label is contradiction, all pairs, over the distinct texts; that
    is :func:`~mars_demo.core.clustering.semantic_clusters` with ``rule="lenient"`` and
    ``algorithm="all-pairs"`` on the arg-max labels.

    Example: 0~1 and 1~2 are linked, 0 and 2 contradict: one component.

    >>> e, n, c = [1, 0, 0], [.2, .8, 0], [0, 0, 1]
    >>> entailment_sets([[e, e, c], [e, e, n], [c, n, e]])
    [0, 0, 0]
    """
    probabilities = nli_probabilities(nli)
    forward = probabilities[:, :, 0] > probabilities[:, :, 2]
    linked = forward & forward.T
    _, labels = connected_components(linked, directed=False)
    renumber: dict[int, int] = {}
    return [renumber.setdefault(int(label), len(renumber)) for label in labels]


def _tempered(probabilities: np.ndarray, temperature) -> np.ndarray:
    """``softmax(log p / T)`` of every triple, computed as ``p^(1/T)`` renormalized."""
    temperature = check.positive(temperature, "temperature")
    if temperature == 1.0:
        return probabilities
    # Scale by each triple's largest entry first, so p^(1/T) cannot underflow to all zeros.
    scaled = probabilities / probabilities.max(axis=2, keepdims=True)
    with np.errstate(under="ignore"):
        powered = scaled ** (1.0 / temperature)
    return powered / powered.sum(axis=2, keepdims=True)


def _normalized_laplacian(similarity: np.ndarray) -> np.ndarray:
    """``I - D^(-1/2) W D^(-1/2)`` with ``D`` the row sums of ``W``; raises on a zero degree."""
    degrees = similarity.sum(axis=1)
    isolated = np.flatnonzero(degrees <= 0)
    if isolated.size:
        i = isolated[0]
        raise ValueError(
            f"answer {i} has similarity 0 to every answer, itself included (degree "
            f"{float(degrees[i])}), so the normalized graph Laplacian is undefined; give a "
            f"self-similarity, e.g. nli[{i}, {i}] = (1, 0, 0)"
        )
    inverse_sqrt = 1.0 / np.sqrt(degrees)
    laplacian = np.eye(similarity.shape[0]) - inverse_sqrt[:, None] * similarity * inverse_sqrt
    return (laplacian + laplacian.T) / 2  # exactly symmetric for eigh
