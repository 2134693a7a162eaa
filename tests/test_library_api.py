"""The library as a peer's user meets it: ``analyze``, ``score`` and ``Engine`` name every
keyword of the option schema with its type and default (signature and docstring, generated, so
they cannot drift); models are ids, folders or already loaded transformers (model, tokenizer)
pairs; a semantic entropy below 0 is explained in the command line's report."""

from __future__ import annotations

import inspect

import pytest

import mars_demo
from mars_demo import options
from mars_demo.errors import OptionError
from mars_demo.models import given

QUESTION = "Which planet is known as the Red Planet?"


@pytest.mark.parametrize("func,names", [
    (mars_demo.analyze, options.MODEL_FIELDS + options.REQUEST_FIELDS),
    (mars_demo.Engine, options.MODEL_FIELDS + options.REQUEST_FIELDS),
    (mars_demo.score, options.MODEL_FIELDS + options.SCORING_FIELDS + ("prompt",)),
])
def test_every_keyword_is_named_with_its_type_range_and_default(func, names):
    params = inspect.signature(func).parameters
    for name in names:
        opt = options.OPTIONS[name]
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert params[name].default == opt.default
        assert params[name].annotation == options.type_of(opt)
    doc = inspect.getdoc(func.__init__ if inspect.isclass(func) else func)
    assert options.KEYWORDS_LINE not in doc
    for name in names:
        line = next(x for x in doc.splitlines() if x.strip().startswith(f"{name} ("))
        assert options.OPTIONS[name].help in line or name in options.GIVEN_MODELS
        assert "default: " in line
    assert ("samples (int): sampled answers (B in the paper); allowed: 1 to 20; default: 5."
            in doc) == ("samples" in names)


def test_the_return_types_are_named():
    assert inspect.signature(mars_demo.analyze).return_annotation == "AnalysisResult"
    assert inspect.signature(mars_demo.score).return_annotation == "AnalysisResult"
    assert "Returns:" in mars_demo.analyze.__doc__ and "Returns:" in mars_demo.score.__doc__


def _pair(path, kind):
    import transformers

    model = getattr(transformers, kind).from_pretrained(str(path))
    return model, transformers.AutoTokenizer.from_pretrained(str(path))


def test_loaded_transformers_objects_give_the_same_analysis(tiny_models, tiny_settings):
    llm = _pair(tiny_models["llm"], "AutoModelForCausalLM")
    importance = _pair(tiny_models["importance"], "AutoModelForTokenClassification")
    nli = _pair(tiny_models["nli"], "AutoModelForSequenceClassification")
    asked = dict(samples=3, max_new_tokens=6, seed=1)
    by_folder = mars_demo.analyze(QUESTION, llm=tiny_settings.llm,
                                  importance=tiny_settings.importance, nli=tiny_settings.nli,
                                  **asked)
    by_object = mars_demo.analyze(QUESTION, llm=llm, importance=importance, nli=nli, **asked)
    assert by_object.greedy.text == by_folder.greedy.text
    assert [a.text for a in by_object.samples] == [a.text for a in by_folder.samples]
    assert by_object.uncertainty.semantic_entropy.mars == pytest.approx(
        by_folder.uncertainty.semantic_entropy.mars, abs=1e-5)
    assert by_object.settings["llm"] == f"Qwen2ForCausalLM({tiny_models['llm']})"
    assert by_object.settings["nli"] == f"{type(nli[0]).__name__}({tiny_models['nli']})"
    engine = mars_demo.Engine(llm=llm, importance=importance, nli=nli, **asked)
    assert engine.settings.llm == by_object.settings["llm"]  # the same pair, the same id
    assert engine.analyze(QUESTION).greedy.text == by_folder.greedy.text


def test_a_wrong_pair_is_refused_with_the_reason(tiny_models):
    llm = _pair(tiny_models["llm"], "AutoModelForCausalLM")
    with pytest.raises(OptionError, match="is not a MARS importance model: it has"):
        mars_demo.Engine(importance=llm)
    with pytest.raises(OptionError, match="a loaded transformers \\(model, tokenizer\\) pair; "
                                          "got tuple"):
        mars_demo.Engine(llm=("a", "b"))
    with pytest.raises(OptionError, match="only llm, importance, nli can be given"):
        given.give("similarity", llm)


def test_a_negative_semantic_entropy_is_explained_in_the_report(tiny_settings):
    import dataclasses

    from mars_demo.cli import SE_NEGATIVE, format_report
    from mars_demo.engine import Engine

    result = Engine(tiny_settings.replace(samples=3, max_new_tokens=6)).analyze(QUESTION)
    u = result.uncertainty
    positive = dataclasses.replace(u, semantic_entropy=dataclasses.replace(
        u.semantic_entropy, length_normalized=0.4, mars=0.3))
    negative = dataclasses.replace(u, semantic_entropy=dataclasses.replace(
        u.semantic_entropy, length_normalized=0.2, mars=-0.1))
    assert SE_NEGATIVE not in format_report(dataclasses.replace(result, uncertainty=positive),
                                            details=True)
    report = format_report(dataclasses.replace(result, uncertainty=negative), details=True)
    lines = report.splitlines()
    # the details' table of both scorings (the first screen's line has its scale beside it)
    at = max(i for i, x in enumerate(lines) if x.startswith("  Semantic entropy  "))
    assert lines[at + 1] == SE_NEGATIVE
