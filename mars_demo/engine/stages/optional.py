"""The stage of an optional model whose class reads each analysis' answers
(:class:`mars_demo.optional.ReadsAnswers`: LARS, for one), derived from its declaration alone:
no stage of its own to write. It fills the job field the declaration names (``output``) with
what the model says of the job's question and answers (the greedy answer, then the samples),
saved in the analysis under the declaration's entry (``saved``)::

    {MODEL_KEY: the model's id, "question": ..., "answers": [greedy text, sample texts...],
     ...what the model said}

The model is loaded only when one of its methods is asked for and no earlier result of the same
answers (``reuse``) holds what the same model said of them (:meth:`ReadsAnswers.same_reading`).
"""

from __future__ import annotations

from ...optional import OptionalModel
from ...recipes import Resolved
from ..job import ScoringJob
from .base import OptionalModelStage, ScoringContext


def answers_of(job: ScoringJob) -> list:
    """The answers the model reads: the greedy one, then the samples."""
    return [job.answers.greedy, *job.answers.samples]


class ModelStage(OptionalModelStage):
    """What an optional model says of each job's answers (its declaration's ``output``; ``{}``
    when none of its methods is asked). The model reads every job at once (its batches shared);
    each job's warnings are its own."""

    reads = ("answers", "question", "reuse")

    def __init__(self, spec: OptionalModel) -> None:
        self.spec = spec
        self.name = spec.field
        self.adds = (spec.output,)

    def reused(self, job: ScoringJob, run: Resolved) -> dict | None:
        """The entry of an earlier result of these answers and question by the model the
        settings name, where it is what the model would say of them now, else None."""
        if job.reuse is None:
            return None
        entry = job.reuse.method_inputs.get(self.spec.saved)
        answers = answers_of(job)
        if (entry and entry.get(self.spec.model_key) == getattr(run.settings, self.spec.field)
                and entry.get("question") == job.question
                and entry.get("answers") == [a.text for a in answers]
                and self.spec.cls.same_reading(entry, job.question, answers)):
            return dict(entry)
        return None

    def compute(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        every = [answers_of(job) for job in jobs]
        said = ctx.model(self.spec.field).read(
            [(job.question, answers) for job, answers in zip(jobs, every)])
        model_id = getattr(ctx.run.settings, self.spec.field)
        for job, answers, (entry, warnings) in zip(jobs, every, said):
            setattr(job, self.output, {self.spec.model_key: model_id, "question": job.question,
                                       "answers": [a.text for a in answers], **entry})
            job.warnings.extend(w for w in warnings if w not in job.warnings)
