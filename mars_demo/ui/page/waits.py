"""How long the page's analyses took lately: the expected wait a visitor reads before the first
token ("Analyses like this one (5 sampled answers of up to 64 tokens) took about 12 s here
lately (the median of the last 8)"), and what the page says once a running analysis is past it.

Only the time an analysis ran (from its start on the engine to its result) is kept, for the last
:data:`KEEP` analyses of each kind (:func:`kind`: what decides most of the time, the number of
answers generated, their length, the methods run and whether the answers are generated or
given), the page's own background analyses of the examples included; the median of those of the
same kind is said, so one long analysis does not change what the next visitor reads much, and an
analysis of 20 long answers is not promised the time of 5 short ones. Before any analysis of its
kind, no time is said. Once a running analysis is past the time said, the line says so
(:meth:`RecentWaits.words` with ``elapsed``). Nothing else of an analysis is kept, and no promise
is made about the queue before it (its place is said instead). Thread-safe; no gradio.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from collections.abc import Hashable

from mars_demo import texts
from mars_demo.settings import Settings

KEEP = 20  # analyses of one kind whose times the expectation is made from
KINDS = 32  # kinds kept at most (the oldest kind seen goes first)
OVERRUN_FACTOR = 1.5  # an analysis is said to take longer past this times the median ...
OVERRUN_MARGIN_S = 2.0  # ... and at least this many seconds past it (overrun_after)


def kind(settings: Settings, given: int | None = None) -> tuple[Hashable, ...]:
    """What makes analyses alike in time: answers generated, how many and how long at most, or
    ``given`` sampled answers scored (none generated); and the methods run."""
    if given is not None:
        return (False, given, 0, tuple(settings.method_ids))
    return (True, settings.samples, settings.max_new_tokens, tuple(settings.method_ids))


def overrun_after(median: float) -> float:
    """The seconds after which an analysis whose kind took ``median`` seconds is said to take
    longer: half as long again, and at least :data:`OVERRUN_MARGIN_S` more. Half of all
    analyses take longer than the median, so the median itself would say so of one in two; a
    margin keeps the words for a real overrun, and the seconds' floor keeps a quick kind's
    analyses from saying "taking longer: 0 s so far".

    >>> overrun_after(8.0), overrun_after(0.5)
    (12.0, 2.5)
    """
    return max(OVERRUN_FACTOR * median, median + OVERRUN_MARGIN_S)


def _seconds(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


class RecentWaits:
    """The running times of the last :data:`KEEP` analyses of each kind."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._times: dict[Hashable, deque[float]] = {}
        self._lock = threading.Lock()

    def add(self, seconds: float, of: Hashable = None) -> None:
        """Keep ``seconds``, the time of an analysis of kind ``of`` (:func:`kind`)."""
        if seconds < 0:
            return
        with self._lock:
            times = self._times.pop(of, None) or deque(maxlen=self._keep)
            times.append(float(seconds))
            self._times[of] = times  # the kind seen last goes last: the oldest is dropped first
            while len(self._times) > KINDS:
                del self._times[next(iter(self._times))]

    def expected(self, of: Hashable = None) -> tuple[float, int] | None:
        """(the median seconds, how many analyses of kind ``of`` it is the median of), or None
        before any of that kind."""
        with self._lock:
            times = list(self._times.get(of, ()))
        return (statistics.median(times), len(times)) if times else None

    def words(self, of: Hashable = None, elapsed: float = 0.0) -> str:
        """The expectation for an analysis of kind ``of`` in words (empty before the first of
        its kind); once ``elapsed`` is well past it (:func:`overrun_after`), that it is taking
    longer, and how long so far."""
        found = self.expected(of)
        if found is None:
            return ""
        seconds, count = found
        if isinstance(of, tuple) and len(of) == 4 and of[0]:
            said = texts.VERDICT_EXPECTED_LIKE.format(
                seconds=_seconds(seconds), count=count, samples=of[1], tokens=of[2])
        else:
            said = texts.VERDICT_EXPECTED.format(seconds=_seconds(seconds), count=count)
        if elapsed > overrun_after(seconds):
            said += texts.VERDICT_OVERRUN.format(elapsed=f"{elapsed:.0f}")
        return said
