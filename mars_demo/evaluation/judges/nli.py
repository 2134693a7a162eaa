"""``nli``: the loaded NLI model (the engine's, :meth:`NLIJudge.load`) reads "question +
answer" and "question + reference" and accepts when each entails the other for some reference
(the bidirectional entailment of Kuhn et al., 2023, and Farquhar et al., 2024), for paraphrases
no lexical rule catches. An answer equal to a reference after SQuAD's normalization is accepted
without the model; the references of a batch are judged in one batched pass."""

from __future__ import annotations

from typing import Any

from .base import Judge, JudgeEntry, Verdict, normalize_answer


class NLIJudge(Judge):
    """Bidirectional entailment between "question + reference" and "question + answer".

    ``nli``: an object with ``verdicts(pairs, truncated=None)`` returning "entailment",
    "neutral" or "contradiction" per (premise, hypothesis) pair and a ``model_id`` (the
    engine's :class:`~mars_demo.models.nli.NLIModel`; a fake in tests).
    """

    name = "nli"

    def __init__(self, nli: Any) -> None:
        self.nli = nli

    @classmethod
    def load(cls, settings: Any) -> "NLIJudge":
        """The judge on the NLI model the engine loads for ``settings`` (the same cached
        object; nothing else is loaded)."""
        from ...models.registry import nli_for

        return cls(nli_for(settings))

    def __call__(self, question, prediction, references):
        return self.judge_many([(question, prediction, references)])[0]

    def judge_many(self, items):
        pairs: list[tuple[str, str]] = []
        asked: list[list[tuple[str, int]]] = []  # per item: (reference, index of its pair)
        for question, prediction, references in items:
            q = question.strip()
            mine = []
            for ref in references:
                if normalize_answer(ref) == normalize_answer(prediction):
                    mine.append((ref, -1))  # the same words: no model call
                    continue
                mine.append((ref, len(pairs)))
                pairs += [(f"{q} {ref}", f"{q} {prediction}"), (f"{q} {prediction}", f"{q} {ref}")]
            asked.append(mine)
        truncated: list[int] = []
        labels = self.nli.verdicts(pairs, truncated) if pairs else []
        cut = set(truncated)
        out = []
        for mine in asked:
            seen = []
            verdict = None
            for ref, k in mine:
                if k < 0:
                    verdict = Verdict(True, None, f"{ref!r}: the same words")
                    break
                both = (labels[k], labels[k + 1])
                note = " (cut to fit the NLI model)" if {k, k + 1} & cut else ""
                seen.append(f"{ref!r}: {both[0]} / {both[1]}{note}")
                if both == ("entailment", "entailment"):
                    verdict = Verdict(True, None, seen[-1])
                    break
            out.append(verdict or Verdict(False, None, "; ".join(seen) or "no reference"))
        return out

    def describe(self):
        return {"name": self.name, "threshold": None, "model": self.nli.model_id}


def _build(options) -> NLIJudge:
    return NLIJudge(options.nli) if options.nli is not None else NLIJudge.load(options.settings)


JUDGE = JudgeEntry("nli", "bidirectional entailment by the --nli model", _build, needs=("nli",))
