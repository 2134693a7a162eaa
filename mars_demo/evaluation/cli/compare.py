"""``evaluate compare RUN_A RUN_B``: B - A over the questions both runs share, with paired
bootstrap intervals, and warnings when data, judges or models differ
(:mod:`mars_demo.evaluation.compare`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from . import common

HELP = "B - A over the questions two runs share, with paired bootstrap intervals"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "compare", help=HELP,
        description="Compare two runs: B - A of every metric over the questions both hold, "
        "with paired bootstrap intervals, and warnings when their data, judges or models "
        "differ. Markdown, or JSON with --json.")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    common.add_bootstrap(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    return p


def main(args: argparse.Namespace) -> int:
    return common.in_one_process("compare", lambda: _compare(args), "cannot compare")


def _compare(args: argparse.Namespace) -> int:
    from ..compare import compare_runs, markdown
    from ..runs import read_run

    a, b = read_run(args.run_a), read_run(args.run_b)
    result = compare_runs(a, b, args.run_a, args.run_b, resamples=args.bootstrap,
                          seed=args.seed)
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if args.json else markdown(result))
    return 0
