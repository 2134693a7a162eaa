"""The llama.cpp backend's generation against llama.cpp's own completion of the same tokens, for
``python -m mars_demo.bench --real-llm`` (:mod:`.real_llm`).

llama-cpp-python's ``Llama.create_completion`` on the same file, greedy, with the attention the
backend uses (flash attention) and no log-probs kept (its fastest way: keeping every position's
logits, ``logits_all``, is what makes its own log-probs slow), is llama.cpp's own speed for one
answer. The backend's greedy answer alone (a request without samples) makes the same tokens from
the same prompt ids (tests/test_llama_cpp.py), reading every token's log-prob, entropy and KL on
the way: the pair times both, ``R`` times, the order swapped every other pair, in wall seconds and
this process's CPU seconds. The reference is reset before each call, so it reads the prompt
again as the backend does (it would otherwise reuse the prompt's cache from its previous call).
The whole request (the greedy answer and the samples, one batch per step) is timed beside it, in
tokens per second.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from ...models.contract import GenerationRequest, Prompt


def _timed(call) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = call()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def versus_llama(llm, prompt: Prompt, request: GenerationRequest, repeats: int
                 ) -> dict[str, Any]:
    """``repeats`` pairs of (the backend's greedy answer alone, llama.cpp's own greedy completion
    of as many tokens after the same prompt ids), and the whole ``request`` timed ``repeats``
    times: the medians, the ratios and whether the tokens were the same."""
    from llama_cpp import Llama

    from ...models.llama_run import threads

    own = Llama(model_path=str(llm.path), n_ctx=2048, n_threads=threads(),
                n_threads_batch=threads(), flash_attn=True, verbose=False)
    greedy_only = GenerationRequest(**{**request.__dict__, "samples": 0})
    first = llm.generate(prompt, greedy_only).greedy  # warm-up, and the tokens to match
    n = len(first.token_ids) + (1 if first.end_token is not None else 0)

    def project() -> dict[str, float]:
        _, wall, cpu = _timed(lambda: llm.generate(prompt, greedy_only))
        return {"wall_s": wall, "cpu_s": cpu}

    def reference() -> dict[str, float]:
        own.reset()
        done, wall, cpu = _timed(lambda: own.create_completion(
            prompt.token_ids, max_tokens=n, temperature=0.0))
        return {"wall_s": wall, "cpu_s": cpu, "tokens": done["usage"]["completion_tokens"]}

    reference()  # its warm-up
    pairs = []
    for k in range(repeats):
        if k % 2:
            theirs, ours = reference(), project()
        else:
            ours, theirs = project(), reference()
        pairs.append({"project": ours, "llama_cpp": theirs,
                      "cpu_ratio": ours["cpu_s"] / theirs["cpu_s"],
                      "wall_ratio": ours["wall_s"] / theirs["wall_s"]})
    # the ids it read back: all but its last token (drawn, never fed back)
    ids = list(own.input_ids[len(prompt.token_ids):own.n_tokens])
    same = ids == first.token_ids[:len(ids)] and len(ids) >= len(first.token_ids) - 1
    whole = []
    for _ in range(repeats):
        result, wall, cpu = _timed(lambda: llm.generate(prompt, request))
        tokens = sum(len(a.token_ids) + (a.end_token is not None)
                     for a in [result.greedy, *result.samples])
        whole.append({"wall_s": wall, "cpu_s": cpu, "tokens": tokens})
    return {
        "greedy_tokens": n, "same_tokens": same,
        "pairs": pairs,
        **{f"{key}_median": statistics.median(p[key] for p in pairs)
           for key in ("cpu_ratio", "wall_ratio")},
        "llama_cpp_tokens_per_s": statistics.median(
            p["llama_cpp"]["tokens"] / p["llama_cpp"]["wall_s"] for p in pairs),
        "request": {"rows": request.samples + 1, "runs": whole,
                    "tokens_per_s": statistics.median(w["tokens"] / w["wall_s"]
                                                      for w in whole)},
    }
