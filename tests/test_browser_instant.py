"""The page from a first visit, in headless Chromium at 1280 and 390 px (the shared ``app.py``
of tiny models): every example answers at once, no Gradio timer over it; the wait said before an
answer is that of analyses like it; the live region says the analysis started; a second press
says the page is still working; the controls that act on an answer come with it; the Models
line repeats no word; the page links the paper, its code and where the recipes are listed.

Transient states (the live region, the second press's note, Gradio's status) are recorded in
the page while they last (a MutationObserver and a 20 ms poll), not read at the end.
"""

from __future__ import annotations

import re
import time

import pytest
from test_browser import (  # noqa: F401
    ANALYSIS_TIMEOUT_MS,
    SHOWN_ANALYSIS,
    browser,
    open_page,
    wait_verdict,
)
from ui_helpers import APP_LOGS

from mars_demo import texts
from mars_demo.ui.page.example_warm import WARMED_LOG
from mars_demo.ui.page.layout import load_examples

pytestmark = pytest.mark.browser

WIDTHS = [1280, 390]
WARM_TIMEOUT_S = 180

# From its start: every text the live region takes, whether the "still working" note was seen,
# and whether any of Gradio's own status (its timer "processing | 0.1s", its spinner) showed
# over the answer or the result panels.
RECORD = """() => {
  const seen = el => !!el && el.getClientRects().length > 0
    && getComputedStyle(el).visibility !== 'hidden' && getComputedStyle(el).display !== 'none';
  const rec = {live: [], still: [], gradio: [], working: []};
  const live = document.querySelector('#mars-live');
  new MutationObserver(() => rec.live.push(live.textContent)).observe(
    live, {childList: true, characterData: true, subtree: true});
  const places = '#mars-answer, #mars-verdict, #mars-progress, #mars-results';
  rec.timer = setInterval(() => {
    const note = document.querySelector('#mars-still-working');
    if (seen(note)) rec.still.push(note.textContent);
    for (const el of document.querySelectorAll(
        `:is(${places}) [data-testid="status-tracker"] :is(.progress-text, .eta-bar, svg)`)) {
      if (seen(el)) rec.gradio.push(el.textContent.trim() || el.tagName);
    }
    const working = document.querySelector('#mars-verdict .mars-verdict-working');
    if (working) rec.working.push(working.textContent);
  }, 20);
  window.__rec = rec;
}"""
STOP = ("() => { clearInterval(window.__rec.timer); const r = window.__rec;"
        " return {live: r.live, still: r.still, gradio: r.gradio, working: r.working}; }")


def wait_warm(url: str) -> None:
    """Until the app logged that its examples are made (the page serves meanwhile)."""
    said = WARMED_LOG.split(":")[0]
    deadline = time.monotonic() + WARM_TIMEOUT_S
    while not any(said in line for line in APP_LOGS.get(url, ())):
        assert time.monotonic() < deadline, "the examples were not made in the background"
        time.sleep(0.2)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_example_answers_at_once_without_gradios_timer(browser, app_url, width):  # noqa: F811
    wait_warm(app_url)  # nobody asked them: the app made them at start
    page = open_page(browser, app_url, width=width)
    try:
        for question in load_examples():
            before = page.evaluate(SHOWN_ANALYSIS)
            page.evaluate(RECORD)
            page.locator("#mars-examples").get_by_text(question, exact=True).click()
            wait_verdict(page, before)
            page.wait_for_timeout(300)  # the re-render that follows the result
            record = page.evaluate(STOP)
            assert page.inner_text("#mars-answer .mars-question") == question
            # shown whole, from the store: the progress line says so
            assert texts.EXAMPLE_KEPT in page.inner_text("#mars-progress"), question
            assert record["gradio"] == [], (question, record["gradio"][:5])
    finally:
        page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_press_is_announced_and_a_second_press_is_answered(browser, app_url, width):  # noqa: F811
    wait_warm(app_url)
    page = open_page(browser, app_url, width=width)
    try:
        # before any answer, no control that acts on one
        assert not page.locator("#mars-view-row").is_visible()
        page.fill("#mars-question textarea", f"Who wrote Hamlet, asked at {width} px?")
        before = page.evaluate(SHOWN_ANALYSIS)
        page.evaluate(RECORD)
        page.click("#mars-ask")
        # pressed again while it works: Ask takes no click, so the pointer lands on the busy
        # button (Playwright's own click would wait for it), then Enter in the question box
        page.wait_for_function("() => document.querySelector('#mars-ask').disabled",
                               timeout=10_000, polling=20)
        box = page.locator("#mars-ask").bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.focus("#mars-question textarea")
        page.keyboard.press("Enter")
        wait_verdict(page, before)
        page.wait_for_timeout(300)
        record = page.evaluate(STOP)
        said = [text for text in record["live"] if text.strip()]
        assert said and said[0] == texts.ASK_STARTED, record["live"]
        assert texts.ASK_STILL_WORKING in said, record["live"]
        assert said[-1].startswith(texts.VERDICT_DONE), record["live"]
        assert texts.ASK_STILL_WORKING in record["still"], record["still"][:3]
        assert not page.locator("#mars-still-working").is_visible()  # gone with the verdict
        # the wait said was that of analyses like this one (the examples made at start)
        assert any(re.search(r"Analyses like this one \(5 sampled answers of up to 64 tokens\)"
                             r" took about [\d.]+ s", text) for text in record["working"]), \
            record["working"][:3]
        # only one analysis ran: the second press did not start another
        assert page.inner_text("#mars-answer .mars-question").endswith(f"{width} px?")
        # with the answer, its controls
        assert page.locator("#mars-view-row").is_visible()
        assert page.locator("#mars-scoring").is_visible()
        assert page.locator("#mars-shade").is_visible()
    finally:
        page.close()


def test_the_models_line_repeats_no_word_and_the_page_links_its_sources(browser, app_url):  # noqa: F811
    page = open_page(browser, app_url)
    try:
        banner = page.inner_text("#mars-banner")
        models = next(line for line in banner.splitlines() if line.startswith("Models:"))
        assert not re.search(r"\b(\w+)\s+\1\b", models, re.I), models
        found = page.evaluate(
            "() => Object.fromEntries([...document.querySelectorAll('#mars-banner a[data-link]')]"
            ".map(a => [a.dataset.link, a.href]))")
        assert found.get("paper", "").startswith("https://arxiv.org/abs/2402.11756"), found
        assert found.get("paper-code", "").startswith("https://github.com/"), found
        # the recipe's choices: a link, not a file name to look up
        page.locator("#mars-settings").get_by_text("Settings", exact=True).click()
        link = page.locator("#mars-recipe-link a")
        link.wait_for(timeout=10_000)
        assert link.get_attribute("href") == found["paper-code"]
        assert "docs/paper-code.md" not in page.inner_text("#mars-settings")
    finally:
        page.close()
