"""The speed benchmark's machinery, on tiny random models (no wall-clock bounds: figures are
checked for presence and consistency, never for speed)."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from mars_demo.devtools import bench

REQUIRED_KEYS = {
    "stages", "generation_s", "after_generation_s", "reference_after_generation_s",
    "speedup_after_generation", "results_match", "extra_llm_forward_passes", "peak_rss_mb",
    "shapes", "settings", "stage_share", "reference_stages", "reference_generation_s", "speedup",
    "llm_forward_passes", "first_token", "nli_models", "targets", "machine", "comparison",
    "generate_calls", "one_call_speedup", "two_call_generation_s", "analysis_over_greedy_only",
    "greedy_only_generation_s", "method_costs", "methods_share_of_after_generation",
}
STAGES = {"generation", "logprobs", "importance", "nli", "methods", "rest"}


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("bench-models")


@pytest.fixture(scope="module")
def data(models_dir):
    return bench.run_benchmark("tiny", repeats=1, warmup=1, models_dir=models_dir,
                               opt_in_methods=True, log=lambda msg: None)


def test_json_has_every_required_key(data, tmp_path):
    d = json.loads(json.dumps(data))  # plain JSON
    assert REQUIRED_KEYS <= set(d)
    assert set(d["stages"]) == STAGES
    assert set(d["reference_stages"]) == STAGES - {"generation"}
    for v in d["stages"].values():
        assert v >= 0 and math.isfinite(v)
    assert d["shapes"]["llm"] == "tiny"
    assert d["settings"]["answer_tokens"] == 8 and d["settings"]["samples"] == 5
    assert d["peak_rss_mb"] > 0
    assert [n["shape"] for n in d["nli_models"]] == ["tiny", "tiny"]
    assert d["machine"]["device"] in ("cpu", "cuda")
    # the report prints without error and names every stage
    text = bench.format_report(d)
    for word in ("log-probs", "importance", "NLI", "rest", "after generation", "peak RSS",
                 "one_call_speedup", "analysis_over_greedy_only", "generate call",
                 "other methods", "opt-in methods", "eigv"):
        assert word in text


def test_every_method_has_its_cost(data):
    """Each free method is timed, the methods stage is part of after generation, and each
    opt-in group ran with its method really computed (a value, not a skipped method)."""
    from mars_demo.methods import FREE

    costs = data["method_costs"]
    assert set(costs["free_s"]) == set(FREE) == set(costs["methods_asked"])
    assert all(v > 0 and math.isfinite(v) for v in costs["free_s"].values())
    assert data["stages"]["methods"] > 0
    assert data["methods_share_of_after_generation"] == pytest.approx(
        data["stages"]["methods"] / data["after_generation_s"])
    assert data["targets"]["free_methods_share"]["met"] is None  # tiny: timings mean nothing
    opt_in = costs["opt_in"]
    assert set(opt_in) == {"p_true", "p_true_sampling", "token_sar, sentence_sar, sar",
                           "lars, lars_entropy, lars_semantic_entropy",
                           "cocoa_msp, cocoa_ppl, cocoa_mte", "ccp", "eigenscore"}
    assert costs["semantic_density_nli"]["greedy_pairs"] >= 0
    stats = costs["token_stats"]  # the token-level methods' inputs, timed apart
    assert stats["logprobs_s"] > 0 and stats["with_entropy_and_kl_s"] > 0
    for group in opt_in.values():
        assert group["seconds"] > 0
        assert all(v is not None for v in group["values"].values()), group


def test_results_match_and_no_extra_forward_pass(data):
    assert data["results_match"] is True, data["comparison"]["mismatches"]
    assert data["comparison"]["mismatches"] == []
    assert data["comparison"]["max_abs_diff"] <= 1e-4
    assert data["comparison"]["max_token_logprob_diff"] <= 1e-4
    assert data["comparison"]["max_phrase_score_diff"] <= 1e-4
    assert data["extra_llm_forward_passes"] == 0
    passes = data["llm_forward_passes"]
    # every answer has the forced length: greedy row + samples in one batch = 8 generation steps
    assert data["settings"]["all_answers_full_length"] is True
    # and the prompt's prefill, made once for the 6 rows before generate (shared_prompt_cache)
    assert passes["generation_steps"] == 8 and passes["prompt_prefills"] == 1
    assert passes["fast"] == 9
    assert data["generate_calls"] == 1 and data["targets"]["one_generate_call"]["met"] is True
    assert all(r["two_call_generate_calls"] == 2 for r in data["runs"])
    assert data["importance_forward_passes"] == 1
    # the samples' pairs both ways and semantic density's greedy-to-sample pairs: one call,
    # and the tiny models' short pairs fit one batch
    assert data["nli_calls"] == 1 and data["nli_forward_passes"] == 1
    assert data["targets"]["nli_one_call"]["met"] is True
    assert data["nli_compute"]["forward_passes"] == 1
    assert data["nli_compute"]["greedy_pairs"] == data["method_costs"]["semantic_density_nli"][
        "greedy_pairs"]
    assert data["targets"]["extra_llm_forward_passes"]["met"] is True
    assert data["targets"]["importance_one_pass"]["met"] is True


def test_reference_path_really_ran(data):
    passes = data["llm_forward_passes"]
    # 6 teacher-forced passes + greedy and 5 samples generated one at a time (8 steps each)
    assert passes["reference"] == 6 + 6 * 8
    assert passes["reference"] > passes["fast"]
    assert data["reference_generation_s"] is not None and data["reference_generation_s"] > 0
    assert all(v > 0 for v in data["reference_stages"].values())
    # one call per ordered pair of the 5 samples, each against itself too, and per pair of
    # semantic density's (the greedy answer against each distinct sample), as the engine judges
    assert data["nli_models"][0]["pairs"] == 25 + 5
    assert data["nli_models"][1]["pairs"] == 25  # the other NLI shape: the samples' pairs
    assert all(n["labels_match"] for n in data["nli_models"])
    assert data["speedup_after_generation"] == pytest.approx(
        data["reference_after_generation_s"] / data["after_generation_s"]
    )


def test_the_nli_steps_operations_are_counted(data, models_dir):
    """The NLI step's matrix-product operations, counted by torch, against a count by hand from
    the tiny model's shape over the padded tokens of the batches the step makes."""
    from mars_demo.devtools.bench.ceiling import nli_compute
    from mars_demo.models.nli import BATCH
    from mars_demo.models.registry import load_nli
    from mars_demo.optional import pairs as _pairs

    nc = data["nli_compute"]
    assert nc["seconds"] == pytest.approx(data["stages"]["nli"])
    assert nc["gflop_per_s"] == pytest.approx(nc["gflop"] / nc["seconds"])
    assert nc["share_of_matmul_rate"] == pytest.approx(nc["gflop_per_s"]
                                                       / nc["matmul_gflop_per_s"])
    assert nc["matmul_gflop_per_s"] > 0 and "NLI compute:" in bench.format_report(data)

    nli = load_nli(str(models_dir / "main" / "nli"))
    question = "Which planet is known as the Red Planet?"
    texts = ["Mars", "It is Mars, the red one", "Venus", "I think it is Jupiter or Mars"]
    pairs = [(f"{question} {a}", f"{question} {b}") for a in texts for b in texts]
    enc, _, _ = _pairs.tokenize_pairs(nli.tokenizer, [a for a, _ in pairs],
                                      [b for _, b in pairs], 512)
    lengths = [len(ids) for ids in enc["input_ids"]]
    padded = sum(len(rows) * max(lengths[i] for i in rows)
                 for rows in _pairs.length_batches(lengths, BATCH,
                                                   _pairs.tokens_per_batch(nli.device)))
    config = nli.model.config
    h, f = config.hidden_size, config.intermediate_size
    # per token and layer: q, k, v and the output (4 h x h) and the feed-forward (2 h x f),
    # 2 FLOP per multiply-add; attention's own products come on top of that
    linear = padded * config.num_hidden_layers * 2 * (4 * h * h + 2 * h * f)
    counted = nli_compute(nli, question, texts, 1.0, False)["gflop"] * 1e9
    assert linear <= counted <= 2 * linear, (linear, counted)
    # with a greedy answer, its pairs with the 4 samples ride in the same one pass
    with_greedy = nli_compute(nli, question, texts, 1.0, False, greedy="The red planet: Mars")
    assert with_greedy["greedy_pairs"] == 4 and with_greedy["forward_passes"] == 1
    assert with_greedy["gflop"] * 1e9 > counted
    assert all(q.requires_grad for q in nli.model.parameters())  # restored after counting


def test_generation_figures_are_from_this_run(data):
    assert data["one_call_speedup"] == pytest.approx(
        data["two_call_generation_s"] / data["generation_s"])
    assert data["analysis_over_greedy_only"] == pytest.approx(
        data["total_s"] / data["greedy_only_generation_s"])
    assert data["two_call_generation_s"] > 0 and data["greedy_only_generation_s"] > 0
    assert data["targets"]["analysis_over_greedy_only"]["met"] is None  # only 7B on a GPU
    sc = data["static_kv_cache"]
    assert sc["used_by_engine"] is False and sc["same_answers"] is True
    assert sc["static_over_dynamic"] == pytest.approx(
        sc["static_generation_s"] / sc["dynamic_generation_s"])
    assert sc["dynamic_generation_s"] == data["generation_s"]
    assert data["settings"]["tolerance"] == bench.TOLERANCE_BY_DTYPE["float32"]
    assert data["shapes"]["llm_compute_dtype"] == "float32"


def test_tolerance_follows_the_compute_dtype():
    assert bench.default_tolerance("float32") == 1e-4
    assert bench.default_tolerance("float32") < bench.default_tolerance("float16") \
        < bench.default_tolerance("bfloat16")
    # the largest bf16 difference measured on the H100 (0.24 nats per token) passes, fp32 not
    assert bench.default_tolerance("bfloat16") >= 0.24 > bench.default_tolerance("float32")
    base = {"scores": [[-1.0, -1.0]], "uncertainty": {}, "cluster_ids": [0], "labels": [[]],
            "logprobs": [[-1.0, -2.0]]}
    off = json.loads(json.dumps(base))
    off["logprobs"][0][1] += 0.2
    loose = bench.compare(base, off, tolerance=bench.default_tolerance("bfloat16"))
    assert loose["match"] is True and loose["largest"]["token"]["where"] == "answer 0 token 1"
    assert loose["max_token_logprob_diff"] == pytest.approx(0.2)
    tight = bench.compare(base, off, tolerance=bench.default_tolerance("float32"))
    assert tight["match"] is False and "answer 0 token 1 log-prob" in tight["mismatches"][0]


def test_first_token_measured(data):
    ft = data["first_token"]
    assert ft["first_text_s"] > 0 and ft["prefill_s"] > 0 and ft["decode_step_s"] > 0
    # the budget is when the first decoding step ended: after the prefill and that step
    runs = data["runs"]
    assert ft["budget_s"] == pytest.approx(statistics.median(r["first_step_end_s"] for r in runs))
    assert all(r["first_step_end_s"] >= r["prefill_start_s"] + r["prefill_s"] + r["decode_step_s"]
               - 1e-9 for r in runs)
    assert 1 <= ft["tokens_before_first_text"] <= 8


def test_comparison_can_fail():
    base = {
        "scores": [[-1.0, -1.2], [-2.0, -2.5]],
        "uncertainty": {"confidence.mars": 1.2, "entropy.mars": 2.5},
        "cluster_ids": [0],
        "labels": [["entailment"]],
        "logprobs": [[-1.0], [-2.0]],
    }
    assert bench.compare(base, json.loads(json.dumps(base)))["match"] is True
    off = json.loads(json.dumps(base))
    off["scores"][1][1] += 1e-3
    result = bench.compare(base, off, tolerance=1e-4)
    assert result["match"] is False and "answer 1 MARS score" in result["mismatches"][0]
    off = json.loads(json.dumps(base))
    off["cluster_ids"] = [1]
    assert bench.compare(base, off)["match"] is False
    off = json.loads(json.dumps(base))
    off["labels"] = [["neutral"]]
    assert bench.compare(base, off)["match"] is False


def test_a_perturbed_reference_is_reported_as_a_mismatch(models_dir, data):
    # same models (reused from the first run), one reference log-prob moved by 0.01
    d = bench.run_benchmark("tiny", repeats=1, warmup=0, models_dir=models_dir,
                            reference_generation_repeats=0, perturb_reference=0.01,
                            log=lambda msg: None)
    assert d["results_match"] is False
    assert any("answer 0" in m for m in d["comparison"]["mismatches"])
    assert d["targets"]["speedup_after_generation"]["met"] in (False, None)
    assert d["reference_generation_s"] is None  # not asked for


def test_7b_refuses_without_cuda(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without
    assert bench.main(["--llm-shape", "7b"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "CUDA" in err and len(err.splitlines()) == 1
