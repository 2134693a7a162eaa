"""Gradio's browser sessions, kept by what they hold for their visitor (Gradio 6.17; covered by
tests/test_hostile_sessions.py).

Gradio keeps a session (``SessionState``: the page's components and ``gr.State`` values, here the
visitor's last result) for every session id any request names, and past its capacity drops the
least recently used one, whatever it holds: about 520 cheap requests with new session ids (the
``/component_server`` route, which answered 404 after making one, or a non-queued event such as
Ask's busy state) erased every other visitor's result, so the toggle, the colouring and
re-scoring silently did nothing. :class:`Sessions` replaces Gradio's ``StateHolder``:

- a session that holds a result is never dropped to make room for one that holds none: past
  :data:`MAX_EMPTY` sessions without a result, the least recently used of those (with no event
  waiting or running) goes; one client keeps at most :data:`EMPTY_PER_CLIENT` of them;
- sessions holding a result are at most :data:`~mars_demo.ui.guards.memory.MAX_SESSIONS`, at most
  :data:`RESULTS_PER_CLIENT` of one client, and at most :data:`RESULTS_PER_NETWORK` of the clients
  of one IPv6 /48 together (:meth:`ClientIdentity.network
  <mars_demo.hosting.clients.ClientIdentity.network>`, the queue's second tier): past any, that group's
  least recently used one goes (:meth:`Sessions.settle`, when an event has sent its result). One
  client of a /64 keeps 8, and a /48 holds 65,536 /64s: 64 of them, each asking 8 questions
  answered from the example store, filled the 500 places in about a minute and erased every other
  visitor's result;
- a request outside the queue (``/run/...``, ``/component_server``) leaves no session behind: one
  it made that holds no result goes when it ends (:class:`SessionScope`);
- a new session is made without the copy of every component's config Gradio keeps for deep
  links (:class:`LeanSession`).

:class:`SessionScope` (ASGI middleware) also tells the sessions who made them: the client of the
request (:meth:`Access.client_of <mars_demo.hosting.access.Access.client_of>`).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import datetime
import os
from collections.abc import Callable, Iterator
from typing import Any

from gradio.state_holder import SessionState, StateHolder

from mars_demo.hosting.access import Access
from mars_demo.hosting.clients import ClientIdentity
from mars_demo.ui.guards.limits import DIRECT_ROUTE

MAX_EMPTY = 1000  # sessions without a result kept at most (the oldest-used go first)
EMPTY_PER_CLIENT = 20  # ... of them one client may make
RESULTS_PER_CLIENT = 8  # sessions holding a result one client keeps (one per open tab)
RESULTS_PER_NETWORK = 32  # ... and the clients of one IPv6 /48 together (of MAX_SESSIONS, 500)

# The request the code runs for: its client, and (outside the queue) the sessions it made.
_CLIENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("mars_client", default=None)
_MADE: contextvars.ContextVar[set | None] = contextvars.ContextVar("mars_made", default=None)


class LeanSession(SessionState):
    """Gradio 6.17's ``SessionState`` without its copy of every component's config
    (``config_values``, about 0.2 MB, kept only for deep links, which a page never serves): made
    in microseconds instead of tens of milliseconds, for every session a request names. The
    same attributes as Gradio's (tests/test_gradio_internals.py compares them)."""

    def __init__(self, blocks: Any) -> None:  # noqa: D107  (SessionState.__init__, lean)
        self.blocks_config = copy.copy(blocks.default_config)
        self.config_values = {}
        self.state_data = {}
        self._state_ttl = {}
        self.is_closed = False
        self.STATE_TTL_WHEN_CLOSED = 1 if os.getenv("GRADIO_IS_E2E_TEST", None) else 3600


class Sessions(StateHolder):
    """Gradio's ``StateHolder`` that keeps sessions by what they hold (see the module).

    ``holds_result(state)`` and ``busy(session)`` (an event of it waits or runs) come from the
    page's memory bounds (:class:`~mars_demo.ui.guards.memory.MemoryBounds`), which also call
    :meth:`settle` after each event and :meth:`drop`. Overrides ``__getitem__`` (which makes a
    session for an id it does not know) and ``update`` (Gradio's drop of the least recently used
    one) of Gradio 6.17's ``StateHolder``."""

    def __init__(self, blocks: Any, capacity: int,
                 holds_result: Callable[[Any], bool] = lambda state: False,
                 busy: Callable[[str], bool] = lambda session: False) -> None:
        super().__init__()
        self.set_blocks(blocks)
        self.capacity = capacity
        self.holds_result = holds_result
        self.busy = busy
        self.client: dict[str, str | None] = {}  # session -> the client that made it
        self.network: dict[str, str | None] = {}  # session -> its client's /48 (IPv6 only)
        self.owned: dict[str, dict[str, None]] = {}  # client -> its sessions, oldest first
        self.results: dict[str, None] = {}  # the sessions holding a result

    def __getitem__(self, session_id: str) -> SessionState:
        if session_id not in self.session_data:
            state = LeanSession(self.blocks)
            client = _CLIENT.get()
            with self.lock:
                self.session_data[session_id] = state
                self.client[session_id] = client
                self.network[session_id] = ClientIdentity.network(client) if client else None
                if client is not None:
                    self.owned.setdefault(client, {})[session_id] = None
            made = _MADE.get()
            if made is not None:
                made.add(session_id)
            self._bound_empty(session_id, client)
        self.update(session_id)
        self.time_last_used[session_id] = _now()
        return self.session_data[session_id]

    def update(self, session_id: str) -> None:
        with self.lock:
            if session_id in self.session_data:
                self.session_data.move_to_end(session_id)

    def _evictable(self, session: str, keep: str) -> bool:
        return session != keep and session not in self.results and not self.busy(session)

    def _bound_empty(self, new: str, client: str | None) -> None:
        """Past :data:`EMPTY_PER_CLIENT` sessions without a result made by ``client``, or
        :data:`MAX_EMPTY` in all, let the oldest of them go (never one that holds a result, nor
        one with an event waiting or running, nor ``new``)."""
        if client is not None:
            mine = [s for s in self.owned.get(client, ()) if s not in self.results]
            for session in [s for s in mine if self._evictable(s, new)][
                    :max(0, len(mine) - EMPTY_PER_CLIENT)]:
                self.drop(session)
        over = len(self.session_data) - len(self.results) - MAX_EMPTY
        if over > 0:
            for session in [s for s in list(self.session_data)
                            if self._evictable(s, new)][:over]:
                self.drop(session)

    def settle(self, session: str, pending: bool = False) -> None:
        """After an event of ``session`` sent its result: a session holding a result counts
        against :attr:`capacity`, its client's :data:`RESULTS_PER_CLIENT` and its network's
        :data:`RESULTS_PER_NETWORK` (past any, the least recently used one of that group goes);
        one holding none, with nothing else ``pending``, goes at once."""
        state = self.session_data.get(session)
        if state is None:
            return
        if not self.holds_result(state):
            self.results.pop(session, None)
            if not pending:
                self.drop(session)
            return
        self.results[session] = None
        client, network = self.client.get(session), self.network.get(session)
        if client is not None:
            self._keep_newest([s for s in self.owned.get(client, ()) if s in self.results],
                              RESULTS_PER_CLIENT, session)
        if network is not None:
            self._keep_newest([s for s in self.results if self.network.get(s) == network],
                              RESULTS_PER_NETWORK, session)
        over = len(self.results) - self.capacity
        if over > 0:
            for old in [s for s in list(self.session_data) if s in self.results
                        and s != session and not self.busy(s)][:over]:
                self.drop(old)

    def _keep_newest(self, group: list[str], keep: int, session: str) -> None:
        """Of ``group`` (sessions holding a result), let the least recently used go beyond
        ``keep`` (never ``session``, whose event just ended, nor one with an event pending)."""
        if len(group) <= keep:
            return
        group.sort(key=lambda s: self.time_last_used.get(s) or _now())
        for old in [s for s in group if s != session and not self.busy(s)][:len(group) - keep]:
            self.drop(old)

    def drop(self, session: str) -> None:
        """Let ``session`` go (its ``gr.State`` delete callbacks run)."""
        self.delete_state(session)
        with self.lock:
            self.session_data.pop(session, None)
        self.time_last_used.pop(session, None)
        self.results.pop(session, None)
        self.network.pop(session, None)
        client = self.client.pop(session, None)
        owned = self.owned.get(client)
        if owned is not None:
            owned.pop(session, None)
            if not owned:
                self.owned.pop(client, None)

    def forget_made(self, made: set) -> None:
        """The end of a request outside the queue: of the sessions it made, let go of those
        that hold no result and have no event waiting or running."""
        for session in made:
            state = self.session_data.get(session)
            if state is not None and not self.holds_result(state) and not self.busy(session):
                self.drop(session)


@contextlib.contextmanager
def made_by(client: str | None) -> Iterator[None]:
    """Sessions made inside count as ``client``'s (what :class:`SessionScope` says of each
    request)."""
    token = _CLIENT.set(client)
    try:
        yield
    finally:
        _CLIENT.reset(token)


def _now() -> datetime.datetime:
    return datetime.datetime.now()  # Gradio's clock of time_last_used


class SessionScope:
    """ASGI middleware of every page: each request runs knowing its client (for the sessions it
    makes), and a request outside the queue (:data:`~mars_demo.ui.guards.limits.DIRECT_ROUTE`) leaves
    none of the sessions it made behind unless it holds a result
    (:meth:`Sessions.forget_made`)."""

    def __init__(self, app: Callable, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        direct = (scope.get("method") == "POST"
                  and DIRECT_ROUTE.search(scope.get("path", "").rstrip("/")))
        made: set = set()
        made_token = _MADE.set(made if direct else None)
        try:
            with made_by(self.access.client_of(scope)):
                await self.app(scope, receive, send)
        finally:
            _MADE.reset(made_token)
            holder = getattr(scope.get("app"), "state_holder", None)
            if made and isinstance(holder, Sessions):
                holder.forget_made(made)
