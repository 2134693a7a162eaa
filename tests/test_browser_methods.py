"""The "Compared with other methods" panel in headless Chromium: every method of the
answer is a row with numbers, on a wide screen and a phone, without and with a loaded run.
Screenshots go to $MARS_DEMO_ARTIFACTS if set."""

from __future__ import annotations

import re

import pytest
from test_browser import ask, browser, open_fold, open_page, page, shots  # noqa: F401
from test_ui_methods_panel import write_run
from ui_helpers import running_app

from mars_demo import texts
from mars_demo.methods import FREE, METHODS
from mars_demo.ui.draw.methods_panel import IN_THE_TABLE

#: the panel's rows on a page of the free methods: less those the uncertainty table shows
SHOWN = [m for m in FREE if m not in IN_THE_TABLE]

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NUMBER = re.compile(r"^−?\d+\.\d{3}$")
# Each row of the panel: its method id, and per value column the value and the line under it.
PANEL_ROWS = """() => [...document.querySelectorAll('#mars-methods-panel tr[data-method]')].map(tr => ({
  id: tr.dataset.method,
  cells: Object.fromEntries([...tr.querySelectorAll('td[data-col]')]
    .filter(td => td.dataset.col !== 'method' && td.querySelector('.mars-method-value'))
    .map(td => [td.dataset.col, {value: td.querySelector('.mars-method-value').innerText.trim(),
                                 line: (td.querySelector('.mars-small') || {innerText: ''}).innerText,
                                 shown: td.getBoundingClientRect().height > 0}]))}))"""
ACTIVE = "() => [...document.querySelectorAll('#mars-methods-panel th.mars-active')].map(e => e.dataset.col)"
WIDE = "() => document.documentElement.scrollWidth"


def open_panel(page) -> None:
    """The panel is folded under its one-line summary: open it."""
    open_fold(page, "#mars-methods-box", "#mars-methods-panel table")


def check_rows(page) -> list[dict]:
    open_panel(page)
    rows = page.evaluate(PANEL_ROWS)
    assert [r["id"] for r in rows] == SHOWN  # the app's free methods, in order
    for row in rows:
        variants = ("length_normalized", "mars") if METHODS[row["id"]].scored else ("value",)
        assert sorted(row["cells"]) == sorted(variants), row
        for cell in row["cells"].values():
            assert NUMBER.match(cell["value"]) and cell["shown"], row
    return rows


def panel_shot(page, path) -> None:
    page.evaluate("document.querySelector('#mars-methods-panel').scrollIntoView()")
    page.locator("#mars-methods-panel").screenshot(path=str(path))


def test_the_panel_shows_every_method_with_numbers_wide_and_on_a_phone(page, shots):  # noqa: F811
    ask(page)
    rows = check_rows(page)
    panel = page.inner_text("#mars-methods-panel")
    assert "not comparable across rows" in panel and "Higher = less trustworthy" in panel
    assert all(not c["line"] for r in rows for c in r["cells"].values())  # no run: no places
    labels = page.locator("#mars-methods-panel td[data-col='method'] .mars-measure").all_inner_texts()
    assert labels == [METHODS[m].label for m in SHOWN]
    # some free methods read the scorings (mean token entropy, semantic density): the panel has
    # a length-normalized and a MARS column, and the toggle's scoring is the one marked
    assert any(METHODS[m].scored for m in SHOWN)
    assert page.locator("#mars-methods-panel th[data-col='mars']").count() == 1
    assert page.evaluate(ACTIVE) == ["mars"]
    page.locator("#mars-scoring").get_by_text("Length-normalized", exact=True).click()
    page.wait_for_function(ACTIVE.replace("() =>", "() => (") + ").join() === 'length_normalized'")
    page.locator("#mars-scoring").get_by_text("MARS", exact=True).click()  # as the others expect
    page.wait_for_function(ACTIVE.replace("() =>", "() => (") + ").join() === 'mars'")
    summary = page.inner_text("#mars-methods-box > button")
    assert summary.startswith(f"{texts.METHODS_HEADING}: {len(SHOWN)} more methods"), summary
    panel_shot(page, shots / "methods-1280.png")
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        page.wait_for_timeout(300)
        assert page.evaluate(WIDE) <= 390  # no sideways scrolling
        # a card per method: the header row is hidden, each value is labelled by its column
        assert not page.locator("#mars-methods-panel thead").is_visible()
        check_rows(page)
        box = page.locator("#mars-methods-panel").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        panel_shot(page, shots / "methods-390.png")
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})


def test_with_a_run_each_value_says_where_it_falls_among_its_answers(
        browser, tiny_models, shots, tmp_path):  # noqa: F811
    some = [m for m in FREE if m != "kernel_language_entropy"]  # the run lacks one method
    records = [{m: ({"length_normalized": k / 4, "mars": k / 3} if METHODS[m].scored
                    else {"value": k / 5}) for m in some} for k in range(12)]
    write_run(tmp_path / "runs" / "hand-run", records)
    with running_app(tiny_models, "--runs", str(tmp_path / "runs")) as url:
        page = open_page(browser, url, theme="dark")
        try:
            ask(page)
            rows = check_rows(page)
            for row in rows:
                for cell in row["cells"].values():
                    if row["id"] == "kernel_language_entropy":
                        assert cell["line"] == texts.METHODS_ABSENT
                    else:
                        share = r"([1-9]\d{0,2}%|<1%|all)"
                        assert re.fullmatch(
                            rf"(less|more) trustworthy than {share} of the run's answers"
                            rf"(; as high as {share} of them)?"
                            r"|as high as every one of the run's answers", cell["line"]), row
            panel = page.inner_text("#mars-methods-panel")
            assert 'the 12 answers of the evaluation run "hand-run"' in panel
            assert "not comparable across rows" not in panel
            panel_shot(page, shots / "methods-run-dark-1280.png")
            page.set_viewport_size({"width": 390, "height": 844})
            page.wait_for_timeout(300)
            assert page.evaluate(WIDE) <= 390
            panel_shot(page, shots / "methods-run-dark-390.png")
        finally:
            page.close()
