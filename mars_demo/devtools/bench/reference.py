"""The straightforward reference path: what the engine does, done one call at a time."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from .compare import summarize



def teacher_forced_logprobs(llm, prompt_ids: list[int], token_ids: list[int]) -> list[float]:
    """log P(token | prompt, previous tokens) from one separate forward pass over the answer."""
    import torch

    ids = torch.tensor([list(prompt_ids) + list(token_ids)], device=llm.device)
    with torch.inference_mode():
        logits = llm.model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0]
    p = len(prompt_ids)
    step = logits[p - 1 : p - 1 + len(token_ids)].float()
    chosen = torch.tensor(token_ids, device=step.device).unsqueeze(1)
    lp = step.gather(1, chosen).squeeze(1) - torch.logsumexp(step, dim=1)
    return lp.cpu().tolist()


def nli_per_pair(nli, question: str, answers: list[str]) -> tuple[list[list[str]], int]:
    """The NLI matrix with one model call (batch of 1) per ordered pair, each answer against
    itself too, as the default recipe judges them. Returns (labels, model calls)."""
    n = len(answers)
    labels = [[""] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            pair = (f"{question} {answers[i]}", f"{question} {answers[j]}")
            labels[i][j] = nli.verdicts([pair])[0]
    return labels, n * n


def greedy_per_pair(nli, question: str, greedy: str, answers: list[str]) -> int:
    """Semantic density's pairs as the engine's NLI step judges them (the greedy answer against
    each distinct sample text), one model call (batch of 1) each. Returns the model calls."""
    texts = list(dict.fromkeys(answers))
    for text in texts:
        nli.verdicts([(f"{question} {greedy}", f"{question} {text}")])
    return len(texts)


def _pad_id(llm) -> int:
    tok = llm.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return int(pad if pad is not None else 0)


def reference_generation(llm, prompt_ids: list[int], settings) -> float:
    """Greedy answer, then the samples one ``generate`` call at a time; returns seconds."""
    import torch

    ids = torch.tensor([prompt_ids], device=llm.device)
    common = dict(input_ids=ids, attention_mask=torch.ones_like(ids),
                  max_new_tokens=settings.max_new_tokens, pad_token_id=_pad_id(llm))
    t = time.perf_counter()
    with torch.inference_mode():
        llm.model.generate(do_sample=False, num_beams=1, temperature=None, top_p=None, top_k=None,
                           **common)
        for _ in range(settings.samples):
            llm.model.generate(do_sample=True, temperature=settings.temperature,
                               top_p=settings.top_p, top_k=0, **common)
    return time.perf_counter() - t


def greedy_only_generation(llm, prompt_ids: list[int], settings) -> float:
    """One greedy answer of the same (forced) length, nothing else: what answering the question
    without any uncertainty costs. Returns seconds."""
    import torch

    ids = torch.tensor([prompt_ids], device=llm.device)
    sync = torch.cuda.synchronize if ids.is_cuda else (lambda: None)
    sync()
    t = time.perf_counter()
    with torch.inference_mode():
        llm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                           num_beams=1, temperature=None, top_p=None, top_k=None,
                           max_new_tokens=settings.max_new_tokens, pad_token_id=_pad_id(llm))
    sync()
    return time.perf_counter() - t


def _request(settings):
    """The generation request of the benchmark's settings (the chat prompt: no stop strings)."""
    from ...models.contract import GenerationRequest

    return GenerationRequest(samples=settings.samples, temperature=settings.temperature,
                             top_p=settings.top_p, max_new_tokens=settings.max_new_tokens,
                             seed=settings.seed)


def two_call_generation(llm, prompt_ids: list[int], settings) -> float:
    """The greedy answer, then the samples in a second batched call: how generation was done
    before one batched call, through the LLM contract (a request for the greedy answer alone,
    then one for the samples alone). Returns the seconds the adapter's own clock gives its
    generation, as for the one call."""
    from ...models.contract import Prompt

    prompt, request = Prompt("", list(prompt_ids), "chat", []), _request(settings)
    greedy = llm.generate(prompt, dataclasses.replace(request, samples=0))
    sampled = llm.generate(prompt, dataclasses.replace(request, greedy=False))
    return greedy.timings_s["generate"] + sampled.timings_s["generate"]


def other_cache_generation(llm, prompt_ids: list[int], settings, answers) -> dict[str, Any]:
    """The same one-call generation with the other KV cache (static if the model's generation
    config uses the dynamic one, else dynamic): seconds by the adapter's clock, and whether the
    answers came out the same (token ids; log-probs within 1e-4). ``generate`` makes the static
    cache itself, so that call prefills every row (``llm_options.shared_prompt_cache`` shares
    the prompt's prefill with the dynamic cache only)."""
    from ...models.contract import Prompt

    config = llm.model.generation_config
    was = getattr(config, "cache_implementation", None)
    config.cache_implementation = None if was == "static" else "static"
    try:
        out = llm.generate(Prompt("", list(prompt_ids), "chat", []), _request(settings))
    finally:
        config.cache_implementation = was
    same = all(
        a.token_ids == b.token_ids
        and max((abs(x - y) for x, y in zip(a.logprobs, b.logprobs)), default=0.0) <= 1e-4
        for a, b in zip(answers.answers, [out.greedy, *out.samples])
    )
    return {"static": was != "static", "generation_s": out.timings_s["generate"],
            "same_answers": same}


def reference_after_generation(handles, answers, settings, perturb: float = 0.0
                               ) -> tuple[dict, dict[str, float], list[list]]:
    """Everything after generation, the straightforward way, on the fast path's answers.

    Log-probs from a separate teacher-forced pass per answer, importance one answer at a time,
    NLI one pair at a time (the pairs the engine judges, semantic density's included), clusters
    from those verdicts (``core.clustering``); then
    the answers with the teacher-forced log-probs are scored by the public
    :func:`mars_demo.score` (the same math as the engine: only how the inputs are computed
    differs). ``perturb`` is added to the first token's log-prob of the greedy answer (tests use
    it to check that the comparison can fail). Returns (summary, stage seconds, per-answer
    phrase scores of the one-at-a-time importance calls).
    """
    from ... import score
    from ...answers import AnswerSet
    from ...core import clustering
    from ...methods import METHODS

    llm, importance, nli = handles["llm"], handles["importance"], handles["nli"]
    question, gens = answers.question, answers.answers
    timings: dict[str, float] = {}
    t = time.perf_counter()
    lps = [teacher_forced_logprobs(llm, answers.prompt_token_ids, g.token_ids) for g in gens]
    timings["logprobs"] = time.perf_counter() - t
    if perturb:
        lps[0][0] += perturb

    t = time.perf_counter()
    phrasings = [importance.score(question, [g.text], method=settings.importance_method)[0]
                 for g in gens]
    timings["importance"] = time.perf_counter() - t

    t = time.perf_counter()
    labels, calls = nli_per_pair(nli, question, [g.text for g in gens[1:]])
    if any("greedy_nli" in METHODS[m].needs for m in settings.method_ids):
        calls += greedy_per_pair(nli, question, gens[0].text, [g.text for g in gens[1:]])
    timings["nli"] = time.perf_counter() - t
    cluster_ids = clustering.semantic_clusters(labels, rule=settings.cluster_rule)

    forced = AnswerSet(
        question=question,
        greedy=dataclasses.replace(gens[0], logprobs=lps[0]),
        samples=[dataclasses.replace(g, logprobs=lp) for g, lp in zip(gens[1:], lps[1:])],
        prompt=answers.prompt, prompt_token_ids=answers.prompt_token_ids,
        logprob_source="teacher-forced",
    )
    result = score(forced, **settings.to_dict())
    timings["alignment"] = result.timings_s.get("alignment", 0.0)
    timings["uncertainty"] = result.timings_s.get("uncertainty", 0.0)
    timings["methods"] = result.timings_s.get("methods", 0.0)
    summary = summarize(result.greedy, result.samples, result.uncertainty, cluster_ids, labels)
    summary["nli_calls"] = calls
    phrase_scores = [[(a, b, float(sc)) for (a, b), sc in zip(ph.spans, ph.scores)]
                     for ph in phrasings]
    return summary, timings, phrase_scores


