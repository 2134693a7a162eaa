"""The timed runs: the engine's analysis, the reference path and the generation variants."""

from __future__ import annotations

import os
import pathlib
import statistics
import tempfile
import time
from typing import Any, Callable

from .ceiling import nli_compute
from .compare import compare, compare_phrases, default_tolerance, summarize
from .instrument import Instrument, peak_rss_mb, rss_mb
from .methods import (
    LARS_LIKE,
    SIMILARITY_LIKE,
    build_similarity,
    extra_nli_pairs,
    free_method_costs,
    opt_in_method_costs,
)
from .models import build_models
from .token_stats import token_stats_cost
from .reference import (
    greedy_only_generation,
    nli_per_pair,
    other_cache_generation,
    reference_after_generation,
    reference_generation,
    two_call_generation,
)
from .spec import QUESTION, SPECS, BenchError
from .summary import stages_of, summarize_runs


def run_benchmark(
    llm_shape: str = "cpu",
    *,
    repeats: int = 3,
    warmup: int = 1,
    answer_tokens: int | None = None,
    samples: int = 5,
    question: str = QUESTION,
    tolerance: float | None = None,
    reference_generation_repeats: int | None = None,
    other_nli_repeats: int = 1,
    models_dir: str | os.PathLike | None = None,
    seed: int = 0,
    perturb_reference: float = 0.0,
    opt_in_methods: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the benchmark and return its JSON-ready figures (see the module docstring)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if llm_shape not in SPECS:
        raise BenchError(f"unknown --llm-shape {llm_shape!r}; use cpu or 7b")
    if repeats < 1 or warmup < 0 or samples < 2 or other_nli_repeats < 1:
        raise BenchError("need --repeats >= 1, --warmup >= 0, --samples >= 2 and "
                         "--other-nli-repeats >= 1")
    spec = SPECS[llm_shape]
    import torch

    cuda = torch.cuda.is_available()
    if spec["needs_cuda"] and not cuda:
        raise BenchError(
            f"--llm-shape {llm_shape} needs a CUDA GPU (a 7B-shaped model in 4-bit); none is "
            "visible here. Run it on a GPU machine, or use --llm-shape cpu."
        )
    if spec["load_in_4bit"]:
        try:
            import bitsandbytes  # noqa: F401
        except ImportError as err:
            raise BenchError(f"--llm-shape {llm_shape} needs bitsandbytes: {err}") from err
    answer_tokens = answer_tokens or spec["answer_tokens"]
    if answer_tokens < 2:
        raise BenchError("need --answer-tokens >= 2 (the first-token check times a decoding step)")
    if reference_generation_repeats is None:
        reference_generation_repeats = repeats
    load_avg_start = os.getloadavg() if hasattr(os, "getloadavg") else None

    tmp = None
    if models_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix=f"mars-bench-{llm_shape}-")
        models_dir = tmp.name
    try:
        paths = build_models(models_dir, llm_shape, seed, log)
        return _run(paths, llm_shape, spec, cuda, repeats, warmup, answer_tokens, samples,
                    question, tolerance, reference_generation_repeats, other_nli_repeats, seed,
                    perturb_reference, load_avg_start, opt_in_methods, log)
    finally:
        if tmp is not None:
            tmp.cleanup()


def load_engine(paths, spec, samples: int, answer_tokens: int, seed: int, log):
    """The engine on the benchmark's models (``paths``) with the benchmark's fixed settings (the
    chat prompt, ``samples`` answers of ``answer_tokens`` tokens), loaded. Returns the settings,
    the engine and its load time in seconds."""
    from ...engine import Engine
    from ...settings import Settings

    settings = Settings(
        llm=str(paths["llm"]), importance=str(paths["importance"]), nli=str(paths["nli"]),
        samples=samples, max_new_tokens=answer_tokens, seed=seed, prompt="chat",
        load_in_4bit=spec["load_in_4bit"],
    )
    engine = Engine(settings)
    log("loading the models ...")
    t = time.perf_counter()
    engine.load()
    return settings, engine, time.perf_counter() - t


def _run(paths, llm_shape, spec, cuda, repeats, warmup, answer_tokens, samples, question,
         tolerance, reference_generation_repeats, other_nli_repeats, seed, perturb,
         load_avg_start, opt_in_methods, log):
    """The models loaded, the timed runs, the NLI step's operations, the other NLI shape and
    the methods' costs, summed up (:func:`~.summary.summarize_runs`)."""
    import torch
    import transformers

    settings, engine, load_s = load_engine(paths, spec, samples, answer_tokens, seed, log)
    llm, importance, nli = engine.models.llm, engine.models.importance, engine.models.nli
    if tolerance is None:
        tolerance = default_tolerance(compute_dtype(llm))
    inst = Instrument(llm, importance, nli, len(llm.tokenizer))
    rss_after_load = rss_mb()
    gpu_peak = {"allocated": 0, "reserved": 0}
    try:
        runs, last = _timed_runs(engine, inst, settings, question, cuda, warmup, repeats,
                                 reference_generation_repeats, perturb, tolerance, gpu_peak, log)
        peak_rss_main = peak_rss_mb()
        log("counting the NLI step's operations ...")
        nli_s = statistics.median(stages_of(r["timings_s"], r["total_s"])["nli"] for r in runs)
        greedy = runs[-1]["greedy_text"] if "greedy_nli" in last[1].method_inputs else None
        compute = nli_compute(nli, question, runs[-1]["sample_texts"], nli_s, cuda, greedy)
        other_runs = _other_nli_runs(paths, spec, question, runs, warmup, other_nli_repeats, log)
        costs = _method_costs(engine, settings, last, paths, llm_shape, seed, opt_in_methods,
                              log)
    finally:
        inst.close()

    return summarize_runs(
        built_on=paths["llm_built_on"], runs=runs, other_runs=other_runs, costs=costs,
        nli_compute=compute,
        llm=llm, spec=spec,
        llm_shape=llm_shape, cuda=cuda,
        settings=settings, question=question, repeats=repeats, warmup=warmup,
        tolerance=tolerance, load_s=load_s, rss_after_load=rss_after_load,
        peak_rss_main=peak_rss_main, gpu_peak=gpu_peak, load_avg_start=load_avg_start,
        perturb=perturb, torch_version=torch.__version__, tf_version=transformers.__version__,
    )


def _timed_runs(engine, inst, settings, question, cuda, warmup, repeats,
                reference_generation_repeats, perturb, tolerance, gpu_peak, log):
    """The warm-up runs, then the timed ones: the engine's analysis, the generation variants
    and, timed, the reference path on the same answers. Returns (the timed runs, the last
    run's (answers, result))."""
    llm = engine.models.llm
    runs: list[dict[str, Any]] = []
    for k in range(warmup + repeats):
        timed = k >= warmup
        label = f"repeat {k - warmup + 1}/{repeats}" if timed else "warm-up"
        log(f"{label}: analysis ...")
        run = _fast_run(engine, inst, question, cuda, gpu_peak if timed else None)
        answers = run.pop("answers")
        last = (answers, run.pop("result"))
        # the same generation the way it was done before (greedy, then the samples), and a
        # greedy answer alone: generation figures measured in this run, on warm models
        log(f"{label}: two-call generation and greedy-only generation ...")
        snap = inst.snapshot()
        run["two_call_generation_s"] = two_call_generation(llm, run["prompt_ids"], settings)
        run["two_call_generate_calls"] = inst.since(snap)["generate_calls"]
        run["greedy_only_s"] = greedy_only_generation(llm, run["prompt_ids"], settings)
        run["other_cache"] = other_cache_generation(llm, run["prompt_ids"], settings, answers)
        if not timed:  # the reference path uses the same, now warm, models and kernels
            continue
        _reference_run(run, engine, inst, answers, settings, perturb, tolerance,
                       k - warmup < reference_generation_repeats, label, log)
        runs.append(run)
    return runs, last


def _reference_run(run, engine, inst, answers, settings, perturb, tolerance,
                   generation: bool, label: str, log) -> None:
    """Add to a timed ``run`` the reference path after generation on its answers, compared
    with the engine's results, and with ``generation`` the samples generated one at a time."""
    llm = engine.models.llm
    handles = {"llm": llm, "importance": engine.models.importance, "nli": engine.models.nli}
    gens = answers.answers
    run["answer_tokens"] = [len(g.token_ids) for g in gens]
    shown = max(1, run["tokens_before_first_text"] or 1)
    run["greedy_first_tokens"] = [llm.tokenizer.decode([i]) for i in gens[0].token_ids[:shown]]
    log(f"{label}: reference path (after generation) ...")
    snap = inst.snapshot()
    ref_summary, ref_t, ref_phrases = reference_after_generation(handles, answers, settings,
                                                                 perturb)
    ref_counts = inst.since(snap)
    run["reference"] = {"stages": ref_t, "forwards": ref_counts,
                        "nli_calls": ref_summary.pop("nli_calls")}
    run["comparison"] = compare(run.pop("summary"), ref_summary, tolerance)
    compare_phrases(run["comparison"], run.pop("phrases"), ref_phrases)
    if generation:
        log(f"{label}: reference generation (samples one at a time) ...")
        snap = inst.snapshot()
        run["reference"]["generation_s"] = reference_generation(llm, run["prompt_ids"], settings)
        run["reference"]["generation_forwards"] = inst.since(snap)["llm"]
    run["sample_texts"] = [g.text for g in gens[1:]]
    run["greedy_text"] = gens[0].text


def _other_nli_runs(paths, spec, question, runs, warmup, repeats, log) -> list[dict[str, Any]]:
    """The NLI shape the preset does not use, on the same sampled answers: batched against one
    pair at a time."""
    from ...models.registry import load_nli

    log(f"timing the {spec['other_nli']}-shaped NLI model ...")
    other = load_nli(str(paths["other_nli"]))
    other_runs = []
    if warmup:
        other.matrix(question, runs[0]["sample_texts"])
    for k in range(repeats):
        texts = runs[k % len(runs)]["sample_texts"]
        t = time.perf_counter()
        fast_labels = other.matrix(question, texts).labels
        fast_s = time.perf_counter() - t
        t = time.perf_counter()
        ref_labels, calls = nli_per_pair(other, question, texts)
        ref_s = time.perf_counter() - t
        other_runs.append({"fast_s": fast_s, "reference_s": ref_s, "calls": calls,
                           "labels_match": fast_labels == ref_labels})
    return other_runs


def _method_costs(engine, settings, last, paths, llm_shape, seed, opt_in_methods,
                  log) -> dict[str, Any]:
    """The free methods' seconds each, the token statistics', semantic density's extra pairs
    and, with ``opt_in_methods``, the opt-in methods' (random similarity and LARS models)."""
    llm = engine.models.llm
    log("timing each free method ...")
    costs = {"free": free_method_costs(last[1]), "opt_in": None,
             "semantic_density_nli": extra_nli_pairs(last[1])}
    log("timing the token statistics (entropy, KL from uniform) against the log-probs ...")
    costs["token_stats"] = token_stats_cost(len(llm.tokenizer), settings.samples + 1,
                                            max(len(g.token_ids) for g in last[0].answers))
    if opt_in_methods:
        from ..tiny.lars import build_lars

        root = pathlib.Path(paths["llm"]).parent
        tiny = llm_shape == "tiny"
        log("timing the opt-in methods (random similarity and LARS models) ...")
        build_similarity(root / "similarity", "tiny" if tiny else "large", seed, paths["nli"])
        lars_dir = root / ("lars-tiny" if tiny else "lars-base")
        if not (lars_dir / "config.json").is_file():
            build_lars(lars_dir, paths["nli"], shape="tiny" if tiny else "base", seed=seed,
                       initializer_range=0.5 if tiny else 0.02)
        costs["opt_in"] = opt_in_method_costs(engine, settings, last[0], last[1],
                                              str(root / "similarity"), str(lars_dir))
        costs["similarity_like"] = "tiny" if tiny else SIMILARITY_LIKE
        costs["lars_like"] = "tiny" if tiny else LARS_LIKE
    return costs


def compute_dtype(llm) -> str:
    """The dtype the LLM computes in: 4-bit models compute in their bnb compute dtype."""
    qconf = getattr(llm.model.config, "quantization_config", None)
    compute = getattr(qconf, "bnb_4bit_compute_dtype", None) if llm.quantized else None
    if isinstance(compute, str):
        return compute.replace("torch.", "")
    return str(compute or next(llm.model.parameters()).dtype).replace("torch.", "")


def _fast_run(engine, inst, question, cuda, gpu_peak) -> dict[str, Any]:
    """One analysis through the engine's public calls, :meth:`Engine.generate` then
    :meth:`Engine.score` (what :meth:`Engine.analyze` does), with its timings, first-text
    latency, forward counts and memory."""
    import torch

    first_text: list[float] = []
    first_text_tokens: list[int] = []
    ready: dict[str, float] = {}
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    snap = inst.snapshot()
    inst.start_run()
    t0 = time.perf_counter()

    def on_text(text: str) -> None:
        if not first_text:
            first_text.append(time.perf_counter() - t0)
            first_text_tokens.append(len(inst.token_times))

    def progress(stage: str, fraction: float) -> None:
        if fraction >= 1.0:
            ready[stage] = time.perf_counter() - t0

    answers = engine.generate(question, progress=progress, on_text=on_text)
    result = engine.score(answers, progress=progress)
    total = time.perf_counter() - t0
    counts = inst.since(snap)
    if cuda and gpu_peak is not None:
        gpu_peak["allocated"] = max(gpu_peak["allocated"], torch.cuda.max_memory_allocated())
        gpu_peak["reserved"] = max(gpu_peak["reserved"], torch.cuda.max_memory_reserved())
    ts = dict(result.timings_s)
    ts.pop("load", None)
    return {
        "total_s": total,
        "timings_s": ts,
        # the first streamed token reaching the engine's streamer; the first text on the page
        # (a token that is only part of a UTF-8 character has no text of its own yet)
        "first_token_s": inst.token_times[0] - t0 if inst.token_times else None,
        "first_text_s": first_text[0] if first_text else None,
        "tokens_before_first_text": first_text_tokens[0] if first_text_tokens else None,
        "text_after_its_token_s": first_text[0] - (inst.token_times[first_text_tokens[0] - 1] - t0)
        if first_text and first_text_tokens and first_text_tokens[0] else None,
        # the first pass is the prompt's prefill (one row, shared by the rows); the first
        # decoding step runs from the start of the second pass (the rows over the last prompt
        # token) to the start of the third: the pass, choosing the token, streaming it
        "prefill_start_s": inst.forward_times[0][0] - t0,
        "prefill_s": inst.forward_times[0][1] - inst.forward_times[0][0],
        "decode_step_s": inst.forward_times[2][0] - inst.forward_times[1][0],
        "first_step_end_s": inst.forward_times[2][0] - t0,
        "ready_s": ready,
        "forwards": counts,
        "prompt_ids": list(result.prompt_token_ids),
        "summary": summarize(result.greedy, result.samples, result.uncertainty,
                             result.cluster_ids, result.nli.labels),
        "phrases": [[(p.start, p.end, p.score) for p in a.phrases]
                    for a in [result.greedy, *result.samples]],
        "answers": answers,
        "result": result,
    }




