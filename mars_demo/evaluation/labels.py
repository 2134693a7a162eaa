"""The names of the uncertainty measures and methods in evaluation tables, figures and pages.

One function, :func:`row_label`, names a row ``(name, variant)`` of an evaluation: one of the
three measures with its scoring, or a method of :mod:`mars_demo.methods` with its variant, by
the registry's own label, so a method has one name everywhere (the page's panel, the CLI, the
report).
"""

from __future__ import annotations

from .. import methods

#: the three measures of every analysis (``uncertainty.<measure>.<scoring>``)
_MEASURES = {"confidence": "Confidence", "entropy": "Entropy",
             "semantic_entropy": "Semantic entropy"}
_VARIANT_SUFFIX = {"length_normalized": " (LN)", "mars": " (MARS)", "value": ""}


def row_label(name: str, variant: str) -> str:
    """"Eigenvalue (entail.)", "Semantic entropy, normalized (MARS)", "Confidence (LN)"; an
    id neither a measure nor a known method (a run made by a later version) is shown in words.

    >>> row_label("eigv", "value"), row_label("confidence", "length_normalized")
    ('Eigenvalue (entail.)', 'Confidence (LN)')
    """
    if name in _MEASURES:
        text = _MEASURES[name]
    elif name in methods.METHODS:
        text = methods.METHODS[name].label
    else:
        text = name.replace("_", " ")
    return text + _VARIANT_SUFFIX.get(variant, f" ({variant.replace('_', ' ')})")
