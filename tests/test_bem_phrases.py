"""BEM importance (the paper's Algorithm 1) on hard answers: phrases never overlap, unknown
characters and truncation are reported.
"""

from __future__ import annotations

import pytest
from forced_answers import QUESTION, check_result, forced, loaded_engine

from mars_demo.models.importance import BEMImportance


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return loaded_engine(tiny_settings)


class _Chunker:
    """A flair chunker stand-in that chunks the given token texts."""

    label_type = "np"

    def __init__(self, chunked):
        self.chunked = set(chunked)

    def predict(self, sentence):
        for i, token in enumerate(sentence):
            if token.text in self.chunked:
                sentence[i : i + 1].add_label(self.label_type, "NP")


def test_bem_phrases_never_overlap_when_flair_splits_inside_a_word():
    bem = BEMImportance.__new__(BEMImportance)
    # flair splits "don't" into "do" "n't"; the importance model's words are "don" "'" "t"
    bem.chunker = _Chunker({"n't", "know"})
    spans = bem.chunk("I don't know")
    assert spans == [(0, 1), (2, 4), (4, 7), (8, 12)]
    assert all(b <= c for (_, b), (c, _) in zip(spans, spans[1:]))


def test_bem_analysis_with_hard_answers(engine, monkeypatch, tiny_settings):
    s = engine.settings.replace(importance_method="bem")
    answers = ["I don't know", "", "火星 ☃", "?!"]
    llm = engine.models.llm
    monkeypatch.setattr(llm, "generate_rows", forced(llm, "Mars", answers[:3]))
    r = engine.analyze(QUESTION, s)
    check_result(r)
    assert [a.text for a in r.samples] == answers[:3]


def test_bem_reports_unknown_characters_and_truncation(engine, monkeypatch):
    s = engine.settings.replace(importance_method="bem", max_new_tokens=400)
    long = " ".join(["planet"] * 400)
    llm = engine.models.llm
    monkeypatch.setattr(llm, "generate_rows", forced(llm, "Mars", ["火星 ☃", long, "Mars"]))
    r = engine.analyze(QUESTION, s)
    check_result(r)
    unknown = [w for w in r.warnings if "answer-equivalence model does not know" in w]
    cut = [w for w in r.warnings if "answer-equivalence model reads at most 512" in w]
    assert len(unknown) == 1 and unknown[0].startswith("Sample 1:")
    assert len(cut) == 1 and cut[0].startswith("Sample 2:")
