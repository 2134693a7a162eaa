"""Loading models from a Hub id or a local directory, once, with errors that say what to do.

All three models (LLM, importance, NLI) and the optional BEM classifier go through
:func:`load_cached`, so a tiny model saved with ``save_pretrained`` in a temp dir takes exactly the
same path as ``Qwen/Qwen2.5-7B-Instruct``.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import threading
import traceback
from typing import Any, Callable

log = logging.getLogger(__name__)

_CACHE: dict[tuple, Any] = {}
_LOCK = threading.RLock()


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says which one and what to do about it."""


class InvalidModelOutput(RuntimeError):
    """A model's outputs are not numbers (NaN / infinity), e.g. an fp16 overflow."""


def check_finite(logits, who: str) -> None:
    """Raise :class:`InvalidModelOutput` unless every value of the tensor ``logits`` is finite.

    ``who`` names the model for the message ("The NLI model org/name")."""
    import torch

    if not bool(torch.isfinite(logits).all()):
        raise InvalidModelOutput(
            f"{who} produced invalid outputs (NaN or infinity), so this analysis cannot be "
            "trusted; load it in full precision or pick another model."
        )


def check_source(model_id: str, what: str) -> str:
    """Validate a model id or directory before any heavy import; returns it unchanged."""
    if os.path.isdir(os.path.expanduser(model_id)):
        return os.path.expanduser(model_id)
    if model_id.startswith((".", "/", "~")) or model_id.count("/") > 1:
        raise ModelLoadError(
            f"{what}: no directory {model_id!r}. Give a Hub id such as 'org/name' or an existing "
            "local directory made with save_pretrained (e.g. by `python -m mars_demo "
            "make-tiny-models DIR`)."
        )
    return model_id


def explain_load_error(model_id: str, what: str, err: BaseException) -> ModelLoadError:
    """Turn a transformers / hub exception into an actionable message."""
    text = f"{type(err).__name__}: {err}"
    low = text.lower()
    is_dir = os.path.isdir(os.path.expanduser(model_id))
    # Memory first: an out-of-memory message quotes sizes ("4030.00 MiB") that must not be
    # mistaken for an HTTP status; status codes only count as whole words.
    if isinstance(err, MemoryError) or "out of memory" in low or "outofmemory" in low:
        hint = (
            f"not enough memory to load {model_id!r}. Close other programs, use 4-bit loading on a "
            "GPU, or pick a smaller model preset."
        )
    elif is_dir:
        hint = (
            f"the directory {model_id!r} does not hold a usable model; it needs the files "
            "written by save_pretrained (config.json, weights, tokenizer), intact and complete."
        )
    elif "gated" in low or "restricted" in low or re.search(r"\b40[13]\b", low):
        hint = (
            f"{model_id!r} is a gated repository: accept its license on huggingface.co and set "
            "HF_TOKEN to a token with access."
        )
    elif "offline" in low or "connection" in low or "resolve" in low or "couldn't connect" in low:
        hint = (
            f"{model_id!r} is not in the local Hugging Face cache and the Hub cannot be reached "
            "(no network or HF_HUB_OFFLINE=1). Check the spelling, download it once with network "
            "access, or pass a local directory."
        )
    elif "not a valid model identifier" in low or "repository not found" in low or re.search(
        r"\b404\b", low
    ):
        hint = (
            f"{model_id!r} is neither a local directory nor a model on the Hugging Face Hub; "
            "check the spelling."
        )
    elif "repo id must" in low or "validationerror" in low:
        hint = (
            f"{model_id!r} is not a valid Hub id ('org/name') and no such local directory "
            "exists; check the spelling."
        )
    else:
        hint = (
            f"loading {model_id!r} failed; check the model id and that it is the right kind "
            "of model."
        )
    first_line = (text.strip().splitlines() or [type(err).__name__])[0][:300]
    return ModelLoadError(f"Could not load the {what}: {hint} ({first_line})")


def load_cached(
    key: tuple, what: str, model_id: str, loader: Callable[[], Any], progress=None
) -> Any:
    """Load once per ``key``; later calls return the same object. Errors -> ModelLoadError."""
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        log.info("loading %s from %s", what, model_id)
        if progress is not None:
            progress(f"loading {what}", 0.0)
        try:
            obj = loader()
        except ModelLoadError as err:
            _drop_partial_load(err)
            raise
        except Exception as err:  # corrupt weights, odd config, no memory...: say what to do
            _drop_partial_load(err)
            raise explain_load_error(model_id, what, err) from err
        _CACHE[key] = obj
        if progress is not None:
            progress(f"loading {what}", 1.0)
        log.info("loaded %s", what)
        return obj


def _drop_partial_load(err: BaseException) -> None:
    """Free what a failed load allocated: the failing frames' locals hold the partial model."""
    traceback.clear_frames(err.__traceback__)
    free_memory()


def release(keep: set[tuple] | None = None) -> None:
    """Drop every cached model whose key is not in ``keep`` and free its memory."""
    with _LOCK:
        for key in [k for k in _CACHE if not keep or k not in keep]:
            del _CACHE[key]
    free_memory()


def free_memory() -> None:
    gc.collect()
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency of the models
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()

