"""Evaluation metrics against independent computations written here (pair counts, loops)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mars_demo.evaluation import metrics


def mann_whitney_auroc(u, correct) -> float:
    """P(u_wrong > u_correct) + 1/2 P(tie), by counting every (wrong, correct) pair."""
    wrong = [x for x, c in zip(u, correct) if not c]
    right = [x for x, c in zip(u, correct) if c]
    wins = sum(1.0 if w > r else 0.5 if w == r else 0.0 for w in wrong for r in right)
    return wins / (len(wrong) * len(right))


def loop_curve(order_correct: list[bool]) -> list[float]:
    """Accuracy kept after rejecting the first k of ``order_correct`` (most uncertain first)."""
    n = len(order_correct)
    out = []
    for k in range(n):
        kept = order_correct[k:]
        out.append(sum(kept) / len(kept))
    return out


def rejection_orders(u):
    """Every rejection order consistent with u: most uncertain first, tied answers in every
    order (the permutations within each group of equal values)."""
    groups = [[i for i in range(len(u)) if u[i] == v] for v in sorted(set(u), reverse=True)]
    for parts in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield [i for part in parts for i in part]


def loop_aurac(u, correct) -> float:
    """Average over every rejection order consistent with u (ties in every order) of the
    step-area (1/n) sum_k acc(k)."""
    n = len(u)
    curves = [loop_curve([correct[i] for i in order]) for order in rejection_orders(u)]
    mean_curve = [sum(c[k] for c in curves) / len(curves) for k in range(n)]
    return sum(mean_curve) / n


def loop_prr(u, correct) -> float:
    oracle_order = sorted(correct)  # False (wrong) first: rejected first
    oracle = sum(loop_curve(oracle_order)) / len(u)
    random = sum(correct) / len(correct)
    return (loop_aurac(u, correct) - random) / (oracle - random)


U = [0.3, 2.0, 1.1, 0.3, 0.9, 2.5, 0.1]
C = [True, False, True, False, True, False, True]


def test_auroc_matches_the_pair_count():
    assert metrics.auroc(U, C) == pytest.approx(mann_whitney_auroc(U, C), abs=1e-12)
    # by hand: 9 wins and 1 tie of 3 x 4 pairs
    assert metrics.auroc(U, C) == pytest.approx(9.5 / 12)


def test_aurac_and_prr_match_loops_over_every_tie_order():
    assert metrics.aurac(U, C) == pytest.approx(loop_aurac(U, C), abs=1e-12)
    assert metrics.prr(U, C) == pytest.approx(loop_prr(U, C), abs=1e-12)


def test_rejection_curve_matches_the_loop_without_ties():
    u = [0.5, 0.1, 0.9, 0.3, 0.7]
    c = [True, True, False, True, False]
    frac, acc = metrics.rejection_curve(u, c)
    order = [c[i] for i in np.argsort(u)[::-1]]
    assert list(frac) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8])
    assert list(acc) == pytest.approx(loop_curve(order))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.booleans()), min_size=2, max_size=6))
def test_every_metric_matches_the_loops_on_random_small_sets(pairs):
    u = [float(x) for x, _ in pairs]  # few distinct values: many ties
    c = [b for _, b in pairs]
    assert metrics.aurac(u, c) == pytest.approx(loop_aurac(u, c), abs=1e-12)
    if 0 < sum(c) < len(c):
        assert metrics.auroc(u, c) == pytest.approx(mann_whitney_auroc(u, c), abs=1e-12)
        assert metrics.prr(u, c) == pytest.approx(loop_prr(u, c), abs=1e-12)
    else:
        with pytest.raises(metrics.UndefinedMetric):
            metrics.auroc(u, c)
        with pytest.raises(metrics.UndefinedMetric):
            metrics.prr(u, c)


def test_a_perfect_separator_gives_auroc_1_and_prr_1():
    rng = np.random.default_rng(3)
    correct = rng.random(50) < 0.6
    u = np.where(correct, rng.uniform(0, 1, 50), rng.uniform(2, 3, 50))
    assert metrics.auroc(u, correct) == 1.0
    assert metrics.prr(u, correct) == pytest.approx(1.0, abs=1e-12)
    assert metrics.aurac(u, correct) == pytest.approx(metrics.oracle_aurac(correct), abs=1e-12)
    # and the reverse order is the worst: AUROC 0, PRR below 0
    assert metrics.auroc(-u, correct) == 0.0
    assert metrics.prr(-u, correct) < 0


def test_a_constant_uncertainty_is_random():
    c = [True, False, True, True, False]
    assert metrics.auroc([1.0] * 5, c) == 0.5
    assert metrics.prr([1.0] * 5, c) == pytest.approx(0.0, abs=1e-12)
    assert metrics.aurac([1.0] * 5, c) == pytest.approx(0.6)


@pytest.mark.parametrize("correct", [[True] * 6, [False] * 6])
def test_one_class_only_gives_none_and_a_reason_not_a_crash(correct):
    u = [0.1, 0.5, 0.2, 0.9, 0.4, 0.3]
    for name in ("auroc", "prr"):
        out = metrics.summarize(name, u, correct, resamples=50)
        assert out.value is None and out.ci95 is None
        assert ("every one of the 6 answers is " + ("correct" if correct[0] else "wrong")) in out.reason
        d = metrics.paired_difference(name, u, u[::-1], correct, resamples=50)
        assert d.value is None and "every one" in d.reason
    aurac = metrics.summarize("aurac", u, correct, resamples=50)  # defined: flat at the accuracy
    assert aurac.value == (1.0 if correct[0] else 0.0)


def test_bootstrap_interval_matches_an_independent_resampling():
    rng = np.random.default_rng(0)
    n = 40
    c = rng.random(n) < 0.5
    u = rng.normal(size=n) + (~c) * 0.8
    out = metrics.summarize("auroc", u, c, resamples=200, seed=7)
    draws = np.random.default_rng(7).integers(0, n, size=(200, n))
    values = []
    for idx in draws:
        uu, cc = u[idx].tolist(), c[idx].tolist()
        if 0 < sum(cc) < n:
            values.append(mann_whitney_auroc(uu, cc))
    lo, hi = np.percentile(values, [2.5, 97.5])
    assert out.value == pytest.approx(mann_whitney_auroc(u.tolist(), c.tolist()))
    assert out.ci95 == pytest.approx((lo, hi), abs=1e-12)
    assert out.resamples_used == len(values)
    assert out.ci95[0] <= out.value <= out.ci95[1]
    # seeded: the same seed gives the same interval, another seed another one
    assert metrics.summarize("auroc", u, c, resamples=200, seed=7).ci95 == out.ci95
    assert metrics.summarize("auroc", u, c, resamples=200, seed=8).ci95 != out.ci95


def test_paired_difference_uses_the_same_indices_for_both():
    rng = np.random.default_rng(1)
    n = 30
    c = rng.random(n) < 0.5
    a = rng.normal(size=n) + (~c) * 1.0
    b = a + rng.normal(scale=0.5, size=n)
    out = metrics.paired_difference("prr", a, b, c, resamples=100, seed=3)
    draws = np.random.default_rng(3).integers(0, n, size=(100, n))
    diffs = []
    for idx in draws:
        cc = c[idx].tolist()
        if 0 < sum(cc) < n:
            diffs.append(loop_prr_fast(a[idx], cc) - loop_prr_fast(b[idx], cc))
    assert out.value == pytest.approx(loop_prr_fast(a, c.tolist()) - loop_prr_fast(b, c.tolist()))
    assert out.ci95 == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])), abs=1e-12)
    # a difference of an uncertainty with itself is exactly 0, interval included
    same = metrics.paired_difference("auroc", a, a, c, resamples=50)
    assert same.value == 0.0 and same.ci95 == (0.0, 0.0)


def loop_prr_fast(u, correct) -> float:
    """PRR by explicit loops for continuous u (no ties: one rejection order)."""
    order = [correct[i] for i in sorted(range(len(u)), key=lambda i: -u[i])]
    n = len(order)
    aur = sum(loop_curve(order)) / n
    oracle = sum(loop_curve(sorted(correct))) / n
    random = sum(correct) / n
    return (aur - random) / (oracle - random)


def test_bad_input_is_refused_with_a_message():
    with pytest.raises(ValueError, match="same length"):
        metrics.auroc([0.1, 0.2], [True])
    with pytest.raises(ValueError, match="finite"):
        metrics.aurac([0.1, float("nan")], [True, False])
    with pytest.raises(metrics.UndefinedMetric, match="no answers"):
        metrics.aurac([], [])


def average_precision_by_hand(u, correct) -> float:
    """Average precision for "wrong": walk the distinct thresholds from the highest
    uncertainty down; at each, precision of everything at or above it times the recall gained
    (tied answers enter together)."""
    wrong_total = sum(not c for c in correct)
    ap = recall_before = 0.0
    for t in sorted(set(u), reverse=True):
        above = [c for x, c in zip(u, correct) if x >= t]
        hits = sum(not c for c in above)
        recall = hits / wrong_total
        ap += (recall - recall_before) * hits / len(above)
        recall_before = recall
    return ap


def test_auprc_by_hand_and_by_scikit_learn():
    from sklearn.metrics import average_precision_score

    # U, C by hand: thresholds 2.5 (1 wrong of 1), 2.0 (2 of 2), 1.1 (2 of 3), 0.9 (2 of 4),
    # 0.3 (3 of 6: a wrong and a correct tie); recall steps 1/3 at 2.5, 1/3 at 2.0, 1/3 at 0.3
    by_hand = (1 / 3) * 1 + (1 / 3) * 1 + (1 / 3) * (3 / 6)
    assert average_precision_by_hand(U, C) == pytest.approx(by_hand)
    assert metrics.auprc(U, C) == pytest.approx(by_hand, abs=1e-12)
    assert metrics.auprc(U, C) == pytest.approx(
        average_precision_score([not c for c in C], U), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.booleans()), min_size=2, max_size=8))
def test_auprc_matches_the_walk_on_random_small_sets(pairs):
    u = [float(x) for x, _ in pairs]
    c = [b for _, b in pairs]
    if 0 < sum(c) < len(c):
        assert metrics.auprc(u, c) == pytest.approx(average_precision_by_hand(u, c), abs=1e-12)
    else:
        with pytest.raises(metrics.UndefinedMetric):
            metrics.auprc(u, c)


def test_paired_difference_with_each_sides_own_labels():
    """Two runs over the same questions, judged apart: metric(a, c_a) - metric(b, c_b) on the
    same resampled questions."""
    rng = np.random.default_rng(5)
    n = 25
    ca = rng.random(n) < 0.5
    cb = ca.copy()
    cb[:4] = ~cb[:4]  # another judge disagrees on four questions
    a = rng.normal(size=n) + (~ca) * 1.0
    b = rng.normal(size=n) + (~cb) * 0.5
    out = metrics.paired_difference("auroc", a, b, ca, correct_b=cb, resamples=80, seed=2)
    assert out.value == pytest.approx(mann_whitney_auroc(a.tolist(), ca.tolist())
                                      - mann_whitney_auroc(b.tolist(), cb.tolist()))
    diffs = []
    for idx in np.random.default_rng(2).integers(0, n, size=(80, n)):
        if 0 < ca[idx].sum() < n and 0 < cb[idx].sum() < n:
            diffs.append(mann_whitney_auroc(a[idx].tolist(), ca[idx].tolist())
                         - mann_whitney_auroc(b[idx].tolist(), cb[idx].tolist()))
    assert out.ci95 == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])), abs=1e-12)
    with pytest.raises(ValueError, match="same questions"):
        metrics.paired_difference("auroc", a, b[:5], ca, correct_b=cb[:5])
