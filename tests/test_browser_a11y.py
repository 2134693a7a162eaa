"""The page as a visitor meets it, checked by axe-core (``axe-playwright-python``) in headless
Chromium: no serious or critical WCAG 2.2 AA violation in any state (before a question, after an
answer, every section open, an evaluation run shown), at 1280 and 390 px, in the light and the
dark theme; and what the page promises its visitors: a verdict first, Ask busy while it works,
the answer within 2 Tabs, the analysis announced, no host instructions, the verdict, the colored
answer and the uncertainty table in the first 1.5 screens at 1280x800.

A public page (``SPACE_ID`` set) of the trained tiny models, with an evaluation run offered
(``--runs``). Screenshots of every state go to $MARS_DEMO_ARTIFACTS if set (``a11y-*.png``).
"""

from __future__ import annotations

import re
import shutil

import pytest
from test_browser import ANALYSIS_TIMEOUT_MS, browser, shots, wait_verdict  # noqa: F401  (fixtures)
from test_eval_view import full_run, given_run  # noqa: F401  (fixtures)
from ui_helpers import running_app

pytestmark = pytest.mark.browser

WIDTHS = {1280: 800, 390: 844}  # the viewport of a laptop and of a phone
THEMES = ("light", "dark")
#: WCAG 2.0, 2.1 and 2.2 A and AA: the rules the page must pass
AXE_OPTIONS = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa",
                                                      "wcag22aa"]},
               "resultTypes": ["violations"]}
BLOCKING = ("serious", "critical")
QUESTION = "Who wrote Hamlet?"
#: a host instruction in the page's own text (a flag, a command, an environment variable)
HOST_WORDS = r"(^|\s)--[a-z][a-z0-9-]+|\bpython\b|\bapp\.py\b|MARS_DEMO_"
SECTIONS = ("#mars-settings", "#mars-methods-box", "#mars-phrases-box", "#mars-samples-box",
            "#mars-tokens-box", "#mars-context-box", "#mars-formulas-box", "#mars-own")
#: the page's dropdowns (the settings' importance method, the Evaluation view's runs): axe runs
#: with each one's list of choices open
DROPDOWNS = ("#mars-importance-method", "#mars-eval-run")
#: every fold (Gradio's accordions) names itself without its arrow and says whether it is open;
#: its name as the accessibility tree gives it comes from :func:`fold_names`
FOLDS = """() => [...document.querySelectorAll('button.label-wrap')].map(b => ({
  expanded: b.getAttribute('aria-expanded'), open: b.classList.contains('open'),
  hidden: [...b.querySelectorAll('.icon')].every(i => i.getAttribute('aria-hidden') === 'true')}))"""


def fold_names(page) -> list[str]:
    """Each fold's button as the accessibility tree reads it ('- button "Settings" [expanded]',
    a long one quoted as YAML: '- 'button "..." [expanded]''):
    the accessible name leaves out what is aria-hidden, which the text on screen (innerText)
    keeps."""
    folds = page.locator("button.label-wrap")
    return [folds.nth(i).aria_snapshot() for i in range(folds.count())]


@pytest.fixture(scope="module")
def public_url(trained_tiny_models, given_run, tmp_path_factory):  # noqa: F811
    runs = tmp_path_factory.mktemp("a11y-runs")
    shutil.copytree(given_run, runs / "facts")
    with running_app(trained_tiny_models, "--runs", str(runs),
                     env={"SPACE_ID": "mars-demo/a11y"}) as url:
        yield url


def serious(page) -> list[str]:
    """axe's serious and critical violations on the page as it is now: "rule: where" lines."""
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page, options=AXE_OPTIONS).response["violations"]
    return [f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes'][:5]]} "
            f"{v['nodes'][0].get('failureSummary', '')[:200]}"
            for v in found if v["impact"] in BLOCKING]


def check_state(page, state: str, theme: str, shots, results: dict,  # noqa: F811
                dropdowns: tuple[str, ...] = ()) -> None:
    """axe and a screenshot of ``state`` at both widths (and with each of ``dropdowns`` open),
    and no host instruction in its text."""
    for width, height in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(400)  # the layout settles (the charts redraw)
        page.screenshot(path=str(shots / f"a11y-{state}-{width}-{theme}.png"), full_page=True)
        results[f"{state} {width} {theme}"] = serious(page)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width, state
        for dropdown in dropdowns:
            page.locator(f"{dropdown} input").first.scroll_into_view_if_needed()
            page.locator(f"{dropdown} input").first.click()
            page.wait_for_selector(f'{dropdown} ul[role="listbox"]')
            page.wait_for_function(f"""() => document.querySelector('{dropdown} ul[role="listbox"]')
                                       .getAttribute('aria-label')""")
            # the list fades in: axe reads a colour half faded in as too little contrast (a
            # loaded machine caught it mid-fade at 390 px), so it reads the list once it is in
            page.wait_for_function(f"""() => document.querySelector('{dropdown} ul[role="listbox"]')
                .getAnimations({{subtree: true}}).every(a => a.playState !== 'running')""")
            results[f"{state} {width} {theme} {dropdown} open"] = serious(page)
            page.keyboard.press("Escape")
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
    text = page.inner_text("body")
    assert not re.search(HOST_WORDS, text), re.search(HOST_WORDS, text)


def wait_done(page) -> None:
    """The first analysis of a page shown: a verdict with a level, Ask ready, the chart drawn."""
    wait_verdict(page, "")
    page.wait_for_selector("#mars-uncertainty-plot .main-svg", timeout=ANALYSIS_TIMEOUT_MS)


@pytest.mark.parametrize("theme", THEMES)
def test_every_state_at_both_widths_has_no_serious_violation(browser, public_url, shots,  # noqa: F811
                                                             theme):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{public_url}/?__theme={theme}")
    page.wait_for_selector("#mars-question textarea")
    page.wait_for_function("() => document.querySelector('#mars-banner').innerText"
                           ".includes('Models:')")
    results: dict[str, list[str]] = {}
    check_state(page, "before", theme, shots, results)

    # an answer, asked with the keyboard alone
    page.set_viewport_size({"width": 1280, "height": 800})
    page.focus("#mars-question textarea")
    page.keyboard.type(QUESTION)
    page.keyboard.press("Enter")
    # Ask says it is working and takes no click until the analysis has ended
    page.wait_for_function("() => document.querySelector('#mars-ask').disabled",
                           timeout=ANALYSIS_TIMEOUT_MS)
    assert page.inner_text("#mars-ask") == "Working…"
    wait_done(page)
    page.wait_for_function("() => !document.querySelector('#mars-ask').disabled")
    verdict = page.inner_text("#mars-verdict .mars-verdict-line")
    assert re.match(r"(Consistent|Mostly consistent|Unsure|Too few samples)\s*:?\s+\S", verdict)
    # one live region says the analysis is done, with the verdict
    live = page.evaluate("() => document.querySelector('#mars-live').textContent")
    line = page.evaluate("() => document.querySelector('#mars-verdict .mars-verdict-line')"
                         ".textContent")
    assert live.startswith(f"Analysis done. {line}"), (live, line)
    # from the question box, the answer is at most 2 Tabs away (Ask, then the skip link)
    for _ in range(2):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.classList.contains('mars-skip')"):
            page.keyboard.press("Enter")
            break
    assert page.evaluate("() => !!document.activeElement.closest('#mars-verdict, #mars-answer')")
    check_state(page, "answer", theme, shots, results)

    # every section open (the folded ones, the details inside them)
    page.set_viewport_size({"width": 1280, "height": 800})
    for selector in SECTIONS:
        page.locator(f"{selector} > button").first.click()
    page.evaluate("() => document.querySelectorAll('#mars-results details, #mars-answer details,"
                  " #mars-verdict details').forEach(d => { d.open = true; })")
    page.wait_for_selector("#mars-nli-plot .main-svg", timeout=ANALYSIS_TIMEOUT_MS)
    check_state(page, "open", theme, shots, results, dropdowns=DROPDOWNS[:1])

    # an evaluation run shown
    page.set_viewport_size({"width": 1280, "height": 800})
    page.locator("#mars-eval > button").first.click()
    page.click("#mars-eval-show")
    page.wait_for_selector("#mars-eval-table table", timeout=60_000)
    page.wait_for_selector("#mars-eval-roc .main-svg", timeout=60_000)
    check_state(page, "run", theme, shots, results, dropdowns=DROPDOWNS)
    folds = page.evaluate(FOLDS)
    assert folds and all(f["expanded"] == str(f["open"]).lower() and f["hidden"]
                         for f in folds), folds
    named = fold_names(page)
    assert len(named) == len(folds) and all(
        "button \"" in name and "▼" not in name
        and ("[expanded]" in name) == f["open"] for name, f in zip(named, folds)), named
    # the headings in order: one h1, then no level skipped
    levels = page.evaluate("() => [...document.querySelectorAll('h1, h2, h3, h4')]"
                           ".map(h => Number(h.tagName[1]))")
    assert levels[0] == 1 and levels.count(1) == 1, levels
    assert all(b <= a + 1 for a, b in zip(levels, levels[1:])), levels
    assert levels.count(2) >= 4, levels
    page.close()
    assert not any(results.values()), {k: v for k, v in results.items() if v}


def test_the_verdict_the_answer_and_the_table_come_first(browser, public_url, shots):  # noqa: F811
    """After one answer at 1280x800: the whole verdict in the first screen; the colored answer
    and the toggle within the first 1.5 screens, the uncertainty table starting there and whole
    within two (under each value, its place among the served run's answers takes a line of its
    own); the rest one click away, each fold naming what it holds; the page far shorter than
    the 4,350 px it was."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(public_url)
    page.wait_for_selector("#mars-question textarea")
    page.click("#mars-examples .mars-example >> nth=0")  # one click asks it
    wait_done(page)
    page.evaluate("() => window.scrollTo(0, 0)")
    boxes = page.evaluate("""() => Object.fromEntries(
        ['#mars-verdict .mars-verdict', '#mars-answer .mars-answer-text', '#mars-scoring',
         '#mars-uncertainty-table table'].map(s => { const r = document.querySelector(s)
         .getBoundingClientRect(); return [s, [r.top + window.scrollY, r.bottom + window.scrollY]]; }))""")
    table = boxes.pop("#mars-uncertainty-table table")
    assert max(bottom for _, bottom in boxes.values()) <= 1.5 * 800, boxes
    # the trained tiny models' one warning, that they are toys, sits between the answer and the
    # table: a page of real models has no warnings box here, so the table is placed without it
    items = page.locator("#mars-warnings li").all_inner_texts()
    assert items and all(item.startswith("Toy model") for item in items), items
    toy = page.evaluate("() => document.querySelector('#mars-warnings').getBoundingClientRect()"
                        ".height")
    table = [table[0] - toy, table[1] - toy]
    assert table[0] <= 1.5 * 800 and table[1] <= 2 * 800, table
    height = page.evaluate("() => document.documentElement.scrollHeight")
    assert height < 2800, height  # the verdict's level record and the values' places included
    # the whole verdict in the first screen
    assert page.evaluate("() => document.querySelector('#mars-verdict .mars-verdict')"
                         ".getBoundingClientRect().bottom") <= 800
    for box in ("#mars-methods-box", "#mars-phrases-box", "#mars-samples-box"):
        label = page.inner_text(f"{box} > button")
        assert ":" in label and not page.locator(f"{box} .mars-table").first.is_visible(), label
    page.screenshot(path=str(shots / "a11y-first-screens-1280.png"))
    page.close()


def test_reduced_motion_is_honoured(browser, public_url):  # noqa: F811
    """With prefers-reduced-motion, the streaming answer's cursor does not blink and nothing
    slides: the page's animations and transitions are off."""
    page = browser.new_page(viewport={"width": 390, "height": 844}, reduced_motion="reduce")
    page.goto(public_url)
    page.wait_for_selector("#mars-question textarea")
    page.fill("#mars-question textarea", QUESTION)
    page.click("#mars-ask")
    page.wait_for_selector("#mars-answer .mars-cursor")  # at the press, before the server answers
    cursor = page.evaluate("() => getComputedStyle(document.querySelector("
                           "'#mars-answer .mars-cursor'), '::after').animationName")
    assert cursor == "none", cursor
    # a progress fill where the page draws one: Gradio keeps the page's style rules inside an
    # @media block for its own container only (a probe on <body> would read the plain rule)
    fill = page.evaluate("() => { const d = document.createElement('div'); "
                         "d.className = 'mars-progress-fill'; "
                         "document.querySelector('#mars-progress').appendChild(d); "
                         "const t = getComputedStyle(d).transitionDuration; d.remove(); return t; }")
    assert float(fill.rstrip("s")) < 0.01, fill
    wait_done(page)
    page.close()
