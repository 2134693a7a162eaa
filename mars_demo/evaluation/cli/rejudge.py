"""``evaluate rejudge RUN_DIR --out NEW_DIR``: new verdicts and metrics for a finished run, the
answers and uncertainties as they were (:func:`mars_demo.evaluation.rejudge.rejudge`).

A judge that needs the NLI model (``--judge nli``) takes the one the run recorded, unless
``--nli`` names another, and says which it uses."""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any

from ...flags import add_model_flags, settings_from
from . import common

HELP = "judge a finished run again into a new run folder (nothing generated or scored again)"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "rejudge", help=HELP,
        description="Judge a finished run again into --out NEW_DIR: new verdicts and metrics, "
        "the answers and uncertainties as they were (no LLM is loaded). A judge that needs the "
        "NLI model uses the run's, unless --nli names another.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a finished run")
    p.add_argument("--out", metavar="NEW_DIR", required=True, help="the new run's directory")
    common.add_judge(p)
    p.add_argument("--labels", metavar="FILE",
                   help="JSONL of labels (correct, and index, id or question); questions it "
                   "does not name are judged by --judge")
    common.add_judge_check(p)
    common.add_report(p)
    add_model_flags(p, keep_default=False)
    return p


def main(args: argparse.Namespace) -> int:
    return common.in_one_process("rejudge", lambda: _rejudge(args))


def _rejudge(args: argparse.Namespace) -> int:
    from .. import judges
    from ..rejudge import rejudge
    from ..runs import RunError, RunFileError, read_run

    name = common.judge_names(args)[0]
    try:
        run = read_run(args.run_dir)
    except RunFileError as err:
        raise RunError(str(err)) from err
    recorded = {**run.manifest.settings,
                **{k: v for k, v in (run.report.models or {}).items() if v}}
    settings = settings_from(args, recorded)
    if "nli" in judges.entry(name).needs:
        source = ("--nli" if "nli" in vars(args)
                  else f"the one {args.run_dir} recorded; --nli names another")
        print(f"the {name} judge uses the NLI model {settings.nli} ({source})", file=sys.stderr)
    judge = common.make_judge(name, args, lambda: settings)
    out = pathlib.Path(args.out)
    checked = common.check_for_run(args.judge_check, judge) if args.judge_check else None
    report = rejudge(run.path, out, judge, labels_file=args.labels, resamples=args.bootstrap,
                     plots=not args.no_plots, checked=checked)
    print(common.results_text(report, out))
    return common.summary(report, "re-judged")
