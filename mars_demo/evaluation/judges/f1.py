"""``f1``: SQuAD's token F1 (bag of normalized words) >= ``threshold`` (default 0.5) for the
best reference."""

from __future__ import annotations

from .base import Judge, JudgeEntry, Verdict, check_threshold, token_f1

DEFAULT_THRESHOLD = 0.5


class F1Judge(Judge):
    name = "f1"

    def __init__(self, threshold: float = DEFAULT_THRESHOLD) -> None:
        self.threshold = check_threshold(threshold)

    def __call__(self, question, prediction, references):
        best = max((token_f1(prediction, r) for r in references), default=0.0)
        return Verdict(best >= self.threshold, best)


JUDGE = JudgeEntry("f1", "token F1 >= threshold", lambda options: F1Judge(options.threshold),
                   threshold=DEFAULT_THRESHOLD, whole_answer=True, lenient=True)
