"""The README's screenshot shows today's page.

``scripts/readme_screenshot.py`` writes, beside ``assets/screenshot.png``, the state it shot
(``assets/screenshot.json``: the analysis the page showed, from its own download, and the page's
main texts as the browser had them). Here today's page renders that same analysis, its verdict
computed again by today's code as the engine would, and its main texts must be those of the
image: a change of the page's words (the verdict, the table's rows, the Models line) fails here
until the screenshot is made again (``python scripts/readme_screenshot.py``).
"""

from __future__ import annotations

import json
import re
import struct
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

from ui_helpers import FakeEngine

from mars_demo import texts
from mars_demo.result import AnalysisResult
from mars_demo.ui.guards.redact import Redactor
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.work.host import EngineHost
from mars_demo.verdict import verdict

ROOT = Path(__file__).resolve().parents[1]
IMAGE = ROOT / "assets" / "screenshot.png"
STATE = IMAGE.with_suffix(".json")


class _Texts(HTMLParser):
    """The text content (as the browser's ``textContent``, spaces squeezed) of every element
    whose class or data-col is ``wanted``."""

    def __init__(self, wanted: str) -> None:
        super().__init__(convert_charrefs=True)
        self.wanted, self.found, self._open = wanted, [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for depth in self._open:
            depth[0] += 1
        if self.wanted in (attrs.get("class") or "").split() or attrs.get("data-col") == self.wanted:
            self._open.append([1, []])
            self.found.append(self._open[-1][1])

    def handle_endtag(self, tag):
        for depth in self._open:
            depth[0] -= 1
        self._open = [d for d in self._open if d[0] > 0]

    def handle_data(self, data):
        for _, parts in self._open:
            parts.append(data)


def texts_of(html: str, wanted: str) -> list[str]:
    parser = _Texts(wanted)
    parser.feed(html)
    return [re.sub(r"\s+", " ", unescape("".join(parts))).strip() for parts in parser.found]


def test_the_readme_screenshot_shows_todays_page():
    assert "](assets/screenshot.png)" in (ROOT / "README.md").read_text(encoding="utf-8")
    state = json.loads(STATE.read_text(encoding="utf-8"))
    with IMAGE.open("rb") as f:  # PNG: the width is the IHDR chunk's first field
        width = struct.unpack(">I", f.read(24)[16:20])[0]
    assert width == state["width"]
    result = AnalysisResult.from_dict(state["analysis"])
    assert result.question == state["question"]
    result.verdict = verdict(result)  # today's verdict on it (the screenshot's page cites no run)
    shown = Controller(EngineHost(FakeEngine())).show(result, "mars")
    said = state["texts"]
    assert texts_of(shown["verdict"], "mars-verdict-line") == [said["verdict"]]
    assert texts_of(shown["answer"], "mars-answer-text") == [said["answer"]]
    assert texts_of(shown["uncertainty_table"], "measure")[1:] == said["rows"]  # [0]: its header
    # the Models line, by the names today's banner gives the models the analysis names
    names = {key: Redactor().page_name(key, result.settings[key])
             for key in ("llm", "importance", "nli")}
    models = re.sub(r"<[^>]+>", "", texts.BANNER_MODELS.format(
        **names, optional="", device="cpu", quant=""))
    assert said["models"] == models
