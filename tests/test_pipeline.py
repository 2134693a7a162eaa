"""The whole analysis on tiny random models: JSON contract, consistency, cost, models."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

from mars_demo.core import clustering, scoring, uncertainty
from mars_demo.engine import Engine, analyze
from mars_demo.errors import ModelLoadError, OptionError
from mars_demo.models.nli import label_meaning
from mars_demo.models.registry import load_importance, load_nli
from mars_demo.result import AnalysisResult

QUESTION = "Which planet is known as the Red Planet?"
ANSWER_KEYS = {"text", "tokens", "phrases", "token_importance", "mars_weights", "scores"}


@pytest.fixture(scope="module")
def result(tiny_settings) -> AnalysisResult:
    return Engine(tiny_settings).analyze(QUESTION)


def test_json_has_every_field_of_the_contract(result):
    d = json.loads(json.dumps(result.to_dict()))
    for key in ("question", "prompt", "prompt_token_ids", "greedy", "samples", "nli",
                "cluster_ids", "uncertainty", "settings", "timings_s", "warnings", "methods"):
        assert key in d, key
    assert d["question"] == QUESTION
    for answer in [d["greedy"]] + d["samples"]:
        assert ANSWER_KEYS <= set(answer)
        for tok in answer["tokens"]:
            assert set(tok) >= {"id", "text", "start", "end", "logprob"}
        for ph in answer["phrases"]:
            assert set(ph) >= {"text", "start", "end", "score", "weight"}
        assert set(answer["scores"]) == {"length_normalized", "mars"}
    assert set(d["nli"]) == {"answers", "labels", "warnings", "probabilities", "by_rule"}
    m = len(d["samples"])
    assert [len(row) for row in d["nli"]["probabilities"]] == [m] * m
    for method_id, values in d["methods"].items():
        assert set(values) in ({"length_normalized", "mars"}, {"value"}), method_id
    for name in ("confidence", "entropy", "semantic_entropy"):
        assert set(d["uncertainty"][name]) == {"length_normalized", "mars"}
    for key in ("samples", "temperature", "cluster_rule", "normalization", "distribution",
                "importance_method", "llm", "importance", "nli", "prompt", "methods"):
        assert key in d["settings"], key
    assert {"generate", "logprobs", "importance", "nli", "uncertainty"} <= set(d["timings_s"])
    assert AnalysisResult.from_dict(d).to_dict() == d


def test_every_answer_is_internally_consistent(result):
    for a in [result.greedy] + result.samples:
        L = len(a.tokens)
        assert L == len(a.token_importance) == len(a.mars_weights) > 0
        assert sum(a.token_importance) == pytest.approx(1.0)
        assert sum(a.mars_weights) == pytest.approx(1.0)
        u = np.array(a.token_importance)
        assert a.mars_weights == pytest.approx(list(1 / (2 * L) + u / 2))
        lps = [t.logprob for t in a.tokens]
        assert a.scores.length_normalized == pytest.approx(np.mean(lps))
        assert a.scores.mars == pytest.approx(float(np.dot(a.mars_weights, lps)))
        for t in a.tokens:  # offsets point into the answer text
            assert 0 <= t.start <= t.end <= len(a.text)
            assert a.text[t.start : t.end] == t.text or t.start == t.end
        aligned = [p for p in a.phrases if p.tokens]
        assert sum(p.weight for p in aligned) == pytest.approx(1.0)
        for p in a.phrases:
            assert a.text[p.start : p.end] == p.text


def test_clusters_follow_the_rule_from_the_reported_nli_matrix(result, tiny_settings):
    labels = result.nli.labels
    n = len(result.samples)
    assert len(labels) == n and all(len(r) == n for r in labels)
    p = result.nli.probabilities  # one judgement per pair, the diagonal the model's own
    assert all(labels[i][j] == clustering.label_of(p[i][j]) for i in range(n) for j in range(n))
    assert result.nli.by_rule == []
    assert result.cluster_ids == clustering.semantic_clusters(labels, tiny_settings.cluster_rule)
    assert result.nli.answers == [s.text for s in result.samples]


def test_uncertainties_follow_the_formulas(result):
    u = result.uncertainty
    for kind in ("length_normalized", "mars"):
        g = getattr(result.greedy.scores, kind)
        ss = [getattr(s.scores, kind) for s in result.samples]
        assert getattr(u.confidence, kind) == pytest.approx(-g)
        assert getattr(u.entropy, kind) == pytest.approx(-np.mean(ss))
        assert getattr(u.semantic_entropy, kind) == pytest.approx(
            uncertainty.semantic_entropy(ss, result.cluster_ids)
        )
        for v in (getattr(u.confidence, kind), getattr(u.entropy, kind)):
            assert math.isfinite(v) and v >= 0


def test_no_llm_forward_pass_beyond_generation(tiny_settings, monkeypatch):
    engine = Engine(tiny_settings)
    engine.load()
    model = engine.models.llm.model.base_model  # every pass runs the body, a shared prefill too
    calls = {"forward": 0, "steps": 0}
    original_forward = model.forward
    original_generate = type(engine.models.llm).generate_rows

    def counting_forward(*args, **kwargs):
        calls["forward"] += 1
        return original_forward(*args, **kwargs)

    def counting_generate(self, *args, **kwargs):
        new_ids, logits = original_generate(self, *args, **kwargs)
        calls["steps"] += len(logits)
        return new_ids, logits

    monkeypatch.setattr(model, "forward", counting_forward)
    monkeypatch.setattr(type(engine.models.llm), "generate_rows", counting_generate)
    before = engine.models.llm.prefix_passes  # the loaded model is shared by the tests
    engine.analyze(QUESTION)
    assert calls["steps"] > 0
    # one forward per generated step, and the prompt's prefill once for all rows, nothing more
    assert engine.models.llm.prefix_passes == before + 1
    assert calls["forward"] == calls["steps"] + 1


def test_importance_input_and_segmentation_follow_the_reference(tiny_models):
    model = load_importance(str(tiny_models["importance"]))
    answer = "Mars is known as the Red Planet."
    words = re.findall(r"\w+|[^\w\s]", answer)
    enc = model.tokenizer([QUESTION], words, is_split_into_words=True,
                          return_token_type_ids=True, truncation=True, max_length=512,
                          return_tensors="pt")
    assert set(enc["token_type_ids"][0].tolist()) == {0, 1}
    with torch.inference_mode():  # inputs on the model's device (a GPU when one is visible)
        logits = model.model(**enc.to(model.device)).logits[0].float().cpu()
    word_ids, seq = enc.word_ids(0), enc.sequence_ids(0)
    first = {}
    for pos, (w, s) in enumerate(zip(word_ids, seq)):
        if s == 1 and w is not None:
            first.setdefault(w, pos)
    starts = [0] + [w for w in range(1, len(words)) if int(logits[first[w], :2].argmax()) == 0]
    expected_scores = [float(torch.sigmoid(logits[first[w], 2])) for w in starts]

    [got] = model.score(QUESTION, [answer])
    assert got.scores == pytest.approx(expected_scores, abs=1e-5)
    bounds = starts + [len(words)]
    expected_texts = [" ".join(words[a:b]) for a, b in zip(bounds, bounds[1:])]
    got_texts = [answer[a:b] for a, b in got.spans]
    assert [t.replace(" ", "") for t in got_texts] == [t.replace(" ", "") for t in expected_texts]
    [tok] = model.score(QUESTION, [answer], method="token")
    assert len(tok.spans) == len(words)


def test_importance_batches_all_answers_in_one_pass(tiny_models, monkeypatch):
    model = load_importance(str(tiny_models["importance"]))
    calls = []
    original = model.model.forward
    monkeypatch.setattr(model.model, "forward", lambda *a, **k: calls.append(1) or original(*a, **k))
    out = model.score(QUESTION, ["Mars.", "It is Mars", "", "The red one is Mars, of course"])
    assert len(calls) == 1
    assert out[2].spans == [] and len(out[1].spans) >= 1


def test_nli_reads_label_meaning_from_config(tiny_models):
    nli = load_nli(str(tiny_models["nli"]))
    id2label = nli.model.config.id2label
    assert nli.labels == {int(k): v.lower() for k, v in id2label.items()}
    assert label_meaning({0: "contradiction", 1: "neutral", 2: "entailment"})[2] == "entailment"
    with pytest.raises(ModelLoadError, match="entailment"):
        label_meaning({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    pairs = [(f"{QUESTION} Mars", f"{QUESTION} Venus")]
    enc = nli.tokenizer([p for p, _ in pairs], [h for _, h in pairs], return_tensors="pt")
    with torch.inference_mode():  # inputs on the model's device (a GPU when one is visible)
        idx = int(nli.model(**enc.to(nli.device)).logits.argmax(-1))
    assert nli.verdicts(pairs) == [id2label[idx].lower()]


def test_nli_asks_each_distinct_pair_once_in_one_batched_call(tiny_models, monkeypatch):
    nli = load_nli(str(tiny_models["nli"]))
    asked = []
    original = nli.judge
    monkeypatch.setattr(
        nli, "judge",
        lambda pairs, *rest, **kw: asked.append(list(pairs)) or original(pairs, *rest, **kw)
    )
    nli.matrix(QUESTION, ["Mars.", "mars", "Venus", "MARS "])
    assert len(asked) == 1  # one batched call
    # every ordered pair of the 4 texts, each text against itself too (each pair's own
    # probabilities are saved, the diagonal's as lm-polygraph's semantic matrix has it)
    assert len(asked[0]) == 16
    # identical texts are one text: 2 distinct texts, 4 ordered pairs; by the rule, 2
    assert nli.matrix(QUESTION, ["Mars", "Mars", "Venus"]) and len(asked[1]) == 4
    assert nli.matrix(QUESTION, ["Mars", "Mars", "Venus"], identical="rule")
    assert len(asked[2]) == 2
    assert all(asked[0][k][0].startswith(QUESTION) for k in range(2))


def test_bem_method_runs_algorithm_1(tiny_settings):
    s = tiny_settings.replace(importance_method="bem", samples=2)
    r = Engine(s).analyze(QUESTION)
    for a in [r.greedy] + r.samples:
        if a.phrases:
            assert all(0.0 <= p.score <= 1.0 for p in a.phrases)
            assert sum(a.token_importance) == pytest.approx(1.0)


@pytest.mark.parametrize("distribution", ["max", "min"])
def test_distribution_modes_reach_the_result(tiny_settings, distribution):
    r = Engine(tiny_settings.replace(distribution=distribution, samples=2)).analyze(QUESTION)
    for a in [r.greedy] + r.samples:
        lps = [t.logprob for t in a.tokens]
        aligned = sorted({k for k in a.phrase_of_token if k >= 0})
        local = [aligned.index(k) for k in a.phrase_of_token]
        expected = scoring.token_importance(
            local, [a.phrases[k].score for k in aligned], lps, mode=distribution
        )
        assert a.token_importance == pytest.approx(list(expected))


def test_library_function_and_bad_input(tiny_settings):
    opts = {k: v for k, v in tiny_settings.to_dict().items()}
    r = analyze(QUESTION, **opts)
    assert r.question == QUESTION
    with pytest.raises(OptionError, match="empty"):
        analyze("   ", **opts)
    with pytest.raises(OptionError, match="unknown option"):
        analyze(QUESTION, sample=3, **opts)
    with pytest.raises(OptionError, match="from 1 to 20"):
        analyze(QUESTION, **{**opts, "samples": 1000})
    with pytest.raises(ModelLoadError, match="no such folder or file"):
        analyze(QUESTION, **{**opts, "llm": "/does/not/exist"})


def test_progress_reports_every_stage_in_order(tiny_settings):
    seen = []
    Engine(tiny_settings).analyze(QUESTION, progress=lambda stage, f: seen.append((stage, f)))
    stages = [s for s, f in seen if f == 1.0 and not s.startswith("loading")]
    assert stages == ["generate", "importance", "nli", "uncertainty"]


# --- switching models ----------------------------------------------------------------------------


def test_switch_frees_the_old_llm_before_loading_the_new_and_keeps_the_rest(
    tiny_settings, tmp_path, monkeypatch
):
    import shutil

    from mars_demo.models import registry
    from mars_demo.models.llm import LLM

    engine = Engine(tiny_settings)
    engine.load()
    old = engine.models
    other_llm = shutil.copytree(tiny_settings.llm, tmp_path / "other-llm")
    events: list[tuple] = []
    real_release, real_load = registry.release, LLM.from_pretrained

    def release(keep=None):
        events.append(("release", frozenset(keep or ())))
        real_release(keep)
        events.append(("cached after release", registry.loaded_keys()))

    def load(source, model_id, *args, **kwargs):
        events.append(("load llm", model_id))
        return real_load(source, model_id, *args, **kwargs)

    monkeypatch.setattr(registry, "release", release)
    monkeypatch.setattr(LLM, "from_pretrained", load)
    stages: list[str] = []
    engine.switch(
        tiny_settings.replace(llm=str(other_llm)),
        progress=lambda stage, fraction: stages.append(stage),
    )

    old_key = registry.llm_key(tiny_settings)
    new_key = registry.llm_key(tiny_settings.replace(llm=str(other_llm)))
    kinds = [e[0] for e in events]
    assert kinds == ["release", "cached after release", "load llm"]  # freed first, then loaded
    assert old_key not in events[1][1] and old_key not in registry.loaded_keys()
    assert new_key in registry.loaded_keys() and engine.models.llm is registry.loaded(new_key)
    assert engine.models.importance is old.importance  # not reloaded
    assert engine.models.nli is old.nli
    assert "loading LLM" in stages and "loading NLI model" not in stages
    assert engine.settings.llm == str(other_llm)
    assert engine.analyze(QUESTION).settings["llm"] == str(other_llm)


def test_load_with_settings_makes_them_the_engines(tiny_settings):
    engine = Engine()
    engine.load(settings=tiny_settings)
    assert engine.settings == tiny_settings
    assert engine.describe()["llm"] == tiny_settings.llm


@pytest.mark.parametrize(
    "llm, expected", [(None, True), ("cpu-small", True), ("Qwen/Qwen2.5-0.5B-Instruct", True),
                      ("qwen2.5-7b-instruct", False), ("/some/dir", False)]
)
def test_the_cpu_notice_follows_the_model_in_use(llm, expected, monkeypatch):
    from mars_demo.models import registry
    from mars_demo.settings import Settings

    monkeypatch.setattr(registry, "cuda_available", lambda: False)
    assert Engine(Settings(llm=llm)).describe()["cpu_fallback"] is expected
    monkeypatch.setattr(registry, "cuda_available", lambda: True)
    assert Engine(Settings(llm=llm)).describe()["cpu_fallback"] is False
