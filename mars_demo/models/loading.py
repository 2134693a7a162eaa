"""Loading models from a Hub id or a local directory, once, with errors that say what to do.

All three models (LLM, importance, NLI) and the optional BEM classifier go through
:func:`load_cached`, so a tiny model saved with ``save_pretrained`` in a temp dir takes exactly the
same path as ``Qwen/Qwen2.5-7B-Instruct``.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import traceback
from typing import Any, Callable

from ..errors import ModelLoadError, explain_load_error

log = logging.getLogger(__name__)

_CACHE: dict[tuple, Any] = {}
_LOCK = threading.RLock()


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

