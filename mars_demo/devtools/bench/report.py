"""The text report of a benchmark's figures."""

from __future__ import annotations

import json
import pathlib
from typing import Any, Callable

from .summary import ratio


def x1(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}x"


def x2(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def format_report(d: dict[str, Any]) -> str:
    """The benchmark's figures as text: what ran, the stages against the reference path, the
    other methods' cost, the NLI models, generation and the first token, the comparison of
    results, and the targets."""
    return "\n".join([*_header(d), *_stage_table(d), *_method_lines(d), "", *_nli_lines(d),
                      *_generation_lines(d), *_comparison_lines(d), "", "targets:",
                      *_target_lines(d)])


def _header(d: dict[str, Any]) -> list[str]:
    sh, se, m = d["shapes"], d["settings"], d["machine"]
    where = m["gpu"] or f"{m['cpu_count']} CPU cores, {m['torch_threads']} torch threads"
    return [
        f"MARS benchmark on {m['device']} ({where})",
        f"LLM like {sh['llm_like']}: {sh['llm_params_m']:.0f}M params, "
        f"vocab {sh['llm_vocab_size']:,}, "
        f"{'4-bit NF4, compute ' if sh['llm_quantized_4bit'] else ''}{sh['llm_compute_dtype']}; "
        f"importance BERT-{sh['importance']}; "
        f"NLI deberta-{sh['nli']} (+ deberta-{sh['other_nli']} timed on the same answers)",
        f"greedy + {se['samples']} samples x {se['answer_tokens']} new tokens (forced), prompt "
        f"{se['prompt_tokens']} tokens; median of {se['repeats']} runs after "
        f"{se['warmup']} warm-up",
        "",
    ]


def _stage_table(d: dict[str, Any]) -> list[str]:
    """Each stage's seconds, share of the total and speed-up over the reference path."""
    lines = [f"{'stage':<22}{'fast s':>10}{'share':>9}{'reference s':>14}{'speed-up':>10}"]
    names = {"generation": "prefill + generation", "logprobs": "log-probs",
             "importance": "importance", "nli": f"NLI ({d['shapes']['nli']})",
             "methods": "other methods", "rest": "rest"}
    for s, v in d["stages"].items():
        ref = d["reference_generation_s"] if s == "generation" else d["reference_stages"].get(s)
        lines.append(f"{names[s]:<22}{v:>10.3f}{pct(d['stage_share'][s]):>9}"
                     f"{'-' if ref is None else f'{ref:.3f}':>14}{x1(d['speedup'].get(s)):>10}")
    return lines + [
        f"{'total':<22}{d['total_s']:>10.3f}",
        f"{'after generation':<22}{d['after_generation_s']:>10.3f}"
        f"{pct(d['after_generation_share_of_generation']):>9}"
        f"{d['reference_after_generation_s']:>14.3f}"
        f"{x1(d['speedup_after_generation']):>10}   (share = of generation time)",
        "",
    ]


def _method_lines(d: dict[str, Any]) -> list[str]:
    """The free methods' cost, the token statistics', semantic density's extra NLI pairs and
    the opt-in methods'."""
    mc = d["method_costs"]
    lines = [
        f"other methods ({len(mc['methods_asked'])} free ones asked: "
        f"{', '.join(mc['methods_asked'])}): "
        f"{d['stages']['methods']:.4f} s = "
        f"{pct(d['methods_share_of_after_generation'])} of after generation; each recomputed "
        "from the saved inputs (median ms): " + ", ".join(
            f"{k} {1000 * v:.2f}" for k, v in sorted(mc["free_s"].items(),
                                                     key=lambda kv: -kv[1]))]
    ts = mc.get("token_stats")
    if ts:
        lines.append(
            f"token statistics (entropy, KL from uniform; in the log-probs stage): "
            f"{ts['with_entropy_and_kl_s']:.3f} s against {ts['logprobs_s']:.3f} s for the "
            f"log-probs alone ({ts['ratio']:.1f}x; {ts['rows']} rows x {ts['steps']} steps x "
            f"{ts['vocab']} tokens, random logits)")
    sd = mc.get("semantic_density_nli")
    if sd:
        lines.append(
            f"semantic density's extra NLI pairs (not in the free methods' share): "
            f"{sd['greedy_pairs']} beside the samples' {sd['sample_pairs']} "
            f"({pct(sd['share_of_nli_pairs'])} of the NLI pairs"
            + (f", about {sd['estimated_s']:.3f} s of the NLI step)" if sd["estimated_s"]
               is not None else ")"))
    if mc["opt_in"]:
        lines.append(f"opt-in methods (each family asked alone, after the analysis; similarity "
                     f"model "
                     f"like {mc['similarity_like']}, LARS like {mc['lars_like']}): " + ", ".join(
                         f"{k} {v['seconds']:.3f} s" for k, v in mc["opt_in"].items()))
    return lines


def _nli_lines(d: dict[str, Any]) -> list[str]:
    """Each NLI model batched against one pair at a time, and the NLI step's compute rate."""
    lines = [
        f"NLI deberta-{n['shape']}: {n['pairs']} pairs, batched {n['fast_s']:.3f} s vs one per "
        f"pair {n['reference_s']:.3f} s ({x1(n['speedup'])}); after generation with it "
        f"{n['after_generation_s']:.3f} s = "
        f"{pct(ratio(n['after_generation_s'], d['generation_s']))}"
        " of generation"
        for n in d["nli_models"]]
    nc = d.get("nli_compute")
    if nc:
        lines.append(
            f"NLI compute: {nc['gflop']:.1f} GFLOP of matrix products per question (the "
            f"samples' pairs and {nc.get('greedy_pairs', 0)} greedy-to-sample pairs, "
            f"{nc.get('forward_passes', '?')} forward pass(es)) in "
            f"{nc['seconds']:.3f} s = {nc['gflop_per_s']:.0f} GFLOP/s, "
            f"{pct(nc['share_of_matmul_rate'])} of one plain matrix product's rate of the "
            f"model's width and dtype on this device ({nc['matmul_gflop_per_s']:.0f} GFLOP/s)")
    return lines


def _generation_lines(d: dict[str, Any]) -> list[str]:
    """The first token and text, the stages' readiness, generation's calls and KV cache, the
    forward passes."""
    ft, lp, sc = d["first_token"], d["llm_forward_passes"], d["static_kv_cache"]
    return [
        f"first greedy token streamed {ft['first_token_s']:.3f} s after the call; the prefill "
        f"({ft['prefill_s']:.3f} s, started at {ft['prefill_start_s']:.3f} s) and one decoding "
        f"step ({ft['decode_step_s']:.3f} s) had ended at {ft['budget_s']:.3f} s; within in "
        f"{ft['runs_within_budget']}/{d['settings']['repeats']} runs",
        f"first text on the page {ft['first_text_s']:.3f} s after the call, "
        f"{1000 * ft['first_text_after_its_token_s']:.1f} ms after token "
        f"{ft['tokens_before_first_text']} reached the streamer" + (
            f" (tokens before it, {ft['greedy_first_tokens'][:-1]!r}, are parts of a character)"
            if ft["tokens_before_first_text"] > 1 else ""),
        "stages ready (s after the call, as the page gets them): " + ", ".join(
            f"{k} {v:.3f}" for k, v in d["ready_s"].items()),
        f"generation: {d['generate_calls']} generate call(s) per analysis; one batched call "
        f"{d['generation_s']:.3f} s vs greedy then samples (two calls) "
        f"{d['two_call_generation_s']:.3f} s: one_call_speedup {x2(d['one_call_speedup'])}",
        f"whole analysis {d['total_s']:.3f} s vs a greedy-only answer of the same length "
        f"{d['greedy_only_generation_s']:.3f} s: analysis_over_greedy_only "
        f"{x2(d['analysis_over_greedy_only'])}",
        f"KV cache: the engine uses the {'static' if sc['used_by_engine'] else 'dynamic'} one; "
        f"one-call generation with a static cache {sc['static_generation_s']:.3f} s vs dynamic "
        f"{sc['dynamic_generation_s']:.3f} s: static/dynamic {x2(sc['static_over_dynamic'])}"
        f" (same answers: {'yes' if sc['same_answers'] else 'NO'})",
        f"LLM forward passes: fast {lp['fast']} = {lp['generation_steps']} generation steps + "
        f"{lp.get('prompt_prefills', 0)} prompt prefill shared by the rows "
        f"(extra {d['extra_llm_forward_passes']}); reference {lp['reference']}",
        f"importance passes {d['importance_forward_passes']}, NLI calls {d.get('nli_calls', 0)} "
        f"and passes {d['nli_forward_passes']}",
    ]


def _comparison_lines(d: dict[str, Any]) -> list[str]:
    """The fast path's results against the reference path's, and the memory peaks."""
    c = d["comparison"]
    lines = [
        f"results match within {c['tolerance']:g} nats ({d['shapes']['llm_compute_dtype']}): "
        f"{'yes' if d['results_match'] else 'NO'} "
        f"(max score diff {c['max_abs_diff']:.2g}, max token log-prob diff "
        f"{c['max_token_logprob_diff']:.2g}, max importance phrase-score diff "
        f"{c['max_phrase_score_diff']:.2g})",
        f"peak RSS {d['peak_rss_mb']:,.0f} MB (with the other NLI model loaded too: "
        f"{d['peak_rss_mb_with_other_nli']:,.0f} MB)",
    ]
    if d["gpu_memory"]:
        g = d["gpu_memory"]
        lines.append(f"GPU peak allocated {g['peak_allocated_mb']:,.0f} MB, reserved "
                     f"{g['peak_reserved_mb']:,.0f} MB of {g['total_mb']:,.0f} MB")
    for kind in ("token", "score"):
        big = c["largest"].get(kind)
        if big:
            lines.append(f"  largest {kind} difference: {big['where']}: {big['fast']:.6g} vs "
                         f"{big['reference']:.6g} (diff {big['diff']:.2g})")
    return lines + [f"  mismatch: {line}" for line in c["mismatches"][:5]]


def _target_lines(d: dict[str, Any]) -> list[str]:
    lines = []
    for t in d["targets"].values():
        met = {True: "met", False: "NOT met", None: "reported"}[t["met"]]
        v = t["measured"]
        if isinstance(v, float):
            v = f"{v:.3g}"
        elif isinstance(v, dict):
            v = ", ".join(f"{k} {x}" if isinstance(x, int) else f"{k} {x:.3f}"
                          for k, x in v.items())
        lines.append(f"  [{met}] {t['target']}: {v}")
    return lines


def run_and_emit(make: Callable[[], dict[str, Any]], argv: list[str], json_path: str | None,
                 report: Callable[[dict[str, Any]], str]) -> int:
    """A benchmark mode's end: the figures ``make`` returns, printed and written
    (:func:`emit`), exit code 0; or the :class:`~.spec.BenchError` it raised, in one line,
    exit code 2."""
    import sys

    from .spec import BenchError

    try:
        data = make()
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    emit(data, argv, json_path, report)
    return 0


def emit(data: dict[str, Any], argv: list[str], json_path: str | None,
         report: Callable[[dict[str, Any]], str]) -> None:
    """Print a benchmark's report and write its figures as JSON to ``json_path`` (if given),
    with the command that made them."""
    data["command"] = "python -m mars_demo.bench " + " ".join(argv)
    print(report(data))
    if json_path:
        print(f"wrote {write_json(data, json_path)}")


def write_json(data: dict[str, Any], json_path: str) -> pathlib.Path:
    """Write a benchmark's figures as JSON to ``json_path`` (its folder made if missing)."""
    path = pathlib.Path(json_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path

