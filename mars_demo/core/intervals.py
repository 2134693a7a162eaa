"""Intervals of a share: the Wilson score interval of ``right`` of ``n`` (it stays inside 0..1
and is sensible for a handful of answers, unlike the normal approximation), and whether two
intervals overlap. Pure Python.

>>> round(wilson(7, 10)[0], 3), round(wilson(7, 10)[1], 3)
(0.397, 0.892)
>>> wilson(0, 0)
(nan, nan)
>>> overlap((0.2, 0.5), (0.45, 0.9)), overlap((0.2, 0.4), (0.45, 0.9))
(True, False)
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


def wilson(right: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a share ``right`` / ``n`` (NaNs for n = 0)."""
    if n <= 0:
        return math.nan, math.nan
    p = right / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether the intervals ``a`` and ``b`` (low, high) share a point (a NaN bound: they are
    taken to overlap, nothing is told apart)."""
    if any(math.isnan(x) for x in (*a, *b)):
        return True
    return a[0] <= b[1] and b[0] <= a[1]
