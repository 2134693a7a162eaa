"""The extra LLM pass stage: for each asked method that needs one (``llm_pass`` in its needs:
P(True)), the log-prob of the next token :data:`mars_demo.core.p_true.TARGET` after the method's
prompt (:func:`mars_demo.methods.llm_pass_prompt`), one forward pass of the LLM (in-process or
through its server). The LLM is loaded only when such a method is asked for and no earlier
result of the same answers already holds the pass; a backend that declares no ``next_token``
runs none (the method is left out, with a warning saying why). What the pass gave is saved in
the analysis (``method_inputs``), so the method's value is recomputed from the JSON alone."""

from __future__ import annotations

from typing import Sequence

from ...core.p_true import TARGET
from ...methods import METHODS, llm_pass_prompt
from ...models import backends, registry
from ...recipes import Resolved
from ..job import ScoringJob
from .base import ScoringContext


def asked(run: Resolved) -> list[str]:
    """The asked methods that need an extra LLM pass."""
    return [m for m in run.settings.method_ids if "llm_pass" in METHODS[m].needs]


def llm_name(run: Resolved) -> str | None:
    """The id of the LLM the settings name (as the pass records it), None when not known
    before loading (a server whose model is not named)."""
    return backends.backend_for(run.settings).model_name(run.settings,
                                                        registry.cuda_available())


def can_pass(run: Resolved) -> bool:
    """Whether the settings' LLM backend gives one next token's log-prob."""
    return backends.backend_for(run.settings).capabilities.next_token


def prompt_of(job: ScoringJob, method_id: str) -> str:
    """The pass's prompt for the job's question, greedy answer and samples (from the answers,
    so that it is known before any stage runs)."""
    answers = job.answers
    return llm_pass_prompt(method_id, job.question, answers.greedy.text,
                           [a.text for a in answers.samples])


def reused(job: ScoringJob, method_id: str, run: Resolved) -> dict | None:
    """The pass of an earlier result of these answers (``reuse``) when it read the same prompt
    with the LLM the settings name, else None."""
    if job.reuse is None:
        return None
    entry = job.reuse.method_inputs.get(method_id)
    if (entry and entry.get("logprob") is not None
            and entry.get("prompt") == prompt_of(job, method_id)
            and entry.get("llm") is not None and entry.get("llm") == llm_name(run)):
        return dict(entry)
    return None


class LLMPassStage:
    """What each asked method's extra LLM pass gives (``method_inputs``: ``{id: {"logprob",
    "prompt", "target", "llm"}}``; empty when none is asked). A pass that gave no log-prob (a
    server that did not return it) is left out, with the LLM's warning."""

    name = "llm_pass"
    reads = ("answers", "question", "reuse")
    adds = ("method_inputs",)
    progress = "uncertainty"
    timing = "methods"  # the methods' cost, pass included (no new key in every analysis)

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        ids = asked(run)
        fresh = any(reused(job, m, run) is None for job in jobs for m in ids)
        return ("llm",) if fresh and can_pass(run) else ()

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        ids = asked(ctx.run)
        backend = backends.backend_for(ctx.run.settings)
        for job in jobs:
            job.method_inputs = {}
            for method_id in ids:
                entry = reused(job, method_id, ctx.run)
                if entry is None and not backend.capabilities.next_token:
                    job.warnings.append(
                        f"{method_id} needs the log-prob of one next token, which the LLM's "
                        f"{backend.name} backend does not give, so it is left out.")
                    continue
                if entry is None:
                    prompt = prompt_of(job, method_id)
                    got = ctx.llm.next_token_logprob(prompt, TARGET)
                    job.warnings.extend(w for w in got.warnings if w not in job.warnings)
                    if got.logprob is None:
                        continue
                    entry = {"logprob": float(got.logprob), "prompt": prompt,
                             "target": got.token, "llm": ctx.llm.model_id}
                job.method_inputs[method_id] = entry
