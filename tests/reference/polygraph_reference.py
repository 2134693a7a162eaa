"""Compute lm-polygraph's values of the methods in ``mars_demo.core`` on hand-made inputs.

Writes ``polygraph_values.json`` beside this file: every input and lm-polygraph's result, which
``tests/test_core_methods_reference.py`` compares with this project's functions. It needs
lm-polygraph 0.7.0, which brings torch and much more, so run it in a virtual environment of its
own, never the project's:

    python -m venv /tmp/polygraph
    /tmp/polygraph/bin/pip install lm-polygraph==0.7.0
    /tmp/polygraph/bin/python tests/reference/polygraph_reference.py

Only lm-polygraph's estimators (numpy code over precomputed statistics) are called; no model
is loaded. The NLI inputs are (entailment, neutral, contradiction) probabilities for every
ordered pair, premise first, as ``mars_demo.core.graph`` takes them; lm-polygraph gets their
entailment and contradiction planes as ``semantic_matrix_entail`` / ``semantic_matrix_contra``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("polygraph_values.json")

E, N, C = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]


def nli_cases() -> dict[str, list]:
    """Hand-made NLI probability arrays of shape (m, m, 3)."""
    rng = np.random.default_rng(20240519)

    def random_nli(m: int, self_entail: bool) -> list:
        probabilities = rng.dirichlet([0.6, 0.4, 0.6], size=(m, m))
        if self_entail:
            probabilities[np.arange(m), np.arange(m)] = E
        return probabilities.round(6).tolist()  # rounded: exact in JSON, still summing to 1

    def fix_sums(array: list) -> list:
        a = np.array(array)
        a[..., 1] = 1.0 - a[..., 0] - a[..., 2]  # neutral takes the rounding
        return a.tolist()

    different = [[E if i == j else C for j in range(4)] for i in range(4)]
    ties = [  # 0 and 1 identical rows (degenerate eigenvalues); p_entail = p_contra ties
        [E, E, [0.4, 0.2, 0.4], [0.3, 0.4, 0.3]],
        [E, E, [0.4, 0.2, 0.4], [0.3, 0.4, 0.3]],
        [[0.4, 0.2, 0.4], [0.4, 0.2, 0.4], E, [0.5, 0.5, 0.0]],
        [[0.3, 0.4, 0.3], [0.3, 0.4, 0.3], [0.5, 0.5, 0.0], E],
    ]
    neutral = [[E if i == j else N for j in range(3)] for i in range(3)]
    return {
        "one": [[E]],
        "identical": [[E] * 4 for _ in range(4)],
        "different": different,
        "ties": ties,
        "neutral": neutral,
        "chain": [[E, E, C], [E, E, [0.2, 0.7, 0.1]], [C, [0.1, 0.6, 0.3], E]],
        "random5": fix_sums(random_nli(5, self_entail=False)),
        "random5_self": fix_sums(random_nli(5, self_entail=True)),
        "random10": fix_sums(random_nli(10, self_entail=False)),
    }


LEXICAL_CASES = {
    "three": ["Paris", "Paris, France", "Lyon"],
    "identical": ["The Eiffel Tower", "The Eiffel Tower", "The Eiffel Tower"],
    "different": ["red apple", "blue sky", "green grass"],
    "stems": ["The cats sat on the mats", "the cat sat on a mat", "Cats are sitting"],
    "one": ["Paris"],
    "sentences": [
        "Hamlet was written by William Shakespeare around 1600.",
        "William Shakespeare wrote Hamlet.",
        "It was written by Christopher Marlowe in 1590.",
        "Shakespeare.",
    ],
}

LOG = math.log
SAR_CASES = {
    # token log-probs and token-drop similarities per sampled answer, and the answers'
    # similarity matrix (asymmetric on purpose: row j is read for answer j)
    "generic": {
        "token_logprobs": [[LOG(0.9), LOG(0.5), LOG(0.2)], [LOG(0.7), LOG(0.6)], [LOG(0.3)]],
        "token_similarities": [[0.95, 0.4, 0.1], [0.8, 0.6], [0.5]],
        "similarity": [[0.99, 0.8, 0.05], [0.7, 0.98, 0.1], [0.02, 0.15, 0.97]],
    },
    "one": {
        "token_logprobs": [[LOG(0.6), LOG(0.3)]],
        "token_similarities": [[0.2, 0.9]],
        "similarity": [[1.0]],
    },
    "identical": {
        "token_logprobs": [[LOG(0.8), LOG(0.4)]] * 3,
        "token_similarities": [[0.3, 0.3]] * 3,  # a tie: equal relevance
        "similarity": [[1.0] * 3] * 3,
    },
    "unrelated": {
        "token_logprobs": [[LOG(0.5)], [LOG(0.25)], [LOG(0.125), LOG(0.5)]],
        "token_similarities": [[0.0], [0.7], [0.0, 0.0]],
        "similarity": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    },
}

P_TRUE_LOGPROBS = [LOG(0.8), LOG(0.5), LOG(1e-6), 0.0]
DISCRETE_SE_CASES = {"mixed": [0, 1, 1, 1], "all_one": [3, 3, 3], "all_different": [0, 1, 2, 3]}


def planes(nli: list) -> tuple[np.ndarray, np.ndarray]:
    array = np.array(nli, dtype=np.float64)
    return array[None, :, :, 0], array[None, :, :, 2]


def main() -> None:
    import lm_polygraph
    from lm_polygraph.estimators import (
        SAR,
        DegMat,
        Eccentricity,
        EigValLaplacian,
        KernelLanguageEntropy,
        LexicalSimilarity,
        NumSemSets,
        PTrue,
        SemanticEntropy,
        SentenceSAR,
        TokenSAR,
    )

    results: dict = {
        "lm_polygraph_version": getattr(lm_polygraph, "__version__", None) or _version(),
        "numpy_version": np.__version__,
        "nli": {},
        "lexical": {},
        "sar": {},
        "p_true": [],
        "semantic_entropy_discrete": {},
    }
    for name, nli in nli_cases().items():
        entail, contra = planes(nli)
        texts = [[f"answer {i}" for i in range(entail.shape[1])]]
        stats = {
            "semantic_matrix_entail": entail,
            "semantic_matrix_contra": contra,
            "sample_texts": texts,
        }
        row: dict = {"input": nli}
        for affinity in ("entail", "contra"):
            row[f"eigv_{affinity}"] = _one(EigValLaplacian(affinity=affinity)(stats))
            row[f"degree_{affinity}"] = _one(DegMat(affinity=affinity)(stats))
            row[f"eccentricity_{affinity}"] = _one(Eccentricity(affinity=affinity)(stats))
        row["num_sem_sets"] = _one(NumSemSets()(stats))
        row["kle_scaled"] = _one(KernelLanguageEntropy()(stats))
        row["kle"] = _one(KernelLanguageEntropy(scale=False)(stats))
        results["nli"][name] = row

    for stemmer_name, texts_by_case in (("rougeL", LEXICAL_CASES),):
        for name, texts in texts_by_case.items():
            value = _one(LexicalSimilarity(stemmer_name)({"sample_texts": [texts]}))
            results["lexical"][name] = {"input": texts, "value": value}

    for name, case in SAR_CASES.items():
        logprobs = [np.array(x) for x in case["token_logprobs"]]
        token_sims = [np.array(x) for x in case["token_similarities"]]
        similarity = np.array(case["similarity"])[None]
        sample_log_probs = [[float(x.sum()) for x in logprobs]]
        results["sar"][name] = {
            "input": case,
            # lm-polygraph's TokenSAR reads one answer (the greedy one): the first here
            "token_sar_first": _one(
                TokenSAR()(
                    {"greedy_log_likelihoods": [logprobs[0]], "token_similarity": [token_sims[0]]}
                )
            ),
            "sentence_sar": _one(
                SentenceSAR()(
                    {"sample_log_probs": sample_log_probs, "sample_sentence_similarity": similarity}
                )
            ),
            "sar": _one(
                SAR()(
                    {
                        "sample_log_likelihoods": [logprobs],
                        "sample_token_similarity": [token_sims],
                        "sample_sentence_similarity": similarity,
                    }
                )
            ),
        }

    values = PTrue()({"p_true": np.array(P_TRUE_LOGPROBS)})
    results["p_true"] = [{"input": x, "value": float(v)} for x, v in zip(P_TRUE_LOGPROBS, values)]

    for name, ids in DISCRETE_SE_CASES.items():
        classes = sorted(set(ids))
        stats = {
            "sample_texts": [[f"answer {i}" for i in range(len(ids))]],
            "semantic_classes_entail": {
                "class_to_sample": [[[i for i, c in enumerate(ids) if c == k] for k in classes]],
                "sample_to_class": [[classes.index(c) for c in ids]],
            },
        }
        value = _one(SemanticEntropy(class_probability_estimation="frequency")(stats))
        results["semantic_entropy_discrete"][name] = {"input": ids, "value": value}

    OUT.write_text(json.dumps(results, indent=1, allow_nan=True) + "\n")
    print(f"wrote {OUT}")


def _one(values) -> float:
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    assert array.size == 1, array
    return float(array[0])


def _version() -> str:
    from importlib.metadata import version

    return version("lm-polygraph")


if __name__ == "__main__":
    sys.exit(main())
