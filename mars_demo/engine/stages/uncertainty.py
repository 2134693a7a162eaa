"""The uncertainty stage: Confidence, Entropy and Semantic Entropy, each under length-normalized
and MARS scoring (higher = less trustworthy)."""

from __future__ import annotations

from typing import Sequence

from ...core import uncertainty
from ...recipes import Resolved
from ...result import SCORINGS, Pair, ScoredAnswer, Uncertainty
from ..job import ScoringJob
from .base import ScoringContext


def measures(greedy: ScoredAnswer, samples: list[ScoredAnswer],
             cluster_ids: list[int]) -> Uncertainty:
    """The three measures of one answer set under both scorings (:data:`SCORINGS`)."""

    def pair(fn) -> Pair:
        return Pair(**{scoring: fn(scoring) for scoring in SCORINGS})

    def sample_scores(scoring: str) -> list[float]:
        return [getattr(a.scores, scoring) for a in samples]

    return Uncertainty(
        confidence=pair(lambda k: uncertainty.confidence(getattr(greedy.scores, k))),
        entropy=pair(lambda k: uncertainty.entropy(sample_scores(k))),
        semantic_entropy=pair(
            lambda k: uncertainty.semantic_entropy(sample_scores(k), cluster_ids)
        ),
    )


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
            job.uncertainty = measures(job.scored[0], job.scored[1:], job.cluster_ids)
