"""The uncertainty chart in headless Chromium (the shared ``app.py`` of tiny models): its value
axes keep one scale from one answer to the next, at 1280 px and on a phone, and on a phone
(390 px) none of its numbers, names and ticks overlap or run out of it."""

from __future__ import annotations

import pytest
from test_browser import ask, browser, open_page, shots  # noqa: F401

pytestmark = pytest.mark.browser

OTHER = "Who wrote Hamlet?"

# The ranges of the chart's value axes (the linear ones: a category axis names, it does not
# measure), in the order Plotly keeps them.
VALUE_RANGES = """() => {
  const gd = document.querySelector('#mars-uncertainty-plot .js-plotly-plot');
  const L = gd._fullLayout;
  return Object.keys(L).filter(k => /^[xy]axis\\d*$/.test(k) && L[k].type === 'linear')
    .sort().map(k => [k, L[k].range.map(v => Math.round(v * 1e6) / 1e6)]);
}"""

# Every text of the chart (the bars' numbers, the rows' names, the ticks): pairs whose boxes
# overlap, and texts that run past the chart's edges.
CLASHES = """() => {
  const root = document.querySelector('#mars-uncertainty-plot');
  const frame = root.querySelector('.main-svg').getBoundingClientRect();
  const boxes = [...root.querySelectorAll('text.bartext, .annotation-text, .xtick text, .ytick text, .x2tick text, .y2tick text, .x3tick text, .y3tick text')]
    .map(e => ({t: e.textContent, r: e.getBoundingClientRect()}))
    .filter(b => b.r.width > 0 && b.r.height > 0);
  const clash = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i].r, b = boxes[j].r;
    if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
      clash.push([boxes[i].t, boxes[j].t]);
  }
  const out = boxes.filter(b => b.r.left < frame.left - 1 || b.r.right > frame.right + 1)
    .map(b => b.t);
  return {clash, out, numbers: root.querySelectorAll('text.bartext').length};
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_uncertainty_chart_keeps_its_scale_and_its_labels_apart(browser, app_url, shots,
                                                                     width):
    page = open_page(browser, app_url, width=width)
    try:
        ask(page)
        first = page.evaluate(VALUE_RANGES)
        seen = page.evaluate(CLASHES)
        page.screenshot(path=str(shots / f"uncertainty-chart-{width}.png"), full_page=True)
        assert seen["numbers"] == 6  # both scorings of the three measures, each with its number
        if width == 390:
            assert seen["clash"] == [] and seen["out"] == [], seen
        ask(page, OTHER)
        second = page.evaluate(VALUE_RANGES)
        assert first and first == second, (first, second)
        if width == 390:
            after = page.evaluate(CLASHES)
            assert after["clash"] == [] and after["out"] == [], after
    finally:
        page.close()
