"""The Evaluation view's degenerate figures and compared charts in headless Chromium, at 1280
and 390 px (``app.py --runs`` with tiny models): a method ranked at "AUROC 0.00 [0.00, 0.00]"
in a served report (as a run made before rows recorded why) is marked and not ranked; the
rejection-curve charts, and the ROC charts, each share one y range as the browser draws them.
"""

from __future__ import annotations

import json
import shutil

import pytest
from test_browser import browser, open_page  # noqa: F401
from test_eval_view import full_run, given_run  # noqa: F401  (fixtures)
from ui_helpers import running_app

pytestmark = pytest.mark.browser

# each chart's axis ranges as Plotly drew them
RANGES = """(box) => [...document.querySelectorAll(`${box} .js-plotly-plot`)].map(
  el => [el._fullLayout.xaxis.range.map(v => +v.toFixed(4)),
         el._fullLayout.yaxis.range.map(v => +v.toFixed(4))])"""


@pytest.fixture(scope="module")
def served(tiny_models, given_run, tmp_path_factory):  # noqa: F811
    runs = tmp_path_factory.mktemp("served-runs")
    shutil.copytree(given_run, runs / "facts-odd")
    report = json.loads((runs / "facts-odd" / "report.json").read_text())
    row = report["methods_table"]["rows"][2]  # ranked third, as the run showed it
    row["auroc"] = {"value": 0.0, "ci95": [0.0, 0.0]}
    row.pop("degenerate", None)
    (runs / "facts-odd" / "report.json").write_text(json.dumps(report))
    with running_app(tiny_models, "--runs", str(runs)) as url:
        yield url, row["label"]


@pytest.mark.parametrize("width", [1280, 390])
def test_degenerate_figures_are_marked_and_compared_charts_share_axes(browser, served, width):  # noqa: F811
    url, label = served
    page = open_page(browser, url, width=width)
    try:
        page.locator("#mars-eval").get_by_text("Evaluation:", exact=False).first.click()
        page.click("#mars-eval-show")
        page.wait_for_selector("#mars-eval-table .mars-eval-methods", timeout=60_000)
        # the charts first, so that a page failing both shows both
        unshared = {}
        for box in ("#mars-eval-rejection", "#mars-eval-roc"):
            page.wait_for_selector(f"{box} .main-svg", timeout=60_000)
            page.wait_for_function(
                f"() => document.querySelectorAll('{box} .js-plotly-plot').length === 3"
                f" && [...document.querySelectorAll('{box} .js-plotly-plot')]"
                ".every(el => el._fullLayout && el._fullLayout.yaxis)", timeout=60_000)
            ranges = page.evaluate(RANGES, box)
            if not (len(ranges) == 3 and all(r == ranges[0] for r in ranges)):
                unshared[box] = ranges
        rows = page.locator("#mars-eval-table .mars-eval-methods tbody tr")
        marked = page.locator("#mars-eval-table .mars-eval-methods tbody tr[data-degenerate]")
        assert marked.count() == 1, unshared
        text = marked.first.inner_text()
        # marked with a caution where it ranks: a zero-width interval says too few answers,
        # not that the method tells nothing
        assert label in text and "Caution: its AUROC interval has zero width" in text
        assert marked.first.locator("td[data-col=index]").inner_text().strip() == "3"
        places = [r.locator("td[data-col=index]").inner_text().strip() for r in rows.all()]
        assert places == [str(k) for k in range(1, len(places) + 1)], places
        assert "(zero width)" in text
        assert unshared == {}
    finally:
        page.close()
