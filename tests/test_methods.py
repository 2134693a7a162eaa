"""The methods registry (mars_demo/methods.py): ids, parsing, labels, and each method computed
from what an analysis holds, equal to the core function on the same hand-made inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mars_demo import methods
from mars_demo.core import graph, kernel, lexical, p_true, sar, uncertainty
from mars_demo.methods import FREE, METHODS, VARIANTS, compute_methods, label, parse_methods

E, N, C = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
TEXTS = ["Mars", "It is Mars", "Venus"]
LN = [-0.2, -0.5, -1.5]
MARS = [-0.1, -0.7, -2.5]  # differ from LN, so a method reading the wrong scores is caught
CLUSTERS = [0, 0, 1]
NLI = [
    [E, [0.7, 0.2, 0.1], [0.05, 0.15, 0.8]],
    [[0.6, 0.3, 0.1], E, [0.1, 0.2, 0.7]],
    [[0.1, 0.1, 0.8], [0.2, 0.2, 0.6], E],
]


TOKEN_LOGPROBS = [[-0.2], [-0.9, -0.3, -0.3], [-1.5]]  # "Mars", "It| is| Mars", "Venus"
TOKEN_SIMILARITIES = [[0.4], [0.9, 0.8, 0.2], [0.3]]
SAMPLE_SIMILARITY = [[1.0, 0.8, 0.1], [0.7, 1.0, 0.2], [0.05, 0.1, 1.0]]
LARS_LOGITS = [1.5, 2.0, -0.5, 0.3]  # the greedy answer's, then the samples'


def log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x))
PASSES = {"p_true": {"logprob": -0.4, "prompt": "Question: ..."},
          "p_true_sampling": {"logprob": -1.3, "prompt": "Question: ... brainstormed ..."},
          "sar": {"similarity_model": "org/sts", "answers": TEXTS,
                  "token_similarities": TOKEN_SIMILARITIES,
                  "sample_similarity": SAMPLE_SIMILARITY},
          "lars": {"lars_model": "org/lars", "answers": ["Mars, it is"] + TEXTS,
                   "logits": LARS_LOGITS}}


GREEDY = {"text": "Mars, it is", "scores": {"length_normalized": -0.3, "mars": -0.2},
          "mars_weights": [0.5, 0.25, 0.25],
          "tokens": [{"logprob": -0.1, "entropy": 0.3, "kl_uniform": 5.0},
                     {"logprob": -0.5, "entropy": 1.2, "kl_uniform": 3.0},
                     {"logprob": -0.3, "entropy": 0.6, "kl_uniform": 4.0}]}


def analysis(texts=TEXTS, ln=LN, mars=MARS, clusters=CLUSTERS, nli=NLI, passes=PASSES) -> dict:
    """The part of an analysis JSON the methods read."""
    samples = [{"text": t, "scores": {"length_normalized": a, "mars": b},
                "tokens": [{"logprob": x} for x in logprobs]}
               for t, a, b, logprobs in zip(texts, ln, mars, TOKEN_LOGPROBS)]
    out = {"samples": samples, "cluster_ids": list(clusters), "greedy": GREEDY,
           "nli": {"answers": list(texts), "labels": []}}
    passes = None if passes is None else {
        **passes, "greedy_nli": {"greedy": GREEDY["text"], "answers": list(texts),
                                 "probabilities": [[0.6, 0.3, 0.1]] * len(texts)}}
    if nli is not None:
        out["nli"]["probabilities"] = nli
    if passes is not None:
        out["method_inputs"] = passes
    return out


EXPECTED_VALUE = {
    "semantic_entropy_discrete": lambda: uncertainty.semantic_entropy_discrete(CLUSTERS),
    "num_sets": lambda: 2.0,
    "eigv": lambda: graph.eigv(NLI, "entail"),
    "eigv_contra": lambda: graph.eigv(NLI, "contra"),
    "degree": lambda: graph.degree(NLI, "entail"),
    "degree_contra": lambda: graph.degree(NLI, "contra"),
    "eccentricity": lambda: graph.eccentricity(NLI, "entail"),
    "eccentricity_contra": lambda: graph.eccentricity(NLI, "contra"),
    "lexical_similarity": lambda: lexical.lexical_similarity(TEXTS),
    "kernel_language_entropy": lambda: kernel.kernel_language_entropy(NLI),
    "p_true": lambda: p_true.p_true(-0.4),
    "p_true_sampling": lambda: p_true.p_true(-1.3),
    "token_sar": lambda: sar.token_sar(TOKEN_LOGPROBS, TOKEN_SIMILARITIES),
    "sar": lambda: sar.sar(TOKEN_LOGPROBS, TOKEN_SIMILARITIES, SAMPLE_SIMILARITY),
    # LARS: -log sigmoid of the greedy answer's logit; the samples' log sigmoids as the scores
    # of entropy and semantic entropy (clusters {Mars, It is Mars}, {Venus})
    "lars": lambda: math.log1p(math.exp(-1.5)),
    "lars_entropy": lambda: -(log_sigmoid(2.0) + log_sigmoid(-0.5) + log_sigmoid(0.3)) / 3,
    "lars_semantic_entropy": lambda: -(np.logaddexp(log_sigmoid(2.0), log_sigmoid(-0.5))
                                       + log_sigmoid(0.3)) / 2,
}
LLM_PASS = ("p_true", "p_true_sampling")
SIMILARITY = ("token_sar", "sentence_sar", "sar")
LARS = ("lars", "lars_entropy", "lars_semantic_entropy")
EXPECTED_SCORED = {
    "semantic_entropy": uncertainty.semantic_entropy,
    "semantic_entropy_normalized": uncertainty.semantic_entropy_normalized,
    "entropy": lambda scores, _: uncertainty.entropy(scores),
    "sentence_sar": lambda scores, _: sar.sentence_sar(scores, SAMPLE_SIMILARITY),
}


OPT_IN = LLM_PASS + SIMILARITY + LARS + ("cocoa_msp", "cocoa_ppl", "cocoa_mte", "ccp",
                                         "eigenscore")


def test_every_method_is_one_entry_with_its_inputs():
    for m in METHODS.values():
        assert m.needs <= set(methods.NEEDS) and m.label and m.explain and m.source
        assert callable(m.compute) and m.family in methods.FAMILIES
        assert ("llm_pass" in m.needs) == (m.id in LLM_PASS)
        assert ("lars_model" in m.needs) == (m.id in LARS)
        assert (m.id in OPT_IN) == (not methods.is_free(m))
    assert FREE == tuple(m for m in METHODS if m not in OPT_IN)
    for m in set(EXPECTED_VALUE) | set(EXPECTED_SCORED):
        assert METHODS[m].scored == (m in EXPECTED_SCORED)


@pytest.mark.parametrize("method_id", sorted(EXPECTED_VALUE))
def test_value_methods_equal_the_core_function(method_id):
    got = compute_methods(analysis(), [method_id])
    assert list(got) == [method_id] and list(got[method_id]) == ["value"]
    assert got[method_id]["value"] == EXPECTED_VALUE[method_id]()
    assert isinstance(got[method_id]["value"], float)


@pytest.mark.parametrize("method_id", sorted(EXPECTED_SCORED))
def test_scored_methods_give_ln_and_mars_from_their_own_scores(method_id):
    got = compute_methods(analysis(), method_id)[method_id]
    fn = EXPECTED_SCORED[method_id]
    assert got == {"length_normalized": fn(LN, CLUSTERS), "mars": fn(MARS, CLUSTERS)}
    assert got["length_normalized"] != got["mars"]
    swapped = compute_methods(analysis(ln=MARS, mars=LN), method_id)[method_id]
    assert swapped == {"length_normalized": got["mars"], "mars": got["length_normalized"]}


def test_the_paper_semantic_entropy_is_hand_computed():
    # clusters {Mars, It is Mars} and {Venus}: -(logsumexp(-0.1, -0.7) + (-2.5)) / 2 under MARS
    got = compute_methods(analysis(), ["semantic_entropy"])["semantic_entropy"]["mars"]
    assert got == pytest.approx(-(np.logaddexp(-0.1, -0.7) - 2.5) / 2, abs=1e-12)


def test_the_graph_methods_use_the_probabilities_not_the_labels():
    agree = [[E, E, E]] * 3
    values = compute_methods(analysis(nli=agree), ["eigv", "degree", "eccentricity"])
    assert values == {"eigv": {"value": pytest.approx(1.0)}, "degree": {"value": 0.0},
                      "eccentricity": {"value": pytest.approx(0.0, abs=1e-12)}}
    apart = [[E, C, C], [C, E, C], [C, C, E]]
    values = compute_methods(analysis(nli=apart), ["eigv", "eccentricity", "degree_contra"])
    assert values["eigv"]["value"] == pytest.approx(3.0)
    assert values["eccentricity"]["value"] == pytest.approx(math.sqrt(2))
    assert values["degree_contra"]["value"] == pytest.approx(1 - 3 / 9)


def test_one_sample_and_all_identical_samples():
    one = compute_methods(analysis(["Mars"], [-0.3], [-0.4], [0], [[E]]), FREE)
    assert one["num_sets"] == {"value": 1.0} and one["eigv"]["value"] == pytest.approx(1.0)
    assert one["lexical_similarity"] == {"value": -1.0}
    assert one["semantic_entropy"] == {"length_normalized": 0.3, "mars": 0.4}
    same = compute_methods(analysis(["Mars"] * 3, [-0.3] * 3, [-0.4] * 3, [0] * 3,
                                    [[E] * 3] * 3), FREE)
    assert same["lexical_similarity"] == {"value": -1.0}
    assert same["semantic_entropy_discrete"] == {"value": 0.0}
    # identical answers: below log 3 (no two related), not 0 (the heat kernel's t is 0.3)
    assert 0 < same["kernel_language_entropy"]["value"] < math.log(3) - 0.3
    for values in list(one.values()) + list(same.values()):
        assert all(math.isfinite(v) for v in values.values())


def test_an_analysis_object_and_its_json_give_the_same_values():
    class Result:  # anything with to_dict(), as AnalysisResult
        def to_dict(self):
            return analysis()

    assert compute_methods(Result(), FREE) == compute_methods(analysis(), FREE)


def test_an_analysis_without_probabilities_says_it_predates_them():
    old = analysis(nli=None)
    assert set(compute_methods(old, ["semantic_entropy", "num_sets", "lexical_similarity"]))
    with pytest.raises(ValueError, match="predates.*eigv, kernel_language_entropy"):
        compute_methods(old, ["eigv", "num_sets", "kernel_language_entropy"])


@pytest.mark.parametrize("text, expected", [
    ("eigv", ("eigv",)),
    (" eigv , degree_contra,,", ("eigv", "degree_contra")),
    (["num_sets", "num_sets", "eigv"], ("num_sets", "eigv")),
    (FREE, FREE),
])
def test_parse_methods(text, expected):
    assert parse_methods(text) == expected


@pytest.mark.parametrize("text, message", [
    ("eigv,eigenvalue", "unknown method 'eigenvalue'; known: confidence, entropy, semantic_entropy, .*eigv"),
    ("", "methods is empty"),
    ([3], "method ids"),
    (3, "method ids separated by commas"),
])
def test_parse_methods_refuses_with_a_clear_message(text, message):
    with pytest.raises(ValueError, match=message):
        parse_methods(text)
    if isinstance(text, str) and text:
        with pytest.raises(ValueError, match=message):
            compute_methods(analysis(), text)


def test_a_sar_method_without_its_saved_similarities_says_how_to_get_it():
    with pytest.raises(ValueError, match="no similarities of the SAR cross-encoder that "
                                         "token_sar, sar read; ask again .* with --methods "
                                         "token_sar,sar, which runs the similarity "
                                         r"\(SAR\) model \(--similarity\)"):
        compute_methods(analysis(passes=None), ["num_sets", "token_sar", "sar"])


def test_a_lars_method_without_its_saved_logits_says_how_to_get_it():
    with pytest.raises(ValueError, match="no logits of the LARS model that lars, "
                                         "lars_semantic_entropy read; ask again .* with "
                                         "--methods lars,lars_semantic_entropy, which runs the "
                                         "LARS model"):
        compute_methods(analysis(passes=None), ["num_sets", "lars", "lars_semantic_entropy"])


def test_lars_logits_of_other_answers_are_refused():
    other = {**PASSES, "lars": {**PASSES["lars"], "answers": ["Mars, it is", "Mars", "Venus",
                                                              "Venus"]}}
    with pytest.raises(ValueError, match="not of the greedy answer and these samples"):
        compute_methods(analysis(passes=other), ["lars"])
    short = {**PASSES, "lars": {**PASSES["lars"], "logits": LARS_LOGITS[:3]}}
    with pytest.raises(ValueError, match="not of the greedy answer and these samples"):
        compute_methods(analysis(passes=short), ["lars_entropy"])


def test_a_pass_method_without_its_saved_logprob_says_how_to_get_it():
    with pytest.raises(ValueError, match="no log-prob of the extra LLM pass that p_true reads; "
                                         "ask again .* with --methods p_true"):
        compute_methods(analysis(passes=None), ["num_sets", "p_true"])
    with pytest.raises(ValueError, match="p_true_sampling reads"):
        compute_methods(analysis(passes={"p_true": PASSES["p_true"]}), LLM_PASS)
    with pytest.raises(ValueError, match="p_true reads"):  # a pass that returned nothing
        compute_methods(analysis(passes={"p_true": {"logprob": None}}), ["p_true"])


def test_the_pass_prompts_are_the_core_templates():
    question, greedy, samples = "Red planet?", "Mars", ["Mars", "Venus"]
    assert methods.llm_pass_prompt("p_true", question, greedy, samples) == \
        p_true.PROMPT.format(q=question, a=" Mars")
    assert methods.llm_pass_prompt("p_true_sampling", question, greedy, samples) == \
        p_true.SAMPLES_PROMPT.format(q=question, s="Mars, Venus", a=" Mars")
    with pytest.raises(ValueError, match="runs no extra LLM pass"):
        methods.llm_pass_prompt("eigv", question, greedy, samples)


def test_labels():
    assert VARIANTS == ("length_normalized", "mars", "value")
    assert label("eigv", "value") == "Eigenvalue (entail.)"
    assert label("eigv_contra", "value") == "Eigenvalue (contra.)"
    assert label("semantic_entropy_normalized", "mars") == "Semantic entropy, normalized (MARS)"
    assert label("semantic_entropy", "length_normalized") == "Semantic entropy (LN)"
    with pytest.raises(ValueError, match="variants length_normalized, mars"):
        label("semantic_entropy", "value")
    with pytest.raises(ValueError, match="unknown method"):
        label("nope", "value")


def test_docstring_examples():
    import doctest

    result = doctest.testmod(methods)
    assert result.attempted > 0 and result.failed == 0
