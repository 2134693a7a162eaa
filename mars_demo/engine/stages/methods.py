"""The methods stage: the other uncertainty methods asked for (:mod:`mars_demo.methods`: graph
measures, kernel entropy, lexical similarity, the semantic entropy variants), each from the
scored samples, their clusters, the NLI probabilities, the log-probs of the extra LLM
passes (:mod:`.llm_pass`), SAR's similarities (:mod:`.similarity`) and LARS's logits
(:mod:`.lars`); no model runs here."""

from __future__ import annotations

from typing import Sequence

from ...methods import MethodInputs, compute_from
from ...recipes import Resolved
from ...result import SCORINGS
from ..job import ScoringJob, all_method_inputs
from .base import ScoringContext


class MethodsStage:
    """The values of the settings' methods (``methods``: ``{id: {variant: value}}``). A method
    that cannot be computed for these answers is left out with a warning naming it."""

    name = "methods"
    reads = ("scored", "cluster_ids", "nli", "method_inputs", "similarities", "lars_outputs")
    adds = ("methods",)
    progress = "uncertainty"
    timing = "methods"

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        return ()

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        ids = ctx.run.settings.method_ids
        for job in jobs:
            samples = job.scored[1:]
            inputs = MethodInputs(
                texts=[a.text for a in samples],
                scores={k: [getattr(a.scores, k) for a in samples] for k in SCORINGS},
                cluster_ids=list(job.cluster_ids),
                nli_probabilities=job.nli.probabilities,
                llm_pass=all_method_inputs(job),
                token_logprobs=[[t.logprob for t in a.tokens] for a in samples],
            )
            job.methods = {}
            for method_id in ids:
                try:
                    job.methods.update(compute_from(inputs, [method_id]))
                except ValueError as err:
                    job.warnings.append(
                        f"The method {method_id} could not be computed for these answers, so "
                        f"it is left out: {err}"
                    )
