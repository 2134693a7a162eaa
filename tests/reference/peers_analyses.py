"""Run the peers' own code, lm-polygraph 0.7.0 and TruthTorchLM 0.1.19, on whole analyses of the
project: real answers with their statistics, fed to the peers' stat calculators and estimators.

    PEERS_PYTHON tests/reference/peers_analyses.py IN.json OUT.json

``PEERS_PYTHON`` is the python of the venv ``scripts/peers_venv.sh`` builds (the peers, with the
project's torch and transformers); ``tests/test_peers.py`` writes ``IN.json`` and compares
``OUT.json`` with the project's values. This script imports the peers' code (and torch,
transformers and numpy), never the project's: what it computes is theirs alone. ``IN.json``::

    {"models": {"llm": DIR, "nli": DIR, "importance": DIR},
     "cases": [{"default": analysis JSON, "truthtorchlm": its distinct samples under that
                recipe, "truthtorchlm_all": all its samples under that recipe}]}

Where the peers' inputs are the model's (the NLI matrix, CCP's NLI verdicts, semantic density's
NLI, the token statistics of a teacher-forced pass), their own calculators compute them from the
answers' texts and ids; where they are the project's saved statistics (log-probs, entropies,
alternatives, similarities, embeddings), those are passed as lm-polygraph's stats under both
end-token conventions: ``exclude`` (the answers' own tokens) and ``include`` (the end-of-sequence
token appended, as lm-polygraph's generation keeps it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # TruthTorchLM's litellm: offline


def nli_wrapper(path: str):
    """lm-polygraph's ``Deberta`` holding the given NLI model and its tokenizer (its own
    ``setup`` loads ``DebertaTokenizer``, which needs the slow tokenizer's files)."""
    from lm_polygraph.utils.deberta import Deberta
    from transformers import AutoTokenizer, DebertaForSequenceClassification

    nli = Deberta.__new__(Deberta)
    nli.deberta_path, nli.batch_size, nli.device, nli.hf_cache = path, 10, "cpu", None
    nli._deberta = DebertaForSequenceClassification.from_pretrained(path).eval()
    nli._deberta_tokenizer = AutoTokenizer.from_pretrained(path)
    return nli


def greedy_stats(greedy: dict, include: bool) -> dict:
    """lm-polygraph's greedy statistics of one saved greedy answer (a batch of one)."""
    tokens = list(greedy["tokens"])
    end = greedy.get("end_token")
    if include and end:
        tokens.append(end)
    return {
        "greedy_tokens": [[t.get("id") for t in tokens]],
        "greedy_log_likelihoods": [np.array([t["logprob"] for t in tokens])],
        "entropy": [[t["entropy"] for t in tokens]],
        "greedy_tokens_alternatives": [[[(a[0], a[1]) for a in t["alternatives"]]
                                        for t in tokens]],
    }


def polygraph_case(analysis: dict, nli, llm, llm_tokenizer) -> dict:
    import torch
    from lm_polygraph.estimators import (
        SAR,
        ClaimConditionedProbability,
        CocoaMSP,
        CocoaMTE,
        CocoaPPL,
        DegMat,
        Eccentricity,
        EigenScore,
        EigValLaplacian,
        KernelLanguageEntropy,
        LexicalSimilarity,
        MaximumSequenceProbability,
        MeanTokenEntropy,
        MonteCarloNormalizedSequenceEntropy,
        NumSemSets,
        Perplexity,
        PTrue,
        SelfCertainty,
        SemanticDensity,
        TokenSAR,
    )
    from lm_polygraph.stat_calculators.entropy import EntropyCalculator
    from lm_polygraph.stat_calculators.greedy_alternatives_nli import (
        GreedyAlternativesNLICalculator,
    )
    from lm_polygraph.stat_calculators.greedy_semantic_matrix import (
        ConcatGreedySemanticMatrixCalculator,
    )
    from lm_polygraph.stat_calculators.semantic_matrix import SemanticMatrixCalculator

    question = analysis["question"]
    greedy, samples = analysis["greedy"], analysis["samples"]
    texts = [s["text"] for s in samples]
    out: dict = {}

    # the NLI matrix: their calculator, on "question answer" texts (the project's input) and on
    # the bare answers (their own convention)
    matrices = {}
    for name, given in (("question", [f"{question} {t}" for t in texts]), ("bare", texts)):
        made = SemanticMatrixCalculator(nli)({"sample_texts": [given]}, given, None)
        matrices[name] = made
        out[f"nli_{name}"] = {"entail": made["semantic_matrix_entail"][0].tolist(),
                              "contra": made["semantic_matrix_contra"][0].tolist()}
    stats = {**matrices["question"], "sample_texts": [texts]}
    for affinity in ("entail", "contra"):
        suffix = "" if affinity == "entail" else "_contra"
        out[f"eigv{suffix}"] = one(EigValLaplacian(affinity=affinity)(stats))
        out[f"degree{suffix}"] = one(DegMat(affinity=affinity)(stats))
        out[f"eccentricity{suffix}"] = one(Eccentricity(affinity=affinity)(stats))
    out["num_sets"] = one(NumSemSets()(stats))
    out["kle"] = one(KernelLanguageEntropy(scale=False)(stats))
    out["kle_scaled"] = one(KernelLanguageEntropy()(stats))
    out["lexical_similarity"] = one(LexicalSimilarity("rougeL")({"sample_texts": [texts]}))

    sample_lps = [np.array([t["logprob"] for t in s["tokens"]]) for s in samples]
    sample_stats = {"sample_log_probs": [[float(x.sum()) for x in sample_lps]],
                    "sample_tokens": [[[t.get("id") for t in s["tokens"]] for s in samples]],
                    "sample_texts": [texts]}
    out["entropy"] = one(MonteCarloNormalizedSequenceEntropy()(sample_stats))

    # the greedy answer's token-level estimators, CCP with their NLI calculator, both ways
    for convention in ("exclude", "include"):
        g = greedy_stats(greedy, convention == "include")
        g.update(GreedyAlternativesNLICalculator(nli)(g, [question], None))
        out[convention] = {
            "msp": one(MaximumSequenceProbability()(g)),
            "perplexity": one(Perplexity()(g)),
            "mean_token_entropy": one(MeanTokenEntropy()(g)),
            "ccp": one(ClaimConditionedProbability()(g)),
            "ccp_nli": g["greedy_tokens_alternatives_nli"][0],
        }

    # the same estimators on a plain teacher-forced pass of the LLM (prompt, answer, end
    # token), its entropies by their EntropyCalculator, self-certainty from the full
    # distributions
    ids = list(greedy["tokens"]) + ([greedy["end_token"]] if greedy.get("end_token") else [])
    prompt = list(analysis["prompt_token_ids"])
    full = torch.tensor([prompt + [t["id"] for t in ids]])
    with torch.inference_mode():
        logp = torch.log_softmax(llm(full).logits[0].double(), -1)
    rows = [logp[len(prompt) - 1 + k].numpy() for k in range(len(ids))]
    lls = [float(row[t["id"]]) for row, t in zip(rows, ids)]
    n = len(greedy["tokens"])
    forced = {"token_logprobs": lls}
    for convention, k in (("exclude", n), ("include", len(ids))):
        f = {"greedy_log_probs": [rows[:k]], "greedy_log_likelihoods": [np.array(lls[:k])]}
        f.update(EntropyCalculator()(f, [question], None))
        forced["entropies"] = [float(x) for x in f["entropy"][0]]
        forced[convention] = {"msp": one(MaximumSequenceProbability()(f)),
                              "perplexity": one(Perplexity()(f)),
                              "mean_token_entropy": one(MeanTokenEntropy()(f)),
                              "self_certainty": one(SelfCertainty()(f))}
    out["forced"] = forced

    # semantic density: their greedy-to-sample NLI ("question " + text, both sides, as the
    # project's input) and estimator, over the answers' own tokens
    dens = {"greedy_texts": [greedy["text"]], "no_fewshot_input_texts": [f"{question} "],
            "sample_texts": [texts]}
    dens.update(ConcatGreedySemanticMatrixCalculator(nli)(dens, [question], None))
    dens.update(sample_stats)
    dens["greedy_log_likelihoods"] = [np.array([t["logprob"] for t in greedy["tokens"]])]
    dens["greedy_log_probs"] = dens["greedy_log_likelihoods"]
    out["semantic_density"] = one(SemanticDensity()(dens))
    out["semantic_density_nli"] = {
        "contra": dens["concat_greedy_semantic_matrix_contra_forward"][0].tolist(),
        "neutral": dens["concat_greedy_semantic_matrix_neutral_forward"][0].tolist()}

    saved = analysis.get("method_inputs") or {}
    if "eigenscore" in saved:
        out["eigenscore"] = one(EigenScore()(
            {"sample_embeddings": [np.array(saved["eigenscore"]["embeddings"])]}))
    sar = saved.get("sar") or {}
    if "greedy_similarity" in sar:
        sim = (np.array(sar["greedy_similarity"]["forward"])
               + np.array(sar["greedy_similarity"]["backward"])) / 2
        c = {**greedy_stats(greedy, False), "greedy_sentence_similarity": [sim]}
        out["cocoa_msp"] = one(CocoaMSP()(c))
        out["cocoa_ppl"] = one(CocoaPPL()(c))
        out["cocoa_mte"] = one(CocoaMTE()(c))
    if "token_similarities" in sar and "sample_similarity" in sar:
        token_sims = [np.array(x) for x in sar["token_similarities"]]
        # lm-polygraph's TokenSAR reads one answer: each sample's, averaged as the project does
        out["token_sar"] = float(np.mean([one(TokenSAR()(
            {"greedy_log_likelihoods": [lp], "token_similarity": [ts]}))
            for lp, ts in zip(sample_lps, token_sims)]))
        out["sar"] = one(SAR()({"sample_log_likelihoods": [sample_lps],
                                "sample_token_similarity": [token_sims],
                                "sample_sentence_similarity": np.array(
                                    sar["sample_similarity"])[None]}))
    if "p_true" in saved:
        out["p_true"] = one(PTrue()({"p_true": np.array([saved["p_true"]["logprob"]])}))
    return out


def truthtorchlm_case(analysis: dict, importance, importance_tokenizer, nli_model,
                      nli_tokenizer, llm_tokenizer) -> dict:
    """TruthTorchLM's MARS of each answer (its importance vector and score, from the answer's
    token ids decoded as it decodes them and their log-probs) and its semantic entropy of the
    samples (its clustering with the NLI model, length-normalized scores)."""
    from TruthTorchLM.scoring_methods import LengthNormalizedScoring
    from TruthTorchLM.truth_methods import MARS, SemanticEntropy

    question = analysis["question"]
    mars = MARS(mars_model=importance, mars_tokenizer=importance_tokenizer, device="cpu")
    scores = []
    for answer in [analysis["greedy"], *analysis["samples"]]:
        ids = [t["id"] for t in answer["tokens"]]
        probs = np.exp(np.array([t["logprob"] for t in answer["tokens"]]))
        tokens_text = [llm_tokenizer.decode(i) for i in ids]
        text = llm_tokenizer.decode(ids, skip_special_tokens=False)
        vector, phrases = mars.get_importance_vector_MARS(importance, importance_tokenizer,
                                                          question, text)
        score, _ = mars.compute_token_nll_importance_phrase(probs, tokens_text, vector, phrases)
        scores.append(float(score))
    se = SemanticEntropy(model_for_entailment=nli_model, tokenizer_for_entailment=nli_tokenizer,
                         entailment_model_device="cpu")
    texts = [s["text"] for s in analysis["samples"]]
    ln = [float(LengthNormalizedScoring()([t["logprob"] for t in s["tokens"]]))
          for s in analysis["samples"]]
    got = se._semantic_entropy(texts, question, ln, list(zip(texts, ln)))
    return {"mars": scores, "semantic_entropy": float(got["semantic_entropy"]),
            "clusters": [list(c) for c in got["clusters"]]}


def one(values) -> float:
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    assert array.size == 1, array
    return float(array[0])


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__)
        return 2
    from importlib.metadata import version

    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
    )

    given = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    paths = given["models"]
    nli = nli_wrapper(paths["nli"])
    llm = AutoModelForCausalLM.from_pretrained(paths["llm"]).eval()
    llm_tokenizer = AutoTokenizer.from_pretrained(paths["llm"])
    importance = AutoModelForTokenClassification.from_pretrained(paths["importance"]).eval()
    importance_tokenizer = AutoTokenizer.from_pretrained(paths["importance"])
    nli_model = AutoModelForSequenceClassification.from_pretrained(paths["nli"]).eval()
    nli_tokenizer = AutoTokenizer.from_pretrained(paths["nli"])
    cases = []
    for case in given["cases"]:
        ttlm = [truthtorchlm_case(case[key], importance, importance_tokenizer, nli_model,
                                  nli_tokenizer, llm_tokenizer)
                for key in ("truthtorchlm", "truthtorchlm_all")]
        cases.append({"polygraph": polygraph_case(case["default"], nli, llm, llm_tokenizer),
                      "truthtorchlm": ttlm[0], "truthtorchlm_all": ttlm[1]})
    out = {"lm_polygraph_version": version("lm_polygraph"),
           "truthtorchlm_version": version("truthtorchlm"), "cases": cases}
    Path(argv[2]).write_text(json.dumps(out, allow_nan=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
