"""The verdict on one answer, in words: what the sampled answers showed, and a calibrated chance
of being right where the page has a calibration.

The page says only what it observed (its first line, ``#mars-verdict``):

- how many of the sampled answers mean the same as the answer shown: the answer shown (the
  greedy one) is not clustered with the samples, so it is placed in the meaning cluster of the
  samples with the same words (:func:`same_words`); where none has them, in the cluster of the
  samples it entails, by the NLI model's verdicts of the answer against each sample that the
  analysis holds (``method_inputs["greedy_nli"]``, semantic density's pairs, computed with the
  free methods); none either way, and it is placed nowhere, which the verdict says;
- how many meanings the samples split into (their NLI clusters);
- whether MARS and length-normalized scoring find the same meaning the most probable (each
  cluster's share of the samples' probability mass, :meth:`AnalysisResult.cluster_masses`);
- with a calibration (``evaluate calibrate``) that covers the answer, its chance of being
  right and where the calibration was made.

A consistent answer is not a right one (a model can be consistently wrong); only the calibrated
chance speaks of being right. Pure Python over the result: no gradio, no models.

>>> Evidence(agreeing=5, samples=5, meanings=1, scorings_agree=True).level
'consistent'
>>> judge(Evidence(agreeing=1, samples=5, meanings=3, scorings_agree=True)).badge
'Unsure'
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from . import texts
from .result import AnalysisResult

#: fewer sampled answers than this are too few to speak of agreement
MIN_SAMPLES = 3
#: the levels, from the most to the least settled (CSS: .mars-verdict-<level>)
LEVELS = ("consistent", "mostly", "unsure", "few")


def same_words(a: str, b: str) -> bool:
    """Whether two answers have the same words: equal once case, Unicode form, runs of spaces and
    the punctuation at either end are set aside ("Mars." and " mars" are; "Mars" and "It is Mars"
    are not: that needs the NLI model).

    >>> same_words("Mars.", " mars"), same_words("Mars", "It is Mars")
    (True, False)
    """
    return _words(a) == _words(b) and bool(_words(a))


def _words(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"\s+", " ", text).strip()
    return text.strip(" .,;:!?\"'()[]")


@dataclass(frozen=True)
class Evidence:
    """What the samples showed about one answer. ``agreeing``: the samples in the meaning cluster
    of the answer shown (None: no sample has its words, so it is in no cluster); ``samples``:
    how many were sampled; ``meanings``: their clusters; ``scorings_agree``: whether MARS and
    length-normalized scoring give the most probability mass to the same cluster;
    ``placed_by``: how the answer was placed, "words" (samples with its words), "nli" (samples
    it entails) or "" (nowhere, or by nothing the analysis holds)."""

    agreeing: int | None
    samples: int
    meanings: int
    scorings_agree: bool
    placed_by: str = "words"

    @property
    def level(self) -> str:
        """"consistent" (every sample means the same as the answer), "mostly" (more than half
        do, and both scorings favour one meaning), "unsure" (fewer, no sample has its words, or
        the scorings favour different meanings) or "few" (under :data:`MIN_SAMPLES` samples)."""
        if self.samples < MIN_SAMPLES:
            return "few"
        if self.agreeing == self.samples:
            return "consistent"
        if self.agreeing is not None and 2 * self.agreeing > self.samples and self.scorings_agree:
            return "mostly"
        return "unsure"


def entailed_samples(result: AnalysisResult) -> list[int] | None:
    """The samples whose meaning the greedy answer entails, by the NLI verdicts of "question
    greedy answer" against "question sample" that the analysis holds
    (``method_inputs["greedy_nli"]``: (entailment, neutral, contradiction) per sample; entailed
    where entailment is the most probable). None where the analysis holds no such verdicts for
    these very answers."""
    entry = result.method_inputs.get("greedy_nli")
    texts_ = [s.text for s in result.samples]
    if (not isinstance(entry, dict) or entry.get("greedy") != result.greedy.text
            or entry.get("answers") != texts_):
        return None
    probabilities = entry.get("probabilities")
    if not isinstance(probabilities, list) or len(probabilities) != len(texts_):
        return None
    return [b for b, p in enumerate(probabilities)
            if isinstance(p, list) and len(p) == 3 and p[0] == max(p)]


def evidence(result: AnalysisResult) -> Evidence:
    """The :class:`Evidence` of an analysis: its greedy answer placed among its samples'
    meaning clusters, in that of the samples with its words (:func:`same_words`) or else in
    the cluster of most of the samples it entails (:func:`entailed_samples`), and the
    clusters' probability mass under each scoring."""
    samples = result.samples
    ids = list(result.cluster_ids)[: len(samples)]
    placed_by = "words"
    placed = {ids[b] for b, s in enumerate(samples[: len(ids)])
              if same_words(s.text, result.greedy.text)}
    if not placed:
        entailed = [b for b in entailed_samples(result) or () if b < len(ids)]
        counts = Counter(ids[b] for b in entailed)
        # the cluster that most of them fall in (a tie: the cluster first seen)
        placed = {max(counts, key=counts.get)} if counts else set()
        placed_by = "nli" if placed else ""
    agreeing = sum(1 for c in ids if c in placed) if placed else None
    masses = {key: result.cluster_masses(key) for key in ("length_normalized", "mars")}
    tops = {key: max(m, key=m.get) if m else None for key, m in masses.items()}
    return Evidence(agreeing=agreeing, samples=len(samples), meanings=len(set(ids)),
                    scorings_agree=tops["length_normalized"] == tops["mars"],
                    placed_by=placed_by)


@dataclass(frozen=True)
class Verdict:
    """The verdict as the page shows it: a ``badge`` (one or two words), one ``sentence`` of
    what was observed, the ``level`` (:data:`LEVELS`) and, with a calibration that covers the
    answer, ``chance`` (of being right, 0 to 1) and its line ``calibrated``."""

    level: str
    badge: str
    sentence: str
    evidence: Evidence
    chance: float | None = None
    calibrated: str = ""

    @property
    def text(self) -> str:
        """The verdict in one line: "Consistent: 5 of 5 sampled answers mean the same as this
        answer. About 82% likely right (calibrated on facts.jsonl, 40 questions).\""""
        return " ".join(part for part in (f"{self.badge}: {self.sentence}", self.calibrated)
                        if part)


def _plural(count: int, one: str, many: str) -> str:
    return one if count == 1 else many


def judge(found: Evidence, chance: float | None = None, calibrated_on: str = "",
          n: int | None = None) -> Verdict:
    """The :class:`Verdict` of ``found``; ``chance`` (0 to 1), ``calibrated_on`` (the data set)
    and ``n`` (its questions) only where a calibration covers the answer."""
    level = found.level
    b, k, a = found.samples, found.meanings, found.agreeing
    answers = _plural(b, texts.VERDICT_ANSWER, texts.VERDICT_ANSWERS)
    meanings = _plural(k, texts.VERDICT_MEANING, texts.VERDICT_MEANINGS)
    others = max(k - 1, 0)
    if a is None:
        sentence = texts.VERDICT_UNPLACED.format(samples=b, answers=answers, meanings=k,
                                                 meaning_word=meanings)
    elif a == b:
        sentence = texts.VERDICT_ALL.format(agreeing=a, samples=b, answers=answers,
                                            mean=_plural(a, "means", "mean"))
    elif 2 * a > b:
        sentence = texts.VERDICT_SOME.format(
            agreeing=a, samples=b, answers=answers, mean=_plural(a, "means", "mean"),
            others=others, other_word=_plural(others, "meaning", "meanings"))
    else:
        sentence = texts.VERDICT_SPLIT.format(meanings=k, agreeing=a, samples=b,
                                              mean=_plural(a, "means", "mean"))
    if not found.scorings_agree:
        sentence += texts.VERDICT_SCORINGS_DISAGREE
    calibrated = ""
    if chance is not None:
        calibrated = texts.VERDICT_CALIBRATED.format(
            percent=round(100 * chance), data=calibrated_on,
            questions=f", {n} questions" if n else "")
    return Verdict(level=level, badge=texts.VERDICT_BADGES[level], sentence=sentence,
                   evidence=found, chance=chance, calibrated=calibrated)


def verdict(result: AnalysisResult, chance: float | None = None, calibrated_on: str = "",
            n: int | None = None) -> Verdict:
    """The verdict on ``result``'s greedy answer (:func:`evidence`, then :func:`judge`)."""
    return judge(evidence(result), chance, calibrated_on, n)
