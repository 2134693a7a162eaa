"""Time the bootstrap intervals: the scalar metric once per resample (the reference loop) against
every resample at once (what evaluate runs), per metric and for one row of the methods table
(AUROC, AUPRC and PRR with their intervals and the paired AUROC difference), in one run.

    python scripts/bootstrap_timing.py [--n 200] [--resamples 1000] [--seed 0]

Prints seconds and the ratio loop / vectorized; the two sides' intervals are checked equal
(1e-12) on the way. A measurement, not a test: the numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mars_demo.evaluation import metrics, metrics_bootstrap  # noqa: E402
from mars_demo.evaluation.methods_table import RANKED_BY, TABLE_METRICS  # noqa: E402


def loop_interval(name, u, c, idx):
    values, defined = metrics_bootstrap.loop_values(metrics.METRIC_FUNCTIONS[name],
                                                    metrics.UndefinedMetric, u, c, idx)
    return np.percentile(values[defined], [2.5, 97.5])


def loop_row(a, b, c, idx):
    out = [loop_interval(name, a, c, idx) for name in TABLE_METRICS]
    fn = metrics.METRIC_FUNCTIONS[RANKED_BY]
    va, da = metrics_bootstrap.loop_values(fn, metrics.UndefinedMetric, a, c, idx)
    vb, db = metrics_bootstrap.loop_values(fn, metrics.UndefinedMetric, b, c, idx)
    out.append(np.percentile((va - vb)[da & db], [2.5, 97.5]))
    return out


def vector_row(a, b, c, resamples, seed):
    out = [metrics.summarize(name, a, c, resamples=resamples, seed=seed).ci95
           for name in TABLE_METRICS]
    out.append(metrics.paired_difference(RANKED_BY, a, b, c, resamples=resamples,
                                         seed=seed).ci95)
    return out


def timed(fn, repeat):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    c = rng.random(args.n) < 0.6
    a = np.round(rng.normal(size=args.n) + (~c) * 0.8, 1)  # rounded: ties, as real scores have
    b = np.round(a + rng.normal(scale=0.5, size=args.n), 1)
    idx = metrics._resampled_indices(args.n, args.resamples, args.seed)
    for fn in metrics.METRIC_FUNCTIONS.values():  # imports (scikit-learn) outside the timing
        fn(a, c)
    print(f"n={args.n}, {args.resamples} resamples; loop: one run, vectorized: best of 5")
    print(f"{'':>10} {'loop s':>9} {'vector s':>9} {'ratio':>7}")
    for name in metrics.METRIC_FUNCTIONS:
        t_loop, want = timed(lambda: loop_interval(name, a, c, idx), 1)
        t_vec, got = timed(lambda: metrics.bootstrap_ci(name, a, c, resamples=args.resamples,
                                                        seed=args.seed)[0], 5)
        assert np.allclose(got, want, rtol=0, atol=1e-12), (name, got, want)
        print(f"{name:>10} {t_loop:9.3f} {t_vec:9.4f} {t_loop / t_vec:7.0f}x")
    t_loop, want = timed(lambda: loop_row(a, b, c, idx), 1)
    t_vec, got = timed(lambda: vector_row(a, b, c, args.resamples, args.seed), 5)
    assert np.allclose(np.array(got), np.array(want), rtol=0, atol=1e-12)
    print(f"{'table row':>10} {t_loop:9.3f} {t_vec:9.4f} {t_loop / t_vec:7.0f}x")


if __name__ == "__main__":
    main()
