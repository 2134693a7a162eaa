"""``python -m mars_demo evaluate``: the subcommand's flags and its modes.

- ``evaluate --data SOURCE --out RUN_DIR [--limit N --seed S --judge NAME --threshold T
  --judge-check FILE] [model and scoring options]``: run (or resume) an evaluation.
- ``evaluate --judge-check FILE --judge NAME[,NAME...]``: each judge's agreement with the
  file's human labels (false accepts, false rejects, per kind of row).
- ``evaluate --rejudge RUN_DIR --out NEW_DIR [--judge NAME] [--labels FILE]``: new verdicts
  and metrics for a finished run, nothing generated or scored again.
- ``evaluate --compare RUN_A RUN_B [--json]``: B - A over the shared questions with paired
  bootstrap intervals (markdown, or JSON).
- ``evaluate --calibrate RUN_DIR [--measure ID --scoring S --calibration-out FILE]``: fit the
  isotonic P(correct) of one uncertainty (a measure or any method the run holds) of a finished
  run and check it by cross-validation; ``--calibrate`` without a directory, after ``--data``
  and ``--out``, calibrates the run just made.
- ``accelerate launch [--num_processes N] -m mars_demo evaluate --data ... --out RUN_DIR`` (or
  ``torchrun``): one run in N processes, each on its device and its share (:mod:`.parallel`);
  ``evaluate --data ... --out DIR_K --shard K/N``: one share in a folder of its own, and
  ``evaluate --merge OUT DIR_1 ... DIR_N``: the shares joined (:mod:`.merge`).

Bad input is treated as ``score`` treats it: a line that cannot be used (data, judge check or
label file) is reported with its number (from 1) and skipped, every problem is listed, a summary
ends the run, and the exit status is 1 when a line or a question was skipped; 2 when nothing
usable was given (or a flag is wrong).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from .. import options
from . import MEASURES
from .checks import VARIANTS
from . import judges

EXIT_USAGE = 2
EXIT_FAILURE = 1


def add_parser(sub, add_option, add_llm_help) -> None:
    """Add ``evaluate`` to the CLI's subparsers (``add_option``/``add_llm_help``: the CLI's
    helpers that build flags from the option schema)."""
    ev = sub.add_parser(
        "evaluate",
        help="evaluate MARS on labelled questions (AUROC, AUPRC, PRR, AURAC; resumable)",
        description="Evaluate the uncertainties on labelled questions: results.jsonl, "
        "report.json, report.md and plots in RUN_DIR. SOURCE: a JSONL file (question, answers, "
        "optionally correct; with greedy and samples no LLM is loaded) or hf:trivia_qa, "
        "hf:nq_open, hf:web_questions (optionally hf:NAME:SPLIT).",
    )
    ev.add_argument("--data", metavar="SOURCE", help="JSONL file or hf:NAME[:SPLIT]")
    ev.add_argument("--out", metavar="RUN_DIR",
                    help="run directory (created; resumed if it exists); with --rejudge the "
                    "new run's directory")
    ev.add_argument("--limit", type=int, metavar="N",
                    help="a seeded random subset of N questions (the seed is --seed)")
    found = judges.entries()
    ev.add_argument("--judge", default=judges.DEFAULT_JUDGE, metavar="NAME",
                    help="correctness of the greedy answer: "
                    + ", ".join(e.help() for e in found.values()).replace("%", "%%")
                    + f"; default: {judges.DEFAULT_JUDGE}. With --judge-check alone, several "
                    "names separated by commas")
    ev.add_argument("--threshold", type=float, metavar="T",
                    help="threshold of " + " or ".join(
                        f"{e.name} (default {e.threshold:g})" for e in found.values()
                        if e.threshold is not None))
    ev.add_argument("--judge-endpoint", metavar="URL",
                    help="OpenAI-compatible server of the llm judge (default: --llm-endpoint)")
    ev.add_argument("--judge-model", metavar="NAME", help="model name on the judge server")
    ev.add_argument("--judge-api", choices=("chat", "completions"), default="chat",
                    help="judge endpoint: /v1/chat/completions (default) or /v1/completions")
    ev.add_argument("--judge-api-key-env", metavar="VAR",
                    help="NAME of the variable holding the judge server's API key")
    ev.add_argument("--judge-check", metavar="FILE",
                    help="JSONL of human-labelled answers (question, answers, answer, correct): "
                    "alone, print each --judge's agreement, false accepts and false rejects; "
                    "with a run, keep its judge's figures in the report")
    ev.add_argument("--disagreements", action="store_true",
                    help="with --judge-check: list every row where a judge and the label differ")
    ev.add_argument("--rejudge", metavar="RUN_DIR",
                    help="judge a finished run again into --out NEW_DIR: new verdicts and "
                    "metrics, the answers and uncertainties as they were (no LLM is loaded)")
    ev.add_argument("--labels", metavar="FILE",
                    help="with --rejudge: JSONL of labels (correct, and index, id or question); "
                    "questions it does not name are judged by --judge")
    ev.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                    help="bootstrap resamples for the 95%% intervals (default 1000)")
    ev.add_argument("--no-plots", action="store_true", help="write no plots")
    ev.add_argument("--batch-questions", type=int, default=16, metavar="K",
                    help="questions analyzed together (default 16): in-process one batched "
                    "generate call and batched importance and NLI passes for K questions; with "
                    "--llm-endpoint, K questions' requests at once. Greedy answers do not depend "
                    "on K; generated samples do (the batch shares its random draws, from its own "
                    "seed), not on the number of processes")
    ev.add_argument("--shard", metavar="K/N",
                    help="run share K of N of the questions into --out (a share of whole "
                    "batches: K = 1..N), for N machines or a job array; join the shares with "
                    "--merge. Under accelerate launch or torchrun the processes share the run "
                    "without it")
    ev.add_argument("--merge", nargs="+", metavar=("OUT", "PART"),
                    help="join the shares of one run (the folders of --shard 1/N ... N/N) into "
                    "the new run folder OUT, after checking that they are shares of the same "
                    "run (data, settings, judge, seed, batch size) holding every question once")
    ev.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"),
                    help="B - A over the questions both runs share, with paired bootstrap "
                    "intervals, and warnings when data, judges or models differ")
    ev.add_argument("--json", action="store_true",
                    help="with --compare or --judge-check: print JSON instead of text")
    ev.add_argument("--calibrate", nargs="?", const="", metavar="RUN_DIR",
                    help="fit P(correct) from an uncertainty (isotonic) on RUN_DIR, or on the "
                    "run of --out when no directory is given, and report its cross-validated "
                    "Brier score and calibration error")
    ev.add_argument("--measure", default="semantic_entropy", metavar="ID",
                    help="uncertainty of --calibrate: a measure (" + ", ".join(MEASURES)
                    + ") or any method id the run holds (eigv, num_sets, ...); default "
                    "semantic_entropy")
    ev.add_argument("--scoring", choices=VARIANTS, default=None,
                    help="its scoring or variant for --calibrate: length_normalized, mars, or "
                    "value for a method that reads no sequence score (default: mars where the "
                    "method has it, else value)")
    ev.add_argument("--calibration-out", metavar="FILE",
                    help="where --calibrate writes (default RUN_DIR/calibration.json)")
    for opt in options.MODEL_OPTIONS + options.REQUEST_OPTIONS:
        add_option(ev, opt, keep_default=True)
    add_llm_help(ev)


def _error(message: str, code: int = EXIT_USAGE) -> int:
    from .parallel import where

    rank = where()  # one of several processes: which one says so
    print(f"error: {rank + ': ' if rank else ''}{message}", file=sys.stderr)
    return code


def _print_problems(problems: list[str]) -> None:
    for p in problems:
        print(f"error: {p} (skipped)", file=sys.stderr)


def _judge_names(args: argparse.Namespace) -> list[str]:
    names = [n.strip() for n in str(args.judge).split(",") if n.strip()]
    known = judges.names()
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise ValueError(f"--judge must be one of {', '.join(known)} (several, separated by "
                         f"commas, only with --judge-check alone); got {args.judge!r}")
    return names


def _make_judge(name: str, args: argparse.Namespace, settings_of) -> Any:
    """The judge ``name`` from the flags: its threshold (several judges checked at once:
    --threshold is for the ones that take one), and what its entry needs (the NLI model of
    the settings, a server)."""
    entry = judges.entry(name)
    threshold = (args.threshold if entry.threshold is not None or len(_judge_names(args)) == 1
                 else None)
    needs: dict[str, Any] = {}
    if "nli" in entry.needs:
        needs["settings"] = settings_of(args)
    if "server" in entry.needs:
        settings = settings_of(args)
        same_server = not args.judge_endpoint
        needs.update(endpoint=args.judge_endpoint or settings.llm_endpoint,
                     model=args.judge_model, api=args.judge_api,
                     # the LLM's own server judging: its key too, unless one is given
                     api_key_env=args.judge_api_key_env or (
                         settings.llm_api_key_env if same_server else None))
    return judges.make_judge(name, threshold, **needs)


def _guarded(work, action: str) -> int:
    """Run ``work()`` -> exit status; every expected failure becomes one line."""
    from ..errors import AnalysisOutOfMemory, InvalidModelOutput, ModelLoadError, OptionError
    from .calibration import CalibrationError
    from .data import DataError
    from .judges import JudgeError
    from .runs import RunError, RunFileError

    try:
        return work()
    except DataError as err:
        _print_problems(err.problems)
        return _error(str(err))
    except (OptionError, RunError, RunFileError, CalibrationError) as err:
        return _error(f"{action}: {err}" if action else str(err))
    except JudgeError as err:
        return _error(f"the judge failed: {err} (finished questions are kept; run the same "
                      "command again to resume)", EXIT_FAILURE)
    except AnalysisOutOfMemory as err:
        return _error(f"{err} With --batch-questions, that many questions' answers are in "
                      "memory at once: run the same command with a smaller --batch-questions to "
                      "resume (finished questions are kept; the batch size may change between "
                      "resumes).", EXIT_FAILURE)
    except (ModelLoadError, InvalidModelOutput) as err:
        return _error(f"{err} (finished questions are kept; run the same command again to "
                      "resume)", EXIT_FAILURE)
    except ValueError as err:  # a judge's bad option (threshold, endpoint URL, name)
        return _error(str(err))
    except KeyboardInterrupt:
        return _error("interrupted (finished questions are kept; run the same command again "
                      "to resume)", 130)


def run_command(args: argparse.Namespace, settings_of) -> int:
    """``settings_of(args)``: the CLI's Settings from the flags."""
    if args.bootstrap < 1:
        return _error(f"--bootstrap must be a positive integer; got {args.bootstrap}")
    modes = [m for m, on in (("--compare", args.compare), ("--rejudge", args.rejudge),
                             ("--merge", args.merge), ("--data", args.data)) if on]
    if len(modes) > 1:
        return _error(f"{' and '.join(modes)} are separate modes; give one")
    from .parallel import launched_processes

    if launched_processes() > 1 and not args.data:
        return _error("under accelerate launch or torchrun the processes share a run (--data "
                      "SOURCE --out RUN_DIR); start --compare, --rejudge, --merge, --calibrate "
                      "RUN_DIR and --judge-check in one process")
    if args.shard and not args.data:
        return _error("--shard K/N goes with --data SOURCE --out RUN_DIR (one share of a run)")
    if args.merge:
        if args.out or args.calibrate is not None or args.judge_check:
            return _error("--merge takes the new run's folder and the parts (OUT PART...), "
                          "and --bootstrap, --no-plots")
        return _guarded(lambda: _merge(args), "cannot merge")
    if args.compare:
        if args.out or args.calibrate is not None or args.judge_check:
            return _error("--compare takes two run directories (and --bootstrap, --seed, "
                          "--json)")
        return _guarded(lambda: _compare(args), "cannot compare")
    if args.calibrate:  # an existing run
        if args.data or args.out or args.rejudge:
            return _error("--calibrate RUN_DIR takes no --data, --out or --rejudge (give "
                          "--calibrate alone after --data and --out to calibrate the new run)")
        return _guarded(lambda: _calibrate(args, args.calibrate), f"cannot calibrate "
                        f"{args.calibrate!r}")
    if args.labels and not args.rejudge:
        return _error("--labels goes with --rejudge RUN_DIR (a data file gives labels in its "
                      "lines' \"correct\")")
    if args.judge_check and not args.data and not args.rejudge:
        return _guarded(lambda: _judge_check(args, settings_of), "")
    if not args.out or not (args.data or args.rejudge):
        return _error("evaluate needs --data SOURCE and --out RUN_DIR (or --rejudge RUN_DIR "
                      "--out NEW_DIR, --judge-check FILE, --compare, or --calibrate RUN_DIR)")
    code = _guarded(lambda: _evaluate(args, settings_of), "")
    if code in (0, EXIT_FAILURE) and args.calibrate == "" and _main_process():
        calibrated = _guarded(lambda: _calibrate(args, args.out),
                              f"cannot calibrate {args.out!r}")
        return calibrated or code
    return code


def _main_process() -> bool:
    """False in a process of several other than the main one (which reports for the run)."""
    from .parallel import processes

    found = processes()
    return found is None or found.main


def _merge(args: argparse.Namespace) -> int:
    from .merge import merge

    out, *parts = args.merge
    report = merge(out, parts, resamples=args.bootstrap, plots=not args.no_plots)
    print(_results_text(report, pathlib.Path(out)))
    return _summary(report, "merged")


def _compare(args: argparse.Namespace) -> int:
    from .compare import compare_runs, markdown
    from .runs import read_run

    a, b = (read_run(d) for d in args.compare)
    result = compare_runs(a, b, *args.compare, resamples=args.bootstrap, seed=args.seed or 0)
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if args.json else markdown(result))
    return 0


def _calibrate(args: argparse.Namespace, run_dir: str) -> int:
    from .calibration import calibrate

    path = calibrate(run_dir, args.measure, args.scoring, args.calibration_out,
                     plots=not args.no_plots)
    from .calibration import load

    held = load(path).held_out
    print(f"calibration written to {path}; held out ({held['folds']}-fold): Brier "
          f"{held['brier']:.4f} (the accuracy alone: {held['brier_constant']:.4f}), ECE "
          f"{held['ece']:.4f}", file=sys.stderr)
    return 0


def _check_for_run(args: argparse.Namespace, judge) -> tuple[Any, Any]:
    """The run's judge on ``--judge-check``: (its result, the check set)."""
    from . import judge_check

    check = judge_check.read_check_set(args.judge_check)
    _print_problems(check.problems)
    result = judge_check.check_judge(judge, check.rows)
    print(f"judge check: {result.agreement * 100:.1f}% agreement on {args.judge_check} "
          f"(n = {result.n})", file=sys.stderr)
    return result, check


def _judge_check(args: argparse.Namespace, settings_of) -> int:
    """Each ``--judge``'s figures on ``--judge-check`` on stdout."""
    from . import judge_check

    check = judge_check.read_check_set(args.judge_check)
    _print_problems(check.problems)
    chosen = [_make_judge(n, args, settings_of) for n in _judge_names(args)]
    results = [judge_check.check_judge(j, check.rows) for j in chosen]
    if args.json:
        print(json.dumps([r.to_dict(args.judge_check) for r in results], indent=2))
    else:
        sys.stdout.write(judge_check.format_results(results, args.judge_check))
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
        return EXIT_FAILURE
    return 0


def _evaluate(args: argparse.Namespace, settings_of) -> int:
    from .parallel import processes
    from .rejudge import rejudge
    from .run import EvalConfig, evaluate
    from .shares import parse_shard

    if args.limit is not None and args.limit < 1:
        return _error(f"--limit must be a positive integer; got {args.limit}")
    if args.batch_questions < 1:
        return _error(f"--batch-questions must be a positive integer; got {args.batch_questions}")
    names = _judge_names(args)
    if len(names) > 1:
        return _error("a run takes one --judge (several only with --judge-check alone)")
    from . import judge_check

    shard = parse_shard(args.shard) if args.shard else None
    here = processes()  # this process, when a launcher started several
    main = here is None or here.main
    settings = settings_of(args)
    judge = _make_judge(names[0], args, settings_of)
    out = pathlib.Path(args.out)
    checked = _check_for_run(args, judge) if args.judge_check and main else None
    if args.rejudge:
        report = rejudge(args.rejudge, out, judge, labels_file=args.labels,
                         resamples=args.bootstrap, plots=not args.no_plots, checked=checked)
    else:
        if checked is not None:
            if out.exists() and not out.is_dir():
                return _error(f"--out {args.out!r} is not a directory")
            out.mkdir(parents=True, exist_ok=True)
            judge_check.save(*checked, out)
        config = EvalConfig(data=args.data, out=out, judge=judge, settings=settings,
                            limit=args.limit, resamples=args.bootstrap,
                            plots=not args.no_plots, batch_questions=args.batch_questions,
                            shard=shard)
        report = evaluate(config, processes=here)
        if report is None:  # a process of several other than the main one: it has reported
            return 0
    print(_results_text(report, out))
    return _summary(report, "re-judged" if args.rejudge else "evaluated")


def _results_text(report, out: pathlib.Path) -> str:
    """The run's figures in a few lines: accuracy, each measure's AUROC and PRR (LN -> MARS),
    the top of the table of every method."""
    labels = report.labels or {}
    given = f" ({labels['given']} labels given)" if labels.get("given") else ""
    lines = [f"{report.n} questions, accuracy {(report.accuracy or 0.0) * 100:.1f}%{given}; "
             "AUROC and PRR (LN -> MARS):"]
    for m in report.measures:
        cells = []
        for name in ("auroc", "prr"):
            ln, ma = (report.metrics[name][m].get(s) for s in ("length_normalized", "mars"))
            cells.append("n/a" if ln is None or ma is None or ln.value is None
                         or ma.value is None else f"{ln.value:.3f} -> {ma.value:.3f}")
        lines.append(f"  {m}: AUROC {cells[0]}, PRR {cells[1]}")
    ranked = [row for row in report.methods_table.rows if row.metrics["auroc"].value is not None]
    if ranked:
        lines.append(f"every method ranked by AUROC ({len(ranked)} rows; the top 5): " + "; ".join(
            f"{row.label} {row.metrics['auroc'].value:.3f}" for row in ranked[:5]))
    lines.append(f"report: {out / 'report.md'}")
    return "\n".join(lines)


def _summary(report, verb: str) -> int:
    """The last line on stderr; exit status 1 when a line or a question was skipped."""
    labels = report.labels or {}
    text = (f"{verb} {report.n} questions ({labels.get('judged', 0)} judged by "
            f"{report.judge.get('name')}, {labels.get('given', 0)} labels given)")
    if report.skipped_lines:
        text += f"; {len(report.skipped_lines)} bad line(s) skipped"
    if report.failed:
        text += f"; {len(report.failed)} question(s) failed and were skipped"
    print(text, file=sys.stderr)
    return EXIT_FAILURE if report.skipped_lines or report.failed else 0
