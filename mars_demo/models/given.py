"""Models passed as already loaded transformers objects: a ``(model, tokenizer)`` pair, as
lm-polygraph's ``WhiteboxModel(model, tokenizer)`` and TruthTorchLM take them, serving as the
LLM, the importance model or the NLI model.

:func:`give` wraps the pair in the project's adapter once and returns the id that names it in a
:class:`~mars_demo.settings.Settings` (and in the analyses it makes); the registry
(:mod:`.registry`) then hands out that adapter wherever the id is asked for, loading nothing.

>>> from mars_demo import analyze                                     # doctest: +SKIP
>>> analyze("Which planet is red?", llm=(model, tokenizer))           # doctest: +SKIP
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import ModelLoadError, OptionError
from ..options import GIVEN_MODELS
from .sources import GIVEN  # id -> (what it serves as, its adapter)

_LOCK = threading.Lock()
#: the Settings fields a loaded pair may stand for, and what each is called
ROLES = GIVEN_MODELS


def give(field: str, pair: Any) -> str:
    """Take an already loaded transformers ``(model, tokenizer)`` pair as the ``field`` model
    (``"llm"``, ``"importance"`` or ``"nli"``); returns its id: the model's class and
    ``name_or_path``, e.g. ``"Qwen2ForCausalLM(Qwen/Qwen2.5-0.5B-Instruct)"``. The same pair
    again gets the same id. Nothing is loaded or copied: the model runs on the device and in the
    precision it is in (the LLM and NLI model are put in eval mode).

    Raises:
        OptionError: ``pair`` is not a (model, tokenizer) pair of transformers objects, or its
            model is not of that kind (an importance model has 3 logits per token, an NLI model
            entailment, neutral and contradiction labels).
    """
    what = ROLES.get(field)
    if what is None:
        raise OptionError(f"only {', '.join(ROLES)} can be given as loaded objects; {field} "
                          "takes a Hub id or a local directory")
    model, tokenizer = _pair(field, pair)
    with _LOCK:
        for model_id, (role, made) in GIVEN.items():
            if role == what and made.model is model and made.tokenizer is tokenizer:
                return model_id
        name = f"{type(model).__name__}({getattr(model, 'name_or_path', '') or 'in memory'})"
        model_id, n = name, 1
        while model_id in GIVEN:
            n += 1
            model_id = f"{name} #{n}"
        try:
            made = _ADAPTERS[field](model, tokenizer, model_id)
        except ModelLoadError as err:
            raise OptionError(str(err)) from err
        GIVEN[model_id] = (what, made)
        return model_id


def adapter(model_id: str, what: str) -> Any:
    """The adapter of the pair given as ``model_id``, which must serve as ``what`` ("LLM",
    "importance model", "NLI model")."""
    role, made = GIVEN[model_id]
    if role != what:
        raise ModelLoadError(f"{model_id!r} was given as the {role}, not as the {what}.")
    return made


def _pair(field: str, pair: Any) -> tuple[Any, Any]:
    if (isinstance(pair, (tuple, list)) and len(pair) == 2
            and callable(getattr(pair[0], "parameters", None))
            and getattr(pair[0], "config", None) is not None and callable(pair[1])):
        return pair[0], pair[1]
    raise OptionError(f"{field} must be a Hub id, a local directory or a loaded transformers "
                      f"(model, tokenizer) pair; got {type(pair).__name__}")


def _llm(model, tokenizer, model_id: str):
    from .llm import LLM

    model.eval()
    four_bit = bool(getattr(model, "is_loaded_in_4bit", False))
    return LLM(model, tokenizer, model_id, None, four_bit, "nf4" if four_bit else None)


def _importance(model, tokenizer, model_id: str):
    from .importance import ImportanceModel

    return ImportanceModel.of(model, tokenizer, model_id)


def _nli(model, tokenizer, model_id: str):
    from .nli import NLIModel

    model.eval()
    return NLIModel(model, tokenizer, model_id)


_ADAPTERS = {"llm": _llm, "importance": _importance, "nli": _nli}
