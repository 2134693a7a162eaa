"""The page's work in a thread, and the relay that turns what it reports into page updates.

A handler that runs the models starts a :class:`Worker` and relays its events (:func:`relay`):
the streaming answer and the stage progress, at least every :data:`HEARTBEAT_S` while the models
report nothing. Closing the handler (a closed tab, a cancelled request) cancels the worker, so an
analysis stops at its next generated token or stage.

Every call that runs the models (and so a GPU) is one of the functions under "GPU work" below,
the one place to decorate them (e.g. for a Space's ZeroGPU).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Generator
from typing import Any

import gradio as gr

from mars_demo.errors import AnalysisCancelled
from mars_demo.progress import Progress
from mars_demo.result import AnalysisResult
from mars_demo.settings import Settings
from mars_demo.ui import render
from mars_demo.ui.host import EngineHost

log = logging.getLogger(__name__)

STREAM_INTERVAL_S = 0.05  # at most ~20 page updates per second while the answer streams
# While the analysis reports nothing (sampling, NLI) the page still gets an update (the same
# again) this often: Gradio notices a closed tab or a cancel only between two updates of a
# streaming event, and closing the handler is what stops the analysis.
HEARTBEAT_S = 0.5
CANCELLED_LOG = "analysis cancelled; the models are free"  # logged when a cancel stopped one


# --- GPU work: every call that runs the models ----------------------------------------------


def gpu_analyze(host: EngineHost, question: str, settings: Settings, *,
                progress: Progress | None = None, on_text: Callable[[str], None] | None = None,
                should_stop: Callable[[], bool] | None = None) -> AnalysisResult:
    """Generate and score the answers to ``question`` (:meth:`EngineHost.analyze`)."""
    return host.analyze(question, settings, progress=progress, on_text=on_text,
                        should_stop=should_stop)


def gpu_score(host: EngineHost, answers: Any, settings: Settings, *,
              progress: Progress | None = None, should_stop: Callable[[], bool] | None = None,
              reuse: AnalysisResult | None = None) -> AnalysisResult:
    """Score given answers, or re-score a result (:meth:`EngineHost.score`)."""
    return host.score(answers, settings, progress=progress, should_stop=should_stop,
                      reuse=reuse)


def gpu_switch(host: EngineHost, settings: Settings, progress: Progress | None = None) -> None:
    """Free the models and load the ones ``settings`` names (:meth:`EngineHost.switch`)."""
    host.switch(settings, progress=progress)


# --- the thread and its relay --------------------------------------------------------------------


class Worker:
    """Runs ``task(progress, on_text, should_stop)`` in a daemon thread.

    ``events`` is the queue of what it reports: ("progress", (stage, fraction)) and ("text",
    partial answer) while it runs, then ("done", its return value) or ("error", the exception).
    :meth:`cancel` makes ``should_stop()`` True, so an analysis ends at its next generated token
    or stage (with ``AnalysisCancelled``) and frees the models.
    """

    def __init__(
        self,
        task: Callable[[Progress, Callable[[str], None], Callable[[], bool]], Any],
        name: str,
    ) -> None:
        self.events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._work, args=(task,), name=name, daemon=True)
        self.thread.start()

    def _work(self, task: Callable[..., Any]) -> None:
        events = self.events
        try:
            value = task(
                lambda stage, fraction: events.put(("progress", (stage, fraction))),
                lambda text: events.put(("text", text)),
                self._stop.is_set,
            )
        except BaseException as exc:
            if isinstance(exc, AnalysisCancelled):
                log.info(CANCELLED_LOG)
            events.put(("error", exc))
            if not isinstance(exc, Exception):
                raise
        else:
            events.put(("done", value))

    def cancel(self) -> None:
        self._stop.set()


def relay(worker: Worker, question: str) -> Generator[dict[str, Any], None, tuple[str, Any]]:
    """Yield the page updates of a running analysis; return its ("done", result) or
    ("error", exception). The first update clears the last result from the page."""
    yield {
        "result": None,
        "error": "",
        "warnings": "",  # the last question's warnings must not stay beside this one
        "progress": render.progress_html(render.StageProgress()),
        "answer": render.streaming_html(question, ""),
        "results": gr.update(visible=False),
        "download": gr.update(value=None, visible=False),
        "trust": "",
    }
    partial, progress = "", render.StageProgress()
    while True:
        try:
            batch = [worker.events.get(timeout=HEARTBEAT_S)]
        except queue.Empty:
            batch = []  # nothing new: send the same again (a cancelled event can close now)
        else:
            time.sleep(STREAM_INTERVAL_S)
        while True:
            try:
                batch.append(worker.events.get_nowait())
            except queue.Empty:
                break
        for kind, payload in batch:
            if kind == "text":
                partial = payload
            elif kind == "progress":
                progress = render.StageProgress(*payload)
            else:
                return kind, payload
        yield {
            "answer": render.streaming_html(question, partial),
            "progress": render.progress_html(progress),
        }
