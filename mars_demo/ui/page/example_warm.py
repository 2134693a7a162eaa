"""Every example question analyzed once at start, in the background, while the page serves.

Hugging Face Spaces' norm for a page's examples (``gr.Examples(cache_examples=True)``, which
Gradio runs among its start-up events) is that each example answers at once, the first click
included. The page keeps its own store (:mod:`mars_demo.ui.page.example_store`: one JSON file per
example, under a name made of the question, the default options, the models loaded and what the
verdicts cite), so here a thread, started by the host (never by a visitor: nothing a visitor
sends starts, stops or changes it), waits until the models are loaded and analyzes each example
the store lacks with the page's default options, one at a time, on the page's one engine.

It never delays a visitor: it takes the engine only while no visitor's request waits for it or
holds it (:meth:`~mars_demo.ui.work.host.EngineHost.visitor_waiting`), and its analysis stops at the
next generated token or stage once one does (the engine's own cancel check), to be made again
when the engine is free. Its times join the page's expected wait (:mod:`mars_demo.ui.page.waits`),
so the first visitor reads a wait measured on this machine. After a model switch (a page only
its host can open) it runs again: other models name other files. A failure is logged and the
example is left to the first visitor who asks it, as before.

Not on a ZeroGPU Space: there each analysis is charged to a visitor's GPU quota and runs in a
GPU process forked for a request; the examples are made there by the first visitor who asks
each one, and kept as everywhere.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from mars_demo.errors import AnalysisCancelled
from mars_demo.settings import Settings
from mars_demo.ui.page import waits
from mars_demo.ui.page.example_store import ExampleStore
from mars_demo.ui.work import worker
from mars_demo.ui.work.host import EngineHost

log = logging.getLogger(__name__)

WARM_THREAD = "mars-examples"
READY_POLL_S = 0.5  # how often the thread looks whether the models are loaded
WARMED_LOG = "example analyses ready: {made} made, {kept} kept before, {failed} failed"


class ExampleWarmer:
    """Analyzes the examples ``store`` lacks with ``defaults()`` (the page's default options,
    read when the work starts), on ``host``'s engine, in one background thread; their times
    join ``recent``."""

    def __init__(self, host: EngineHost, store: ExampleStore,
                 defaults: Callable[[], Settings], recent: waits.RecentWaits) -> None:
        self.host = host
        self.store = store
        self.defaults = defaults
        self.recent = recent
        self.started = False  # whether the host turned it on (a switch then runs it again)
        self._again = threading.Event()
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None
        self.done = threading.Event()  # set each time a pass over the examples has ended

    def start(self) -> threading.Thread | None:
        """Start the pass over the examples (or, while one runs, another after it). Nothing
        without a store folder."""
        if self.store.folder is None:
            return None
        with self._guard:
            self.started = True
            self.done.clear()
            if self._thread is not None and self._thread.is_alive():
                self._again.set()
                return self._thread
            self._thread = threading.Thread(target=self._run, name=WARM_THREAD, daemon=True)
            self._thread.start()
            return self._thread

    def _run(self) -> None:
        while True:
            self._again.clear()
            try:
                self._pass()
            except Exception:  # never the page's end: the examples wait for a visitor instead
                log.exception("analyzing the examples in the background failed")
            with self._guard:
                if not self._again.is_set():
                    self.done.set()
                    self._thread = None
                    return

    def _pass(self) -> None:
        while self.host.status().state in ("idle", "loading"):
            time.sleep(READY_POLL_S)
        if self.host.status().state != "ready":
            return  # the models failed to load: the banner says so
        defaults = self.defaults()
        made = kept = failed = 0
        for question in self.store.ordered:
            if self._again.is_set():
                return  # the models changed: start over with theirs
            if self.store.get(question, defaults, defaults) is not None:
                kept += 1
                continue
            if self._one(question, defaults):
                made += 1
            else:
                failed += 1
        log.info(WARMED_LOG.format(made=made, kept=kept, failed=failed))

    def _one(self, question: str, settings: Settings) -> bool:
        """Analyze one example when no visitor wants the engine (again after each visitor who
        came meanwhile) and keep it; returns whether it was kept."""
        while True:
            self.host.wait_for_no_visitor()
            started = time.monotonic()
            try:
                result = worker.gpu_analyze(self.host, question, settings,
                                            should_stop=self.host.visitor_waiting,
                                            visitor=False)
            except AnalysisCancelled:
                continue  # a visitor came: theirs first, this one again after them
            except Exception as exc:
                log.warning("the example %r could not be analyzed in the background: %s",
                            question, exc)
                return False
            self.recent.add(time.monotonic() - started, waits.kind(settings))
            return self.store.put(question, settings, settings, result)
