"""The one place models are loaded: which models a :class:`~mars_demo.settings.Settings` names,
loaded once and cached, released when no longer needed.

Every model (the LLM or the client of its server, the importance model or BEM's classifier and
chunker, the NLI model) is loaded by :func:`load_cached` under a key that says what it is, so a
tiny model saved with ``save_pretrained`` in a temp dir takes exactly the same path as
``Qwen/Qwen2.5-7B-Instruct``, and asking for a loaded model again costs nothing. The LLM is
loaded as its backend's declaration says (:mod:`.backends`: which backend runs some settings,
its cache key, how its model loads), so this module names no backend:

>>> from mars_demo.settings import Settings
>>> llm = llm_for(Settings(llm="/tmp/tiny/llm"))       # doctest: +SKIP
>>> llm is load_llm("/tmp/tiny/llm")                    # doctest: +SKIP
True

Errors become one :class:`~mars_demo.errors.ModelLoadError` that says what to do. The adapters
(the backends' :mod:`.llm` and :mod:`.endpoint`, :mod:`.importance`, :mod:`.nli`) know how to
build a model from its files; this module knows when to.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ModelLoadError, explain_load_error
from ..progress import Progress
from ..optional import OWN_MODELS
from ..recipes import recipe_of
from ..settings import LLM_PRESETS, Settings, resolve_nli
from . import backends, given, hub
from .contract import LanguageModel
from .importance import BEMImportance, ImportanceModel
from .nli import DTYPES, NLIModel, check_choice
from .sources import check_source

log = logging.getLogger(__name__)

_CACHE: dict[tuple, Any] = {}
_LOCK = threading.RLock()


@dataclass
class Models:
    """The three models of an engine (see :attr:`mars_demo.engine.Engine.models`)."""

    llm: LanguageModel  # as its backend (models.backends) loads it
    importance: Any  # ImportanceModel or BEMImportance
    nli: NLIModel


# ---- the cache --------------------------------------------------------------------------------


def load_cached(
    key: tuple, what: str, model_id: str, loader: Callable[[], Any],
    progress: Progress | None = None,
) -> Any:
    """Load once per ``key``; later calls return the same object. Errors -> ModelLoadError."""
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        if model_id in given.GIVEN:  # a model passed as a loaded object: nothing to load
            _CACHE[key] = given.adapter(model_id, what)
            return _CACHE[key]
        log.debug("loading %s from %s", what, model_id)  # the caller's progress says so
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
        log.debug("loaded %s", what)
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


def loaded_keys() -> frozenset[tuple]:
    """The keys of the models loaded now (see the ``*_key`` functions)."""
    with _LOCK:
        return frozenset(_CACHE)


def loaded(key: tuple) -> Any | None:
    """The model cached under ``key``, or None."""
    with _LOCK:
        return _CACHE.get(key)


def free_memory() -> None:
    """Collect garbage and, on CUDA, return the freed memory to the device."""
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


# ---- keys -------------------------------------------------------------------------------------


def nli_key(model_id: str, dtype: str = "auto") -> tuple:
    """The key of an NLI model (``dtype`` as in :func:`load_nli`)."""
    check_choice("dtype", dtype, DTYPES)
    key = ("nli", check_source(model_id, "NLI model"))
    return key if dtype == "auto" else (*key, dtype)


def importance_key(model_id: str) -> tuple:
    return ("importance", check_source(model_id, "importance model"))


def bem_keys(model_id: str, chunker_id: str) -> set[tuple]:
    """The keys of BEM's classifier and of its chunker."""
    source = check_source(model_id, "answer-equivalence model")
    return {("bem", source, chunker_id), ("chunker", chunker_id)}


# ---- loading by model id ----------------------------------------------------------------------


def load_llm(model_id: str, *, load_in_4bit: bool | None = None,
             progress: Progress | None = None, quantization: str = "nf4",
             decoding: str = "dynamic") -> LanguageModel:
    """The in-process LLM ``model_id`` (a preset, a Hub id, a directory or a GGUF file),
    loaded once per ``load_in_4bit``, ``quantization`` and ``decoding``: :func:`llm_for` of the
    settings naming it."""
    return llm_for(Settings(llm=model_id, load_in_4bit=load_in_4bit, quantization=quantization,
                            decoding=decoding), progress)


def load_importance(model_id: str, progress: Progress | None = None) -> ImportanceModel:
    """The MARS importance model ``model_id``, loaded once."""
    key = importance_key(model_id)
    return load_cached(key, "importance model", model_id,
                       lambda: ImportanceModel.from_pretrained(key[1], model_id), progress)


def load_bem(model_id: str, chunker_id: str, progress: Progress | None = None) -> BEMImportance:
    """BEM importance: the answer-equivalence classifier ``model_id`` with the Flair chunker
    ``chunker_id``, each loaded once."""
    source = check_source(model_id, "answer-equivalence model")

    def chunker():
        return load_cached(("chunker", chunker_id), "phrase chunker", chunker_id,
                           lambda: BEMImportance.load_chunker(chunker_id))

    return load_cached(("bem", source, chunker_id), "answer-equivalence model", model_id,
                       lambda: BEMImportance.from_pretrained(source, model_id, chunker),
                       progress)


def load_optional(field: str, model_id: str, progress: Progress | None = None) -> Any:
    """The optional model named by Settings ``field`` (one of
    :data:`mars_demo.optional.OWN_MODELS`: SAR's similarity cross-encoder, LARS's scorer...),
    ``model_id``, loaded once by its declaration's class (its
    ``from_pretrained(source, model_id)``)."""
    spec = next((m for m in OWN_MODELS if m.field == field), None)
    if spec is None:
        raise ValueError(f"no optional model {field!r}; known: "
                         f"{', '.join(m.field for m in OWN_MODELS)}")
    key = (field, check_source(model_id, f"{spec.label} model"))
    return load_cached(key, f"{spec.label} model", model_id,
                       lambda: spec.cls.from_pretrained(key[1], model_id), progress)


def load_nli(model_id: str, progress: Progress | None = None, dtype: str = "auto") -> NLIModel:
    """The NLI model ``model_id``, loaded once per ``dtype``: ``"auto"`` = float16 on CUDA and
    float32 on CPU; ``"float32"`` = float32 everywhere (the published code's precision)."""
    key = nli_key(model_id, dtype)
    return load_cached(key, "NLI model", model_id,
                       lambda: NLIModel.from_pretrained(key[1], model_id, dtype), progress)


# ---- the models a Settings names --------------------------------------------------------------


def llm_for(s: Settings, progress: Progress | None = None) -> LanguageModel:
    """The LLM ``s`` names, loaded once as its backend says (:func:`.backends.backend_for`):
    the backend refuses settings it cannot run first, then its model loads under its key."""
    backend, cuda = backends.backend_for(s), cuda_available()
    backend.check(s, cuda)
    load = backend.load(s, cuda)
    try:
        return load_cached(load.key, load.what, load.source, load.build, progress)
    except ModelLoadError as err:
        if load.hint:
            raise ModelLoadError(f"{err} {load.hint}") from err
        raise


def llm_key(s: Settings) -> tuple:
    """The cache key of the LLM ``s`` names (raises ``ModelLoadError`` for a path that does
    not exist)."""
    return backends.backend_for(s).load(s, cuda_available()).key


def importance_for(s: Settings, progress: Progress | None = None):
    """The importance function of ``s.importance_method``: BEM's, or the importance model."""
    if s.importance_method == "bem":
        return load_bem(s.bem, s.chunker, progress)
    return load_importance(s.importance, progress)


def nli_for(s: Settings, progress: Progress | None = None) -> NLIModel:
    return load_nli(resolve_nli(s.nli, cuda_available()), progress, dtype=nli_dtype(s))


def nli_dtype(s: Settings) -> str:
    """The NLI model's dtype for ``s``'s recipe. Without CUDA "auto" is float32 already, so a
    recipe's "float32" is the same model: it shares the loaded one instead of a second copy.
    ``s.nli_int8`` asks for int8 on the CPU (no effect with CUDA)."""
    if s.nli_int8 and not cuda_available():
        return "int8"
    dtype = recipe_of(s.recipe).nli_dtype
    return "auto" if dtype == "float32" and not cuda_available() else dtype


def load_all(s: Settings, progress: Progress | None = None) -> Models:
    """Every model ``s`` names (the LLM, then the importance model, then the NLI model)."""
    return Models(llm_for(s, progress), importance_for(s, progress), nli_for(s, progress))


def optional_for(field: str) -> Callable[..., Any]:
    """The loader of the optional model named by Settings ``field``: loaded only by a stage
    that needs it (never by :func:`load_all`), cached by id."""
    return lambda s, progress=None: load_optional(field, getattr(s, field), progress)


_FOR = {"llm": llm_for, "importance": importance_for, "nli": nli_for,
        **{m.field: optional_for(m.field) for m in OWN_MODELS}}
#: the models only a stage loads, never among an engine's :class:`Models`: cached by id alone
_STAGE_ONLY = tuple(m.field for m in OWN_MODELS)


def model_for(which: str, s: Settings, progress: Progress | None,
              models: Models | None, models_settings: Settings) -> Any:
    """The ``which`` model ("llm", "importance", "nli", or an optional model's field) that
    ``s`` names: one of ``models`` (loaded for ``models_settings``) when it is the same, else
    :func:`llm_for` and its kin (the optional models, never among ``models``, are always
    cached by id)."""
    if (models is not None and which not in _STAGE_ONLY
            and same_models(s, models_settings, which)):
        return getattr(models, which)
    return _FOR[which](s, progress)


def same_models(s: Settings, other: Settings, which: str) -> bool:
    """Whether ``s`` names the same ``which`` model ("llm", "importance", "nli") as ``other``."""
    if which == "llm":
        backend = backends.backend_for(s)
        return backend is backends.backend_for(other) and all(
            getattr(s, f) == getattr(other, f) for f in backend.fields)
    if which == "nli":
        return s.nli == other.nli and nli_dtype(s) == nli_dtype(other)
    bem = s.importance_method == "bem"
    if bem != (other.importance_method == "bem"):
        return False
    return (s.bem, s.chunker) == (other.bem, other.chunker) if bem else (
        s.importance == other.importance)


# ---- are they here? ---------------------------------------------------------------------------


def check_available(s: Settings, which: list[str] | tuple[str, ...]) -> None:
    """Raise one :class:`ModelLoadError` naming every model of ``which`` ("llm", "importance",
    "nli", an optional model's field) that ``s`` names and that is neither loaded nor on this
    machine nor downloadable (:func:`.hub.missing`: the Hub asked at most once), with the option
    that names it and the way to run offline; before anything loads, in about a second.
    Settings the LLM's backend cannot run (its ``check``: the transformers backend's LLM
    options that cannot run on this machine, :func:`.llm_options.check`) are refused first: no
    download can mend them."""
    if "llm" in which:
        backends.backend_for(s).check(s, hub_cuda())
    here = {key[1] for key in loaded_keys() if len(key) > 1} | set(given.GIVEN)
    named = [m for name in dict.fromkeys(which) for m in _named(s, name) if m.source not in here]
    gone = [(m, f"{why}, and no LLM preset ({', '.join(LLM_PRESETS)})"
             if m.option == "--llm" and "/" not in m.source else why)
            for m, why in hub.missing(named)]
    if gone:
        raise ModelLoadError(hub.message(gone))


def _named(s: Settings, which: str) -> list[hub.Named]:
    """The models ``s`` names for ``which``, as :class:`.hub.Named`."""
    if which == "llm":
        return [hub.Named(*named) for named in backends.backend_for(s).named(s, hub_cuda())]
    if which == "importance":
        if s.importance_method == "bem":
            return [hub.Named("answer-equivalence model", "--bem", s.bem),
                    hub.Named("phrase chunker", "--chunker", s.chunker)]
        return [hub.Named("importance model", "--importance", s.importance)]
    if which == "nli":
        return [hub.Named("NLI model", "--nli", resolve_nli(s.nli, hub_cuda()))]
    spec = next(m for m in OWN_MODELS if m.field == which)
    return [hub.Named(f"{spec.label} model", spec.option, getattr(s, which))]


def hub_cuda() -> bool:
    """Whether CUDA is usable, for picking a default model before the check: without torch
    imported yet, a machine with no GPU device (and not on ZeroGPU) has none, which is known
    without the seconds that importing torch takes."""
    import sys

    if "torch" not in sys.modules and not os.environ.get("SPACES_ZERO_GPU") and not any(
            os.path.exists(d) for d in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd",
                                        "/dev/dxg")):
        return False
    return cuda_available()


def analysis_models(s: Settings) -> list[str]:
    """The models a new analysis with ``s`` loads: the LLM, the importance and NLI models, and
    the optional models of the methods asked for."""
    from ..methods import optional_models

    return ["llm", "importance", "nli", *optional_models(s.method_ids)]


def cache_keys(s: Settings) -> set[tuple]:
    """The cache keys of every model that ``s`` needs."""
    cuda = cuda_available()
    keys = {llm_key(s), nli_key(resolve_nli(s.nli, cuda), nli_dtype(s))}
    if s.importance_method == "bem":
        keys |= bem_keys(s.bem, s.chunker)
    else:
        keys.add(importance_key(s.importance))
    return keys
