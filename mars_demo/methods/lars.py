"""LARS (Yaldiz et al. 2024): a scorer trained on correctness, the optional ``lars`` model.
Math: :mod:`mars_demo.core.lars`; its logits are saved as ``method_inputs["lars"]`` by
:meth:`mars_demo.optional.lars.LarsModel.read` (the greedy answer's, then the samples')."""

from __future__ import annotations

from .base import method

_LARS = "Yaldiz et al. 2024"


def saved_logits(x) -> list[float]:
    """LARS's saved logits (the greedy answer's, then the samples'), checked to be of these
    samples."""
    entry = x.saved["lars"]
    answers, logits = list(entry.get("answers") or []), list(entry.get("logits") or [])
    if len(logits) != len(answers) or answers[1:] != list(x.texts):
        raise ValueError("the saved LARS logits are not of the greedy answer and these samples")
    return logits


def _lars(x, _):
    from ..core import lars

    return -lars.lars_log_score(saved_logits(x)[0])


def _sample_scores(x) -> list[float]:
    from ..core import lars

    return [lars.lars_log_score(v) for v in saved_logits(x)[1:]]


def _entropy(x, _):
    from ..core import uncertainty

    return uncertainty.entropy(_sample_scores(x))


def _semantic_entropy(x, _):
    from ..core import uncertainty

    return uncertainty.semantic_entropy(_sample_scores(x), x.cluster_ids)


METHODS = (
    method("lars", "LARS",
           "how little a scorer trained on correctness (LARS) believes the answer, read from "
           "its tokens and their probabilities", ["lars_model"], False, _LARS, _lars),
    method("lars_entropy", "Entropy (LARS)",
           "entropy of the samples with LARS's log-probability of being correct as each "
           "sample's score", ["samples", "lars_model"], False, _LARS, _entropy),
    method("lars_semantic_entropy", "Semantic entropy (LARS)",
           "semantic entropy (the paper's eq. 8) with LARS's log-probability of being correct "
           "as each sample's score", ["samples", "lars_model"], False, _LARS,
           _semantic_entropy),
)
