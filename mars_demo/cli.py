"""Command line: ``ask`` a question, ``score`` answers made anywhere, ``evaluate`` on labelled
questions (see :mod:`mars_demo.evaluation.cli`), ``make-tiny-models``.

- ``python -m mars_demo ask "QUESTION" [options]``: generate and score; a readable report or
  ``--json`` (the analysis JSON).
- ``python -m mars_demo score FILE.json`` (``-`` for stdin): score an answer set (or an analysis
  JSON, e.g. the output of ``ask --json``, re-scored with other options) without generating. A
  JSONL file of many answer sets gives JSONL of analyses, one line each as it is done, a progress
  bar on stderr and a summary at the end; a bad line is reported with its number and skipped.

Every option's flag, range and help come from :mod:`mars_demo.options`. Bad input (empty
question, unknown model path or id, out-of-range option, a malformed answer set) prints one clear
line on stderr and exits with status 2 (1 for a failure while running); never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from typing import Any, Sequence

from .errors import AnalysisOutOfMemory, InvalidModelOutput, ModelLoadError, OptionError
from .flags import add_model_flags, add_request_flags, settings_from
from .readable import SE_NEGATIVE, format_report, terminal_safe  # noqa: F401 (re-exported)
from .settings import Settings

EXIT_USAGE = 2
EXIT_FAILURE = 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        self.exit(EXIT_USAGE, f"error: {message} (see --help)\n")


def _prog() -> str:
    """How the user called the command line: ``mars-demo`` (the installed script) or
    ``python -m mars_demo``, so help and errors show the command they typed."""
    import os
    import sys

    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "mars-demo" if name.startswith("mars-demo") else "python -m mars_demo"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=_prog(), description="MARS: meaning-aware uncertainty of LLM answers.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ask = sub.add_parser("ask", help="generate answers to one question and score them")
    ask.add_argument("question")
    add_model_flags(ask)
    add_request_flags(ask)
    ask.add_argument("--json", action="store_true", help="print the analysis as JSON")
    add_report_flags(ask)

    score = sub.add_parser(
        "score",
        help="score answers made anywhere (an answer set or analysis JSON, or JSONL of many)",
        description="Score answer sets without generating. FILE is JSON (one answer set, e.g. "
        "the output of `ask --json`) or JSONL (one per line); - reads stdin. Models and scoring "
        "options not given are taken from the file's recorded settings when it has them (the "
        "models that scored it), then from the defaults; the models used are named on stderr.",
    )
    score.add_argument("file", help="answer set JSON, JSONL of answer sets, or - for stdin")
    # not given: the models and options the file recorded, else the defaults
    add_model_flags(score, keep_default=False)
    add_request_flags(score, keep_default=False, scoring_only=True)
    score.add_argument("--json", action="store_true",
                       help="print the analysis as JSON (JSONL input always gives JSONL)")
    score.add_argument("--judge-again", action="store_true",
                       help="score a saved analysis' answers afresh: without it, what the "
                       "analysis saved of the same models (the NLI verdicts and probabilities, "
                       "an extra pass's outputs) is reused as it is")
    score.add_argument("--methods-only", action="store_true",
                       help="recompute only the methods (--methods, else those the file "
                       "recorded) of a saved analysis, from its JSON alone: no model is loaded "
                       "and nothing else changes")
    add_report_flags(score)

    sub.add_parser("methods", help="list the uncertainty methods (ids for --methods), what "
                   "each reads and costs")

    from .evaluation.cli import add_parser as add_evaluate_parser

    add_evaluate_parser(sub)

    tiny = sub.add_parser("make-tiny-models", help="write tiny models for offline runs and tests")
    tiny.add_argument("dir")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument(
        "--trained", action="store_true",
        help="train the LLM, importance and NLI models on a few dozen facts, so that they give "
        "real answers to those questions (a few minutes on 2 CPU cores); default: random weights",
    )
    tiny.add_argument(
        "--llm-shape", choices=("tiny", "vllm"), default="tiny",
        help="the LLM's shape: tiny (default), or vllm (attention heads of 64 dimensions, which "
        "vLLM's CPU build needs; random weights only)",
    )
    tiny.add_argument(
        "--gguf", action="store_true",
        help="also write the LLM as DIR/llm.gguf (float32) for a llama.cpp server: python -m "
        "llama_cpp.server --model DIR/llm.gguf (needs the gguf package)",
    )
    return p


def add_report_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of what ``ask`` and ``score`` print and what their verdict cites."""
    parser.add_argument("--details", action="store_true",
                        help="the whole report: each token's probability and weights, the "
                        "samples and their meanings, both scorings, the other methods, timings")
    parser.add_argument("--verbose", action="store_true",
                        help="let the model libraries print their notices and progress bars "
                        "(silenced by default; real warnings are shown either way, once each)")
    parser.add_argument("--calibration", metavar="FILE",
                        help="a calibration made by `evaluate calibrate RUN_DIR`: the verdict "
                        "gives the answer's chance of being right where it covers the answer "
                        "(and its run, when FILE is in the run's folder, places each value)")
    parser.add_argument("--reference", metavar="RUN_DIR",
                        help="an `evaluate run` folder: each key value is placed among its "
                        "answers, and the verdict says how its answers at the same level fared")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["evaluate"] and argv[1:2] and argv[1].startswith("--") and argv[1] != "--help":
        from .evaluation.cli import JOBS

        print(f"error: evaluate takes its job first, then its flags: {_prog()} evaluate JOB ... "
              f"with JOB one of {', '.join(JOBS)} (e.g. evaluate run --data SOURCE --out "
              "RUN_DIR; see evaluate --help)", file=sys.stderr)
        return EXIT_USAGE
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, or a flag refused (one line said why): its status
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    if args.command == "make-tiny-models":
        from .devtools.tiny import make_tiny_models

        try:
            if args.trained:
                print("training the tiny models on their facts (a few minutes)...", file=sys.stderr)
            paths = make_tiny_models(args.dir, seed=args.seed, trained=args.trained,
                                     llm_shape=args.llm_shape)
            if args.gguf:
                from .devtools.gguf import write_gguf

                paths["gguf"] = write_gguf(paths["llm"], pathlib.Path(args.dir) / "llm.gguf")
        except OSError as err:
            print(f"error: cannot write the tiny models to {args.dir!r}: {err}", file=sys.stderr)
            return EXIT_FAILURE
        except ImportError as err:  # --gguf without the gguf package
            print(f"error: {err} (pip install gguf)", file=sys.stderr)
            return EXIT_FAILURE
        except ValueError as err:  # --trained with --llm-shape vllm; --gguf of a vLLM shape
            print(f"error: {err}", file=sys.stderr)
            return EXIT_USAGE
        for name, path in paths.items():
            print(f"{name}: {path}")
        return 0
    # A console that cannot show every character (e.g. a cp1252 pipe) gets escapes, not a crash.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        if args.command == "methods":
            from .methods.listing import text

            print(terminal_safe(text()).replace("\\n", "\n"))
            return 0
        if args.command == "score":
            return _score_command(args)
        if args.command == "evaluate":  # each subcommand's module runs it
            return args.evaluate_main(args)
        return _ask_command(args)
    except BrokenPipeError:  # the reader went away (e.g. `| head`): not an error worth a traceback
        try:  # and no second complaint when Python flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0


def _run(work) -> tuple[Any, int | None]:
    """Run ``work()``; a failure becomes one line on stderr and an exit status."""
    try:
        return work(), None
    except (OptionError, ModelLoadError) as err:
        print(f"error: {err}", file=sys.stderr)
        return None, EXIT_USAGE if isinstance(err, OptionError) else EXIT_FAILURE
    except (AnalysisOutOfMemory, InvalidModelOutput) as err:
        print(f"error: {err}", file=sys.stderr)
        return None, EXIT_FAILURE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return None, 130
    except Exception as err:  # a defect, but the user still gets one line, not a traceback
        print(f"error: {_unexpected(err)}", file=sys.stderr)
        return None, EXIT_FAILURE


def _unexpected(err: BaseException) -> str:
    detail = (str(err).strip().splitlines() or [""])[0][:300]
    return (
        f"the analysis failed unexpectedly ({type(err).__name__}: {detail}); "
        "please report this with the command you ran"
    )


def _print_result(result, args: argparse.Namespace, reference: Any = None) -> None:
    if args.json:
        encoding = (getattr(sys.stdout, "encoding", None) or "").lower()
        utf = encoding.replace("-", "").replace("_", "").startswith("utf")
        print(json.dumps(result.to_dict(), ensure_ascii=not utf, indent=2))
    else:
        print(result.report(details=args.details, reference=reference))
    sys.stdout.flush()


def _engine(args: argparse.Namespace, settings: Settings):
    """The engine of ``ask`` or ``score``: ``settings``, with the calibration and reference
    run of the flags that its verdicts cite (:func:`mars_demo.evaluation.reference.grounds`)."""
    from .engine import Engine
    from .evaluation.reference import grounds

    calibration, reference = grounds(args.calibration, args.reference)
    return Engine(settings, calibration=calibration, reference=reference)


def _quiet(args: argparse.Namespace) -> None:
    """Before the models run: the libraries' notices and bars silenced unless ``--verbose``
    (:mod:`mars_demo.terminal`)."""
    if not args.verbose:
        from .terminal import quiet

        quiet()


def _ask_command(args: argparse.Namespace) -> int:
    _quiet(args)
    engine, code = _run(lambda: _engine(args, settings_from(args)))
    if code is not None:
        return code
    result, code = _run(lambda: engine.analyze(
        args.question, progress=None if args.json else _stderr_progress))
    if code is not None:
        return code
    _print_result(result, args, engine.reference)
    return 0


def _read_input(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as f:
        return f.read()


def _score_command(args: argparse.Namespace) -> int:
    _SAID.clear()  # each command names its models (once, however many lines it scores)
    try:
        text = _read_input(args.file)
    except (OSError, UnicodeDecodeError) as err:
        print(f"error: cannot read {args.file!r}: {err}", file=sys.stderr)
        return EXIT_USAGE
    single: Any = None
    if not args.file.endswith(".jsonl"):
        try:
            single = json.loads(text)
        except json.JSONDecodeError:
            single = None  # JSONL (or broken JSON: each line then says what is wrong)
        except RecursionError:
            print("error: the input nests too deeply to be an answer set", file=sys.stderr)
            return EXIT_USAGE
    engine, code = _run(lambda: _engine(args, settings_from(args)))
    if code is not None:
        return code
    if not args.methods_only:  # only then do models run
        _quiet(args)
    if single is not None:
        recorded = single.get("settings") if isinstance(single, dict) else None
        result, code = _run(
            lambda: _score_one(engine, args, single, recorded if isinstance(recorded, dict)
                               else None)
        )
        if code is not None:
            return code
        _print_result(result, args, engine.reference)
        return 0
    return _score_lines(engine, args, text.split("\n"))  # JSON keeps U+2028 raw


def _score_lines(engine, args: argparse.Namespace, lines: list[str]) -> int:
    """JSONL in, JSONL out: each good line's analysis is written (and flushed) as soon as it is
    done; a bad line is reported on stderr with its number and skipped; a model that cannot be
    loaded stops the run (said once, with the line it stopped at)."""
    from tqdm import tqdm

    numbered = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    if not numbered:  # as evaluate says of a data file with no question
        print(f"error: the file {args.file!r} has no usable answer set", file=sys.stderr)
        return EXIT_USAGE
    bad: list[int] = []
    done = 0
    stopped = ""
    started = time.perf_counter()
    with tqdm(total=len(numbered), unit="set", desc="scoring", file=sys.stderr,
              dynamic_ncols=True) as bar:
        for n, line in numbered:
            try:
                result, message = _score_line(engine, args, line)
            except ModelLoadError as err:  # the lines after it would need the same models
                bar.write(f"error: line {n}: {err}", file=sys.stderr)
                stopped = f"; stopped at line {n}: a model cannot be loaded"
                break
            if result is None:
                bad.append(n)
                bar.write(f"error: line {n}: {message}", file=sys.stderr)
            else:
                sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
                sys.stdout.flush()
                done += 1
            bar.update(1)
    took = time.perf_counter() - started
    summary = f"scored {done} of {len(numbered)} answer sets in {took:.1f} s"
    if bad:
        shown = ", ".join(map(str, bad[:20])) + (" ..." if len(bad) > 20 else "")
        summary += f"; {len(bad)} bad line(s) skipped: {shown}"
    print(summary + stopped, file=sys.stderr)
    return EXIT_FAILURE if bad or stopped else 0


def _score_line(engine, args: argparse.Namespace, line: str):
    """(result, None) or (None, the one-line reason)."""
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as err:
        return None, f"not valid JSON ({err})"
    try:
        recorded = data.get("settings") if isinstance(data, dict) else None
        return _score_one(engine, args, data, recorded if isinstance(recorded, dict)
                          else None), None
    except ModelLoadError:
        raise  # not this line's fault: the caller stops
    except (OptionError, AnalysisOutOfMemory, InvalidModelOutput) as err:
        return None, str(err)
    except Exception as err:  # a defect: this line fails, the others go on
        return None, _unexpected(err)


def _score_one(engine, args: argparse.Namespace, data: Any, recorded: dict[str, Any] | None):
    """One answer set scored, or with ``--methods-only`` one saved analysis' methods
    recomputed from its JSON (no model is loaded)."""
    settings = settings_from(args, recorded)
    if not args.methods_only:
        from .engine.door import as_answer_set

        answers = as_answer_set(data)  # a bad answer set is refused before anything is said
        _say_models(args, settings, recorded)
        return engine.score(answers if args.judge_again else data, settings)
    from .methods import compute_methods
    from .result import AnalysisResult
    from .verdict import verdict

    if not isinstance(data, dict) or not {"cluster_ids", "nli", "uncertainty"} <= set(data):
        raise OptionError("--methods-only needs a saved analysis (the JSON of ask --json or "
                          "score --json), not an answer set")
    try:
        result = AnalysisResult.from_dict(data)
        result.methods = compute_methods(data, settings.method_ids, settings.end_token)
    except (KeyError, TypeError, ValueError) as err:
        raise OptionError(f"cannot recompute the methods of this analysis: {err}") from err
    result.settings["methods"] = list(settings.method_ids)
    result.settings["end_token"] = settings.end_token
    # the verdict again, as the engine would: a calibration may read a recomputed method
    result.verdict = verdict(result, engine.calibration, engine.reference)
    return result


_SAID: set[str] = set()


def _say_models(args: argparse.Namespace, settings: Settings,
                recorded: dict[str, Any] | None) -> None:
    """Name on stderr, once per set of models in a command, the scoring models ``score`` uses
    and where each comes from: its flag, the file's recorded settings, or the default."""
    from .methods import optional_models
    from .options import MODEL_LABELS, OPTIONS

    fields = (["bem", "chunker"] if settings.importance_method == "bem" else ["importance"])
    fields += ["nli", *optional_models(settings.method_ids)]
    parts = []
    for field in fields:
        value = getattr(settings, field)
        if hasattr(args, field):
            source = OPTIONS[field].flag
        elif recorded and recorded.get(field) == value and value is not None:
            source = "recorded in the file"
        else:
            source = "the default"
        shown = value if value is not None else OPTIONS[field].auto
        parts.append(f"{MODEL_LABELS.get(field, field)} {shown} ({source})")
    line = "scoring with " + ", ".join(parts)
    if line not in _SAID:
        _SAID.add(line)
        print(terminal_safe(line), file=sys.stderr, flush=True)


def _stderr_progress(stage: str, fraction: float) -> None:
    if fraction == 0.0:
        print(f"... {stage}", file=sys.stderr, flush=True)
