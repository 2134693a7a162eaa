r"""The metrics of :mod:`.metrics` on every bootstrap resample at once, in numpy.

A resample is a row of indices ``idx`` (``resamples x n``); the metric of row r is the metric
of ``(u[idx[r]], c[idx[r]])`` as :mod:`.metrics` defines it, ties included. Nothing is sorted
per resample: the distinct values of ``u`` are ranked once (``numpy.unique``), and a resample
is described by how many wrong and correct answers it draws from each distinct value, in
ascending order (``wrong[r, g]``, ``right[r, g]``). From these counts:

- **AUROC** (Mann-Whitney U, ties 1/2): sum_g wrong_g * (right below g + right_g / 2), over
  (wrong total * right total). Half-integers: exact in floating point.
- **AUPRC** (average precision as scikit-learn computes it, thresholds at the distinct values
  a resample holds, highest first): sum over thresholds of (R_k - R_{k-1}) P_k with
  R_k = wrong at or above / wrong total and P_k = wrong at or above / answers at or above. A
  value the resample does not hold adds no recall, so its term is 0.
- **AURAC** and **PRR**: each resample's answers in ascending order of uncertainty are the
  distinct values repeated by their counts (``numpy.repeat``); acc(k) of the kept m answers
  then follows the tie-averaged formula of :func:`.metrics.rejection_curve`, term by term.

Undefined resamples (one class only) are flagged, never computed. :func:`loop_values` is the
per-resample definition (the scalar functions of :mod:`.metrics` once per row), kept as the
reference that the tests and the timing script compare against; the library never calls it.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

VECTORIZED = ("auroc", "auprc", "prr", "prr_0.5", "aurac")
# resamples per block: about a million counts per array, whatever n is
_BLOCK_CELLS = 1 << 20


def _group_counts(u: np.ndarray, c: np.ndarray, idx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(wrong, right): ``(rows, distinct values of u)`` counts of each resample, the distinct
    values in ascending order."""
    _, group = np.unique(u, return_inverse=True)
    groups = int(group.max()) + 1
    rows = idx.shape[0]
    cell = (np.arange(rows)[:, None] * groups + group[idx]).ravel()
    size = rows * groups
    total = np.bincount(cell, minlength=size)
    right = np.bincount(cell, weights=c[idx].ravel(), minlength=size).astype(np.int64)
    return (total - right).reshape(rows, groups), right.reshape(rows, groups)


def _auroc(wrong: np.ndarray, right: np.ndarray) -> np.ndarray:
    right_below = np.cumsum(right, axis=1) - right
    u_stat = (wrong * (right_below + 0.5 * right)).sum(axis=1)
    return u_stat / (wrong.sum(axis=1) * right.sum(axis=1))


def _auprc(wrong: np.ndarray, right: np.ndarray) -> np.ndarray:
    # thresholds from the highest value down: counts at or above each value
    wrong_above = np.cumsum(wrong[:, ::-1], axis=1)
    above = wrong_above + np.cumsum(right[:, ::-1], axis=1)
    recall = wrong_above / wrong_above[:, -1:]
    gained = np.diff(recall, axis=1, prepend=0.0)
    precision = np.divide(wrong_above, above, out=np.zeros(above.shape), where=above > 0)
    return (gained * precision).sum(axis=1)


def _aurac(wrong: np.ndarray, right: np.ndarray) -> np.ndarray:
    return _accuracy_curve(wrong, right).mean(axis=1)


def _accuracy_curve(wrong: np.ndarray, right: np.ndarray) -> np.ndarray:
    """acc(k) of every row, k = 0..n-1 (the order of metrics.rejection_curve)."""
    rows, groups = wrong.shape
    counts = wrong + right
    n = int(counts[0].sum())
    n_before = np.cumsum(counts, axis=1) - counts
    c_before = (np.cumsum(right, axis=1) - right).astype(float)
    correct_in = right.astype(float)
    # flat (row, group) cell of every kept position m = 1..n, ascending uncertainty
    cell = np.repeat(np.arange(rows * groups), counts.ravel()).reshape(rows, n)
    kept = np.arange(1, n + 1)
    partial = kept - n_before.ravel()[cell]
    correct_kept = (c_before.ravel()[cell]
                    + partial * correct_in.ravel()[cell] / counts.ravel()[cell])
    # k = 0..n-1 keeps m = n..1, the order of metrics.rejection_curve
    return np.ascontiguousarray((correct_kept / kept)[:, ::-1])


def _prr_up_to(max_rejection: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def prr(wrong: np.ndarray, right: np.ndarray) -> np.ndarray:
        n = int(wrong[0].sum() + right[0].sum())
        steps = rejected_steps(n, max_rejection)
        n_correct = right.sum(axis=1)
        random = n_correct / n
        kept = np.arange(n, 0, -1)[:steps]
        oracle = np.minimum(1.0, n_correct[:, None] / kept).mean(axis=1)
        area = _accuracy_curve(wrong, right)[:, :steps].mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):  # undefined rows, flagged apart
            return (area - random) / (oracle - random)
    return prr


def rejected_steps(n: int, max_rejection: float) -> int:
    """How many points k = 0, 1, ... of the rejection curve an area up to ``max_rejection``
    reads: ``int(max_rejection * n)`` (lm-polygraph's ``num_rej``), at least 1."""
    return max(1, min(n, int(max_rejection * n)))


_MAX_REJECTION = {"prr": 1.0, "prr_0.5": 0.5}
_FORMULAS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "auroc": _auroc, "auprc": _auprc, "prr": _prr_up_to(1.0), "prr_0.5": _prr_up_to(0.5),
    "aurac": _aurac,
}


def resampled_values(name: str, u: np.ndarray, c: np.ndarray, idx: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(values, defined) of metric ``name`` on every row of ``idx``: ``values[r]`` is the
    metric of ``(u[idx[r]], c[idx[r]])`` where ``defined[r]`` (both classes drawn; AURAC is
    always defined), NaN elsewhere."""
    if name not in _FORMULAS:
        raise ValueError(f"no vectorized bootstrap for {name!r}; known: {', '.join(VECTORIZED)}")
    rows, n = idx.shape
    block = max(1, _BLOCK_CELLS // max(n, 1))
    values = np.full(rows, np.nan)
    defined = np.ones(rows, dtype=bool)
    for start in range(0, rows, block):
        part = slice(start, start + block)
        wrong, right = _group_counts(u, c, idx[part])
        if name != "aurac":
            n_correct = right.sum(axis=1)
            defined[part] = (n_correct > 0) & (n_correct < n)
        if name in _MAX_REJECTION and rejected_steps(n, _MAX_REJECTION[name]) < 2:
            defined[part] = False  # as metrics.prr: nothing rejected, nothing to compare
        ok = defined[part]
        if ok.any():
            block_values = values[part]
            block_values[ok] = _FORMULAS[name](wrong[ok], right[ok])
            values[part] = block_values
    return values, defined


def loop_values(metric: Callable[[Sequence[float], Sequence[bool]], float], undefined: type,
                u: np.ndarray, c: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference: ``metric`` called once per row of ``idx`` (``undefined``: the exception
    it raises when a row has one class only). Same return as :func:`resampled_values`."""
    values = np.full(idx.shape[0], np.nan)
    defined = np.zeros(idx.shape[0], dtype=bool)
    for r, row in enumerate(idx):
        try:
            values[r] = metric(u[row], c[row])
            defined[r] = True
        except undefined:
            continue
    return values, defined
