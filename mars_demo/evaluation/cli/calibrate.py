"""``evaluate calibrate RUN_DIR``: fit the isotonic P(correct) of one uncertainty of a finished
run (a measure or any method the run holds) and check it by cross-validation
(:func:`mars_demo.evaluation.calibration.calibrate`)."""

from __future__ import annotations

import argparse
from typing import Any

from . import common

HELP = "fit P(correct) from an uncertainty of a finished run (isotonic, held-out quality)"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "calibrate", help=HELP,
        description="Fit P(correct) from one uncertainty of a finished run (isotonic) and "
        "report its cross-validated Brier score and calibration error; the run's report gains "
        "the calibration section. The file is what `python app.py --calibration FILE` reads.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a finished run")
    common.add_measure(p, "--out")
    p.add_argument("--no-plots", action="store_true", help="write no reliability plot")
    return p


def main(args: argparse.Namespace) -> int:
    return common.in_one_process("calibrate", lambda: common.calibrate_run(args, args.run_dir),
                                 f"cannot calibrate {args.run_dir!r}")
