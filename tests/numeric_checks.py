"""Numerical checks shared by the tests: the core's property checks, and the one tolerance for
comparing a model's pass over a batch with its pass over one input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

#: How far a float32 model output (a logit, a log-prob, a probability, or a number computed from
#: them) may move when the same input is run in another batch. In a batch, the input is padded to
#: its longest neighbour and the kernels split their sums another way (by batch shape, by the
#: number of threads and by the cores' vector width), so float32 sums run in another order: each
#: layer's sums of a few hundred terms carry relative errors of a few float32 epsilons (1.2e-7),
#: and a tiny model's outputs were seen to move by up to 1.4e-6 between machines. 1e-5 holds that
#: with a margin, and still catches a wrong input, position or pair (those move outputs by 1e-2 or
#: more in the tiny models). Tests that use it are marked ``float_order`` (tests/markers.py), and
#: CI runs them again on one torch thread.
FLOAT32_ORDER = 1e-5


def float32_order(expected):
    """``pytest.approx(expected)`` within :data:`FLOAT32_ORDER`, absolute and relative: for a
    model output computed in one batch compared with the same input run in another. Nested
    lists (a matrix of probabilities) are compared as arrays."""
    if isinstance(expected, (list, tuple)) and any(isinstance(x, (list, tuple)) for x in expected):
        expected = np.asarray(expected, dtype=np.float64)
    return pytest.approx(expected, rel=FLOAT32_ORDER, abs=FLOAT32_ORDER)


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
