"""The project's exceptions, in one place, and the tests that sort failures into them.

Every exception here carries a message meant for the user: it says what went wrong and what to do.
The hierarchy keeps ``except`` clauses simple:

- :class:`OptionError` (a ``ValueError``): bad input, refused before any work; its subclass
  :class:`AnswerSetError` names the answer and token at fault.
- :class:`ModelLoadError` (a ``RuntimeError``): a model cannot be used; its subclass
  :class:`EndpointError` is an LLM server that cannot be used for this request.
- :class:`InvalidModelOutput` (a ``RuntimeError``): a model produced NaN or infinity.
- :class:`AnalysisOutOfMemory` (a ``RuntimeError``): memory ran out during an analysis; it was
  released and the engine still works.
- :class:`GenerationCancelled` (raised by the LLM adapters) and :class:`AnalysisCancelled` (what
  the engine turns it into): a request's ``should_stop`` said stop.

Pure Python: torch is never imported here (a torch error can only exist once torch is imported).
"""

from __future__ import annotations

import json
import os
import re
import sys


class OptionError(ValueError):
    """An option value outside its allowed range or set; the message names what is allowed."""


class AnswerSetError(OptionError):
    """An answer set that cannot be scored; the message names the answer and the token."""


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says which one and what to do about it."""


class EndpointError(ModelLoadError):
    """The LLM server could not be used for this request (down, timeout, HTTP error, malformed
    answer, no log-probs); the message says what to do.

    A :class:`ModelLoadError` (so a ``RuntimeError``), because to the user it is the same
    situation: the LLM is not usable; the CLI and the page show the message as it is.
    """


class InvalidModelOutput(RuntimeError):
    """A model's outputs are not numbers (NaN / infinity), e.g. an fp16 overflow."""


class AnalysisOutOfMemory(RuntimeError):
    """The analysis ran out of (GPU) memory; memory was released and the engine still works."""


class GenerationCancelled(Exception):
    """``should_stop`` asked generation to stop (the request was cancelled); no answer is made.

    The engine turns it into :class:`AnalysisCancelled`.
    """


class AnalysisCancelled(Exception):
    """``should_stop`` said the request was cancelled (e.g. its browser tab was closed): the
    analysis stopped at the next generated token or stage and the models are free again."""


def is_out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` means memory ran out: a ``MemoryError``, torch's CUDA out-of-memory
    error (whatever its text), or any error whose type or message says "out of memory".

    >>> is_out_of_memory(RuntimeError("CUDA error: out of memory"))
    True
    >>> is_out_of_memory(OSError("404 Not Found"))
    False
    """
    if isinstance(err, MemoryError):
        return True
    torch = sys.modules.get("torch")  # only torch itself can raise its error type
    if torch is not None and isinstance(err, torch.cuda.OutOfMemoryError):
        return True
    text = f"{type(err).__name__}: {err}".lower()
    return "out of memory" in text or "outofmemory" in text


#: What loading a model says when it needs a CUDA GPU that this machine lacks, as transformers,
#: bitsandbytes and torch word it, e.g. "No GPU or XPU found. A GPU or XPU is needed for FP8
#: quantization." (an fp8-quantized folder on a CPU machine), "HIGGS quantization is only
#: supported on GPU.", "CUDA is required but not available for bitsandbytes." (a bitsandbytes
#: 4-bit folder where bitsandbytes has no CPU support), "Torch not compiled with CUDA enabled",
#: "No CUDA GPUs are available", "None of the available devices ... are supported by the
#: bitsandbytes version you have installed".
_NEEDS_CUDA = re.compile(
    r"no (?:cuda )?gpus?\b(?: or xpu)? (?:found|are available)"
    r"|only supported on (?:a )?(?:cuda )?gpu"
    r"|\b(?:requires?|needs?) (?:a )?(?:cuda|gpu)\b"
    r"|\b(?:a )?(?:cuda|gpu)(?: or xpu)? is (?:required|needed|not available)"
    r"|not compiled with cuda|found no nvidia driver"
    r"|none of the available devices .{0,80} are supported by the bitsandbytes"
)


def needs_cuda(err: BaseException) -> bool:
    """Whether ``err`` says the model needs a CUDA GPU that is not there (see
    :data:`_NEEDS_CUDA`); an out-of-memory error is no such error.

    >>> needs_cuda(RuntimeError("No GPU or XPU found. A GPU or XPU is needed for FP8 quantization."))
    True
    >>> needs_cuda(AssertionError("Torch not compiled with CUDA enabled"))
    True
    >>> needs_cuda(OSError("Error no file named pytorch_model.bin found in directory m"))
    False
    """
    return not is_out_of_memory(err) and bool(_NEEDS_CUDA.search(f"{err}".lower()))


#: The install command of a package that loading a model asked for, as transformers words it:
#: "Loading a GPTQ quantized model requires optimum (`pip install optimum`)", "... requires
#: auto-awq library (`pip install autoawq`)", "... requires AQLM: `pip install aqlm[gpu,cpu]`".
_PIP_INSTALL = re.compile(r"`(pip install [^`]+)`")


def missing_package(err: BaseException) -> str | None:
    """The ``pip install ...`` command that ``err`` (an ImportError raised while loading a
    model) names, if it names one.

    >>> missing_package(ImportError("Loading a GPTQ quantized model requires optimum "
    ...                             "(`pip install optimum`)"))
    'pip install optimum'
    >>> missing_package(ImportError("No module named 'foo'")) is None
    True
    >>> missing_package(OSError("`pip install x`")) is None  # only a missing package says so
    True
    """
    if not isinstance(err, ImportError):
        return None
    found = _PIP_INSTALL.search(str(err))
    return found.group(1).strip() if found else None


def _quantization(model_id: str) -> str | None:
    """The ``quant_method`` of the ``quantization_config`` in a local model folder's
    config.json ("bitsandbytes", "fp8"...), if it has one."""
    try:
        with open(os.path.join(os.path.expanduser(model_id), "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        method = config["quantization_config"]["quant_method"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(method) if method else None


def _saved_quantized(model_id: str) -> str:
    """" (it was saved quantized with METHOD)" for a local folder saved quantized, else ""."""
    method = _quantization(model_id)
    return f" (it was saved quantized with {method})" if method else ""


def check_finite(values, who: str) -> None:
    """Raise :class:`InvalidModelOutput` unless every value of the tensor ``values`` is finite.

    ``who`` names the model for the message ("The NLI model org/name")."""
    import torch

    if not bool(torch.isfinite(values).all()):
        raise InvalidModelOutput(
            f"{who} produced invalid outputs (NaN or infinity), so this analysis cannot be "
            "trusted; load it in full precision or pick another model."
        )


def explain_load_error(model_id: str, what: str, err: BaseException) -> ModelLoadError:
    """Turn a transformers / hub exception into an actionable message."""
    text = f"{type(err).__name__}: {err}"
    low = text.lower()
    is_dir = os.path.isdir(os.path.expanduser(model_id))
    # Memory first: an out-of-memory message quotes sizes ("4030.00 MiB") that must not be
    # mistaken for an HTTP status; status codes only count as whole words.
    if is_out_of_memory(err):
        hint = (
            f"not enough memory to load {model_id!r}. Close other programs, use 4-bit loading on a "
            "GPU, or pick a smaller model preset."
        )
    elif needs_cuda(err):
        hint = (
            f"{model_id!r} needs a CUDA GPU{_saved_quantized(model_id)}, and none is usable here (no NVIDIA GPU, "
            "or a PyTorch built without CUDA). Run it on a machine with a CUDA GPU and a CUDA "
            "build of PyTorch, or pick a model saved without GPU-only quantization (an "
            "unquantized one)."
        )
    elif missing_package(err):
        hint = (
            f"{model_id!r} needs a Python package that is not installed here"
            f"{_saved_quantized(model_id)}: "
            f"{missing_package(err)}. Install it (most quantization packages also need a CUDA "
            "GPU), or pick the model saved without that quantization (on a CUDA GPU this "
            "project loads an unquantized LLM in 4-bit by itself)."
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
