"""Input checks, and an overflow-safe mean, shared by the core modules.

Every check raises ``ValueError`` whose message names the argument and quotes the offending
value, so a caller can tell what to fix without reading this code.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

LOG_TOLERANCE = 1e-6  # log scores up to this much above 0 are float rounding and count as 0
SUM_TOLERANCE = 1e-6  # how far a distribution's sum may stray from 1
INT64_MAX = np.iinfo(np.int64).max


def float_vector(values, name: str) -> np.ndarray:
    """Return ``values`` as a non-empty, finite, 1-D float64 array."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as error:  # Overflow: an int beyond 1.8e308
        raise ValueError(f"{name} must be a sequence of numbers, got {values!r}") from error
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}: {values!r}")
    if array.size == 0:
        raise ValueError(f"{name} is empty; expected at least one value")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        i = bad[0]
        raise ValueError(f"{name}[{i}] = {float(array[i])} is not finite")
    return array


def log_scores(values, name: str) -> np.ndarray:
    """Return natural-log scores (each <= 0) as a float64 array; rounding above 0 is clipped."""
    array = float_vector(values, name)
    bad = np.flatnonzero(array > LOG_TOLERANCE)
    if bad.size:
        i = bad[0]
        raise ValueError(
            f"{name}[{i}] = {float(array[i])} is positive; a log-probability or log score "
            f"must be <= 0 (natural log)"
        )
    return np.minimum(array, 0.0)


def log_score(value, name: str) -> float:
    """Return one natural-log score (<= 0) as a float."""
    if np.ndim(value) != 0:
        raise ValueError(f"{name} must be a single number, got {value!r}")
    return float(log_scores([value], name)[0])


def nonnegative_vector(values, name: str) -> np.ndarray:
    """Return a non-empty, finite, 1-D float64 array with every entry >= 0."""
    array = float_vector(values, name)
    bad = np.flatnonzero(array < 0)
    if bad.size:
        i = bad[0]
        raise ValueError(f"{name}[{i}] = {float(array[i])} is negative; expected values >= 0")
    return array


def distribution(values, name: str) -> np.ndarray:
    """Return a non-negative float64 array that sums to 1 (within ``SUM_TOLERANCE``)."""
    array = nonnegative_vector(values, name)
    with np.errstate(over="ignore"):  # a sum that overflows is inf, refused just below
        total = float(array.sum())
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"{name} sums to {total}, expected 1 (tolerance {SUM_TOLERANCE})")
    return array


def index_vector(values, name: str) -> np.ndarray:
    """Return a non-empty 1-D int64 array; floats are accepted only when integral."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}: {values!r}")
    if array.size == 0:
        raise ValueError(f"{name} is empty; expected at least one value")
    if array.dtype.kind == "i":
        return array.astype(np.int64)
    if array.dtype.kind == "u":
        too_large = np.flatnonzero(array > INT64_MAX)
        if too_large.size == 0:
            return array.astype(np.int64)
        i = too_large[0]
        raise ValueError(
            f"{name}[{i}] = {int(array[i])} is too large; expected an integer <= {INT64_MAX}"
        )
    if array.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(array) | (array != np.round(array)))
        if bad.size:
            i = bad[0]
            raise ValueError(f"{name}[{i}] = {float(array[i])} is not an integer")
        # float(INT64_MAX) rounds up to 2**63, which does not fit: reject it and beyond.
        too_large = np.flatnonzero(np.abs(array) >= 2.0**63)
        if too_large.size == 0:
            return array.astype(np.int64)
        i = too_large[0]
        raise ValueError(
            f"{name}[{i}] = {float(array[i])} is too large in magnitude; expected an integer "
            f"within +-{INT64_MAX}"
        )
    raise ValueError(f"{name} must hold integers, got {values!r}")


def same_length(first: Sequence, first_name: str, second: Sequence, second_name: str) -> None:
    """Raise unless ``first`` and ``second`` have the same length."""
    if len(first) != len(second):
        raise ValueError(
            f"{first_name} has {len(first)} entries but {second_name} has {len(second)}; "
            f"they must have one entry per item"
        )


def text(value, name: str) -> str:
    """Return ``value`` if it is a string."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__} {value!r}")
    return value


def spans(values, source: str, name: str) -> list[tuple[int, int]]:
    """Return character spans ``(start, end)`` into ``source`` as int pairs, end exclusive.

    Checks that each is a pair of integers within the text with start <= end, and that the
    spans are sorted and do not overlap (gaps are allowed). May be empty.
    """
    try:
        items = list(values)
    except TypeError as error:
        raise ValueError(
            f"{name} must be a sequence of (start, end) pairs, got {values!r}"
        ) from error
    checked: list[tuple[int, int]] = []
    for i, span in enumerate(items):
        try:
            start, end = (operator.index(value) for value in span)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{name}[{i}] = {span!r} is not a (start, end) pair of integers"
            ) from error
        if start > end:
            raise ValueError(f"{name}[{i}] = {span!r} has start > end")
        if start < 0 or end > len(source):
            raise ValueError(
                f"{name}[{i}] = {span!r} is out of range for a text of {len(source)} characters"
            )
        if checked and start < checked[-1][1]:
            raise ValueError(
                f"{name}[{i}] = {span!r} starts before {name}[{i - 1}] = {checked[-1]} ends; "
                f"spans must be sorted and must not overlap"
            )
        checked.append((start, end))
    return checked


def one_of(value, options: tuple[str, ...], name: str) -> str:
    """Return ``value`` if it is one of ``options``."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"unknown {name} {value!r}; expected one of {options}")
    return value


def positive(value, name: str) -> float:
    """Return ``value`` as a finite float > 0."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = float("nan")
    if not (np.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def mean(values: np.ndarray, name: str) -> float:
    """Mean of a finite float64 array, computed so that it cannot overflow.

    ``values.mean()`` itself when that is finite, so ordinary inputs give exactly the usual
    result. Only when the sum overflows (values near float64's limit of 1.8e308) is the mean
    taken as ``max|v| * mean(v / max|v|)``: every ``v / max|v|`` lies in [-1, 1], so their
    mean does too and the result stays within [-max|v|, max|v|], i.e. finite.
    """
    with np.errstate(over="ignore"):
        result = float(values.mean())
    if np.isfinite(result):
        return result
    scale = float(np.abs(values).max())
    result = float((values / scale).mean()) * scale
    if not np.isfinite(result):  # cannot happen by the bound above; guards the contract
        raise ValueError(
            f"{name} are too large in magnitude (up to {scale}); their mean is not "
            f"representable as a finite float64"
        )
    return result
