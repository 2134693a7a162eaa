"""Hugging Face ZeroGPU: the ``spaces`` package, and the GPU time a request asks for.

On a ZeroGPU Space (``SPACES_ZERO_GPU=true``) a GPU exists only inside functions decorated with
``@spaces.GPU``. Each such function runs in a process forked from the app's: its arguments, what
it returns or yields, and its exceptions are pickled across, and a callback passed in would run
in the other process. The app places its models on "cuda" at start-up, in the thread that
imported ``spaces`` (the package emulates CUDA there), and never calls ``torch.compile``.
Everywhere else ``spaces.GPU`` returns the function unchanged, and without the package installed
:func:`gpu` does the same. docs/zerogpu.md says what was read in the package's source, what was
tried here and what only a real Space can show.

The page's two decorated functions are in :mod:`mars_demo.ui.work.worker`; :func:`analysis_seconds`
and :func:`scoring_seconds` are their durations. Importing this module imports neither gradio
nor torch, so ``app.py`` can import ``spaces`` before anything touches CUDA (:func:`active`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from mars_demo.options import DECODINGS
from mars_demo.recipes import apply_recipe
from mars_demo.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])

ENV = "SPACES_ZERO_GPU"  # set to "true" by the platform on a ZeroGPU Space

# The GPU seconds a request asks for (ZeroGPU schedules shorter requests first and may abort one
# that runs past its duration). ESTIMATES for the default models (the 7B LLM, deberta-large NLI,
# the BERT-base importance model), not measured on ZeroGPU: no such GPU was at hand (see
# docs/zerogpu.md). They err on the long side: only an overrun is aborted.
START_S = 20.0  # a new GPU process: CUDA start-up and the models copied onto the GPU
STEP_S = 0.05  # one decoding step of the greedy answer (about 20 tokens a second)
ROW_SHARE = 0.1  # each sampled answer adds this share of a step (they decode in one batch)
ANSWER_S = 0.05  # importance (and, for pasted answers without log-probs, the LLM) per answer
PAIR_S = 0.02  # one NLI judgement (an ordered pair of answers)


class GpuRefused(RuntimeError):
    """ZeroGPU did not run a request, or stopped it: no quota left, no GPU free in time, a task
    that ran past its duration. The message is the platform's, for the visitor."""


def requested(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the platform says this is a ZeroGPU Space (read as the ``spaces`` package reads
    it: "1", "t" or "true", in any case)."""
    return env.get(ENV, "").strip().lower() in ("1", "t", "true")


def decoding_refusal(decoding: str, env: Mapping[str, str] = os.environ) -> str | None:
    """Why the LLM's ``decoding`` cannot run on this Space, or None: ``static-compiled``
    compiles the LLM with ``torch.compile``, which ZeroGPU does not allow (the app refuses it at
    start-up, before any model loads).

    >>> decoding_refusal("static-compiled", {ENV: "true"}) is not None
    True
    >>> decoding_refusal("static-compiled", {}), decoding_refusal("dynamic", {ENV: "true"})
    (None, None)
    """
    if decoding == DECODINGS[1] and requested(env):
        return ("decoding static-compiled compiles the LLM with torch.compile, which a ZeroGPU "
                "Space does not allow: use decoding dynamic there")
    return None


def spaces_module() -> Any | None:
    """The ``spaces`` package, or None where it is not installed. Raises RuntimeError on a
    ZeroGPU Space without it: the GPU work would run where there is no GPU."""
    try:
        import spaces
    except ImportError:
        if requested():
            raise RuntimeError(
                f"{ENV} is set (a ZeroGPU Space) but the 'spaces' package is not installed: "
                "pip install -r requirements.txt"
            ) from None
        return None
    return spaces


def active() -> bool:
    """Whether ``@spaces.GPU`` does anything in this process (a ZeroGPU Space with ``spaces``).

    Imports ``spaces`` where installed: call this before anything uses CUDA (the package refuses
    to start once CUDA is initialized). On ZeroGPU it also turns off the package's optional
    wrapping of every Gradio event (``SPACES_GRADIO_AUTO_WRAP``), so that only the functions
    this project decorates get a GPU: its event handlers hold callbacks and locks that cannot
    cross into another process."""
    spaces = spaces_module()
    if spaces is None:
        return False
    from spaces.config import Config

    if Config.zero_gpu:
        spaces.disable_gradio_auto_wrap()
    return bool(Config.zero_gpu)


def gpu(duration: Callable[..., float]) -> Callable[[F], F]:
    """``@spaces.GPU(duration=duration)``: on ZeroGPU the function runs on a GPU for at most
    about ``duration(*args, **kwargs)`` seconds (the package calls it with the function's own
    arguments); elsewhere, and without ``spaces``, the function is returned unchanged."""
    spaces = spaces_module()
    if spaces is None:
        return lambda fn: fn
    return spaces.GPU(duration=duration)


def analysis_seconds(_where: Any, _question: str, settings: Settings) -> int:
    """The GPU seconds to ask for an analysis (the arguments of
    :func:`mars_demo.ui.work.worker.analyze_on_gpu`): grows with the sampled answers and the answer
    length, after the recipe (``paper-code`` answers take up to 128 tokens).

    >>> analysis_seconds(None, "q", Settings(samples=5, max_new_tokens=64))
    26
    >>> analysis_seconds(None, "q", Settings(samples=5, max_new_tokens=64, recipe="paper-code"))
    31
    """
    s = apply_recipe(settings)
    steps = s.max_new_tokens * (1 + ROW_SHARE * s.samples)
    return _seconds(STEP_S * steps + ANSWER_S * (s.samples + 1) + PAIR_S * _pairs(s.samples))


def scoring_seconds(_where: Any, answers: Any, _settings: Settings,
                    reuse: Any | None = None, _cap: Any | None = None) -> int:
    """The GPU seconds to ask for scoring given answers (the arguments of
    :func:`mars_demo.ui.work.worker.score_on_gpu`, its work cap too): grows with the number of
    sampled answers; a re-score (``reuse``) keeps its NLI judgements and asks for less.

    >>> scoring_seconds(None, {"question": "q", "samples": [{"text": "Mars"}] * 5}, Settings())
    21
    """
    samples = answers.get("samples") if isinstance(answers, Mapping) else answers.samples
    samples = len(samples) if isinstance(samples, list) else 0  # a bad one: the engine says why
    nli = 0.0 if reuse is not None else PAIR_S * _pairs(samples)
    return _seconds(ANSWER_S * (samples + 1) + nli)


def _pairs(samples: int) -> int:
    """NLI judgements of ``samples`` sampled answers at most: every ordered pair of the answers
    and the greedy one."""
    return samples * (samples + 1)


def _seconds(work_s: float) -> int:
    return math.ceil(START_S + work_s)
