"""The importance stage: the phrases of every answer and their importance scores, one batched
pass of the importance function over all questions' answers."""

from __future__ import annotations

from typing import Sequence

from ...recipes import Resolved
from ..job import ScoringJob
from .base import ScoringContext


class ImportanceStage:
    """Phrases and raw importance scores of every answer (``phrasings``), each answer paired
    with its own question: one batched pass for all questions (``bem`` scores one question
    after another, with the same results)."""

    name = "importance"
    reads = ("answers", "question")
    adds = ("phrasings",)
    progress = "importance"
    timing = "importance"

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        return ("importance",)

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        method = ctx.run.settings.importance_method
        options = {} if method == "bem" else {"method": method}
        texts = [[a.text for a in job.answers.answers] for job in jobs]
        if len(jobs) == 1:
            phrasings_of = [ctx.importance.score(jobs[0].question, texts[0], **options)]
        else:
            phrasings_of = ctx.importance.score_many([job.question for job in jobs], texts,
                                                     **options)
        for job, phrasings in zip(jobs, phrasings_of):
            job.phrasings = phrasings
