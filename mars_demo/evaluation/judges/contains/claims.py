"""Is a mention of a reference the answer's own claim? The ``contains`` judge's second step.

:mod:`.containment` finds where a reference stands in an answer's words (``words[start:end]``,
see :mod:`.answer_words`); each function here says why that mention is *not* the answer's
claim, or None: denied, taken back, given another rank, reported and corrected, a relative's
possessive. :mod:`.candidates` holds the rules for one candidate among several, and
:func:`.containment.unclaimed` runs them all. Every rule reads only the answer's words, the
question and the references (pure Python), and each is narrow on purpose: a mention a rule
wrongly discards is a right answer judged wrong. The cue words shared with the other two
modules are here.
"""

from __future__ import annotations

import re
from typing import Sequence

from .answer_words import BOUNDARY, Word, plain, words  # noqa: F401  (words: the examples)

NEGATIONS = {"not", "no", "never", "neither", "nor", "without", "nobody", "none", "doubt",
             "except", "unlike"}
_NEGATION_PAIRS = {("rather", "than"), ("instead", "of"), ("other", "than"), ("apart", "from"),
                   ("aside", "from")}
_AFFIRMING_AFTER_NOT = {"until", "only"}
_NEGATED_AFTER = {"not", "never", "wrong", "incorrect", "false", "mistaken"}  # "X is wrong"
_RETRACTIONS = {"no", "nope", "not", "never"}  # "Sydney? No, Canberra."
_AUXILIARIES = {"is", "are", "was", "were", "be", "been", "do", "does", "did", "has", "have",
                "had", "can", "could", "will", "would", "shall", "should", "may", "might",
                "must"}
FILLERS = {"it", "its", "is", "are", "was", "were", "be", "could", "might", "may", "would",
           "there", "this", "that", "either", "i", "im", "think", "believe", "guess", "maybe",
           "perhaps", "possibly", "probably", "likely", "or", "answer", "am", "sure", "not",
           "say", "also", "even", "just", "only", "called", "known", "as"}
HEDGE_ADVERBS = {"maybe", "perhaps", "possibly", "probably"}
_COPULAS = {"is", "was", "are", "were", "rank", "ranks", "ranked", "come", "comes", "came"}
_ORDINAL = re.compile(r"^\d+th$")
_CONTRASTS = {"but", "however", "yet", "although", "though", "whereas"}
_CONCESSIVES = {"although", "though", "while", "whereas"}  # "Although many think X, ..."
_SENTENCE_ENDS = {".", "!", "?", ";"}
# what others say or once thought: "X is often cited", "many people assume X", "some say X",
# "I thought it was X", "a common misconception"
_HEARSAY_ADVERBS = {"often", "commonly", "usually", "widely", "popularly", "frequently",
                    "generally", "traditionally", "mistakenly", "wrongly", "supposedly",
                    "allegedly", "reputedly", "thought", "misconception", "myth"}
_OTHERS = {"people", "many", "some", "most", "others", "everyone", "someone", "they",
           "experts", "sources"}
_SAYING = {"say", "says", "said", "think", "thinks", "believe", "believes", "believed",
           "assume", "assumes", "assumed", "claim", "claims", "claimed", "guess", "guesses",
           "credit", "credits", "cite", "cites", "call", "calls", "called", "name", "names",
           "consider", "considers", "considered"}
# words that correct what came before ("but it's actually Y", "but the answer is Y")
_CORRECTIONS = {"actually", "fact", "reality", "really", "truth", "answer", "correct",
                "correctly", "real", "wrong", "mistake", "not", "never", "no"}
# a person's relations: "X's contemporary Y" is about Y
_RELATIONS = {"contemporary", "rival", "brother", "sister", "son", "daughter", "father",
              "mother", "wife", "husband", "friend", "colleague", "student", "pupil",
              "teacher", "mentor", "partner", "assistant", "successor", "predecessor",
              "nephew", "niece", "cousin", "uncle", "aunt", "crewmate", "disciple",
              "contemporaries", "rivals", "brothers", "sisters", "sons", "daughters"}
def clause(answer: list[Word], start: int, end: int) -> tuple[int, int]:
    """The bounds of the clause that holds ``answer[start:end]``."""
    lo = start
    while lo > 0 and answer[lo - 1].text != BOUNDARY:
        lo -= 1
    hi = end
    while hi < len(answer) and answer[hi].text != BOUNDARY:
        hi += 1
    return lo, hi


def _marks(word: Word) -> set[str]:
    return set(word.raw.split()) if word.text == BOUNDARY else set()


def denied(answer: list[Word], start: int, end: int) -> str | None:
    """A negation before the mention in its clause ("not Canberra", "I don't know whether it
    is 1989", "rather than", "apart from", "except"), a negated verb after it ("Jupiter is
    not the largest"), a comparison ("larger than Jupiter") or second place in an order
    ("Oxygen, followed by nitrogen"). "not until" and "not only" affirm what follows; a
    clause that starts with "no" ("No, it's in Paris") is an interjection.

    >>> said = words("It is not Sydney, it is Canberra.")
    >>> denied(said, 3, 4), denied(said, 7, 8)
    ("'not' before it", None)
    """
    lo, hi = clause(answer, start, end)
    before = [w.raw for w in answer[lo:start]]
    for k, w in enumerate(before):
        nxt = before[k + 1] if k + 1 < len(before) else None
        if w in NEGATIONS:
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
    after = [w.raw for w in answer[end:hi]]
    for k, w in enumerate(after):
        if w in _NEGATED_AFTER and k > 0 and after[k - 1] in _AUXILIARIES:
            return f"'{after[k - 1]} {w}' after it"
        if w == "never" and k == 0:
            return "'never' after it"
    return None


def retracted(answer: list[Word], start: int, end: int) -> str | None:
    """The answer takes the mention back: "Sydney? No, Canberra.", "Jupiter - no, Saturn.":
    the clause after the mention's is only "no" (or "not", "definitely not"). After a comma it
    must lead on to more ("Sydney, no, Canberra"), so the tag of "It's Canberra, no?" and "No
    doubt" after a mention leave it counted.

    >>> retracted(words("Sydney? No, Canberra."), 0, 1), retracted(words("Canberra, no?"), 0, 1)
    ("'no' after it", None)
    """
    _, hi = clause(answer, start, end)
    if hi + 1 >= len(answer):
        return None
    _, nxt = clause(answer, hi + 1, hi + 1)
    said = [w.raw for w in answer[hi + 1:nxt]]
    if not said or not all(w in _RETRACTIONS or w.endswith("ly") for w in said) \
            or not set(said) & _RETRACTIONS:
        return None
    if answer[hi].raw == "," and (nxt + 1 >= len(answer) or "?" in answer[nxt].raw):
        return None
    return f"{' '.join(said)!r} after it"


def another_rank(answer: list[Word], start: int, end: int, question: str) -> str | None:
    """The answer gives the mention another rank than the one asked: "Saturn is the seventh
    planet" for "Which planet is sixth from the Sun?". Only when the question asks for a rank
    ("is sixth", "was the 35th president"), the mention is the subject of "is/was/ranks
    <ordinal>" and its sentence does not give it the rank asked too: "Nixon was the 37th
    president" still answers "Who was president during the first Moon landing?", "Saturn is the
    sixth planet and the second largest" still answers "Which is the second largest planet?".

    >>> said = words("Saturn is the seventh planet; the sixth is Uranus.")
    >>> another_rank(said, 0, 1, "Which planet is sixth from the Sun?")
    'called the 7th (the question asks for the 6th)'
    >>> another_rank(words("Saturn is the sixth."), 0, 1, "Which planet is sixth?") is None
    True
    >>> another_rank(words("Nixon was the 37th president."), 0, 1,
    ...              "Who was president during the first Moon landing?") is None
    True
    """
    said = plain(question)
    asked = [w for k, w in enumerate(said) if _ORDINAL.match(w) and k > 0
             and said[k - 1] in _COPULAS]
    _, hi = clause(answer, start, end)
    after = [w.text for w in answer[end:hi]]
    if not asked or len(after) < 2 or after[0] not in _COPULAS:
        return None
    rank = after[2] if after[1] == "only" and len(after) > 2 else after[1]
    sentence = {w.text for w in answer[end:_sentence_end(answer, end)]}
    if _ORDINAL.match(rank) and rank not in asked and not sentence & set(asked):
        return f"called the {rank} (the question asks for the {asked[0]})"
    return None


def _sentence_end(answer: list[Word], k: int) -> int:
    """From ``answer[k]``, the index of the next boundary that ends a sentence (or the end)."""
    while k < len(answer) and not _marks(answer[k]) & _SENTENCE_ENDS:
        k += 1
    return k


def _sentence_part(answer: list[Word], k: int) -> int:
    """From ``answer[k]``, the index of the next boundary that ends a sentence or opens a
    contrast (or the end)."""
    while k < len(answer) and not (_marks(answer[k]) & (_SENTENCE_ENDS | _CONTRASTS)):
        k += 1
    return k


def corrected(answer: list[Word], start: int, end: int) -> str | None:
    """The mention is what others say or what was once thought, and a contrast corrects it:
    "The Nile is often cited, but it's actually the Congo", "People often say Nigeria, but the
    answer is Ethiopia", "Although many think it is Sydney, it is actually Canberra". Both are
    needed: hearsay around the mention (:func:`_hearsay`) and a correction in the part that
    contrasts with it ("actually", "in fact", "the answer", a negation), so "Canberra, but I'm
    not sure", "Fleming is credited with it, but he did not develop the drug" and "It is often
    called Canberra" still count.

    >>> said = words("People often say Nigeria, but the answer is Ethiopia.")
    >>> corrected(said, 3, 4)
    "said by others ('people often say'), then corrected ('but answer is ethiopia')"
    >>> corrected(words("Although many think it is Sydney, it is actually Perth."), 5, 6)
    "said by others ('although many think it is'), then corrected ('it is actually perth')"
    >>> corrected(words("Possibly Au, but I might be wrong."), 1, 2) is None
    True
    """
    lo = start
    while lo > 0 and not (_marks(answer[lo - 1]) & (_SENTENCE_ENDS | _CONTRASTS)):
        lo -= 1
    opening = _marks(answer[lo - 1]) & _CONCESSIVES if lo > 0 else set()
    if opening:  # "Although X is often cited, [correction]"
        _, k = clause(answer, start, end)
        if k >= len(answer) or _marks(answer[k]) & _SENTENCE_ENDS:
            return None
        said = sorted(opening) + [w.raw for w in answer[lo:start] + answer[end:k]]
        then = [w.raw for w in answer[k + 1:_sentence_part(answer, k + 1)]
                if w.text != BOUNDARY]
    else:  # "X is often cited, but [correction]"
        k = _sentence_part(answer, end)
        if k >= len(answer) or not _marks(answer[k]) & _CONTRASTS:
            return None
        said = [w.raw for w in answer[lo:start] + answer[end:k] if w.text != BOUNDARY]
        contrast = next(m for m in answer[k].raw.split() if m in _CONTRASTS)
        then = [contrast] + [w.raw for w in answer[k + 1:_sentence_part(answer, k + 1)]
                             if w.text != BOUNDARY]
    if _hearsay(said) and set(then) & _CORRECTIONS:
        return f"said by others ({' '.join(said)!r}), then corrected ({' '.join(then)!r})"
    return None


def _hearsay(said: list[str]) -> bool:
    """Whether words attribute a claim to others or to a past belief: an adverb such as
    "often", "supposedly" ("X is often cited"), "thought" ("I thought it was X"), or others
    and a verb of saying ("many people assume", "some say"). A quantifier alone ("Canberra
    has many embassies") is not hearsay.

    >>> _hearsay(["many", "people", "assume"]), _hearsay(["has", "many", "embassies"])
    (True, False)
    """
    if set(said) & _HEARSAY_ADVERBS:
        return True
    return any(w in _OTHERS and set(said[k + 1:k + 3]) & _SAYING for k, w in enumerate(said))


def relative_of_another(answer: list[Word], start: int, end: int, question: str,
                        references: Sequence[str]) -> str | None:
    """"Leo Tolstoy's contemporary Fyodor Dostoevsky wrote it": the mention, possessive, is
    followed by a word for a person's relation (:data:`_RELATIONS`: contemporary, rival,
    son, wife, student...) and another name, which is what the answer is about. A name the
    question says ("Socrates's student Plato" for "Who taught Plato?") and other nouns
    ("Edison's company General Electric", "Shakespeare's play Hamlet") leave it counted.

    >>> said = words("Leo Tolstoy's contemporary Fyodor Dostoevsky wrote it.")
    >>> relative_of_another(said, 0, 2, "Who wrote War and Peace?", ["Leo Tolstoy"])
    "the contemporary of it is named ('fyodor')"
    >>> said = words("Mozart's father Leopold taught him.")
    >>> relative_of_another(said, 0, 1, "Who wrote The Magic Flute?", ["Mozart"])
    "the father of it is named ('leopold')"
    """
    if not answer[end - 1].possessive or end + 1 >= len(answer):
        return None
    relation, name = answer[end], answer[end + 1]
    known = set(plain(question)) | {w for r in references for w in plain(r)}
    if relation.raw in _RELATIONS and name.capital and name.text not in known:
        return f"the {relation.raw} of it is named ({name.text!r})"
    return None
