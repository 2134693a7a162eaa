"""What every judge is: :class:`Judge` (a verdict on an answer), :class:`Verdict`, and the
registry's :class:`JudgeEntry` (its name, what it needs, its threshold, how it is built).

Also SQuAD v1.1's answer normalization, which several judges share (:func:`normalize_answer`,
:func:`exact_match`, :func:`token_f1`).
"""

from __future__ import annotations

import abc
import collections
import re
import string
from dataclasses import dataclass
from typing import Any, Callable, Sequence

#: what a judge may need besides the answer and its references (:attr:`JudgeEntry.needs`)
NEEDS = {
    "nli": "the run's NLI model (--nli)",
    "server": "an OpenAI-compatible server (--judge-endpoint, default --llm-endpoint)",
}


class JudgeError(RuntimeError):
    """The judge could not decide (server unreachable, an unexpected reply)."""


@dataclass
class Verdict:
    correct: bool
    score: float | None = None  # F1 or ROUGE-L of the best reference; None for the others
    detail: str | None = None  # why (contains), the NLI labels (nli), the LLM judge's reply


class Judge(abc.ABC):
    """Decides whether a prediction answers the question given its references."""

    name = ""
    threshold: float | None = None

    @abc.abstractmethod
    def __call__(self, question: str, prediction: str, references: Sequence[str]) -> Verdict:
        """The verdict on ``prediction``."""

    def judge_many(self, items: Sequence[tuple[str, str, Sequence[str]]]) -> list[Verdict]:
        """The verdicts on ``(question, prediction, references)`` items, in order."""
        return [self(q, p, refs) for q, p, refs in items]

    def describe(self) -> dict[str, Any]:
        """What the judge is, as a run records it (name, threshold, and its model where it
        has one)."""
        return {"name": self.name, "threshold": self.threshold}


@dataclass
class JudgeOptions:
    """What :attr:`JudgeEntry.build` gets: ``threshold`` (the entry's default when none was
    given), ``nli`` (an NLI model, or None: loaded for ``settings``), ``settings`` (the run's
    :class:`~mars_demo.settings.Settings`), and a server's ``endpoint``, ``model``, ``api``,
    ``api_key_env`` (the NAME of the variable holding its key)."""

    threshold: float | None = None
    nli: Any = None
    settings: Any = None
    endpoint: str | None = None
    model: str | None = None
    api: str | None = None
    api_key_env: str | None = None


@dataclass(frozen=True)
class JudgeEntry:
    """One judge of the registry (a module of :mod:`mars_demo.evaluation.judges` holding it
    as ``JUDGE``).

    ``name``: what ``--judge`` takes; ``summary``: what it decides, in the words of
    ``--judge``'s help; ``build``: the judge from :class:`JudgeOptions`; ``threshold``: its
    default threshold (None: it takes none); ``needs``: keys of :data:`NEEDS`;
    ``whole_answer``: it compares the whole answer with a reference, so sentence answers fail
    it (a run warns then); ``lenient``: it counts an answer right for sharing enough words with
    a reference, so some wrong answers count as right (its false accepts on the labelled
    check sets, docs/judges.md), which the verdict says beside a served run's record."""

    name: str
    summary: str
    build: Callable[[JudgeOptions], Judge]
    threshold: float | None = None
    needs: tuple[str, ...] = ()
    whole_answer: bool = False
    lenient: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.needs) - set(NEEDS)
        if unknown:
            raise ValueError(f"judge {self.name!r} needs {sorted(unknown)}; a judge may need "
                             f"{', '.join(NEEDS)}")

    def help(self) -> str:
        """"f1 (token F1 >= threshold, default 0.5)": its name and summary for the help."""
        default = "" if self.threshold is None else f", default {self.threshold:g}"
        return f"{self.name} ({self.summary}{default})"


def check_threshold(t: Any) -> float:
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 <= t <= 1.0:
        raise ValueError(f"the judge threshold must be a number from 0 to 1; got {t!r}")
    return float(t)


# ---- SQuAD normalization ------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's ``normalize_answer``: lowercase, remove punctuation, remove articles,
    collapse whitespace (in that order).

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, reference: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(reference)


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD's token F1 between the normalized bags of words (0 when either is empty and they
    differ; 1 when both are empty)."""
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    common = collections.Counter(pred) & collections.Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)
