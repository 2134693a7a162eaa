"""How the in-process LLM is loaded and decodes: the operator's ``quantization`` and ``decoding``
options (:mod:`mars_demo.options`), turned into ``from_pretrained`` and ``generate`` arguments.

The defaults are what the project has always done: on CUDA 4-bit NF4 weights by bitsandbytes
(bf16 or fp16 compute), on CPU float32; a dynamic key-value cache that grows with the answer, and
an eager forward. The other choices are for measuring (``python -m mars_demo.bench
--llm-options``) and for an operator who has measured them:

* ``quantization="torchao-int4"``: int4 weight-only (groups of 128) by torchao, through
  transformers' ``TorchAoConfig``, packed for torch's own tinygemm kernel
  (``aten._weight_int4pack_mm``, CUDA, compute capability 8.0 or newer): no other package than
  torchao. torchao 0.18 is the version built for torch 2.11 and newer. Its other int4 layouts
  need the ``mslk`` package (plain, preshuffled) or an Intel GPU; none runs on a CPU, so on a
  machine without such a GPU the option is refused before anything loads, saying so.
* ``decoding="static-compiled"``: ``generate`` with ``cache_implementation="static"`` and a
  ``CompileConfig``. transformers 4.57 then compiles the model's forward with ``torch.compile``
  (mode "reduce-overhead": CUDA graphs) and runs every decoding step but the prefill through it
  (``GenerationMixin._valid_auto_compile_criteria``, ``PreTrainedModel.get_compiled_call``). It
  does so on CUDA only unless the config's ``_compile_all_devices`` is set: this module sets it
  on a CPU, so the compiled path is the one tested here. transformers also refuses to compile a
  model whose quantizer says it cannot be compiled: bitsandbytes' 4-bit says so in 4.57
  (``HfQuantizer.is_compileable`` is False), although bitsandbytes 0.46 and newer compiles its
  4-bit layers; :func:`generate_kwargs` lets such a model compile (NF4 + static-compiled is
  one of the options measured). The static cache is allocated for the batch size and the longest
  prompt + answer seen so far and kept between calls: a new batch size or a longer request makes
  a new cache, and a new compiled graph. After each call :func:`check_compiled` makes sure the
  compiled forward was really used; it raises where transformers skipped it. Never on ZeroGPU,
  where ``torch.compile`` is not allowed: the app refuses it there at start-up
  (:func:`mars_demo.hosting.zerogpu.decoding_refusal`; this floor knows nothing of ZeroGPU).

Importing this module imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import ModelLoadError
from ..options import DECODINGS, QUANTIZATIONS, TORCHAO_NEEDS_4BIT

NF4, TORCHAO_INT4 = QUANTIZATIONS
DYNAMIC, STATIC_COMPILED = DECODINGS
#: torch's tinygemm int4 kernel needs tensor cores of this compute capability (an A100 or newer)
TORCHAO_MIN_CAPABILITY = (8, 0)
#: weights quantized in groups of this many input features (torchao's default)
TORCHAO_GROUP_SIZE = 128
#: the torchao release for torch 2.11+ (older ones skip their kernels on a newer torch)
TORCHAO_REQUIREMENT = "torchao>=0.18,<0.19"


def check(quantization: str, decoding: str, four_bit: bool) -> None:
    """Raise :class:`~mars_demo.errors.ModelLoadError` for options that cannot run on this
    machine, before any weights load: an unknown option; torchao-int4 without 4-bit loading,
    without a CUDA GPU of compute capability 8.0 or newer, or without torchao."""
    if quantization not in QUANTIZATIONS:
        raise ModelLoadError(f"quantization must be one of {', '.join(QUANTIZATIONS)}; "
                             f"got {quantization!r}")
    if decoding not in DECODINGS:
        raise ModelLoadError(f"decoding must be one of {', '.join(DECODINGS)}; got {decoding!r}")
    if quantization != TORCHAO_INT4:
        return
    import torch

    if not torch.cuda.is_available():
        raise ModelLoadError(
            "quantization torchao-int4 needs a CUDA GPU of compute capability "
            f"{'.'.join(map(str, TORCHAO_MIN_CAPABILITY))} or newer (torchao's int4 kernel runs "
            "on such GPUs only), and there is none here: use quantization nf4 (bitsandbytes)"
        )
    if not four_bit:
        raise ModelLoadError(TORCHAO_NEEDS_4BIT)
    capability = tuple(torch.cuda.get_device_capability())
    if capability < TORCHAO_MIN_CAPABILITY:
        raise ModelLoadError(
            f"quantization torchao-int4 needs a GPU of compute capability "
            f"{'.'.join(map(str, TORCHAO_MIN_CAPABILITY))} or newer for torchao's int4 kernel; "
            f"this one ({torch.cuda.get_device_name()}) has {capability[0]}.{capability[1]}: "
            "use quantization nf4 (bitsandbytes)"
        )
    try:
        import torchao  # noqa: F401
    except ImportError as err:
        raise ModelLoadError(
            f"quantization torchao-int4 needs the torchao package (pip install "
            f"'{TORCHAO_REQUIREMENT}'), which is not installed: install it or use "
            f"quantization nf4 ({err})"
        ) from err


def load_kwargs(quantization: str | None, cuda: bool) -> dict[str, Any]:
    """``from_pretrained`` arguments: the weights' dtype, the quantization config and the
    device map. ``quantization`` None: unquantized (bf16 or fp16 on CUDA, float32 on CPU)."""
    import torch

    half = None
    if cuda:
        half = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    # the current device: cuda:LOCAL_RANK in a process of several (evaluate's)
    device_map = {"": torch.cuda.current_device()} if cuda else {"": "cpu"}
    if quantization == TORCHAO_INT4:
        from torchao.quantization import Int4WeightOnlyConfig
        from transformers import TorchAoConfig

        config = Int4WeightOnlyConfig(group_size=TORCHAO_GROUP_SIZE,
                                      int4_packing_format="tile_packed_to_4d")
        # the tinygemm kernel multiplies bf16 activations
        return {"quantization_config": TorchAoConfig(quant_type=config),
                "dtype": torch.bfloat16, "device_map": device_map}
    if quantization == NF4:
        from transformers import BitsAndBytesConfig

        return {"quantization_config": BitsAndBytesConfig(
                    load_in_4bit=True,
                    bnb_4bit_quant_type="nf4",
                    bnb_4bit_use_double_quant=True,
                    bnb_4bit_compute_dtype=half or torch.float32),
                "device_map": device_map}
    if cuda:
        return {"dtype": half, "device_map": device_map}
    return {"dtype": torch.float32}


def generate_kwargs(decoding: str, model) -> dict[str, Any]:
    """The ``generate`` arguments of ``decoding`` for ``model`` (none for dynamic)."""
    if decoding == DYNAMIC:
        return {}
    from transformers import CompileConfig

    config = CompileConfig()
    if model.device.type != "cuda":
        # transformers compiles on CUDA only unless told (its own flag, "useful for testing")
        config._compile_all_devices = True
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and not quantizer.is_compileable:
        _let_compile(quantizer)
    return {"cache_implementation": "static", "compile_config": config}


def _let_compile(quantizer) -> None:
    """Make transformers compile a model whose quantizer says it cannot be compiled
    (bitsandbytes' 4-bit in transformers 4.57; bitsandbytes itself compiles since 0.46): the
    quantizer object becomes one of a subclass whose ``is_compileable`` is True."""
    cls = type(quantizer)
    quantizer.__class__ = type(f"Compiled{cls.__name__}", (cls,),
                               {"is_compileable": property(lambda self: True)})


def check_compiled(model, decoding: str) -> None:
    """Raise RuntimeError if ``decoding`` is static-compiled and ``generate`` did not compile
    the model's forward (transformers skips compilation, with a log line only, where its
    criteria are not met): the option is never ignored silently."""
    if decoding == STATIC_COMPILED and not hasattr(model, "_compiled_call"):
        raise RuntimeError(
            "decoding static-compiled: transformers did not compile the LLM's forward "
            "(its criteria: a static cache, CUDA or compile_config._compile_all_devices, a "
            "compileable quantizer, no offloading); decode with decoding dynamic instead"
        )


def shared_prompt_cache(model, input_ids, attention_mask, rows: int, decoding: str):
    """The prompts' key-value cache computed ONCE and repeated for ``rows`` rows each, or None.

    ``generate`` with ``num_return_sequences=rows`` repeats each prompt row before its prefill,
    so a prompt went through the model ``rows`` times: on a CPU a prefill costs in proportion
    to its rows (6 rows of a 54-token prompt: 1.32 s against 0.34 s for one row of the CPU
    preset's shape). Here one row of each prompt but its last token goes through the model's
    body (left padding masked, positions counted from the mask as ``generate`` counts them), and
    the cache is repeated for the rows (``DynamicCache.batch_repeat_interleave``, the order in
    which ``generate`` repeats the prompts); ``generate``, given that cache, runs only the last
    prompt token, for every row, then decodes as before. Every row's logits are those of a
    prefill of its own up to float32 summation order (the prefill's products have other
    shapes); sampling draws the same random numbers.

    None (``generate`` prefills as it always did) for one row per prompt, a prompt of one token,
    a decoding option other than the dynamic cache or a model whose generation config names a
    cache (``generate`` makes those itself), or a model whose cache is not transformers'
    dynamic one. The caller counts the pass (``LLM.prefix_passes``).
    """
    if (rows < 2 or input_ids.shape[1] < 2 or decoding != DYNAMIC
            or getattr(model.generation_config, "cache_implementation", None) is not None
            or model.config.is_encoder_decoder or not model._supports_default_dynamic_cache()):
        return None
    import inspect

    import torch
    from transformers import DynamicCache

    # the cache generate would make (sliding-window layers where the config has them)
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    body = model.base_model
    mask = attention_mask[:, :-1]
    inputs = dict(input_ids=input_ids[:, :-1], attention_mask=mask, past_key_values=cache,
                  use_cache=True)
    if "position_ids" in inspect.signature(body.forward).parameters:
        inputs["position_ids"] = (mask.long().cumsum(-1) - 1).masked_fill_(mask == 0, 1)
    with torch.inference_mode():  # the body alone: the prompt's logits are never read
        body(**inputs)
    cache.batch_repeat_interleave(rows)
    return cache


# ---- the generate call's own processors ------------------------------------------------------


def stop_criterion(should_stop: Callable[[], bool]):
    """A transformers ``StoppingCriteria`` that finishes every row once ``should_stop()`` is True.

    ``generate`` calls it after each new token with ``(input_ids, scores)`` and wants a bool
    tensor of shape ``(batch,)``. (Built on call, so importing this module stays cheap.)
    """
    import torch
    from transformers import StoppingCriteria

    class StopWhen(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
            stop = bool(should_stop())
            return torch.full(
                (input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device
            )

    return StopWhen()


def greedy_first_row(block: int | None = None):
    """A transformers ``LogitsProcessor`` that makes row 0 of a sampled batch greedy.

    It leaves every row but the first as it is and keeps only the argmax of row 0 (score 0,
    everything else -inf), so the sampler can only pick that token. Passed in ``generate``'s
    ``logits_processor`` list it runs after generate's own processors (banned tokens, minimum
    length...) and before the sampling warpers (temperature, top-k, top-p; transformers 4.57
    appends those after the custom list): a lone finite score survives them all (temperature
    scales it, top-k and top-p always keep the best token), so row 0 is exactly what a greedy run
    (``do_sample=False``, argmax of the same processed scores) picks. It works on a copy: the
    tensor it receives is the one ``output_logits`` keeps, from which log-probs are read.

    ``block``: the batch holds several questions, ``block`` consecutive rows each (``generate``
    with ``num_return_sequences=block`` repeats each prompt row that often): the first row of
    every block (rows 0, block, 2*block, ...) is made greedy.
    """
    import torch
    from transformers import LogitsProcessor

    class GreedyFirstRow(LogitsProcessor):
        def __call__(self, input_ids, scores) -> torch.FloatTensor:
            out = scores.clone()
            rows = torch.arange(0, scores.shape[0], block or scores.shape[0],
                                device=scores.device)
            best = scores[rows].argmax(dim=-1)
            out[rows] = float("-inf")
            out[rows, best] = 0.0
            return out

    return GreedyFirstRow()
