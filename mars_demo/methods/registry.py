"""The registry: every method of every family file, by id, and the one way to compute them.

A family file (:data:`FAMILIES`) declares its methods in a tuple ``METHODS``; the registry
reads them in that order. Everything that lists, parses, labels or computes methods (the
command line's ``--methods``, the analysis JSON, ``score --methods-only``, ``evaluate``'s table,
the page's panel, the docs' list) reads :data:`METHODS`, so a new entry in a family file
reaches all of them.

>>> parse_methods("eigv, degree")
('eigv', 'degree')
>>> label("semantic_entropy_normalized", "mars")
'Semantic entropy, normalized (MARS)'
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from typing import Any, Mapping, Sequence

from ..optional import OPTIONAL_MODELS
from .base import NEEDS, SCORED_VARIANTS, Method, MethodInputs, Need, inputs_of

#: The family files, in the order their methods are listed: those of every analysis, the
#: extra LLM pass's, each optional model's (its declaration's ``family``, :mod:`mars_demo.optional`)
#: and EigenScore's.
FAMILIES = ("measures", "sample_consistency", "graph", "token_level", "cocoa", "density",
            "p_true", *(m.family for m in OPTIONAL_MODELS), "eigenscore")

for _model in OPTIONAL_MODELS:  # what each optional model saves is a need of its methods,
    _fix = (f"ask again (or score its answers again) with --methods {{ids}}, which runs the "
            f"{_model.label} model" + (f" ({_model.option})" if _model.own else ""))
    NEEDS.setdefault(_model.need, Need(
        _model.need, False,
        (lambda key: lambda x: bool(x.saved.get(key)))(_model.saved), _model.holds, _fix))
    for _part, _holds in _model.parts:  # and each part of it that only some of them read
        NEEDS.setdefault(_part, Need(
            _part, False,
            (lambda key, part: lambda x: (x.saved.get(key) or {}).get(part) is not None)(
                _model.saved, _part), _holds, _fix))


def _load() -> dict[str, Method]:
    out: dict[str, Method] = {}
    for family in FAMILIES:
        module = importlib.import_module(f"{__package__}.{family}")
        for m in module.METHODS:
            if m.id in out:
                raise ValueError(f"the method {m.id!r} is declared twice ({family})")
            unknown = m.needs - set(NEEDS)
            if unknown:
                raise ValueError(f"{m.id} needs {sorted(unknown)}, which no analysis holds")
            out[m.id] = dataclasses.replace(m, family=family)
    return out


#: Every method, by id, in :data:`FAMILIES` order.
METHODS: dict[str, Method] = _load()


def is_free(method: Method) -> bool:
    """Whether a method reads nothing beyond what every analysis computes."""
    return all(NEEDS[n].free for n in method.needs)


def free_methods() -> tuple[str, ...]:
    """The ids of the methods that need no extra model or pass, in registry order."""
    return tuple(m.id for m in METHODS.values() if is_free(m))


#: The methods computed when none are asked for: all that need no extra model or pass.
FREE: tuple[str, ...] = free_methods()


def parse_methods(text_or_list: str | Sequence[str]) -> tuple[str, ...]:
    """Method ids from ``"id,id,..."`` (spaces allowed) or a list of ids, in the order given,
    each once. Raises ``ValueError`` naming an unknown id and listing the known ones.

    >>> parse_methods(["num_sets", "eigv", "num_sets"])
    ('num_sets', 'eigv')
    """
    if isinstance(text_or_list, str):
        items = text_or_list.split(",")
    elif isinstance(text_or_list, (list, tuple)):
        items = list(text_or_list)
    else:
        raise ValueError(
            f"methods must be method ids separated by commas or a list of ids; got "
            f"{type(text_or_list).__name__}"
        )
    ids: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"methods must be method ids (text); got {item!r}")
        name = item.strip()
        if not name:
            continue
        if name not in METHODS:
            shown = name if len(name) <= 40 else name[:37] + "..."
            raise ValueError(f"unknown method {shown!r}; known: {', '.join(METHODS)}")
        if name not in ids:
            ids.append(name)
    if not ids:
        raise ValueError(f"methods is empty; name at least one of {', '.join(METHODS)}")
    return tuple(ids)


_SUFFIX = {"length_normalized": " (LN)", "mars": " (MARS)", "value": ""}


def label(method_id: str, variant: str) -> str:
    """The name of one method's value in a table: the method's label, with "(LN)" or "(MARS)"
    for the two scorings of a scored method.

    >>> label("eigv", "value"), label("semantic_entropy", "length_normalized")
    ('Eigenvalue (entail.)', 'Semantic entropy (LN)')
    """
    method = _method(method_id)
    if variant not in method.variants:
        raise ValueError(
            f"{method_id} has the variants {', '.join(method.variants)}; got {variant!r}"
        )
    return method.label + _SUFFIX[variant]


def row_label(name: str, variant: str) -> str:
    """:func:`label`, and for an id or a variant the registry does not know (a run made by a
    later version) its words.

    >>> row_label("confidence", "length_normalized"), row_label("new_one", "value")
    ('Confidence (LN)', 'new one')
    >>> row_label("p_true", "raw")
    'P(True) (raw)'
    """
    text = METHODS[name].label if name in METHODS else name.replace("_", " ")
    return text + _SUFFIX.get(variant, f" ({variant.replace('_', ' ')})")


def compute_methods(result: Any, ids: Sequence[str] | str,
                    end_token: str | None = None) -> dict[str, dict[str, float]]:
    """``{method id: {variant: value}}`` of the methods ``ids`` for one analysis (an
    :class:`~mars_demo.result.AnalysisResult` or its JSON), from what it holds alone: no model
    runs. ``end_token`` ("exclude" | "include"; None: as the analysis was scored) says whether
    the token-level methods count the greedy answer's end token. Raises ``ValueError`` for an
    unknown id, or for a method whose inputs the analysis lacks (saying which and how to get
    them)."""
    return compute_from(inputs_of(result, end_token), ids)


def check_needs(inputs: MethodInputs, ids: Sequence[str]) -> None:
    """Raise ``ValueError`` naming the methods of ``ids`` whose declared needs the inputs
    lack, need by need, with how to get them."""
    for need in NEEDS.values():
        reading = [i for i in ids if need.id in METHODS[i].needs]
        if reading and need.present is not None and not need.present(inputs):
            raise ValueError(
                f"this analysis holds no {need.lacking} that {', '.join(reading)} "
                f"read{'s' if len(reading) == 1 else ''}; "
                + need.fix.format(ids=",".join(reading)))
    passes = [i for i in ids if "llm_pass" in METHODS[i].needs
              and (inputs.saved.get(i) or {}).get("logprob") is None]
    if passes:  # P(True): each method its own pass
        raise ValueError(
            f"this analysis holds no log-prob of the extra LLM pass that {', '.join(passes)} "
            f"read{'s' if len(passes) == 1 else ''}; ask again (or score its answers again) "
            f"with --methods {','.join(passes)}, which runs the LLM")


def compute_from(inputs: MethodInputs, ids: Sequence[str] | str) -> dict[str, dict[str, float]]:
    """:func:`compute_methods` from :class:`MethodInputs`."""
    ids = parse_methods(ids)
    check_needs(inputs, ids)
    out: dict[str, dict[str, float]] = {}
    for method_id in ids:
        method = METHODS[method_id]
        if method.scored:
            values = {k: method.compute(inputs, k) for k in SCORED_VARIANTS}
        else:
            values = {"value": method.compute(inputs, None)}
        for variant, value in values.items():
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"{method_id} ({variant}) is not finite: {value}")
            values[variant] = value
        out[method_id] = values
    return out


def values_of(record: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Every method's values in an analysis (or an evaluation record): its ``methods``, and
    the three measures of its ``uncertainty`` block (``confidence``, ``entropy``,
    ``semantic_entropy``, the same numbers as those methods) where ``methods`` lacks them, so
    an analysis of any schema reads as one kind of row."""
    out = {k: dict(v) for k, v in (record.get("methods") or {}).items()}
    for name, by_scoring in (record.get("uncertainty") or {}).items():
        if name in METHODS and name not in out and isinstance(by_scoring, Mapping):
            out[name] = {k: float(v) for k, v in by_scoring.items() if k in SCORED_VARIANTS}
    return out


def _method(method_id: str) -> Method:
    if method_id not in METHODS:
        raise ValueError(f"unknown method {method_id!r}; known: {', '.join(METHODS)}")
    return METHODS[method_id]
