"""The uncertainty methods: which exist, what each reads, and how each is computed from what an
analysis holds (see ``docs/methods.md`` for each formula, its source and its peers).

A method is one :class:`Method` entry (id, label, one-line explanation, source, what it reads,
whether it is scored, its compute function) in the file of its family, beside the math it
calls (:mod:`mars_demo.core`); :mod:`.registry` collects them. Every method is an uncertainty
(higher = less trustworthy, natural logs). A method that reads a sequence score (``scored``)
is computed twice, with length-normalized and with MARS scores: ``{"length_normalized": x,
"mars": y}``; any other gives ``{"value": x}``.

:func:`compute_methods` reads only what a saved analysis JSON holds (the answers with their
tokens and scores, the meaning clusters, the NLI probabilities and what each optional model or
pass saved, ``method_inputs``), so a saved analysis gives the same values again without any
model.

>>> parse_methods("eigv, degree")
('eigv', 'degree')
>>> label("semantic_entropy_normalized", "mars")
'Semantic entropy, normalized (MARS)'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..optional import OPTIONAL_MODELS, OWN_MODELS, OptionalModel
from .base import (
    NEEDS,
    SCORED_VARIANTS,
    VARIANTS,
    AnswerInputs,
    Method,
    MethodInputs,
    Need,
    answer_inputs,
    inputs_of,
    method,
)
from .p_true import llm_pass_prompt
from .registry import (
    FAMILIES,
    FREE,
    METHODS,
    check_needs,
    compute_from,
    compute_methods,
    free_methods,
    is_free,
    label,
    parse_methods,
    row_label,
    values_of,
)

#: The models every analysis runs (the LLM that made the answers, the importance and NLI models
#: that scored them), as its recorded settings name them.
BASE_MODELS = ("llm", "importance", "nli")

#: The three measures every analysis computes (its ``uncertainty`` block), methods like the
#: others.
MEASURES = ("confidence", "entropy", "semantic_entropy")


def optional_models(method_ids: Sequence[str] | None) -> tuple[str, ...]:
    """The optional models with a model of their own (Settings fields, :data:`OPTIONAL_MODELS`
    order) that the methods ``method_ids`` run; unknown ids are ignored, None is :data:`FREE`
    (which runs none).

    >>> optional_models(["eigv", "sar"]), optional_models(None)
    (('similarity',), ())
    """
    needs = set().union(*(METHODS[m].needs for m in method_ids or () if m in METHODS))
    return tuple(m.field for m in OPTIONAL_MODELS if m.own and m.need in needs)


def models_of(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The models an analysis used, from its recorded ``settings``: :data:`BASE_MODELS`, then
    each optional model its methods (``settings["methods"]``) ran, and no other.

    >>> models_of({"llm": "a", "importance": "b", "nli": "c", "similarity": "d",
    ...            "methods": ["sar"]})
    {'llm': 'a', 'importance': 'b', 'nli': 'c', 'similarity': 'd'}
    >>> models_of({"llm": "a", "similarity": "d", "methods": ["eigv"]})
    {'llm': 'a', 'importance': None, 'nli': None}
    """
    methods = settings.get("methods")
    used = optional_models(methods if isinstance(methods, (list, tuple)) else None)
    return {k: settings.get(k) for k in BASE_MODELS + used}


__all__ = [
    "AnswerInputs", "BASE_MODELS", "FAMILIES", "FREE", "MEASURES", "METHODS", "Method",
    "MethodInputs", "NEEDS", "Need", "OPTIONAL_MODELS", "OWN_MODELS", "OptionalModel",
    "SCORED_VARIANTS",
    "VARIANTS", "answer_inputs", "check_needs", "compute_from", "compute_methods",
    "free_methods", "inputs_of", "is_free", "label", "llm_pass_prompt", "method", "models_of",
    "optional_models", "parse_methods", "row_label", "values_of",
]
