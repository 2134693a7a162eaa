"""MARS's three measures (Bakman et al., ACL 2024, section 2), each under length-normalized and
MARS scoring: every analysis computes them (its ``uncertainty`` block), and they are methods
like the others (``--methods confidence``, the tables' rows). Math:
:mod:`mars_demo.core.uncertainty`.

- ``confidence``: minus the greedy answer's log score. Under LN scoring it is lm-polygraph's
  ``Perplexity`` (``estimators/perplexity.py``: minus the mean token log-prob), so that
  estimator is not computed twice.
- ``entropy``: minus the samples' mean log score (the paper's eq. 6; lm-polygraph's
  ``MonteCarloNormalizedSequenceEntropy`` under LN scoring).
- ``semantic_entropy``: the paper's eq. 8 over the meaning clusters.
"""

from __future__ import annotations

from .base import method

_MARS = "Bakman et al. 2024"


def _confidence(x, variant):
    from ..core import uncertainty

    return uncertainty.confidence(x.greedy_answer.scores[variant])


def _entropy(x, variant):
    from ..core import uncertainty

    return uncertainty.entropy(x.sample_scores(variant))


def _semantic_entropy(x, variant):
    from ..core import uncertainty

    return uncertainty.semantic_entropy(x.sample_scores(variant), x.cluster_ids)


METHODS = (
    method("confidence", "Confidence",
           "how improbable the greedy answer is: minus its log score (under LN scoring "
           "lm-polygraph's Perplexity, in log form)",
           ["greedy"], True, _MARS, _confidence, "estimators/perplexity.py"),
    method("entropy", "Entropy",
           "how improbable the sampled answers are on average: minus their mean log score "
           "(the paper's eq. 6)",
           ["samples"], True, _MARS, _entropy,
           "estimators/monte_carlo_normalized_sequence_entropy.py"),
    method("semantic_entropy", "Semantic entropy",
           "spread of the samples' probability over their meaning clusters (the paper's eq. 8)",
           ["samples"], True, "Kuhn et al. 2023; " + _MARS, _semantic_entropy),
)
