"""Models that produce NaN or infinity: a clear error instead of NaN numbers, and the next request
works.
"""

from __future__ import annotations

import pytest
import torch
from forced_answers import QUESTION, check_result, forced, loaded_engine

from mars_demo.errors import InvalidModelOutput


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return loaded_engine(tiny_settings)


def test_nan_logits_give_a_clear_error_not_nan_numbers(engine, monkeypatch):
    llm = engine.models.llm
    inner = forced(llm, "Mars is red", "Mars")

    def nan_logits(*args, **kwargs):
        new_ids, logits = inner(*args, **kwargs)
        return new_ids, (logits[0],) + tuple(torch.full_like(x, float("nan")) for x in logits[1:])

    monkeypatch.setattr(llm, "generate_rows", nan_logits)
    with pytest.raises(InvalidModelOutput, match="NaN or infinity.*full precision"):
        engine.analyze(QUESTION)
    monkeypatch.setattr(llm, "generate_rows", inner)
    check_result(engine.analyze(QUESTION), QUESTION)


@pytest.mark.parametrize("part", ["importance", "nli"])
def test_non_finite_outputs_of_the_other_models_give_a_clear_error(engine, monkeypatch, part):
    model = getattr(engine.models, part).model
    original = model.forward

    def broken(*args, **kwargs):
        out = original(*args, **kwargs)
        out.logits[..., 0] = float("inf") if part == "nli" else float("nan")
        return out

    monkeypatch.setattr(engine.models.llm, "generate_rows", forced(engine.models.llm, "Mars", ["Mars", "Venus", "red"]))
    monkeypatch.setattr(model, "forward", broken)
    who = {"importance": "importance model", "nli": "NLI model"}[part]
    with pytest.raises(InvalidModelOutput, match=f"The {who} .* produced invalid outputs"):
        engine.analyze(QUESTION)
    monkeypatch.setattr(model, "forward", original)
    check_result(engine.analyze(QUESTION), QUESTION)
