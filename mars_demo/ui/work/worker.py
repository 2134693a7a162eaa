"""The page's work: one worker thread per analysis, and the relay that turns what it reports
into page updates.

An Ask (or a Score of pasted answers) iterates the events of its GPU function
(:func:`analysis_events`, :func:`score_events`): one :class:`Worker` thread runs the engine and
reports the streaming answer and the stage progress as events, at least every
:data:`GPU_HEARTBEAT_S` while the models report nothing; :func:`relay` turns them into page
updates. Closing the handler (a closed tab, a cancelled request) closes those events, which
cancels the worker, so an analysis stops at its next generated token or stage.

Every call that runs the models (and so a GPU) goes through the two functions under "GPU work",
decorated with ``@spaces.GPU`` (:mod:`mars_demo.hosting.zerogpu`; a no-op off a ZeroGPU Space). On
ZeroGPU they run in another process, so they take only what pickles (the question, the settings,
the answers, a :class:`GpuCall` naming the engine) and yield their progress, streamed text and
result as events instead of calling back. The page relays those events as they are; the API
and a re-score, which wait for the result alone, turn them into callbacks
(:func:`gpu_analyze`, :func:`gpu_score`). The same path runs everywhere.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import os
import pickle
import queue
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import gradio as gr

from mars_demo.answers import WorkCap
from mars_demo.errors import AnalysisCancelled
from mars_demo.hosting import zerogpu
from mars_demo.progress import Progress
from mars_demo.result import AnalysisResult
from mars_demo.settings import Settings
from mars_demo.ui.draw import render
from mars_demo.ui.work.host import EngineHost, EngineLike

log = logging.getLogger(__name__)

STREAM_INTERVAL_S = 0.05  # at most ~20 page updates per second while the answer streams
# While the analysis reports nothing (sampling, NLI) the page still gets an update (the same
# again) this often: Gradio notices a closed tab or a cancel only between two updates of a
# streaming event, and closing the handler is what stops the analysis.
HEARTBEAT_S = 0.5
# The GPU work yields an event at least this often too, so that a cancel reaches it (on ZeroGPU
# only as the closing of its generator, which the GPU process notices at its next event).
GPU_HEARTBEAT_S = 0.2
CANCELLED_LOG = "analysis cancelled; the models are free"  # logged when a cancel stopped one
ANALYSIS_THREAD = "mars-analyze"  # the one worker thread of an analysis
SCORING_THREAD = "mars-score"  # the one worker thread of scoring given answers


# --- GPU work: every call that runs the models ----------------------------------------------

Event = tuple[str, Any]  # ("progress", (stage, fraction)), ("text", partial answer), ("wait",
# None), then ("done", result) or ("error", exception)

# The engines the GPU functions can reach, by id. A ZeroGPU process is forked from this one at
# its first call, so it holds the engine as it was then (models included: they are loaded at
# start-up there, see app.py).
_ENGINES: weakref.WeakValueDictionary[int, EngineLike] = weakref.WeakValueDictionary()
# The cancel checks of the calls running now, by call number (only this process can read them).
_CANCEL_CHECKS: dict[int, Callable[[], bool]] = {}
_CALLS = itertools.count(1)
_QUIET_CALLS: set[int] = set()  # the calls of the page's own background work (not logged)


@dataclass(frozen=True)
class GpuCall:
    """What a GPU function needs besides the request, in a form that pickles: the engine (by id)
    and the calling process and call, whose cancel check it reads directly when it runs in that
    same process (off ZeroGPU): a cancel then lands at the very next token."""

    engine: int
    pid: int
    call: int


def gpu_analyze(host: EngineHost, question: str, settings: Settings, *,
                progress: Progress | None = None, on_text: Callable[[str], None] | None = None,
                should_stop: Callable[[], bool] | None = None,
                visitor: bool = True) -> AnalysisResult:
    """Generate and score the answers to ``question`` with ``host``'s engine
    (:func:`analyze_on_gpu`; held as :meth:`EngineHost.holding` says: ``visitor`` False for
    the page's own background work)."""
    with host.holding(settings, progress, visitor=visitor) as (engine, settings):
        with _calling(engine, should_stop, quiet=not visitor) as where:
            return _follow(analyze_on_gpu(where, question, settings), progress, on_text,
                           should_stop)


def gpu_score(host: EngineHost, answers: Any, settings: Settings, *,
              progress: Progress | None = None, should_stop: Callable[[], bool] | None = None,
              reuse: AnalysisResult | None = None, cap: WorkCap | None = None) -> AnalysisResult:
    """Score given answers, or re-score a result (:func:`score_on_gpu`); ``cap``: the most
    their teacher-forced pass may cost (a public page's, :attr:`Access.work_cap
    <mars_demo.hosting.access.Access.work_cap>`)."""
    with host.holding(settings, progress) as (engine, settings):
        with _calling(engine, should_stop) as where:
            return _follow(score_on_gpu(where, answers, settings, reuse, cap), progress, None,
                           should_stop)


@zerogpu.gpu(duration=zerogpu.analysis_seconds)
def analyze_on_gpu(where: GpuCall, question: str, settings: Settings) -> Iterator[Event]:
    """:meth:`Engine.analyze <mars_demo.engine.Engine.analyze>` as events (on ZeroGPU, in the
    GPU process)."""
    engine = _engine(where)
    yield from _events(where, lambda progress, on_text, should_stop: engine.analyze(
        question, settings, progress=progress, on_text=on_text, should_stop=should_stop),
        ANALYSIS_THREAD)


@zerogpu.gpu(duration=zerogpu.scoring_seconds)
def score_on_gpu(where: GpuCall, answers: Any, settings: Settings,
                 reuse: AnalysisResult | None = None,
                 cap: WorkCap | None = None) -> Iterator[Event]:
    """:meth:`Engine.score <mars_demo.engine.Engine.score>` as events."""
    engine = _engine(where)
    yield from _events(where, lambda progress, _text, should_stop: engine.score(
        answers, settings, progress=progress, should_stop=should_stop, reuse=reuse, cap=cap),
        SCORING_THREAD)


def analysis_events(host: EngineHost, question: str, settings: Settings) -> Iterator[Event]:
    """The events of one analysis of ``question`` with ``host``'s engine, for the page to relay
    as they come (:func:`relay`): those of :func:`analyze_on_gpu`, whose one worker thread runs
    the engine, with the engine held for the request (:meth:`EngineHost.holding`). A refusal
    of ZeroGPU is raised as :class:`~mars_demo.hosting.zerogpu.GpuRefused`; closing the events stops
    the analysis and frees the engine."""
    with host.holding(settings) as (engine, settings):
        with _calling(engine, None) as where:
            yield from _refusals_explained(analyze_on_gpu(where, question, settings))


def score_events(host: EngineHost, answers: Any, settings: Settings,
                 cap: WorkCap | None = None) -> Iterator[Event]:
    """The events of scoring ``answers`` (:func:`score_on_gpu`), as :func:`analysis_events`."""
    with host.holding(settings) as (engine, settings):
        with _calling(engine, None) as where:
            yield from _refusals_explained(score_on_gpu(where, answers, settings, None, cap))


def switch_models(host: EngineHost, settings: Settings, progress: Progress | None = None) -> None:
    """Free the models and load the ones ``settings`` names (:meth:`EngineHost.switch`). Not GPU
    work in ZeroGPU's sense: models load in this process (a public page, a Space included, has
    no switch)."""
    host.switch(settings, progress=progress)


@contextlib.contextmanager
def _calling(engine: EngineLike, should_stop: Callable[[], bool] | None,
             quiet: bool = False) -> Iterator[GpuCall]:
    """Register the engine and the cancel check of one call; yields its :class:`GpuCall`.
    ``quiet``: the page's own background work, whose stop for a visitor is not logged as a
    visitor's cancel (:data:`CANCELLED_LOG`)."""
    _ENGINES[id(engine)] = engine
    where = GpuCall(id(engine), os.getpid(), next(_CALLS))
    if should_stop is not None:
        _CANCEL_CHECKS[where.call] = should_stop
    if quiet:
        _QUIET_CALLS.add(where.call)
    try:
        yield where
    finally:
        _CANCEL_CHECKS.pop(where.call, None)
        _QUIET_CALLS.discard(where.call)


def _engine(where: GpuCall) -> EngineLike:
    engine = _ENGINES.get(where.engine)
    if engine is None:  # a GPU process forked before this engine existed (not the app's case)
        raise RuntimeError("the GPU process does not know this engine; restart the app")
    return engine


def _events(where: GpuCall, task: Callable[[Progress, Callable[[str], None],
                                            Callable[[], bool]], Any],
            name: str = "mars-gpu-work") -> Iterator[Event]:
    """Run ``task(progress, on_text, should_stop)`` in a thread and yield what it reports, a
    ("wait", None) at least every :data:`GPU_HEARTBEAT_S`, and last ("done", value) or
    ("error", exception). Closing the generator stops the task (``should_stop()`` turns True)
    and waits for it to end, so the models are free when ``close()`` returns."""
    here = os.getpid() == where.pid
    caller = _CANCEL_CHECKS.get(where.call) if here else None
    work = Worker(task, name, stop_also=caller,
                  log_cancel=not (here and where.call in _QUIET_CALLS))
    try:
        while True:
            try:
                kind, payload = work.events.get(timeout=GPU_HEARTBEAT_S)
            except queue.Empty:
                yield "wait", None
                continue
            if kind == "error" and not here:
                payload = _portable(payload)
            yield kind, payload
            if kind in ("done", "error"):
                return
    finally:
        work.cancel()
        work.thread.join()


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling (it crosses into the app's process), else a RuntimeError
    with its type and message. Logged here with its traceback, which does not cross."""
    if not isinstance(exc, (AnalysisCancelled, ValueError)):  # ValueError: bad input
        log.warning("the GPU work failed", exc_info=exc)
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _follow(events: Generator[Event, None, None], progress: Progress | None,
            on_text: Callable[[str], None] | None,
            should_stop: Callable[[], bool] | None) -> Any:
    """Turn the events of a GPU function into the callbacks; return its result or raise its
    error. Once ``should_stop()`` is True the GPU work is stopped (its generator closed) and
    :class:`AnalysisCancelled` raised."""
    try:
        for kind, payload in _refusals_explained(events):
            if kind == "done":
                return payload
            if kind == "error":
                raise payload
            if kind == "text" and on_text is not None:
                on_text(payload)
            elif kind == "progress" and progress is not None:
                progress(*payload)
            if should_stop is not None and should_stop():
                raise AnalysisCancelled("the analysis was cancelled")
        raise RuntimeError("the GPU work ended without a result")
    finally:
        events.close()


def _refusals_explained(events: Iterator[Event]) -> Iterator[Event]:
    """``events``, with ZeroGPU's refusals (no quota left, no GPU free, a task aborted: the
    ``spaces`` package raises them as ``gr.Error``; nothing else in the GPU work does) turned
    into :class:`~mars_demo.hosting.zerogpu.GpuRefused`, whose message the page shows as it is."""
    try:
        yield from events
    except gr.Error as err:
        raise zerogpu.GpuRefused(str(getattr(err, "message", err))) from err


# --- the thread and its relay --------------------------------------------------------------------


class Worker:
    """Runs ``task(progress, on_text, should_stop)`` in a daemon thread.

    ``events`` is the queue of what it reports: ("progress", (stage, fraction)) and ("text",
    partial answer) while it runs, then ("done", its return value) or ("error", the exception).
    :meth:`cancel` (or ``stop_also()`` turning True) makes ``should_stop()`` True, so an
    analysis ends at its next generated token or stage (with ``AnalysisCancelled``) and frees
    the models. The thread runs in a copy of the creator's context (``contextvars``): Gradio's
    request, which ZeroGPU reads to charge the visitor's quota, stays visible there.
    """

    def __init__(
        self,
        task: Callable[[Progress, Callable[[str], None], Callable[[], bool]], Any],
        name: str,
        *,
        log_cancel: bool = True,
        stop_also: Callable[[], bool] | None = None,
    ) -> None:
        self.events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._log_cancel = log_cancel
        self._stop_also = stop_also
        context = contextvars.copy_context()
        self.thread = threading.Thread(target=context.run, args=(self._work, task), name=name,
                                       daemon=True)
        self.thread.start()

    def _should_stop(self) -> bool:
        return self._stop.is_set() or (self._stop_also is not None and self._stop_also())

    def _work(self, task: Callable[..., Any]) -> None:
        events = self.events
        try:
            value = task(
                lambda stage, fraction: events.put(("progress", (stage, fraction))),
                lambda text: events.put(("text", text)),
                self._should_stop,
            )
        except BaseException as exc:
            if isinstance(exc, AnalysisCancelled) and self._log_cancel:
                log.info(CANCELLED_LOG)
            events.put(("error", exc))
            if not isinstance(exc, Exception):
                raise
        else:
            events.put(("done", value))

    def cancel(self) -> None:
        self._stop.set()


def relay(events: Iterator[Event], question: str,
          working: str | Callable[[float], str] = ""
          ) -> Generator[dict[str, Any], None, tuple[str, Any]]:
    """Yield the page updates of a running analysis (``events``: :func:`analysis_events`);
    return its ("done", result) or ("error", exception), or ("refused", exception) for work
    that failed before it reported anything (a question the engine's door refuses), which
    yields nothing. Once the work reported its first event, the first update clears the last
    result from the page (the browser did at the press already) and puts ``working`` (the
    verdict being worked out) in the verdict's place. Then the streaming answer and the stage
    progress, at most every :data:`STREAM_INTERVAL_S`, and the same again at least every
    :data:`HEARTBEAT_S` while nothing changes (Gradio notices a closed tab only between two
    updates). ``working`` may be a function of the seconds since the analysis started: its
    text is put in the verdict's place again whenever it changes (the expected wait overrun)."""
    started = time.monotonic()
    kind, payload = _next(events)
    if kind in ("done", "error"):
        return ("refused" if kind == "error" else kind), payload
    said = working(time.monotonic() - started) if callable(working) else working
    yield {
        "result": None,
        "error": "",
        "warnings": "",  # the last question's warnings must not stay beside this one
        "progress": render.progress_html(render.StageProgress()),
        "answer": render.streaming_html(question, ""),
        "verdict": said,
        "results": gr.update(visible=False),
        "download": gr.update(value=None, visible=False),
    }
    partial, progress = "", render.StageProgress()
    shown, changed = time.monotonic(), False
    while True:
        if kind == "text":
            partial, changed = payload, True
        elif kind == "progress":
            progress, changed = render.StageProgress(*payload), True
        elif kind in ("done", "error"):
            return kind, payload
        waited = time.monotonic() - shown
        if (changed and waited >= STREAM_INTERVAL_S) or waited >= HEARTBEAT_S:
            update = {
                "answer": render.streaming_html(question, partial),
                "progress": render.progress_html(progress),
            }
            now = working(time.monotonic() - started) if callable(working) else said
            if now != said:
                update["verdict"] = said = now
            yield update
            shown, changed = time.monotonic(), False
        kind, payload = _next(events)


def _next(events: Iterator[Event]) -> Event:
    """The next event of ``events``; what they raise (the engine held by another request that
    failed to load, ZeroGPU's refusal) as ("error", exception)."""
    try:
        return next(events)
    except StopIteration:
        return "error", RuntimeError("the analysis ended without a result")
    except Exception as exc:
        return "error", exc
