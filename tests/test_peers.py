"""Whole analyses of a real LLM against the peers' own code: SmolLM2-135M-Instruct answers a few
questions through the project's engine (greedy answer and 5 samples, their token statistics, the
NLI, CCP's alternatives, the similarities and embeddings), and the answers with their statistics
are fed to lm-polygraph 0.7.0's stat calculators and estimators and to TruthTorchLM 0.1.19's
MARS and semantic entropy, run in their own venv (``tests/reference/peers_analyses.py``,
``tests/peers.py``).

Each method the docs say follows a peer equals it within :data:`SAME` (1e-6); each documented
convention is checked as the relation the docs state (KLE's scale, stemming, the end token, the
NLI question prefix, TruthTorchLM's n^2 counting). The importance, NLI and similarity models are
the tiny random ones (the NLI with ``microsoft/deberta-large-mnli``'s label order, which
TruthTorchLM assumes): every system runs the very same models.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from peers import require_peers, run_reference

from mars_demo.core import graph, lexical
from mars_demo.engine import Engine
from mars_demo.methods import compute_methods
from mars_demo.settings import Settings

SAME = 1e-6  # one computation, two codes: float64 order, and float32 order of the NLI batches
#: generation's log-probs against a separate teacher-forced pass of the same model (float32,
#: another batch and cache): per token, and for sums over an answer's ~30 tokens
FORCED_TOKEN, FORCED_SUM = 1e-4, 1e-3
QUESTIONS = ["What is the capital of Australia?", "How many legs does a spider have?",
             "Who wrote Romeo and Juliet?"]
METHODS = ("msp,mean_token_entropy,self_certainty,ccp,semantic_density,eigv,eigv_contra,degree,"
           "degree_contra,eccentricity,eccentricity_contra,num_sets,kernel_language_entropy,"
           "lexical_similarity,entropy,eigenscore,p_true,cocoa_msp,cocoa_ppl,cocoa_mte,"
           "token_sar,sar")
TOKEN_LEVEL = ("msp", "mean_token_entropy", "self_certainty", "ccp")


@pytest.fixture(scope="module")
def mnli_nli(tiny_models, tmp_path_factory):
    """The tiny NLI model with deberta-large-mnli's label order (0 contradiction, 1 neutral,
    2 entailment): its classifier's rows reordered, so it says exactly what the tiny one says."""
    from mars_demo.devtools.tiny import relabel_nli

    return relabel_nli(tiny_models["nli"], tmp_path_factory.mktemp("nli-mnli-order") / "nli")


@pytest.fixture(scope="module")
def compared(smollm2_hf, tiny_models, tiny_similarity, mnli_nli, tmp_path_factory):
    """(the project's analyses, what the peers' code computed from them)."""
    python = require_peers()  # skip (or, under CI, fail) before generating anything
    settings = Settings(llm=str(smollm2_hf), importance=str(tiny_models["importance"]),
                        nli=str(mnli_nli), similarity=str(tiny_similarity),
                        max_new_tokens=32, samples=5, methods=METHODS)
    engine = Engine(settings)
    results = engine.score_many(engine.generate_many(QUESTIONS))
    tt = settings.replace(recipe="truthtorchlm", methods="confidence")
    cases = []
    for r in results:
        answers = r.answer_set()
        distinct = [s for k, s in enumerate(answers.samples)
                    if s.text not in [t.text for t in answers.samples[:k]]]
        cases.append({
            "default": r.to_dict(),
            "truthtorchlm": engine.score(dataclasses.replace(answers, samples=distinct),
                                         tt).to_dict(),
            "truthtorchlm_all": engine.rescore(r, tt).to_dict(),
        })
    given = {"models": {"llm": str(smollm2_hf), "nli": str(mnli_nli),
                        "importance": str(tiny_models["importance"])}, "cases": cases}
    peers = run_reference(python, "peers_analyses.py", given, tmp_path_factory.mktemp("peers"))
    assert peers["lm_polygraph_version"] == "0.7.0"
    assert peers["truthtorchlm_version"] == "0.1.19"
    return cases, peers["cases"]


def pairs(compared):
    cases, peers = compared
    return [(c["default"], p["polygraph"]) for c, p in zip(cases, peers)]


def test_the_answers_are_real_and_ended_on_the_end_token(compared):
    for analysis, _ in pairs(compared):
        assert analysis["greedy"]["text"] and len(analysis["samples"]) == 5
        end = analysis["greedy"]["end_token"]
        assert end["text"] == "<|im_end|>" and end["logprob"] <= 0 and end["entropy"] >= 0
        assert not [w for w in analysis["warnings"] if "could not be computed" in w]


def test_the_nli_matrix_is_lm_polygraphs_on_the_question_answer_texts(compared):
    """Every cell of the NLI matrix, the diagonal and identical answers included, equals
    lm-polygraph's ``SemanticMatrixCalculator`` on the same "question answer" texts; on the bare
    answers (its own convention: no question) it differs."""
    for analysis, poly in pairs(compared):
        p = np.array(analysis["nli"]["probabilities"])
        ours = poly["nli_question"]
        assert np.abs(p[..., 0] - np.array(ours["entail"])).max() <= SAME
        assert np.abs(p[..., 2] - np.array(ours["contra"])).max() <= SAME
        bare = poly["nli_bare"]
        assert np.abs(p[..., 0] - np.array(bare["entail"])).max() > 1e-3  # the prefix matters


def test_the_graph_measures_and_kle_are_lm_polygraphs(compared):
    for analysis, poly in pairs(compared):
        m = analysis["methods"]
        for name in ("eigv", "eigv_contra", "degree", "degree_contra", "eccentricity",
                     "eccentricity_contra"):
            assert m[name]["value"] == pytest.approx(poly[name], abs=SAME), name
        # KLE: the project's is KernelLanguageEntropy(scale=False); the default divides by log m
        kle = m["kernel_language_entropy"]["value"]
        assert kle == pytest.approx(poly["kle"], abs=SAME)
        assert kle / math.log(len(analysis["samples"])) == pytest.approx(poly["kle_scaled"],
                                                                         abs=SAME)
        # NumSemSets: its own linking rule on the matrix (the project's num_sets counts the
        # analysis' clusters; num_sets(entailment_sets) is lm-polygraph's)
        sets = graph.entailment_sets(analysis["nli"]["probabilities"])
        assert graph.num_sets(sets) == poly["num_sets"]
        assert m["num_sets"]["value"] == graph.num_sets(analysis["cluster_ids"])
        # lexical similarity: lm-polygraph's stems; the project's method does not
        texts = [s["text"] for s in analysis["samples"]]
        assert lexical.lexical_similarity(texts, use_stemmer=True) == pytest.approx(
            poly["lexical_similarity"], abs=SAME)
        assert m["lexical_similarity"]["value"] == pytest.approx(
            lexical.lexical_similarity(texts), abs=1e-12)
        assert m["entropy"]["length_normalized"] == pytest.approx(poly["entropy"], abs=SAME)


def test_the_token_level_methods_follow_lm_polygraph_under_both_end_token_conventions(compared):
    """msp, mean token entropy and CCP (with lm-polygraph's own NLI calculator over the saved
    alternatives) equal its estimators with the end token left out (``--end-token exclude``,
    the default) and counted (``include``, lm-polygraph's own convention); perplexity is
    ``confidence`` under LN without it and the documented relation with it."""
    for analysis, poly in pairs(compared):
        both = {"exclude": analysis["methods"],
                "include": compute_methods(analysis, TOKEN_LEVEL, "include")}
        for convention, m in both.items():
            p = poly[convention]
            assert m["msp"]["value"] == pytest.approx(p["msp"], abs=SAME), convention
            assert m["mean_token_entropy"]["length_normalized"] == pytest.approx(
                p["mean_token_entropy"], abs=SAME), convention
            assert m["ccp"]["length_normalized"] == pytest.approx(p["ccp"], abs=SAME), convention
        end = analysis["greedy"]["end_token"]
        assert both["include"]["msp"]["value"] == pytest.approx(
            both["exclude"]["msp"]["value"] - end["logprob"], abs=1e-9)
        confidence = analysis["uncertainty"]["confidence"]["length_normalized"]
        assert confidence == pytest.approx(poly["exclude"]["perplexity"], abs=SAME)
        n = len(analysis["greedy"]["tokens"])
        assert (n * confidence - end["logprob"]) / (n + 1) == pytest.approx(
            poly["include"]["perplexity"], abs=SAME)


def test_ccps_verdicts_are_lm_polygraphs_both_ways(compared):
    """The saved verdicts (greedy word -> alternative, and back) are those of lm-polygraph's
    ``GreedyAlternativesNLICalculator`` on the same alternatives, end token included."""
    short = {"entailment": "entail", "contradiction": "contra", "neutral": "neutral"}
    for analysis, poly in pairs(compared):
        entry = analysis["method_inputs"]["ccp"]
        forward = entry["labels"] + [entry["end_labels"]]
        backward = entry["backward_labels"] + [entry["end_backward_labels"]]
        theirs = poly["include"]["ccp_nli"]
        assert len(theirs) == len(forward)
        for f, b, matrix in zip(forward, backward, theirs):
            assert [short[x] for x in f[1:]] == [matrix[0][i] for i in range(1, len(f))]
            assert [short[x] for x in b[1:]] == [matrix[i][0] for i in range(1, len(b))]


def test_token_statistics_equal_a_teacher_forced_pass(compared):
    """Generation's token log-probs and entropies, the end token's included, against a plain
    teacher-forced pass whose entropies lm-polygraph's ``EntropyCalculator`` computes, and
    self-certainty against its ``SelfCertainty`` on the full distributions."""
    for analysis, poly in pairs(compared):
        forced = poly["forced"]
        tokens = analysis["greedy"]["tokens"] + [analysis["greedy"]["end_token"]]
        assert np.abs(np.array([t["logprob"] for t in tokens])
                      - np.array(forced["token_logprobs"])).max() <= FORCED_TOKEN
        assert np.abs(np.array([t["entropy"] for t in tokens])
                      - np.array(forced["entropies"])).max() <= FORCED_TOKEN
        include = compute_methods(analysis, ["self_certainty"], "include")
        for convention, m in (("exclude", analysis["methods"]), ("include", include)):
            assert m["self_certainty"]["value"] == pytest.approx(
                forced[convention]["self_certainty"], abs=FORCED_TOKEN)
        assert analysis["methods"]["msp"]["value"] == pytest.approx(
            forced["exclude"]["msp"], abs=FORCED_SUM)


def test_density_eigenscore_cocoa_sar_and_p_true_are_lm_polygraphs(compared):
    for analysis, poly in pairs(compared):
        m = analysis["methods"]
        assert m["semantic_density"]["length_normalized"] == pytest.approx(
            poly["semantic_density"], abs=SAME)
        saved = analysis["method_inputs"]["greedy_nli"]["probabilities"]
        assert np.abs(np.array(saved)[:, 2] - poly["semantic_density_nli"]["contra"]).max() <= SAME
        assert m["eigenscore"]["value"] == pytest.approx(poly["eigenscore"], abs=SAME)
        assert m["cocoa_msp"]["value"] == pytest.approx(poly["cocoa_msp"], abs=SAME)
        assert m["cocoa_ppl"]["length_normalized"] == pytest.approx(poly["cocoa_ppl"], abs=SAME)
        assert m["cocoa_mte"]["length_normalized"] == pytest.approx(poly["cocoa_mte"], abs=SAME)
        assert m["token_sar"]["value"] == pytest.approx(poly["token_sar"], abs=SAME)
        assert m["sar"]["value"] == pytest.approx(poly["sar"], abs=SAME)
        assert m["p_true"]["value"] == pytest.approx(poly["p_true"], abs=SAME)


def test_truthtorchlms_mars_equals_the_truthtorchlm_recipe(compared):
    cases, peers = compared
    for case, peer in zip(cases, peers):
        a = case["truthtorchlm"]
        ours = [a["greedy"]["scores"]["mars"]] + [s["scores"]["mars"] for s in a["samples"]]
        assert np.abs(np.array(ours) - np.array(peer["truthtorchlm"]["mars"])).max() <= SAME


def test_truthtorchlms_semantic_entropy_equals_the_recipe_but_for_its_n2_counting(compared):
    """Its clustering (first member, lenient) is the recipe's: on distinct samples its
    semantic entropy equals the recipe's; with repeated answers it counts an answer given n
    times n^2 times (a defect of the library), which the recipe does not copy."""
    cases, peers = compared
    repeated = 0
    for case, peer in zip(cases, peers):
        ttlm = peer["truthtorchlm"]
        distinct = case["truthtorchlm"]
        assert distinct["settings"]["cluster_rule"] == "lenient"
        assert ttlm["semantic_entropy"] == pytest.approx(
            distinct["uncertainty"]["semantic_entropy"]["length_normalized"], abs=SAME)
        assert same_partition(ttlm["clusters"], distinct)
        full, theirs = case["truthtorchlm_all"], peer["truthtorchlm_all"]
        assert same_partition(theirs["clusters"], full)
        texts = [s["text"] for s in full["samples"]]
        ln = [s["scores"]["length_normalized"] for s in full["samples"]]
        by_cluster: dict[int, list[float]] = {}
        for text, cid in zip(texts, full["cluster_ids"]):  # each sample once per copy of it
            by_cluster.setdefault(cid, []).extend(
                score for other, score in zip(texts, ln) if other == text)
        n2 = -float(np.mean([np.logaddexp.reduce(v) for v in by_cluster.values()]))
        assert theirs["semantic_entropy"] == pytest.approx(n2, abs=SAME)
        ours = full["uncertainty"]["semantic_entropy"]["length_normalized"]
        if len(set(texts)) < len(texts):
            repeated += 1
            assert abs(ours - n2) > 1e-3
        else:
            assert ours == pytest.approx(n2, abs=SAME)
    assert repeated >= 1, "no question gave a repeated sample: the n^2 defect was not seen"


def same_partition(clusters: list[list[str]], analysis: dict) -> bool:
    """Whether TruthTorchLM's clusters (lists of texts) group the samples as the analysis'
    cluster ids do."""
    theirs = {text: k for k, texts in enumerate(clusters) for text in texts}
    texts = [s["text"] for s in analysis["samples"]]
    return _first_seen([theirs[t] for t in texts]) == _first_seen(analysis["cluster_ids"])


def _first_seen(ids: list[int]) -> list[int]:
    seen: dict[int, int] = {}
    return [seen.setdefault(i, len(seen)) for i in ids]
