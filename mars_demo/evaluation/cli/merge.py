"""``evaluate merge OUT PART...``: the shares of one run (the folders of ``evaluate run
--shard 1/N ... N/N``) joined into the new run folder OUT, after checking that they are shares
of the same run holding every question once (:mod:`mars_demo.evaluation.merge`)."""

from __future__ import annotations

import argparse
import pathlib
from typing import Any

from . import common

HELP = "join the shares of one run (evaluate run --shard K/N) into one run folder"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "merge", help=HELP,
        description="Join the shares of one run (the folders of evaluate run --shard 1/N ... "
        "N/N) into the new run folder OUT, after checking that they are shares of the same run "
        "(data, settings, judge, seed, batch size) holding every question once.")
    p.add_argument("out", metavar="OUT", help="the new run folder")
    p.add_argument("parts", metavar="PART", nargs="+", help="the shares' folders")
    common.add_report(p)
    return p


def main(args: argparse.Namespace) -> int:
    return common.in_one_process("merge", lambda: _merge(args), "cannot merge")


def _merge(args: argparse.Namespace) -> int:
    from ..merge import merge

    report = merge(args.out, args.parts, resamples=args.bootstrap, plots=not args.no_plots)
    print(common.results_text(report, pathlib.Path(args.out)))
    return common.summary(report, "merged")
