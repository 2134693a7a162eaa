"""What the ``evaluate`` subcommands share: the flags of a judge, of a report and of a
calibration, the one-line errors and exit statuses, and the few lines that end a run. (The model
and per-request flags, and the Settings they give, are :mod:`mars_demo.flags`', as for every
command.) A subcommand imports this module, never another subcommand.

Exit statuses: 0 done; 1 a line or a question was skipped, or something failed while running
(finished questions are kept); 2 nothing usable was given (or a flag is wrong).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from .. import MEASURES, judges
from ..checks import VARIANTS
from ..sample_size import caution

EXIT_USAGE = 2
EXIT_FAILURE = 1


def add_judge(parser: argparse.ArgumentParser, *, several: bool = False) -> None:
    """``--judge`` (one, or with ``several`` a list separated by commas), ``--threshold`` and
    the flags of a judge that runs on a server."""
    found = judges.entries()
    parser.add_argument(
        "--judge", default=judges.DEFAULT_JUDGE, metavar="NAME[,NAME...]" if several else "NAME",
        help="correctness of the greedy answer: "
        + ", ".join(e.help() for e in found.values()).replace("%", "%%")
        + f"; default: {judges.DEFAULT_JUDGE}"
        + (". Several names separated by commas are checked side by side" if several else ""))
    parser.add_argument("--threshold", type=float, metavar="T",
                        help="threshold of " + " or ".join(
                            f"{e.name} (default {e.threshold:g})" for e in found.values()
                            if e.threshold is not None))
    parser.add_argument("--judge-endpoint", metavar="URL",
                        help="OpenAI-compatible server of the llm judge (default: "
                        "--llm-endpoint)")
    parser.add_argument("--judge-model", metavar="NAME", help="model name on the judge server")
    parser.add_argument("--judge-api", choices=("chat", "completions"), default="chat",
                        help="judge endpoint: /v1/chat/completions (default) or "
                        "/v1/completions")
    parser.add_argument("--judge-api-key-env", metavar="VAR",
                        help="NAME of the variable holding the judge server's API key")


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", type=positive("--bootstrap"), default=1000, metavar="N",
                        help="bootstrap resamples for the 95%% intervals (default 1000)")


def add_report(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap`` and ``--no-plots``: how a report is written."""
    add_bootstrap(parser)
    parser.add_argument("--no-plots", action="store_true", help="write no plots")


def positive(flag: str) -> Callable[[str], int]:
    """An argparse type: a whole number of at least 1 (the message names ``flag``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be a positive integer; got {text!r}")
        return value

    return parse


def error(message: str, code: int = EXIT_USAGE) -> int:
    """``message`` as one line on stderr (naming the process when a launcher started several);
    returns ``code``."""
    from ..parallel import where

    rank = where()
    print(f"error: {rank + ': ' if rank else ''}{message}", file=sys.stderr)
    return code


def print_problems(problems: list[str]) -> None:
    for p in problems:
        print(f"error: {p} (skipped)", file=sys.stderr)


def judge_names(args: argparse.Namespace, several: bool = False) -> list[str]:
    """The names of ``--judge`` (several only where ``several``); ValueError naming the
    judges there are."""
    names = [n.strip() for n in str(args.judge).split(",") if n.strip()]
    known = judges.names()
    if not names or any(n not in known for n in names):
        raise ValueError(f"--judge must be one of {', '.join(known)} (several, separated by "
                         f"commas, only with evaluate check-judge); got {args.judge!r}")
    if len(names) > 1 and not several:
        raise ValueError("this takes one --judge (several only with evaluate check-judge)")
    return names


def make_judge(name: str, args: argparse.Namespace, settings: Callable[[], Any],
               count: int = 1) -> Any:
    """The judge ``name`` from the flags: its threshold (with ``count`` judges checked at once,
    --threshold is for the ones that take one), and what its entry needs (the NLI model of
    ``settings()``, a server)."""
    entry = judges.entry(name)
    threshold = args.threshold if entry.threshold is not None or count == 1 else None
    needs: dict[str, Any] = {}
    if "nli" in entry.needs:
        needs["settings"] = settings()
    if "server" in entry.needs:
        made = settings()
        same_server = not args.judge_endpoint
        needs.update(endpoint=args.judge_endpoint or made.llm_endpoint,
                     model=args.judge_model, api=args.judge_api,
                     # the LLM's own server judging: its key too, unless one is given
                     api_key_env=args.judge_api_key_env or (
                         made.llm_api_key_env if same_server else None))
    return judges.make_judge(name, threshold, **needs)


def guarded(work: Callable[[], int], action: str = "") -> int:
    """Run ``work()`` -> exit status; every expected failure becomes one line."""
    from ...errors import AnalysisOutOfMemory, InvalidModelOutput, ModelLoadError, OptionError
    from ..calibration import CalibrationError
    from ..data import DataError
    from ..judges import JudgeError
    from ..runs import RunError, RunFileError

    try:
        return work()
    except DataError as err:
        print_problems(err.problems)
        return error(str(err))
    except (OptionError, RunError, RunFileError, CalibrationError) as err:
        return error(f"{action}: {err}" if action else str(err))
    except JudgeError as err:
        return error(f"the judge failed: {err} (finished questions are kept; run the same "
                     "command again to resume)", EXIT_FAILURE)
    except AnalysisOutOfMemory as err:
        return error(f"{err} With --batch-questions, that many questions' answers are in "
                     "memory at once: run the same command with a smaller --batch-questions to "
                     "resume (finished questions are kept; the batch size may change between "
                     "resumes).", EXIT_FAILURE)
    except (ModelLoadError, InvalidModelOutput) as err:
        return error(f"{err} (finished questions are kept; run the same command again to "
                     "resume)", EXIT_FAILURE)
    except ValueError as err:  # a judge's bad option (threshold, endpoint URL, name)
        return error(str(err))
    except KeyboardInterrupt:
        return error("interrupted (finished questions are kept; run the same command again "
                     "to resume)", 130)


def in_one_process(job: str, work: Callable[[], int], action: str = "") -> int:
    """:func:`guarded` ``work()`` of a job that runs in one process (every one but ``run``):
    refused when a launcher started several."""
    from ..parallel import launched_processes

    if launched_processes() > 1:
        return error(f"under accelerate launch or torchrun the processes share a run (evaluate "
                     f"run --data SOURCE --out RUN_DIR); start evaluate {job} in one process")
    return guarded(work, action)


def results_text(report: Any, out: Any) -> str:
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
    warned = caution(report)  # a run too small to trust its intervals (and these figures)
    if warned:
        lines.append(warned)
    lines.append(f"report: {out / 'report.md'}")
    return "\n".join(lines)


def summary(report: Any, verb: str) -> int:
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


def check_for_run(path: str, judge: Any) -> tuple[Any, Any]:
    """The run's judge on the human labels of ``path`` (``--judge-check``): (its result, the
    check set), its agreement said on stderr."""
    from .. import judge_check

    check = judge_check.read_check_set(path)
    print_problems(check.problems)
    result = judge_check.check_judge(judge, check.rows)
    print(f"judge check: {result.agreement * 100:.1f}% agreement on {path} "
          f"(n = {result.n})", file=sys.stderr)
    return result, check


def add_judge_check(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge-check", metavar="FILE",
                        help="JSONL of human-labelled answers (question, answers, answer, "
                        "correct): the judge's agreement with them is kept in the report")


def add_measure(parser: argparse.ArgumentParser, out_flag: str = "--calibration-out") -> None:
    """The flags that say what is calibrated and where it goes (``evaluate calibrate``, and
    ``evaluate run --calibrate``)."""
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


def calibrate_run(args: argparse.Namespace, run_dir: str) -> int:
    """Calibrate ``run_dir`` as the flags of :func:`add_measure` say; its held-out quality on
    stderr."""
    from ..calibration import calibrate, load

    path = calibrate(run_dir, args.measure, args.scoring, args.calibration_out,
                     plots=not args.no_plots)
    held = load(path).held_out
    print(f"calibration written to {path}; held out ({held['folds']}-fold): Brier "
          f"{held['brier']:.4f} (the accuracy alone: {held['brier_constant']:.4f}), ECE "
          f"{held['ece']:.4f}", file=sys.stderr)
    return 0
