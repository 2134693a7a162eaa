"""The NLI probabilities of every ordered pair of samples (schema 3): from the model's own
logits, in the order (entailment, neutral, contradiction), with the verdicts unchanged; saved in
the analysis JSON, reused with the verdicts, and absent (said so) in a schema-2 analysis."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from numeric_checks import float32_order

from mars_demo.core.clustering import NLI_LABELS, RULE_PROBABILITIES
from mars_demo.engine import Engine
from mars_demo.methods import compute_methods
from mars_demo.models.nli import NLIModel
from mars_demo.models.registry import load_nli
from mars_demo.result import SCHEMA_VERSION, AnalysisResult

QUESTION = "Which planet is known as the Red Planet?"
ANSWERS = ["Mars.", "mars", "Venus", "It is Jupiter", "MARS "]


def model_probabilities(nli, premise: str, hypothesis: str) -> list[float]:
    """The model's (entailment, neutral, contradiction) probabilities, computed here."""
    enc = nli.tokenizer([premise], [hypothesis], return_tensors="pt").to(nli.device)
    with torch.inference_mode():
        shares = nli.model(**enc).logits.double().softmax(-1)[0].cpu().tolist()
    index = {name: k for k, name in nli.labels.items()}
    return [shares[index[name]] for name in NLI_LABELS]


@pytest.mark.parametrize("input_format", ["pair", "paper-code"])
@pytest.mark.parametrize("identical", ["model", "rule"])
def test_each_label_is_the_argmax_of_its_probabilities(tiny_models, input_format, identical):
    nli = load_nli(str(tiny_models["nli"]))
    answers = ANSWERS + ["Mars."]  # a repeated answer, and "mars", "MARS " case variants
    m = nli.matrix(QUESTION, answers, input_format=input_format, identical=identical)
    p = np.asarray(m.probabilities)
    assert p.shape == (6, 6, 3)
    assert np.allclose(p.sum(axis=2), 1.0, atol=1e-12) and (p >= 0).all()
    equal = sorted([i, j] for i in range(6) for j in range(6) if answers[i] == answers[j])
    assert m.by_rule == (equal if identical == "rule" else [])
    for i in range(6):
        for j in range(6):
            assert m.labels[i][j] == NLI_LABELS[int(p[i, j].argmax())]  # one judgement
            if [i, j] in m.by_rule:
                assert p[i, j].tolist() == list(RULE_PROBABILITIES)
            elif input_format == "pair":  # the model's own, the diagonal and "Mars."/"mars" too
                assert p[i, j].tolist() == float32_order(model_probabilities(
                    nli, f"{QUESTION} {answers[i]}", f"{QUESTION} {answers[j]}"))
    # the tiny random model is unsure of a text against itself: with the model deciding, the
    # repeated "Mars." gets the model's label, not entailment by definition
    if identical == "model":
        assert p[0, 5].tolist() == p[0, 0].tolist() != list(RULE_PROBABILITIES)
        assert m.labels[0][5] == m.labels[0][0] != "entailment"


def test_probabilities_are_the_models_softmax_in_entailment_neutral_contradiction_order(
        tiny_models):
    nli = load_nli(str(tiny_models["nli"]))
    assert [nli.labels[k] for k in nli.order] == list(NLI_LABELS)
    probabilities = nli.matrix(QUESTION, ["Mars", "Venus"]).probabilities
    # the matrix's pairs run in one padded batch, each expected pair alone: float32 order
    expected = model_probabilities(nli, f"{QUESTION} Mars", f"{QUESTION} Venus")
    assert probabilities[0][1] == float32_order(expected)
    expected = model_probabilities(nli, f"{QUESTION} Venus", f"{QUESTION} Mars")
    assert probabilities[1][0] == float32_order(expected)


def test_several_questions_give_each_its_own_probabilities(tiny_models):
    nli = load_nli(str(tiny_models["nli"]))
    questions = [QUESTION, "What is 2 + 2?"]
    answers = [ANSWERS[:3], ["4", "Four", "five", "4"]]
    many = nli.matrices(questions, answers)
    for q, a, got in zip(questions, answers, many):
        # two questions' pairs share batches, one question's pairs alone: float32 order
        assert got.probabilities == float32_order(nli.matrix(q, a).probabilities)


@pytest.fixture(scope="module")
def analysis(tiny_settings) -> AnalysisResult:
    return Engine(tiny_settings).analyze(QUESTION)


def test_an_analysis_holds_the_probabilities_in_its_json(analysis):
    m = len(analysis.samples)
    p = np.asarray(analysis.nli.probabilities)
    assert p.shape == (m, m, 3) and analysis.schema_version == SCHEMA_VERSION == 4
    for i in range(m):
        for j in range(m):
            assert NLI_LABELS[int(p[i, j].argmax())] == analysis.nli.labels[i][j]
    data = json.loads(json.dumps(analysis.to_dict()))
    assert data["nli"]["probabilities"] == analysis.nli.probabilities
    assert AnalysisResult.from_dict(data).nli.probabilities == analysis.nli.probabilities


def test_rescoring_reuses_the_probabilities_without_the_nli_model(tiny_settings, analysis,
                                                                 monkeypatch):
    engine = Engine(tiny_settings)
    calls = []
    original = NLIModel.judge
    monkeypatch.setattr(NLIModel, "judge",
                        lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    again = engine.rescore(analysis, normalization="softmax")
    assert calls == [] and again.nli.probabilities == analysis.nli.probabilities
    assert again.nli.labels == analysis.nli.labels


def schema_2(analysis: AnalysisResult) -> dict:
    """The analysis as the project wrote it before schema 3: no probabilities, no methods."""
    data = copy.deepcopy(analysis.to_dict())
    del data["nli"]["probabilities"], data["methods"]
    data["schema_version"] = 2
    return data


def test_a_schema_2_analysis_loads_and_says_it_predates_the_probabilities(analysis):
    old = AnalysisResult.from_dict(schema_2(analysis))
    assert old.nli.probabilities is None and old.methods == {} and old.schema_version == 2
    assert old.nli.labels == analysis.nli.labels
    with pytest.raises(ValueError, match="predates the saved NLI probabilities"):
        compute_methods(schema_2(analysis), ["eigv"])
    assert compute_methods(schema_2(analysis), ["num_sets"]) == {
        "num_sets": {"value": float(len(set(analysis.cluster_ids)))}}


def test_rescoring_a_schema_2_analysis_runs_the_nli_again(tiny_settings, analysis, monkeypatch):
    calls = []
    original = NLIModel.judge
    monkeypatch.setattr(NLIModel, "judge",
                        lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    old = AnalysisResult.from_dict(schema_2(analysis))
    again = Engine(tiny_settings).rescore(old, normalization="softmax")
    assert calls == [1]  # semantic density's greedy-to-sample NLI is reused from method_inputs
    assert again.nli.labels == analysis.nli.labels
    assert np.allclose(again.nli.probabilities, analysis.nli.probabilities, atol=1e-6)


def counted_forwards(nli, monkeypatch) -> list:
    """Each forward pass's batch of input ids (one list per pass), recorded."""
    passes: list = []
    original = nli.model.forward

    def forward(*args, **kwargs):
        passes.append(kwargs["input_ids"].tolist())
        return original(*args, **kwargs)

    monkeypatch.setattr(nli.model, "forward", forward)
    return passes


def test_judge_gives_each_pair_what_it_gives_alone_in_the_order_asked(tiny_models, monkeypatch):
    """Pairs of very different lengths are sorted and batched by length; what comes back is
    each pair's own verdict and probabilities (as judged alone, unpadded), in the order asked,
    and a pair asked twice is judged once."""
    from mars_demo.models import nli as nli_module

    nli = load_nli(str(tiny_models["nli"]))
    long = " ".join(["red dusty planet"] * 40)
    pairs = [(f"{QUESTION} Mars", f"{QUESTION} {long}"), (f"{QUESTION} Venus", f"{QUESTION} Mars"),
             (f"{QUESTION} {long} Mars", f"{QUESTION} Venus"), (f"{QUESTION} Venus", f"{QUESTION} Mars"),
             (f"{QUESTION} a", f"{QUESTION} b")]
    alone = [model_probabilities(nli, p, h) for p, h in pairs]
    monkeypatch.setattr(nli_module, "BATCH", 2)
    passes = counted_forwards(nli, monkeypatch)
    judged = nli.judge(pairs)
    assert sum(len(batch) for batch in passes) == 4  # the repeated pair judged once
    assert len(passes) == 2 and judged.passes == 2
    widths = [len(batch[0]) for batch in passes]
    assert widths == sorted(widths)  # shortest pairs first
    assert judged.probabilities[1] == judged.probabilities[3]
    for got, want, label in zip(judged.probabilities, alone, judged.labels):
        assert got == float32_order(want)  # batches of 2, padded, against each pair alone
        assert NLI_LABELS[int(np.argmax(got))] == label
    assert judged.truncated == [] and judged.unknown == []
    assert nli.judge([]).labels == [] and nli.judge([]).passes == 0


def test_length_batches_respect_both_limits_and_keep_every_pair():
    from mars_demo.models.nli import length_batches

    lengths = [7, 300, 12, 12, 90, 5, 512, 40, 41, 3]
    for most_pairs, most_tokens in [(64, 8192), (3, 8192), (64, 400), (2, 100)]:
        batches = length_batches(lengths, most_pairs, most_tokens)
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
        flat = [lengths[i] for b in batches for i in b]
        assert flat == sorted(flat)
        for b in batches:
            assert len(b) <= most_pairs
            assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= most_tokens


def test_a_pair_longer_than_the_window_is_cut_and_named(tiny_models):
    nli = load_nli(str(tiny_models["nli"]))
    long = " ".join(["planet"] * 600)
    judged = nli.judge([(f"{QUESTION} Mars", f"{QUESTION} Venus"), (long, "Mars"),
                        (f"{QUESTION} Mars", f"{QUESTION} Venus")])
    assert judged.truncated == [1]
    cut = nli.tokenizer(long, "Mars", truncation=True, max_length=512, return_tensors="pt")
    with torch.inference_mode():
        expected = nli.model(**cut).logits.double().softmax(-1)[0].tolist()
    index = {name: k for k, name in nli.labels.items()}
    # judged in one batch with two shorter pairs, expected alone: float32 order
    assert judged.probabilities[1] == float32_order([expected[index[n]] for n in NLI_LABELS])


def test_extra_pairs_share_the_samples_pass_and_equal_single_unpadded_passes(tiny_models):
    """Semantic density's greedy-to-sample pairs ride in the samples' length-sorted batches (one
    forward pass for one question's pairs), and every pair's probabilities, the samples' and
    the extra ones, are those of the model run on that pair alone, unpadded, within float32
    rounding (padding is masked)."""
    nli = load_nli(str(tiny_models["nli"]))
    extra = [(f"{QUESTION} It is Mars", f"{QUESTION} {a}") for a in ANSWERS]
    both, judged = nli.matrices_and_pairs([QUESTION], [ANSWERS], extra)
    assert judged.passes == 1  # the 25 ordered pairs and the 5 extra ones: one batch
    assert len(judged.probabilities) == len(extra)
    for (premise, hypothesis), got in zip(extra, judged.probabilities):
        assert got == float32_order(model_probabilities(nli, premise, hypothesis))
    p = both[0].probabilities
    for i, a in enumerate(ANSWERS):  # every ordered pair, a text against itself included
        for j, b in enumerate(ANSWERS):
            assert p[i][j] == float32_order(
                model_probabilities(nli, f"{QUESTION} {a}", f"{QUESTION} {b}"))


def test_on_a_cpu_a_pass_holds_at_most_its_token_budget(tiny_models, monkeypatch):
    """On a CPU the pairs go in batches of at most CPU_BATCH_TOKENS padded tokens (a large batch
    costs more per pair there: docs/benchmark.md), each pair with the probabilities it gets in
    one batch of all (the GPU's budget), to float32 order."""
    from mars_demo.optional import pairs as pairs_module

    nli = load_nli(str(tiny_models["nli"]))
    assert nli.device.type == "cpu"
    assert nli.batch_tokens == pairs_module.CPU_BATCH_TOKENS
    answers = [f"{a} " + " ".join(["red dusty planet"] * (8 + k)) for k, a in enumerate(ANSWERS)]
    pairs = [(f"{QUESTION} {a}", f"{QUESTION} {b}") for a in answers for b in answers]
    passes = counted_forwards(nli, monkeypatch)
    small = nli.judge(pairs)
    assert len(passes) == small.passes > 1
    for batch in passes:
        assert len(batch) * len(batch[0]) <= pairs_module.CPU_BATCH_TOKENS
    monkeypatch.setattr(nli, "batch_tokens", pairs_module.BATCH_TOKENS)
    one = nli.judge(pairs)
    assert one.passes == 1  # all 25 pairs fit the GPU's budget
    assert small.labels == one.labels
    for got, want in zip(small.probabilities, one.probabilities):
        assert got == float32_order(want)
