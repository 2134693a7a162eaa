"""The judges' registry: every judge is one entry, found in its module, and what the CLI offers
comes from the entries, so a judge added to the registry reaches ``--judge``'s help and a run."""

from __future__ import annotations

import json

import pytest
from cli_helpers import cli

from mars_demo.cli import build_parser
from mars_demo.evaluation import judges
from mars_demo.evaluation.judges.base import Judge, JudgeEntry, Verdict


def evaluate_help() -> str:
    """``evaluate run --help``, the subcommand that runs a judge over a data set."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    jobs = next(a for a in sub.choices["evaluate"]._actions if a.dest == "job")
    return " ".join(jobs.choices["run"].format_help().split())


class EvenLength(Judge):
    """A probe: an answer of an even number of characters is "correct"."""

    name = "probe"

    def __init__(self, threshold):
        self.threshold = threshold

    def __call__(self, question, prediction, references):
        return Verdict(len(prediction) % 2 == 0, None, f"{len(prediction)} characters")


@pytest.fixture
def probe():
    entry = JudgeEntry("probe", "answers of an even length", lambda o: EvenLength(o.threshold),
                       threshold=0.25)
    judges.register(entry)
    yield entry
    judges.unregister("probe")


def test_every_judge_module_holds_one_entry_the_registry_finds():
    assert judges.names() == ("contains", "em", "f1", "llm", "nli", "rouge")
    found = judges.entries()
    assert (found["f1"].threshold, found["rouge"].threshold) == (0.5, 0.3)
    assert [n for n, e in found.items() if e.threshold is None] == [
        "contains", "em", "llm", "nli"]
    assert [n for n, e in found.items() if e.whole_answer] == ["em", "f1", "rouge"]
    assert (found["nli"].needs, found["llm"].needs) == (("nli",), ("server",))
    for name, entry in found.items():  # each builds the judge that says its own name
        if not entry.needs:
            assert judges.make_judge(name).describe()["name"] == name


def test_an_entry_needing_something_unknown_is_refused():
    with pytest.raises(ValueError, match="needs \\['gpu'\\]"):
        JudgeEntry("x", "y", lambda o: EvenLength(None), needs=("gpu",))
    with pytest.raises(ValueError, match="exists already"):
        judges.register(JudgeEntry("em", "again", lambda o: EvenLength(None)))


def test_the_help_lists_every_judge_from_its_entry(probe):
    text = evaluate_help()
    for entry in judges.entries().values():
        assert entry.help() in text
    assert "probe (answers of an even length, default 0.25)" in text
    assert ("threshold of f1 (default 0.5) or rouge (default 0.3) or probe (default 0.25)"
            in text)


def test_a_probe_judge_added_to_the_registry_runs(probe, tiny_models, tmp_path, no_llm):
    from cli_helpers import evaluate_facts

    out = tmp_path / "run"
    records = evaluate_facts(out, tiny_models, 4, "--judge", "probe", "--threshold", "0.4")
    assert len(records) == 4
    for r in records:
        assert r["correct"] == (len(r["greedy"]) % 2 == 0)
        assert r["judge"]["detail"] == f"{len(r['greedy'])} characters"
    report = json.loads((out / "report.json").read_text())
    assert report["judge"] == {"name": "probe", "threshold": 0.4}
    judges.unregister("probe")  # gone from the registry: the CLI refuses it again
    code, _, err = cli("evaluate", "run", "--data", "x.jsonl", "--out", str(tmp_path / "r2"),
                       "--judge", "probe")
    assert code == 2 and "--judge must be one of contains, em, f1, llm, nli, rouge" in err
