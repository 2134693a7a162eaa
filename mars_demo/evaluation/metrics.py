r"""How well an uncertainty predicts that an answer is wrong: AUROC, AUPRC, PRR, AURAC, bootstrap.

numpy and scikit-learn only (no torch). Conventions: ``uncertainty[i]`` is higher when answer i
is less trustworthy; ``correct[i]`` is True when the judge accepted answer i. The positive class
of every metric is a WRONG answer.

Definitions (n answers, C of them correct, c_i in {0, 1}, u_i the uncertainty):

- **AUROC** of u for predicting "wrong" (1 - c): the area under the ROC curve, i.e. the
  probability that a random wrong answer has a higher uncertainty than a random correct one
  (ties count 1/2). Computed with :func:`sklearn.metrics.roc_auc_score`. Undefined when every
  answer is correct or every answer is wrong.
- **AUPRC** of u for predicting "wrong": the area under the precision-recall curve with the
  wrong answers as the positive class, as average precision (scikit-learn's
  :func:`sklearn.metrics.average_precision_score`: sum over thresholds of (R_k - R_{k-1}) P_k,
  no interpolation). A random order gives the share of wrong answers, 1 - C/n. Undefined, like
  AUROC, when one class is missing.
- **Rejection-accuracy curve**: reject the k most uncertain answers (k = 0 .. n-1) and keep the
  m = n - k least uncertain; acc(k) is the accuracy of the kept ones. When a group of tied
  uncertainties straddles the cut, the kept part of the group counts with the group's mean
  correctness: acc(k) is the expectation over a uniformly random order of the ties, so the
  curve does not depend on the order of the input.
- **AURAC** (area under the rejection-accuracy curve; Nadeem et al., "Accuracy-rejection
  curves (ARCs) for comparing classification methods with a reject option", 2009; reported for
  semantic entropy by Farquhar et al., Nature 2024) is the step-function area over the rejected
  fractions 0, 1/n, ..., (n-1)/n::

      AURAC = (1/n) * sum_{k=0}^{n-1} acc(k)

  Higher is better; a random order gives C/n (the accuracy), a perfect one more.
- **PRR** (prediction rejection ratio; Malinin, "Uncertainty Estimation in Deep Learning with
  application to Spoken Language Assessment", PhD thesis, Cambridge 2019, and Malinin & Gales,
  "Uncertainty Estimation in Autoregressive Structured Prediction", ICLR 2021; the same
  discretization as LM-Polygraph's ``PredictionRejectionArea``, Fadeeva et al., EMNLP 2023)::

      PRR = (AURAC(u) - AURAC_random) / (AURAC_oracle - AURAC_random)

  with AURAC_random = C/n (the expected curve of a random order is flat at the accuracy) and
  AURAC_oracle the AURAC of the order that rejects every wrong answer first:
  acc_oracle(k) = min(1, C / (n - k)). PRR is 1 for a perfect separator, 0 for a random one,
  negative when the uncertainty is worse than random. Undefined when C = 0 or C = n (then
  oracle = random).

Bootstrap: :func:`bootstrap_ci` resamples the n (uncertainty, correct) pairs with replacement
(``resamples`` times, ``numpy.random.default_rng(seed)``) and returns the 2.5th and 97.5th
percentiles of the metric (percentile interval); resamples where the metric is undefined (one
class only) are left out, and the interval is None when more than half of them are.
:func:`paired_difference` computes metric(a) - metric(b) on the SAME resampled indices for
both uncertainties, so the interval of the difference accounts for their correlation; with
``correct_b`` each side has its own labels (two runs judged apart over the same questions).
The resamples are evaluated all at once in numpy (:mod:`.metrics_bootstrap`), with the same
definitions, ties included, as the functions here; the tests hold them to these functions
called once per resample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .metrics_bootstrap import resampled_values

DEFAULT_RESAMPLES = 1000


class UndefinedMetric(ValueError):
    """The metric has no value on these labels (e.g. AUROC when every answer is correct)."""


@dataclass
class MetricValue:
    """A metric with its bootstrap interval; ``value`` None means undefined (``reason`` says
    why). ``ci95`` is None when the interval could not be computed (``reason`` says why)."""

    value: float | None
    ci95: tuple[float, float] | None
    reason: str | None = None
    resamples_used: int | None = None

    def to_dict(self) -> dict:
        out: dict = {"value": self.value,
                     "ci95": None if self.ci95 is None else [self.ci95[0], self.ci95[1]]}
        if self.reason:
            out["reason"] = self.reason
        if self.resamples_used is not None:
            out["resamples_used"] = self.resamples_used
        return out


def _arrays(uncertainty: Sequence[float], correct: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    u = np.asarray(uncertainty, dtype=float)
    c = np.asarray(correct, dtype=bool)
    if u.ndim != 1 or u.shape != c.shape:
        raise ValueError(
            f"uncertainty and correct must be 1-D and of the same length; got {u.shape} and "
            f"{c.shape}"
        )
    if u.size == 0:
        raise UndefinedMetric("no answers to evaluate")
    if not np.all(np.isfinite(u)):
        raise ValueError("every uncertainty must be a finite number")
    return u, c


def _two_classes(c: np.ndarray) -> None:
    n_correct = int(c.sum())
    if n_correct == 0:
        raise UndefinedMetric(f"every one of the {c.size} answers is wrong: nothing to separate")
    if n_correct == c.size:
        raise UndefinedMetric(
            f"every one of the {c.size} answers is correct: nothing to separate"
        )


def auroc(uncertainty: Sequence[float], correct: Sequence[bool]) -> float:
    """AUROC of ``uncertainty`` for predicting a wrong answer (scikit-learn's
    ``roc_auc_score``). Raises :class:`UndefinedMetric` when one class is missing."""
    from sklearn.metrics import roc_auc_score

    u, c = _arrays(uncertainty, correct)
    _two_classes(c)
    return float(roc_auc_score((~c).astype(int), u))


def auprc(uncertainty: Sequence[float], correct: Sequence[bool]) -> float:
    """Average precision of ``uncertainty`` for predicting a wrong answer (scikit-learn's
    ``average_precision_score``, wrong = positive). Raises :class:`UndefinedMetric` when one
    class is missing."""
    from sklearn.metrics import average_precision_score

    u, c = _arrays(uncertainty, correct)
    _two_classes(c)
    return float(average_precision_score((~c).astype(int), u))


def rejection_curve(uncertainty: Sequence[float], correct: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    """``(fraction_rejected, accuracy_kept)``: k/n and acc(k) for k = 0 .. n-1 (see the module's
    docstring; ties are averaged)."""
    u, c = _arrays(uncertainty, correct)
    n = u.size
    values, inverse, counts = np.unique(u, return_inverse=True, return_counts=True)
    correct_in = np.bincount(inverse, weights=c.astype(float), minlength=values.size)
    # groups in ascending uncertainty: kept first
    n_before = np.concatenate([[0], np.cumsum(counts)])  # answers in groups before g
    c_before = np.concatenate([[0.0], np.cumsum(correct_in)])
    kept = np.arange(n, 0, -1)  # m = n - k for k = 0..n-1
    g = np.searchsorted(n_before[1:], kept, side="left")  # group holding the m-th kept answer
    partial = kept - n_before[g]
    correct_kept = c_before[g] + partial * correct_in[g] / counts[g]
    return np.arange(n) / n, correct_kept / kept


def aurac(uncertainty: Sequence[float], correct: Sequence[bool]) -> float:
    """Area under the rejection-accuracy curve: (1/n) * sum_k acc(k)."""
    _, acc = rejection_curve(uncertainty, correct)
    return float(acc.mean())


def oracle_aurac(correct: Sequence[bool]) -> float:
    c = np.asarray(correct, dtype=bool)
    n, n_correct = c.size, int(c.sum())
    kept = np.arange(n, 0, -1)
    return float(np.minimum(1.0, n_correct / kept).mean())


def prr(uncertainty: Sequence[float], correct: Sequence[bool],
        max_rejection: float = 1.0) -> float:
    """Prediction rejection ratio (see the module's docstring); with ``max_rejection`` < 1
    the areas run over the first ``int(max_rejection * n)`` points of the curves only
    (k = 0 .. that - 1), as lm-polygraph's ``PredictionRejectionArea(max_rejection)``
    reports ``prr_0.5``: how well the method ranks the answers it would reject first. Raises
    :class:`UndefinedMetric` when every answer is correct or every answer is wrong."""
    from .metrics_bootstrap import rejected_steps

    u, c = _arrays(uncertainty, correct)
    _two_classes(c)
    steps = rejected_steps(u.size, max_rejection)
    if steps < 2:  # at k = 0 every order keeps every answer: oracle = random
        raise UndefinedMetric(f"{u.size} answers: rejecting up to {max_rejection:.0%} of them "
                              "rejects none, so no order is better than another")
    random = float(c.mean())
    _, acc = rejection_curve(u, c)
    kept = np.arange(u.size, 0, -1)[:steps]
    oracle = float(np.minimum(1.0, int(c.sum()) / kept).mean())
    return (float(acc[:steps].mean()) - random) / (oracle - random)


def prr_half(uncertainty: Sequence[float], correct: Sequence[bool]) -> float:
    """:func:`prr` up to half of the answers rejected (``prr_0.5``)."""
    return prr(uncertainty, correct, 0.5)


METRIC_FUNCTIONS: dict[str, Callable[[Sequence[float], Sequence[bool]], float]] = {
    "auroc": auroc,
    "auprc": auprc,
    "prr": prr,
    "prr_0.5": prr_half,
    "aurac": aurac,
}


def _resampled_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(resamples, n))


def _interval(values: np.ndarray, total: int) -> tuple[tuple[float, float] | None, str | None]:
    if len(values) * 2 < total:
        return None, (
            f"the metric is undefined on {total - len(values)} of {total} bootstrap resamples "
            "(only one class in them): too few answers of one class for an interval"
        )
    lo, hi = np.percentile(np.asarray(values), [2.5, 97.5])
    return (float(lo), float(hi)), None


def _metric_name(metric: str | Callable[[Sequence[float], Sequence[bool]], float]) -> str:
    if isinstance(metric, str):
        if metric not in METRIC_FUNCTIONS:
            raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRIC_FUNCTIONS)}")
        return metric
    for name, function in METRIC_FUNCTIONS.items():
        if metric is function:
            return name
    raise ValueError(
        f"the bootstrap evaluates the metrics of METRIC_FUNCTIONS ({', '.join(METRIC_FUNCTIONS)})"
        f" on every resample at once; {metric!r} is not one of them"
    )


def bootstrap_ci(
    metric: str | Callable[[Sequence[float], Sequence[bool]], float],
    uncertainty: Sequence[float],
    correct: Sequence[bool],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[tuple[float, float] | None, int, str | None]:
    """Percentile bootstrap 95% interval of ``metric`` (a name or a function of
    :data:`METRIC_FUNCTIONS`): ``(interval or None, resamples used, reason when None)``."""
    u, c = _arrays(uncertainty, correct)
    values, defined = resampled_values(_metric_name(metric), u, c,
                                       _resampled_indices(u.size, resamples, seed))
    ci, reason = _interval(values[defined], resamples)
    return ci, int(defined.sum()), reason


def summarize(
    name: str,
    uncertainty: Sequence[float],
    correct: Sequence[bool],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> MetricValue:
    """``name`` (a key of :data:`METRIC_FUNCTIONS`) with its bootstrap interval; never raises for
    degenerate labels (the value is then None with the reason)."""
    metric = METRIC_FUNCTIONS[name]
    try:
        value = metric(uncertainty, correct)
    except UndefinedMetric as err:
        return MetricValue(None, None, str(err))
    ci, used, reason = bootstrap_ci(name, uncertainty, correct, resamples=resamples, seed=seed)
    return MetricValue(value, ci, reason, used)


def paired_difference(
    name: str,
    uncertainty_a: Sequence[float],
    uncertainty_b: Sequence[float],
    correct: Sequence[bool],
    *,
    correct_b: Sequence[bool] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> MetricValue:
    """metric(a) - metric(b) with a paired bootstrap interval: each resample draws one set of
    indices (questions) and evaluates both uncertainties on it. ``correct_b``: b's own labels
    of the same questions (default: ``correct`` for both)."""
    metric = METRIC_FUNCTIONS[name]
    a, c = _arrays(uncertainty_a, correct)
    b, cb = _arrays(uncertainty_b, correct if correct_b is None else correct_b)
    if cb.shape != c.shape:
        raise ValueError(f"both sides need the same questions; got {c.size} and {cb.size}")
    try:
        value = metric(a, c) - metric(b, cb)
    except UndefinedMetric as err:
        return MetricValue(None, None, str(err))
    idx = _resampled_indices(c.size, resamples, seed)
    values_a, defined_a = resampled_values(name, a, c, idx)
    values_b, defined_b = resampled_values(name, b, cb, idx)
    defined = defined_a & defined_b
    ci, reason = _interval(values_a[defined] - values_b[defined], resamples)
    return MetricValue(float(value), ci, reason, int(defined.sum()))


def roc_points(uncertainty: Sequence[float], correct: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    """(false positive rate, true positive rate) of the ROC curve for "wrong" (scikit-learn's
    ``roc_curve``); raises :class:`UndefinedMetric` when one class is missing."""
    from sklearn.metrics import roc_curve

    u, c = _arrays(uncertainty, correct)
    _two_classes(c)
    fpr, tpr, _ = roc_curve((~c).astype(int), u)
    return fpr, tpr
