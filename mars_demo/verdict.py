"""The verdict on one answer, in words: what the sampled answers showed, and a calibrated chance
of being right where the page has a calibration.

The page says only what it observed (its first line, ``#mars-verdict``):

- how many of the sampled answers mean the same as the answer shown, by the NLI model (the
  sentence says whose reading it is): the answer shown (the greedy one) is not clustered with
  the samples, so it is placed in the meaning cluster of the samples with the same words
  (:func:`same_words`); where none has them, in the cluster of the samples it entails, by the
  NLI model's verdicts of the answer against each sample that the analysis holds
  (``method_inputs["greedy_nli"]``, semantic density's pairs, computed with the free methods);
  none either way, and it is placed nowhere, which the verdict says. That placement
  (:class:`Placement`) is made once, recorded in the verdict's evidence, and read by every
  view that shows it (:func:`placement`: the answer's fold, the clusters chart and the samples
  list of the page), so that none can place the answer otherwise;
- how many meanings the samples split into (their NLI clusters);
- whether MARS and length-normalized scoring find the same meaning the most probable (each
  cluster's share of the samples' probability mass, :meth:`AnalysisResult.cluster_masses`);
- with a calibration (``evaluate calibrate``) that covers the answer, its chance of being
  right and where the calibration was made.

- how sure the model was of the words that matter: the greedy answer's MARS score as a
  probability per token (``exp`` of the importance-weighted mean log-probability), so that a
  made-up answer the model repeats reads otherwise than a well-known one.

A consistent answer is not a right one (a model can be consistently wrong): without a
calibration the sentence says so and the page shows it in a neutral tone (:attr:`Verdict.tone`);
only a calibrated chance of being right gets a tone that reads as trust. Where the page serves an
evaluation run, what that run says of the answers at the same level (:func:`run_record`): their
share of right answers beside the run's, where the run tells the levels apart, or else that it
cannot. Pure Python over the result: no gradio, no models.

The verdict is part of the analysis: the engine computes it once per result
(:func:`verdict`, with the engine's calibration and reference run where it has them) and keeps
it in :attr:`AnalysisResult.verdict <mars_demo.result.AnalysisResult.verdict>`, whose JSON
carries it (:meth:`Verdict.to_dict`); the command line, the library and the page read that
object and compute nothing of their own. This module reads the result by its fields alone (it
imports no :mod:`mars_demo.result`, which imports it).

>>> Evidence(agreeing=5, samples=5, meanings=1, scorings_agree=True).level
'consistent'
>>> judge(Evidence(agreeing=1, samples=5, meanings=3, scorings_agree=True)).badge
'Unsure'
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from . import texts
from .core.intervals import overlap, wilson

#: fewer sampled answers than this are too few to speak of agreement
MIN_SAMPLES = 3
#: the levels, from the most to the least settled
LEVELS = ("consistent", "mostly", "unsure", "few")
#: the model's sureness of the words that matter (a probability per token): from this, "sure";
#: from FAIRLY_SURE, "fairly sure"; below, "unsure"
SURE, FAIRLY_SURE = 0.8, 0.5
#: a calibrated chance of being right from this is "likely" (a tone that reads as trust), from
#: MAYBE "maybe", below "unlikely"
LIKELY, MAYBE = 0.8, 0.5
#: a served run says how the answers at a level fared only where it holds at least this many
#: answers at that level and as many at the others: with 10, a share's 95% Wilson interval is
#: still about 50 points wide at 50% (at 5, about 65), so fewer could tell two levels apart
#: only where they differ almost wholly, and a share of a handful of answers reads as more than
#: it is
MIN_LEVEL_ANSWERS = 10


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
class Placement:
    """Where the greedy answer falls among the samples' meaning clusters: the one account of it
    that the verdict, the answer's fold, the clusters chart and the samples list all read
    (:func:`placement`). ``clusters``: the clusters it is placed in (empty: none);
    ``matched``: the samples that placed it (those with its words, or those it entails);
    ``members``: every sample in those clusters (the samples that mean the same, by the NLI
    model); ``by``: "words", "nli" or "" (placed nowhere)."""

    clusters: tuple[int, ...]
    matched: tuple[int, ...]
    members: tuple[int, ...]
    by: str


def placement(result: Any) -> Placement:
    """Where the greedy answer of ``result`` falls, as its verdict recorded it (the page's
    views read this, so that none places the answer otherwise than the verdict); for a result
    without a verdict, or one made before the placement was recorded, :func:`place_answer`."""
    found = getattr(result, "verdict", None)
    if found is not None and found.evidence.clusters is not None:
        e = found.evidence
        return Placement(e.clusters, e.matched, e.members, e.placed_by)
    return place_answer(result)


def place_answer(result: Any) -> Placement:
    """The greedy answer of ``result`` placed among its samples' meaning clusters: in that of
    the samples with its words (:func:`same_words`), or else in the cluster of most of the
    samples it entails (:func:`entailed_samples`; a tie: the cluster first seen); nowhere when
    neither places it."""
    samples = result.samples
    ids = list(result.cluster_ids)[: len(samples)]
    by = "words"
    matched = [b for b, s in enumerate(samples[: len(ids)])
               if same_words(s.text, result.greedy.text)]
    clusters = sorted({ids[b] for b in matched})
    if not clusters:
        matched = [b for b in entailed_samples(result) or () if b < len(ids)]
        counts = Counter(ids[b] for b in matched)
        clusters = [max(counts, key=counts.get)] if counts else []
        by = "nli" if clusters else ""
    members = tuple(b for b, c in enumerate(ids) if c in clusters)
    return Placement(tuple(clusters), tuple(matched) if clusters else (), members, by)


@dataclass(frozen=True)
class Evidence:
    """What the samples showed about one answer. ``agreeing``: the samples in the meaning cluster
    of the answer shown (None: it is in no cluster); ``samples``: how many were sampled;
    ``meanings``: their clusters; ``scorings_agree``: whether MARS and length-normalized
    scoring give the most probability mass to the same cluster; ``placed_by``: how the answer
    was placed, "words" (samples with its words), "nli" (samples it entails) or "" (nowhere,
    or by nothing the analysis holds); ``sureness``: the answer's MARS score as a probability
    per token (None: not known); ``clusters``, ``matched`` and ``members``: its
    :class:`Placement` (None: a verdict made before the placement was recorded)."""

    agreeing: int | None
    samples: int
    meanings: int
    scorings_agree: bool
    placed_by: str = "words"
    sureness: float | None = None
    clusters: tuple[int, ...] | None = None
    matched: tuple[int, ...] = ()
    members: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("clusters", "matched", "members"):  # JSON lists, as read back
            out[key] = None if out[key] is None else list(out[key])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Evidence":
        read = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        for key in ("clusters", "matched", "members"):
            if read.get(key) is not None:
                read[key] = tuple(int(b) for b in read[key])
        return cls(**read)

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


def entailed_samples(result: Any) -> list[int] | None:
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


def evidence(result: Any) -> Evidence:
    """The :class:`Evidence` of an analysis: its greedy answer's place among its samples'
    meaning clusters (:func:`place_answer`, which the evidence records), and the
    clusters' probability mass under each scoring."""
    samples = result.samples
    ids = list(result.cluster_ids)[: len(samples)]
    placed = place_answer(result)
    masses = {key: result.cluster_masses(key) for key in ("length_normalized", "mars")}
    tops = {key: max(m, key=m.get) if m else None for key, m in masses.items()}
    score = result.greedy.scores.mars
    return Evidence(agreeing=len(placed.members) if placed.clusters else None,
                    samples=len(samples), meanings=len(set(ids)),
                    scorings_agree=tops["length_normalized"] == tops["mars"],
                    placed_by=placed.by,
                    sureness=math.exp(score) if math.isfinite(score) else None,
                    clusters=placed.clusters, matched=placed.matched, members=placed.members)


@dataclass(frozen=True)
class LevelRecord:
    """How answers at one verdict level fared in an evaluation run: ``right`` of ``n``, with
    the 95% interval ``low``..``high`` of the share right, on the run named ``run``."""

    level: str
    right: int
    n: int
    low: float
    high: float
    run: str

    @property
    def share(self) -> float:
        return self.right / self.n if self.n else math.nan


@dataclass(frozen=True)
class Verdict:
    """The verdict on an answer: a ``badge`` (one or two words), one ``sentence`` in plain words
    (what was observed, how sure the model was and, without a calibration, that agreement is
    not correctness), the ``level`` (:data:`LEVELS`), the :class:`Evidence` it rests on, its
    ``tone`` (``neutral`` or ``caution`` without a calibration; ``likely``, ``maybe`` or
    ``unlikely`` from a calibrated chance) and, with a calibration that covers the answer,
    ``chance`` (of being right, 0 to 1) and its line ``calibrated``; with a reference run,
    ``record``, how answers at this level fared there. ``calibration``: where the chance was
    measured (the calibration's estimate: ``chance_correct``, the ``uncertainty`` it read,
    ``measure``, ``scoring``, ``data``, ``n``, ``accuracy``, ``auroc``, ``judge``...) or, for an
    answer the calibration does not cover, ``chance_correct`` None with the ``reason``; None
    without a calibration."""

    level: str
    badge: str
    sentence: str
    evidence: Evidence
    chance: float | None = None
    calibrated: str = ""
    record: str = ""
    calibration: dict[str, Any] | None = None

    @property
    def tone(self) -> str:
        if self.chance is None:
            return "caution" if self.level == "unsure" else "neutral"
        if self.chance >= LIKELY:
            return "likely"
        return "maybe" if self.chance >= MAYBE else "unlikely"

    @property
    def text(self) -> str:
        """The verdict in one line: badge, sentence, the calibrated chance and the run's record
        ("Consistent: By the NLI model, all 5 other tries mean the same as this answer: ...").
        """
        return " ".join(part for part in (f"{self.badge}: {self.sentence}", self.calibrated,
                                          self.record) if part)

    def to_dict(self) -> dict[str, Any]:
        """The verdict's JSON (the analysis' ``verdict``): its fields, with ``tone`` and
        ``text`` for readers that do not rebuild it."""
        out = {"level": self.level, "badge": self.badge, "sentence": self.sentence,
               "tone": self.tone, "text": self.text, "evidence": self.evidence.to_dict(),
               "chance": self.chance, "calibrated": self.calibrated, "record": self.record}
        if self.calibration is not None:
            out["calibration"] = dict(self.calibration)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Verdict":
        """:meth:`to_dict`'s object read back (``tone`` and ``text`` follow from the rest).
        Raises ``ValueError`` for an unknown level, ``KeyError`` or ``TypeError`` for a
        malformed one."""
        if data["level"] not in LEVELS:
            raise ValueError(f"verdict level must be one of {', '.join(LEVELS)}; "
                             f"got {str(data['level'])[:30]!r}")
        chance = data.get("chance")
        calibration = data.get("calibration")
        return cls(level=data["level"], badge=str(data["badge"]), sentence=str(data["sentence"]),
                   evidence=Evidence.from_dict(data["evidence"]),
                   chance=None if chance is None else float(chance),
                   calibrated=str(data.get("calibrated", "")),
                   record=str(data.get("record", "")),
                   calibration=dict(calibration) if isinstance(calibration, dict) else None)


def _plural(count: int, one: str, many: str) -> str:
    return one if count == 1 else many


def _agreement(found: Evidence) -> str:
    """What the sampled answers showed, in plain words."""
    b, k, a = found.samples, found.meanings, found.agreeing
    tries = _plural(b, texts.VERDICT_TRY, texts.VERDICT_TRIES)
    answers = _plural(k, texts.VERDICT_ANSWER, texts.VERDICT_ANSWERS)
    if found.level == "few":
        return texts.VERDICT_FEW.format(samples=b, tries=tries)
    if a is None:
        return texts.VERDICT_UNPLACED.format(samples=b, tries=tries, meanings=k, answers=answers)
    if a == b:
        template = texts.VERDICT_ALL_NLI if found.placed_by == "nli" else texts.VERDICT_ALL
        return template.format(agreeing=a, samples=b, tries=tries)
    if 2 * a > b:
        return texts.VERDICT_SOME.format(agreeing=a, samples=b, tries=tries, rest=b - a)
    return texts.VERDICT_SPLIT.format(meanings=k, agreeing=a, samples=b, tries=tries,
                                      answers=answers, mean=_plural(a, "means", "mean"))


def _sureness(found: Evidence) -> str:
    if found.sureness is None:
        return ""
    p = found.sureness
    template = (texts.VERDICT_SURE if p >= SURE else texts.VERDICT_FAIRLY_SURE
                if p >= FAIRLY_SURE else texts.VERDICT_UNSURE_WORDS)
    # never "0%" for a chance that is not none (a tiny model's words: 0.3%)
    return template.format(percent=f"{p:.0%}" if 0.005 <= p < 0.995
                           else ">99%" if p >= 0.995 else "<1%" if p > 0 else "0%")


def judge(found: Evidence, chance: float | None = None, calibrated_on: str = "",
          n: int | None = None, record: str = "", *,
          calibration: dict[str, Any] | None = None) -> Verdict:
    """The :class:`Verdict` of ``found``; ``chance`` (0 to 1), ``calibrated_on`` (the data set)
    and ``n`` (its questions) only where a calibration covers the answer (``calibration``: its
    estimate, or why it does not cover it); ``record``: what a reference run says of this
    level, in words (:func:`run_record`)."""
    level = found.level
    parts = [_agreement(found)]
    if not found.scorings_agree and level != "few":
        parts.append(texts.VERDICT_SCORINGS_DISAGREE)
    parts.append(_sureness(found))
    calibrated = ""
    if chance is not None:
        calibrated = texts.VERDICT_CALIBRATED.format(
            percent=round(100 * chance), data=calibrated_on,
            questions=f", {n} questions" if n else "")
    else:
        parts.append(texts.VERDICT_ADVICE[level])
    return Verdict(level=level, badge=texts.VERDICT_BADGES[level],
                   sentence=" ".join(p for p in parts if p), evidence=found, chance=chance,
                   calibrated=calibrated, record=record, calibration=calibration)


def run_record(level: str, levels: Mapping[str, LevelRecord], run: str, *, judge: str = "",
               lenient: bool = False, unlike: str = "") -> str:
    """What a reference run says of the answers at ``level``, in words. Its share of right
    answers at that level is said, beside the run's overall share, only where the run tells
    the levels apart: at least :data:`MIN_LEVEL_ANSWERS` answers at this level and as many at
    the others, and the 95% intervals of the two shares right apart (not overlapping).
    Otherwise it says that the run cannot tell this level from the others (a share that the
    run's answers at every level have, or one resting on a handful of answers, would read as a
    verdict of its own and tell nothing). ``levels``: the run's :class:`LevelRecord` by level;
    ``judge``: the run's judge, named; ``lenient``: a judge that counts some wrong answers
    right (the record says so); ``unlike``: how this answer was made otherwise than the
    run's."""
    here = levels.get(level)
    right, n = (here.right, here.n) if here is not None else (0, 0)
    others = [r for key, r in levels.items() if key != level]
    others_right, others_n = sum(r.right for r in others), sum(r.n for r in others)
    named = texts.VERDICT_BADGES[level].lower()
    judged = texts.VERDICT_RUN_JUDGED.format(judge=judge) if judge else ""
    if n < MIN_LEVEL_ANSWERS or others_n < MIN_LEVEL_ANSWERS:
        said = texts.VERDICT_RUN_FEW.format(
            run=run, judged=judged, n=n, answers=_plural(n, "answer", "answers"), level=named,
            others=others_n, least=MIN_LEVEL_ANSWERS)
    elif overlap(wilson(right, n), wilson(others_right, others_n)):
        said = texts.VERDICT_RUN_ALIKE.format(run=run, judged=judged, level=named)
    else:
        low, high = wilson(right, n)
        total, total_right = n + others_n, right + others_right
        said = texts.VERDICT_RUN_TELLS.format(
            run=run, judged=judged, overall=f"{total_right / total:.0%}", total=total,
            level=named, share=f"{right / n:.0%}", n=n, low=f"{low:.0%}", high=f"{high:.0%}")
        if lenient:
            said += texts.VERDICT_RUN_LENIENT.format(judge=judge)
    if unlike:
        said += texts.VERDICT_RECORD_OTHER.format(what=unlike)
    return said


def covered(result: Any, calibration: Any) -> dict[str, Any]:
    """What ``calibration`` (an object whose ``estimate(result)`` gives the chance of being
    right and where it was measured, :class:`mars_demo.evaluation.calibration.Calibration`)
    says of ``result``: its estimate, or, for a result it does not cover (other models or
    other settings: the estimate raises a ``ValueError``, ``KeyError`` or ``TypeError``),
    ``chance_correct`` None with the ``reason`` and what differs (``other``: "settings" where
    the error says so by its ``other`` attribute, else "models")."""
    try:
        return dict(calibration.estimate(result))
    except (KeyError, TypeError, ValueError) as err:
        out = {"chance_correct": None, "reason": str(err),
               "other": getattr(err, "other", "models")}
        describe = getattr(calibration, "describe", None)
        if describe is not None:
            out["source"] = describe()
        return out


def data_name(data: Any) -> str:
    """A calibration's data set as a verdict names it: the file's name, never its folders
    (a page shows no server folder; the calibration file keeps the whole path).

    >>> data_name("/srv/data/facts.jsonl"), data_name("facts")
    ('facts.jsonl', 'facts')
    """
    text = str(data).replace("\\", "/").rstrip("/")
    return text.rsplit("/", 1)[-1] or text


def verdict(result: Any, calibration: Any = None, reference: Any = None) -> Verdict:
    """The verdict on ``result``'s greedy answer (:func:`evidence`, then :func:`judge`).

    ``calibration``: a calibration (see :func:`covered`) whose chance of being right the
    verdict gives where it covers the answer; ``reference``: a run the answers at each level
    are counted in (an object with ``name``, ``levels``, the :class:`LevelRecord` by level,
    ``judge``, the run's judge named, ``lenient``, whether that judge counts some wrong
    answers right, and ``differences(result)``, how the result was made otherwise, in words:
    :class:`mars_demo.evaluation.reference.RunValues`); its record is :func:`run_record`'s,
    and none for a run that recorded no levels."""
    found = evidence(result)
    chance, data, n, estimate = None, "", None, None
    if calibration is not None:
        estimate = covered(result, calibration)
        if estimate.get("chance_correct") is not None:
            chance, n = float(estimate["chance_correct"]), estimate.get("n")
            data = data_name(estimate.get("data", ""))
    record, levels = "", getattr(reference, "levels", None)
    if reference is not None and levels:
        record = run_record(found.level, levels,
                            getattr(reference, "name", "") or next(iter(levels.values())).run,
                            judge=getattr(reference, "judge", ""),
                            lenient=bool(getattr(reference, "lenient", False)),
                            unlike="; ".join(reference.differences(result)))
    return judge(found, chance, calibrated_on=data, n=n, record=record, calibration=estimate)
