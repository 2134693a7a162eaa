"""``contains`` (the default judge): a reference appears in the answer as whole words, and the
answer claims it (not denied, not one of several candidates, not a point of comparison), after
SQuAD-style normalization with numbers read as digits. It reads short answers and sentences
alike ("The capital city of Australia is Canberra.").

Its helpers live here: :mod:`.answer_words` splits the words, :mod:`.containment` finds a
reference, :mod:`.claims` and :mod:`.candidates` say whether the answer claims it.
"""

from __future__ import annotations

from ..base import Judge, JudgeEntry, Verdict


class ContainsJudge(Judge):
    """A reference claimed by the answer as whole words (:func:`.containment.read`)."""

    name = "contains"

    def __call__(self, question, prediction, references):
        from .containment import read

        correct, why = read(question, prediction, references)
        return Verdict(correct, None, why)


JUDGE = JudgeEntry(
    "contains", "a reference claimed in the answer as whole words; reads sentences, numbers "
    "in words, denials, hedges", lambda options: ContainsJudge())
