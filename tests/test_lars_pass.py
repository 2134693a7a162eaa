"""LARS's pass, end to end on the tiny models: the scorer's logits against
transformers alone on the text :func:`mars_demo.core.lars.lars_answer_text` builds, the models
refused at load, the ``lars``, ``lars_entropy`` and ``lars_semantic_entropy`` methods of ``ask
--methods`` from the saved logits, ``score --methods-only`` recomputing them without a model
(and without torch), the LARS model loaded only when a LARS method is asked, and the public
API's refusal."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys

import pytest
from cli_helpers import (
    check_methods_only,
    check_model_needed_only_when_asked,
    cli,
    evaluate_facts,
)
from numeric_checks import float32_order

from mars_demo.core.lars import lars_answer_text
from mars_demo.errors import ModelLoadError

QUESTION = "Which planet is known as the Red Planet?"
LARS = ("lars", "lars_entropy", "lars_semantic_entropy")
BINS = 4
# as LARS's edges (quantiles of training token probabilities): the tiny LLM's tokens, of a
# vocabulary of 1000, have probabilities near 0.001, so two edges split those
EDGES = [0.0, 0.00105, 0.00125, 0.5]


def build_tiny_lars(path, tiny_nli, bins=BINS, edges=EDGES, seed=19):
    """A random tiny LARS-shaped model (:func:`mars_demo.devtools.tiny.lars.build_lars`)."""
    from mars_demo.devtools.tiny.lars import build_lars

    return build_lars(path, tiny_nli, bins=bins, edges=edges, seed=seed)


@pytest.fixture(scope="module")
def tiny_lars(tiny_models, tmp_path_factory):
    return build_tiny_lars(tmp_path_factory.mktemp("tiny-lars") / "lars", tiny_models["nli"])


def flags(models, lars) -> list[str]:
    return ["--llm", str(models["llm"]), "--importance", str(models["importance"]),
            "--nli", str(models["nli"]), "--lars", str(lars)]


@pytest.fixture(scope="module")
def asked(tiny_models, tiny_lars, tmp_path_factory):
    """``ask --methods lars,lars_entropy,lars_semantic_entropy,num_sets --json``, saved."""
    code, out, err = cli("ask", QUESTION, *flags(tiny_models, tiny_lars),
                         "--samples", "4", "--max-new-tokens", "6",
                         "--methods", "lars,lars_entropy,lars_semantic_entropy,num_sets", "--json")
    assert code == 0, err
    path = tmp_path_factory.mktemp("lars") / "analysis.json"
    path.write_text(out, encoding="utf-8")
    return json.loads(out), path


def transformers_logits(path, question, texts) -> list[float]:
    """LARS's one logit of each (question, text) pair, one pair at a time: transformers alone."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForSequenceClassification.from_pretrained(str(path)).eval()
    out = []
    for text in texts:
        with torch.no_grad():
            out.append(float(model(**tok(question, text, return_tensors="pt")).logits[0, 0]))
    return out


def test_the_logits_are_the_models_on_lars_input(tiny_lars):
    from mars_demo.models.registry import load_optional

    model = load_optional("lars", str(tiny_lars))
    assert (model.number_of_bins, model.edges) == (BINS, EDGES)
    texts = [lars_answer_text(["It", " is", " Mars"], p, EDGES, BINS)
             for p in ([0.9, 0.0011, 0.0005], [0.0005, 0.0005, 0.9], [0.0011] * 3)]
    texts.append(lars_answer_text(["Venus"], [0.99], EDGES, BINS))
    assert texts[0] == "It[prob_token_3] is[prob_token_2] Mars[prob_token_1]"  # edges <= p
    # the bin tokens are whole tokens of the model's input
    ids = model.tokenizer(QUESTION, texts[0])["input_ids"]
    assert model.tokenizer.convert_tokens_to_ids("[prob_token_3]") in ids
    got = model.logits(QUESTION, texts)
    # one length-sorted padded batch against one text at a time: float32 sums in another order
    assert got == float32_order(transformers_logits(tiny_lars, QUESTION, texts))
    assert len(set(got)) == len(got) and max(got) - min(got) > 0.1  # the bins change the logit


def test_an_input_longer_than_the_window_is_cut_and_said(tiny_lars):
    from mars_demo.models.registry import load_optional

    model = load_optional("lars", str(tiny_lars))
    warnings: list[str] = []
    long = lars_answer_text(["Mars"] * 600, [0.5] * 600, EDGES, BINS)
    got = model.logits(QUESTION, ["Mars[prob_token_2]", long], warnings)
    assert warnings == ["LARS read 1 of 2 answers (with the question) cut to its window of "
                        "512 tokens."]
    assert math.isfinite(got[1])


def test_questions_share_batches_and_keep_their_own_warnings(tiny_lars):
    from mars_demo.models.registry import load_optional

    model = load_optional("lars", str(tiny_lars))
    long = lars_answer_text(["Mars"] * 600, [0.5] * 600, EDGES, BINS)
    other, texts = "Which planet is nearest to the Sun?", ["Mercury[prob_token_3]",
                                                           "Venus[prob_token_1] is"]
    got = model.grouped_logits([(QUESTION, ["Mars[prob_token_2]", long]), (other, texts),
                                (QUESTION, [])])
    assert [said for _, said in got] == [
        ["LARS read 1 of 2 answers (with the question) cut to its window of 512 tokens."], [],
        []]
    # padded to the long input's 512 tokens in a shared batch: float32 sums in another order
    assert got[0][0] == float32_order(model.logits(QUESTION, ["Mars[prob_token_2]", long]))
    assert got[1][0] == float32_order(transformers_logits(tiny_lars, other, texts))
    assert got[2][0] == []


def edited(source, target, **changes):
    """A copy of a saved model with its config.json changed (None removes a key)."""
    shutil.copytree(source, target)
    config = json.loads((target / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (target / "config.json").write_text(json.dumps(config))
    return str(target)


def test_models_that_are_not_lars_are_refused(tiny_models, tiny_lars, tmp_path):
    from mars_demo.models.registry import load_optional

    with pytest.raises(ModelLoadError, match="has 3 outputs; LARS has one"):
        load_optional("lars", str(tiny_models["nli"]))
    with pytest.raises(ModelLoadError, match="no number_of_bins .* in its config"):
        load_optional("lars", edited(tiny_lars, tmp_path / "no-bins", number_of_bins=None))
    # five bins named, four bin tokens in the tokenizer
    with pytest.raises(ModelLoadError, match=r"does not hold \[prob_token_4\] as whole tokens "
                                             r"\(1 of its 5 bin tokens\)"):
        load_optional("lars", edited(tiny_lars, tmp_path / "more-bins", number_of_bins=5))
    with pytest.raises(ModelLoadError, match="unusable edges .* must not decrease"):
        load_optional("lars", edited(tiny_lars, tmp_path / "bad-edges", edges=[0.0, 0.6, 0.3, 0.9]))
    # no edges: even bins, as LARS's own code does without them
    even = load_optional("lars", edited(tiny_lars, tmp_path / "no-edges", edges=None))
    assert even.edges is None and even.number_of_bins == BINS


def test_ask_gives_the_lars_methods_from_the_saved_logits(asked, tiny_lars):
    data, _ = asked
    assert list(data["methods"]) == ["lars", "lars_entropy", "lars_semantic_entropy", "num_sets"]
    saved = data["method_inputs"]["lars"]
    answers = [data["greedy"]] + data["samples"]
    assert saved["lars_model"] == str(tiny_lars) and saved["question"] == QUESTION
    assert saved["answers"] == [a["text"] for a in answers]
    assert (saved["number_of_bins"], saved["edges"]) == (BINS, EDGES)
    # each input: the saved tokens' texts with the bins of exp(their saved log-probs)
    inputs = [lars_answer_text([t["text"] for t in a["tokens"]],
                               [math.exp(t["logprob"]) for t in a["tokens"]], EDGES, BINS)
              for a in answers]
    assert saved["inputs"] == inputs
    assert all(s.count("[prob_token_") == len(a["tokens"]) for s, a in zip(inputs, answers))
    assert len(set(re.findall(r"\[prob_token_\d\]", "".join(inputs)))) >= 2  # bins that differ
    logits = saved["logits"]
    # the stage's one padded batch against one input at a time: float32 sums in another order
    assert logits == float32_order(transformers_logits(tiny_lars, QUESTION, inputs))
    # the methods from the logits, by hand: -log sigmoid, its mean, the clusters' logsumexp
    minus_log_sigmoid = [math.log1p(math.exp(-x)) for x in logits]
    methods = data["methods"]
    assert methods["lars"]["value"] == pytest.approx(minus_log_sigmoid[0], abs=1e-12)
    samples = minus_log_sigmoid[1:]
    assert methods["lars_entropy"]["value"] == pytest.approx(sum(samples) / len(samples),
                                                             abs=1e-12)
    clusters: dict[int, list[float]] = {}
    for c, u in zip(data["cluster_ids"], samples):
        clusters.setdefault(c, []).append(-u)
    want = -sum(math.log(sum(math.exp(v) for v in c)) for c in clusters.values()) / len(clusters)
    assert methods["lars_semantic_entropy"]["value"] == pytest.approx(want, abs=1e-12)
    assert all(list(methods[m]) == ["value"] for m in LARS)


def test_score_methods_only_recomputes_lars_without_a_model(asked, monkeypatch):
    from mars_demo.models import registry

    data, path = asked
    monkeypatch.setattr(registry, "load_cached", lambda *a, **k: pytest.fail("a model loaded"))
    check_methods_only(data, path, LARS, "lars_entropy",
                       "no logits of the LARS model that lars_entropy reads")

def test_the_saved_analysis_alone_gives_the_lars_values_without_torch(asked):
    data, path = asked
    script = (
        "import json, sys\n"
        "from mars_demo.methods import compute_methods\n"
        f"values = compute_methods(json.load(open({str(path)!r})), {list(LARS)!r})\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
        "print(json.dumps(values))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    values = json.loads(run.stdout)
    for method_id in LARS:
        assert abs(values[method_id]["value"] - data["methods"][method_id]["value"]) <= 1e-9


def test_the_lars_model_is_needed_only_when_lars_is_asked(tiny_settings, asked, tiny_lars):
    check_model_needed_only_when_asked(
        tiny_settings.replace(lars=str(tiny_lars)), asked[0], QUESTION, "lars", "lars",
        ((None, False), ("eigv,num_sets,token_sar", False), ("lars", True),
         ("num_sets,lars_entropy", True), ("lars_semantic_entropy", True)))


def test_a_rescore_reuses_the_saved_logits_of_the_same_inputs(tiny_settings, asked, tiny_lars,
                                                              monkeypatch):
    from mars_demo.engine import Engine
    from mars_demo.models import registry
    from mars_demo.result import AnalysisResult

    result = AnalysisResult.from_dict(asked[0])
    settings = tiny_settings.replace(lars=str(tiny_lars), methods="lars,lars_semantic_entropy")
    loaded = []
    real = registry.load_optional
    monkeypatch.setattr(registry, "load_optional", lambda *a, **k: loaded.append(a) or real(*a, **k))
    again = Engine(settings).rescore(result)
    assert not loaded and again.method_inputs["lars"] == result.method_inputs["lars"]
    assert again.methods["lars"] == result.methods["lars"]
    # the same texts with other log-probs are other LARS inputs: the model runs again
    changed = AnalysisResult.from_dict(asked[0])
    token = changed.greedy.tokens[0]
    token.logprob = math.log(0.0005) if math.exp(token.logprob) >= EDGES[1] else -0.01
    fresh = Engine(settings).rescore(changed)
    assert loaded and fresh.method_inputs["lars"]["inputs"][0] != (
        result.method_inputs["lars"]["inputs"][0])
    assert fresh.method_inputs["lars"]["inputs"][1:] == result.method_inputs["lars"]["inputs"][1:]
    assert fresh.methods["lars"] != result.methods["lars"]


def test_a_public_page_names_the_lars_model_not_its_path(asked, tiny_lars):
    from ui_helpers import check_public_model_name

    check_public_model_name(asked[0], "lars", str(tiny_lars), "lars", "lars_model")


def test_evaluate_ranks_the_lars_methods_with_the_others(tiny_models, tiny_lars, tmp_path,
                                                         no_llm):
    from mars_demo.methods import compute_methods

    out = tmp_path / "run"
    records = evaluate_facts(out, tiny_models, 6, "--lars", str(tiny_lars),
                             "--methods", "lars,lars_semantic_entropy,eigv")
    assert len(records) == 6
    assert all(list(r["methods"]) == ["lars", "lars_semantic_entropy", "eigv"] for r in records)
    report = json.loads((out / "report.json").read_text())
    rows = {(r["name"], r["variant"]): r for r in report["methods_table"]["rows"]}
    assert rows["lars", "value"]["label"] == "LARS"
    assert rows["lars_semantic_entropy", "value"]["label"] == "Semantic entropy (LARS)"
    assert rows["lars", "value"]["auroc"]["value"] is not None
    assert len({r["methods"]["lars"]["value"] for r in records}) == 6  # one per question
    assert "| LARS |" in (out / "report.md").read_text()
    # every record's LARS values come back from its saved analysis alone, and the logits of
    # the one pass shared by the 6 questions are each question's own
    for r in records:
        saved = r["analysis"]["method_inputs"]["lars"]
        assert saved["logits"] == float32_order(  # padded with longer inputs: float32 order
            transformers_logits(tiny_lars, saved["question"], saved["inputs"]))
        again = compute_methods(r["analysis"], ["lars", "lars_semantic_entropy"])
        assert again == {k: r["methods"][k] for k in again}


def test_an_answer_cut_to_lars_window_is_said_in_the_analysis(tiny_settings, tiny_lars):
    from mars_demo.engine import Engine

    def answer(words):
        return {"text": " ".join(words), "tokens": [
            {"text": w if i == 0 else " " + w, "logprob": -0.1 - i % 3} for i, w in
            enumerate(words)]}

    answers = {"question": QUESTION, "greedy": answer(["Mars"] * 300),
               "samples": [answer(["Mars"]), answer(["It", "is", "Mars"])]}
    settings = tiny_settings.replace(lars=str(tiny_lars), methods="lars,num_sets")
    result = Engine(settings).score(answers)
    assert ("LARS read 1 of 3 answers (with the question) cut to its window of 512 tokens."
            in result.warnings)
    saved = result.method_inputs["lars"]
    assert saved["inputs"][0].count("[prob_token_") == 300 and "lars" in result.methods


def test_tokens_that_are_parts_of_a_character_are_said_to_reach_lars_as_empty_text(
        tiny_settings, tiny_lars):
    """A token holding only some bytes of a character has no text of its own (the next token
    completes the character); LARS then reads only its bin token, and the analysis says so."""
    from mars_demo.engine import Engine

    def answer(texts):
        return {"text": "".join(texts),
                "tokens": [{"text": t, "logprob": -0.2} for t in texts]}

    answers = {"question": QUESTION, "greedy": answer(["Mars", " ", "", "\u2642"]),
               "samples": [answer(["Mars"]), answer(["It", " is", " ", "", "\u2642"])]}
    settings = tiny_settings.replace(lars=str(tiny_lars), methods="lars,num_sets")
    result = Engine(settings).score(answers)
    assert ("LARS read 2 of 10 tokens of these answers as empty text: each is part of a "
            "character that the next token completes, so LARS saw only its probability bin "
            "(LARS's own code reads such a token as the replacement character)."
            in result.warnings)
    assert "lars" in result.methods
    plain = Engine(settings).score({"question": QUESTION, "greedy": answer(["Mars"]),
                                    "samples": [answer(["Mars"]), answer(["Venus"])]})
    assert not [w for w in plain.warnings if "empty text" in w]
