"""evaluate's ranked table: PRR up to half rejected (prr_0.5) as lm-polygraph's
PredictionRejectionArea(max_rejection=0.5) computes it, each row's Spearman correlation with
answer length, and the warning when a lexical judge's best method follows length."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from mars_demo.evaluation import methods_table, metrics
from mars_demo.evaluation.runs import Record


def polygraph_area(u, correct, max_rejection):
    """lm-polygraph's PredictionRejectionArea(max_rejection), written out (tie-free input)."""
    n = len(u)
    num_rej = int(max_rejection * n)
    sorted_target = np.asarray(correct, dtype=float)[np.argsort(u)]
    cumsum = np.cumsum(sorted_target)[-num_rej:]
    scores = (cumsum / np.arange(n - num_rej + 1, n + 1))[::-1]
    return scores.sum() / num_rej


@pytest.mark.parametrize("n", [4, 9, 40])
def test_prr_half_is_lm_polygraphs_normalized_area(n):
    rng = np.random.default_rng(n)
    for _ in range(10):
        u = rng.permutation(n).astype(float)  # no ties
        correct = rng.random(n) < 0.6
        if correct.all() or not correct.any():
            continue
        c = correct.astype(float)
        random = c.mean()
        oracle = polygraph_area(-c + 1e-9 * np.arange(n), correct, 0.5)
        expected = (polygraph_area(u, correct, 0.5) - random) / (oracle - random)
        assert metrics.prr_half(u, correct) == pytest.approx(expected, abs=1e-12)
        assert metrics.prr(u, correct, 1.0) == pytest.approx(
            (polygraph_area(u, correct, 1.0) - random)
            / (polygraph_area(-c + 1e-9 * np.arange(n), correct, 1.0) - random), abs=1e-12)


def test_prr_half_of_three_answers_is_undefined():
    with pytest.raises(metrics.UndefinedMetric, match="rejects none"):
        metrics.prr_half([0.1, 0.5, 0.9], [True, False, True])


def records(length_tracking: bool) -> list[Record]:
    rng = np.random.default_rng(0)
    out = []
    for k in range(30):
        length = float(rng.integers(1, 20))
        correct = length < 8  # long answers are judged wrong
        noise = float(rng.normal())
        out.append(Record(correct=bool(correct), uncertainty={}, methods={
            "answer_length": {"value": length},
            "eigv": {"value": (length if length_tracking else 0.0) + noise},
            "semantic_entropy": {"length_normalized": noise, "mars": -noise}}))
    return out


def test_each_row_has_its_spearman_correlation_with_length():
    recs = records(True)
    table = methods_table.compute(recs, resamples=20, seed=0, judge="nli")
    length = [r.methods["answer_length"]["value"] for r in recs]
    for row in table.rows:
        values = [methods_table.record_values(r)[row.name][row.variant] for r in recs]
        assert row.metrics["length_spearman"].value == pytest.approx(
            spearmanr(values, length).statistic, abs=1e-12)
        assert row.metrics["prr_0.5"].value is not None
    assert table.length_unit == "tokens"
    assert "Length ρ" in "\n".join(methods_table.markdown_lines(table))


def test_a_lexical_judge_and_a_length_biased_best_method_are_warned_of():
    table = methods_table.compute(records(True), resamples=20, seed=0, judge="f1")
    assert table.rows[0].name in ("answer_length", "eigv")
    assert len(table.warnings) == 1 and "follows the answers' length" in table.warnings[0]
    assert "Warning: The best method" in "\n".join(methods_table.markdown_lines(table))
    # the same table with a judge that reads meaning: no warning
    assert methods_table.compute(records(True), resamples=20, seed=0,
                                 judge="nli").warnings == []


def test_an_asked_method_no_answer_has_is_named_with_what_the_answers_lack():
    """A method with no value anywhere has no row; the report says so, with what the answers
    lack (the method's need the engine named), but no command-line fix (a page shows it)."""
    from mars_demo.methods import METHODS, NEEDS

    said = ("The method mean_token_entropy could not be computed for these answers, so it is "
            f"left out: this analysis holds no {NEEDS['token_entropy'].lacking} that "
            f"mean_token_entropy reads; {NEEDS['token_entropy'].fix}")
    recs = records(True)
    recs[3].analysis = {"warnings": [said]}
    out = methods_table.absent(recs, ["answer_length", "mean_token_entropy", "self_certainty"])
    assert out == [
        f"{METHODS['mean_token_entropy'].label} has no value for any answer, so it has no row in "
        f"the table of every method: the answers hold no {NEEDS['token_entropy'].lacking}",
        # nothing says why: no reason is made up
        f"{METHODS['self_certainty'].label} has no value for any answer, so it has no row in "
        "the table of every method"]
    assert methods_table.absent(recs, ["answer_length", "eigv"]) == []
    assert methods_table.absent([], ["mean_token_entropy"]) == []
