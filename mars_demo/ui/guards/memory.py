"""What Gradio keeps of each visitor and each request, bounded so that a page's memory stays flat
however many results and sessions it serves (Gradio 6.17; covered by tests/test_hostile_memory.py).

Gradio 6.17 keeps, without bound or for long:

- per browser session (``StateHolder.session_data``, ``gradio/state_holder.py``; dropped only past
  10,000 sessions): a copy of the config of every component (``SessionState.config_values``,
  about 0.2 MB for this page, made by the session's first event), updated with the last value of
  every output, the tables and plots of a result included. And each output a handler skipped
  (``gr.skip()``) or updated (``gr.update(...)``) becomes a new component object with a new id
  (``Blocks.postprocess_data``), under which its next value is kept again: about nine copies of
  a result's outputs per result shown, in one session;
- per request (``Queue.event_ids_to_events``, ``Queue.event_analytics``,
  ``App.iterators_to_reset``, ``Queue._asyncio_tasks``, ``gradio/queueing.py``,
  ``gradio/routes.py``): the event with its request and input data, its analytics record (which
  ``/monitoring`` reads), its id and the task that processed it, for the life of the server;
  the messages of a result nobody reads (``pending_messages_per_session``, up to 2,000
  sessions, each queue kept until its session has no event pending): a client that asked for
  the toggle's re-render again and again without reading grew the server by 0.68 MiB an event.

:func:`bound_memory` keeps of these only what the page uses (and hands the C heap's free memory
back to the system once the page is idle and every half minute while it is not,
:func:`trim_heap`): once an event has sent its result,
its session's component configs (kept only for Gradio's deep links, which this page does not
offer) and the copies under new ids are let go; sessions are kept by what they hold
(:class:`~mars_demo.ui.guards.sessions.Sessions`): one that holds no result (``gr.State``), with nothing
pending, is let go at once, any other after :data:`SESSION_IDLE_S` without an event or beyond the
newest :data:`MAX_SESSIONS`; a finished event's records go once its result was read, an unread
result (its messages with it) after :data:`FINISHED_KEEP_S` (time enough to read it) or beyond the
newest :data:`MAX_FINISHED`, and one client or session keeps at most :data:`MAX_UNREAD` unread
results (the oldest go first). The page behaves the same: a session's result (for re-scoring)
stays as long as the visitor uses it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from typing import Any

from mars_demo.ui.guards.sessions import Sessions

log = logging.getLogger(__name__)

SESSION_IDLE_S = 3600.0  # a session with a result, untouched this long, is let go
MAX_SESSIONS = 500  # sessions kept at most (the oldest-used go first)
FINISHED_KEEP_S = 120.0  # a result nobody read (and its event's records) is kept this long
MAX_FINISHED = 1000  # ... and at most this many finished events
MAX_UNREAD = 4  # unread results one client (and one session) keeps; older ones go first
SWEEP_S = 5.0  # idle sessions and old events are looked for at most this often
TRIM_S = 30.0  # the C heap's free memory is handed back to the system at most this often ...
IDLE_TRIM_S = 1.0  # ... or this often once no event is running or waiting (the page is idle)
ENDED = ("success", "failed", "cancelled")  # what Gradio's analytics say of an event it closed


class MemoryBounds:
    """The bounds of one launched page (``demo``, served by the Gradio app ``app``); built by
    :func:`bound_memory`, which puts :attr:`sessions` in the place of the app's state holder."""

    def __init__(self, demo: Any, app: Any, client_of: Any = lambda event: None) -> None:
        self.demo = demo
        self.app = app
        self.queue = demo._queue
        self.client_of = client_of  # an event's client (None: unknown)
        self.now = time.monotonic
        self.base_ids = frozenset(demo.default_config.blocks)  # the page's own components
        # event id -> (when its result was sent, its session, its client)
        self.finished: collections.OrderedDict[str, tuple[float, str, Any]] = (
            collections.OrderedDict())
        self.last_sweep = self.last_trim = self.now()
        self.trim_later: asyncio.TimerHandle | None = None  # an idle trim waiting its turn
        self.sessions = Sessions(demo, MAX_SESSIONS, holds_result=self._holds_result,
                                 busy=self._pending)
        app.state_holder = self.sessions

    # --- after each event --------------------------------------------------------------------

    def finished_event(self, event: Any) -> None:
        """An event sent its result: forget what its session kept of it, keep its client's
        unread results within :data:`MAX_UNREAD`, then sweep and trim the heap if due."""
        session = getattr(event, "session_hash", None)
        client = self.client_of(event)
        self.finished[event._id] = (self.now(), session, client)
        self.finished.move_to_end(event._id)
        if session is not None:
            self.forget_outputs(session, ending=event._id)
        self.bound_unread(session, client)
        if self.now() - self.last_sweep >= SWEEP_S or len(self.finished) > MAX_FINISHED:
            self.sweep()
        self.trim_if_due()

    def forget_outputs(self, session: str, ending: str | None = None) -> None:
        """Let go of ``session``'s component configs and of the copies of its outputs under new
        ids; the whole session when it holds no result and nothing else is pending (``ending``:
        the event that just finished, still listed as pending)."""
        state = self.sessions.session_data.get(session)
        if state is None:
            return
        state.config_values.clear()
        blocks = state.blocks_config.blocks
        for key in [key for key in blocks if key not in self.base_ids]:
            del blocks[key]
        self.sessions.settle(session, pending=self._pending(session, ending))

    def _holds_result(self, state: Any) -> bool:
        blocks = state.blocks_config.blocks
        return any(value is not None and value != getattr(blocks.get(key), "value", None)
                   for key, value in state.state_data.items())

    def _pending(self, session: str, ending: str | None = None) -> bool:
        pending = set(self.queue.pending_event_ids_session.get(session, ()))
        pending.discard(ending)
        return any(e not in self.finished for e in pending)

    def _drop_session(self, session: str) -> None:
        self.sessions.drop(session)
        streams = getattr(self.demo, "pending_diff_streams", {})
        if not streams.get(session, True):
            streams.pop(session, None)

    def _idle(self) -> bool:
        """No event is running or waiting: every pending one has sent its result."""
        return all(e in self.finished
                   for ids in self.queue.pending_event_ids_session.values() for e in ids)

    def trim_if_due(self) -> None:
        """Hand the C heap's free memory back to the system (:func:`trim_heap`, in a thread of
        its own: a trim takes a moment) every :data:`TRIM_S` while events run, and once the page
        is idle, at most every :data:`IDLE_TRIM_S`: an idle moment that comes sooner is trimmed
        when that time is up (if the page is still idle). The memory an analysis freed is then
        back with the system once the visitors are done, not up to half a minute later. Runs in
        the event loop, as the queue's bookkeeping does."""
        idle = self._idle()
        period = min(TRIM_S, IDLE_TRIM_S) if idle else TRIM_S
        wait = period - (self.now() - self.last_trim)
        if wait <= 0:
            self.last_trim = self.now()
            threading.Thread(target=trim_heap, name="mars-trim-heap", daemon=True).start()
        elif idle and self.trim_later is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # called outside the server's loop: the next event trims
                return
            self.trim_later = loop.call_later(wait, self._trim_when_idle)

    def _trim_when_idle(self) -> None:
        self.trim_later = None
        if self._idle():
            self.trim_if_due()

    def _unread(self, event_id: str, session: str) -> bool:
        return event_id in self.queue.pending_event_ids_session.get(session, ())

    def bound_unread(self, session: str | None, client: Any) -> None:
        """Let go of the oldest unread results of ``session`` and of ``client`` beyond
        :data:`MAX_UNREAD` (a page reads each result the moment it is sent)."""
        for key, index in ((session, 1), (client, 2)):
            if key is None:
                continue
            unread = [e for e, record in self.finished.items()
                      if record[index] == key and self._unread(e, record[1])]
            for event_id in unread[:max(0, len(unread) - MAX_UNREAD)]:
                self._let_go(event_id, unread=True)

    def _let_go(self, event_id: str, unread: bool) -> None:
        """Forget a finished event's records; an ``unread`` one's id and messages too."""
        _, session, _ = self.finished.pop(event_id)
        queue = self.queue
        queue.event_ids_to_events.pop(event_id, None)
        queue.event_analytics.pop(event_id, None)
        self.app.iterators_to_reset.discard(event_id)
        if unread:  # a result nobody came to read
            queue.pending_event_ids_session.get(session, set()).discard(event_id)
            drop_messages(queue, session, {event_id})

    # --- every SWEEP_S --------------------------------------------------------------------------

    def sweep(self) -> None:
        """Let go of finished events whose result was read (their session's stream took it), and
        of the others, with their unread results, past :data:`FINISHED_KEEP_S` or
        :data:`MAX_FINISHED`; of idle sessions; of the analytics of events that ended otherwise
        (cancelled, disconnected); and of the tasks that processed events, once done."""
        now = self.now()
        self.last_sweep = now
        queue, app = self.queue, self.app
        for event_id, (when, session, _) in list(self.finished.items()):
            record = queue.event_analytics.get(event_id)
            if record is not None and record.get("status") not in ENDED:
                continue  # Gradio is still closing it (its record's status comes last)
            unread = self._unread(event_id, session)
            expired = now - when >= FINISHED_KEEP_S or len(self.finished) > MAX_FINISHED
            if unread and not expired:
                continue  # its result waits for its reader
            self._let_go(event_id, unread)
        wall = time.time()  # the analytics records' clock
        for event_id in [e for e, record in queue.event_analytics.items()
                         if e not in queue.event_ids_to_events
                         and wall - float(record.get("time") or 0) >= FINISHED_KEEP_S]:
            queue.event_analytics.pop(event_id, None)
        # the task of every event Gradio processed, kept in a list for the server's life
        queue._asyncio_tasks = [task for task in queue._asyncio_tasks if not task.done()]
        for session in [s for s, ids in queue.pending_event_ids_session.items() if not ids]:
            queue.pending_event_ids_session.pop(session, None)
            if session in queue.pending_messages_per_session:
                del queue.pending_messages_per_session[session]
        for session, used in list(self.sessions.time_last_used.items()):
            if wall - used.timestamp() >= SESSION_IDLE_S and not self._pending(session):
                self._drop_session(session)


_LIBC: list[Any] = []  # the C library's malloc_trim, once looked for (None: there is none)
_TRIMMING = threading.Lock()


def trim_heap() -> bool:
    """Hand the C heap's free memory back to the system (glibc's ``malloc_trim(0)``); whether
    there was a ``malloc_trim`` to call (glibc's Linux has one; other C libraries, none).

    What the page frees stays in the process's heap otherwise: its threads (one per analysis)
    and the models' buffers of every answer length leave free pieces between live ones, so its
    resident memory (RSS) kept rising with every pasted scoring (some tenths of a MB a scoring
    over the first hundred, less afterwards) though what it held stayed the same: one
    trim took a served page from 826 to 732 MiB. A trim took 4 ms on average, 26 ms at most,
    over the 29 of the soak test (tests/test_soak.py); :meth:`MemoryBounds.trim_if_due` calls
    it once the page is idle and every :data:`TRIM_S` while it is not, in a thread of its own,
    one at a time."""
    if not _TRIMMING.acquire(blocking=False):
        return True  # one is under way
    try:
        return _trim()
    finally:
        _TRIMMING.release()


def _trim() -> bool:
    if not _LIBC:
        import ctypes
        import ctypes.util

        name = ctypes.util.find_library("c")
        try:
            _LIBC.append(getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None)
        except OSError:
            _LIBC.append(None)
    if _LIBC[0] is None:
        return False
    _LIBC[0](0)
    return True


def drop_messages(queue: Any, session: str, event_ids: set[str]) -> None:
    """Take the messages of ``event_ids`` out of ``session``'s queue of unread messages
    (Gradio's ``pending_messages_per_session``, an ``asyncio.Queue`` per session; the others stay
    in order). Runs in the event loop, where nothing reads the queue meanwhile."""
    messages = queue.pending_messages_per_session.get(session)
    if messages is None:
        return
    kept = []
    while not messages.empty():
        message = messages.get_nowait()
        if getattr(message, "event_id", None) not in event_ids:
            kept.append(message)
    for message in kept:
        messages.put_nowait(message)


def bound_memory(demo: Any, app: Any, client_of: Any = lambda event: None) -> MemoryBounds:
    """Bound what ``demo`` keeps when served by the Gradio app ``app`` (see the module's
    docstring): hooks its queue's ``send_message`` (a result sent) once and returns the bounds
    (those of the latest launch). ``client_of(event)``: an event's client, for
    :data:`MAX_UNREAD`. Called when the server starts (:func:`~mars_demo.ui.launch.on_start`)."""
    queue = demo._queue
    bounds = MemoryBounds(demo, app, client_of)
    if getattr(queue, "mars_memory", None) is not None:  # launched again: the new app's
        queue.mars_memory.__dict__.update(bounds.__dict__)
        return queue.mars_memory
    queue.mars_memory = bounds
    send = queue.send_message

    def send_message(event: Any, message: Any) -> Any:
        sent = send(event, message)
        if getattr(message, "msg", None) == "process_completed":
            try:
                bounds.finished_event(event)
            except Exception:  # never let bookkeeping fail a visitor's request
                log.exception("letting go of a finished event's memory failed")
        return sent

    queue.send_message = send_message
    return bounds
