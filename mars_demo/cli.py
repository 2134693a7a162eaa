"""Command line: ``python -m mars_demo ask "QUESTION" [options]`` and ``make-tiny-models DIR``.

Bad input (empty question, unknown model path or id, out-of-range option) prints one clear line
on stderr and exits with status 2 (1 for a failure while running); never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Sequence

from . import settings as S

EXIT_USAGE = 2
EXIT_FAILURE = 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        self.exit(EXIT_USAGE, f"error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m mars_demo", description="MARS: meaning-aware uncertainty of LLM answers.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ask = sub.add_parser("ask", help="analyze one question and print a report or JSON")
    ask.add_argument("question")
    ask.add_argument("--llm", help="Hub id, local directory or preset (" + ", ".join(S.LLM_PRESETS) + "); default: 7B on GPU, small CPU preset otherwise")
    ask.add_argument("--importance", default=S.DEFAULT_IMPORTANCE, help="importance model id or directory (default: %(default)s)")
    ask.add_argument("--nli", help=f"NLI model id or directory (default: {S.DEFAULT_NLI} on GPU, {S.CPU_NLI} on CPU)")
    ask.add_argument("--bem", default=S.DEFAULT_BEM, help="answer-equivalence model for --importance-method bem")
    ask.add_argument("--chunker", default=S.DEFAULT_CHUNKER, help="Flair chunker for --importance-method bem")
    ask.add_argument("--samples", type=int, default=5, help=f"sampled answers, {S.SAMPLES_RANGE[0]}-{S.SAMPLES_RANGE[1]} (default: %(default)s)")
    ask.add_argument("--temperature", type=float, default=0.5, help="sampling temperature (default: %(default)s)")
    ask.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling; 1.0 = off (default)")
    ask.add_argument("--max-new-tokens", type=int, default=64, help="token limit per answer (default: %(default)s)")
    ask.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    ask.add_argument("--prompt", choices=S.PROMPTS, help="prompt preset (default: chat for instruction models, paper otherwise)")
    ask.add_argument("--importance-method", choices=S.IMPORTANCE_METHODS, default="model")
    ask.add_argument("--normalization", choices=S.NORMALIZATIONS, default="sum")
    ask.add_argument("--softmax-temperature", type=float, default=0.1, help="for --normalization softmax")
    ask.add_argument("--distribution", choices=S.DISTRIBUTIONS, default="equal")
    ask.add_argument("--cluster-rule", choices=S.CLUSTER_RULES, default="strict")
    q = ask.add_mutually_exclusive_group()
    q.add_argument("--4bit", dest="load_in_4bit", action="store_true", default=None, help="load the LLM in 4-bit (default on CUDA)")
    q.add_argument("--no-4bit", dest="load_in_4bit", action="store_false", help="load the LLM in full precision")
    ask.add_argument("--json", action="store_true", help="print the analysis as JSON")

    tiny = sub.add_parser("make-tiny-models", help="write tiny models for offline runs and tests")
    tiny.add_argument("dir")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument(
        "--trained", action="store_true",
        help="train the LLM, importance and NLI models on a few dozen facts, so that they give "
        "real answers to those questions (a few minutes on 2 CPU cores); default: random weights",
    )
    return p


def _settings(args: argparse.Namespace) -> S.Settings:
    return S.Settings(
        llm=args.llm, importance=args.importance, nli=args.nli, bem=args.bem, chunker=args.chunker,
        samples=args.samples, temperature=args.temperature, top_p=args.top_p,
        max_new_tokens=args.max_new_tokens, seed=args.seed, prompt=args.prompt,
        importance_method=args.importance_method, normalization=args.normalization,
        softmax_temperature=args.softmax_temperature, distribution=args.distribution,
        cluster_rule=args.cluster_rule, load_in_4bit=args.load_in_4bit,
    )


def _bar(weight: float, width: int = 20) -> str:
    n = max(0, min(width, round(weight * width)))
    return "#" * n + "." * (width - n)


def format_report(result) -> str:
    """A readable report of an :class:`~mars_demo.result.AnalysisResult`."""
    lines = [f"Question: {result.question}", "", f"Answer: {result.greedy.text or '(empty)'}", ""]
    lines.append("  token                  p      LN w   MARS w  phrase")
    g = result.greedy
    L = len(g.tokens)
    for l, tok in enumerate(g.tokens):
        k = g.phrase_of_token[l] if g.phrase_of_token else -1
        phrase = g.phrases[k].text if 0 <= k < len(g.phrases) else "-"
        lines.append(
            f"  {tok.text!r:<20} {math.exp(tok.logprob):6.3f}  {1 / L:6.3f}  {g.mars_weights[l]:6.3f}"
            f"  {_bar(g.mars_weights[l], 10)} {phrase}"
        )
    lines += ["", "Phrases (importance score -> weight):"]
    lines += [f"  {p.text!r:<30} {p.score:6.3f} -> {p.weight:6.3f}" for p in g.phrases]
    lines += ["", "Samples (cluster, LN score, MARS score):"]
    for cid, a in zip(result.cluster_ids, result.samples):
        lines.append(f"  [{cid}] {a.scores.length_normalized:8.3f} {a.scores.mars:8.3f}  {a.text or '(empty)'}")
    u = result.uncertainty
    lines += ["", "Uncertainty (higher = less trustworthy)   length-normalized      MARS"]
    for name, pair in (("Confidence", u.confidence), ("Entropy", u.entropy), ("Semantic entropy", u.semantic_entropy)):
        lines.append(f"  {name:<39} {pair.length_normalized:17.4f} {pair.mars:9.4f}")
    lines += ["", "Time (s): " + ", ".join(f"{k} {v:.2f}" for k, v in result.timings_s.items())]
    if result.warnings:
        lines += ["", "Warnings:"] + [f"  - {w}" for w in result.warnings]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "make-tiny-models":
        from .tiny import make_tiny_models

        try:
            if args.trained:
                print("training the tiny models on their facts (a few minutes)...", file=sys.stderr)
            paths = make_tiny_models(args.dir, seed=args.seed, trained=args.trained)
        except OSError as err:
            print(f"error: cannot write the tiny models to {args.dir!r}: {err}", file=sys.stderr)
            return EXIT_FAILURE
        for name, path in paths.items():
            print(f"{name}: {path}")
        return 0

    from .models.llm import InvalidModelOutput
    from .models.loading import ModelLoadError
    from .pipeline import AnalysisOutOfMemory, Engine

    try:
        settings = _settings(args)
        result = Engine(settings).analyze(
            args.question,
            progress=None if args.json else _stderr_progress,
        )
    except (S.OptionError, ModelLoadError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE if isinstance(err, S.OptionError) else EXIT_FAILURE
    except (AnalysisOutOfMemory, InvalidModelOutput) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a defect, but the user still gets one line, not a traceback
        detail = (str(err).strip().splitlines() or [""])[0][:300]
        print(
            f"error: the analysis failed unexpectedly ({type(err).__name__}: {detail}); "
            "please report this with the command you ran",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    # A console that cannot show every character (e.g. a cp1252 pipe) gets escapes, not a crash.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        if args.json:
            encoding = (getattr(sys.stdout, "encoding", None) or "").lower()
            utf = encoding.replace("-", "").replace("_", "").startswith("utf")
            print(json.dumps(result.to_dict(), ensure_ascii=not utf, indent=2))
        else:
            print(format_report(result))
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (e.g. `| head`): not an error worth a traceback
        try:  # and no second complaint when Python flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
    return 0


def _stderr_progress(stage: str, fraction: float) -> None:
    if fraction == 0.0:
        print(f"... {stage}", file=sys.stderr, flush=True)
