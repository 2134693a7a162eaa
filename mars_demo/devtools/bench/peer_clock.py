"""The one clock of the peer benchmark (``--peers``), put on the loaded models of each system the
same way, so that every system's seconds are cut into the same stages:

* ``generation``: the LLM's ``generate`` calls (every answer exactly ``tokens`` new tokens: the
  wrapper sets ``min_new_tokens = max_new_tokens = tokens``, so each system generates the same
  number of tokens whatever its own settings or end token);
* ``llm_passes``: LLM forward passes outside ``generate`` (a teacher-forced pass, an extra
  scoring pass);
* ``importance`` and ``nli``: those models' forward passes;
* ``rest``: the question's seconds minus the above (tokenizing, decoding, clustering, the
  estimators' arithmetic, the library's own overhead).

It wraps the loaded model objects of one process only (a benchmark-only instrument, as
:mod:`.instrument` is for the main benchmark); the peers' process imports it too, with the
project on its path, and nothing else of the project. Pure Python around torch hooks.
"""

from __future__ import annotations

import time
from typing import Any

STAGES = ("generation", "llm_passes", "importance", "nli", "rest")


class StageClock:
    """Seconds per stage of the models it is put on (:meth:`put_on`), read and reset by
    :meth:`take`."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.generated: list[int] = []  # new tokens of each generate call (every row alike)
        self._in_generate = False
        self._undo: list = []  # what take_off undoes: the models are shared (the registry's)
        self._timed: set[int] = set()  # the models it times: each once, however many engines

    def _add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
        self.calls[stage] = self.calls.get(stage, 0) + 1

    def put_on(self, llm: Any, importance: Any = None, nli: Any = None) -> None:
        """Time ``llm.generate`` (and fix its answers' length), the LLM's forward passes outside
        it, and the importance and NLI models' forward passes (``llm`` None: those alone)."""
        for model, stage in ((importance, "importance"), (nli, "nli")):
            if model is not None:
                self._time_forward(model, stage)
        if llm is None:
            return
        generate = llm.generate

        def fixed_generate(*args, **kwargs):
            kwargs.update(max_new_tokens=self.tokens, min_new_tokens=self.tokens)
            t = time.perf_counter()
            self._in_generate = True
            try:
                out = generate(*args, **kwargs)
            finally:
                self._in_generate = False
                self._add("generation", time.perf_counter() - t)
            given = kwargs.get("input_ids", args[0] if args else None)
            made = getattr(out, "sequences", out)
            if given is not None and hasattr(made, "shape"):
                self.generated.append(int(made.shape[1] - given.shape[1]))
            return out

        llm.generate = fixed_generate
        self._undo.append(lambda: llm.__dict__.pop("generate", None))
        self._time_forward(llm, "llm_passes", outside_generate=True)

    def put_on_llama(self, llm: Any) -> None:
        """The same for the project's llama.cpp backend (:class:`~mars_demo.models.llama_cpp.
        LlamaCppLLM`), which has no ``generate`` of transformers: its ``generate`` calls timed as
        generation, and every answer ``tokens`` new tokens (its end-of-generation tokens never
        drawn, as ``min_new_tokens`` keeps transformers' end token out, and no token ends a
        row)."""
        generate, banned, eog = llm.generate, llm.banned_token_ids, llm.tokenizer.eog_ids

        def fixed_generate(prompt, request, **kwargs):
            import dataclasses

            t = time.perf_counter()
            try:
                out = generate(prompt, dataclasses.replace(request, max_new_tokens=self.tokens),
                               **kwargs)
            finally:
                self._add("generation", time.perf_counter() - t)
            self.generated.append(max(len(a.token_ids) for a in [out.greedy, *out.samples]))
            return out

        llm.generate = fixed_generate
        llm.banned_token_ids = lambda strings: sorted(set(banned(strings)) | eog)
        llm.tokenizer.eog_ids = set()

        def undo() -> None:
            for name in ("generate", "banned_token_ids"):
                llm.__dict__.pop(name, None)
            llm.tokenizer.eog_ids = eog

        self._undo.append(undo)

    def _time_forward(self, model: Any, stage: str, outside_generate: bool = False) -> None:
        if id(model) in self._timed:  # a model two engines share (the registry's cached one)
            return
        self._timed.add(id(model))
        started: list[float] = []

        def before(_module, _inputs):
            if not (outside_generate and self._in_generate):
                started.append(time.perf_counter())

        def after(_module, _inputs, _output):
            if started and not (outside_generate and self._in_generate):
                self._add(stage, time.perf_counter() - started.pop())

        self._undo += [model.register_forward_pre_hook(before).remove,
                       model.register_forward_hook(after).remove]

    def take_off(self) -> None:
        """Give the models back as they were: ``generate`` unfixed, no timing hooks. The
        project's models are the process's cached ones (:mod:`mars_demo.models.registry`), so a
        clock left on would fix every later answer's length in this process."""
        while self._undo:
            self._undo.pop()()
        self._timed.clear()

    def take(self, total: float) -> dict[str, Any]:
        """The stages of a question that took ``total`` seconds, and the calls made; reset."""
        stages = {k: self.seconds.get(k, 0.0) for k in STAGES if k != "rest"}
        stages["rest"] = max(0.0, total - sum(stages.values()))
        out = {"seconds": total, "stages": stages, "calls": dict(self.calls),
               "generated_tokens": list(self.generated)}
        self.seconds, self.calls, self.generated = {}, {}, []
        return out
