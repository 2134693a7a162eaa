"""``em``: exact match after SQuAD's normalization (lowercase, punctuation removed, the
articles a/an/the removed, whitespace collapsed), against any reference."""

from __future__ import annotations

from .base import Judge, JudgeEntry, Verdict, exact_match


class ExactMatchJudge(Judge):
    name = "em"

    def __call__(self, question, prediction, references):
        return Verdict(any(exact_match(prediction, r) for r in references))


JUDGE = JudgeEntry("em", "SQuAD exact match", lambda options: ExactMatchJudge(),
                   whole_answer=True)
