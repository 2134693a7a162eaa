"""Is a mention one of several candidates? The ``contains`` judge's rules for lists and
alternatives (see :mod:`.containment`).

Each function takes the answer's words (:mod:`.answer_words`), the mention ``words[start:end]``,
the question and the references, and says why the mention is one candidate among others rather
than the answer's choice, or None: "X or Y", "X, Y or Z", "between X and Y", "maybe X, maybe
Y", "it could also be Y", a list the answer cannot choose from, one example after "including".
A candidate that is itself a reference is no rival ("butterflies or moths" for both). Pure
Python.
"""

from __future__ import annotations

from typing import Sequence

from .answer_words import BOUNDARY, Word, plain, words  # noqa: F401  (words: the examples)
from .claims import FILLERS, HEDGE_ADVERBS, NEGATIONS, clause

_OPEN_HEDGES = {"maybe", "perhaps", "possibly"}  # "maybe X, maybe Y": neither is committed
_MODALS = {"could", "might", "may"}  # "it could also be Y": another candidate
_EXAMPLES = {"including", "include", "includes", "eg"}
_EXAMPLE_PAIRS = {("such", "as"), ("for", "example"), ("for", "instance"), ("among", "them"),
                  ("among", "others")}
_ENTRY_WORDS = 3  # an entry of a list ("Vietnam", "South Korea"): at most this many words


def _alternative(side: list[Word], asked: set[str], accepted: list[list[str]]) -> bool:
    """Whether ``side`` names another candidate: words beyond the question's and fillers,
    and not itself a reference."""
    content = [w for w in side if w.raw not in FILLERS and w.text not in asked]
    return bool(content) and not _names_a_reference(side, accepted)


def _names_a_reference(side: list[Word], accepted: list[list[str]]) -> bool:
    texts = [w.text for w in side]
    return any(n > 0 and any(texts[i:i + n] == ref for i in range(len(texts) - n + 1))
               for ref in accepted for n in [len(ref)])


def _entry(answer: list[Word], k: int, step: int) -> int:
    """From ``answer[k]``, the index just past a short list entry read in direction ``step``
    (at most :data:`_ENTRY_WORDS` words, no filler, "and"/"or" or example cue); ``k`` when
    there is none."""
    j = k
    while (0 <= j < len(answer) and answer[j].text != BOUNDARY and abs(j - k) < _ENTRY_WORDS
           and answer[j].raw not in FILLERS | {"and", "or"} and not _example_cue(answer, j)):
        j += step
    return j


def _past_entries(answer: list[Word], k: int) -> int:
    """From ``k`` right after a mention, past the ", entry" parts of a comma list to its
    "or": "Colombia, Vietnam or Brazil" -> at "or"."""
    while k < len(answer) and answer[k].text == BOUNDARY and answer[k].raw == ",":
        j = _entry(answer, k + 1, 1)
        if j == k + 1 or j >= len(answer):
            break
        if answer[j].raw == "or" or (answer[j].text == BOUNDARY and answer[j].raw == ","):
            k = j
            continue
        break
    return k


def _between(answer: list[Word], start: int, end: int) -> list[Word]:
    """The other side of "between X and Y" when the mention is X or Y (empty: none)."""
    lo, hi = clause(answer, start, end)
    if start > lo and answer[start - 1].raw == "between":
        k = end
        if k < hi and answer[k].raw == "and":
            return answer[k + 1:hi]
    if start > lo and answer[start - 1].raw == "and":
        k = start - 2
        while k >= lo and answer[k].raw not in ("between", "and"):
            k -= 1
        if k >= lo and answer[k].raw == "between":
            return answer[k + 1:start - 1]
    return []


def other_candidates(answer: list[Word], start: int, end: int, question: str,
                     references: Sequence[str]) -> str | None:
    """The other candidate of an "X or Y", of a list "X, Y or Z" or of a "between X and Y"
    that holds the mention ("Canberra or Sydney", "six or seven", "between 1985 and 1987");
    alternatives that are references themselves are fine ("butterflies or moths" for both).

    >>> said = words("It could be Mars or Jupiter.")
    >>> other_candidates(said, 3, 4, "Which planet?", ["Mars"])
    "or 'jupiter'"
    >>> said = words("Colombia, Vietnam or Brazil.")
    >>> other_candidates(said, 0, 1, "Largest coffee producer?", ["Colombia"])
    "or 'brazil'"
    """
    asked = set(plain(question))
    accepted = [plain(r) for r in references]
    other = _between(answer, start, end)
    if other and _alternative(other, asked, accepted):
        return f"between it and {' '.join(w.text for w in other)!r}"
    k = _past_entries(answer, end)
    while k < len(answer) and (answer[k].text == BOUNDARY or answer[k].raw in HEDGE_ADVERBS):
        k += 1
    if k < len(answer) and answer[k].raw == "or":
        j = k + 1
        side = []
        while j < len(answer) and answer[j].text != BOUNDARY:
            side.append(answer[j])
            j += 1
        if _alternative(side, asked, accepted):
            return f"or {' '.join(w.text for w in side)!r}"
    k = start - 1
    while k >= 0 and (answer[k].text == BOUNDARY
                      or answer[k].raw in HEDGE_ADVERBS | {"it", "is", "its"}):
        k -= 1
    if k >= 0 and answer[k].raw == "or":
        j = k - 1
        side = []
        while j >= 0 and answer[j].text != BOUNDARY and answer[j].raw not in ("either",
                                                                                "between"):
            side.insert(0, answer[j])
            j -= 1
        if _alternative(side, asked, accepted):
            return f"or {' '.join(w.text for w in side)!r}"
    return None


def hedged_alternatives(answer: list[Word], start: int, end: int, question: str,
                        references: Sequence[str]) -> str | None:
    """"Maybe X, maybe Y": the mention's clause opens with maybe/perhaps/possibly and another
    clause opens the same way with another candidate; or another clause offers one with
    "could/might/may also be" ("Probably Canberra, but it could also be Sydney"; not "it may
    also be called X", another name). One hedged guess ("Possibly Au, but I might be wrong")
    still counts.

    >>> said = words("Maybe Pb, maybe Ld? I'd have to check.")
    >>> hedged_alternatives(said, 1, 2, "Symbol for lead?", ["Pb"])
    "'maybe ld' beside it"
    """
    lo, _ = clause(answer, start, end)
    opens = answer[lo].raw in _OPEN_HEDGES
    asked = set(plain(question))
    accepted = [plain(r) for r in references]
    k = 0
    while k < len(answer):
        c_lo, c_hi = clause(answer, k, k)
        raws = [w.raw for w in answer[c_lo:c_hi]]
        also = next((j + 3 for j in range(len(raws) - 3) if raws[j] in _MODALS
                     and raws[j + 1:j + 3] == ["also", "be"] and not _participle(raws[j + 3])),
                    None)
        if c_lo != lo and c_hi > c_lo:
            if opens and raws[0] in _OPEN_HEDGES \
                    and _alternative(answer[c_lo + 1:c_hi], asked, accepted):
                return f"{' '.join(raws)!r} beside it"
            if also and _alternative(answer[c_lo + also:c_hi], asked, accepted):
                return f"{' '.join(raws)!r} beside it"
        k = c_hi + 1
    return None


def _undecided(answer: list[Word]) -> bool:
    """Whether the answer says it cannot choose: "not sure which", "I don't know which one",
    "can't say for certain which"."""
    for k, w in enumerate(answer):
        if w.raw == "which":
            lo, _ = clause(answer, k, k)
            if any(x.raw in NEGATIONS | {"unsure", "uncertain"} for x in answer[lo:k]):
                return True
    return False


def undecided_list(answer: list[Word], start: int, end: int, question: str,
                   references: Sequence[str]) -> str | None:
    """The mention is one entry of a list ("X, Y and Z", "X and Y") and the answer says it
    cannot tell which: "Texas, California and Alaska are large, but I'm not sure which is
    largest". Without the "not sure which" a list still counts ("Kangaroos live in Australia
    and New Guinea").

    >>> said = words("Utah and Alaska are big, but I'm not sure which is the biggest.")
    >>> undecided_list(said, 2, 3, "Largest state?", ["Alaska"])
    "'utah' beside it"
    """
    if not _undecided(answer):
        return None
    asked = set(plain(question))
    accepted = [plain(r) for r in references]
    sides = []
    k = end
    if k < len(answer) and (answer[k].raw in ("and", "or") or answer[k].raw == ","):
        sides.append(answer[k + 1:_entry(answer, k + 1, 1)])
    k = start - 1
    if k >= 0 and (answer[k].raw in ("and", "or") or answer[k].raw == ","):
        sides.append(answer[_entry(answer, k - 1, -1) + 1:k])
    for side in sides:
        if _alternative(side, asked, accepted):
            return f"{' '.join(w.text for w in side)!r} beside it"
    return None


def _participle(word: str) -> bool:
    """"called", "known", "written": "it may also be called X" names the same thing."""
    return word in FILLERS or word.endswith(("ed", "wn", "tten", "lt"))


def _example_cue(answer: list[Word], k: int) -> str | None:
    """The cue that ends at ``answer[k]``: "including", "e.g.", "such as", "for example"..."""
    w = answer[k].raw
    if w in _EXAMPLES:
        return w
    if k > 0 and (answer[k - 1].raw, w) in _EXAMPLE_PAIRS:
        return f"{answer[k - 1].raw} {w}"
    return None


def example(answer: list[Word], start: int, end: int, question: str,
            references: Sequence[str]) -> str | None:
    """The mention is one example, not the answer's choice: right after "including", "such
    as", "for example", "e.g.", "among them", or after a list of short entries that follows
    one ("grown in many countries, including Colombia, Vietnam and Brazil"). An example list
    whose other entries are references ("such as butterflies and moths") still counts.

    >>> said = words("Coffee is grown in many countries, including Colombia and Brazil.")
    >>> example(said, 10, 11, "Largest coffee producer?", ["Brazil"])
    "after 'including'"
    >>> example(words("Big producers such as Vietnam trail Brazil."), 6, 7, "Q?", ["Brazil"])
    """
    accepted = [plain(r) for r in references]
    entries: list[Word] = []
    k = start - 1
    while k >= 0:
        cue = _example_cue(answer, k)
        if cue:
            return None if _names_a_reference(entries, accepted) else f"after {cue!r}"
        if answer[k].raw in ("and", "or") or answer[k].raw == ",":
            k -= 1  # a connector: an entry may come before it
        elif k == start - 1:
            return None  # a word that is not a connector or a cue right before the mention
        else:
            j = _entry(answer, k, -1)
            if j == k or (j >= 0 and answer[j].raw not in ("and", "or", ",")
                          and not _example_cue(answer, j)):
                return None
            entries = answer[j + 1:k + 1] + entries
            k = j
    return None
