"""``python -m mars_demo.bench --llm-options``: each loading and decoding option of the in-process
LLM (:mod:`mars_demo.models.llm_options`) on the benchmark's random models, and the NLI model in
half precision against float32.

For each option (``QUANT:DECODING``; ``none`` = unquantized: bf16 on a GPU, float32 on a CPU) the
engine is loaded afresh and measured on the benchmark's question, every answer exactly
``--answer-tokens`` long and made of the tokenizer's ids (as in the other modes), in this order:

* ``first_*_s``: the first call of each batch size (batch ``samples + 1``, whose timed calls
  and analyses follow, then batch 1 and its timed calls); with static-compiled decoding it
  includes the compilation, and ``compile_s`` = those first calls minus the medians of the
  later ones;
* ``step_ms_batch6`` / ``step_ms_batch1`` (the batch is ``samples + 1`` rows): one decoding step,
  (a call of N tokens - a call of 1 token) / (N - 1), medians over ``--repeats``, so the same
  figure for the eager and the compiled forward (hooks inside a compiled graph time nothing);
* ``first_token_s``: a one-token call of the analysis' rows (prefill + the first token);
* ``greedy_only_s`` and ``analysis_s`` (the engine's whole analysis: generation, importance,
  NLI, methods) and their ratio;
* ``results_match``: the analysis' generated log-probs against a teacher-forced (eager) pass of
  the same model, within the compute dtype's tolerance (``max_logprob_diff`` in nats), and for a
  static-compiled option whether its greedy answer is that of the same weights decoded
  dynamically (``same_greedy_as_dynamic``);
* memory: peak GPU memory allocated and reserved over the option (the process's RSS on a CPU).

An option that cannot run (torchao without a capable GPU, out of memory, a failed compilation)
gets ``error`` with the reason and the sweep goes on; the JSON is rewritten after every option,
so a run stopped half-way keeps what it measured. ``--budget-s`` skips the options left once
that many seconds have passed. The NLI part: the verdicts of every pair of the answers generated
above (up to ``NLI_TEXTS`` texts), by the NLI model as the engine loads it (``auto``: float16 on
CUDA) and in float32: how many verdicts change, and the time of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

from .compare import default_tolerance
from .instrument import force_answer_length, rss_mb
from .report import emit
from .spec import QUESTION, SPECS, BenchError

#: every option, in the order measured (the default first: the baseline)
ALL_OPTIONS = ("nf4:dynamic", "nf4:static-compiled", "torchao-int4:dynamic",
               "torchao-int4:static-compiled", "none:dynamic", "none:static-compiled")
NLI_TEXTS = 20  # distinct answer texts whose ordered pairs the NLI precision check judges
GIB = 1024**3


def parse_options(text: str) -> list[tuple[str, str]]:
    """``QUANT:DECODING,...`` -> [(quant, decoding)]; unknown ones are a BenchError."""
    out = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        if item not in ALL_OPTIONS:
            raise BenchError(f"unknown option {item!r}; known: {', '.join(ALL_OPTIONS)}")
        quant, decoding = item.split(":")
        out.append((quant, decoding))
    return out


def option_settings(paths, quant: str, decoding: str, samples: int, tokens: int, seed: int):
    from ...settings import Settings

    return Settings(
        llm=str(paths["llm"]), importance=str(paths["importance"]), nli=str(paths["nli"]),
        samples=samples, max_new_tokens=tokens, seed=seed, prompt="chat",
        load_in_4bit=quant != "none", quantization="nf4" if quant == "none" else quant,
        decoding=decoding,
    )


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    _sync()
    t = time.perf_counter()
    out = call()
    _sync()
    return time.perf_counter() - t, out


def measure_option(paths, quant: str, decoding: str, *, samples: int, tokens: int,
                   repeats: int, seed: int, log) -> dict[str, Any]:
    """The figures of one option (see the module docstring); raises what loading or decoding
    raises (the caller records it)."""
    import torch

    from ...engine import Engine
    from ...models.contract import GenerationRequest
    from ...models.forced import forced_logprobs
    from .run import compute_dtype

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    settings = option_settings(paths, quant, decoding, samples, tokens, seed)
    engine = Engine(settings)
    row: dict[str, Any] = {}
    row["load_s"], _ = _timed(engine.load)
    llm = engine.models.llm
    # answers of the asked length, of the tokenizer's ids (the random LM head is larger), as in
    # the benchmark's other modes: every option decodes the same number of steps
    force_answer_length(llm.model, len(llm.tokenizer))
    row["compute_dtype"] = compute_dtype(llm)
    prompt = llm.build_prompt(QUESTION, "chat")

    def gen(rows_samples: int, n: int):
        request = GenerationRequest(samples=rows_samples, temperature=settings.temperature,
                                    top_p=1.0, max_new_tokens=n, seed=seed)
        return _timed(lambda: llm.generate(prompt, request))

    def steps(result) -> int:
        return max(len(a.token_ids) for a in [result.greedy, *result.samples])

    # each batch size's first call, then its timed ones: a static cache is made per batch size,
    # so going back and forth between sizes would compile again inside the timed calls
    long6, short6, analysis, long1, short1 = [], [], [], [], []
    log(f"  {quant}:{decoding}: batch {samples + 1}: first call, {repeats} timed ...")
    first6, _ = gen(samples, tokens)
    for _ in range(repeats):
        long6.append(gen(samples, tokens))
        short6.append(gen(samples, 1)[0])
    for _ in range(repeats):  # what Engine.analyze does, keeping the generated answers
        analysis.append(_timed(lambda: (made := engine.generate(QUESTION),
                                        engine.score(made))[0]))
    log(f"  {quant}:{decoding}: batch 1: first call, {repeats} timed ...")
    first1, _ = gen(0, tokens)
    for _ in range(repeats):
        long1.append(gen(0, tokens))
        short1.append(gen(0, 1)[0])
    med = statistics.median
    n6, n1 = steps(long6[-1][1]), steps(long1[-1][1])
    row.update(
        rows=samples + 1, answer_tokens={"batch6": n6, "batch1": n1},
        first_batch6_s=first6, first_batch1_s=first1,
        compile_s=max(0.0, first6 - med(t for t, _ in long6))
        + max(0.0, first1 - med(t for t, _ in long1)),
        step_ms_batch6=1000 * (med(t for t, _ in long6) - med(short6)) / max(1, n6 - 1),
        step_ms_batch1=1000 * (med(t for t, _ in long1) - med(short1)) / max(1, n1 - 1),
        first_token_s=med(short6), greedy_only_s=med(t for t, _ in long1),
        analysis_s=med(t for t, _ in analysis),
    )
    row["analysis_over_greedy_only"] = row["analysis_s"] / row["greedy_only_s"]
    answers = analysis[-1][1].answers  # the greedy answer, then the samples
    # the same token ids read by one eager teacher-forced pass (answers' logprobs cover their
    # kept tokens: a stop string or end-of-sequence token cut off is not scored)
    forced = forced_logprobs(llm.model, prompt.token_ids, [a.token_ids for a in answers],
                             pad_id=llm.pad_token_id, device=llm.device)
    diff = max((abs(a - b) for g, f in zip(answers, forced)
                for a, b in zip(g.logprobs, f["logprobs"])), default=0.0)
    tolerance = default_tolerance(row["compute_dtype"])
    row.update(max_logprob_diff=diff, tolerance=tolerance, results_match=diff <= tolerance,
               greedy_ids=list(long1[-1][1].greedy.token_ids),
               compiled=hasattr(llm.model, "_compiled_call"),
               texts=[a.text for a in answers])
    if cuda:
        row["gpu_allocated_gib"] = torch.cuda.max_memory_allocated() / GIB
        row["gpu_reserved_gib"] = torch.cuda.max_memory_reserved() / GIB
    else:
        row["rss_mb"] = rss_mb()
    return row


def nli_precision(nli_path: str, texts: list[str], repeats: int) -> dict[str, Any]:
    """Verdicts of every ordered pair of ``texts`` by the NLI model as the engine loads it
    ("auto": float16 on CUDA, float32 on a CPU) and in float32: changes and times."""
    import torch

    from ...models.registry import load_nli, release

    texts = list(dict.fromkeys(t for t in texts if t.strip()))[:NLI_TEXTS]
    out: dict[str, Any] = {"texts": len(texts), "pairs": len(texts) * (len(texts) - 1),
                           "auto_dtype": "float16" if torch.cuda.is_available() else "float32"}
    labels = {}
    for dtype in ("auto", "float32"):
        model = load_nli(nli_path, dtype=dtype)
        model.matrix(QUESTION, texts[:2])  # warm-up
        times = []
        for _ in range(repeats):
            t, m = _timed(lambda: model.matrix(QUESTION, texts))
            times.append(t)
        labels[dtype] = m.labels
        out[f"{dtype}_s"] = statistics.median(times)
        release()
    changed = [(i, j) for i, row in enumerate(labels["auto"]) for j, v in enumerate(row)
               if i != j and v != labels["float32"][i][j]]
    out.update(changed_verdicts=len(changed), changed_pairs=changed[:20],
               keep_float32=bool(changed))
    return out


def run_sweep(llm_shape: str, options: list[tuple[str, str]], *, repeats: int, samples: int,
              answer_tokens: int | None, seed: int, models_dir: str | None,
              budget_s: float | None, json_path: str | None, log) -> dict[str, Any]:
    """Measure each option in turn (see the module docstring); returns the JSON-ready data."""
    import torch
    import transformers

    from ...models.registry import free_memory, release
    from .models import build_models
    from .report import write_json

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    spec = SPECS[llm_shape]
    cuda = torch.cuda.is_available()
    if spec["needs_cuda"] and not cuda:
        raise BenchError(f"--llm-shape {llm_shape} needs a CUDA GPU; none is visible here. "
                         "Use --llm-shape cpu.")
    tokens = answer_tokens or spec["answer_tokens"]
    if tokens < 2 or repeats < 1 or samples < 1:
        raise BenchError("need --answer-tokens >= 2, --repeats >= 1 and --samples >= 1")
    start = time.perf_counter()
    data: dict[str, Any] = {
        "mode": "llm-options", "llm_shape": llm_shape, "llm_like": spec["llm_like"],
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "torchao": _version("torchao"), "bitsandbytes": _version("bitsandbytes"),
        "samples": samples, "answer_tokens": tokens, "repeats": repeats, "options": [],
    }
    tmp = tempfile.TemporaryDirectory(prefix="mars-bench-opts-") if models_dir is None else None
    try:
        paths = build_models(models_dir or tmp.name, llm_shape, seed, log)
        for quant, decoding in options:
            name = f"{quant}:{decoding}"
            row: dict[str, Any] = {"option": name}
            if budget_s is not None and time.perf_counter() - start > budget_s:
                row["error"] = f"skipped: the time budget of {budget_s:.0f} s was spent"
            else:
                log(f"option {name} ...")
                try:
                    row.update(measure_option(paths, quant, decoding, samples=samples,
                                              tokens=tokens, repeats=repeats, seed=seed,
                                              log=log))
                except Exception as err:  # recorded: the sweep measures what can run
                    row["error"] = f"{type(err).__name__}: {err}"[:600]
                    log(f"  {name} failed: {row['error']}")
                    traceback.clear_frames(err.__traceback__)  # the frames hold the model
                finally:  # the next option starts from nothing: models, graphs, memory
                    release()
                    torch._dynamo.reset()
                    free_memory()
            data["options"].append(row)
            _same_greedy(data["options"])
            data["elapsed_s"] = time.perf_counter() - start
            if json_path:
                write_json(data, json_path)
        texts = [t for r in data["options"] for t in r.get("texts", [])]
        if len(set(texts)) >= 2:
            log("NLI: auto (half on CUDA) against float32 ...")
            data["nli_precision"] = nli_precision(str(paths["nli"]), texts, repeats)
        else:
            data["nli_precision"] = {"error": "no option generated two distinct answers"}
        data["elapsed_s"] = time.perf_counter() - start
    finally:
        if tmp is not None:
            tmp.cleanup()
    return data


def _same_greedy(rows: list[dict[str, Any]]) -> None:
    """For each static-compiled row: is its greedy answer that of the same weights decoded
    dynamically (when both ran)?"""
    dynamic = {r["option"].split(":")[0]: r for r in rows
               if r["option"].endswith(":dynamic") and "greedy_ids" in r}
    for r in rows:
        base = dynamic.get(r["option"].split(":")[0])
        if r["option"].endswith(":static-compiled") and "greedy_ids" in r and base:
            r["same_greedy_as_dynamic"] = r["greedy_ids"] == base["greedy_ids"]


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def format_report(data: dict[str, Any]) -> str:
    """The sweep as a Markdown table, then the options that failed and why, then the NLI."""
    lines = [f"LLM options on {data['device']} ({data['llm_like']}; {data['samples']} samples x "
             f"{data['answer_tokens']} tokens, {data['repeats']} repeats; torch {data['torch']}, "
             f"transformers {data['transformers']}, torchao {data['torchao']}, bitsandbytes "
             f"{data['bitsandbytes']})", "",
             "| option | load s | compile s | step ms b1 | step ms b6 | first token s | "
             "greedy-only s | analysis s | results_match (max nats) | same greedy | memory |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    failed = []
    for r in data["options"]:
        if "error" in r:
            failed.append(f"- {r['option']}: {r['error']}")
            lines.append(f"| {r['option']} | failed, see below |" + " |" * 9)
            continue
        memory = (f"{r['gpu_reserved_gib']:.1f} GiB reserved" if "gpu_reserved_gib" in r
                  else f"{r['rss_mb']:.0f} MB RSS")
        same = {True: "yes", False: "no"}.get(r.get("same_greedy_as_dynamic"), "-")
        lines.append(
            f"| {r['option']} | {r['load_s']:.1f} | {r['compile_s']:.1f} | "
            f"{r['step_ms_batch1']:.1f} | {r['step_ms_batch6']:.1f} | {r['first_token_s']:.3f} | "
            f"{r['greedy_only_s']:.2f} | {r['analysis_s']:.2f} | "
            f"{str(r['results_match']).lower()} ({r['max_logprob_diff']:.2g}) | {same} | "
            f"{memory} |")
    if failed:
        lines += ["", "Options that did not run:", *failed]
    nli = data.get("nli_precision")
    if nli and "error" not in nli:
        lines += ["", f"NLI, {nli['pairs']} pairs: auto ({nli['auto_dtype']}) {nli['auto_s']:.3f} s,"
                  f" float32 {nli['float32_s']:.3f} s; verdicts changed: {nli['changed_verdicts']}"
                  f" ({'keep float32' if nli['keep_float32'] else 'half keeps every verdict'})"]
    elif nli:
        lines += ["", f"NLI: {nli['error']}"]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mars_demo.bench --llm-options",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--llm-options", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--llm-shape", default="cpu", choices=sorted(SPECS), metavar="{cpu,7b}")
    p.add_argument("--options", default=",".join(ALL_OPTIONS),
                   help=f"QUANT:DECODING, separated by commas (default: all: {','.join(ALL_OPTIONS)})")
    p.add_argument("--repeats", type=int, default=2, help="timed repeats per figure (default 2)")
    p.add_argument("--samples", type=int, default=5, help="sampled answers (default 5)")
    p.add_argument("--answer-tokens", type=int,
                   help="tokens per answer (default 32 for cpu, 128 for 7b)")
    p.add_argument("--budget-s", type=float,
                   help="skip the options left once this many seconds have passed")
    p.add_argument("--models-dir", help="build the random models here and reuse them")
    p.add_argument("--json", metavar="PATH", help="write the figures as JSON here (after each "
                   "option)")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)

    def log(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    try:
        data = run_sweep(args.llm_shape, parse_options(args.options), repeats=args.repeats,
                         samples=args.samples, answer_tokens=args.answer_tokens, seed=args.seed,
                         models_dir=args.models_dir, budget_s=args.budget_s,
                         json_path=args.json, log=log)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    emit(data, argv, args.json, format_report)
    return 0
