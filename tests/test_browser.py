"""The real page in headless Chromium, against ``python app.py`` with tiny models.

Needs Debian's Chromium at /usr/bin/chromium (``apt-get install -y chromium``; ``.ci/run`` installs
it). Screenshots go to $MARS_DEMO_ARTIFACTS if set, else to a pytest temp dir.

The light-theme tests share one page: a page's first analysis is slow (Gradio loads Plotly), the
next ones take about a second.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from mars_demo import texts
from mars_demo.ui.draw import render

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
  // "rgb(r, g, b)" or "rgba(...)", or a mixed color as Chromium writes it: "color(srgb r g b)", 0..1
  const parse = c => { const n = (c.match(/[\\d.]+/g) || []).map(Number);
                       return c.startsWith('color(') ? n.map((v, i) => i < 3 ? v * 255 : v) : n; };
  const lum = ([r, g, b]) => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
                               return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const toks = [...document.querySelectorAll('#mars-answer .mars-tok')];
  const tok = toks.reduce((a, b) => parseFloat(a.dataset.weight) >= parseFloat(b.dataset.weight) ? a : b);
  let el = tok.parentElement, page = [255, 255, 255];
  while (el) { const c = parse(getComputedStyle(el).backgroundColor); if (c.length === 3 || (c.length === 4 && c[3] === 1)) { page = c.slice(0, 3); break; } el = el.parentElement; }
  const [r, g, b, alpha] = parse(getComputedStyle(tok).backgroundColor);
  const a = alpha === undefined ? 1 : alpha;
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


# The analysis id of the verdict on screen ('' for none): an analysis is this press's once its
# verdict, with a level, carries another id. The progress line's "done" state is no sign of the
# end: the re-render that follows every stored result draws it again, and a poll may miss it.
SHOWN_ANALYSIS = ("() => { const v = document.querySelector('#mars-verdict .mars-verdict');"
                  " return v && v.dataset.analysis ? v.dataset.analysis : ''; }")
NEW_VERDICT = ("(before) => { const v = document.querySelector('#mars-verdict .mars-verdict');"
               " return !!v && !!v.dataset.level && !!v.dataset.analysis"
               " && v.dataset.analysis !== before; }")


def wait_verdict(page, before: str, timeout: int = ANALYSIS_TIMEOUT_MS) -> None:
    """Wait for a verdict of an analysis other than ``before`` (:data:`SHOWN_ANALYSIS` read
    before the press) and for Ask to take presses again."""
    page.wait_for_function(NEW_VERDICT, arg=before, timeout=timeout)
    page.wait_for_function("() => !document.querySelector('#mars-ask').disabled",
                           timeout=timeout)


def ask(page, question: str | None = None) -> None:
    """Ask ``question`` (or the first example: one click asks it) and wait for the whole
    analysis on the page."""
    if question is not None:
        page.fill("#mars-question textarea", question)
    page.evaluate(RECORD_STREAMING)
    before = page.evaluate(SHOWN_ANALYSIS)
    if question is None:
        page.locator("#mars-examples").get_by_text(EXAMPLE, exact=True).click()
        page.wait_for_function(
            f"() => document.querySelector('#mars-question textarea').value === {EXAMPLE!r}"
        )
    else:
        page.click("#mars-ask")
    wait_verdict(page, before)
    for selector in (
        "#mars-answer .mars-tok",
        "#mars-verdict .mars-verdict",
        "#mars-uncertainty-table table",
        "#mars-uncertainty-plot .main-svg",
    ):
        page.wait_for_selector(selector, timeout=ANALYSIS_TIMEOUT_MS)
    # the sampled answers and their charts are folded under their summary (open_fold)


def open_fold(page, box: str, inside: str) -> None:
    """Open the folded section ``box`` (its accordion) unless ``inside`` shows already: Gradio
    draws a fold's content only once it is opened."""
    if not page.locator(inside).first.is_visible():
        page.locator(f"{box} > button").first.click()
    page.wait_for_selector(inside, timeout=ANALYSIS_TIMEOUT_MS)


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
    # in words: its chance, its share of the weight, its phrase
    assert re.search(r"the model gave it a (under |over )?[\d.]+% chance", tip), tip
    assert re.search(r"Part of \u201c.+\u201d, which the importance model rates \d\.\d\d", tip), tip
    weight = float(token.get_attribute("data-weight"))
    assert f"It carries {render.share_words(weight)} of the answer's weight under MARS" in tip, tip
    # the tooltip is the page's own (CSS), shown on hover and on keyboard focus / a tap
    assert page.locator("#mars-answer .mars-tok").first.evaluate(TOOLTIP)["display"] == "none"
    token.hover()
    shown = token.evaluate(TOOLTIP)
    assert shown["display"] == "block" and shown["position"] == "absolute", shown
    assert "importance" in shown["content"], shown
    page.keyboard.press("Escape")  # Esc hides the details of a hovered token (WCAG 1.4.13)
    assert token.evaluate(TOOLTIP)["display"] == "none"
    page.mouse.move(0, 0)
    assert token.evaluate(TOOLTIP)["display"] == "none"
    token.focus()
    assert token.evaluate(TOOLTIP)["display"] == "block"
    page.keyboard.press("Escape")  # ... and of a focused one, which keeps the focus
    assert token.evaluate(TOOLTIP)["display"] == "none"
    assert page.evaluate("() => document.activeElement.classList.contains('mars-tok')")
    page.keyboard.press("ArrowRight")  # the next token shows its details again
    assert page.locator("#mars-answer .mars-tok:focus").evaluate(TOOLTIP)["display"] == "block"
    page.keyboard.press("ArrowLeft")
    page.screenshot(path=str(shots / "light-tooltip.png"), full_page=True)
    token.blur()
    assert page.locator("#mars-download").is_visible()
    assert re.search(r"Total \d+\.\d\d s", page.inner_text("#mars-progress"))
    page.screenshot(path=str(shots / "light-mars.png"), full_page=True)

    open_fold(page, "#mars-samples-box", "#mars-samples table")
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


def test_a_scoring_option_rescores_the_answer_on_screen_and_nothing_before_it(browser,
                                                                            app_url):
    page = open_page(browser, app_url)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.locator("#mars-settings").get_by_text("Settings", exact=True).click()
    # nothing on screen: the quick check outside the queue stops it, no message, no request
    page.locator("#mars-distribution").get_by_text("min", exact=True).click()
    page.wait_for_timeout(1000)
    assert page.locator("#mars-error .mars-error").count() == 0
    assert "Re-scored" not in page.inner_text("#mars-progress")
    ask(page)
    assert "Re-scored" not in page.inner_text("#mars-progress")
    page.locator("#mars-distribution").get_by_text("max", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#mars-progress').innerText.includes("
        f"{texts.RESCORED_NOTE.format(changes='distribution max')!r})",
        timeout=ANALYSIS_TIMEOUT_MS,
    )
    assert not errors, errors
    page.close()


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
    before = page.evaluate(SHOWN_ANALYSIS)
    page.click("#mars-ask")
    page.wait_for_selector("#mars-answer .mars-streaming", timeout=ANALYSIS_TIMEOUT_MS)
    page.locator("#mars-scoring").get_by_text("Length-normalized", exact=True).click()
    wait_verdict(page, before)
    page.wait_for_selector(
        "#mars-answer .mars-answer[data-scoring='length_normalized']", timeout=ANALYSIS_TIMEOUT_MS
    )
    page.wait_for_function(f"() => JSON.stringify(({ACTIVE_COLUMN})()) === '[\"length_normalized\"]'")
    assert len(set(page.evaluate(TOKEN_COLORS))) == 1  # uniform 1/L colors, as the radio says
    page.locator("#mars-scoring").get_by_text("MARS", exact=True).click()  # as the others expect
    page.wait_for_selector("#mars-answer .mars-answer[data-scoring='mars']")


def check_readable(page, width: int) -> None:
    page.mouse.move(0, 0)  # a hovered answer shows the hovered token's details, not the focused
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


# --- keyboard, touch and phones -------------------------------------------------------------------

FOCUSED = """() => { const a = document.activeElement;
  return {tok: a && a.classList.contains('mars-tok') ? Number(a.dataset.token) : null,
          inAnswer: !!(a && a.closest('#mars-answer .mars-answer-text')),
          inSamples: !!(a && a.closest('#mars-samples'))}; }"""
# Where a token's tooltip is, against the token: its top edge and its left and right edges.
TIP_BOX = """el => { const s = getComputedStyle(el, '::after');
  const box = el.closest('.mars-answer-text').getBoundingClientRect();
  const r = el.getBoundingClientRect();
  const left = box.left + parseFloat(s.left), top = box.top + parseFloat(s.top);
  return {display: s.display, left: left, right: left + parseFloat(s.width), top: top,
          tokLeft: r.left, tokRight: r.right, tokBottom: r.bottom}; }"""


def tab_stops_in(page, selector: str) -> int:
    return page.locator(f"{selector} .mars-tok[tabindex='0']").count()


def keyboard_walk(page, shots, name: str) -> None:
    """Tab reaches the answer once, the arrow keys move between its tokens, and the focused
    token's details show right below it."""
    tokens = page.locator("#mars-answer .mars-tok")
    n = tokens.count()
    assert n >= 3
    assert tab_stops_in(page, "#mars-answer") == 1  # not one stop per token
    open_fold(page, "#mars-samples-box", "#mars-samples table")
    samples = page.locator("#mars-samples tr[data-sample]").count()
    assert samples >= 1
    assert tab_stops_in(page, "#mars-samples") == samples  # one per sampled answer
    stop = page.locator("#mars-answer .mars-tok[tabindex='0']")
    first = int(stop.get_attribute("data-token"))  # the first token, or the one last visited
    page.click("#mars-answer .mars-question")  # the keyboard starts from the question text
    page.keyboard.press("Tab")
    assert page.evaluate(FOCUSED) == {"tok": first, "inAnswer": True, "inSamples": False}
    assert stop.evaluate(TIP_BOX)["display"] == "block"
    page.keyboard.press("Home")
    assert page.evaluate(FOCUSED)["tok"] == int(tokens.nth(0).get_attribute("data-token"))
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    focused = page.evaluate(FOCUSED)
    assert focused["inAnswer"] and focused["tok"] == int(tokens.nth(2).get_attribute("data-token"))
    token = page.locator(f"#mars-answer .mars-tok[data-token='{focused['tok']}']")
    tip = token.evaluate(TIP_BOX)
    width = page.viewport_size["width"]
    assert tip["display"] == "block", tip
    assert abs(tip["top"] - tip["tokBottom"]) <= 4, tip  # right below the token
    assert tip["left"] <= tip["tokRight"] and tip["right"] >= tip["tokLeft"], tip  # beside it
    assert 0 <= tip["left"] and tip["right"] <= width, tip  # inside the window
    page.screenshot(path=str(shots / f"{name}-keyboard-tooltip.png"))
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(FOCUSED)["tok"] < focused["tok"]
    page.keyboard.press("End")
    last = page.evaluate(FOCUSED)["tok"]
    assert last == int(tokens.nth(n - 1).get_attribute("data-token"))
    tip = tokens.nth(n - 1).evaluate(TIP_BOX)
    assert tip["display"] == "block" and 0 <= tip["left"] and tip["right"] <= width, tip
    page.keyboard.press("Tab")  # one Tab leaves the answer, whichever token had the focus
    assert not page.evaluate(FOCUSED)["inAnswer"]
    assert tab_stops_in(page, "#mars-answer") == 1
    page.keyboard.press("Shift+Tab")  # and comes back to the token last visited
    assert page.evaluate(FOCUSED) == {"tok": last, "inAnswer": True, "inSamples": False}
    page.keyboard.press("Tab")


def test_one_tab_stop_for_the_answer_arrow_keys_and_details_beside_the_token(page, shots):
    ask(page)
    keyboard_walk(page, shots, "light-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(300)
    keyboard_walk(page, shots, "light-390")
    page.set_viewport_size({"width": 1280, "height": 900})


def test_a_tapped_token_shows_its_details_next_to_it_on_a_phone(browser, app_url, shots):
    page = open_page(browser, app_url, width=390, theme="dark")
    page.set_viewport_size({"width": 390, "height": 844})
    ask(page)
    tokens = page.locator("#mars-answer .mars-tok")
    target = tokens.nth(tokens.count() - 1)
    target.scroll_into_view_if_needed()
    target.click()  # a tap focuses the token
    tip = target.evaluate(TIP_BOX)
    assert tip["display"] == "block", tip
    assert abs(tip["top"] - tip["tokBottom"]) <= 4, tip
    assert tip["left"] <= tip["tokRight"] and 0 <= tip["left"] and tip["right"] <= 390, tip
    page.screenshot(path=str(shots / "dark-390-tapped-token.png"))
    keyboard_walk(page, shots, "dark-390")
    page.close()


def test_after_ask_the_answer_is_brought_into_view_on_a_phone(browser, app_url, shots):
    page = open_page(browser, app_url, width=390)
    page.set_viewport_size({"width": 390, "height": 844})
    page.fill("#mars-question textarea", EXAMPLE)
    top = page.evaluate("() => document.querySelector('#mars-answer').getBoundingClientRect().top")
    assert top > 844  # below the fold: the question, the examples and the settings come first
    page.click("#mars-ask")
    try:
        page.wait_for_selector("#mars-progress .mars-progress", timeout=10_000)
    except Exception:  # a click before the page had wired its events: click again
        page.evaluate("() => window.scrollTo(0, 0)")
        page.click("#mars-ask")
    page.wait_for_function(
        "() => { const r = document.querySelector('#mars-answer').getBoundingClientRect();"
        " return r.top >= 0 && r.top < window.innerHeight - 100; }", timeout=10_000)
    page.screenshot(path=str(shots / "light-390-after-ask.png"))
    wait_verdict(page, "")
    page.close()


def test_the_explanations_open_in_accordions(page, shots):
    if not page.locator("#mars-results").is_visible():
        ask(page)
    for box, inner in (("#mars-tokens-box", "#mars-tokens table"),
                       ("#mars-context-box", "#mars-context .mars-prompt"),
                       ("#mars-formulas-box", "#mars-formulas table")):
        assert not page.locator(inner).is_visible()  # closed at first
        page.locator(box).get_by_role("button").first.click()
        page.wait_for_selector(inner, state="visible")
    rows = page.locator("#mars-tokens tr[data-token]").count()
    shown = page.locator("#mars-answer .mars-tok").last.get_attribute("data-token")
    assert rows >= int(shown) + 1  # every token of the answer has its row (blank ones too)
    page.click("#mars-answer .mars-answer-more > summary")  # the numbers, one click away
    assert page.inner_text("#mars-answer .mars-why").startswith(("MARS finds", "MARS and"))
    question = page.inner_text("#mars-answer .mars-question")
    assert question in page.inner_text("#mars-context .mars-prompt")  # the prompt, as text
    page.screenshot(path=str(shots / "light-1280-explained.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(300)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(shots / "light-390-explained.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


# --- an example clicked while the models load ------------------------------------------------------


@pytest.fixture(scope="module")
def loading_url():
    """A page whose models stay "loading" (FakeEngine with a closed load gate), served in this
    process."""
    import threading

    from ui_helpers import FakeEngine, free_port

    from mars_demo.ui import build_demo, launch_options

    gate = threading.Event()
    demo = build_demo(FakeEngine(ready=False, load_gate=gate))
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **launch_options(demo))
    yield f"http://127.0.0.1:{port}"
    gate.set()
    demo.close()


# The Ask refused (the models still load) or, were they loaded, a verdict: either ends the wait.
ASK_ENDED = "#mars-error .mars-error, #mars-verdict .mars-verdict[data-level]"


def test_an_example_clicked_at_once_while_the_models_load_is_the_question_asked(browser,
                                                                              loading_url):
    """The example fills the box in the browser and its one click asks it: the Ask sends the
    example, even when the server answers slowly (here the direct requests, /gradio_api/run/..., get no answer
    at all, as when loading models keeps the server's cores busy; Ask goes through the queue).
    Before, the example's value came from the server (gr.Examples' load_example, a direct
    request), and an Ask clicked meanwhile sent the empty box. The models load until the test
    ends (the fake's gate has no time limit), however slow the machine."""
    for attempt in range(3):
        page = browser.new_page(viewport={"width": 390, "height": 844})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        joined: list[str] = []
        page.on("request", lambda r: joined.append(r.post_data or "")
                if "/queue/join" in r.url else None)
        held: list = []  # requests the "busy server" has not answered yet
        page.route(re.compile(r".*/gradio_api/run/.*"), lambda route: held.append(route))
        page.goto(loading_url + "/")
        example = page.locator("#mars-examples").get_by_text(EXAMPLE, exact=True)
        example.click()  # one click asks it (Ask then stays busy: its ready state is held)
        try:
            page.wait_for_selector(ASK_ENDED, timeout=30_000)
        except Exception:  # a click before the page had wired its events: click again
            example.click()
            page.wait_for_selector(ASK_ENDED, timeout=30_000)
        message = page.inner_text("#mars-error")
        assert "still loading" in message and "empty" not in message, (
            message, page.inner_text("#mars-banner"))
        assert page.input_value("#mars-question textarea") == EXAMPLE
        asked = [json.loads(data)["data"] for data in joined]
        asked = [data[0] for data in asked if len(data) >= 10]  # the Ask event's inputs
        assert asked and all(question == EXAMPLE for question in asked), asked
        assert not errors, errors
        page.close()


def test_the_examples_render_without_errors_on_every_load(browser, loading_url):
    """gr.Examples threw "Cannot read properties of undefined (reading '0')" once per example
    on about half the loads (a race in Gradio's Dataset.svelte); the page's own example buttons
    do not."""
    for attempt in range(6):
        context = browser.new_context(viewport={"width": 1280, "height": 900})  # a cold cache
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(loading_url + "/")
        page.locator("#mars-examples").get_by_text(EXAMPLE, exact=True).wait_for()
        page.wait_for_timeout(1500)
        assert page.locator("#mars-examples").get_by_text(EXAMPLE, exact=True).is_visible()
        assert not errors, (attempt, errors)
        context.close()
