"""Compute TruthTorchLM 0.1.19's LARS answer text on hand-made inputs.

Writes ``truthtorchlm_values.json`` beside this file, which
``tests/test_core_methods_lars.py`` compares with ``mars_demo.core.lars``. TruthTorchLM imports
torch, transformers and more at import time, so this script does not import it: it reads the
two static methods ``LARS._find_bin`` and ``LARS.prepare_answer_text`` out of the package's
``truth_methods/lars.py`` and runs just them (they use only numpy). Get that file without
installing anything:

    pip download truthtorchlm==0.1.19 --no-deps -d /tmp/ttlm
    unzip -o /tmp/ttlm/truthtorchlm-0.1.19-py3-none-any.whl -d /tmp/ttlm/src
    python tests/reference/truthtorchlm_reference.py \
        /tmp/ttlm/src/TruthTorchLM/truth_methods/lars.py
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("truthtorchlm_values.json")


def load_lars_helpers(path: Path):
    """The class ``LARS`` of ``path`` with only its ``_find_bin`` and ``prepare_answer_text``."""
    tree = ast.parse(path.read_text())
    source_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LARS")
    keep = [
        n
        for n in source_class.body
        if isinstance(n, ast.FunctionDef) and n.name in ("_find_bin", "prepare_answer_text")
    ]
    assert len(keep) == 2, "TruthTorchLM's LARS changed: _find_bin or prepare_answer_text missing"
    stripped = ast.ClassDef(
        name="LARS", bases=[], keywords=[], body=keep, decorator_list=[], type_params=[]
    )
    module = ast.fix_missing_locations(ast.Module(body=[stripped], type_ignores=[]))
    namespace = {"np": np}
    exec(compile(module, str(path), "exec"), namespace)  # noqa: S102 - the package's own code
    return namespace["LARS"]


def cases() -> list[dict]:
    rng = np.random.default_rng(11)
    quantile_edges = np.quantile(rng.random(500), np.linspace(0, 1, 8)).round(6).tolist()
    made = [
        {"tokens": ["It", " is", " Mars"], "probs": [0.9, 0.6, 0.2], "edges": None, "bins": 4},
        {
            "tokens": ["It", " is", " Mars"],
            "probs": [0.9, 0.6, 0.2],
            "edges": quantile_edges,
            "bins": 8,
        },
        # edges of the bins themselves, 0 and 1 (ties with an edge go to the upper bin)
        {
            "tokens": ["a", "b", "c", "d", "e"],
            "probs": [0.0, 1.0, quantile_edges[3], quantile_edges[0], quantile_edges[7]],
            "edges": quantile_edges,
            "bins": 8,
        },
        {"tokens": ["x", "y"], "probs": [0.0, 1.0], "edges": None, "bins": 8},
        {"tokens": ["only"], "probs": [0.5], "edges": [0.0, 0.5, 1.0], "bins": 3},
    ]
    for _ in range(20):
        n = int(rng.integers(1, 7))
        made.append(
            {
                "tokens": [f" w{i}" for i in range(n)],
                "probs": rng.random(n).round(6).tolist(),
                "edges": quantile_edges if rng.random() < 0.5 else None,
                "bins": 8,
            }
        )
    return made


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    lars = load_lars_helpers(Path(argv[1]))
    rows = []
    for case in cases():
        text = lars.prepare_answer_text(case["probs"], case["tokens"], case["edges"], case["bins"])
        rows.append({**case, "text": text})
    OUT.write_text(json.dumps({"truthtorchlm_version": "0.1.19", "lars": rows}, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
