"""What every scoring stage is (:class:`Stage`) and may use (:class:`ScoringContext`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

from ...methods import METHODS
from ...optional import OWN_MODELS, OptionalModel
from ...recipes import Resolved
from ..job import ScoringJob

#: the models a stage may ask for, in the order they are loaded ("llm": an extra LLM pass; then
#: each optional model with a model of its own, :data:`mars_demo.optional.OWN_MODELS`)
BASE = ("llm", "importance", "nli")
MODELS = BASE + tuple(m.field for m in OWN_MODELS)


@dataclass(frozen=True)
class ScoringContext:
    """What every stage of one call may use: the options (settings after the recipe, and the
    recipe), the loaded models every analysis may run (None: no planned stage needs it) and the
    optional ones (``optional``: Settings field -> loaded model)."""

    run: Resolved
    llm: Any = None  # a LanguageModel (mars_demo.models.contract), for an extra LLM pass
    importance: Any = None  # ImportanceModel or BEMImportance
    nli: Any = None  # NLIModel
    optional: Mapping[str, Any] = field(default_factory=dict)

    def model(self, name: str) -> Any:
        """The loaded model ``name`` (of :data:`MODELS`)."""
        return getattr(self, name) if name in BASE else self.optional.get(name)


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


class OptionalModelStage(ABC):
    """The stage of an optional model (:attr:`spec`, its declaration: SAR's similarity model,
    LARS, CCP's NLI pass), which runs only for the methods that need it: the job's
    :attr:`output` is ``{}`` when none of them is asked, an earlier result's entry where
    :meth:`reused` finds one, and else what :meth:`compute` gives the other jobs. The model
    (:attr:`model`) is loaded only when some job needs it."""

    spec: OptionalModel  # its declaration (mars_demo.optional)
    progress = "uncertainty"
    timing = "methods"  # the methods' cost, pass included (no new key in every analysis)

    @property
    def need(self) -> str:
        """The need (mars_demo.methods.NEEDS) of the methods it serves."""
        return self.spec.need

    @property
    def model(self) -> str:
        """The model role (of MODELS) it runs."""
        return self.spec.field

    @property
    def output(self) -> str:
        """The ScoringJob field it fills (an entry of mars_demo.engine.job.SAVED)."""
        return self.spec.output

    def asked(self, run: Resolved) -> bool:
        """Whether a method with this stage's need is asked for."""
        return any(self.need in METHODS[m].needs for m in run.settings.method_ids)

    @abstractmethod
    def reused(self, job: ScoringJob, run: Resolved) -> dict | None:
        """What an earlier result of the job's answers (``job.reuse``) holds that is valid
        now, else None."""

    @abstractmethod
    def compute(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        """Fill :attr:`output` of ``jobs``, none of which has a reusable entry."""

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        if self.asked(run) and any(self.reused(job, run) is None for job in jobs):
            return (self.model,)
        return ()

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        for job in jobs:
            setattr(job, self.output, {})
        if not self.asked(ctx.run):
            return
        fresh = []
        for job in jobs:
            entry = self.reused(job, ctx.run)
            if entry is None:
                fresh.append(job)
            else:
                setattr(job, self.output, entry)
        if fresh:
            self.compute(fresh, ctx)
