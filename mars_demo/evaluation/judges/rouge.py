"""``rouge``: ROUGE-L F-measure (the ``rouge-score`` package, no stemming) >= ``threshold``
(default 0.3, as in Kuhn et al., 2023) for the best reference. Note: rouge-score's tokenizer
keeps only ASCII letters and digits, so it suits English answers."""

from __future__ import annotations

from .base import Judge, JudgeEntry, Verdict, check_threshold

DEFAULT_THRESHOLD = 0.3


class RougeJudge(Judge):
    name = "rouge"

    def __init__(self, threshold: float = DEFAULT_THRESHOLD) -> None:
        from rouge_score import rouge_scorer

        self.threshold = check_threshold(threshold)
        self._scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)

    def __call__(self, question, prediction, references):
        best = max(
            (self._scorer.score(r, prediction)["rougeL"].fmeasure for r in references),
            default=0.0,
        )
        return Verdict(best >= self.threshold, float(best))


JUDGE = JudgeEntry("rouge", "ROUGE-L >= threshold",
                   lambda options: RougeJudge(options.threshold),
                   threshold=DEFAULT_THRESHOLD, whole_answer=True, lenient=True)
