"""The NLI stage: the verdict and the (entailment, neutral, contradiction) probabilities of every
ordered pair of sampled answers, all questions' needed pairs in one batched pass; those of an
earlier result of the same answers are reused."""

from __future__ import annotations

from typing import Sequence

from ...models import registry
from ...recipes import Resolved
from ...result import NLIResult
from ...settings import resolve_nli
from ..job import ScoringJob
from .base import ScoringContext


def reusable(job: ScoringJob, run: Resolved) -> bool:
    """Whether the job's earlier result (``reuse``) holds NLI verdicts valid for it now: the
    same question, the same sample texts, the same NLI model and recipe, and their
    probabilities (an analysis of schema 2 has only the labels: its NLI runs again)."""
    reuse, s = job.reuse, run.settings
    return (
        reuse is not None
        and reuse.nli.probabilities is not None
        and reuse.question == job.answers.question
        and reuse.nli.answers == [a.text for a in job.answers.samples]
        and reuse.settings.get("nli") == resolve_nli(s.nli, registry.cuda_available())
        and reuse.settings.get("recipe", "default") == s.recipe
    )


class NLIStage:
    """NLI verdicts and probabilities among each job's samples (``nli``) and the model that
    gave them (``nli_model_id``), in the recipe's input format. Identical answers need no model
    call; all other needed pairs of all questions go through one :meth:`NLIModel.judge` call
    (each distinct pair once, in length-sorted batches)."""

    name = "nli"
    reads = ("scored", "question", "reuse")
    adds = ("nli", "nli_model_id")
    progress = "nli"
    timing = "nli"

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        return () if all(reusable(job, run) for job in jobs) else ("nli",)

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        fmt = ctx.run.recipe.nli_input_format
        fresh = []
        for job in jobs:
            texts = [a.text for a in job.scored[1:]]
            if reusable(job, ctx.run):  # the same NLI model already judged these answers
                reuse = job.reuse
                job.nli = NLIResult(answers=texts, labels=reuse.nli.labels,
                                    warnings=list(reuse.nli.warnings),
                                    probabilities=reuse.nli.probabilities)
                job.nli_model_id = reuse.settings["nli"]
            else:
                job.nli = NLIResult(answers=texts, labels=[], warnings=[])
                job.nli_model_id = ctx.nli.model_id
                fresh.append(job)
        if fresh:
            matrices = ctx.nli.matrices([j.question for j in fresh],
                                        [j.nli.answers for j in fresh], input_format=fmt)
            for job, m in zip(fresh, matrices):
                job.nli.labels = m.labels
                job.nli.probabilities = m.probabilities
                job.nli.warnings.extend(m.warnings)
