"""``python -m mars_demo.bench``: the command line of the benchmark."""

from __future__ import annotations

import argparse
import os
import sys

from .report import emit, format_report
from .run import run_benchmark
from .spec import QUESTION, SPECS, BenchError



def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mars_demo.bench",
        description="Time the MARS analysis on random-weight models with real shapes, against a "
        "straightforward reference path.",
    )
    p.add_argument("--llm-shape", default="cpu", choices=sorted(SPECS), metavar="{cpu,7b}",
                   help="cpu: like Qwen2.5-0.5B-Instruct on CPU (default); 7b: like "
                   "Qwen2.5-7B-Instruct in 4-bit on a CUDA GPU")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed runs after the warm-up (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON here")
    p.add_argument("--answer-tokens", type=int, help="forced length of every answer "
                   "(default 32 for cpu, 128 for 7b)")
    p.add_argument("--samples", type=int, default=5, help="sampled answers (default 5)")
    p.add_argument("--question", default=QUESTION)
    p.add_argument("--tolerance", type=float,
                   help="largest allowed difference (nats) of token log-probs and scores between "
                   "the two paths (default by the LLM's compute dtype: float32 1e-4, float16 "
                   "0.0625, bfloat16 0.5)")
    p.add_argument("--reference-generation-repeats", type=int,
                   help="timed runs that also generate the samples one at a time (default: all; "
                   "it is the slowest part and not part of the after-generation comparison)")
    p.add_argument("--other-nli-repeats", type=int, default=1,
                   help="timed runs of the NLI model the preset does not use (default 1)")
    p.add_argument("--models-dir", help="build the random models here and reuse them on later "
                   "runs (default: a temporary directory, deleted afterwards)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--opt-in-methods", action="store_true",
                   help="also time the opt-in methods (p_true, p_true_sampling, the SAR methods "
                   "with a random stsb-roberta-large-shaped similarity model, the LARS methods "
                   "with a random roberta-base-shaped LARS), each asked alone after the analysis")
    p.add_argument("--llm-options", action="store_true",
                   help="instead: each loading and decoding option of the LLM (quantization nf4, "
                   "torchao-int4 or none; decoding dynamic or static-compiled) and the NLI model "
                   "in half precision against float32 (mars_demo.devtools.bench.llm_options; "
                   "--llm-options --help for its options)")
    p.add_argument("--peers", action="store_true",
                   help="instead: the project against lm-polygraph 0.7.0 and TruthTorchLM 0.1.19 "
                   "on the same LLM, models, questions and answer length, seconds per question "
                   "(mars_demo.devtools.bench.peers; --peers --help for its options)")
    p.add_argument("--real-llm", metavar="LLM",
                   help="instead: a real LLM (a GGUF file or a folder) on the CPU, one ask and "
                   "a batched evaluate by stage, against bare transformers generate "
                   "(mars_demo.devtools.bench.real_llm; --real-llm LLM --help for its options)")
    p.add_argument("--nli-choices", action="store_true",
                   help="instead: the NLI step's CPU choices (int8, without the question) timed "
                   "at deberta-base's shape and their effect on the labelled data's verdicts "
                   "and clusters (mars_demo.devtools.bench.nli_choices)")
    p.add_argument("--evaluate", action="store_true",
                   help="instead: seconds per question of the whole analysis at several question "
                   "batch sizes (mars_demo.devtools.bench.evaluate; --evaluate --help for its options)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--evaluate" in argv:  # seconds per question at several question batch sizes
        from .evaluate import main as evaluate_main

        return evaluate_main(argv)
    if "--peers" in argv:  # the project against lm-polygraph and TruthTorchLM
        from .peers import main as peers_main

        return peers_main(argv)
    if "--real-llm" in argv:  # a real LLM (SmolLM2's GGUF file) on the CPU
        from .real_llm import main as real_llm_main

        return real_llm_main(argv)
    if "--nli-choices" in argv:  # the NLI step's CPU choices
        from .nli_choices import main as nli_choices_main

        return nli_choices_main(argv)
    if "--llm-options" in argv:  # each loading and decoding option of the LLM
        from .llm_options import main as options_main

        return options_main(argv)
    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def log(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    try:
        data = run_benchmark(
            args.llm_shape, repeats=args.repeats, warmup=args.warmup,
            answer_tokens=args.answer_tokens, samples=args.samples, question=args.question,
            tolerance=args.tolerance,
            reference_generation_repeats=args.reference_generation_repeats,
            other_nli_repeats=args.other_nli_repeats,
            models_dir=args.models_dir, seed=args.seed, opt_in_methods=args.opt_in_methods,
            log=log,
        )
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    emit(data, argv, args.json, format_report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
