"""SAR's similarity pass, end to end on the tiny models: the cross-encoder's
similarities against transformers alone, the ``token_sar``, ``sentence_sar`` and ``sar``
methods of ``ask --methods`` from the saved similarities, ``score --methods-only`` recomputing
them without a model, the similarity model loaded only when a SAR method is asked, and the
public API's refusal."""

from __future__ import annotations

import json
import math

import pytest
from cli_helpers import (
    check_methods_only,
    check_model_needed_only_when_asked,
    cli,
    evaluate_facts,
)
from numeric_checks import float32_order

from mars_demo.core import sar
from mars_demo.core.sar import relevance_pairs
from mars_demo.engine import Engine

QUESTION = "Which planet is known as the Red Planet?"
SAR = ("token_sar", "sentence_sar", "sar")


def flags(models, similarity) -> list[str]:
    return ["--llm", str(models["llm"]), "--importance", str(models["importance"]),
            "--nli", str(models["nli"]), "--similarity", str(similarity)]


@pytest.fixture(scope="module")
def asked(tiny_models, tiny_similarity, tmp_path_factory):
    """``ask --methods token_sar,sentence_sar,sar,num_sets --json``, saved to a file."""
    code, out, err = cli("ask", QUESTION, *flags(tiny_models, tiny_similarity),
                         "--samples", "3", "--max-new-tokens", "6",
                         "--methods", "token_sar,sentence_sar,sar,num_sets", "--json")
    assert code == 0, err
    path = tmp_path_factory.mktemp("sar") / "analysis.json"
    path.write_text(out, encoding="utf-8")
    return json.loads(out), path


def transformers_similarities(path, pairs) -> list[float]:
    """Sigmoid of the one logit of each pair, one pair at a time: transformers alone."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForSequenceClassification.from_pretrained(str(path)).eval()
    out = []
    for a, b in pairs:
        with torch.no_grad():
            logit = model(**tok(a, b, return_tensors="pt")).logits[0, 0]
        out.append(float(torch.sigmoid(logit.double())))
    return out


def test_the_similarities_are_the_cross_encoders_sigmoid(tiny_similarity):
    from mars_demo.models.registry import load_optional

    model = load_optional("similarity", str(tiny_similarity))
    pairs = relevance_pairs(QUESTION, "It is Mars", [(0, 2), (2, 5), (5, 10)])
    pairs += [("Mars", "the red planet Mars is"), ("Venus", "Venus")]
    got = model.similarities(pairs)
    want = transformers_similarities(tiny_similarity, pairs)
    assert got == float32_order(want)  # one padded batch against one pair at a time
    assert all(0 < v < 1 for v in got) and len(set(got)) == len(got)  # a real model, not 0.5s


def test_questions_share_batches_and_keep_their_own_warnings(tiny_similarity):
    from mars_demo.models.registry import load_optional

    model = load_optional("similarity", str(tiny_similarity))
    first = [("Mars", "the red planet Mars is"), ("Venus", "Venus")]
    second = [("Mars " * 600, "Mars"), ("Jupiter", "the largest planet")]
    got = model.grouped_similarities([first, second, []])
    assert [said for _, said in got] == [
        [], ["The similarity model read 1 of 2 text pairs cut to its window of 512 tokens."], []]
    # padded to the long pair's 512 tokens in a shared batch: float32 sums in another order
    assert got[0][0] == float32_order(transformers_similarities(tiny_similarity, first))
    assert got[1][0] == float32_order(model.similarities(second))
    assert got[2][0] == []


def test_a_model_with_other_outputs_is_refused(tiny_models):
    from mars_demo.errors import ModelLoadError
    from mars_demo.models.registry import load_optional

    with pytest.raises(ModelLoadError, match="num_labels=1"):
        load_optional("similarity", str(tiny_models["nli"]))  # three outputs: an NLI model


def test_a_cross_encoder_with_another_activation_is_refused(tiny_similarity, tmp_path):
    import shutil

    from mars_demo.errors import ModelLoadError
    from mars_demo.models.registry import load_optional

    other = tmp_path / "identity"
    shutil.copytree(tiny_similarity, other)
    config = json.loads((other / "config.json").read_text())
    config["sbert_ce_default_activation_function"] = "torch.nn.modules.linear.Identity"
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="names the activation 'torch.nn.modules.linear"):
        load_optional("similarity", str(other))
    config["sbert_ce_default_activation_function"] = "torch.nn.modules.activation.Sigmoid"
    (other / "config.json").write_text(json.dumps(config))
    assert load_optional("similarity", str(other)).similarities([("a", "b")])


def test_ask_gives_the_sar_methods_from_the_saved_similarities(asked, tiny_similarity):
    data, _ = asked
    assert list(data["methods"]) == ["token_sar", "sentence_sar", "sar", "num_sets"]
    saved = data["method_inputs"]["sar"]
    samples = data["samples"]
    assert saved["similarity_model"] == str(tiny_similarity)
    assert saved["answers"] == [s["text"] for s in samples]
    logprobs = [[t["logprob"] for t in s["tokens"]] for s in samples]
    tokens = saved["token_similarities"]
    assert [len(t) for t in tokens] == [len(s["tokens"]) for s in samples]
    matrix = saved["sample_similarity"]
    assert len(matrix) == len(samples) == 3 and all(len(row) == 3 for row in matrix)
    # the stored numbers are the model's on the pairs the stage names
    first = samples[0]
    pairs = relevance_pairs(QUESTION, first["text"],
                            [(t["start"], t["end"]) for t in first["tokens"]])
    pairs.append((f"{QUESTION} {samples[0]['text']}", f"{QUESTION} {samples[1]['text']}"))
    want = transformers_similarities(tiny_similarity, pairs)
    assert tokens[0] + [matrix[0][1]] == float32_order(want)  # batched against one at a time
    methods = data["methods"]
    assert methods["token_sar"] == {"value": sar.token_sar(logprobs, tokens)}
    assert methods["sar"] == {"value": sar.sar(logprobs, tokens, matrix)}
    assert methods["sentence_sar"] == {
        k: sar.sentence_sar([s["scores"][k] for s in samples], matrix)
        for k in ("length_normalized", "mars")}
    values = [v for m in SAR for v in methods[m].values()]
    assert all(math.isfinite(v) for v in values) and len(set(values)) == len(values)
    assert methods["token_sar"]["value"] > 0


def test_score_methods_only_recomputes_sar_without_a_model(asked, tiny_similarity, monkeypatch):
    from mars_demo.models import registry

    data, path = asked
    monkeypatch.setattr(registry, "load_cached", lambda *a, **k: pytest.fail("a model loaded"))
    check_methods_only(data, path, SAR, "sar",
                       "no similarities of the SAR cross-encoder that sar reads")


def test_the_similarity_model_is_needed_only_when_sar_is_asked(tiny_settings, asked,
                                                                tiny_similarity):
    # the free methods alone: nothing of SAR saved
    check_model_needed_only_when_asked(
        tiny_settings.replace(similarity=str(tiny_similarity)), asked[0], QUESTION,
        "similarity", "sar",
        ((None, False), ("eigv,num_sets", False), ("token_sar", True),
         ("num_sets,sentence_sar", True), ("sar", True)))


def test_a_rescore_reuses_the_saved_similarities(tiny_settings, asked, tiny_similarity,
                                                 monkeypatch):
    from mars_demo.models import registry
    from mars_demo.result import AnalysisResult

    result = AnalysisResult.from_dict(asked[0])
    settings = tiny_settings.replace(similarity=str(tiny_similarity), methods="sar,token_sar")
    loaded = []
    real = registry.load_optional
    monkeypatch.setattr(registry, "load_optional",
                        lambda *a, **k: loaded.append(a) or real(*a, **k))
    again = Engine(settings).rescore(result)
    assert not loaded and again.method_inputs["sar"] == result.method_inputs["sar"]
    assert again.methods["sar"] == result.methods["sar"]
    result.method_inputs = {}  # as an analysis made without SAR: the model runs again
    fresh = Engine(settings).rescore(result)
    assert loaded and fresh.methods["sar"]["value"] == pytest.approx(
        asked[0]["methods"]["sar"]["value"], abs=1e-9)


def test_a_public_page_names_the_similarity_model_not_its_path(asked, tiny_similarity):
    from ui_helpers import check_public_model_name

    check_public_model_name(asked[0], "similarity", str(tiny_similarity), "sar",
                            "similarity_model")


def test_evaluate_shares_one_pass_and_keeps_each_questions_similarities(
        tiny_models, tiny_similarity, tmp_path, no_llm):
    """``evaluate`` scores a batch of questions together; SAR's batches then hold every
    question's pairs, and each record's similarities must still be its own pairs'."""
    from mars_demo.methods import compute_methods

    records = evaluate_facts(tmp_path / "run", tiny_models, 4, "--similarity",
                             str(tiny_similarity), "--methods", "sar,token_sar")
    assert len(records) == 4 and len({r["methods"]["sar"]["value"] for r in records}) == 4
    for r in records:
        analysis = r["analysis"]
        saved, samples = analysis["method_inputs"]["sar"], analysis["samples"]
        question = saved["question"]
        first = samples[0]
        pairs = relevance_pairs(question, first["text"],
                                [(t["start"], t["end"]) for t in first["tokens"]])
        pairs.append((f"{question} {samples[0]['text']}", f"{question} {samples[1]['text']}"))
        want = transformers_similarities(tiny_similarity, pairs)
        got = saved["token_similarities"][0] + [saved["sample_similarity"][0][1]]
        assert got == float32_order(want)  # the batch's shared passes against one pair each
        assert compute_methods(analysis, ["sar", "token_sar"]) == r["methods"]


COCOA = ("cocoa_msp", "cocoa_ppl", "cocoa_mte")


def _counting(monkeypatch):
    """Record the number of pairs of each group the similarity model is sent."""
    from mars_demo.optional.similarity import SimilarityModel

    sent: list[list[int]] = []
    real = SimilarityModel.grouped_similarities

    def counted(self, groups):
        sent.append([len(g) for g in groups])
        return real(self, groups)

    monkeypatch.setattr(SimilarityModel, "grouped_similarities", counted)
    return sent


@pytest.mark.float_order
def test_cocoa_alone_sends_only_its_greedy_pairs(tiny_settings, tiny_similarity, monkeypatch,
                                                 tmp_path):
    """CoCoA reads the greedy answer's similarities with the samples alone: asked without a SAR
    method, the model is sent those 2m pairs and none of SAR's token-drop or sample pairs, and
    the values are those of a run that asks for everything; a later run that asks for SAR keeps
    the saved part and sends only the missing parts' pairs."""
    from mars_demo.result import AnalysisResult

    sent = _counting(monkeypatch)
    settings = tiny_settings.replace(similarity=str(tiny_similarity))
    alone = Engine(settings.replace(methods=",".join(COCOA))).analyze(QUESTION)
    m = len(alone.samples)
    assert sent == [[2 * m]]
    entry = alone.method_inputs["sar"]
    assert "token_similarities" not in entry and "sample_similarity" not in entry
    assert len(entry["greedy_similarity"]["forward"]) == m
    full = Engine(settings.replace(methods=",".join(SAR + COCOA))).rescore(
        AnalysisResult.from_dict({**alone.to_dict(), "method_inputs": {}}))
    tokens = sum(len(s.tokens) for s in alone.samples)
    assert sent[1] == [tokens + m * (m - 1) + 2 * m]
    for method_id in COCOA:
        assert full.methods[method_id] == {
            k: float32_order(v) for k, v in alone.methods[method_id].items()}

    sent.clear()  # SAR asked of the CoCoA-only result: the greedy part is kept, not sent again
    more = Engine(settings.replace(methods=",".join(SAR + COCOA))).rescore(alone)
    assert sent == [[tokens + m * (m - 1)]]
    assert more.method_inputs["sar"]["greedy_similarity"] == entry["greedy_similarity"]
    assert more.methods["sar"]["value"] == float32_order(full.methods["sar"]["value"])
    sent.clear()  # and a result that holds every part asked sends nothing
    Engine(settings.replace(methods="sar,cocoa_msp")).rescore(more)
    assert sent == []

    path = tmp_path / "cocoa.json"
    path.write_text(json.dumps(alone.to_dict()), encoding="utf-8")
    code, _, err = cli("score", str(path), "--methods-only", "--methods", "cocoa_msp,sar")
    assert code == 2
    assert ("no token-drop similarities of the similarity model (SAR's token relevance) that "
            "sar reads") in err, err
