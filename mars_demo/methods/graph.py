"""Graph measures over the samples' NLI probabilities: Lin, Trivedi and Sun's spectral measures
(:mod:`mars_demo.core.graph`) and kernel language entropy (:mod:`mars_demo.core.kernel`)."""

from __future__ import annotations

from .base import method

_LIN = "Lin, Trivedi and Sun 2023"
_NLI = ["samples", "nli_probabilities"]


def _lin(name: str, affinity: str):
    def compute(x, _):
        from ..core import graph

        return getattr(graph, name)(x.nli_probabilities, affinity=affinity)
    return compute


def _kle(x, _):
    from ..core import kernel

    return kernel.kernel_language_entropy(x.nli_probabilities)


METHODS = (
    method("eigv", "Eigenvalue (entail.)",
           "a soft count of meanings from the entailment graph among the samples",
           _NLI, False, _LIN, _lin("eigv", "entail"), "estimators/eig_val_laplacian.py"),
    method("eigv_contra", "Eigenvalue (contra.)",
           "a soft count of meanings from the no-contradiction graph among the samples",
           _NLI, False, _LIN, _lin("eigv", "contra"), "estimators/eig_val_laplacian.py"),
    method("degree", "Degree (entail.)",
           "how little the samples entail each other on average", _NLI, False, _LIN,
           _lin("degree", "entail"), "estimators/deg_mat.py"),
    method("degree_contra", "Degree (contra.)",
           "how much the samples contradict each other on average", _NLI, False, _LIN,
           _lin("degree", "contra"), "estimators/deg_mat.py"),
    method("eccentricity", "Eccentricity (entail.)",
           "how far apart the samples lie in a spectral embedding of the entailment graph",
           _NLI, False, _LIN, _lin("eccentricity", "entail"), "estimators/eccentricity.py"),
    method("eccentricity_contra", "Eccentricity (contra.)",
           "how far apart the samples lie in a spectral embedding of the no-contradiction graph",
           _NLI, False, _LIN, _lin("eccentricity", "contra"), "estimators/eccentricity.py"),
    method("kernel_language_entropy", "Kernel language entropy",
           "von Neumann entropy of a heat kernel over the samples' NLI graph",
           _NLI, False, "Nikitin et al. 2024", _kle, "estimators/kernel_language_entropy.py"),
)
