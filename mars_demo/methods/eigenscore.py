"""EigenScore (Chen et al., ICLR 2024, "INSIDE"): how spread the samples' middle-layer
embeddings are. Opt-in and in-process only: one extra LLM pass over each sample
(:mod:`mars_demo.engine.stages.embeddings`) takes the hidden state of its last token at the
middle layer; the embeddings are saved (``method_inputs["eigenscore"]``), so ``score``
recomputes it without the model. Math: :mod:`mars_demo.core.density`; lm-polygraph
``estimators/eigenscore.py``, alpha = 1e-3."""

from __future__ import annotations

from .base import method


def _eigenscore(x, _):
    from ..core import density

    entry = x.saved["eigenscore"]
    if list(entry.get("answers") or []) != list(x.texts):
        raise ValueError("the saved embeddings are of other answers than these samples")
    return density.eigenscore(entry["embeddings"])


METHODS = (
    method("eigenscore", "EigenScore",
           "how spread the samples' internal embeddings are (log-determinant of their "
           "covariance; an extra LLM pass, in-process only)",
           ["samples", "embeddings"], False, "Chen et al. 2024", _eigenscore,
           "estimators/eigenscore.py"),
)
