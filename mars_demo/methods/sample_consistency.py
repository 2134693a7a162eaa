"""Sample consistency: how much the sampled answers agree, from their meaning clusters or their
words. Math: :mod:`mars_demo.core.uncertainty`, :mod:`mars_demo.core.graph` (``num_sets``),
:mod:`mars_demo.core.lexical`."""

from __future__ import annotations

from .base import method

_LIN = "Lin, Trivedi and Sun 2023"


def _normalized(x, variant):
    from ..core import uncertainty

    return uncertainty.semantic_entropy_normalized(x.sample_scores(variant), x.cluster_ids)


def _discrete(x, _):
    from ..core import uncertainty

    return uncertainty.semantic_entropy_discrete(x.cluster_ids)


def _num_sets(x, _):
    from ..core import graph

    return graph.num_sets(x.cluster_ids)


def _lexical(x, _):
    from ..core import lexical

    return lexical.lexical_similarity(x.texts)


METHODS = (
    method("semantic_entropy_normalized", "Semantic entropy, normalized",
           "entropy of the meaning clusters' probability shares, renormalized over the samples",
           ["samples"], True, "Farquhar et al. 2024", _normalized,
           "estimators/semantic_entropy.py"),
    method("semantic_entropy_discrete", "Semantic entropy, discrete",
           "entropy of how many samples fall in each meaning cluster (no scores)",
           ["samples"], False, "Farquhar et al. 2024", _discrete,
           "estimators/semantic_entropy.py"),
    method("num_sets", "Number of meanings",
           "how many meaning clusters the samples form", ["samples"], False, _LIN, _num_sets,
           "estimators/num_sem_sets.py"),
    method("lexical_similarity", "Lexical similarity",
           "how little the samples share their words (negated mean ROUGE-L)",
           ["samples"], False, "Fomicheva et al. 2020; Kuhn et al. 2023", _lexical,
           "estimators/lexical_similarity.py"),
)
