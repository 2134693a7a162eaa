"""Semantic Density (Qiu and Miikkulainen, NeurIPS 2024): how much of the samples' probability
lies near the greedy answer in meaning. The NLI model compares "question greedy answer" with
"question sample" for each sample (the extra NLI pairs, saved as
``method_inputs["greedy_nli"]`` by the NLI stage (:mod:`mars_demo.engine.stages.nli`, in
the same batched pass as the samples' pairs), so ``score``
recomputes it without models). Math: :mod:`mars_demo.core.density`; lm-polygraph
``estimators/semantic_density.py`` (``SemanticDensity``, question prepended)."""

from __future__ import annotations

from .base import method


def saved_greedy_nli(x) -> list:
    entry = x.saved["greedy_nli"]
    if list(entry.get("answers") or []) != list(x.texts):
        raise ValueError("the saved greedy-to-sample NLI is of other answers than these samples")
    if entry.get("greedy") is not None and entry["greedy"] != x.greedy_answer.text:
        raise ValueError("the saved greedy-to-sample NLI is of another greedy answer")
    return entry["probabilities"]


def _semantic_density(x, variant):
    from ..core import density

    return density.semantic_density(x.greedy_answer.scores[variant], x.sample_scores(variant),
                                    saved_greedy_nli(x), x.texts)


METHODS = (
    method("semantic_density", "Semantic density",
           "how little of the samples' probability lies close in meaning to the greedy answer "
           "(NLI of the greedy answer against each sample)",
           ["greedy", "samples", "greedy_nli"], True, "Qiu and Miikkulainen 2024",
           _semantic_density, "estimators/semantic_density.py"),
)
