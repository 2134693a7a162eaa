"""``evaluate``'s jobs are subcommands, each its own module with its own parser and ``--help``;
the old flag spellings still work, with a one-line note; a finished run written again keeps its
calibration section."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest
from cli_helpers import cli

from mars_demo.cli import build_parser
from mars_demo.evaluation import cli as evaluate_cli

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "data" / "facts_answers.jsonl"
JOBS = ("run", "merge", "compare", "calibrate", "rejudge", "check-judge")


def _jobs():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return next(a for a in sub.choices["evaluate"]._actions if a.dest == "job").choices


def test_each_job_is_a_subcommand_with_its_own_flags():
    jobs = _jobs()
    assert tuple(jobs) == JOBS
    flags = {name: {o for a in p._actions for o in a.option_strings} for name, p in jobs.items()}
    assert {"--data", "--out", "--shard", "--batch-questions", "--calibrate", "--llm"} <= flags["run"]
    assert flags["compare"] == {"-h", "--help", "--bootstrap", "--seed", "--json"}
    assert flags["merge"] == {"-h", "--help", "--bootstrap", "--no-plots"}
    assert "--data" not in flags["rejudge"] and {"--labels", "--nli"} <= flags["rejudge"]
    assert "--disagreements" in flags["check-judge"] and "--data" not in flags["check-judge"]
    assert {"--measure", "--scoring", "--out"} <= flags["calibrate"]
    for name in JOBS:  # its main lives in its own module
        module = evaluate_cli.JOBS[name]
        assert jobs[name].get_default("evaluate_main") is module.main
        assert module.__name__.endswith(name.replace("-", "_"))
    assert not hasattr(evaluate_cli, "run_command")


@pytest.mark.parametrize("job", JOBS)
def test_each_job_has_its_own_help(job):
    code, out, _ = cli("evaluate", job, "--help")
    assert code == 0
    assert out.startswith(f"usage: python -m mars_demo evaluate {job} ")


def test_the_old_spellings_work_with_a_one_line_note(tmp_path):
    assert doctest.testmod(evaluate_cli).failed == 0
    code, out, err = cli("evaluate", "--compare", "a", "b")  # no such runs: refused the same
    note, *rest = err.splitlines()
    assert note == ("note: the old spelling still works; the new one is: python -m mars_demo "
                    "evaluate compare a b")
    assert code == 2 and rest[0].startswith("error: cannot compare:")
    code, _, err = cli("evaluate", "--judge-check", str(ROOT / "data" / "judge_check.jsonl"),
                       "--judge", "em")
    assert code == 0 and err.splitlines()[0].endswith(
        f"evaluate check-judge {ROOT / 'data' / 'judge_check.jsonl'} --judge em")
    assert evaluate_cli.old_spelling(["--rejudge", "r", "--out", "n", "--judge", "nli"]) == [
        "rejudge", "r", "--out", "n", "--judge", "nli"]
    assert evaluate_cli.old_spelling(["--merge", "o", "p1", "p2"]) == ["merge", "o", "p1", "p2"]


def test_a_finished_run_written_again_keeps_its_calibration(tiny_models, tmp_path):
    out = tmp_path / "run"
    flags = ["--data", str(ANSWERS), "--out", str(out), "--bootstrap", "30", "--no-plots",
             "--importance", str(tiny_models["importance"]), "--nli", str(tiny_models["nli"])]
    code, _, err = cli("evaluate", "run", *flags)
    assert code == 0, err
    assert cli("evaluate", "calibrate", str(out), "--no-plots")[0] == 0
    section = json.loads((out / "report.json").read_text())["calibration"]
    code, _, err = cli("evaluate", "run", *flags)  # resumed: nothing to do, report written again
    assert code == 0 and "40 of 40 questions already done" in err, err
    assert json.loads((out / "report.json").read_text())["calibration"] == section
    assert "## Calibration of" in (out / "report.md").read_text()
    # a calibration of other answers than the run's is dropped, and the report says so
    cal = json.loads((out / "calibration.json").read_text())
    (out / "calibration.json").write_text(json.dumps({**cal, "n": 39}))
    assert cli("evaluate", "run", *flags)[0] == 0
    report = json.loads((out / "report.json").read_text())
    assert "calibration" not in report
    assert any("was made on 39 questions and the run now has 40" in w
               for w in report["warnings"])
