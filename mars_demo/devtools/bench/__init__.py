"""Speed benchmark: ``python -m mars_demo.bench [--llm-shape cpu|7b] [--repeats N] [--json PATH]``.

Builds random-weight models offline with the real architectures' shapes (random weights cost the
same compute as trained ones) and times the whole analysis through the engine's public calls
(:meth:`mars_demo.engine.Engine.generate`, then :meth:`~mars_demo.engine.Engine.score`: what
``Engine.analyze`` does) several times after a warm-up:

* LLM: shaped like the CPU preset (Qwen2.5-0.5B-Instruct body, float32 on CPU) by default, or like
  the GPU default (Qwen2.5-7B-Instruct, built in bf16 on the GPU, then loaded in 4-bit NF4 through
  the engine's normal ``load_llm``) with ``--llm-shape 7b``. Its vocabulary (embeddings, LM head,
  log-softmax) has the real model's size; only the tokenizer is the tiny offline one, and a
  benchmark-only logits processor keeps generation inside the tokenizer's ids (the raw logits,
  hence every log-prob, still span the whole vocabulary).
* importance model: BERT-base shaped; NLI: deberta-base shaped (CPU preset) and deberta-large
  shaped (default). The one the preset uses runs in the full analysis; the other is timed on the
  same sampled answers.
* fixed prompt and fixed answer length: every answer is forced to ``--answer-tokens`` tokens
  (``min_new_tokens = max_new_tokens``, chat prompt = no stop strings), so runs compare.

Generation figures measured in the same run, on the same warm models: ``generate_calls`` per
analysis (one: the greedy answer is row 0 of the samples' batch), ``one_call_speedup`` (the
greedy answer then the samples in two calls, as before, kept in the LLM adapter as a private
reference / the one batched call) and ``analysis_over_greedy_only`` (the whole analysis / one
greedy answer of the same length and nothing else).

It also runs a straightforward reference path on the same models and the same generated answers:
log-probs from a separate teacher-forced LLM pass per answer, one importance call per answer, one
NLI call per ordered pair, samples generated one at a time; the answers with the teacher-forced
log-probs are scored by the public :func:`mars_demo.score`. It checks that both paths give the
same results (every token log-prob, every answer's LN and MARS score, the six uncertainties, the
importance phrase scores, the NLI verdicts and the clusters) within a tolerance that follows the
LLM's compute dtype (``--tolerance``; see :data:`TOLERANCE_BY_DTYPE`), reports the largest
differences it saw, and reports the speed-up of each stage, measured in the same run.

Everything here is benchmark-only instrumentation: the engine is used as is. Where the benchmark
needs something the engine does not offer (forcing the answer length, restricting generation to
the tiny tokenizer's ids, counting LLM forward passes and ``generate`` calls), it wraps the loaded
model object inside this process only; see :class:`.instrument.Instrument`.

Modules: :mod:`.spec` (shapes, targets), :mod:`.models` (random models with real shapes),
:mod:`.instrument` (benchmark-only wrappers), :mod:`.reference` (the straightforward path),
:mod:`.compare` (both paths' results), :mod:`.run` (the timed runs), :mod:`.summary` (figures
of the runs), :mod:`.report` (the text report), :mod:`.evaluate` (seconds per question,
``--evaluate``), :mod:`.real_llm` (a real LLM's GGUF file on the CPU, ``--real-llm``),
:mod:`.peers` (the project against lm-polygraph and TruthTorchLM, ``--peers``;
:mod:`.peer_worker` runs the peers' code in their venv, :mod:`.peer_clock` times every system's
stages alike), :mod:`.cli` (``python -m mars_demo.bench``).
"""

from __future__ import annotations

from .cli import build_parser, main
from .compare import TOLERANCE_BY_DTYPE, compare, default_tolerance, summarize
from .models import build_models
from .report import format_report
from .run import run_benchmark
from .spec import SPECS, BenchError

__all__ = [
    "BenchError",
    "SPECS",
    "TOLERANCE_BY_DTYPE",
    "build_models",
    "build_parser",
    "compare",
    "default_tolerance",
    "format_report",
    "main",
    "run_benchmark",
    "summarize",
]
