"""The embeddings stage of EigenScore (``eigenscore``, :mod:`mars_demo.methods.eigenscore`): one
extra forward pass of the in-process LLM over the prompt and each sample, the hidden state of
the sample's last token at the middle layer (lm-polygraph's ``sample_embeddings``), saved in the
analysis as ``method_inputs["eigenscore"]`` so that ``score`` recomputes EigenScore without the
model::

    {"llm": id, "layer": index into the model's hidden states, "answers": [sample texts],
     "embeddings": [[d floats] per sample]}

A backend that declares no ``embeddings`` (a server, ``--llm-endpoint``, has no hidden states)
runs no pass: EigenScore is left out with a warning saying so. Answers without their prompt's
token ids, or whose tokens have no ids, are refused likewise.
"""

from __future__ import annotations

from typing import Sequence

from ...methods import METHODS
from ...models import backends
from ...recipes import Resolved
from ..job import ScoringJob
from .base import ScoringContext
from .llm_pass import llm_name

KEY = "eigenscore"


def asked(run: Resolved) -> bool:
    return any("embeddings" in METHODS[m].needs for m in run.settings.method_ids)


def reused(job: ScoringJob, run: Resolved) -> dict | None:
    if job.reuse is None:
        return None
    entry = job.reuse.method_inputs.get(KEY)
    if (entry and entry.get("embeddings") is not None
            and entry.get("answers") == [a.text for a in job.answers.samples]
            and entry.get("llm") is not None and entry.get("llm") == llm_name(run)):
        return dict(entry)
    return None


class EmbeddingsStage:
    """The samples' middle-layer embeddings of each job (``embeddings``; ``{}`` unless
    EigenScore is asked, or when the LLM cannot give them, with a warning)."""

    name = "embeddings"
    reads = ("answers", "reuse")
    adds = ("embeddings",)
    progress = "uncertainty"
    timing = "methods"  # the methods' cost, pass included

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        if asked(run) and backends.backend_for(run.settings).capabilities.embeddings and any(
                reused(job, run) is None for job in jobs):
            return ("llm",)
        return ()

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        for job in jobs:
            job.embeddings = {}
            if not asked(ctx.run):
                continue
            entry = reused(job, ctx.run)
            if entry is not None:
                job.embeddings = entry
                continue
            why = self._refusal(job, ctx)
            if why:
                job.warnings.append(f"EigenScore needs the LLM's hidden states: {why}")
                continue
            samples = job.answers.samples
            embeddings, layer = ctx.llm.last_token_embeddings(
                list(job.answers.prompt_token_ids), [list(a.token_ids) for a in samples])
            job.embeddings = {"llm": ctx.llm.model_id, "layer": layer,
                              "answers": [a.text for a in samples], "embeddings": embeddings}

    @staticmethod
    def _refusal(job: ScoringJob, ctx: ScoringContext) -> str:
        backend = backends.backend_for(ctx.run.settings)
        if not backend.capabilities.embeddings:
            able = [b.name for b in backends.entries() if b.capabilities.embeddings]
            return (f"the LLM's {backend.name} backend gives none (run the LLM with one that "
                    f"does: --llm-backend {' or '.join(able)}).")
        if not job.answers.prompt_token_ids:
            return "these answers come without the token ids of the prompt they continued."
        if any(i is None for a in job.answers.samples for i in a.token_ids) or any(
                not a.token_ids for a in job.answers.samples):
            return "some sampled answers come without their token ids."
        return ""
