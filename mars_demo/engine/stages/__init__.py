"""The scoring stages: everything after generation, as a list of small units over one
:class:`~mars_demo.engine.job.ScoringJob` per answer set.

Each stage declares the job fields it ``reads`` and those it ``adds``, the models it needs, the
progress stage it reports under (one of :data:`mars_demo.progress.STAGES`, or None) and the
``timing`` key its seconds go to. The engine runs only the stages that fill what is asked for
(:func:`plan`), loads only the models those stages need, and checks every declaration as it
runs (:func:`run`): a stage that reads a field nobody filled, or does not fill what it declares,
is a defect that fails loudly.

A new measure is one new stage (see :class:`~.base.Stage`): a small class with ``name``,
``reads``, ``adds``, ``progress``, ``timing``, ``models(jobs, run)`` and ``__call__(jobs, ctx)``,
put in :data:`SCORING` after the stages it reads from, its output in a new field of
:class:`~mars_demo.engine.job.ScoringJob`. An optional model (:mod:`mars_demo.optional`) needs
none: its stage is derived from its declaration (:class:`~.optional.ModelStage`), unless it
has one of its own (:data:`OWN_STAGES`: the similarity model's parts, CCP's NLI pass).

>>> [stage.name for stage in plan(["cluster_ids"])]
['importance', 'alignment', 'nli', 'clustering']
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Iterable, Sequence

from ...optional import OPTIONAL_MODELS
from ...progress import Progress
from ...recipes import Resolved
from ..job import INPUTS, ScoringJob
from .alignment import AlignmentStage
from .base import BASE, MODELS, ScoringContext, Stage
from .ccp import CCPStage
from .clustering import ClusteringStage
from .embeddings import EmbeddingsStage
from .importance import ImportanceStage
from .llm_pass import LLMPassStage
from .methods import MethodsStage
from .nli import NLIStage
from .optional import ModelStage
from .similarity import SimilarityStage
from .uncertainty import UncertaintyStage

__all__ = ["SCORING", "BASE", "MODELS", "ScoringContext", "Stage", "plan", "models_needed", "run"]

#: The optional models' stages of their own; every other optional model runs in a
#: :class:`~.optional.ModelStage` of its declaration.
OWN_STAGES = (SimilarityStage(), CCPStage())

#: Every scoring stage, in the order they run: each optional model's in the order they are
#: declared (:data:`mars_demo.optional.OPTIONAL_MODELS`).
SCORING: tuple[Stage, ...] = (
    ImportanceStage(), AlignmentStage(), NLIStage(), ClusteringStage(), UncertaintyStage(),
    LLMPassStage(),
    *(next((s for s in OWN_STAGES if s.spec is m), None) or ModelStage(m)
      for m in OPTIONAL_MODELS),
    EmbeddingsStage(), MethodsStage(),
)

_FIELDS = {f.name for f in dataclasses.fields(ScoringJob)}


def plan(wanted: Iterable[str], stages: Sequence[Stage] = SCORING) -> list[Stage]:
    """The stages that fill the ``wanted`` job fields and every field they read, in order.

    Raises ``ValueError`` for a field no stage fills or no job has."""
    needed = set(wanted)
    unknown = needed - _FIELDS
    if unknown:
        raise ValueError(f"no job field {sorted(unknown)}; the fields are {sorted(_FIELDS)}")
    chosen: list[Stage] = []
    for stage in reversed(stages):
        if needed & set(stage.adds):
            chosen.append(stage)
            needed -= set(stage.adds)
            needed |= set(stage.reads)
    missing = needed - set(INPUTS)
    if missing:
        raise ValueError(f"no stage fills {sorted(missing)}")
    return chosen[::-1]


def models_needed(stages: Sequence[Stage], jobs: Sequence[ScoringJob],
                  run: Resolved) -> list[str]:
    """The models the ``stages`` need for these ``jobs``, in the order they are loaded."""
    asked = {name for stage in stages for name in stage.models(jobs, run)}
    return [name for name in MODELS if name in asked]


def run(stages: Sequence[Stage], jobs: list[ScoringJob], ctx: ScoringContext,
        progress: Progress, check: Callable[[], None]) -> None:
    """Run the ``stages`` over the ``jobs``: ``check()`` before each, ``progress`` at the start
    and end of each progress stage, the seconds of each added to every job's ``timings`` (a
    batch's seconds shared equally)."""
    current: str | None = None
    for stage in stages:
        if stage.progress != current:
            if current is not None:
                progress(current, 1.0)
            check()
            if stage.progress is not None:
                progress(stage.progress, 0.0)
            current = stage.progress
        else:
            check()
        _check_fields(stage, jobs, stage.reads, "reads")
        t = time.perf_counter()
        stage(jobs, ctx)
        share = (time.perf_counter() - t) / len(jobs)
        _check_fields(stage, jobs, stage.adds, "adds")
        for job in jobs:
            job.timings[stage.timing] = job.timings.get(stage.timing, 0.0) + share
    if current is not None:
        progress(current, 1.0)


def _check_fields(stage: Stage, jobs: Sequence[ScoringJob], names: tuple[str, ...],
                  what: str) -> None:
    for job in jobs:  # the inputs are set when a job is made (reuse may be None by design)
        empty = [name for name in names if name not in INPUTS and getattr(job, name) is None]
        if empty:
            raise RuntimeError(
                f"the {stage.name} stage {what} {', '.join(empty)}, which is not filled"
            )
