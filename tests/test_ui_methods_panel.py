"""The page's "Compared with other methods" panel: one row per method of the result,
its values, and where each falls among a loaded run's answers; hand-made results and runs."""

from __future__ import annotations

import json
import re

import pytest
from ui_helpers import FakeEngine, make_result

from mars_demo import texts
from mars_demo.methods import METHODS
from mars_demo.ui.draw import methods_panel
from mars_demo.ui.draw.methods_panel import (
    IN_THE_TABLE,
    Reference,
    load_reference,
    methods_panel_html,
    place,
    reference_folder,
)
from mars_demo.ui.draw.render import esc
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.work.host import EngineHost

#: every registered method, values made up: scored ones get two, the others one
VALUES = {
    m.id: ({"length_normalized": 0.4 + k / 100, "mars": 0.9 + k / 100} if m.scored
           else {"value": 1.0 + k})
    for k, m in enumerate(METHODS.values())
}


def result_with(methods: dict) -> object:
    result = make_result()
    result.methods = {k: dict(v) for k, v in methods.items()}
    return result


def rows(html: str) -> dict[str, str]:
    """{method id: its row's HTML}, in page order (dicts keep it)."""
    return dict(re.findall(r'<tr data-method="([^"]+)">(.*?)</tr>', html))


def cell(row: str, col: str) -> str:
    match = re.search(rf'<td data-col="{col}"[^>]*>(.*?)</td>', row)
    assert match, (col, row)
    return match.group(1)


def write_run(folder, records: list[dict], n: int | None = None, data: str = "hand.jsonl",
              models: dict | None = None, settings: dict | None = None):
    """A finished run by hand: run.json, report.json and results.jsonl (each record's
    ``methods`` given; with ``settings``, each holds an analysis that recorded them)."""
    models = models if models is not None else {
        "llm": "tiny-llm", "importance": "tiny-imp", "nli": "tiny-nli"}
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"version": 1, "data": data}))
    (folder / "report.json").write_text(json.dumps({
        "data": data, "n": len(records) if n is None else n, "models": models,
        "metrics": {"auroc": {"semantic_entropy": {"mars": {"value": 0.7}}}}}))
    lines = []
    for k, methods in enumerate(records):
        se = methods.get("semantic_entropy", {"length_normalized": 1.0, "mars": 1.0})
        line = {"index": k, "correct": k % 2 == 0,
                "uncertainty": {"confidence": {"length_normalized": 0.1, "mars": 0.2},
                                "semantic_entropy": se}}
        if methods:
            line["methods"] = methods
        if settings is not None:
            line["analysis"] = {"settings": settings}
        lines.append(json.dumps(line) + "\n")
    (folder / "results.jsonl").write_text("".join(lines))
    return folder


# --- where a value falls ------------------------------------------------------------------------


def test_place_counts_strictly_lower_values_and_ties_apart():
    where = place([0.5, 1.0, 1.0, 2.0], 1.0)
    assert (where.lower, where.equal, where.higher) == (1, 2, 1)
    assert where.below == 0.25 and where.ties == 0.5
    assert place([0.5, 1.0], 3.0).below == 1.0  # above every answer
    assert place([0.5, 1.0], 0.1).below == 0.0
    # the same value computed twice, differing in its last bits, is a tie, not lower
    where = place([0.0, 1.4686870114880517e-16, 1e-6], 0.0)
    assert (where.lower, where.equal, where.higher) == (0, 2, 1)
    assert place([1.0, 1.0 + 1e-9], 1.0 + 1e-9).lower == 1
    with pytest.raises(ValueError):
        place([], 1.0)


def test_shares_are_whole_percents_that_never_round_to_all_or_none():
    assert [methods_panel.whole_percent(x) for x in (0.0, 0.004, 0.583, 0.995, 1.0)] == [
        "0%", "<1%", "58%", "99%", "100%"]


# --- without a run ------------------------------------------------------------------------------


def test_every_method_is_a_row_in_registry_order_with_its_values():
    result = result_with(dict(reversed(list(VALUES.items()))))  # order given: reversed
    html = methods_panel_html(result, "mars")
    found = rows(html)
    # in registry order, less the rows the uncertainty table above shows already
    assert list(found) == [m for m in METHODS if m not in IN_THE_TABLE]
    assert "semantic_entropy" not in found and "sentence_sar" in found
    for method_id, row in found.items():
        method = METHODS[method_id]
        assert esc(method.label) in row and esc(method.explain) in row
        if method.scored:
            assert "0." in cell(row, "length_normalized")
            for variant in ("length_normalized", "mars"):
                shown = f"{VALUES[method_id][variant]:.3f}"
                assert f'mars-method-value">{shown}<' in cell(row, variant)
            assert cell(row, "value") == ""
        else:
            shown = f"{VALUES[method_id]['value']:.3f}"
            assert f'mars-method-value">{shown}<' in cell(row, "value")
            assert cell(row, "mars") == "" and cell(row, "length_normalized") == ""
    assert esc(texts.METHODS_NOT_COMPARABLE) in html
    assert "Higher = less trustworthy" in html
    assert "less trustworthy than" not in html


def test_the_active_scoring_column_is_highlighted():
    result = result_with(VALUES)
    for scoring, other in (("mars", "length_normalized"), ("length_normalized", "mars")):
        html = methods_panel_html(result, scoring)
        assert f'<th scope="col" data-col="{scoring}" class="mars-active">' in html
        assert f'<th scope="col" data-col="{other}">' in html
        row = rows(html)["sentence_sar"]
        assert re.search(rf'<td data-col="{scoring}" data-label="[^"]+" class="mars-active"', row)


def test_negative_values_use_a_true_minus_and_a_result_without_methods_says_so():
    html = methods_panel_html(result_with({"sentence_sar": {"length_normalized": -0.25,
                                                            "mars": 0.5}}), "mars")
    assert "−0.250" in html and "-0.250" not in html
    assert esc(texts.METHODS_NONE) in methods_panel_html(result_with({}), "mars")
    # the table's own rows are not repeated: a result with only those has nothing else to show
    only = result_with({"semantic_entropy": {"length_normalized": 1.0, "mars": 0.5},
                        "semantic_entropy_normalized": {"length_normalized": 0.3, "mars": 0.2}})
    assert esc(texts.METHODS_NONE) in methods_panel_html(only, "mars")


def test_a_column_no_method_fills_is_left_out():
    html = methods_panel_html(result_with({"eigv": {"value": 1.0}, "num_sets": {"value": 2.0}}),
                              "mars")
    assert 'data-col="value"' in html and 'data-col="mars"' not in html
    assert 'data-col="length_normalized"' not in html


def test_visitor_text_is_escaped():
    """Method ids of a loaded JSON, the run's name and data: shown as text, never as HTML."""
    result = result_with({'<img src=x onerror="alert(1)">': {"value": 1.0}, **VALUES})
    run = methods_panel.RunValues("<b>run</b>", "<script>x</script>", 3, values={})
    html = methods_panel_html(result, "mars", Reference(run, note="<i>note</i>"))
    assert "<img" not in html and "<script" not in html and "<b>run" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert "&lt;script&gt;" in html and "&lt;i&gt;note" in html
    assert list(rows(html))[-1].startswith("&lt;img")  # unknown ids after the registry's


# --- with a run ---------------------------------------------------------------------------------


def test_each_value_is_placed_among_the_run_answers(tmp_path):
    eigv = [0.5, 1.0, 1.0, 2.0]
    se_mars = [0.1, 0.2, 0.3, 0.9]
    records = [{"eigv": {"value": v},
                "sentence_sar": {"length_normalized": 5.0, "mars": m}}
               for v, m in zip(eigv, se_mars)]
    reference = load_reference(write_run(tmp_path / "facts-run", records))
    assert reference.run is not None and reference.run.n == 4
    result = result_with({"eigv": {"value": 1.0},
                          "sentence_sar": {"length_normalized": 0.3, "mars": 0.85},
                          "num_sets": {"value": 2.0}})
    html = methods_panel_html(result, "mars", reference)
    found = rows(html)
    # 1 of 4 lower (25%), 2 equal (50%): ties are not counted as lower
    assert ("less trustworthy than 25% of the run&#x27;s answers; as high as 50% of them"
            in cell(found["eigv"], "value"))
    assert 'title="1 of the run&#x27;s 4 answers have a lower value, 2 the same value' in found["eigv"]
    assert "less trustworthy than 75% of the run&#x27;s answers<" in cell(found["sentence_sar"], "mars")
    # none lower: said from the other side, never "less trustworthy than 0%"
    assert "more trustworthy than all of the run&#x27;s answers<" in cell(
        found["sentence_sar"], "length_normalized")
    assert "than 0%" not in html and "none of" not in html
    # a method the run lacks: no place, and the row says so
    assert "less trustworthy" not in found["num_sets"]
    assert esc(texts.METHODS_ABSENT) in cell(found["num_sets"], "value")
    assert esc(texts.METHODS_NOT_COMPARABLE) not in html
    assert '"facts-run"' in html.replace("&quot;", '"') and "4 answers" in html


def test_a_run_made_before_methods_still_places_semantic_entropy(tmp_path):
    """Old results.jsonl lines have only "uncertainty": its semantic_entropy is the method's
    (the panel leaves it out, as the table above shows it; the run still holds its values)."""
    folder = write_run(tmp_path / "old", [{}, {}, {}])
    run = load_reference(folder).run
    assert run.place("semantic_entropy", "length_normalized", 2.0).below == 1.0
    assert run.place("semantic_entropy", "mars", 0.5).below == 0.0
    html = methods_panel_html(result_with({"eigv": {"value": 1.0}}), "mars", Reference(run))
    assert esc(texts.METHODS_ABSENT) in rows(html)["eigv"]


def test_which_run_the_panel_reads(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs / "b-run", [{}])
    write_run(runs / "a-run", [{}])
    (runs / "not-a-run").mkdir()
    assert reference_folder(None, runs) == (runs / "a-run", "")  # the first by name
    calibration = runs / "b-run" / "calibration.json"
    assert reference_folder(calibration, runs) == (runs / "b-run", "")  # the calibrated run
    assert reference_folder(tmp_path / "elsewhere.json", None) == (None, texts.METHODS_RUN_NOT_FOUND)
    assert reference_folder(None, None) == (None, "")
    html = methods_panel_html(result_with(VALUES), "mars",
                              load_reference(*reference_folder(tmp_path / "x.json", None)))
    assert esc(texts.METHODS_RUN_NOT_FOUND) in html and esc(texts.METHODS_NOT_COMPARABLE) in html


def test_a_run_that_cannot_be_read_is_said_on_the_panel(tmp_path):
    folder = write_run(tmp_path / "torn", [{}, {}], n=5)  # report behind its results
    reference = load_reference(folder)
    assert reference.run is None
    assert reference.note == texts.METHODS_RUN_UNREADABLE.format(run="torn", error="RunFileError")
    html = methods_panel_html(result_with(VALUES), "mars", reference)
    assert esc(reference.note) in html and esc(texts.METHODS_NOT_COMPARABLE) in html


def test_the_controller_renders_the_panel_and_says_how_the_run_was_made_otherwise(tmp_path):
    records = [{"eigv": {"value": v}} for v in (0.5, 1.5)]
    result = result_with({"eigv": {"value": 1.0},
                          "sentence_sar": {"length_normalized": 0.2, "mars": 0.3}})
    same = {k: result.settings[k] for k in ("llm", "importance", "nli")}
    samples = result.settings["samples"]
    cases = (
        ("alike", same, {"samples": samples}, []),
        ("models", {**same, "nli": "/srv/secret/other-nli"}, None, [texts.METHODS_RUN_MODELS]),
        ("settings", same, {"samples": samples + 3, "prompt": result.settings["prompt"]},
         [f"samples {samples} here, {samples + 3} in the run"]),
    )
    for name, models, settings, unlike in cases:
        folder = write_run(tmp_path / name, records, models=models, settings=settings,
                           data="/srv/secret/facts.jsonl")
        controller = Controller(EngineHost(FakeEngine()), reference=load_reference(folder))
        panel = controller.show(result, "mars")["methods_panel"]
        assert "less trustworthy than 50% of the run" in panel
        assert "(data facts.jsonl)" in panel and "/srv/secret" not in panel  # no server folders
        if unlike:
            assert esc(texts.METHODS_RUN_OTHER.format(what="; ".join(unlike))) in panel, name
        else:
            assert "made otherwise" not in panel
        again = controller.show_scoring(result, "length_normalized")["methods_panel"]
        assert '<th scope="col" data-col="length_normalized" class="mars-active">' in again
    plain = Controller(EngineHost(FakeEngine())).show(result, "mars")["methods_panel"]
    assert esc(texts.METHODS_NOT_COMPARABLE) in plain


def test_a_sar_value_of_another_similarity_model_than_the_runs_is_said_to_be_made_otherwise():
    result = make_result()
    base = {k: result.settings[k] for k in ("llm", "importance", "nli")}
    run = methods_panel.RunValues("run", "hand.jsonl", 2,
                                  models={**base, "similarity": "org/sts-b"})
    result.settings = {**result.settings, "similarity": "org/sts-a", "methods": ["sar"]}
    assert methods_panel.differences(result, run) == [texts.METHODS_RUN_MODELS]
    result.settings = {**result.settings, "similarity": "org/sts-b"}
    assert methods_panel.differences(result, run) == []
    result.settings = {**result.settings, "similarity": "org/sts-a", "methods": ["eigv"]}
    assert methods_panel.differences(result, run) == []  # this answer ran no SAR method
