"""Answers a visitor pastes ("Score your own answers" on the page, the ``/score`` API): read
within the page's limits, with a message saying what to fix for anything else."""

from __future__ import annotations

import json
from typing import Any

from mars_demo import texts
from mars_demo.answers import AnswerSet
from mars_demo.settings import OptionError, clean_question

OWN_MAX_SAMPLES = 20  # sampled answers pasted on the page
OWN_MAX_CHARS = 20_000  # all pasted answers together (or the answer-set JSON)


def pasted_answers(question: Any, greedy: Any, samples: Any, answer_json: Any) -> AnswerSet:
    """The answer set a visitor pasted: the JSON box if filled, else the question and the
    answer boxes (one sample per line). Raises OptionError with what to fix."""
    if isinstance(answer_json, str) and answer_json.strip():
        if len(answer_json) > OWN_MAX_CHARS:
            raise OptionError(texts.OWN_TOO_LONG.format(size=len(answer_json),
                                                        limit=OWN_MAX_CHARS))
        try:
            data = json.loads(answer_json)
        except (ValueError, RecursionError) as err:  # ValueError: bad JSON, or an integer of
            # more digits than Python converts (4300)
            raise OptionError(texts.OWN_BAD_JSON.format(error=str(err)[:120])) from err
        if isinstance(data, dict) and not data.get("question") and isinstance(question, str):
            data["question"] = question
        answers = AnswerSet.from_dict(data)
    else:
        greedy = greedy if isinstance(greedy, str) else ""
        samples = samples if isinstance(samples, str) else ""
        size = len(greedy) + len(samples)
        if size > OWN_MAX_CHARS:
            raise OptionError(texts.OWN_TOO_LONG.format(size=size, limit=OWN_MAX_CHARS))
        lines = [line.strip() for line in samples.splitlines() if line.strip()]
        if not greedy.strip():
            raise OptionError(texts.OWN_NO_GREEDY)
        if not lines:
            raise OptionError(texts.OWN_NO_SAMPLES)
        answers = AnswerSet.from_dict(
            {"question": question, "greedy": greedy.strip(), "samples": lines})
    if len(answers.samples) > OWN_MAX_SAMPLES:
        raise OptionError(texts.OWN_TOO_MANY.format(limit=OWN_MAX_SAMPLES,
                                                    count=len(answers.samples)))
    answers.question = clean_question(answers.question)
    return answers
