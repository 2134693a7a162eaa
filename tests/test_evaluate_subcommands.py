"""``evaluate``'s jobs are subcommands, each its own module with its own parser and ``--help``,
importing what they share and never each other; the flags before a job (the spelling before the
subcommands) are refused with a line that names the jobs; a finished run written again keeps its
calibration section."""

from __future__ import annotations

import ast
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


def test_the_flags_before_a_job_are_refused_with_the_jobs_named():
    for argv in (["--compare", "a", "b"], ["--data", "d.jsonl", "--out", "r"]):
        code, out, err = cli("evaluate", *argv)
        assert code == 2 and out == ""
        assert err == ("error: evaluate takes its job first, then its flags: python -m mars_demo "
                       "evaluate JOB ... with JOB one of run, merge, compare, calibrate, rejudge, "
                       "check-judge (e.g. evaluate run --data SOURCE --out RUN_DIR; see evaluate "
                       "--help)\n")
    assert not hasattr(evaluate_cli, "old_spelling")


def test_no_subcommand_imports_another():
    """A subcommand takes what the jobs share from ``common`` and the model flags from
    ``mars_demo.flags``; none reaches into a sibling's module (nor is handed the flag builders
    by the command line above it)."""
    folder = Path(evaluate_cli.__file__).parent
    siblings = {module.__name__.rsplit(".", 1)[1] for module in evaluate_cli.JOBS.values()}
    for name in siblings:
        tree = ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                imported |= {node.module} if node.module else {a.name for a in node.names}
        assert imported <= {"common"}, (name, imported - {"common"})
        main = evaluate_cli.JOBS[name.replace("_", "-")].main
        assert list(main.__code__.co_varnames[:main.__code__.co_argcount]) == ["args"], name


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
