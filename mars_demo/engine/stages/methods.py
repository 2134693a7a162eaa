"""The methods stage: the uncertainty methods asked for (:mod:`mars_demo.methods`), each from
the scored answers, their clusters, the NLI probabilities and what the optional models and
passes saved (:data:`mars_demo.engine.job.SAVED`, the P(True) passes); no model runs here."""

from __future__ import annotations

from typing import Sequence

from ...methods import METHODS, AnswerInputs, MethodInputs, compute_from
from ...recipes import Resolved
from ...result import SCORINGS, ScoredAnswer
from ..job import SAVED, ScoringJob, all_method_inputs
from .base import ScoringContext


def answer_inputs(a: ScoredAnswer) -> AnswerInputs:
    """What the methods read of one scored answer."""
    return AnswerInputs(
        text=a.text,
        scores={k: getattr(a.scores, k) for k in SCORINGS},
        token_logprobs=[t.logprob for t in a.tokens],
        mars_weights=list(a.mars_weights),
        token_entropies=[t.entropy for t in a.tokens],
        kl_uniform=[t.kl_uniform for t in a.tokens],
        alternatives=[t.alternatives for t in a.tokens],
        end_token=None if a.end_token is None else {
            "logprob": a.end_token.logprob, "entropy": a.end_token.entropy,
            "kl_uniform": a.end_token.kl_uniform, "alternatives": a.end_token.alternatives},
    )


def job_inputs(job: ScoringJob, saved: bool = True, end_token: str = "exclude") -> MethodInputs:
    """:class:`MethodInputs` of a job whose answers are scored and clustered (``saved``: with
    what the optional stages saved, which have run; ``end_token``: the settings' rule)."""
    return MethodInputs(
        question=job.question,
        greedy=answer_inputs(job.scored[0]),
        samples=[answer_inputs(a) for a in job.scored[1:]],
        cluster_ids=list(job.cluster_ids),
        nli_probabilities=job.nli.probabilities if job.nli is not None else None,
        saved=all_method_inputs(job) if saved else {},
        end_token=end_token,
    )


class MethodsStage:
    """The values of the settings' methods (``methods``: ``{id: {variant: value}}``). A method
    that cannot be computed for these answers is left out with a warning naming it."""

    name = "methods"
    reads = ("scored", "cluster_ids", "nli", "method_inputs", *SAVED.values())
    adds = ("methods",)
    progress = "uncertainty"
    timing = "methods"

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        return ()

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        ids = ctx.run.settings.method_ids
        for job in jobs:
            inputs = job_inputs(job, end_token=ctx.run.settings.end_token)
            job.methods = {}
            for method_id in ids:
                try:
                    job.methods.update(compute_from(inputs, [method_id]))
                except ValueError as err:
                    job.warnings.append(
                        f"The method {method_id} could not be computed for these answers, so "
                        f"it is left out: {err}"
                    )
            top_k = job.scored[0].entropy_top_k
            reading = [m for m in job.methods if "token_entropy" in METHODS[m].needs]
            if top_k is not None and reading:
                job.warnings.append(
                    f"The token entropies ({', '.join(reading)}) come from the server's top "
                    f"{top_k} log-probs per token, with the rest of the probability as one "
                    "outcome: a lower bound of each token's entropy.")
