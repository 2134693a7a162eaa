"""Analyses from several threads and engines at once are serialized: the models are never used by
two requests at the same time, and every request gets its own result.
"""

from __future__ import annotations

import threading
import time

import pytest
from forced_answers import check_result, loaded_engine

from mars_demo.engine import Engine


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return loaded_engine(tiny_settings)


def test_analyses_are_serialized(engine, monkeypatch):
    active, peak = [0], [0]
    lock = threading.Lock()
    llm_type = type(engine.models.llm)
    original = llm_type.generate  # the model call two analyses must never share

    def tracked(self, *args, **kwargs):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            time.sleep(0.05)
            return original(self, *args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(llm_type, "generate", tracked)
    s = engine.settings.replace(samples=2, max_new_tokens=4)
    questions = ["Who wrote Hamlet?", "火星是什么颜色？", "What is the capital of France?"]
    results: dict[str, object] = {}
    errors: list[BaseException] = []

    def ask(q):
        try:
            results[q] = Engine(s).analyze(q) if q.startswith("W") else engine.analyze(q, s)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=ask, args=(q,)) for q in questions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert peak[0] == 1
    for q in questions:
        check_result(results[q], q)
