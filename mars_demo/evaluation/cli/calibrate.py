"""``evaluate calibrate RUN_DIR``: fit the isotonic P(correct) of one uncertainty of a finished
run (a measure or any method the run holds) and check it by cross-validation
(:func:`mars_demo.evaluation.calibration.calibrate`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from .. import MEASURES
from ..checks import VARIANTS
from . import common

HELP = "fit P(correct) from an uncertainty of a finished run (isotonic, held-out quality)"


def add_measure(parser: argparse.ArgumentParser, out_flag: str = "--calibration-out") -> None:
    """The flags that say what is calibrated and where it goes."""
    parser.add_argument("--measure", default="semantic_entropy", metavar="ID",
                        help="the uncertainty: a measure (" + ", ".join(MEASURES)
                        + ") or any method id the run holds (eigv, num_sets, ...); default "
                        "semantic_entropy")
    parser.add_argument("--scoring", choices=VARIANTS, default=None,
                        help="its scoring or variant: length_normalized, mars, or value for a "
                        "method that reads no sequence score (default: mars where the method "
                        "has it, else value)")
    parser.add_argument(out_flag, metavar="FILE", dest="calibration_out",
                        help="where the calibration is written (default RUN_DIR/calibration.json)")


def add_parser(sub: Any, flags: common.Flags) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "calibrate", help=HELP,
        description="Fit P(correct) from one uncertainty of a finished run (isotonic) and "
        "report its cross-validated Brier score and calibration error; the run's report gains "
        "the calibration section. The file is what `python app.py --calibration FILE` reads.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a finished run")
    add_measure(p, "--out")
    p.add_argument("--no-plots", action="store_true", help="write no reliability plot")
    return p


def main(args: argparse.Namespace, settings_of: Callable[..., Any]) -> int:
    return common.in_one_process("calibrate", lambda: calibrate_run(args, args.run_dir),
                                 f"cannot calibrate {args.run_dir!r}")


def calibrate_run(args: argparse.Namespace, run_dir: str) -> int:
    """Calibrate ``run_dir`` as the flags say; its held-out quality on stderr."""
    from ..calibration import calibrate, load

    path = calibrate(run_dir, args.measure, args.scoring, args.calibration_out,
                     plots=not args.no_plots)
    held = load(path).held_out
    print(f"calibration written to {path}; held out ({held['folds']}-fold): Brier "
          f"{held['brier']:.4f} (the accuracy alone: {held['brier_constant']:.4f}), ECE "
          f"{held['ece']:.4f}", file=sys.stderr)
    return 0
