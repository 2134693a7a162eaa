"""The calibrated page and the Evaluation view in headless Chromium (``app.py --calibration
--runs`` with tiny models). Screenshots go to $MARS_DEMO_ARTIFACTS if set."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from test_browser import ANALYSIS_TIMEOUT_MS, ask, browser, open_page, shots  # noqa: F401
from test_eval_view import full_run, given_run, tiny_llm_run  # noqa: F401  (fixtures)
from ui_helpers import running_app

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def calibrated_url(tiny_models, tiny_llm_run, given_run, tmp_path_factory):  # noqa: F811
    runs = tmp_path_factory.mktemp("served-runs")
    shutil.copytree(given_run, runs / "facts-given")  # 40 questions, right and wrong answers
    shutil.copytree(tiny_llm_run, runs / "tiny-facts")
    with running_app(tiny_models, "--calibration", str(tiny_llm_run / "calibration.json"),
                     "--runs", str(runs)) as url:
        yield url


def test_the_chance_under_the_answer_and_the_evaluation_view(
        browser, calibrated_url, tiny_llm_run, shots, tmp_path):  # noqa: F811
    page = open_page(browser, calibrated_url)
    # the page's default settings (5 samples of up to 64 tokens) are not the calibrated run's
    ask(page)
    page.wait_for_selector("#mars-verdict .mars-trust", state="attached",
                           timeout=ANALYSIS_TIMEOUT_MS)
    # why there is no chance is one click away, under the verdict
    assert "samples 5 here, 2 in the calibration" in page.text_content("#mars-verdict")
    assert page.locator("#mars-verdict .mars-trust-chance").count() == 0
    assert page.locator("#mars-verdict .mars-verdict-chance").count() == 0
    # with the run's settings (2 samples of up to 6 tokens) the answer gets its chance
    page.locator("#mars-settings").get_by_text("Settings", exact=True).click()
    for control, value in (("#mars-samples-n", "2"), ("#mars-max-new-tokens", "6")):
        page.fill(f"{control} input[type=number]", value)
        page.press(f"{control} input[type=number]", "Enter")
    ask(page)
    page.wait_for_selector("#mars-verdict .mars-verdict-chance", timeout=ANALYSIS_TIMEOUT_MS)
    chance = page.inner_text("#mars-verdict .mars-verdict-chance")
    assert re.fullmatch(r"About \d{1,3}% likely right \(calibrated on .+, 10 questions\)\.",
                        chance), chance
    text = page.text_content("#mars-verdict")
    assert "likely to be right" in text and "n = 10 questions" in text
    # the verdict comes first, the answer under it; a calibrated chance may read as trust
    answer = page.locator("#mars-answer").bounding_box()
    verdict = page.locator("#mars-verdict").bounding_box()
    assert verdict["y"] + verdict["height"] <= answer["y"] < verdict["y"] + verdict["height"] + 200
    tone = page.get_attribute("#mars-verdict .mars-verdict", "data-tone")
    assert tone in ("likely", "maybe", "unlikely"), tone
    page.click("#mars-verdict .mars-verdict-details > summary")
    page.evaluate("document.querySelector('#mars-verdict').scrollIntoView({block: 'center'})")
    page.screenshot(path=str(shots / "eval-verdict-chance.png"))

    # the Evaluation view: the served run is offered; Show draws the table and the curves
    page.locator("#mars-eval").get_by_text("Evaluation:", exact=False).first.click()
    page.click("#mars-eval-show")
    page.wait_for_selector("#mars-eval-table table", timeout=60_000)
    page.wait_for_selector("#mars-eval-roc .main-svg", timeout=60_000)
    page.wait_for_selector("#mars-eval-rejection .main-svg", timeout=60_000)
    table = page.inner_text("#mars-eval-table")
    assert "MARS − LN" in table
    # the view answers its own question in one sentence, over the run shown
    said = page.inner_text("#mars-run-verdict")
    assert said.startswith("Does MARS help here? ") and "points for Semantic Entropy [" in said
    heads = page.locator("#mars-eval-table .mars-eval-table thead th").all_inner_texts()
    assert heads == ["Method", "AUROC", "AUPRC", "PRR", "AURAC"]  # PRR, AURAC beside AUROC
    assert page.locator("#mars-eval-table .mars-eval-table tbody tr").count() == 6
    assert "(judge contains)" in table and "this judge agreed with the human labels" in table
    assert "held out by 5-fold cross-validation: Brier score" in table
    assert "(facts-given): 40 questions" in page.inner_text("#mars-eval-note")
    assert page.locator("#mars-eval-roc .scatterlayer .trace").count() >= 6
    # the table of every method, ranked, and the ROC curves of the top five (and random)
    page.wait_for_selector("#mars-eval-roc-methods .main-svg", timeout=60_000)
    # a row for each variant of the free methods (the default, the three measures among them)
    # but those that read what answers given with their log-probs alone lack, which the
    # report's warnings name
    from mars_demo import methods

    lacking = ("mean_token_entropy", "self_certainty")  # token entropies, full distributions
    rows = sum(len(methods.METHODS[i].variants) for i in methods.FREE if i not in lacking)
    assert page.locator("#mars-eval-table .mars-eval-methods tbody tr").count() == rows
    for method_id in lacking:
        assert (f"{methods.METHODS[method_id].label} has no value for any answer"
                in page.inner_text("#mars-eval-table"))
    assert "ranked by AUROC" in table and "AUROC − best MARS" in table
    assert page.locator("#mars-eval-roc-methods .scatterlayer .trace").count() == 6
    page.evaluate("document.querySelector('#mars-eval').scrollIntoView()")
    page.screenshot(path=str(shots / "eval-view.png"))
    page.evaluate("document.querySelector('#mars-eval-table').scrollIntoView()")
    page.screenshot(path=str(shots / "eval-view-1280.png"), full_page=False)
    page.evaluate("document.querySelector('#mars-eval-roc').scrollIntoView()")
    page.screenshot(path=str(shots / "eval-view-curves.png"))
    page.evaluate("document.querySelector('.mars-eval-methods').scrollIntoView()")
    page.screenshot(path=str(shots / "eval-view-methods.png"))
    page.evaluate("document.querySelector('#mars-eval-roc-methods').scrollIntoView()")
    page.screenshot(path=str(shots / "eval-view-roc-methods.png"))
    # a phone: the page does not scroll sideways; each table is a card per row, and the charts
    # stack, one a row, none squeezed
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(500)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    for wrap in page.locator("#mars-eval-table .mars-table-wrap").all():
        assert wrap.evaluate("el => el.getBoundingClientRect().right") <= 390
        assert wrap.evaluate("el => el.scrollWidth <= el.clientWidth + 1")  # nothing hidden
    assert not page.locator("#mars-eval-table .mars-eval-methods thead").is_visible()
    charts = page.evaluate("""() => [...document.querySelectorAll('#mars-eval-roc .mars-plot')]
        .map(e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width]; })""")
    assert len(charts) == 3 and len({round(left) for left, _, _ in charts}) == 1, charts
    assert all(width >= 300 for _, _, width in charts), charts
    page.evaluate("document.querySelector('#mars-eval-table').scrollIntoView()")
    page.screenshot(path=str(shots / "eval-view-390.png"))
    page.evaluate("document.querySelector('#mars-eval-roc').scrollIntoView()")
    page.screenshot(path=str(shots / "eval-view-390-curves.png"))
    page.set_viewport_size({"width": 1280, "height": 900})

    # a hostile upload: a clear message, escaped, and the page keeps working
    bad = tmp_path / "report.json"
    bad.write_text(json.dumps({"metrics": {"auroc": {"confidence": "<img src=x onerror=alert(1)>"}},
                               "n": 1}))
    page.set_input_files("#mars-eval-report input[type=file]", str(bad))
    page.wait_for_function(
        "() => document.querySelector('#mars-eval-report').innerText.includes('report.json')")
    page.click("#mars-eval-show")
    page.wait_for_selector("#mars-eval-error .mars-error", timeout=60_000)
    assert "not a readable evaluation report" in page.inner_text("#mars-eval-error")
    assert "report.json" in page.inner_text("#mars-eval-report")  # the upload stays shown
    assert "Drop File Here" not in page.inner_text("#mars-eval-report")
    assert page.locator("#mars-eval-table table").count() == 0
    assert not page.locator("#mars-eval-roc").is_visible()  # no stale curves either
    assert not page.locator("#mars-eval-roc-methods").is_visible()
    page.locator("#mars-eval-error").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "eval-bad-upload.png"))
    page.close()
