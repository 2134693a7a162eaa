"""What every scoring stage is (:class:`Stage`) and may use (:class:`ScoringContext`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from ...recipes import Resolved
from ..job import ScoringJob

#: the models a stage may ask for, in the order they are loaded ("llm": an extra LLM pass;
#: "similarity": SAR's cross-encoder; "lars": LARS's trained scorer)
MODELS = ("llm", "importance", "nli", "similarity", "lars")


@dataclass(frozen=True)
class ScoringContext:
    """What every stage of one call may use: the options (settings after the recipe, and the
    recipe) and the loaded models (None: no planned stage needs it)."""

    run: Resolved
    llm: Any = None  # a LanguageModel (mars_demo.models.contract), for an extra LLM pass
    importance: Any = None  # ImportanceModel or BEMImportance
    nli: Any = None  # NLIModel
    similarity: Any = None  # SimilarityModel (mars_demo.models.similarity), for SAR
    lars: Any = None  # LarsModel (mars_demo.models.lars), for the LARS methods


class Stage(Protocol):
    """One scoring stage (see :mod:`mars_demo.engine.stages`)."""

    name: str  # how errors name it
    reads: tuple[str, ...]  # ScoringJob fields it needs, filled before it runs
    adds: tuple[str, ...]  # ScoringJob fields it fills
    progress: str | None  # the progress stage it reports under; None: none
    timing: str  # the timings_s key its seconds are added to

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        """The models (of :data:`MODELS`) it needs for these jobs."""

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        """Fill :attr:`adds` of every job (batched across the jobs where that pays)."""
