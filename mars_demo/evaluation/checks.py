"""Values of a run's files checked as if they came from a stranger (the page reads uploads):
finite numbers in their range, the expected types, names that are plain identifiers, bounded
counts; a value that fails gets one :class:`RunFileError` naming the place."""

from __future__ import annotations

import json
import math
import re
from typing import Any

DIFF = "mars_minus_length_normalized"  # the paired MARS - LN entry of a measure
#: the variants of a method's values: scored with length-normalized or MARS scoring, or one
#: value for a method that reads no sequence score
VARIANTS = ("length_normalized", "mars", "value")
VS_BEST = "auroc_minus_best_mars"  # a method row's paired AUROC difference from the best MARS row
MAX_MEASURES = 64
MAX_WARNINGS = 50
TEXT_CHARS = 500  # longer strings of a report are cut
NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")  # a measure, method, scoring or variant name
COLUMN = re.compile(r"[a-z][a-z0-9_.]{0,47}")  # a column of the methods table ("prr_0.5")
#: the range of each metric's value; the paired differences get +- the width
RANGES = {"auroc": (0.0, 1.0), "auprc": (0.0, 1.0), "aurac": (0.0, 1.0), "prr": (-1e6, 1.0),
          "prr_0.5": (-1e6, 1.0), "length_spearman": (-1.0, 1.0)}
WIDE = (-1e6, 1e6)  # the range of a metric not in RANGES


class RunFileError(ValueError):
    """A run file that cannot be read or used; the message says where, in one line."""


# --- checked values ---------------------------------------------------------------------------


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def loads(text: str, name: str) -> Any:
    """JSON without NaN/Infinity; errors as :class:`RunFileError`."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError as err:
        raise RunFileError(f"{name} is nested too deeply") from err
    except ValueError as err:  # JSONDecodeError included
        raise RunFileError(f"{name} is not valid JSON ({str(err)[:120]})") from err


def number(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunFileError(f"{where} is not a number")
    value = float(value)
    if not math.isfinite(value) or not low <= value <= high:
        raise RunFileError(f"{where} = {value:.4g} is outside [{low:g}, {high:g}]")
    return value


def count_of(value: Any, where: str, high: int = 10**9) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise RunFileError(f"{where} is not a count")
    return value


def optional_count(value: Any, where: str) -> int | None:
    return None if value is None else count_of(value, where)


def short_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def plain_name(key: Any, where: str, pattern: re.Pattern = NAME) -> str:
    if not isinstance(key, str) or not pattern.fullmatch(key):
        raise RunFileError(f"{where} has a key that is not a measure or scoring name")
    return key


def json_object(value: Any, where: str) -> dict[str, Any] | None:
    """An optional JSON object (None when absent)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RunFileError(f"{where} is not an object")
    return value


def text_list(value: Any, where: str, limit: int | None = None) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RunFileError(f"{where} is not a list")
    return [short_text(v) for v in (value if limit is None else value[:limit])]
