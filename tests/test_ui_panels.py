"""The page's result panels are one declared list (mars_demo/ui/page/panels.py): a probe panel and a
probe folded section added to it reach the layout, the outputs of Ask and of the scoring toggle,
and the controller's rendering, with nothing else changed."""

from __future__ import annotations

import pytest
from ui_helpers import FakeEngine, make_result

from mars_demo.ui.page import controller as controller_module
from mars_demo.ui.page import panels
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.page.layout import build_demo
from mars_demo.ui.work.host import EngineHost


@pytest.fixture
def probe(monkeypatch):
    """A rescored panel in the uncertainty section, and a folded section with a static and a
    rendered panel, added to the page's lists for this test only."""
    section = panels.Section("probe", title="Probe", folded=True,
                             summary=lambda s: f"{len(s.result.samples)} samples",
                             elem_id="mars-probe-box")
    added = (
        panels.Panel("probe_rescored", "html", "mars-probe-rescored",
                     lambda s: f"<p>scored with {s.scoring}</p>", rescored=True,
                     section="uncertainty"),
        panels.Panel("probe_once", "html", "mars-probe-once",
                     lambda s: f"<p>{len(s.result.greedy.tokens)} tokens</p>", rescored=False,
                     section="probe"),
        panels.Panel("probe_static", "html", "mars-probe-static", None, rescored=False,
                     section="probe", value="<p>always the same</p>"),
    )
    monkeypatch.setattr(panels, "SECTIONS", panels.SECTIONS + (section,))
    monkeypatch.setattr(panels, "PANELS", panels.PANELS + added)
    return section


def component_ids(demo) -> dict[str, int]:
    return {block.elem_id: key for key, block in demo.blocks.items()
            if getattr(block, "elem_id", None)}


def event(demo, api_name: str):
    return next(fn for fn in demo.fns.values() if fn.api_name == api_name)


def test_a_probe_panel_reaches_the_layout_the_events_and_the_renderers(probe):
    demo = build_demo(FakeEngine())
    ids = component_ids(demo)
    for elem_id in ("mars-probe-rescored", "mars-probe-once", "mars-probe-static",
                    "mars-probe-box"):
        assert elem_id in ids, elem_id
    assert demo.blocks[ids["mars-probe-static"]].value == "<p>always the same</p>"
    asked = {block._id for block in event(demo, "ask").outputs}
    toggled = {block._id for block in event(demo, "show_scoring").outputs}
    assert {ids["mars-probe-rescored"], ids["mars-probe-once"], ids["mars-probe-box"]} <= asked
    assert ids["mars-probe-rescored"] in toggled and ids["mars-probe-once"] not in toggled
    assert ids["mars-probe-static"] not in asked  # nothing to render: not an output

    page = Controller(EngineHost(FakeEngine()))
    result = make_result()
    shown = page.show(result, "mars")
    assert shown["probe_rescored"] == "<p>scored with mars</p>"
    assert shown["probe_once"] == f"<p>{len(result.greedy.tokens)} tokens</p>"
    assert shown[probe.output].label == f"Probe: {len(result.samples)} samples"
    again = page.show_scoring(result, "length_normalized")
    assert again["probe_rescored"] == "<p>scored with length_normalized</p>"
    assert "probe_once" not in again and probe.output not in again
    assert set(controller_module.ask_outputs()) >= {"probe_rescored", "probe_once",
                                                    probe.output}


def test_every_declared_panel_is_an_output_with_a_stable_id():
    keys = [p.key for p in panels.PANELS]
    assert len(keys) == len(set(keys))  # one entry each
    ids = [p.elem_id for p in panels.PANELS]
    assert len(ids) == len(set(ids)) and all(i.startswith("mars-") for i in ids)
    sections = {s.key for s in panels.SECTIONS}
    assert all(p.section in sections for p in panels.PANELS)
    assert {p.key for p in panels.PANELS if p.render} <= set(controller_module.ASK_OUTPUTS)
    assert set(panels.rescored_outputs()) == set(controller_module.SCORING_VIEW_OUTPUTS) - {"error"}
    with pytest.raises(ValueError, match="unknown kind"):
        panels.component(panels.Panel("x", "table", "mars-x", None, False, "answer"))


def test_a_folds_summary_of_a_long_phrase_stays_short():
    """A phrase without spaces (a random model's answer) would widen a phone's page in the
    fold's label: the summary cuts it."""
    from ui_helpers import make_answer

    from mars_demo.ui.draw import captions

    long = "Ainentstonic" + "ars" * 40
    result = make_result(greedy=make_answer([long], [-0.1], [([0], 1.0)]))
    summary = captions.phrases_summary(result)
    assert "…" in summary and len(summary) < 80 and long not in summary
    assert captions.phrases_summary(make_result()).endswith('"Mars." (weight 0.95)')
