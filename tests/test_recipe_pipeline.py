"""The two recipes end to end on tiny models: what each switches, recorded and said."""

from __future__ import annotations

import pytest

from mars_demo.core import clustering
from mars_demo.engine import Engine
from mars_demo.recipes import recipe_of

QUESTION = "Which planet is known as the Red Planet?"


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return Engine(tiny_settings.replace(samples=4, max_new_tokens=10))


@pytest.fixture(scope="module")
def paper(engine):
    return engine.analyze(QUESTION, engine.settings.replace(recipe="paper-code", seed=3))


def test_default_recipe_keeps_the_documented_choices(engine):
    r = engine.analyze(QUESTION)
    assert r.settings["recipe"] == "default" and r.settings["generated_with_recipe"] == "default"
    assert r.settings["max_new_tokens"] == 10 and r.settings["cluster_rule"] == "strict"
    assert not r.prompt.endswith(" ")
    assert not any("recipe" in w for w in r.warnings)


def test_paper_code_generates_and_scores_as_the_published_code(paper):
    s = paper.settings
    assert (s["recipe"], s["prompt"], s["max_new_tokens"], s["cluster_rule"]) == (
        "paper-code", "paper", 128, "lenient")
    assert paper.prompt.endswith("Answer: ")  # the published prompt's trailing space
    for answer in [paper.greedy, *paper.samples]:
        assert "\n" not in answer.text and ":" not in answer.text  # banned tokens
        if "." in answer.text:  # "." ends an answer and is kept, scored
            assert answer.text.endswith(".") and answer.text.count(".") == 1
            assert answer.tokens[-1].text.endswith(".")
    # the clusters are the all-pairs algorithm's over the distinct sample texts (lenient)
    texts = [a.text for a in paper.samples]
    assert paper.cluster_ids == clustering.semantic_clusters(
        paper.nli.labels, rule="lenient", algorithm="all-pairs", answers=texts)
    # the recipe changed options the settings asked otherwise, and says so
    assert any("paper-code recipe sets" in w and "max new tokens 128 (not 10)" in w
               and "cluster rule lenient (not strict)" in w for w in paper.warnings)


def test_paper_code_reads_the_nli_input_as_published(engine, paper, monkeypatch):
    from mars_demo.models.nli import NLIModel

    seen = {}
    original = NLIModel.judge

    def spy(self, pairs, input_format="pair"):
        seen["format"] = input_format
        return original(self, pairs, input_format)

    monkeypatch.setattr(NLIModel, "judge", spy)
    engine.score(paper.answer_set(), engine.settings.replace(recipe="paper-code"))
    assert seen["format"] == recipe_of("paper-code").nli_input_format == "paper-code"
    engine.score(paper.answer_set(), engine.settings)
    assert seen["format"] == "pair"


def test_rescoring_under_another_recipe_says_the_answers_were_not_regenerated(engine, paper):
    again = engine.rescore(paper, recipe="default")
    assert again.settings["recipe"] == "default"
    assert again.settings["generated_with_recipe"] == "paper-code"
    assert any("generated with the paper-code recipe; only their scoring follows the default"
               in w for w in again.warnings)


def test_paper_code_merges_phrases_that_share_a_token(engine):
    data = {"question": "Red planet?",
            "greedy": {"text": "It's Mars.", "tokens": [
                {"text": "It", "logprob": -0.5}, {"text": "'s", "logprob": -0.3},
                {"text": " Mars", "logprob": -0.1}, {"text": ".", "logprob": -0.05}]},
            "samples": [{"text": "Mars", "tokens": [{"text": "Mars", "logprob": -0.2}]}]}
    default = engine.score(data)
    paper = engine.score(data, engine.settings.replace(recipe="paper-code"))
    # every phrase of the published mapping holds whole tokens, none is left without one
    for result in (default, paper):
        covered = sorted(t for p in result.greedy.phrases for t in p.tokens)
        assert covered == list(range(4))
    assert all(p.tokens for p in paper.greedy.phrases)
    assert paper.settings["cluster_rule"] == "lenient"
    assert any("cluster rule lenient (not strict)" in w for w in paper.warnings)


@pytest.mark.parametrize("cuda", [False, True])
def test_paper_code_shares_the_loaded_nli_model_only_without_cuda(engine, monkeypatch, cuda):
    """The published code's float32 NLI is what "auto" loads on CPU: no second copy. With CUDA
    "auto" is float16, so paper-code asks for a float32 copy (the engine is told CUDA is there
    or not; the models stay where they are)."""
    import transformers

    from mars_demo.models import registry

    first = engine.analyze(QUESTION)
    # a float32 copy another test loaded would hide the load: drop it (the rest stays loaded)
    registry.release(registry.loaded_keys() - {registry.nli_key(engine.settings.nli, "float32")})
    monkeypatch.setattr(registry, "cuda_available", lambda: cuda)
    loads = []

    def refuse(*args, **kwargs):
        loads.append(args)
        raise AssertionError("a second NLI model was loaded")

    monkeypatch.setattr(transformers.AutoModelForSequenceClassification, "from_pretrained",
                        refuse)
    paper = engine.settings.replace(recipe="paper-code")
    if cuda:
        with pytest.raises(Exception, match="second NLI model"):
            engine.score(first, paper)
        assert len(loads) == 1
    else:
        assert engine.score(first, paper).settings["recipe"] == "paper-code"
        assert loads == []
