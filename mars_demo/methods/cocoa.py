"""CoCoA (Vashurin et al., NeurIPS 2025): the greedy answer's own uncertainty times how much the
samples disagree with it, by the similarity cross-encoder (the optional ``similarity`` model,
which SAR runs too; the greedy-to-sample similarities are saved in ``method_inputs["sar"]``
as ``greedy_similarity``). Math: :mod:`mars_demo.core.cocoa`; lm-polygraph
``estimators/cocoa.py``.

Under MARS scoring the PPL form uses the MARS log score and the MTE form the MARS-weighted token
entropy; the MSP form (the whole sequence's probability) has one value.
"""

from __future__ import annotations

from .base import method

_COCOA = "Vashurin et al. 2025"
_NEEDS = ["greedy", "samples", "similarity_model", "greedy_similarity"]


def _greedy_similarity(x):
    entry = x.saved["sar"]
    sims = entry.get("greedy_similarity")
    if sims is None:
        raise ValueError("the saved similarities hold none of the greedy answer with the "
                         "samples; score the answers again with a CoCoA method")
    if entry.get("answers") is not None and list(entry["answers"]) != list(x.texts):
        raise ValueError("the saved similarities are of other answers than these samples")
    if entry.get("greedy") is not None and entry["greedy"] != x.greedy_answer.text:
        raise ValueError("the saved similarities are of another greedy answer")
    return sims["forward"], sims["backward"]


def _msp(x, _):
    from ..core import cocoa, token_level

    return cocoa.cocoa(token_level.msp(x.greedy_answer.token_logprobs), *_greedy_similarity(x))


def _ppl(x, variant):
    from ..core import cocoa, uncertainty

    u = uncertainty.confidence(x.greedy_answer.scores[variant])
    return cocoa.cocoa(u, *_greedy_similarity(x))


def _mte(x, variant):
    from ..core import cocoa, token_level

    g = x.greedy_answer
    u = token_level.mean_token_entropy(g.token_entropies, g.weights(variant))
    return cocoa.cocoa(u, *_greedy_similarity(x))


METHODS = (
    method("cocoa_msp", "CoCoA (MSP)",
           "the greedy answer's negative log-probability times how much the samples differ "
           "from it (a similarity model's verdict)", _NEEDS, False, _COCOA, _msp,
           "estimators/cocoa.py"),
    method("cocoa_ppl", "CoCoA (PPL)",
           "the greedy answer's negative log score times how much the samples differ from it",
           _NEEDS, True, _COCOA, _ppl, "estimators/cocoa.py"),
    method("cocoa_mte", "CoCoA (MTE)",
           "the greedy answer's mean token entropy times how much the samples differ from it",
           _NEEDS + ["token_entropy"], True, _COCOA, _mte, "estimators/cocoa.py"),
)
