"""The figures of a benchmark's runs: medians, ratios and the targets' status."""

from __future__ import annotations

import os
import platform
import statistics
from typing import Any

from ...optional.pairs import BATCH_TOKENS, CPU_BATCH_TOKENS
from .instrument import peak_rss_mb
from .spec import (
    AFTER_GENERATION_LIMIT,
    ANALYSIS_OVER_GREEDY_LIMIT_7B,
    GPU_BUDGET_BYTES,
    IMPORTANCE_LIMIT_7B,
    METHODS_LIMIT,
    MIN_SPEEDUP,
    NLI_MATMUL_SHARE,
    SCHEMA,
)


def summarize_runs(*, built_on, runs, other_runs, costs, nli_compute, llm, spec, llm_shape, cuda,
                   settings, question, repeats, warmup, tolerance, load_s, rss_after_load,
                   peak_rss_main, gpu_peak, load_avg_start, perturb, torch_version,
                   tf_version) -> dict[str, Any]:
    """The benchmark's JSON-ready figures from its timed ``runs`` (and the other NLI model's
    ``other_runs``): the stages against the reference path, generation, the comparison of
    results, the first token, the NLI models, the machine and models, and the targets."""
    st = stage_figures(runs)
    gen = generation_figures(runs, llm, st["stages"]["generation"], st["total"])
    comparisons = [r["comparison"] for r in runs]
    results_match = all(c["match"] for c in comparisons)
    first = first_token_figures(runs)
    shape = llm_figures(llm)
    gpu = gpu_figures(cuda, gpu_peak)
    methods_share = ratio(st["stages"]["methods"], st["after"])
    targets = target_figures(
        runs, st, gen, results_match, first, nli_compute, methods_share, llm_shape, cuda,
        settings, gpu, gpu_peak)
    stages, after, generation = st["stages"], st["after"], st["stages"]["generation"]
    argv = ["python", "-m", "mars_demo.bench", "--llm-shape", llm_shape,
            "--repeats", str(repeats), "--answer-tokens", str(settings.max_new_tokens),
            "--samples", str(settings.samples)]
    return {
        "schema": SCHEMA,
        "benchmark": "mars_demo.bench",
        "command": " ".join(argv),
        "machine": machine(cuda, gpu, torch_version, tf_version, load_avg_start),
        "shapes": {
            "llm": llm_shape, "llm_like": spec["llm_like"], **shape,
            "llm_random_weights_built_on": built_on,
            "importance": spec["importance"], "nli": spec["nli"], "nli_like": spec["nli_like"],
            "other_nli": spec["other_nli"], "other_nli_like": spec["other_nli_like"],
        },
        "settings": {
            "question": question, "prompt": "chat", "prompt_tokens": len(runs[0]["prompt_ids"]),
            "samples": settings.samples, "answer_tokens": settings.max_new_tokens,
            "answer_length_forced": True,
            "all_answers_full_length": all(n == settings.max_new_tokens for r in runs
                                           for n in r["answer_tokens"]),
            "temperature": settings.temperature, "top_p": settings.top_p, "seed": settings.seed,
            "repeats": repeats, "warmup": warmup,
            "reference_generation_repeats": st["reference_generation_repeats"],
            "other_nli_repeats": len(other_runs), "tolerance": tolerance,
            "perturb_reference": perturb, "models_load_s": load_s,
        },
        "stages": stages,
        "stage_share": {s: ratio(v, st["total"]) for s, v in stages.items()},
        "total_s": st["total"],
        "generation_s": generation,
        "after_generation_s": after,
        "after_generation_share_of_generation": ratio(after, generation),
        "importance_share_of_generation": ratio(stages["importance"], generation),
        "methods_share_of_after_generation": methods_share,
        "method_costs": method_costs(costs, settings, stages),
        "reference_stages": st["reference_stages"],
        "reference_generation_s": st["reference_generation"],
        "reference_after_generation_s": st["reference_after"],
        "speedup": st["speedup"],
        "speedup_after_generation": st["speedup"]["after_generation"],
        "results_match": results_match,
        "comparison": comparison(comparisons, tolerance),
        "llm_forward_passes": {
            "fast": max(r["forwards"]["llm"] for r in runs),
            "generation_steps": max(r["forwards"]["generation_steps"] for r in runs),
            "prompt_prefills": max(r["forwards"].get("prefix_passes", 0) for r in runs),
            "reference": reference_forwards(runs),
        },
        "extra_llm_forward_passes": gen["extra"],
        "generate_calls": gen["generate_calls"],
        "one_call_speedup": gen["one_call_speedup"],
        "two_call_generation_s": gen["two_call"],
        "analysis_over_greedy_only": gen["over_greedy"],
        "greedy_only_generation_s": gen["greedy_only"],
        "static_kv_cache": gen["static_cache"],
        "importance_forward_passes": max(r["forwards"]["importance"] for r in runs),
        "nli_forward_passes": max(r["forwards"]["nli"] for r in runs),
        "nli_calls": max(r["forwards"].get("nli_calls", 0) for r in runs),
        "first_token": first,
        "ready_s": {s: median([r["ready_s"].get(s, float("nan")) for r in runs])
                    for s in runs[0]["ready_s"]},
        "nli_models": nli_models(runs, other_runs, spec, st),
        "nli_compute": nli_compute,
        "peak_rss_mb": peak_rss_main,
        "peak_rss_mb_with_other_nli": peak_rss_mb(),
        "rss_after_load_mb": rss_after_load,
        "gpu_memory": gpu,
        "targets": targets,
        "runs": [run_detail(p, r) for p, r in zip(st["per_run"], runs)],
    }


def stage_figures(runs) -> dict[str, Any]:
    """The median seconds of each stage of the fast path (``per_run``: each run's), of the time
    after generation, and of the reference path's stages and generation; their speed-ups."""
    stage_names = ("generation", "logprobs", "importance", "nli", "methods", "rest")
    per_run = [stages_of(r["timings_s"], r["total_s"]) for r in runs]
    stages = {s: median([p[s] for p in per_run]) for s in stage_names}
    after = median([r["total_s"] - p["generation"] for r, p in zip(runs, per_run)])
    ref_per_run = []
    for r in runs:
        st = r["reference"]["stages"]
        ref_per_run.append({
            "logprobs": st["logprobs"], "importance": st["importance"], "nli": st["nli"],
            "methods": st.get("methods", 0.0), "rest": st["alignment"] + st["uncertainty"],
        })
    ref_stages = {s: median([p[s] for p in ref_per_run]) for s in ref_per_run[0]}
    ref_after = median([sum(p.values()) for p in ref_per_run])
    ref_gen = [r["reference"]["generation_s"] for r in runs if "generation_s" in r["reference"]]
    ref_generation = median(ref_gen) if ref_gen else None
    speedup = {s: ratio(ref_stages[s], stages[s]) for s in ref_stages}
    speedup["after_generation"] = ratio(ref_after, after)
    speedup["generation"] = ratio(ref_generation, stages["generation"]) if ref_generation else None
    return {"per_run": per_run, "stages": stages, "total": median([r["total_s"] for r in runs]),
            "after": after, "reference_stages": ref_stages, "reference_after": ref_after,
            "reference_generation": ref_generation, "reference_generation_repeats": len(ref_gen),
            "speedup": speedup}


def generation_figures(runs, llm, generation: float, total: float) -> dict[str, Any]:
    """Generation: one batched call against the two calls of before and against a greedy answer
    alone; the static KV cache against the dynamic one; the LLM passes beyond generation."""
    two_call = median([r["two_call_generation_s"] for r in runs])
    greedy_only = median([r["greedy_only_s"] for r in runs])
    other_cache = median([r["other_cache"]["generation_s"] for r in runs])
    static_on = getattr(llm.model.generation_config, "cache_implementation", None) == "static"
    static_s, dynamic_s = (generation, other_cache) if static_on else (other_cache, generation)
    static_cache = {
        "used_by_engine": static_on,
        "static_generation_s": static_s,
        "dynamic_generation_s": dynamic_s,
        "static_over_dynamic": ratio(static_s, dynamic_s),
        "same_answers": all(r["other_cache"]["same_answers"] for r in runs),
        "per_run_static_over_dynamic": [
            ratio(*((r["timings_s"].get("generate", 0.0), r["other_cache"]["generation_s"])
                     if static_on else
                     (r["other_cache"]["generation_s"], r["timings_s"].get("generate", 0.0))))
            for r in runs],
    }
    return {"generate_calls": max(r["forwards"]["generate_calls"] for r in runs),
            "two_call": two_call, "greedy_only": greedy_only,
            "one_call_speedup": ratio(two_call, generation),
            "over_greedy": ratio(total, greedy_only), "static_cache": static_cache,
            "extra": max(r["forwards"]["llm"] - r["forwards"]["generation_steps"]
                         - r["forwards"].get("prefix_passes", 0) for r in runs)}


def reference_forwards(runs) -> int:
    """The reference LLM passes of one question: teacher-forced passes and one-at-a-time
    generation."""
    return max(r["reference"]["forwards"]["llm"] for r in runs) + max(
        (r["reference"]["generation_forwards"] for r in runs
         if "generation_forwards" in r["reference"]), default=0)


def first_token_figures(runs) -> dict[str, Any]:
    """When the first greedy token and the first text came, against the end of the prefill and
    one decoding step (the budget: when the first step had ended, by the same clock)."""
    first_token = median([r["first_token_s"] for r in runs if r["first_token_s"] is not None])
    budget = median([r["first_step_end_s"] for r in runs])
    return {
        "first_token_s": first_token,
        "prefill_start_s": median([r["prefill_start_s"] for r in runs]),
        "prefill_s": median([r["prefill_s"] for r in runs]),
        "decode_step_s": median([r["decode_step_s"] for r in runs]), "budget_s": budget,
        "runs_within_budget": sum(1 for r in runs if r["first_token_s"] is not None
                                  and r["first_token_s"] <= r["first_step_end_s"]),
        "within_budget": first_token <= budget,
        "first_text_s": median([r["first_text_s"] for r in runs
                                if r["first_text_s"] is not None]),
        "tokens_before_first_text": max(r["tokens_before_first_text"] or 0 for r in runs),
        "first_text_after_its_token_s": median([r["text_after_its_token_s"] for r in runs
                                                 if r["text_after_its_token_s"] is not None]),
        "greedy_first_tokens": runs[0]["greedy_first_tokens"],
    }


def nli_models(runs, other_runs, spec, st: dict[str, Any]) -> list[dict[str, Any]]:
    """The analysis' NLI model and the other shape timed on the same answers: batched against
    one pair at a time, and the time after generation with each."""
    stages, after = st["stages"], st["after"]
    comparisons = [r["comparison"] for r in runs]
    main = {
        "shape": spec["nli"], "like": spec["nli_like"], "in_full_analysis": True,
        "pairs": runs[0]["reference"]["nli_calls"], "fast_s": stages["nli"],
        "reference_s": st["reference_stages"]["nli"],
        "speedup": st["speedup"]["nli"],
        "labels_match": all("NLI verdicts differ" not in c["mismatches"] for c in comparisons),
        "after_generation_s": after,
    }
    o_fast = median([o["fast_s"] for o in other_runs])
    o_ref = median([o["reference_s"] for o in other_runs])
    other = {
        "shape": spec["other_nli"], "like": spec["other_nli_like"], "in_full_analysis": False,
        "pairs": other_runs[0]["calls"], "fast_s": o_fast, "reference_s": o_ref,
        "speedup": ratio(o_ref, o_fast),
        "labels_match": all(o["labels_match"] for o in other_runs),
        # the full analysis with this NLI model instead (its NLI stage swapped)
        "after_generation_s": after - stages["nli"] + o_fast,
    }
    return [main, other]


def llm_figures(llm) -> dict[str, Any]:
    """The LLM's size, vocabulary and dtypes (``shapes`` of the figures)."""
    import torch

    try:  # the unquantized count (4-bit weights are stored packed, two per byte)
        with torch.device("meta"):
            n_params = sum(p.numel() for p in type(llm.model)(llm.model.config).parameters())
    except Exception:  # pragma: no cover - any model the engine can load has a config
        n_params = sum(p.numel() for p in llm.model.parameters())
    qconf = getattr(llm.model.config, "quantization_config", None)
    compute = getattr(qconf, "bnb_4bit_compute_dtype", None) if llm.quantized else None
    return {
        "llm_params_m": n_params / 1e6,
        "llm_vocab_size": llm.model.get_output_embeddings().weight.shape[0],
        "llm_tokenizer_ids": len(llm.tokenizer),
        "llm_quantized_4bit": llm.quantized,
        "llm_dtype": "nf4" if llm.quantized
        else str(next(llm.model.parameters()).dtype).replace("torch.", ""),
        "llm_compute_dtype": str(compute or next(llm.model.parameters()).dtype)
        .replace("torch.", ""),
    }


def gpu_figures(cuda: bool, gpu_peak: dict[str, int]) -> dict[str, Any] | None:
    """The GPU's name and the allocator's peaks (None on the CPU)."""
    if not cuda:
        return None
    import torch

    return {
        "name": torch.cuda.get_device_name(0),
        "peak_allocated_mb": gpu_peak["allocated"] / 2**20,
        "peak_reserved_mb": gpu_peak["reserved"] / 2**20,
        "total_mb": torch.cuda.get_device_properties(0).total_memory / 2**20,
    }


def machine(cuda: bool, gpu: dict[str, Any] | None, torch_version: str, tf_version: str,
            load_avg_start) -> dict[str, Any]:
    """What ran the benchmark: device, cores, threads, versions and the load around it."""
    import torch

    return {
        "device": "cuda" if cuda else "cpu",
        "gpu": gpu["name"] if gpu else None,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch_version,
        "transformers": tf_version,
        "load_avg_start": list(load_avg_start) if load_avg_start else None,
        "load_avg_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def method_costs(costs: dict[str, Any], settings, stages: dict[str, float]) -> dict[str, Any]:
    """The free methods' seconds each, the opt-in ones', semantic density's extra NLI pairs and
    the token statistics' cost."""
    return {
        "free_s": costs["free"],
        "free_total_s": sum(costs["free"].values()),
        "methods_asked": list(settings.method_ids),
        "opt_in": costs["opt_in"],
        "similarity_like": costs.get("similarity_like"),
        "lars_like": costs.get("lars_like"),
        # semantic density's greedy-to-sample NLI pairs, apart from the free methods' share:
        # they ride in the NLI stage's pass; the NLI seconds they take, estimated by their
        # share of the pairs judged
        "semantic_density_nli": _extra_nli(costs.get("semantic_density_nli"), stages.get("nli")),
        # the token-level methods' inputs, computed in the log-probs stage
        "token_stats": costs.get("token_stats"),
    }


def comparison(comparisons: list[dict[str, Any]], tolerance: float) -> dict[str, Any]:
    """The fast path's results against the reference path's, over every run."""
    return {
        "tolerance": tolerance,
        "max_abs_diff": max(c["max_abs_diff"] for c in comparisons),
        "max_token_logprob_diff": max(c["max_token_logprob_diff"] for c in comparisons),
        "max_phrase_score_diff": max(c.get("max_phrase_score_diff", 0.0) for c in comparisons),
        "largest": max((c["largest"] for c in comparisons),
                       key=lambda x: (x["token"] or {}).get("diff", 0.0)),
        "mismatches": [m for c in comparisons for m in c["mismatches"]][:20],
    }


def target_figures(runs, st: dict[str, Any], gen: dict[str, Any], results_match: bool,
                   first: dict[str, Any], nli_compute, methods_share, llm_shape: str,
                   cuda: bool, settings, gpu, gpu_peak) -> dict[str, dict[str, Any]]:
    """Each target: what it asks, what was measured and whether it was met (None: it does not
    apply to this run's shape and device, and is only reported)."""
    stages, after, speedup = st["stages"], st["after"], st["speedup"]
    generation = stages["generation"]
    is_gpu_7b = llm_shape == "7b" and cuda
    after_share = ratio(after, generation)
    imp_share = ratio(stages["importance"], generation)
    one_call, over_greedy, extra = gen["one_call_speedup"], gen["over_greedy"], gen["extra"]
    targets: dict[str, dict[str, Any]] = {}

    def target(name, text, measured, met):
        targets[name] = {"target": text, "measured": measured, "met": met}

    target("extra_llm_forward_passes", "0 LLM forward passes beyond generation", extra, extra == 0)
    target("one_generate_call", "one generate call per analysis (greedy answer and samples)",
           gen["generate_calls"], gen["generate_calls"] == 1)
    target("one_call_speedup", "one batched call faster than the greedy answer then the samples "
           "(> 1)", one_call, bool(one_call and one_call > 1) if llm_shape != "tiny" else None)
    target("analysis_over_greedy_only", f"whole analysis <= {ANALYSIS_OVER_GREEDY_LIMIT_7B:g}x a "
           "greedy-only answer of the same length (7B shape on a GPU)", over_greedy,
           (over_greedy is not None and over_greedy <= ANALYSIS_OVER_GREEDY_LIMIT_7B)
           if is_gpu_7b else None)
    imp_calls = max(r["forwards"]["importance"] for r in runs)
    target("importance_one_pass", "importance model: one batched pass per question", imp_calls,
           imp_calls == 1)
    nli_calls = max(r["forwards"].get("nli_calls", 0) for r in runs)
    nli_passes = max(r["forwards"]["nli"] for r in runs)
    target("nli_one_call", "NLI: one call per question, its pairs batched by length (the "
           "samples' pairs both ways and the greedy answer's pairs with the samples; a pass per "
           f"batch of at most {BATCH_TOKENS if cuda else CPU_BATCH_TOKENS} padded tokens on this "
           "device)",
           {"calls": nli_calls, "passes": nli_passes}, nli_calls == 1)
    nli_share = (nli_compute or {}).get("share_of_matmul_rate")
    target("nli_share_of_matmul_rate", f"the NLI step at >= {NLI_MATMUL_SHARE:.0%} of one plain "
           "matrix product's rate on the cores (CPU preset shapes, CPU)", nli_share,
           (nli_share is not None and nli_share >= NLI_MATMUL_SHARE)
           if llm_shape == "cpu" and not cuda else None)
    target("importance_share", "importance <= 3% of generation (7B shape on a GPU)", imp_share,
           (imp_share is not None and imp_share <= IMPORTANCE_LIMIT_7B) if is_gpu_7b else None)
    limit = AFTER_GENERATION_LIMIT.get(llm_shape)
    applies = limit is not None and (cuda if llm_shape == "7b" else not cuda)
    target("after_generation_share",
           "after generation <= 2% of generation (7B, GPU) / <= 30% (CPU preset, CPU)",
           after_share, (after_share is not None and after_share <= limit) if applies else None)
    target("speedup_after_generation", f">= {MIN_SPEEDUP:g}x the reference path after generation, "
           "identical results", speedup["after_generation"],
           bool(speedup["after_generation"] and speedup["after_generation"] >= MIN_SPEEDUP
                and results_match))
    target("free_methods_share", f"the free methods add <= {METHODS_LIMIT:.0%} to the time after "
           "generation", methods_share,
           (methods_share is not None and methods_share <= METHODS_LIMIT)
           if llm_shape != "tiny" else None)
    target("first_token", "first token of the greedy answer within prefill + one decoding step",
           {"first_token_s": first["first_token_s"], "budget_s": first["budget_s"]},
           bool(first["first_token_s"] <= first["budget_s"]))
    if cuda:
        room = settings.max_new_tokens >= 128 and settings.samples >= 5
        target("gpu_memory", "7B 4-bit + importance + NLI fit a 16 GB GPU with 6 answers of 128 "
               "tokens (allocator peak reserved <= 14.5 GiB)", gpu["peak_reserved_mb"],
               (gpu_peak["reserved"] <= GPU_BUDGET_BYTES) if (llm_shape == "7b" and room) else None)
    if llm_shape == "tiny":  # tests: the counts are checked, the timings mean nothing
        for name in ("importance_share", "after_generation_share", "speedup_after_generation",
                     "first_token"):
            targets[name]["met"] = None
    return targets


def run_detail(per_run: dict[str, float], r: dict[str, Any]) -> dict[str, Any]:
    """One timed run as the figures keep it."""
    return {"stages": per_run, "total_s": r["total_s"],
            "reference_stages": r["reference"]["stages"],
            "reference_generation_s": r["reference"].get("generation_s"),
            "first_token_s": r["first_token_s"], "first_text_s": r["first_text_s"],
            "prefill_start_s": r["prefill_start_s"],
            "prefill_s": r["prefill_s"],
            "decode_step_s": r["decode_step_s"], "first_step_end_s": r["first_step_end_s"],
            "forwards": r["forwards"],
            "two_call_generation_s": r["two_call_generation_s"],
            "two_call_generate_calls": r["two_call_generate_calls"],
            "greedy_only_s": r["greedy_only_s"],
            "other_cache": r["other_cache"],
            "reference_forwards": r["reference"]["forwards"]["llm"]
            + r["reference"].get("generation_forwards", 0),
            "comparison": r["comparison"]}


def median(xs) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def stages_of(timings: dict[str, float], total: float) -> dict[str, float]:
    """Stage seconds of one fast run: generation, log-probs, importance, NLI, the other
    methods (:mod:`mars_demo.methods`) and the rest (alignment, clustering, entropies and the
    engine's own overhead)."""
    known = sum(timings.values())
    return {
        "generation": timings.get("generate", 0.0),
        "logprobs": timings.get("logprobs", 0.0),
        "importance": timings.get("importance", 0.0),
        "nli": timings.get("nli", 0.0),
        "methods": timings.get("methods", 0.0),
        "rest": timings.get("alignment", 0.0) + timings.get("uncertainty", 0.0)
        + max(0.0, total - known),
    }


def _extra_nli(pairs: dict | None, nli_s: float | None) -> dict | None:
    """Semantic density's extra NLI pairs with their estimated seconds (the NLI stage's
    seconds times their share of the pairs it judged)."""
    if not pairs:
        return None
    total = pairs["greedy_pairs"] + pairs["sample_pairs"]
    share = pairs["greedy_pairs"] / total if total else 0.0
    return {**pairs, "share_of_nli_pairs": share,
            "estimated_s": None if nli_s is None else nli_s * share}
