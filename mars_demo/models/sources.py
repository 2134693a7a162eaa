"""What names a model: a Hub id ('org/name'), a local folder made with ``save_pretrained``, a
GGUF file (the LLM only) or the id of a model given as a loaded ``(model, tokenizer)`` pair
(:mod:`.given`, which keeps them in :data:`GIVEN`). :func:`check_source` refuses anything else
before any heavy import. Pure Python: every backend and the registry ask it.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ModelLoadError
from .gguf import named_gguf

#: the models given as loaded pairs: id -> (what it serves as, its adapter), for as long as the
#: process runs (:func:`mars_demo.models.given.give` fills it; the caller holds the objects too)
GIVEN: dict[str, tuple[str, Any]] = {}


def check_source(model_id: str, what: str) -> str:
    """Validate a model id or directory (or, for the LLM, a GGUF file) before any heavy
    import; returns it (a local path with ``~`` expanded)."""
    if model_id in GIVEN:
        return model_id
    local = os.path.expanduser(model_id)
    if os.path.isdir(local) or (what == "LLM" and os.path.isfile(local) and named_gguf(local)):
        return local
    if model_id.startswith((".", "/", "~")) or model_id.count("/") > 1:
        raise ModelLoadError(
            f"{what}: no directory {model_id!r}. Give a Hub id such as 'org/name' or an existing "
            "local directory made with save_pretrained (e.g. by `python -m mars_demo "
            "make-tiny-models DIR`)" + (", or a GGUF file" if what == "LLM" else "") + "."
        )
    return model_id
