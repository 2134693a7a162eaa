"""The LLM backends: every way to run the LLM, one :class:`~.contract.Backend` declaration each,
and the one rule that picks a backend for some settings.

A backend is one module holding its adapter class (a :class:`~.contract.LanguageModel`) and its
declaration ``BACKEND`` beside it: its name, when the settings choose it, how its model loads
and what it can do. :data:`BACKENDS` lists them in the order they are asked; the first whose
``claims`` takes the settings runs them, unless ``--llm-backend`` names one. The registry loads
and caches what the declaration says (:func:`mars_demo.models.registry.llm_for`), the engine
asks its capabilities, and ``--llm-backend``'s choices and help, the page's model line and every
analysis (``settings.llm_backend``) name it.

>>> from mars_demo.settings import Settings
>>> backend_for(Settings()).name, backend_for(Settings(llm_endpoint="http://127.0.0.1:8000/v1")).name
('transformers', 'server')
>>> backend_for(Settings(llm_backend="vllm-direct"))
Traceback (most recent call last):
...
mars_demo.errors.OptionError: llm_backend must be one of llama.cpp, server, transformers; got 'vllm-direct'
"""

from __future__ import annotations

from ..errors import OptionError
from ..settings import Settings
from . import endpoint, llama_cpp, llm
from .contract import Backend

#: Every backend, in the order they are asked: a server when ``--llm-endpoint`` is given, else
#: llama.cpp in this process for a GGUF file where llama-cpp-python is installed, else
#: transformers in this process (it takes every LLM: the last, the fallback).
BACKENDS: tuple[Backend, ...] = (endpoint.BACKEND, llama_cpp.BACKEND, llm.BACKEND)
_ADDED: list[Backend] = []


def entries() -> tuple[Backend, ...]:
    """Every backend, in the order they are asked: those :func:`register` added first (a
    plug-in, a test's probe), then :data:`BACKENDS`."""
    return (*_ADDED, *BACKENDS)


def names() -> tuple[str, ...]:
    return tuple(b.name for b in entries())


def register(backend: Backend) -> None:
    """Add a backend defined elsewhere, asked before the built-in ones; a name already taken is
    refused. :func:`unregister` takes it out again."""
    if backend.name in names():
        raise ValueError(f"an LLM backend named {backend.name!r} exists already")
    _ADDED.insert(0, backend)


def unregister(name: str) -> None:
    _ADDED[:] = [b for b in _ADDED if b.name != name]


def backend_for(s: Settings) -> Backend:
    """The backend that runs ``s``'s LLM: the one ``s.llm_backend`` names, else the first that
    claims the settings. An unknown name raises ``OptionError`` naming the backends there are."""
    if s.llm_backend is not None:
        for backend in entries():
            if backend.name == s.llm_backend:
                return backend
        raise OptionError(f"llm_backend must be one of {', '.join(sorted(names()))}; got "
                          f"{s.llm_backend!r}")
    return next(b for b in entries() if b.claims(s))


def help_text() -> str:
    """``--llm-backend``'s help: every backend's line, then how the default is chosen."""
    return ("LLM backend: " + "; ".join(b.help() for b in entries())
            + "; default: chosen from the other LLM options, as each says")
