"""``python -m mars_demo.bench --peers``: the project, lm-polygraph and TruthTorchLM on the same
LLM, models and questions, every answer the same number of new tokens in every system (checked
by the clock on each system's own ``generate`` calls). No wall-clock bound: the figures are
checked for consistency, never for speed."""

from __future__ import annotations

import json

import pytest
from peers import require_peers

from mars_demo.devtools.bench import peers
from mars_demo.devtools.bench.peer_clock import STAGES


def runs_of(seconds: float, stages: dict[str, float]) -> list[dict]:
    full = {st: stages.get(st, 0.0) for st in STAGES}
    return [{"seconds": seconds, "stages": full, "calls": {"generation": 1},
             "generated_tokens": [8]}] * 3


def test_the_summary_gives_ratios_and_names_the_stage_that_decides():
    args = peers.build_parser().parse_args(["--peers"])
    runs = {peers.PROJECT: runs_of(15.0, {"generation": 7.0, "nli": 7.0, "rest": 1.0}),
            peers.MEASURES: runs_of(10.0, {"generation": 7.0, "nli": 2.0, "rest": 1.0}),
            "lm-polygraph": runs_of(30.0, {"generation": 28.0, "nli": 1.0, "rest": 1.0}),
            "truthtorchlm": runs_of(20.0, {"generation": 9.0, "nli": 10.0, "rest": 1.0})}
    d = peers.summarize(runs, {n: 1.0 for n in runs}, "llm", args, None, 2)
    assert d["seconds_per_question"]["truthtorchlm"] == 20.0
    # each peer against the project doing its work
    assert d["ratio_to_project"] == {"lm-polygraph": 2.0, "truthtorchlm": 2.0}
    assert d["fastest_peer"] == "truthtorchlm" and d["fastest_peer_against"] == peers.MEASURES
    assert d["deciding_stage"] == "nli"
    assert d["stage_gaps_to_fastest_peer"]["nli"] == pytest.approx(8.0)
    text = peers.format_peers_report(d)
    assert "truthtorchlm | 20.00 | 2.00x (mars-demo-measures)" in text
    assert "decides it: nli" in text


def test_every_system_runs_and_generates_the_same_number_of_tokens(tiny_models, tmp_path,
                                                                  capsys):
    """All three systems on the tiny LLM, one question, one round, through the command line: each
    generate call of each system made exactly --answer-tokens new tokens, the stages add up to
    each question's seconds, the report and the JSON say so."""
    require_peers()
    out = tmp_path / "peers.json"
    code = peers.main([
        "--peers", "--llm", str(tiny_models["llm"]), "--questions", "1", "--rounds", "1",
        "--samples", "2", "--answer-tokens", "4", "--models-shape", "tiny",
        "--models-dir", str(tmp_path / "models"), "--json", str(out)])
    assert code == 0
    d = json.loads(out.read_text())
    assert set(d["seconds_per_question"]) == {peers.PROJECT, peers.MEASURES, "lm-polygraph",
                                              "truthtorchlm"}
    assert d["generated_tokens_seen"] == {name: [4] for name in d["seconds_per_question"]}
    # the project: one generate call for the greedy answer and the samples; lm-polygraph one
    # per answer; TruthTorchLM the greedy answer, then the samples
    assert d["generate_calls"] == {peers.PROJECT: 1, peers.MEASURES: 1, "lm-polygraph": 3,
                                   "truthtorchlm": 2}
    for runs in d["runs"].values():
        (run,) = runs
        assert run["seconds"] > 0 and run["answers"]
        assert sum(run["stages"].values()) == pytest.approx(run["seconds"], rel=1e-6)
    assert all(v > 0 for v in d["ratio_to_project"].values())
    assert d["deciding_stage"] in STAGES
    text = capsys.readouterr().out
    assert "s per question" in text and "the stage that decides it" in text
    # the project's models are this process's cached ones: the clock that fixed their answers'
    # length and timed their passes is off again, or every later analysis here is cut short
    from mars_demo.models import registry

    cached = [m for m in (registry.loaded(k) for k in registry.loaded_keys())
              if hasattr(getattr(m, "model", None), "register_forward_hook")]
    assert cached, "the project's models were loaded through the registry"
    for m in cached:
        assert "generate" not in vars(m.model)
        assert not m.model._forward_hooks and not m.model._forward_pre_hooks


def test_the_llama_cpp_system_runs_beside_them_with_the_same_answer_length(tiny_gguf,
                                                                          tiny_models, tmp_path):
    """``--gguf``: the project's default analysis on the same model's GGUF file through
    llama.cpp, every answer exactly --answer-tokens new tokens (its end tokens kept out), its
    figure beside the project's; the clock is off afterwards."""
    out = tmp_path / "peers.json"
    code = peers.main([
        "--peers", "--llm", str(tiny_models["llm"]), "--gguf", str(tiny_gguf),
        "--systems", peers.PROJECT, "--questions", "1", "--rounds", "1", "--samples", "2",
        "--answer-tokens", "5", "--models-shape", "tiny", "--models-dir", str(tmp_path / "m"),
        "--json", str(out)])
    assert code == 0
    d = json.loads(out.read_text())
    assert set(d["seconds_per_question"]) == {peers.PROJECT, peers.LLAMA}
    assert d["generated_tokens_seen"] == {peers.PROJECT: [5], peers.LLAMA: [5]}
    assert d["llama_cpp"]["to_project"] == pytest.approx(
        d["seconds_per_question"][peers.LLAMA] / d["seconds_per_question"][peers.PROJECT])
    (run,) = d["runs"][peers.LLAMA]
    assert all(len(a) > 0 for a in run["answers"]) and run["stages"]["generation"] > 0
    assert run["stages"]["nli"] > 0
    # both engines share the cached NLI and importance models: each pass is counted once
    for name in (peers.PROJECT, peers.LLAMA):
        (one,) = d["runs"][name]
        assert one["calls"] == {"generation": 1, "importance": 1, "nli": 1}
    from mars_demo.models import registry
    from mars_demo.models.llama_cpp import LlamaCppLLM

    (llama,) = [m for m in (registry.loaded(k) for k in registry.loaded_keys())
                if isinstance(m, LlamaCppLLM)]
    assert "generate" not in vars(llama) and llama.tokenizer.eog_ids
