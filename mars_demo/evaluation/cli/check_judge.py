"""``evaluate check-judge FILE --judge NAME[,NAME...]``: each judge's agreement with the
file's human labels (false accepts, false rejects, per kind of row;
:mod:`mars_demo.evaluation.judge_check`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ...flags import add_model_flags, settings_from
from . import common

HELP = "each judge's agreement with human labels (false accepts, false rejects)"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "check-judge", help=HELP,
        description="Check judges against human labels: FILE is JSONL of human-labelled "
        "answers (question, answers, answer, correct). Prints each --judge's agreement, false "
        "accepts and false rejects.")
    p.add_argument("file", metavar="FILE", help="JSONL of human-labelled answers")
    common.add_judge(p, several=True)
    p.add_argument("--disagreements", action="store_true",
                   help="list every row where a judge and the label differ")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_model_flags(p)
    return p


def main(args: argparse.Namespace) -> int:
    return common.in_one_process("check-judge", lambda: _check(args))


def _check(args: argparse.Namespace) -> int:
    from .. import judge_check

    names = common.judge_names(args, several=True)
    check = judge_check.read_check_set(args.file)
    common.print_problems(check.problems)
    chosen = [common.make_judge(n, args, lambda: settings_from(args), len(names)) for n in names]
    results = [judge_check.check_judge(j, check.rows) for j in chosen]
    if args.json:
        print(json.dumps([r.to_dict(args.file) for r in results], indent=2))
    else:
        sys.stdout.write(judge_check.format_results(results, args.file))
        if args.disagreements:
            for r in results:
                print(f"\n{r.judge['name']} disagrees with the label on {len(r.disagreements)} "
                      "rows:")
                for row, verdict in r.disagreements:
                    said = "accepts" if verdict.correct else "rejects"
                    print(f"  line {row.line}: {said} {row.answer!r} for {row.question!r} "
                          f"(references {list(row.references)}; {verdict.detail or ''})")
    if check.problems:
        print(f"checked {len(check.rows)} rows; {len(check.problems)} bad line(s) skipped",
              file=sys.stderr)
        return common.EXIT_FAILURE
    return 0
