"""Does an answer give a reference answer? Whole-word containment that reads sentences.

The ``contains`` judge (:class:`mars_demo.evaluation.judges.ContainsJudge`) accepts an answer
when one of the references appears in it as whole words and that mention is the answer's own
claim. Pure Python (``re``); every step is a small function with a worked example.

1. :func:`.answer_words.words` splits the answer into normalized words (SQuAD-style, with
   accents folded, plurals folded, numbers in words read as digits, dates in one order) and
   clause boundaries.
2. :func:`mentions` finds a reference as a contiguous run of the answer's words (commas inside
   a reference may be written or not: "Washington, D.C.", "red, green and blue"). The
   reference's words that the question already says may be left out ("The Pacific." for
   "Pacific Ocean" when the question asks for an ocean), as long as one word of the reference
   remains. For "who" questions, a person's last name alone counts ("Armstrong" for "Neil
   Armstrong"). An initialism written in capitals counts for a reference of several words
   ("JFK" for "John F. Kennedy", "USA" for "United States of America", "WW2" for "World War
   II"). A reference whose meaning is in a sign that normalization would drop ("O-", "AB+",
   "C#") or that is one character ("D") is matched with its sign and its case.
3. :func:`another_name` drops a mention of a short reference that names someone or something
   else: "Leopold Mozart" for ["Wolfgang Amadeus Mozart", "Mozart"], "Robert F. Kennedy" for
   ["John F. Kennedy", "Kennedy"], "the Pakistani rupee" for ["Indian rupee", "rupee"].
4. :func:`unclaimed` drops a mention the answer does not claim (:mod:`.claims`): denied
   ("not Canberra", "Sydney? No, Canberra."), a point of comparison ("larger than Jupiter"),
   given another rank than the one asked ("Saturn is the seventh planet" for the sixth), said
   by others and then corrected ("X is often cited, but it's actually Y"), or the possessive of
   a relative who is named ("Leo Tolstoy's contemporary Fyodor Dostoevsky"); or one of several
   candidates (:mod:`.candidates`: "Canberra or Sydney", "X, Y or Z", "maybe X, maybe Y",
   "between X and Y", "X and Y, not sure which", one example in "many countries, including
   Colombia, Vietnam and Brazil").

Limits (see docs/judges.md for the figures): a paraphrase without the reference's
words ("the Bard of Avon", "Honest Abe", "Jeanne d'Arc"), a symbol or formula for a name ("Hg"
for mercury, "NaCl"), an answer that contradicts the reference in another clause ("they absorb
oxygen and release carbon dioxide"), a reference inside another name ("New York" for "York",
"Leopold Mozart" when "Mozart" is the only reference) and a plain list that names the
reference among others without "or" or an example cue ("Kangaroos live in Australia, New
Guinea and nearby islands" counts) are beyond a lexical rule; the ``nli`` and ``llm`` judges
read meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from . import candidates, claims
from .answer_words import BOUNDARY, Word, plain, roman_value, words
from .claims import FILLERS, HEDGE_ADVERBS, NEGATIONS

# words that stand before a name without being another name: titles and kinds of place
_TITLES = {"mr", "mrs", "ms", "dr", "sir", "dame", "lord", "lady", "saint", "st", "king",
           "queen", "prince", "princess", "president", "general", "captain", "professor",
           "emperor", "empress", "tsar", "czar", "pope", "madame", "mme", "mount", "mt",
           "lake", "river", "cape", "fort", "port", "san", "santa", "city", "state", "isle"}
# words written in capitals that are words, not initialisms ("NO" is not "New Orleans")
_CUE_WORDS = FILLERS | NEGATIONS
# words an initialism skips ("USA" for "United States of America"), particles of a name
_INITIALISM_SKIPS = {"of", "and", "for", "de", "da", "del", "von", "van", "le", "la", "jr",
                     "sr"}


@dataclass(frozen=True)
class Mention:
    """Where a reference stands in an answer's word list: ``words[start:end]``."""

    reference: str
    start: int
    end: int
    how: str  # "whole", "without question words", "last name", "initialism"


def _same(said: Word, ref: Word, strict: bool) -> bool:
    """An answer's word matches a reference's word: the same text, and the same sign when
    the reference has one ("O-" is not "O positive"); ``strict`` (a one-character reference):
    the same sign and, for a letter, the same case ("D", not the "d" of another word)."""
    if said.text != ref.text:
        return False
    if strict:
        return said.sign == ref.sign and (said.capital == ref.capital
                                          or not ref.text.isalpha())
    return not ref.sign or said.sign == ref.sign


def _match_at(answer: list[Word], pos: int, ref: list[Word], optional: set[int],
              strict: bool) -> tuple[int, int] | None:
    """(end, words matched) of a match of ``ref`` at ``pos`` with the words at ``optional``
    indices allowed to be missing (longest match first), or None. A comma may stand in the
    answer or in the reference between two of its words, or in both."""
    def go(i: int, j: int, got: int) -> tuple[int, int] | None:
        if j == len(ref):
            return i, got
        if ref[j].text == BOUNDARY:
            if i < len(answer) and answer[i].text == BOUNDARY and answer[i].raw == ",":
                return go(i + 1, j + 1, got) or go(i, j + 1, got)
            return go(i, j + 1, got)
        if i < len(answer) and _same(answer[i], ref[j], strict):
            found = go(i + 1, j + 1, got + 1)
            if found is not None:
                return found
        if got and i < len(answer) and answer[i].text == BOUNDARY and answer[i].raw == ",":
            found = go(i + 1, j, got)
            if found is not None:
                return found
        if j in optional:
            return go(i, j + 1, got)
        return None

    return go(pos, 0, 0)


def _reference_words(reference: str) -> list[Word]:
    """A reference's words with its inner boundaries (commas), none at its ends."""
    ref = words(reference)
    while ref and ref[0].text == BOUNDARY:
        ref.pop(0)
    while ref and ref[-1].text == BOUNDARY:
        ref.pop()
    return ref


def mentions(answer: list[Word], reference: str, question: str) -> list[Mention]:
    """Every place ``reference`` stands in ``answer`` (see the module docstring, step 2).

    >>> [m.how for m in mentions(words("The Pacific."), "Pacific Ocean",
    ...                          "What is the largest ocean on Earth?")]
    ['without question words']
    >>> [m.how for m in mentions(words("O positive"), "O-", "Universal donor?")]
    []
    """
    ref = _reference_words(reference)
    names = [w for w in ref if w.text != BOUNDARY]
    if not names:
        return []
    strict = len(names) == 1 and len(names[0].text) == 1
    asked = set(plain(question))
    optional = {j for j, w in enumerate(ref) if w.text != BOUNDARY and w.text in asked}
    if len(optional) == len(names):
        optional = set()  # every word is in the question: the whole reference is needed
    found: list[Mention] = []
    for pos in range(len(answer)):
        if answer[pos].text == BOUNDARY:
            continue
        match = _match_at(answer, pos, ref, optional, strict)
        if match is not None and match[1] > 0:
            how = "whole" if match[1] == len(names) else "without question words"
            found.append(Mention(reference, pos, match[0], how))
    if not found and _asks_for_a_person(question):
        found = _last_names(answer, reference, [w.text for w in names], asked)
    return found + initialisms(answer, reference)


def _asks_for_a_person(question: str) -> bool:
    return any(w in ("who", "whom", "whose") for w in plain(question)[:3])


def _last_names(answer: list[Word], reference: str, ref: list[str],
                asked: set[str]) -> list[Mention]:
    """"Armstrong" for "Neil Armstrong" when a "who" question asks for a person (another
    first name before it is :func:`another_name`'s concern)."""
    if len(ref) < 2 or not ref[-1].isalpha() or len(ref[-1]) < 3 or ref[-1] in asked:
        return []
    return [Mention(reference, pos, pos + 1, "last name")
            for pos, w in enumerate(answer) if w.text == ref[-1]]


def initials(reference: str) -> set[str]:
    """The initialisms of a reference of two words or more: the first letters of its words
    (numbers whole), with and without the small words of a name.

    >>> sorted(initials("United States of America")), sorted(initials("World War II"))
    (['usa', 'usoa'], ['ww2'])
    """
    names = plain(reference)
    if len(names) < 2:
        return set()
    every = "".join(w if w.isdigit() else w[0] for w in names)
    short = "".join(w if w.isdigit() else w[0] for w in names if w not in _INITIALISM_SKIPS)
    return {every, short} if len(short) >= 2 else {every}


def _spellings(word: Word) -> set[str]:
    """An upper-case word as an initialism: as written, and with a roman numeral at its end
    read as a number ("WWII" -> "ww2")."""
    out = {word.text}
    raw = word.raw.upper()
    for k in range(1, len(raw)):
        tail = raw[k:]
        if set(tail) <= set("IVX") and raw[:k].isalpha() and len(tail) <= 4:
            out.add(raw[:k].lower() + str(roman_value(tail)))
            break
    return out


def initialisms(answer: list[Word], reference: str) -> list[Mention]:
    """Words written in capitals that are the initialism of ``reference`` ("JFK" for "John
    F. Kennedy", "NYC" for "New York City", "WW2" and "WWII" for "World War II").

    >>> [m.how for m in initialisms(words("The USA."), "United States of America")]
    ['initialism']
    >>> initialisms(words("RFK"), "John F. Kennedy"), initialisms(words("NO"), "New Orleans")
    ([], [])
    """
    wanted = initials(reference)
    return [Mention(reference, pos, pos + 1, "initialism") for pos, w in enumerate(answer)
            if w.upper and w.text not in _CUE_WORDS and wanted & _spellings(w)]


def _other_references(reference: str, references: Sequence[str]) -> list[list[str]]:
    """The references that end with ``reference`` and are longer ("Wolfgang Amadeus Mozart"
    for "Mozart")."""
    short = plain(reference)
    out = []
    for other in references:
        long = plain(other)
        if len(long) > len(short) and long[-len(short):] == short:
            out.append(long)
    return out


def _not_a_name(word: Word, asked: set[str]) -> bool:
    return (word.raw in FILLERS or word.raw in HEDGE_ADVERBS or word.raw in _TITLES
            or word.text in asked or word.raw.endswith("ly") or word.possessive)


def another_name(answer: list[Word], mention: Mention, question: str,
                 references: Sequence[str]) -> str | None:
    """The mention is the end of another name: a last name found alone, or a short reference
    that ends a longer one ("Mozart" of "Wolfgang Amadeus Mozart"), right after capitalized
    words or initials none of which is a name of that longer reference ("Leopold Mozart",
    "Robert F. Kennedy", "the Pakistani rupee"). One of its names among them settles it
    ("Physicist Marie Curie", "John Fitzgerald Kennedy", "W. A. Mozart"); titles and kinds of
    place ("Sir", "President", "Mount"), the question's words and a possessive ("Egypt's
    Nile") are not names, and particles ("van", "de") are passed over ("Theo van Gogh" is
    another person for ["Vincent van Gogh", "Van Gogh"]).

    >>> said = words("Robert F. Kennedy")
    >>> refs = ["John F. Kennedy", "Kennedy"]
    >>> another_name(said, mentions(said, "Kennedy", "Which president?")[0], "Which president?",
    ...              refs)
    "'robert' before it is not in any reference"
    """
    if mention.how == "last name":
        longer = [plain(mention.reference)]
    else:
        longer = _other_references(mention.reference, references)
    if not longer:
        return None
    given = {w for name in longer for w in name if len(w) > 1}
    letters = {w[0] for name in longer for w in name}
    asked = set(plain(question))
    other = None
    pos = mention.start - 1
    while pos >= 0 and answer[pos].text != BOUNDARY:
        w = answer[pos]
        if w.text in _INITIALISM_SKIPS:  # "van", "de": part of any name
            pos -= 1
            continue
        if _not_a_name(w, asked) or not (w.capital or w.upper):
            break
        if w.text in given:
            return None  # one of the reference's own names
        if len(w.text) > 1 or w.text not in letters:
            other = other or w.text
        pos -= 1
    return None if other is None else f"{other!r} before it is not in any reference"


def unclaimed(answer: list[Word], start: int, end: int, question: str,
              references: Sequence[str]) -> str | None:
    """Why the mention ``answer[start:end]`` is not the answer's claim (None: it is): the
    rules of :mod:`.claims` (denied, taken back, another rank, corrected hearsay, a relative),
    then those of :mod:`.candidates` (one of several)."""
    why = claims.denied(answer, start, end) or claims.retracted(answer, start, end) \
        or claims.another_rank(answer, start, end, question) \
        or claims.corrected(answer, start, end)
    if why:
        return why
    for rule, name in ((candidates.other_candidates, "one of several candidates"),
                       (candidates.hedged_alternatives, "one of several hedged candidates"),
                       (candidates.undecided_list, "one of a list the answer cannot choose from"),
                       (candidates.example, "one example"),
                       (claims.relative_of_another, "not the subject")):
        found = rule(answer, start, end, question, references)
        if found:
            return f"{name} ({found})"
    return None


def read(question: str, answer: str, references: Sequence[str]) -> tuple[bool, str]:
    """(accepted, why): the ``contains`` judge's verdict with its reason in words. Without a
    longer reference, a name before a short one cannot be told from its own (the second
    example: "Leopold Mozart" passes for ["Mozart"] alone).

    >>> read("Which composer wrote The Magic Flute?", "W. A. Mozart",
    ...      ["Wolfgang Amadeus Mozart", "Mozart"])
    (True, "'Mozart' (whole)")
    >>> read("Which composer wrote The Magic Flute?", "Leopold Mozart", ["Mozart"])
    (True, "'Mozart' (whole)")
    """
    said = words(answer)
    if not any(w.text != BOUNDARY for w in said):
        return False, "the answer is empty"
    reasons = []
    for reference in references:
        for m in mentions(said, reference, question):
            other = another_name(said, m, question, references)
            why = f"another name ({other})" if other else unclaimed(
                said, m.start, m.end, question, references)
            if why is None:
                return True, f"{reference!r} ({m.how})"
            reasons.append(f"{reference!r} is named but not claimed: {why}")
    if reasons:
        return False, "; ".join(dict.fromkeys(reasons))
    return False, "no reference in the answer"
