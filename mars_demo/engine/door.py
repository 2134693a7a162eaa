"""The engine's door: what enters it is checked and cleaned once, here, whichever call brings it
(:meth:`~mars_demo.engine.Engine.analyze`, :meth:`~mars_demo.engine.Engine.score`, their
batched forms, the module-level :func:`~mars_demo.engine.analyze` and
:func:`~mars_demo.engine.score`): a question or chat messages, an answer set in any of its
forms, a saved analysis to score again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..answers import AnswerSet
from ..errors import AnswerSetError, OptionError
from ..messages import parse_messages
from ..result import AnalysisResult
from ..settings import clean_question


def door(question: Any, messages: Any = None) -> tuple[str, list[dict[str, str]] | None]:
    """The engine's door: a question, or chat messages whose last one is the question, checked
    and cleaned once (:func:`~mars_demo.settings.clean_question`,
    :func:`~mars_demo.messages.parse_messages`); returns the question and the messages with the
    cleaned question last (None for a question alone). Raises ``OptionError``."""
    if messages is None:
        return clean_question(question), None
    if question is not None:
        raise OptionError("give the question or messages, not both (the question is the last "
                          "message)")
    given = parse_messages(messages)
    question = clean_question(given[-1]["content"])
    return question, [*given[:-1], {"role": "user", "content": question}]


def at_door(answers: AnswerSet) -> AnswerSet:
    """An answer set with its question cleaned (:func:`door`), as it enters the engine."""
    question, messages = (door(None, answers.messages) if answers.messages
                          else door(answers.question))
    if question == answers.question and messages == answers.messages:
        return answers
    return dataclasses.replace(answers, question=question, messages=messages)


def as_answer_set(answers: Any) -> AnswerSet:
    """An :class:`AnswerSet` from an answer set, its JSON form or an :class:`AnalysisResult`."""
    if isinstance(answers, AnswerSet):
        return answers
    if isinstance(answers, AnalysisResult):
        return answers.answer_set()
    return AnswerSet.from_dict(answers)


def saved_analysis(answers: Any) -> AnalysisResult | None:
    """``answers`` as the saved analysis it is (an :class:`AnalysisResult`, or its JSON: a dict
    with ``nli``, ``cluster_ids`` and ``uncertainty``), else None: a bare answer set.

    Raises:
        AnswerSetError: an analysis' JSON that cannot be read as one.
    """
    if isinstance(answers, AnalysisResult):
        return answers
    if not isinstance(answers, dict) or not {"nli", "cluster_ids", "uncertainty"} <= set(answers):
        return None
    try:
        return AnalysisResult.from_dict(answers)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise AnswerSetError(f"this saved analysis cannot be read ({type(err).__name__}: {err}); "
                             "give its question, greedy answer and samples alone to score them "
                             "afresh") from err
