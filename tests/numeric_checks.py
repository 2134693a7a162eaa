"""Checks shared by the core's property tests."""

from __future__ import annotations

import warnings

import numpy as np


def finite_or_value_error(call) -> None:
    """Run ``call``: it must return finite numbers (a number, an array or a dict of numbers) or
    raise ValueError, and warn about nothing (e.g. numpy's "overflow encountered")."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            result = call()
        except ValueError:
            return
    values = list(result.values()) if isinstance(result, dict) else result
    assert np.isfinite(np.asarray(values, dtype=np.float64)).all(), result
