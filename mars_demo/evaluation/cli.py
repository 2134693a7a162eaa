"""``python -m mars_demo evaluate``: the subcommand's flags and its three modes.

- ``evaluate --data SOURCE --out RUN_DIR [--limit N --seed S --judge em|f1|rouge|llm
  --threshold T] [model and scoring options]``: run (or resume) an evaluation.
- ``evaluate --compare RUN_A RUN_B``: two runs' reports side by side (markdown on stdout).
- ``evaluate --calibrate RUN_DIR [--measure M --scoring S --calibration-out FILE]``: fit the
  isotonic P(correct) of a finished run; ``--calibrate`` without a directory, after ``--data``
  and ``--out``, calibrates the run just made.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from .. import options as O
from . import MEASURES, SCORINGS
from .judges import DEFAULT_THRESHOLDS, JUDGES

EXIT_USAGE = 2
EXIT_FAILURE = 1


def add_parser(sub, add_option, add_llm_help) -> None:
    """Add ``evaluate`` to the CLI's subparsers (``add_option``/``add_llm_help``: the CLI's
    helpers that build flags from the option schema)."""
    ev = sub.add_parser(
        "evaluate",
        help="evaluate MARS on labelled questions (AUROC, PRR, AURAC; resumable)",
        description="Evaluate the uncertainties on labelled questions: results.jsonl, "
        "report.json, report.md and plots in RUN_DIR. SOURCE: a JSONL file (question, answers; "
        "with greedy and samples no LLM is loaded) or hf:trivia_qa, hf:nq_open, "
        "hf:web_questions (optionally hf:NAME:SPLIT).",
    )
    ev.add_argument("--data", metavar="SOURCE", help="JSONL file or hf:NAME[:SPLIT]")
    ev.add_argument("--out", metavar="RUN_DIR", help="run directory (created; resumed if it exists)")
    ev.add_argument("--limit", type=int, metavar="N",
                    help="a seeded random subset of N questions (the seed is --seed)")
    ev.add_argument("--judge", choices=JUDGES, default="rouge",
                    help="correctness of the greedy answer: em (SQuAD exact match), f1 (token "
                    "F1 >= threshold), rouge (ROUGE-L >= threshold), llm (the paper's judge "
                    "prompt on --judge-endpoint); default: rouge")
    ev.add_argument("--threshold", type=float, metavar="T",
                    help=f"threshold of f1 (default {DEFAULT_THRESHOLDS['f1']}) or rouge "
                    f"(default {DEFAULT_THRESHOLDS['rouge']})")
    ev.add_argument("--judge-endpoint", metavar="URL",
                    help="OpenAI-compatible server of the llm judge (default: --llm-endpoint)")
    ev.add_argument("--judge-model", metavar="NAME", help="model name on the judge server")
    ev.add_argument("--judge-api", choices=("chat", "completions"), default="chat",
                    help="judge endpoint: /v1/chat/completions (default) or /v1/completions")
    ev.add_argument("--judge-api-key-env", metavar="VAR",
                    help="NAME of the variable holding the judge server's API key")
    ev.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                    help="bootstrap resamples for the 95%% intervals (default 1000)")
    ev.add_argument("--no-plots", action="store_true", help="write no plots")
    ev.add_argument("--batch-questions", type=int, default=16, metavar="K",
                    help="questions analyzed together (default 16): in-process one batched "
                    "generate call and batched importance and NLI passes for K questions; with "
                    "--llm-endpoint, K questions' requests at once. Greedy answers do not depend "
                    "on K; generated samples do (the batch shares its random draws)")
    ev.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"),
                    help="print two runs' reports side by side")
    ev.add_argument("--calibrate", nargs="?", const="", metavar="RUN_DIR",
                    help="fit P(correct) from an uncertainty (isotonic) on RUN_DIR, or on the "
                    "run of --out when no directory is given")
    ev.add_argument("--measure", choices=MEASURES, default="semantic_entropy",
                    help="measure of --calibrate (default semantic_entropy)")
    ev.add_argument("--scoring", choices=SCORINGS, default="mars",
                    help="scoring of --calibrate (default mars)")
    ev.add_argument("--calibration-out", metavar="FILE",
                    help="where --calibrate writes (default RUN_DIR/calibration.json)")
    for opt in O.MODEL_OPTIONS + O.REQUEST_OPTIONS:
        add_option(ev, opt, keep_default=True)
    add_llm_help(ev)


def _error(message: str, code: int = EXIT_USAGE) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def run_command(args: argparse.Namespace, settings_of) -> int:
    """``settings_of(args)``: the CLI's Settings from the flags."""
    from .report import compare, load_report

    if args.compare:
        if args.data or args.out or args.calibrate is not None:
            return _error("--compare takes two run directories and nothing else")
        try:
            a, b = (load_report(d) for d in args.compare)
            text = compare(a, b, *args.compare)
        except (ValueError, KeyError, TypeError) as err:
            return _error(f"cannot compare: {err}")
        sys.stdout.write(text)
        return 0
    if args.calibrate:  # an existing run
        if args.data or args.out:
            return _error("--calibrate RUN_DIR takes no --data or --out (give --calibrate "
                          "alone after them to calibrate the new run)")
        return _calibrate(args, args.calibrate)
    if not args.data or not args.out:
        return _error("evaluate needs --data SOURCE and --out RUN_DIR (or --compare, or "
                      "--calibrate RUN_DIR)")
    code = _evaluate(args, settings_of)
    if code == 0 and args.calibrate == "":
        return _calibrate(args, args.out)
    return code


def _calibrate(args: argparse.Namespace, run_dir: str) -> int:
    from .calibration import CalibrationError
    from .run import RunError, calibrate

    try:
        path = calibrate(run_dir, args.measure, args.scoring, args.calibration_out)
    except (RunError, CalibrationError, ValueError, OSError) as err:
        return _error(f"cannot calibrate {run_dir!r}: {err}")
    print(f"calibration written to {path}", file=sys.stderr)
    return 0


def _evaluate(args: argparse.Namespace, settings_of) -> int:
    from ..errors import AnalysisOutOfMemory, InvalidModelOutput, ModelLoadError, OptionError
    from .data import DataError
    from .judges import JudgeError, make_judge
    from .run import EvalConfig, RunError, evaluate

    if args.limit is not None and args.limit < 1:
        return _error(f"--limit must be a positive integer; got {args.limit}")
    if args.batch_questions < 1:
        return _error(f"--batch-questions must be a positive integer; got {args.batch_questions}")
    if args.bootstrap < 1:
        return _error(f"--bootstrap must be a positive integer; got {args.bootstrap}")
    try:
        settings = settings_of(args)
        llm_options = {}
        if args.judge == "llm":
            same_server = not args.judge_endpoint
            llm_options = {"endpoint": args.judge_endpoint or settings.llm_endpoint,
                           "model": args.judge_model, "api": args.judge_api,
                           # the LLM's own server judging: its key too, unless one is given
                           "api_key_env": args.judge_api_key_env or (
                               settings.llm_api_key_env if same_server else None)}
        judge = make_judge(args.judge, args.threshold, **llm_options)
        config = EvalConfig(data=args.data, out=pathlib.Path(args.out), judge=judge,
                            settings=settings, limit=args.limit, resamples=args.bootstrap,
                            plots=not args.no_plots, batch_questions=args.batch_questions)
        report = evaluate(config)
    except (OptionError, DataError, RunError) as err:
        return _error(str(err))
    except JudgeError as err:
        return _error(f"the judge failed: {err} (finished questions are kept; run the same "
                      "command again to resume)", EXIT_FAILURE)
    except AnalysisOutOfMemory as err:
        return _error(f"{err} With --batch-questions {args.batch_questions}, that many "
                      "questions' answers are in memory at once: run the same command with a "
                      "smaller --batch-questions to resume (finished questions are kept; the "
                      "batch size may change between resumes).", EXIT_FAILURE)
    except (ModelLoadError, InvalidModelOutput) as err:
        return _error(f"{err} (finished questions are kept; run the same command again to "
                      "resume)", EXIT_FAILURE)
    except ValueError as err:  # a judge's bad option (threshold, endpoint URL)
        return _error(str(err))
    except KeyboardInterrupt:
        return _error("interrupted (finished questions are kept; run the same command again "
                      "to resume)", 130)
    auroc = report["metrics"]["auroc"]
    lines = [f"{report['n']} questions, accuracy {report['accuracy'] * 100:.1f}%; AUROC "
             "(LN -> MARS):"]
    for m in MEASURES:
        ln, ma = auroc[m]["length_normalized"]["value"], auroc[m]["mars"]["value"]
        shown = "n/a" if ln is None else f"{ln:.3f} -> {ma:.3f}"
        lines.append(f"  {m}: {shown}")
    lines.append(f"report: {pathlib.Path(args.out) / 'report.md'}")
    print("\n".join(lines))
    return 0
