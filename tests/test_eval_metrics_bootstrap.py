"""The bootstrap's vectorized metrics against the scalar functions called once per resample
(the reference, :func:`metrics_bootstrap.loop_values`), on inputs full of ties and of
resamples that hold one class only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mars_demo.evaluation import metrics, metrics_bootstrap

NAMES = metrics_bootstrap.VECTORIZED


def reference(name, u, c, idx):
    return metrics_bootstrap.loop_values(metrics.METRIC_FUNCTIONS[name], metrics.UndefinedMetric,
                                         np.asarray(u, dtype=float), np.asarray(c, dtype=bool),
                                         idx)


def assert_same(name, u, c, idx):
    values, defined = metrics_bootstrap.resampled_values(name, np.asarray(u, dtype=float),
                                                         np.asarray(c, dtype=bool), idx)
    ref_values, ref_defined = reference(name, u, c, idx)
    assert defined.tolist() == ref_defined.tolist()
    assert np.isnan(values[~defined]).all()
    np.testing.assert_allclose(values[defined], ref_values[defined], rtol=0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=30),
       st.integers(0, 2**32 - 1))
def test_every_resample_matches_the_scalar_metric_with_ties(pairs, seed):
    u = [x / 10 for x, _ in pairs]  # a handful of distinct values: ties everywhere
    c = [b for _, b in pairs]
    idx = np.random.default_rng(seed).integers(0, len(u), size=(15, len(u)))
    for name in NAMES:
        assert_same(name, u, c, idx)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 30, 200])
@pytest.mark.parametrize("decimals", [0, 1, 6])
def test_seeded_cases_match_the_scalar_metric(n, decimals):
    rng = np.random.default_rng(n * 10 + decimals)
    for share in (0.1, 0.5, 0.9):
        c = rng.random(n) < share
        u = np.round(rng.normal(size=n) + (~c) * 0.7, decimals)
        idx = rng.integers(0, n, size=(60, n))
        for name in NAMES:
            assert_same(name, u, c, idx)


def test_values_that_differ_only_in_sign_of_zero_and_large_blocks_split(monkeypatch):
    """-0.0 and 0.0 are one value for both; resamples split in blocks give the same rows."""
    rng = np.random.default_rng(3)
    n = 40
    u = rng.choice([-0.0, 0.0, 0.5, 1.0], size=n)
    c = rng.random(n) < 0.5
    idx = rng.integers(0, n, size=(70, n))
    whole = {name: metrics_bootstrap.resampled_values(name, u, c, idx)[0] for name in NAMES}
    monkeypatch.setattr(metrics_bootstrap, "_BLOCK_CELLS", 3 * n)  # 3 resamples per block
    for name in NAMES:
        assert_same(name, u, c, idx)
        split = metrics_bootstrap.resampled_values(name, u, c, idx)[0]
        np.testing.assert_array_equal(split, whole[name])


def loop_interval(values, defined, total):
    kept = values[defined]
    if kept.size * 2 < total:
        return None
    return tuple(np.percentile(kept, [2.5, 97.5]))


@pytest.mark.parametrize("n,share", [(5, 0.5), (8, 0.2), (30, 0.05), (200, 0.7)])
def test_summaries_and_paired_differences_match_the_loop(n, share):
    rng = np.random.default_rng(n)
    c = rng.random(n) < share
    c[0], c[-1] = True, False  # both classes: every value is defined
    cb = c.copy()
    cb[: n // 4] = ~cb[: n // 4]
    a = np.round(rng.normal(size=n) + (~c) * 0.8, 1)
    b = np.round(a + rng.normal(scale=0.5, size=n), 1)
    resamples, seed = 120, 11
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))

    def check(out, values, defined):
        expected = loop_interval(values, defined, resamples)
        assert out.resamples_used == int(defined.sum())
        assert (out.ci95 is None) == (expected is None) == (out.reason is not None)
        if expected is not None:
            assert out.ci95 == pytest.approx(expected, rel=0, abs=1e-12)

    for name in NAMES:
        va, da = reference(name, a, c, idx)
        check(metrics.summarize(name, a, c, resamples=resamples, seed=seed), va, da)
        for labels_b in (c, cb):
            vb, db = reference(name, b, labels_b, idx)
            diff = metrics.paired_difference(name, a, b, c, correct_b=labels_b,
                                             resamples=resamples, seed=seed)
            check(diff, va - vb, da & db)


def test_too_many_one_class_resamples_give_the_reason_and_the_count():
    # two answers, one of each class: a resample holds both only when it draws both; with
    # seed 6, 88 of 200 do (fewer than half: no interval), with seed 4, 107 (an interval)
    u, c = [0.2, 0.7], [True, False]
    out = metrics.summarize("auroc", u, c, resamples=200, seed=6)
    assert out.value == 1.0 and out.ci95 is None and out.resamples_used == 88
    assert "undefined on 112 of 200 bootstrap resamples" in out.reason
    out = metrics.summarize("auroc", u, c, resamples=200, seed=4)
    assert out.ci95 == (1.0, 1.0) and out.resamples_used == 107 and out.reason is None
    diff = metrics.paired_difference("prr", u, [0.7, 0.2], c, resamples=200, seed=6)
    assert diff.value == 2.0 and diff.ci95 is None and diff.resamples_used == 88
    aurac = metrics.summarize("aurac", u, c, resamples=200, seed=6)  # always defined
    assert aurac.resamples_used == 200 and aurac.ci95 is not None


def test_bootstrap_ci_takes_a_name_or_a_known_function_and_refuses_others():
    u, c = [0.1, 0.4, 0.35, 0.8], [True, True, False, False]
    by_name = metrics.bootstrap_ci("prr", u, c, resamples=50)
    assert metrics.bootstrap_ci(metrics.prr, u, c, resamples=50) == by_name
    with pytest.raises(ValueError, match="not one of them"):
        metrics.bootstrap_ci(lambda u, c: 0.0, u, c, resamples=50)
    with pytest.raises(ValueError, match="unknown metric"):
        metrics.bootstrap_ci("brier", u, c, resamples=50)
