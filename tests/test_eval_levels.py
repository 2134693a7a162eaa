"""How often the answers at each level of the page's verdict were right in a run: recorded by
``evaluate`` for each answer, counted with a Wilson interval in report.json and report.md, and
said under the verdict where the page serves the run."""

from __future__ import annotations

import json
import math

import pytest
from test_evaluate import lines, pregenerated_run  # noqa: F401  (fixture)

from mars_demo.evaluation import levels
from mars_demo.evaluation.checks import RunFileError
from mars_demo.evaluation.records import Record
from mars_demo.evaluation.runs import parse_report
from mars_demo.result import AnalysisResult
from mars_demo.verdict import verdict


def record(level: str | None, correct: bool) -> Record:
    return Record(correct=correct, uncertainty={"confidence": {"mars": 0.1}}, level=level)


#: a run whose records are known: 10 consistent (7 right), 4 unsure (1 right), 1 too few (right),
#: 2 of a run made before the level was recorded
KNOWN = ([record("consistent", k < 7) for k in range(10)]
         + [record("unsure", k == 0) for k in range(4)]
         + [record("few", True)] + [record(None, True), record(None, False)])


def test_the_levels_of_a_run_whose_records_are_known():
    found = levels.level_records(KNOWN, "facts")
    assert list(found) == ["consistent", "unsure", "few"]  # the verdict's order, none empty
    assert [(r.n, r.right) for r in found.values()] == [(10, 7), (4, 1), (1, 1)]
    consistent = found["consistent"]
    assert consistent.share == 0.7 and consistent.run == "facts"
    # the Wilson score interval, by its formula: (p + z²/2n ± z√(p(1-p)/n + z²/4n²)) / (1 + z²/n)
    z, n, p = 1.959963984540054, 10, 0.7
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert (consistent.low, consistent.high) == pytest.approx((centre - half, centre + half))
    assert found["few"].high == 1.0 and 0 < found["few"].low < 1  # stays inside 0..1
    # to report.json and back, and hostile values refused
    assert levels.from_json(levels.to_json(found), "facts") == found
    with pytest.raises(RunFileError):
        levels.from_json({"consistent": {"n": 2, "right": 3, "ci95": [0, 1]}})
    with pytest.raises(RunFileError):
        levels.from_json({"<b>": {"n": 2, "right": 1, "ci95": [0, 1]}})
    with pytest.raises(RunFileError):
        Record.from_dict({**record("consistent", True).to_dict(), "level": "sure"}, "line 1")


def test_evaluate_records_each_answers_level_and_reports_the_levels(pregenerated_run):  # noqa: F811
    rows = lines(pregenerated_run / "results.jsonl")
    for row in rows:  # the very level the page would show for that analysis
        assert row["level"] == verdict(AnalysisResult.from_dict(row["analysis"])).level
    report = json.loads((pregenerated_run / "report.json").read_text())
    expected = {}
    for row in rows:
        n, right = expected.get(row["level"], (0, 0))
        expected[row["level"]] = (n + 1, right + row["correct"])
    assert {k: (v["n"], v["right"]) for k, v in report["levels"].items()} == expected
    assert parse_report(json.dumps(report)).levels.keys() == expected.keys()
    md = (pregenerated_run / "report.md").read_text()
    assert "## The page's verdict levels" in md
    for level, (n, right) in expected.items():
        low, high = levels.wilson(right, n)
        assert (f"| {level} | {n} | {right} | {right / n * 100:.1f}% "
                f"[{low * 100:.1f}, {high * 100:.1f}] |") in md
