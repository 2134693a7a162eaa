"""The clustering stage: sampled answers grouped by meaning from their NLI verdicts."""

from __future__ import annotations

from typing import Sequence

from ...core import clustering
from ...recipes import Resolved
from ..job import ScoringJob
from .base import ScoringContext


class ClusteringStage:
    """One meaning cluster per sample (``cluster_ids``), by the settings' cluster rule and the
    recipe's algorithm (the recipe may also make identical texts one answer)."""

    name = "clustering"
    reads = ("nli",)
    adds = ("cluster_ids",)
    progress = "uncertainty"
    timing = "uncertainty"

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        return ()

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        recipe = ctx.run.recipe
        for job in jobs:
            job.cluster_ids = clustering.semantic_clusters(
                job.nli.labels, rule=ctx.run.settings.cluster_rule,
                algorithm=recipe.clustering_algorithm,
                answers=job.nli.answers if recipe.cluster_by_text else None,
            )
