"""An analysis agrees with itself: each NLI pair has one judgement, read by the clustering and the
graph methods alike, and re-scoring a saved analysis keeps it exactly.

The NLI model is the tiny random one with its labels in an order that is neither
``microsoft/deberta-large-mnli``'s (contradiction, neutral, entailment) nor the project's
(entailment, neutral, contradiction): neutral, contradiction, entailment. It is unsure even of a
text against itself, as a weak or domain-shifted NLI model can be, so a label taken from
anywhere but its probabilities shows. The answers repeat, differ only in case and punctuation,
or are all identical. Under the default recipe the model judges every pair, identical texts
included, as lm-polygraph's ``SemanticMatrixCalculator`` does (compared with it, run in the
peers' venv, ``tests/peers.py``); under ``paper-code`` equal texts are decided by the rule,
(1, 0, 0), and listed as such. Either way the graph measures and kernel language entropy are
lm-polygraph's estimators on the saved probabilities.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from peers import require_peers, run_reference

import mars_demo
from mars_demo.engine import Engine
from mars_demo.models.nli import NLIModel

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "What is the capital of Japan?"
ORDER = ("NEUTRAL", "CONTRADICTION", "ENTAILMENT")  # neither MNLI's order nor the project's
LABELS = ("entailment", "neutral", "contradiction")  # the saved probabilities' order
GRAPH = ("eigv", "eigv_contra", "degree", "degree_contra", "eccentricity",
         "eccentricity_contra", "kernel_language_entropy")
METHODS = ",".join((*GRAPH, "num_sets"))
SAME = 1e-6  # one computation, two codes: float64 order, and float32 order of the NLI batches
SAMPLES = {
    "repeated": ["Tokyo.", "Tokyo.", "Paris.", "Tokyo.", "Kyoto"],
    "case": ["Tokyo", "tokyo", "TOKYO.", "Tokyo", "tokyo!"],
    "identical": ["Paris."] * 5,
}


def answer(text: str, start: float) -> dict:
    """An answer made elsewhere: its words as tokens, each with a log-prob."""
    words = text.split(" ")
    tokens = [{"text": (" " if k else "") + w, "logprob": start - 0.1 * k}
              for k, w in enumerate(words)]
    return {"text": text, "tokens": tokens}


def answer_set(samples: list[str]) -> dict:
    return {"question": QUESTION, "greedy": answer("Tokyo.", -0.2),
            "samples": [answer(t, -0.3 - 0.2 * k) for k, t in enumerate(samples)]}


@pytest.fixture(scope="module")
def odd_nli(tiny_models, tmp_path_factory):
    from mars_demo.devtools.tiny import relabel_nli

    return relabel_nli(tiny_models["nli"], tmp_path_factory.mktemp("nli-odd") / "nli", ORDER)


@pytest.fixture(scope="module", params=["default", "paper-code"])
def analyses(request, tiny_settings, odd_nli):
    """{name: analysis} of each answer set under the recipe, with the odd-order NLI model."""
    settings = tiny_settings.replace(nli=str(odd_nli), methods=METHODS, recipe=request.param)
    engine = Engine(settings)
    return {name: engine.score(answer_set(samples)) for name, samples in SAMPLES.items()}


def test_the_model_reads_the_odd_label_order(odd_nli):
    from transformers import AutoConfig

    assert [AutoConfig.from_pretrained(odd_nli).id2label[k] for k in range(3)] == list(ORDER)


def test_every_label_is_the_argmax_of_its_probabilities(analyses):
    for name, r in analyses.items():
        p = np.asarray(r.nli.probabilities)
        m = len(r.samples)
        assert p.shape == (m, m, 3), name
        for i in range(m):
            for j in range(m):
                assert r.nli.labels[i][j] == LABELS[int(p[i, j].argmax())], (name, i, j)
        texts = r.nli.answers
        equal = sorted([i, j] for i in range(m) for j in range(m) if texts[i] == texts[j])
        if r.settings["recipe"] == "paper-code":  # equal texts by the rule, and said so
            assert r.nli.by_rule == equal, name
            assert all(p[i, j].tolist() == [1.0, 0.0, 0.0] for i, j in equal)
            assert r.cluster_ids[0] == r.cluster_ids[1] or texts[0] != texts[1]
        else:  # the model's own verdict, the same pair's for every copy of a text
            assert r.nli.by_rule == [], name
            assert all(p[i, j].tolist() == p[i, i].tolist() for i, j in equal)
            assert p[0, 0].tolist() != [1.0, 0.0, 0.0]
    # the model is unsure of "Paris." against itself: under the default recipe the label says so
    default = analyses["identical"]
    if default.settings["recipe"] == "default":
        assert default.nli.labels[0][1] != "entailment"


def test_the_graph_measures_and_kle_are_lm_polygraphs_on_the_same_probabilities(
        analyses, odd_nli, tmp_path):
    python = require_peers()
    cases = []
    for r in analyses.values():
        p = np.asarray(r.nli.probabilities)
        cases.append({"texts": [f"{QUESTION} {t}" for t in r.nli.answers],
                      "entail": p[..., 0].tolist(), "contra": p[..., 2].tolist()})
    peers = run_reference(python, "polygraph_graph.py", {"nli": str(odd_nli), "cases": cases},
                          tmp_path)["cases"]
    for (name, r), poly in zip(analyses.items(), peers):
        for method in GRAPH:
            assert r.methods[method]["value"] == pytest.approx(poly[method], abs=SAME), (
                name, method)
        if r.settings["recipe"] == "default":  # every cell lm-polygraph's own matrix's
            p = np.asarray(r.nli.probabilities)
            assert np.abs(p[..., 0] - np.array(poly["matrix"]["entail"])).max() <= SAME, name
            assert np.abs(p[..., 2] - np.array(poly["matrix"]["contra"])).max() <= SAME, name


def test_rescoring_a_saved_analysis_keeps_its_nli_exactly(analyses, monkeypatch, tmp_path):
    """The saved verdicts are reused, not judged again: probabilities nudged in the file (their
    arg-max kept) come back as they are, through the library and the command line."""
    r = analyses["repeated"]
    data = json.loads(json.dumps(r.to_dict()))
    p = data["nli"]["probabilities"]
    p[0][2] = [0.9 * x + 0.1 / 3 for x in p[0][2]]  # still summing to 1, the same arg-max
    calls = []
    original = NLIModel.judge
    monkeypatch.setattr(NLIModel, "judge",
                        lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    again = mars_demo.score(data)
    assert calls == [] and again.to_dict()["nli"] == data["nli"]
    other = mars_demo.score(data, normalization="softmax", cluster_rule="lenient")
    assert calls == [] and other.to_dict()["nli"] == data["nli"]
    alone = {key: data[key] for key in ("question", "greedy", "samples", "settings")}
    fresh = mars_demo.score(alone)  # its answers alone: judged again, as asked
    assert calls == [1] and fresh.nli.probabilities[0][2] == r.nli.probabilities[0][2]
    if r.settings["recipe"] != "default":
        return  # the command line takes the same path (Engine.score): once is enough
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    for flags, want in (([], p[0][2]), (["--judge-again"], r.nli.probabilities[0][2])):
        done = subprocess.run([sys.executable, "-m", "mars_demo", "score", str(path), "--json",
                               *flags], capture_output=True, text=True, timeout=600, cwd=ROOT,
                              env={**os.environ, "HF_HUB_OFFLINE": "1",
                                   "TRANSFORMERS_OFFLINE": "1"})
        assert done.returncode == 0, done.stderr[-2000:]
        cli = json.loads(done.stdout)["nli"]
        assert cli["probabilities"][0][2] == want, flags
        if not flags:
            assert cli == data["nli"]
