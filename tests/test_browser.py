"""The real page in headless Chromium, against ``python app.py`` with tiny models.

Needs Debian's Chromium at /usr/bin/chromium (``apt-get install -y chromium``; ``.ci/run`` installs
it). Screenshots go to $MARS_DEMO_ARTIFACTS if set, else to a pytest temp dir.

The light-theme tests share one page: a page's first analysis is slow (Gradio loads Plotly), the
next ones take about a second.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from mars_demo import texts

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
EXAMPLE = "Which planet is known as the Red Planet?"
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2"> ${window.__xss=3} {{value}}'
ANALYSIS_TIMEOUT_MS = 120_000

pytestmark = pytest.mark.browser  # deselect with `-m "not browser"` where no Chromium exists

# JavaScript helpers run in the page.
TOKEN_COLORS = "() => [...document.querySelectorAll('#mars-answer .mars-tok')].map(e => getComputedStyle(e).backgroundColor)"
ACTIVE_COLUMN = "() => [...document.querySelectorAll('#mars-uncertainty-table th.mars-active')].map(e => e.dataset.col)"
# Contrast of the heaviest token's text over its background blended onto the page background.
TOKEN_CONTRAST = """() => {
  const parse = c => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
                               return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const toks = [...document.querySelectorAll('#mars-answer .mars-tok')];
  const tok = toks.reduce((a, b) => parseFloat(a.dataset.weight) >= parseFloat(b.dataset.weight) ? a : b);
  let el = tok.parentElement, page = [255, 255, 255];
  while (el) { const c = parse(getComputedStyle(el).backgroundColor); if (c.length === 3 || (c.length === 4 && c[3] === 1)) { page = c.slice(0, 3); break; } el = el.parentElement; }
  const [r, g, b, a] = parse(getComputedStyle(tok).backgroundColor);
  const bg = [r, g, b].map((v, i) => v * a + page[i] * (1 - a));
  const fg = parse(getComputedStyle(tok).color).slice(0, 3);
  const [l1, l2] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (l1 + 0.05) / (l2 + 0.05);
}"""


@pytest.fixture(scope="module")
def browser():
    from playwright import sync_api

    if not Path(CHROMIUM).exists():
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: apt-get install -y chromium")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("MARS_DEMO_ARTIFACTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def page(browser, app_url):
    page = open_page(browser, app_url)
    yield page
    page.close()


def open_page(browser, url: str, width: int = 1280, theme: str = ""):
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(url + (f"/?__theme={theme}" if theme else "/"))
    page.wait_for_selector("#mars-question textarea")
    page.wait_for_function(
        "() => document.querySelector('#mars-banner').innerText.includes('Models:')"
        " && !document.querySelector('#mars-banner').innerText.includes('Loading')"
    )
    return page


# Records, from before Ask is clicked, every answer text the streaming box shows (the text the
# model wrote so far; not the "Generating..." placeholder). A recorder, not a poll: the final
# answer may replace the streaming one between two polls.
RECORD_STREAMING = """() => {
  window.__streamed = [];
  const root = document.querySelector('#mars-answer');
  const record = () => {
    const box = root.querySelector('.mars-streaming .mars-answer-text');
    if (box && !box.querySelector('.mars-muted')) window.__streamed.push(box.textContent);
  };
  if (window.__streamObserver) window.__streamObserver.disconnect();
  window.__streamObserver = new MutationObserver(record);
  window.__streamObserver.observe(root, {childList: true, subtree: true, characterData: true});
}"""
STREAMED = "() => window.__streamed.filter(text => text.trim() !== '')"
# The CSS tooltip of a token: its ::after box, shown or not.
# ``right``: where its box ends (it hangs from the left of the token's answer text).
TOOLTIP = """el => { const s = getComputedStyle(el, '::after');
  const box = el.closest('.mars-answer-text').getBoundingClientRect();
  const right = box.left + parseFloat(s.left) + parseFloat(s.width);
  return {display: s.display, content: s.content, position: s.position, right: right}; }"""


def ask(page, question: str | None = None) -> None:
    """Ask ``question`` (or the first example) and wait for the whole analysis on the page."""
    if question is None:
        page.locator("#mars-examples").get_by_text(EXAMPLE, exact=True).click()
        page.wait_for_function(
            f"() => document.querySelector('#mars-question textarea').value === {EXAMPLE!r}"
        )
    else:
        page.fill("#mars-question textarea", question)
    page.evaluate(RECORD_STREAMING)
    page.click("#mars-ask")
    # The answer streams for a second or more before the result replaces it: waiting for the
    # streaming state first makes sure the "done" below belongs to this question, not the last one.
    page.wait_for_selector("#mars-answer .mars-streaming", timeout=ANALYSIS_TIMEOUT_MS)
    page.wait_for_selector(
        "#mars-progress .mars-progress[data-state='done']", timeout=ANALYSIS_TIMEOUT_MS
    )
    for selector in (
        "#mars-answer .mars-tok",
        "#mars-uncertainty-table table",
        "#mars-uncertainty-plot .main-svg",
        "#mars-clusters-plot .main-svg",
        "#mars-nli-plot .main-svg",
        "#mars-samples table",
    ):
        page.wait_for_selector(selector, timeout=ANALYSIS_TIMEOUT_MS)


def choose_importance_per_token(page) -> None:
    """Settings -> importance method "one phrase per token": with the tiny random importance model
    the trained segmentation may find a single phrase (then MARS = LN); per-token scores differ."""
    page.locator("#mars-settings").get_by_text("Settings", exact=True).click()
    page.click("#mars-importance-method input")
    page.get_by_role("option", name=texts.IMPORTANCE_CHOICES[1][0]).click()
    page.wait_for_function(
        f"() => document.querySelector('#mars-importance-method input').value === {texts.IMPORTANCE_CHOICES[1][0]!r}"
    )


def test_ask_an_example_then_flip_the_scoring(page, shots):
    choose_importance_per_token(page)
    ask(page)
    assert page.inner_text("#mars-answer .mars-question") == EXAMPLE
    assert page.evaluate(ACTIVE_COLUMN) == ["mars"]
    # the answer was shown while it was being written, before the colored one replaced it
    streamed = page.evaluate(STREAMED)
    final_text = page.inner_text("#mars-answer .mars-answer-text")
    assert streamed, "no partial answer was streamed"
    assert any(text.strip() in final_text for text in streamed), (streamed, final_text)
    mars_colors = page.evaluate(TOKEN_COLORS)
    assert len(set(mars_colors)) > 1  # one phrase per token: MARS weights differ
    assert page.locator("#mars-answer .mars-phrase").count() >= 1
    token = page.locator("#mars-answer .mars-phrase .mars-tok").first
    tip = token.get_attribute("data-tip")
    assert re.search(r"probability \d\.\d{3}", tip), tip
    assert re.search(r"phrase '.+': importance \d+\.\d{3}, phrase weight \d\.\d{3}", tip), tip
    weight = float(token.get_attribute("data-weight"))
    assert f"weight {weight:.3f} (MARS)" in tip, tip
    # the tooltip is the page's own (CSS), shown on hover and on keyboard focus / a tap
    assert page.locator("#mars-answer .mars-tok").first.evaluate(TOOLTIP)["display"] == "none"
    token.hover()
    shown = token.evaluate(TOOLTIP)
    assert shown["display"] == "block" and shown["position"] == "absolute", shown
    assert "importance" in shown["content"], shown
    page.mouse.move(0, 0)
    assert token.evaluate(TOOLTIP)["display"] == "none"
    token.focus()
    assert token.evaluate(TOOLTIP)["display"] == "block"
    page.screenshot(path=str(shots / "light-tooltip.png"), full_page=True)
    token.blur()
    assert page.locator("#mars-download").is_visible()
    assert re.search(r"Total \d+\.\d\d s", page.inner_text("#mars-progress"))
    page.screenshot(path=str(shots / "light-mars.png"), full_page=True)

    page.locator("#mars-scoring").get_by_text("Length-normalized", exact=True).click()
    page.wait_for_selector("#mars-answer .mars-answer[data-scoring='length_normalized']")
    ln_colors = page.evaluate(TOKEN_COLORS)
    assert len(set(ln_colors)) == 1  # every token weighs 1/L
    assert ln_colors != mars_colors
    assert page.evaluate(ACTIVE_COLUMN) == ["length_normalized"]
    assert page.locator("#mars-samples td.mars-active[data-col='length_normalized']").count() >= 1
    page.screenshot(path=str(shots / "light-length-normalized.png"), full_page=True)

    page.locator("#mars-scoring").get_by_text("MARS", exact=True).click()
    page.wait_for_selector("#mars-answer .mars-answer[data-scoring='mars']")
    assert page.evaluate(TOKEN_COLORS) == mars_colors


def test_html_in_a_question_is_shown_as_text_and_runs_nothing(page, shots):
    ask(page, XSS)
    shown = page.inner_text("#mars-answer .mars-question")
    assert "<script>window.__xss=1</script>" in shown and 'onerror="window.__xss=2"' in shown
    assert "${window.__xss=3}" in shown and "{{value}}" in shown
    assert page.evaluate("() => typeof window.__xss") == "undefined"
    assert page.locator("#mars-answer img, #mars-answer script").count() == 0
    page.screenshot(path=str(shots / "escaped-question.png"), full_page=True)


def test_empty_question_shows_a_message_and_the_page_keeps_working(page):
    page.fill("#mars-question textarea", "")
    page.click("#mars-ask")
    page.wait_for_selector("#mars-error .mars-error")
    assert "question is empty" in page.inner_text("#mars-error")
    ask(page, EXAMPLE)
    assert not page.locator("#mars-error .mars-error").is_visible()


def test_the_scoring_flipped_while_the_answer_streams_wins(page):
    """The final render follows the toggle as it is when the analysis ends, not as it was when
    Ask was clicked."""
    page.fill("#mars-question textarea", EXAMPLE)
    page.click("#mars-ask")
    page.wait_for_selector("#mars-answer .mars-streaming", timeout=ANALYSIS_TIMEOUT_MS)
    page.locator("#mars-scoring").get_by_text("Length-normalized", exact=True).click()
    page.wait_for_selector(
        "#mars-progress .mars-progress[data-state='done']", timeout=ANALYSIS_TIMEOUT_MS
    )
    page.wait_for_selector(
        "#mars-answer .mars-answer[data-scoring='length_normalized']", timeout=ANALYSIS_TIMEOUT_MS
    )
    page.wait_for_function(f"() => JSON.stringify(({ACTIVE_COLUMN})()) === '[\"length_normalized\"]'")
    assert len(set(page.evaluate(TOKEN_COLORS))) == 1  # uniform 1/L colors, as the radio says
    page.locator("#mars-scoring").get_by_text("MARS", exact=True).click()  # as the others expect
    page.wait_for_selector("#mars-answer .mars-answer[data-scoring='mars']")


def check_readable(page, width: int) -> None:
    assert page.evaluate(TOKEN_CONTRAST) >= 4.5
    assert (
        page.evaluate("() => document.documentElement.scrollWidth") <= width
    )  # no sideways scrolling
    last = page.locator("#mars-answer .mars-tok").last  # rightmost: its tooltip must fit too
    last.evaluate("el => el.scrollIntoView({block: 'center'})")  # the tooltip below it too
    last.focus()
    tip = last.evaluate(TOOLTIP)
    assert tip["display"] == "block" and 0 < tip["right"] <= width, tip  # inside the window
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width


def test_readable_in_the_light_theme_wide_and_narrow(page, shots):
    assert page.locator("#mars-results").is_visible()  # the last test's analysis
    check_readable(page, 1280)
    page.locator("#mars-answer .mars-tok").last.blur()
    page.screenshot(path=str(shots / "light-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    page.wait_for_timeout(500)  # let the plots resize
    check_readable(page, 390)
    page.screenshot(path=str(shots / "light-390-tooltip.png"))  # the focused token's tooltip
    page.locator("#mars-answer .mars-tok").last.blur()
    page.screenshot(path=str(shots / "light-390.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_readable_in_the_dark_theme(browser, app_url, shots):
    page = open_page(browser, app_url, theme="dark")
    assert page.evaluate("() => document.body.classList.contains('dark')")
    ask(page)
    check_readable(page, 1280)
    page.screenshot(path=str(shots / "dark-1280-tooltip.png"))
    page.locator("#mars-answer .mars-tok").last.blur()
    page.screenshot(path=str(shots / "dark-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(500)
    check_readable(page, 390)
    page.locator("#mars-answer .mars-tok").last.blur()
    page.screenshot(path=str(shots / "dark-390.png"), full_page=True)
    page.close()
