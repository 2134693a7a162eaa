"""The uncertainty stage: MARS's three measures (Confidence, Entropy, Semantic Entropy), each
under length-normalized and MARS scoring (higher = less trustworthy): the methods
:data:`mars_demo.methods.MEASURES`, computed by their own entries, kept in every analysis as its
``uncertainty`` block."""

from __future__ import annotations

from typing import Sequence

from ...methods import MEASURES, compute_from
from ...recipes import Resolved
from ...result import Pair, Uncertainty
from ..job import ScoringJob
from .base import ScoringContext
from .methods import job_inputs


class UncertaintyStage:
    """The measures of every job (``uncertainty``) from its scored answers and clusters."""

    name = "uncertainty"
    reads = ("scored", "cluster_ids")
    adds = ("uncertainty",)
    progress = "uncertainty"
    timing = "uncertainty"

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        return ()

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        for job in jobs:
            values = compute_from(job_inputs(job, saved=False), MEASURES)
            job.uncertainty = Uncertainty(**{m: Pair(**values[m]) for m in MEASURES})
