"""Run lm-polygraph 0.7.0's graph estimators and kernel language entropy on given NLI
probabilities, and its ``SemanticMatrixCalculator`` on given texts with a given NLI model.

    PEERS_PYTHON tests/reference/polygraph_graph.py IN.json OUT.json

``PEERS_PYTHON`` is the python of the venv ``scripts/peers_venv.sh`` builds; this script imports
lm-polygraph (and torch, transformers, numpy), never the project. ``IN.json``::

    {"nli": DIR, "cases": [{"texts": [NLI input of each sample], "entail": m x m,
                            "contra": m x m}]}

For each case it writes the estimators' values on the given entailment and contradiction
planes (``EigValLaplacian``, ``DegMat``, ``Eccentricity`` under both affinities,
``KernelLanguageEntropy(scale=False)``) and the matrix lm-polygraph's own calculator makes of
the texts with the NLI model in ``DIR`` (its ``label2id`` read as lm-polygraph reads it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from peers_analyses import nli_wrapper, one


def case_values(case: dict, nli) -> dict:
    from lm_polygraph.estimators import DegMat, Eccentricity, EigValLaplacian, KernelLanguageEntropy
    from lm_polygraph.stat_calculators.semantic_matrix import SemanticMatrixCalculator

    stats = {"semantic_matrix_entail": np.array([case["entail"]], dtype=np.float64),
             "semantic_matrix_contra": np.array([case["contra"]], dtype=np.float64),
             "sample_texts": [case["texts"]]}
    out = {}
    for affinity in ("entail", "contra"):
        suffix = "" if affinity == "entail" else "_contra"
        out[f"eigv{suffix}"] = one(EigValLaplacian(affinity=affinity)(stats))
        out[f"degree{suffix}"] = one(DegMat(affinity=affinity)(stats))
        out[f"eccentricity{suffix}"] = one(Eccentricity(affinity=affinity)(stats))
    out["kernel_language_entropy"] = one(KernelLanguageEntropy(scale=False)(stats))
    made = SemanticMatrixCalculator(nli)({"sample_texts": [case["texts"]]}, case["texts"], None)
    out["matrix"] = {"entail": made["semantic_matrix_entail"][0].tolist(),
                     "contra": made["semantic_matrix_contra"][0].tolist()}
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__)
        return 2
    given = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    nli = nli_wrapper(given["nli"])
    out = {"cases": [case_values(case, nli) for case in given["cases"]]}
    Path(argv[2]).write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
