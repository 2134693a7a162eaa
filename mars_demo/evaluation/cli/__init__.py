"""``mars-demo evaluate JOB``: one subcommand per job, each a module of this package with its
own parser, ``--help`` and ``main``; the work itself lives in the evaluation modules they call.

- ``evaluate run --data SOURCE --out RUN_DIR``: run (or resume) an evaluation (:mod:`.run`);
  ``accelerate launch -m mars_demo evaluate run ...`` or ``torchrun`` share it among
  processes, ``--shard K/N`` runs one share.
- ``evaluate merge OUT PART...``: join the shares of a run (:mod:`.merge`).
- ``evaluate compare RUN_A RUN_B``: B - A with paired bootstrap intervals (:mod:`.compare`).
- ``evaluate calibrate RUN_DIR``: P(correct) from an uncertainty (:mod:`.calibrate`).
- ``evaluate rejudge RUN_DIR --out NEW_DIR``: new verdicts for a finished run (:mod:`.rejudge`).
- ``evaluate check-judge FILE --judge NAME,...``: judges against human labels
  (:mod:`.check_judge`).

A subcommand's module imports :mod:`.common` (what they share) and :mod:`mars_demo.flags` (the
model and per-request flags of every command), never another subcommand.
"""

from __future__ import annotations

from typing import Any

from . import calibrate, check_judge, compare, merge, rejudge, run

#: subcommand -> its module (each has ``HELP``, ``add_parser(sub)`` and ``main(args)``)
JOBS = {"run": run, "merge": merge, "compare": compare, "calibrate": calibrate,
        "rejudge": rejudge, "check-judge": check_judge}


def add_parser(sub: Any) -> None:
    """Add ``evaluate`` and its subcommands to the CLI's subparsers. Each subcommand's parser
    sets ``evaluate_main``, the function that runs it."""
    ev = sub.add_parser(
        "evaluate", help="evaluate MARS on labelled questions: run, merge, compare, calibrate, "
        "rejudge, check-judge",
        description="Evaluate the uncertainties on labelled questions. One subcommand per job; "
        "`evaluate JOB --help` lists its flags.")
    jobs = ev.add_subparsers(dest="job", required=True, metavar="JOB",
                             parser_class=type(ev))
    for name, module in JOBS.items():
        parser = module.add_parser(jobs)
        parser.set_defaults(evaluate_main=module.main)
        assert parser.prog.endswith(f"evaluate {name}"), name
