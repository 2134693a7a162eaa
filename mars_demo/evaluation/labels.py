"""The names of the uncertainty measures and methods in evaluation tables, figures and pages.

One function, :func:`row_label`, names a row ``(name, variant)`` of an evaluation (a measure
with its scoring, or a method of issue 19 with its variant). The method registry
(``mars_demo.methods``, being written beside this) names its methods too; the two are to be
one list when both exist. Standard library only, so the page can use it.
"""

from __future__ import annotations

#: short names of the measures and methods (issue 19's ids)
_NAMES = {
    "confidence": "Confidence", "entropy": "Entropy", "semantic_entropy": "Semantic entropy",
    "semantic_entropy_normalized": "Semantic entropy, normalized",
    "semantic_entropy_discrete": "Semantic entropy, discrete",
    "num_sets": "Number of meaning sets",
    "eigv": "Eigenvalue (entail.)", "eigv_contra": "Eigenvalue (contra.)",
    "degree": "Degree (entail.)", "degree_contra": "Degree (contra.)",
    "eccentricity": "Eccentricity (entail.)", "eccentricity_contra": "Eccentricity (contra.)",
    "lexical_similarity": "Lexical similarity",
    "kernel_language_entropy": "Kernel language entropy",
    "token_sar": "TokenSAR", "sentence_sar": "SentenceSAR", "sar": "SAR", "p_true": "P(True)",
    "lars": "LARS",
}
_VARIANT_SUFFIX = {"length_normalized": " (LN)", "mars": " (MARS)", "value": ""}


def row_label(name: str, variant: str) -> str:
    """"Eigenvalue (entail.)", "Semantic entropy, normalized (MARS)", "Confidence (LN)"; an
    id this table does not know is shown in words."""
    text = _NAMES.get(name, name.replace("_", " "))
    return text + _VARIANT_SUFFIX.get(variant, f" ({variant.replace('_', ' ')})")
