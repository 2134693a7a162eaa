"""The library as lm-polygraph's and TruthTorchLM's users hold it: chat ``messages`` (a system
prompt kept in the record), an answer's tokens with their probability, weights and phrase in one
call, ``result.report()``, :class:`~mars_demo.errors.OptionError` naming an unknown keyword from
every public call, and a short ``repr``."""

from __future__ import annotations

import math

import pytest

import mars_demo
from mars_demo.engine import Engine
from mars_demo.errors import OptionError
from mars_demo.result import AnalysisResult

QUESTION = "Which planet is known as the Red Planet?"
SYSTEM = "You are a terse astronomer. Answer in three words."
MESSAGES = [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "  Which planet is\u200b known as the Red Planet? "}]


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return Engine(tiny_settings.replace(samples=3, max_new_tokens=6))


@pytest.fixture(scope="module")
def chatted(engine):
    return engine.analyze(messages=MESSAGES)


def test_messages_give_the_chat_prompt_and_the_record_keeps_them(chatted, engine, tiny_models):
    assert chatted.question == QUESTION  # the last message, cleaned once at the door
    assert chatted.messages == [MESSAGES[0], {"role": "user", "content": QUESTION}]
    assert SYSTEM in chatted.prompt and chatted.settings["prompt"] == "chat"
    # the chat prompt the tokenizer's template renders, with the caller's system prompt in place
    # of the default instruction
    from mars_demo.models.prompts import CHAT_SYSTEM

    assert CHAT_SYSTEM not in chatted.prompt
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_models["llm"]))
    assert chatted.prompt == tokenizer.apply_chat_template(
        chatted.messages, tokenize=False, add_generation_prompt=True)
    data = chatted.to_dict()
    assert data["messages"] == chatted.messages
    again = mars_demo.score(data)  # a re-score keeps them
    assert again.messages == chatted.messages
    assert AnalysisResult.from_dict(data).messages == chatted.messages
    # a question alone records none
    assert "messages" not in engine.analyze(QUESTION).to_dict()


def test_the_same_question_with_other_messages_is_another_prompt(chatted, engine):
    plain = engine.analyze(QUESTION, prompt="chat")
    assert plain.prompt != chatted.prompt and SYSTEM not in plain.prompt


@pytest.mark.parametrize("kwargs, message", [
    ({"messages": [{"role": "user", "content": "Hi?"}], "question": "Hi?"}, "not both"),
    ({"messages": []}, "non-empty list"),
    ({"messages": [{"role": "system", "content": "x"}]}, "last message must be the question"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "message 1: role must be one of"),
    ({"messages": [{"role": "user", "content": 3}]}, "message 1: content must be text"),
    ({"messages": [{"role": "user", "content": "   "}]}, "question is empty"),
    ({"messages": MESSAGES, "prompt": "paper"}, "chat messages need the chat prompt"),
])
def test_bad_messages_are_refused_naming_what_is_wrong(engine, kwargs, message):
    with pytest.raises(OptionError, match=message):
        engine.analyze(**kwargs)


def test_the_greedy_tokens_come_with_their_weights_and_phrase(chatted):
    g = chatted.greedy
    rows = g.weighted_tokens()
    assert [r.text for r in rows] == [t.text for t in g.tokens]
    for i, row in enumerate(rows):
        assert row.probability == pytest.approx(math.exp(g.tokens[i].logprob))
        assert row.ln_weight == pytest.approx(1 / len(g.tokens))
        assert row.mars_weight == g.mars_weights[i]
        assert row.importance == g.token_importance[i]
        k = g.phrase_of_token[i]
        assert row.phrase_index == k and row.phrase == (g.phrases[k].text if k >= 0 else None)
    assert sum(r.mars_weight for r in rows) == pytest.approx(1.0)


def test_the_report_is_public(chatted):
    text = chatted.report()
    assert text.startswith(f"Question: {QUESTION}")
    assert f"Verdict: {chatted.verdict.badge}: " in text
    assert "Tokens by phrase" not in text and "Tokens by phrase" in chatted.report(details=True)


def test_a_short_repr(chatted):
    shown = repr(chatted)
    assert len(shown) < 300, shown
    assert shown.startswith("AnalysisResult(question='Which planet is known as the Red Planet?'")
    assert f"verdict={chatted.verdict.badge!r}" in shown and "samples=3" in shown
    assert len(repr(chatted.greedy)) < 200


def test_every_public_call_names_an_unknown_keyword(chatted, engine, tiny_settings):
    typo = {"normalisation": "softmax"}
    calls = [
        lambda: mars_demo.analyze(QUESTION, **typo),
        lambda: mars_demo.score(chatted.to_dict(), **typo),
        lambda: mars_demo.Engine(**typo),
        lambda: mars_demo.Settings(**typo),
        lambda: tiny_settings.replace(**typo),
        lambda: engine.analyze(QUESTION, **typo),
        lambda: engine.generate(QUESTION, **typo),
        lambda: engine.score(chatted, **typo),
        lambda: engine.rescore(chatted, **typo),
        lambda: engine.generate_many([QUESTION], **typo),
        lambda: engine.score_many([chatted], **typo),
    ]
    for call in calls:
        with pytest.raises(OptionError, match="unknown option\\(s\\) normalisation; known: "):
            call()


def test_a_call_may_change_an_option_by_name(chatted, engine):
    again = engine.rescore(chatted, normalization="softmax")
    assert again.settings["normalization"] == "softmax"
    assert engine.score(chatted, normalization="softmax").settings["normalization"] == "softmax"
    assert again.verdict is not None and again.verdict.evidence.samples == 3
