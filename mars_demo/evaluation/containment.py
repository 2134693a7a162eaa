"""Does an answer give a reference answer? Whole-word containment that reads sentences.

The ``contains`` judge (:class:`mars_demo.evaluation.judges.ContainsJudge`) accepts an answer
when one of the references appears in it as whole words and that mention is the answer's own
claim: not denied, not one of several candidates, not a point of comparison. Pure Python
(``re``); every step is a small function with a worked example.

1. :func:`.answer_words.words` splits the answer into normalized words (SQuAD-style, with
   accents folded, plurals folded and numbers in words read as digits) and clause boundaries.
2. :func:`mentions` finds a reference as a contiguous run of the answer's words. The
   reference's words that the question already says may be left out ("The Pacific." for
   "Pacific Ocean" when the question asks for an ocean), as long as one word of the reference
   remains. For "who" questions, a person's last name alone counts ("Armstrong" for "Neil
   Armstrong") unless another capitalized name stands right before it ("Louis Armstrong").
3. A mention does not count when its clause denies it (a negation before it in the clause:
   "not Canberra", "I don't know whether it is 1989", "rather than", "instead of", "apart
   from", "except", "unlike"; or a negated verb after it: "Jupiter is not the largest"), when
   it is a point of comparison ("larger than Jupiter") or second in an order ("Oxygen,
   followed by nitrogen"), or when it is one of several candidates ("Canberra or Sydney", "six
   or seven"; alternatives that are themselves references are fine). "not until" and "not only" affirm what follows; a clause that starts with "no"
   ("No, it's in Paris") is an interjection, not a denial.

Limits (see the README's judge check for the figures): a paraphrase without the reference's
words ("the Bard of Avon"), a symbol or formula for a name ("Hg" for mercury), an answer that
contradicts the reference in another clause ("they absorb oxygen and release carbon dioxide"),
and a reference inside another name ("New York" for "York") are beyond a lexical rule; the
``nli`` and ``llm`` judges read meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .answer_words import BOUNDARY, Word, plain, words

# --- mentions and what the answer says about them -----------------------------------------------

_NEGATIONS = {"not", "no", "never", "neither", "nor", "without", "nobody", "none", "doubt",
              "except", "unlike"}
_NEGATION_PAIRS = {("rather", "than"), ("instead", "of"), ("other", "than"), ("apart", "from"),
                   ("aside", "from")}
_AFFIRMING_AFTER_NOT = {"until", "only"}
_AUXILIARIES = {"is", "are", "was", "were", "be", "been", "do", "does", "did", "has", "have",
                "had", "can", "could", "will", "would", "shall", "should", "may", "might",
                "must"}
_TITLES = {"mr", "mrs", "ms", "dr", "sir", "dame", "lord", "lady", "saint", "st", "king",
           "queen", "prince", "princess", "president", "general", "captain", "professor"}
_FILLERS = {"it", "its", "is", "are", "was", "were", "be", "could", "might", "may", "would",
            "there", "this", "that", "either", "i", "im", "think", "believe", "guess", "maybe",
            "perhaps", "possibly", "probably", "likely", "or", "answer", "am", "sure", "not",
            "say", "also", "even", "just", "only", "called", "known", "as"}
_HEDGE_ADVERBS = {"maybe", "perhaps", "possibly", "probably"}


@dataclass(frozen=True)
class Mention:
    """Where a reference stands in an answer's word list: ``words[start:end]``."""

    reference: str
    start: int
    end: int
    how: str  # "whole", "without question words", "last name"


def _match_at(answer: list[str], pos: int, ref: list[str], optional: set[int]) -> int | None:
    """The end of a match of ``ref`` at ``pos`` with the words at ``optional`` indices
    allowed to be missing (longest match first), or None."""
    def go(i: int, j: int) -> int | None:
        if j == len(ref):
            return i
        if i < len(answer) and answer[i] == ref[j]:
            end = go(i + 1, j + 1)
            if end is not None:
                return end
        if j in optional:
            return go(i, j + 1)
        return None

    return go(pos, 0)


def _contains(seq: Sequence[str], sub: Sequence[str]) -> bool:
    n = len(sub)
    return n > 0 and any(list(seq[i:i + n]) == list(sub) for i in range(len(seq) - n + 1))


def mentions(answer: list[Word], reference: str, question: str) -> list[Mention]:
    """Every place ``reference`` stands in ``answer`` (see the module docstring, step 2).

    >>> [m.how for m in mentions(words("The Pacific."), "Pacific Ocean",
    ...                          "What is the largest ocean on Earth?")]
    ['without question words']
    """
    texts = [w.text for w in answer]
    ref = plain(reference)
    if not ref:
        return []
    asked = set(plain(question))
    optional = {j for j, w in enumerate(ref) if w in asked}
    if len(optional) == len(ref):
        optional = set()  # every word is in the question: the whole reference is needed
    found: list[Mention] = []
    for pos in range(len(texts)):
        if texts[pos] == BOUNDARY:
            continue
        end = _match_at(texts, pos, ref, optional)
        if end is not None and end > pos:
            how = "whole" if end - pos == len(ref) else "without question words"
            found.append(Mention(reference, pos, end, how))
    if not found and _asks_for_a_person(question):
        found = _last_names(answer, reference, ref, asked)
    return found


def _asks_for_a_person(question: str) -> bool:
    return any(w in ("who", "whom", "whose") for w in plain(question)[:3])


def _last_names(answer: list[Word], reference: str, ref: list[str],
                asked: set[str]) -> list[Mention]:
    """"Armstrong" for "Neil Armstrong" when a "who" question asks for a person; not when
    another capitalized name stands right before it ("Louis Armstrong")."""
    if len(ref) < 2 or not ref[-1].isalpha() or len(ref[-1]) < 3 or ref[-1] in asked:
        return []
    found = []
    for pos, w in enumerate(answer):
        if w.text != ref[-1]:
            continue
        before = answer[pos - 1] if pos > 0 else None
        if (before is not None and before.capital and before.text not in ref
                and before.raw not in _FILLERS and before.raw not in _TITLES):
            continue  # another person of that name
        found.append(Mention(reference, pos, pos + 1, "last name"))
    return found


def _clause(answer: list[Word], start: int, end: int) -> tuple[int, int]:
    lo = start
    while lo > 0 and answer[lo - 1].text != BOUNDARY:
        lo -= 1
    hi = end
    while hi < len(answer) and answer[hi].text != BOUNDARY:
        hi += 1
    return lo, hi


def denied(answer: list[Word], mention: Mention) -> str | None:
    """Why the clause of ``mention`` denies it, excludes it or compares with it (None: it
    does not).

    >>> said = words("It is not Sydney, it is Canberra.")
    >>> [denied(said, m) for m in mentions(said, "Sydney", "Capital of Australia?")]
    ["'not' before it"]
    """
    lo, hi = _clause(answer, mention.start, mention.end)
    before = [w.raw for w in answer[lo:mention.start]]
    for k, w in enumerate(before):
        nxt = before[k + 1] if k + 1 < len(before) else None
        if w in _NEGATIONS:
            if w == "no" and k == 0:
                continue  # "No, it's Paris" / "No it is Paris": an interjection
            if w == "not" and nxt in _AFFIRMING_AFTER_NOT:
                continue  # "not until 1969", "not only X"
            return f"{w!r} before it"
        if nxt is not None and (w, nxt) in _NEGATION_PAIRS:
            return f"{w + ' ' + nxt!r} before it"
    if before and before[-1] == "than":
        return "a point of comparison ('than' before it)"
    if before[-2:] == ["followed", "by"]:
        return "second in an order ('followed by' before it)"
    after = [w.raw for w in answer[mention.end:hi]]
    for k, w in enumerate(after):
        if w in ("not", "never") and k > 0 and after[k - 1] in _AUXILIARIES:
            return f"'{after[k - 1]} {w}' after it"
        if w == "never" and k == 0:
            return "'never' after it"
    return None


def _alternative(side: list[Word], asked: set[str], accepted: list[list[str]]) -> bool:
    """Whether ``side`` of an "or" names another candidate: words beyond the question's and
    fillers, and not itself a reference."""
    content = [w for w in side if w.raw not in _FILLERS and w.text not in asked]
    if not content:
        return False
    texts = [w.text for w in side]
    return not any(_contains(texts, ref) for ref in accepted)


def other_candidates(answer: list[Word], mention: Mention, question: str,
                     references: Sequence[str]) -> str | None:
    """The other candidate of an "X or Y" that holds the mention (None: there is none).

    >>> said = words("It could be Mars or Jupiter.")
    >>> other_candidates(said, mentions(said, "Mars", "Which planet?")[0], "Which planet?",
    ...                  ["Mars"])
    'jupiter'
    """
    asked = set(plain(question))
    accepted = [plain(r) for r in references]
    k = mention.end
    while k < len(answer) and (answer[k].text == BOUNDARY or answer[k].raw in _HEDGE_ADVERBS):
        k += 1
    if k < len(answer) and answer[k].raw == "or":
        j = k + 1
        side = []
        while j < len(answer) and answer[j].text != BOUNDARY:
            side.append(answer[j])
            j += 1
        if _alternative(side, asked, accepted):
            return " ".join(w.text for w in side)
    k = mention.start - 1
    while k >= 0 and (answer[k].text == BOUNDARY
                      or answer[k].raw in _HEDGE_ADVERBS | {"it", "is", "its"}):
        k -= 1
    if k >= 0 and answer[k].raw == "or":
        j = k - 1
        side = []
        while j >= 0 and answer[j].text != BOUNDARY and answer[j].raw not in ("either",
                                                                                "between"):
            side.insert(0, answer[j])
            j -= 1
        if _alternative(side, asked, accepted):
            return " ".join(w.text for w in side)
    return None


def read(question: str, answer: str, references: Sequence[str]) -> tuple[bool, str]:
    """(accepted, why): the ``contains`` judge's verdict with its reason in words."""
    said = words(answer)
    if not any(w.text != BOUNDARY for w in said):
        return False, "the answer is empty"
    reasons = []
    for reference in references:
        for m in mentions(said, reference, question):
            why = denied(said, m)
            if why is None:
                other = other_candidates(said, m, question, references)
                if other is not None:
                    why = f"one of several candidates (or {other!r})"
            if why is None:
                return True, f"{reference!r} ({m.how})"
            reasons.append(f"{reference!r} is named but not claimed: {why}")
    if reasons:
        return False, "; ".join(dict.fromkeys(reasons))
    return False, "no reference in the answer"
