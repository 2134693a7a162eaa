"""The one engine behind the page: serializes its use and tracks model loading.

The page may open while the models are still loading (they load in a background thread at
start-up); :meth:`EngineHost.status` says how far loading got, and :meth:`EngineHost.analyze`
refuses with :class:`EngineNotReady` instead of blocking or failing obscurely.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

from mars_demo import texts
from mars_demo.answers import WorkCap
from mars_demo.errors import ModelLoadError
from mars_demo.progress import Progress
from mars_demo.result import AnalysisResult
from mars_demo.settings import Settings

log = logging.getLogger(__name__)

LOG_STEP = 0.25  # log loading progress every quarter of a stage
READY_LOG = "models ready"  # logged once the models are loaded (tests wait for it)


class EngineLike(Protocol):
    """What the page needs from :class:`mars_demo.engine.Engine` (a fake in tests)."""

    settings: Settings
    #: what every verdict the engine computes may cite: a calibration and a reference run
    calibration: Any
    reference: Any

    @property
    def ready(self) -> bool: ...

    def load(self, progress: Progress | None = None) -> None: ...

    def switch(self, settings: Settings, progress: Progress | None = None) -> None: ...

    def describe(self) -> dict[str, Any]: ...

    def analyze(
        self,
        question: str,
        settings: Settings | None = None,
        *,
        progress: Progress | None = None,
        on_text: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> AnalysisResult: ...

    def score(
        self,
        answers: Any,
        settings: Settings | None = None,
        *,
        progress: Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        reuse: AnalysisResult | None = None,
        cap: WorkCap | None = None,
    ) -> AnalysisResult: ...


class EngineNotReady(RuntimeError):
    """The models are loading or failed to load; the message says which, for the user."""


@dataclass(frozen=True)
class LoadStatus:
    """``state``: "idle" (nothing loaded yet), "loading", "ready" or "failed"."""

    state: str
    stage: str = ""
    fraction: float = 0.0
    error: str = ""

    @property
    def percent(self) -> int:
        return round(min(max(self.fraction, 0.0), 1.0) * 100)


class EngineHost:
    """Owns the engine for the page. Every engine call goes through one lock."""

    def __init__(self, engine: EngineLike) -> None:
        self.engine = engine
        self._lock = threading.Lock()  # one engine call at a time (load, switch, analyze)
        # visitors' requests waiting for the engine or holding it: the page's own background
        # work (the example analyses, ui/page/example_warm.py) yields to them
        self._visitors = 0
        self._visitors_changed = threading.Condition()
        self._status_lock = threading.Lock()
        self._status = LoadStatus("ready" if engine.ready else "idle")
        self._logged: tuple[str, int] | None = None

    # --- status -------------------------------------------------------------------------------

    def status(self) -> LoadStatus:
        with self._status_lock:
            return self._status

    def _set_status(self, **changes: Any) -> None:
        with self._status_lock:
            self._status = replace(self._status, **changes)

    def _record(self, outer: Progress | None) -> Progress:
        """A progress callback that records and logs loading progress, then calls ``outer``."""

        def progress(stage: str, fraction: float) -> None:
            self._set_status(stage=stage, fraction=fraction)
            step = int(fraction / LOG_STEP)
            if self._logged != (stage, step):
                self._logged = (stage, step)
                log.info("%s: %d%%", stage, round(fraction * 100))
            if outer is not None:
                outer(stage, fraction)

        return progress

    def describe(self) -> dict[str, Any]:
        return self.engine.describe()

    def judge_with(self, calibration: Any = None, reference: Any = None) -> None:
        """Let the engine's verdicts cite the page's ``calibration`` and ``reference`` run
        (an analysis' verdict is computed once, by the engine, with them)."""
        self.engine.calibration = calibration
        self.engine.reference = reference

    # --- loading ------------------------------------------------------------------------------

    def start_loading(self) -> threading.Thread:
        """Load the models in a background thread, so the page can open meanwhile."""
        self._set_status(state="loading", stage="", fraction=0.0, error="")
        thread = threading.Thread(
            target=self._load, name="mars-load-models", daemon=True
        )
        thread.start()
        return thread

    def load_here(self) -> None:
        """Load the models in this thread, before the page serves (a ZeroGPU Space must place
        its models at start-up in the thread that imported ``spaces``: see
        :mod:`mars_demo.hosting.zerogpu`). A failure is logged and kept in the status, as in the
        background."""
        self._set_status(state="loading", stage="", fraction=0.0, error="")
        self._load()

    def _load(self) -> None:
        """Load now (or take the loaded models); a failure is logged and kept in the status, which
        the page shows."""
        with self._lock:
            if self.engine.ready:
                self._set_status(state="ready", stage="", fraction=1.0, error="")
            else:
                self._run_load(lambda p: self.engine.load(progress=p), None, reraise=False)

    def switch(self, settings: Settings, progress: Progress | None = None) -> None:
        """Free the current models and load the ones ``settings`` names."""
        with self._lock:
            self._run_load(lambda p: self.engine.switch(settings, progress=p), progress)

    def _run_load(
        self, action: Callable[[Progress], None], progress: Progress | None, *, reraise: bool = True
    ) -> None:
        """Run a load or switch, keeping the status up to date; a failure is logged, kept in the
        status and (with ``reraise``) raised again."""
        self._set_status(state="loading", stage="", fraction=0.0, error="")
        said = self.engine.describe()
        log.info("loading models on the %s: LLM %s, importance %s, NLI %s", said["device"],
                 said["llm"], said["importance"], said["nli"])
        try:
            action(self._record(progress))
        except ModelLoadError as exc:  # its message says what to do: no traceback
            log.error("loading the models failed: %s", exc)
            self._set_status(state="failed", error=str(exc))
            if reraise:
                raise
            return
        except Exception as exc:
            log.exception("loading the models failed")
            self._set_status(state="failed", error=str(exc) or type(exc).__name__)
            if reraise:
                raise
            return
        self._set_status(state="ready", stage="", fraction=1.0, error="")
        log.info(READY_LOG)

    # --- analysis -----------------------------------------------------------------------------

    def check_ready(self) -> None:
        """Raise :class:`EngineNotReady` while loading or after a failed load."""
        status = self.status()
        if status.state == "loading":
            if status.stage:
                raise EngineNotReady(
                    texts.ERROR_NOT_READY.format(stage=status.stage, percent=status.percent)
                )
            raise EngineNotReady(texts.ERROR_NOT_READY_START)
        if status.state == "failed":
            raise EngineNotReady(texts.ERROR_LOAD_FAILED.format(error=status.error))

    def visitor_waiting(self) -> bool:
        """Whether a visitor's request waits for the engine or holds it (the page's own
        background work stops then, and starts only when none does)."""
        return self._visitors > 0

    def wait_for_no_visitor(self, timeout: float | None = None) -> bool:
        """Block until no visitor's request waits for the engine or holds it; returns whether
        that happened within ``timeout`` seconds."""
        with self._visitors_changed:
            return self._visitors_changed.wait_for(lambda: self._visitors == 0, timeout)

    @contextlib.contextmanager
    def _counted(self, visitor: bool) -> Iterator[None]:
        if not visitor:
            yield
            return
        with self._visitors_changed:
            self._visitors += 1
        try:
            yield
        finally:
            with self._visitors_changed:
                self._visitors -= 1
                self._visitors_changed.notify_all()

    @contextlib.contextmanager
    def holding(self, settings: Settings, progress: Progress | None = None, *,
                visitor: bool = True) -> Iterator[tuple[EngineLike, Settings]]:
        """Hold the engine for one request: yields the engine and ``settings`` with its models.

        Refuses with :class:`EngineNotReady` while loading or after a failed load; models that
        are not loaded yet load first. The page and the API never choose models per request:
        ``settings``' models are replaced by the engine's as they are once this request holds
        the engine, so a model switch that ran while it waited is followed (and the old models
        are not loaded again). One request at a time: the next waits until this one is done.
        ``visitor``: a visitor's request (counted, see :meth:`visitor_waiting`) or the page's
        own background work (False)."""
        self.check_ready()
        with self._counted(visitor), self._lock:
            if not self.engine.ready:
                self._run_load(lambda p: self.engine.load(progress=p), progress)
            yield self.engine, settings.with_models_of(self.engine.settings)

    def analyze(
        self,
        question: str,
        settings: Settings,
        *,
        progress: Progress | None = None,
        on_text: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> AnalysisResult:
        """Run the engine on one question (held as :meth:`holding` says).

        ``should_stop`` is the engine's cancel check: once it returns True the analysis ends
        with ``AnalysisCancelled`` and the lock is released for the next request."""
        with self.holding(settings, progress) as (engine, settings):
            return engine.analyze(
                question, settings, progress=progress, on_text=on_text, should_stop=should_stop
            )

    def score(
        self,
        answers: Any,
        settings: Settings,
        *,
        progress: Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        reuse: AnalysisResult | None = None,
        cap: WorkCap | None = None,
    ) -> AnalysisResult:
        """Score answers (an answer set, its JSON, or an earlier result to re-score) with the
        engine's models, like :meth:`analyze` but without generating (``cap``: see
        :meth:`mars_demo.engine.Engine.score`)."""
        with self.holding(settings, progress) as (engine, settings):
            return engine.score(
                answers, settings, progress=progress, should_stop=should_stop, reuse=reuse,
                cap=cap,
            )
