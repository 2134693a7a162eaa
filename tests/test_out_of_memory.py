"""Running out of memory during an analysis: reported with advice, the memory released (after the
failing frames let go of their tensors), and the next request works; other errors are not
taken for memory.
"""

from __future__ import annotations

import weakref

import pytest
import torch
from forced_answers import QUESTION, check_result, forced, loaded_engine

from mars_demo.errors import AnalysisOutOfMemory
from mars_demo.models import registry


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return loaded_engine(tiny_settings)


@pytest.mark.parametrize(
    "make_error",
    [
        lambda: torch.cuda.OutOfMemoryError("boom"),  # recognised by type, whatever its text
        lambda: RuntimeError("CUDA error: out of memory"),
        MemoryError,
    ],
    ids=["OutOfMemoryError", "RuntimeError", "MemoryError"],
)
@pytest.mark.parametrize("where", ["importance", "llm"])
def test_out_of_memory_during_analysis_is_reported_released_and_recovered(
    engine, monkeypatch, make_error, where
):
    held: list[weakref.ref] = []
    freed = []  # per call of free_memory: were the failing frame's tensors already dropped?
    monkeypatch.setattr(registry, "free_memory", lambda: freed.append(held[0]() is None))
    target = engine.models.importance.model if where == "importance" else engine.models.llm
    name = "forward" if where == "importance" else "generate_rows"
    original = getattr(target, name)
    calls = {"n": 0}

    def fail_once(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            activations = torch.ones(1024, 256)  # memory the failing frame holds
            held.append(weakref.ref(activations))
            raise make_error()
        return original(*args, **kwargs)

    if where == "importance":  # make sure there are words to score
        llm = engine.models.llm
        monkeypatch.setattr(llm, "generate_rows", forced(llm, "Mars", "Mars is red"))
        target = engine.models.importance.model
        original = getattr(target, name)
    monkeypatch.setattr(target, name, fail_once)
    s = engine.settings.replace(samples=3, max_new_tokens=4)
    with pytest.raises(AnalysisOutOfMemory, match="Ran out of memory.*released.*fewer samples"):
        engine.analyze(QUESTION, s)
    # Caches are emptied only after the failing frames let go of their tensors, even while the
    # exception is still alive (a UI may keep it to show it).
    assert freed == [True]
    check_result(engine.analyze(QUESTION, s), QUESTION)  # the next request works


def test_other_runtime_errors_are_not_reported_as_memory(engine, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(engine.models.importance.model, "forward", broken)
    monkeypatch.setattr(engine.models.llm, "generate_rows", forced(engine.models.llm, "Mars", "Mars"))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        engine.analyze(QUESTION)
