"""Benchmark-only instrumentation: wrappers around the loaded models (the engine is not changed)."""

from __future__ import annotations

import resource
import sys
import time



class TokenizerIdsOnly:
    """Logits processor: generate only ids the tiny tokenizer has (the LM head is real-sized).

    Out of place on purpose: ``generate`` keeps the raw logits (``output_logits``) in the same
    tensor it hands to the processors, and the log-probs must come from the raw ones.
    """

    def __init__(self, n_ids: int) -> None:
        self.n_ids = n_ids

    def __call__(self, input_ids, scores):
        out = scores.clone()
        out[:, self.n_ids :] = float("-inf")
        return out


class TimedStreamer:
    """Passes ``generate``'s streamer calls through, noting when each of the first tokens arrives
    (the engine's streamer turns them into the page's text as soon as they decode to text)."""

    def __init__(self, inner, times: list[float], keep: int = 16) -> None:
        self.inner, self.times, self.keep = inner, times, keep
        self.prompt_seen = False

    def put(self, value) -> None:
        if self.prompt_seen and len(self.times) < self.keep:
            self.times.append(time.perf_counter())
        self.prompt_seen = True
        self.inner.put(value)

    def end(self) -> None:
        self.inner.end()


def force_length_kwargs(kwargs: dict, n_tokenizer_ids: int | None) -> dict:
    """``generate``'s ``kwargs`` made to give answers of the fixed length: ``min_new_tokens =
    max_new_tokens`` (the chat prompt has no stop strings) and, given ``n_tokenizer_ids`` (an LM
    head larger than the tokenizer), a logits processor limiting generation to the tokenizer's
    ids. It goes first: the engine's greedy-row processor must see the restricted scores and stay
    the last processor before the sampling warpers."""
    from transformers import LogitsProcessorList

    kwargs["min_new_tokens"] = kwargs.get("max_new_tokens")
    if n_tokenizer_ids is not None:
        procs = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
        procs.insert(0, TokenizerIdsOnly(n_tokenizer_ids))
        kwargs["logits_processor"] = procs
    return kwargs


def force_answer_length(model, n_tokenizer_ids: int) -> None:
    """Make every ``model.generate`` call of this process give answers of the fixed length
    (:func:`force_length_kwargs`), without the forward hooks of :class:`Instrument` (a hook
    inside a compiled graph times nothing)."""
    original = model.generate
    vocab = model.get_output_embeddings().weight.shape[0]
    restrict = n_tokenizer_ids if vocab > n_tokenizer_ids else None
    model.generate = lambda *args, **kwargs: original(*args,
                                                      **force_length_kwargs(kwargs, restrict))


class Instrument:
    """Counts forward passes of the LLM (and of the importance / NLI models) and forces a fixed
    answer length, by wrapping the *loaded* model objects of this process:

    * ``model.generate`` gets ``min_new_tokens = max_new_tokens`` (so no answer stops early; the
      chat prompt has no stop strings) and, when the LM head is larger than the tokenizer, a
      logits processor limiting generation to the tokenizer's ids; it also counts generation
      steps (new tokens per sequence = forward passes of that call) and notes when the streamed
      greedy answer's first tokens reach the engine's streamer;
    * forward hooks count every forward pass of the LLM and note when the first three of a run
      start and end: the model's own passes (the LM head included) and, on the model's body
      (``model.base_model``), a pass made outside them: the prompt's prefill shared by the rows
      before ``generate`` (``llm_options.shared_prompt_cache``), which the adapter counts in
      ``prefix_passes``.
    """

    def __init__(self, llm, importance, nli, n_tokenizer_ids: int) -> None:
        import torch

        self.llm_forwards = 0
        self._llm = llm
        self.importance_forwards = 0
        self.nli_forwards = 0
        self.generation_steps = 0
        self.generate_calls = 0
        self.forward_times: list[list[float]] = []  # [start, end] of a run's first 3 passes
        self._in_model = False  # inside a pass of the whole model (its body hook stays out)
        self._run_forwards = 0
        self.token_times: list[float] = []  # when the streamed tokens reached the streamer
        model = llm.model
        cuda = next(model.parameters()).is_cuda
        self._sync = torch.cuda.synchronize if cuda else (lambda: None)
        vocab = model.get_output_embeddings().weight.shape[0]
        original = model.generate
        restrict = vocab > n_tokenizer_ids

        def generate(*args, **kwargs):
            force_length_kwargs(kwargs, n_tokenizer_ids if restrict else None)
            if kwargs.get("streamer") is not None:
                kwargs["streamer"] = TimedStreamer(kwargs["streamer"], self.token_times)
            self.generate_calls += 1
            out = original(*args, **kwargs)
            seqs = out.sequences if hasattr(out, "sequences") else out
            prompt_len = kwargs["input_ids"].shape[1] if "input_ids" in kwargs else args[0].shape[1]
            self.generation_steps += int(seqs.shape[1] - prompt_len)
            return out

        model.generate = generate  # instance attribute: this process, this benchmark only
        judge = nli.judge
        self.nli_calls = 0

        def counted_judge(*args, **kwargs):
            self.nli_calls += 1
            return judge(*args, **kwargs)

        nli.judge = counted_judge  # the NLI model's calls: one per question, however many passes
        self._handles = [
            model.register_forward_pre_hook(self._model_start),
            model.register_forward_hook(self._model_end),
            model.base_model.register_forward_pre_hook(self._body_start),
            model.base_model.register_forward_hook(self._body_end),
            importance.model.register_forward_pre_hook(self._count("importance_forwards")),
            nli.model.register_forward_pre_hook(self._count("nli_forwards")),
        ]
        self._undo = lambda: (model.__dict__.pop("generate", None),
                              nli.__dict__.pop("judge", None))

    def _count(self, name: str):
        def hook(module, args):
            setattr(self, name, getattr(self, name) + 1)

        return hook

    def start_run(self) -> None:
        """Time the next three LLM passes (the prompt's prefill, the pass giving the first
        token, the next one)."""
        self.forward_times = []
        self._run_forwards = 0
        self.token_times = []

    def _model_start(self, module, args) -> None:
        self._in_model = True
        self._pass_start()

    def _model_end(self, module, args, output) -> None:
        self._in_model = False
        self._pass_end()

    def _body_start(self, module, args) -> None:
        if not self._in_model:
            self._pass_start()

    def _body_end(self, module, args, output) -> None:
        if not self._in_model:
            self._pass_end()

    def _pass_start(self) -> None:
        self.llm_forwards += 1
        self._run_forwards += 1
        if len(self.forward_times) < 3:
            self._sync()  # on a GPU, time the pass itself, not its launch
            self.forward_times.append([time.perf_counter(), float("nan")])

    def _pass_end(self) -> None:
        if self._run_forwards == len(self.forward_times) <= 3:
            self._sync()
            self.forward_times[-1][1] = time.perf_counter()

    def snapshot(self) -> dict[str, int]:
        return {
            "llm": self.llm_forwards,
            "importance": self.importance_forwards,
            "nli": self.nli_forwards,
            "nli_calls": self.nli_calls,
            "generation_steps": self.generation_steps,
            "prefix_passes": getattr(self._llm, "prefix_passes", 0),
            "generate_calls": self.generate_calls,
        }

    def since(self, snap: dict[str, int]) -> dict[str, int]:
        now = self.snapshot()
        return {k: now[k] - snap[k] for k in now}

    def close(self) -> None:
        for h in self._handles:
            h.remove()
        self._undo()


def rss_mb() -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


