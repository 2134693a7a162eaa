"""``evaluate run --data SOURCE --out RUN_DIR``: run (or resume) an evaluation.

The run itself is :func:`mars_demo.evaluation.run.evaluate`; several processes started by
``accelerate launch`` or ``torchrun`` share it (:mod:`..parallel`), and ``--shard K/N`` runs one
share in a folder of its own (joined by ``evaluate merge``). ``--calibrate`` calibrates the
run once it is done, as ``evaluate calibrate RUN_DIR`` would.
"""

from __future__ import annotations

import argparse
import pathlib
from typing import Any

from ...flags import add_model_flags, add_request_flags, settings_from
from . import common

HELP = "run (or resume) an evaluation on labelled questions (AUROC, AUPRC, PRR, AURAC)"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "run", help=HELP,
        description="Evaluate the uncertainties on labelled questions: results.jsonl, "
        "report.json, report.md and plots in RUN_DIR. SOURCE: a JSONL file (question, answers, "
        "optionally correct; with greedy and samples no LLM is loaded) or hf:trivia_qa, "
        "hf:nq_open, hf:web_questions (optionally hf:NAME:SPLIT). A RUN_DIR that exists is "
        "resumed: finished questions are kept.")
    p.add_argument("--data", metavar="SOURCE", required=True, help="JSONL file or hf:NAME[:SPLIT]")
    p.add_argument("--out", metavar="RUN_DIR", required=True,
                   help="run directory (created; resumed if it exists)")
    p.add_argument("--limit", type=common.positive("--limit"), metavar="N",
                   help="a seeded random subset of N questions (the seed is --seed)")
    common.add_judge(p)
    common.add_judge_check(p)
    common.add_report(p)
    p.add_argument("--batch-questions", type=common.positive("--batch-questions"), default=16,
                   metavar="K",
                   help="questions analyzed together (default 16): in-process one batched "
                   "generate call and batched importance and NLI passes for K questions; with "
                   "--llm-endpoint, K questions' requests at once. Greedy answers do not depend "
                   "on K; generated samples do (the batch shares its random draws, from its own "
                   "seed), not on the number of processes")
    p.add_argument("--shard", metavar="K/N",
                   help="run share K of N of the questions into --out (a share of whole "
                   "batches: K = 1..N), for N machines or a job array; join the shares with "
                   "evaluate merge. Under accelerate launch or torchrun the processes share the "
                   "run without it")
    p.add_argument("--calibrate", action="store_true",
                   help="then calibrate the run (as evaluate calibrate RUN_DIR)")
    common.add_measure(p)
    add_model_flags(p)
    add_request_flags(p)
    return p


def main(args: argparse.Namespace) -> int:
    code = common.guarded(lambda: _evaluate(args))
    if code in (0, common.EXIT_FAILURE) and args.calibrate and _main_process():
        calibrated = common.guarded(lambda: common.calibrate_run(args, args.out),
                                    f"cannot calibrate {args.out!r}")
        return calibrated or code
    return code


def _main_process() -> bool:
    """False in a process of several other than the main one (which reports for the run)."""
    from ..parallel import processes

    found = processes()
    return found is None or found.main


def _evaluate(args: argparse.Namespace) -> int:
    from .. import judge_check
    from ..parallel import processes
    from ..run import EvalConfig, evaluate
    from ..shares import parse_shard

    name = common.judge_names(args)[0]
    shard = parse_shard(args.shard) if args.shard else None
    here = processes()  # this process, when a launcher started several
    main = here is None or here.main
    settings = settings_from(args)
    judge = common.make_judge(name, args, lambda: settings)
    out = pathlib.Path(args.out)
    if args.judge_check and main:
        checked = common.check_for_run(args.judge_check, judge)
        if out.exists() and not out.is_dir():
            return common.error(f"--out {args.out!r} is not a directory")
        out.mkdir(parents=True, exist_ok=True)
        judge_check.save(*checked, out)
    config = EvalConfig(data=args.data, out=out, judge=judge, settings=settings,
                        limit=args.limit, resamples=args.bootstrap, plots=not args.no_plots,
                        batch_questions=args.batch_questions, shard=shard)
    report = evaluate(config, processes=here)
    if report is None:  # a process of several other than the main one: it has reported
        return 0
    print(common.results_text(report, out))
    return common.summary(report, "evaluated")
