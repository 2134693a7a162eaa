"""The token-level, CoCoA, density, CCP and EigenScore methods through the engine on tiny
models: the per-token entropy and divergence from uniform saved with each token (equal to the
model's own distribution), the greedy tokens' alternatives, the extra NLI pairs and the
embeddings saved in the analysis, and every value recomputed from the saved JSON alone, within
1e-9, in a process where torch is never imported."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import cli, model_flags

from mars_demo.core import token_level
from mars_demo.engine import Engine
from mars_demo.methods import compute_methods

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Which planet is known as the Red Planet?"
NEW = ("msp", "mean_token_entropy", "self_certainty", "answer_length", "semantic_density",
       "cocoa_msp", "cocoa_ppl", "cocoa_mte", "ccp", "eigenscore")


@pytest.fixture(scope="module")
def analysis(tiny_settings, tiny_similarity):
    settings = tiny_settings.replace(methods=",".join(NEW), similarity=str(tiny_similarity))
    return Engine(settings).analyze(QUESTION)


def test_each_method_is_computed(analysis):
    assert list(analysis.methods) == list(NEW), analysis.warnings
    for values in analysis.methods.values():
        assert all(math.isfinite(v) for v in values.values())
    g = analysis.greedy
    lp = [t.logprob for t in g.tokens]
    h = [t.entropy for t in g.tokens]
    assert analysis.methods["msp"]["value"] == pytest.approx(-sum(lp), abs=1e-12)
    assert analysis.methods["answer_length"]["value"] == len(g.tokens)
    mte = analysis.methods["mean_token_entropy"]
    assert mte["length_normalized"] == pytest.approx(np.mean(h), abs=1e-12)
    assert mte["mars"] == pytest.approx(np.dot(g.mars_weights, h), abs=1e-12)
    assert analysis.methods["self_certainty"]["value"] == pytest.approx(
        -np.mean([t.kl_uniform for t in g.tokens]), abs=1e-12)


def test_the_token_statistics_are_the_models_own(analysis, tiny_settings):
    """Each saved entropy and KL(U || p) equals the one computed here from the LLM's logits over
    the prompt and the greedy answer (teacher forcing gives the logits generation saw)."""
    import torch

    from mars_demo.models.registry import llm_for

    llm = llm_for(tiny_settings)
    g = analysis.greedy
    ids = list(analysis.prompt_token_ids) + [t.id for t in g.tokens]
    with torch.inference_mode():
        logits = llm.model(torch.tensor([ids])).logits[0].double()
    start = len(analysis.prompt_token_ids)
    for k, token in enumerate(g.tokens):
        logp = torch.log_softmax(logits[start - 1 + k], -1).numpy()
        assert token.entropy == pytest.approx(token_level.entropy_of(logp), abs=1e-4)
        assert token.kl_uniform == pytest.approx(token_level.kl_from_uniform(logp), abs=1e-3)
        assert token.alternatives[0][0] == token.text or token.alternatives[0][1] == \
            pytest.approx(token.logprob, abs=1e-5)
        assert len(token.alternatives) == 10
        top = sorted(logp, reverse=True)[:10]
        assert max(a[1] for a in token.alternatives) == pytest.approx(top[0], abs=1e-4)
    for sample in analysis.samples:  # the samples carry their entropies; no alternatives
        assert all(t.entropy is not None and t.alternatives is None for t in sample.tokens)


def test_what_the_extra_passes_saved(analysis):
    saved = analysis.method_inputs
    n = len(analysis.samples)
    assert len(saved["greedy_nli"]["probabilities"]) == n
    assert saved["greedy_nli"]["greedy"] == analysis.greedy.text
    assert len(saved["ccp"]["labels"]) == len(analysis.greedy.tokens)
    assert all(row[0] == "entailment" for row in saved["ccp"]["labels"])
    embeddings = np.array(saved["eigenscore"]["embeddings"])
    assert embeddings.shape[0] == n and embeddings.shape[1] > 1
    assert len(saved["sar"]["greedy_similarity"]["forward"]) == n


def test_score_methods_only_recomputes_each_without_any_model(analysis, tmp_path):
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(analysis.to_dict()), encoding="utf-8")
    code = (
        "import sys, json\n"
        "from mars_demo.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "assert not {'torch', 'transformers'} & set(sys.modules), 'a model library was loaded'\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, "score", str(path), "--methods-only",
                           "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)["methods"]
    assert list(again) == list(NEW)
    for m, values in analysis.methods.items():
        for k, v in values.items():
            assert abs(again[m][k] - v) <= 1e-9, (m, k)


def test_an_analysis_without_the_token_statistics_says_what_it_lacks(analysis):
    data = analysis.to_dict()
    for token in data["greedy"]["tokens"]:
        token.pop("entropy"), token.pop("kl_uniform")
    with pytest.raises(ValueError, match="holds no entropy of the greedy answer's tokens"):
        compute_methods(data, ["mean_token_entropy"])
    with pytest.raises(ValueError, match="full next-token distribution.*self_certainty"):
        compute_methods(data, ["self_certainty"])
    del data["method_inputs"]["eigenscore"]
    with pytest.raises(ValueError, match="middle-layer embeddings.*--methods eigenscore"):
        compute_methods(data, ["eigenscore"])


def test_answers_given_as_text_get_their_token_statistics_from_the_teacher_forced_pass(
        tiny_settings):
    result = Engine(tiny_settings.replace(methods="mean_token_entropy,self_certainty")).score(
        {"question": QUESTION, "greedy": "Mars", "samples": ["Mars", "It is Venus"]})
    tokens = result.greedy.tokens
    assert all(t.entropy is not None and t.kl_uniform is not None for t in tokens)
    assert list(result.methods) == ["mean_token_entropy", "self_certainty"]
    assert result.methods["mean_token_entropy"]["length_normalized"] == pytest.approx(
        np.mean([t.entropy for t in tokens]), abs=1e-12)


def test_ccp_is_recomputed_from_both_directions_combined(analysis):
    """The saved CCP entry holds the verdicts both ways, and CCP is lm-polygraph's estimator
    over the two combined (``_combine_nli``), the greedy token counting for itself."""
    entry = analysis.method_inputs["ccp"]
    g = analysis.greedy
    assert len(entry["backward_labels"]) == len(entry["labels"]) == len(g.tokens)
    terms = []
    for token, forward, backward in zip(g.tokens, entry["labels"], entry["backward_labels"]):
        lps = [a[1] for a in token.alternatives]
        combined = [token_level.combine_nli(f, b) for f, b in zip(forward, backward)]
        entail = [lps[0]] + [lp for lp, c in zip(lps[1:], combined[1:]) if c == "entailment"]
        contra = [lp for lp, c in zip(lps[1:], combined[1:]) if c == "contradiction"]
        terms.append(np.logaddexp.reduce(entail) - np.logaddexp.reduce(entail + contra))
    assert analysis.methods["ccp"]["length_normalized"] == pytest.approx(-np.exp(sum(terms)),
                                                                         abs=1e-12)


def test_the_ccp_stage_asks_both_ways_and_identical_words_too():
    """Every (greedy word, alternative) pair and its reverse goes to the NLI model, identical
    words included ("Paris" and " Paris," strip to the same word; the authors ask the model
    about those too), each distinct pair once; the labels are the model's."""
    from types import SimpleNamespace

    from mars_demo.engine.stages.ccp import CCPStage
    from mars_demo.models.nli import PairVerdicts

    asked = []

    class FakeNLI:
        model_id = "fake-nli"

        def judge(self, pairs):
            asked.extend(pairs)
            verdict = {("Paris", "Lyon"): "contradiction", ("Lyon", "Paris"): "neutral",
                       ("Paris", "Paris"): "neutral"}
            return PairVerdicts(labels=[verdict.get(p, "entailment") for p in pairs],
                                probabilities=[[1.0, 0.0, 0.0]] * len(pairs))

    token = SimpleNamespace(alternatives=[["Paris", -0.2], [" Lyon", -1.9], [" Paris,", -2.5]])
    end = SimpleNamespace(alternatives=[["<|im_end|>", -0.1], [".", -2.6]])
    job = SimpleNamespace(scored=[SimpleNamespace(tokens=[token, token], end_token=end)])
    CCPStage().compute([job], SimpleNamespace(nli=FakeNLI()))
    assert asked == [("Paris", "Lyon"), ("Lyon", "Paris"), ("Paris", "Paris"),
                     ("im_end", ""), ("", "im_end")]
    entry = job.ccp_outputs
    assert entry["labels"] == [["entailment", "contradiction", "neutral"]] * 2
    assert entry["backward_labels"] == [["entailment", "neutral", "neutral"]] * 2
    assert entry["end_words"] == ["im_end", ""] and entry["pairs"] == 5
    combined = [token_level.combine_nli(f, b) for f, b in zip(entry["labels"][0],
                                                              entry["backward_labels"][0])]
    assert combined == ["entailment", "contradiction", "neutral"]


def test_ccp_of_answers_without_alternatives_names_the_fix_that_works(analysis, tiny_models,
                                                                       tmp_path):
    """A saved answer whose greedy tokens carry no alternatives: `score --methods ccp` cannot
    make them (scoring again leaves CCP out again), so the warning sends the user to ask again,
    which does save them (the module's analysis, asked with ccp, has its value)."""
    data = analysis.to_dict()
    for token in data["greedy"]["tokens"]:
        token.pop("alternatives", None)
    data["method_inputs"].pop("ccp", None)
    data.pop("methods", None)
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = cli("score", str(path), *model_flags(tiny_models), "--methods", "ccp",
                         "--json")
    assert code == 0, err
    scored = json.loads(out)
    assert "ccp" not in (scored.get("methods") or {})
    said = [w for w in scored["warnings"] if "ccp could not be computed" in w]
    assert len(said) == 1, scored["warnings"]
    assert "ask again with --methods ccp" in said[0]
    assert "score its answers again" not in said[0]
    assert "ccp" in analysis.methods  # asking again with --methods ccp does compute it
