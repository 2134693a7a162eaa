"""Calibration: isotonic P(correct) is monotone, round-trips through JSON, refuses other models."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mars_demo.evaluation import calibration

MODELS = {"llm": "Qwen/Qwen2.5-7B-Instruct", "importance": "duygunuryldz/MARS",
          "nli": "microsoft/deberta-large-mnli"}


def fitted(u, c):
    return calibration.fit(u, c, measure="semantic_entropy", scoring="mars", models=MODELS,
                 data="data/facts.jsonl", auroc=0.8, judge={"name": "em", "threshold": None})


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(-5, 5, allow_nan=False), st.booleans()), min_size=2,
                max_size=40))
def test_higher_uncertainty_never_gets_a_higher_chance(pairs):
    u = [x for x, _ in pairs]
    c = [b for _, b in pairs]
    cal = fitted(u, c)
    grid = np.linspace(-7, 7, 301)
    p = cal.predict(grid)
    assert np.all(np.diff(p) <= 1e-12)
    assert np.all((p >= 0) & (p <= 1))


def test_predictions_equal_scikit_learns_and_survive_json(tmp_path):
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(0)
    c = rng.random(200) < 0.6
    u = rng.normal(size=200) + (~c) * 1.2
    cal = fitted(u, c)
    iso = IsotonicRegression(increasing=False, y_min=0, y_max=1, out_of_bounds="clip").fit(u, c)
    grid = np.linspace(-4, 5, 97)
    assert cal.predict(grid) == pytest.approx(iso.predict(grid), abs=1e-12)
    path = cal.save(tmp_path / "cal.json")
    again = calibration.load(path)
    assert again.predict(grid) == pytest.approx(cal.predict(grid), abs=1e-12)
    assert isinstance(again.predict(0.3), float)
    data = json.loads(path.read_text())
    assert data["models"] == MODELS and data["n"] == 200 and data["auroc"] == 0.8
    assert data["data"] == "data/facts.jsonl" and data["measure"] == "semantic_entropy"
    assert data["scoring"] == "mars" and data["accuracy"] == pytest.approx(c.mean())
    # the low-uncertainty end is more often right than the high end
    assert cal.predict(-3.0) > cal.predict(4.0)
    assert "n = 200" in cal.describe()


def test_a_calibration_for_other_models_is_refused():
    cal = fitted([0.1, 0.5, 0.9, 1.3], [True, True, False, False])
    cal.check_models(dict(MODELS))
    other = {**MODELS, "llm": "meta-llama/Llama-2-7b-hf"}
    with pytest.raises(calibration.CalibrationError, match="other models .*llm: calibrated with "
                       "'Qwen/Qwen2.5-7B-Instruct', loaded 'meta-llama/Llama-2-7b-hf'"):
        cal.check_models(other)


def test_a_sar_calibration_records_and_checks_the_similarity_model(tmp_path):
    """SAR's uncertainty depends on its similarity model: a calibration of it records that
    model and refuses another; one of a measure that reads no similarity records none, so a
    page's similarity model does not matter to it."""
    run = {**MODELS, "similarity": "cross-encoder/stsb-roberta-large"}
    u, c = [0.1, 0.5, 0.9, 1.3], [True, True, False, False]
    sar = calibration.fit(u, c, measure="sar", scoring="value", models=run, data="d", auroc=1.0)
    again = calibration.load(sar.save(tmp_path / "sar.json"))
    assert again.models == run
    again.check_models(dict(run))
    with pytest.raises(calibration.CalibrationError,
                       match="similarity: calibrated with 'cross-encoder/stsb-roberta-large', "
                             "loaded 'org/other-sts'"):
        again.check_models({**run, "similarity": "org/other-sts"})
    analysis = {**run, "similarity": "org/other-sts", "methods": ["sar"]}
    with pytest.raises(calibration.CalibrationError, match="similarity: calibrated with"):
        again.check(analysis)
    plain = calibration.fit(u, c, measure="semantic_entropy", scoring="mars", models=run,
                            data="d", auroc=1.0)
    assert plain.models == MODELS
    plain.check_models({**run, "similarity": "org/other-sts"})


def test_app_refuses_a_sar_calibration_of_another_similarity_model(tmp_path):
    from mars_demo import serve as app
    from mars_demo.settings import Settings

    run = {**MODELS, "similarity": "cross-encoder/stsb-roberta-large"}
    cal = calibration.fit([0.1, 0.5, 0.9, 1.3], [True, True, False, False], measure="sar",
                          scoring="value", models=run, data="d", auroc=1.0)
    settings = Settings(llm=MODELS["llm"], importance=MODELS["importance"], nli=MODELS["nli"],
                        similarity=run["similarity"])
    assert app.check_calibration(cal, dict(MODELS), settings) is None
    with pytest.raises(calibration.CalibrationError, match="similarity: calibrated with"):
        app.check_calibration(cal, dict(MODELS), settings.replace(similarity="org/other-sts"))


def test_bad_files_are_refused_with_a_message(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{not json")
    with pytest.raises(calibration.CalibrationError, match="cannot read"):
        calibration.load(p)
    p.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(calibration.CalibrationError, match="not a calibration file"):
        calibration.load(p)
    good = fitted([0.1, 0.5, 0.9, 1.3], [True, False, True, False]).to_dict()
    good["x"] = [0.1, 1.3]
    good["y"] = [0.2, 0.9]  # increasing chance with uncertainty: not what fit makes
    p.write_text(json.dumps(good))
    with pytest.raises(calibration.CalibrationError, match="breakpoints"):
        calibration.load(p)


def test_answers_made_with_other_settings_get_no_chance():
    made = {**MODELS, "samples": 5, "temperature": 0.5, "prompt": "paper", "recipe": "default",
            "normalization": "sum"}
    cal = calibration.fit([0.1, 0.5, 0.9, 1.3], [True, True, False, False], measure="entropy",
                scoring="mars", models=MODELS, data="d", auroc=0.8, settings=made)
    assert cal.settings["samples"] == 5 and set(cal.settings) == set(calibration.SETTING_KEYS)
    result = {"settings": dict(made), "uncertainty": {"entropy": {"mars": 0.7}}}
    assert cal.chance(result) == pytest.approx(cal.predict(0.7))
    with pytest.raises(calibration.OtherSettings, match="samples 10 here, 5 in the calibration"):
        cal.chance({**result, "settings": {**made, "samples": 10}})
    again = calibration.Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    with pytest.raises(calibration.OtherSettings, match="normalization 'softmax' here"):
        again.chance({**result, "settings": {**made, "normalization": "softmax"}})


# ---- held-out quality -------------------------------------------------------------------------


def test_cross_validation_matches_an_independent_computation():
    """Out-of-fold chances from scikit-learn's own folds and fits, then Brier, the constant
    baseline, ECE by hand and the reliability bins of calibration_curve."""
    from sklearn.calibration import calibration_curve
    from sklearn.isotonic import IsotonicRegression
    from sklearn.model_selection import StratifiedKFold

    rng = np.random.default_rng(4)
    c = rng.random(120) < 0.55
    u = rng.normal(size=120) + (~c) * 1.0
    quality = calibration.cross_validate(u, c, folds=5, bins=10, seed=11)
    chance, constant = np.empty(120), np.empty(120)
    for train, test in StratifiedKFold(5, shuffle=True, random_state=11).split(u, c):
        iso = IsotonicRegression(increasing=False, y_min=0, y_max=1, out_of_bounds="clip")
        chance[test] = iso.fit(u[train], c[train]).predict(u[test])
        constant[test] = c[train].mean()
    assert quality["brier"] == pytest.approx(np.mean((chance - c) ** 2), abs=1e-12)
    assert quality["brier_constant"] == pytest.approx(np.mean((constant - c) ** 2), abs=1e-12)
    assert quality["brier"] < quality["brier_constant"]  # the uncertainty tells something
    ece = 0.0
    for lo in np.arange(10) / 10:
        inside = (chance > lo) & (chance <= lo + 0.1) if lo > 0 else chance <= 0.1
        if inside.any():
            ece += inside.mean() * abs(c[inside].mean() - chance[inside].mean())
    assert quality["ece"] == pytest.approx(ece, abs=1e-12)
    prob_true, prob_pred = calibration_curve(c, chance, n_bins=10, strategy="uniform")
    assert [b["share_correct"] for b in quality["bins"]] == pytest.approx(prob_true)
    assert [b["mean_chance"] for b in quality["bins"]] == pytest.approx(prob_pred)
    assert sum(b["n"] for b in quality["bins"]) == 120


def test_ece_by_hand_on_five_answers():
    # chances 0.05, 0.15, 0.15, 0.95, 1.0 -> bins [0, .1]: 1 (0 right), (.1, .2]: 2 (1 right),
    # (.9, 1]: 2 (2 right): ECE = 1/5 * .05 + 2/5 * |.5 - .15| + 2/5 * |1 - .975|
    ece, bins = calibration.reliability([0.05, 0.15, 0.15, 0.95, 1.0],
                                        [False, True, False, True, True])
    assert ece == pytest.approx(0.2 * 0.05 + 0.4 * 0.35 + 0.4 * 0.025)
    assert [(b["low"], b["n"]) for b in bins] == [(0.0, 1), (0.1, 2), (0.9, 2)]


@pytest.mark.parametrize("correct, message", [
    ([True] * 12, "every one of the 12 answers is correct"),
    ([False] * 12, "every one of the 12 answers is wrong"),
    ([True] * 9 + [False] * 3, "only 3 of the 12 answers are wrong: at least 5 of each"),
    ([False] * 11 + [True], "only 1 of the 12 answers is correct"),
])
def test_one_class_missing_or_too_rare_is_refused_with_the_reason(correct, message):
    with pytest.raises(calibration.TooFewAnswers, match=message):
        calibration.cross_validate(np.linspace(0, 1, 12), correct)
