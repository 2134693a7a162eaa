"""How long the page's analyses took lately: the expected wait a visitor reads before the first
token ("Analyses here took about 12 s lately (the median of the last 8)").

Only the time an analysis ran (from its start on the engine to its result) is kept, for the last
:data:`KEEP` analyses of this server; the median of them is said, so one long analysis does not
change what the next visitor reads much. Nothing else of an analysis is kept, and no promise is
made about the queue before it (its place is said instead). Thread-safe; no gradio.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque

from mars_demo import texts

KEEP = 20  # analyses whose times the expectation is made from


class RecentWaits:
    """The running times of the last :data:`KEEP` analyses."""

    def __init__(self, keep: int = KEEP) -> None:
        self._times: deque[float] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        if seconds >= 0:
            with self._lock:
                self._times.append(float(seconds))

    def expected(self) -> tuple[float, int] | None:
        """(the median seconds, how many analyses it is the median of), or None before any."""
        with self._lock:
            times = list(self._times)
        return (statistics.median(times), len(times)) if times else None

    def words(self) -> str:
        """The expectation in words (empty before the first analysis)."""
        found = self.expected()
        if found is None:
            return ""
        seconds, count = found
        shown = f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.1f}"
        return texts.VERDICT_EXPECTED.format(seconds=shown, count=count)
