"""The LARS stage of the LARS methods (``lars``, ``lars_entropy``, ``lars_semantic_entropy``;
Yaldiz et al. 2024, :mod:`mars_demo.core.lars`): LARS's logit of each answer of a job (the
greedy answer, then the samples; the job's ``lars_outputs``), saved in the analysis as
``method_inputs["lars"]`` so that the methods are recomputed from the JSON alone:

``{"lars_model": id, "question": ..., "answers": [greedy text, sample texts...],
"number_of_bins": b, "edges": [...] or None, "inputs": [LARS's answer segment of each answer],
"logits": [one float per answer]}``.

An answer's segment is each LLM token's text (the saved token's text: the answer's characters
it covers) followed by the bin token of its probability, exp of its saved log-prob (temperature
1). The model is loaded only when a LARS method is asked for and no earlier result of the same
answers (``reuse``) already holds what the same model said of the same segments.
"""

from __future__ import annotations

import math

from ...core.lars import lars_answer_text
from ...recipes import Resolved
from ..job import ScoringJob
from .base import OptionalModelStage, ScoringContext

KEY = "lars"  # the entry of the analysis' method_inputs


def answers_of(job: ScoringJob) -> list:
    """The answers LARS scores: the greedy one, then the samples."""
    return [job.answers.greedy, *job.answers.samples]


def segments(answers, number_of_bins: int, edges) -> list[str]:
    """LARS's answer segment of each answer (probabilities from its log-probs; one a hair above
    0, as answer sets accept, is probability 1)."""
    return [lars_answer_text(a.token_texts, [min(1.0, math.exp(lp)) for lp in a.logprobs],
                             edges, number_of_bins) for a in answers]


class LarsStage(OptionalModelStage):
    """LARS's logits of each job's answers (``lars_outputs``; ``{}`` when no LARS method is
    asked). The model's batches hold every job's answers (each after its own question),
    sorted by length; each job's warnings count its own answers only."""

    name = "lars"
    reads = ("answers", "question", "reuse")
    adds = ("lars_outputs",)
    progress = "uncertainty"
    timing = "methods"
    need, model, output = "lars_model", "lars", "lars_outputs"

    def reused(self, job: ScoringJob, run: Resolved) -> dict | None:
        """The logits of an earlier result of these answers and question by the model the
        settings name, if it read the same segments, else None."""
        if job.reuse is None:
            return None
        entry = job.reuse.method_inputs.get(KEY)
        answers = answers_of(job)
        if not (entry and entry.get("lars_model") == run.settings.lars
                and entry.get("question") == job.question
                and entry.get("answers") == [a.text for a in answers]):
            return None
        try:
            same = entry.get("inputs") == segments(answers, entry["number_of_bins"],
                                                   entry["edges"])
        except (KeyError, TypeError, ValueError):  # an entry of another shape: score again
            return None
        return dict(entry) if same else None

    def compute(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        model = ctx.model("lars")
        every = [answers_of(job) for job in jobs]
        inputs = [segments(answers, model.number_of_bins, model.edges) for answers in every]
        said = model.grouped_logits([(job.question, texts) for job, texts in zip(jobs, inputs)])
        for job, answers, texts, (logits, warnings) in zip(jobs, every, inputs, said):
            partial = sum(1 for a in answers for t in a.token_texts if t == "")
            if partial:
                total = sum(len(a.token_texts) for a in answers)
                warnings.append(
                    f"LARS read {partial} of {total} tokens of these answers as empty text: each "
                    "is part of a character that the next token completes, so LARS saw only its "
                    "probability bin (LARS's own code reads such a token as the replacement "
                    "character).")
            job.lars_outputs = {
                "lars_model": ctx.run.settings.lars, "question": job.question,
                "answers": [a.text for a in answers], "number_of_bins": model.number_of_bins,
                "edges": model.edges, "inputs": texts, "logits": logits}
            job.warnings.extend(w for w in warnings if w not in job.warnings)
