"""Toy models said as such: a model written by ``make-tiny-models`` carries :data:`MARKER` in its
``config.json``, and an analysis that used one warns that what that model gave means nothing
about real models.

The marker is read from the config the model was loaded with (``model.config``, which
``from_pretrained`` reads from ``config.json`` anyway): nothing extra is loaded or opened. A
model given as a GGUF file or served over HTTP carries no ``config.json`` here and is not
recognized.

>>> class Config: mars_demo_toy = True
>>> class Loaded: config = Config()
>>> class Wrapper: model = Loaded()
>>> is_toy(Wrapper()), is_toy(object())
(True, False)
>>> warnings(["nli", "llm"])  # doctest: +NORMALIZE_WHITESPACE
['Toy models: the LLM and the NLI model were written by make-tiny-models (tiny models for
tests and offline demos), so the answers and the meanings (clusters) mean nothing about real
models.']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: the key ``make-tiny-models`` writes into each model's ``config.json`` (a PretrainedConfig keeps
#: an unknown key as an attribute, so it survives loading and saving)
MARKER = "mars_demo_toy"

#: what a toy model of each role makes meaningless, in the warning's words
WHAT = {
    "llm": ("the LLM", "the answers"),
    "importance": ("the importance model", "the MARS weights"),
    "bem": ("the answer-equivalence model", "the MARS weights"),
    "nli": ("the NLI model", "the meanings (clusters)"),
    "similarity": ("the similarity model", "the SAR and CoCoA values"),
    "lars": ("the LARS model", "the LARS values"),
}


def is_toy(model: Any) -> bool:
    """Whether ``model`` (a loaded wrapper holding a transformers model as ``.model``, or the
    transformers model itself) was written by ``make-tiny-models``: its config has
    :data:`MARKER` set."""
    inner = getattr(model, "model", model)
    return getattr(getattr(inner, "config", None), MARKER, False) is True


def roles(models: dict[str, Any]) -> list[str]:
    """The roles of ``models`` (``{role: loaded model}``) that are toy models, in
    :data:`WHAT` order."""
    return [role for role in WHAT if role in models and is_toy(models[role])]


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def warnings(found: Iterable[str]) -> list[str]:
    """The one warning of an analysis that used toy models in the roles ``found`` (keys of
    :data:`WHAT`, said in that order), or none."""
    found = set(found)
    said = [WHAT.get(role, (f"the {role} model", "what it gave"))
            for role in [*WHAT, *sorted(found - set(WHAT))] if role in found]
    if not said:
        return []
    names, meaningless = _listed([n for n, _ in said]), _listed([m for _, m in said])
    if len(said) == 1:
        return [f"Toy model: {names} was written by make-tiny-models (a tiny model for tests and "
                f"offline demos), so {meaningless} mean nothing about real models."]
    return [f"Toy models: {names} were written by make-tiny-models (tiny models for tests and "
            f"offline demos), so {meaningless} mean nothing about real models."]
