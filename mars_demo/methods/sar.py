"""SAR (Duan et al. 2024): token and sentence relevance from a sentence-similarity
cross-encoder, the optional ``similarity`` model. Math: :mod:`mars_demo.core.sar`; what the
model said is saved as ``method_inputs["sar"]`` by :mod:`mars_demo.engine.stages.similarity`."""

from __future__ import annotations

from typing import Any, Mapping

from .base import method

_SAR = "Duan et al. 2024"
_NEEDS = ["samples", "similarity_model"]
_TOKENS, _SAMPLES = "token_similarities", "sample_similarity"  # the parts each reads


def saved_similarities(x) -> Mapping[str, Any]:
    """SAR's saved similarities, checked to be of these samples."""
    entry = x.saved["sar"]
    if entry.get("answers") is not None and list(entry["answers"]) != list(x.texts):
        raise ValueError("the saved SAR similarities are of other answers than these samples")
    return entry


def _token_sar(x, _):
    from ..core import sar

    return sar.token_sar(x.token_logprobs, saved_similarities(x)["token_similarities"])


def _sentence_sar(x, variant):
    from ..core import sar

    return sar.sentence_sar(x.sample_scores(variant), saved_similarities(x)["sample_similarity"])


def _sar(x, _):
    from ..core import sar

    entry = saved_similarities(x)
    return sar.sar(x.token_logprobs, entry["token_similarities"], entry["sample_similarity"])


METHODS = (
    method("token_sar", "TokenSAR",
           "token log-probs weighted by how much dropping each token changes the answer's "
           "meaning (a similarity model's verdict), averaged over the samples",
           _NEEDS + [_TOKENS], False, _SAR, _token_sar, "estimators/token_sar.py"),
    method("sentence_sar", "SentenceSAR",
           "sentence entropy with probability shifted between samples a similarity model finds "
           "alike", _NEEDS + [_SAMPLES], True, _SAR, _sentence_sar, "estimators/sentence_sar.py"),
    method("sar", "SAR",
           "SentenceSAR over TokenSAR's relevance-weighted scores (the paper's full method)",
           _NEEDS + [_TOKENS, _SAMPLES], False, _SAR, _sar, "estimators/sar.py"),
)
