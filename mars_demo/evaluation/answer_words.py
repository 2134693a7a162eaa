"""An answer's words as the ``contains`` judge reads them (see :mod:`.containment`).

:func:`words` splits a text into normalized words and clause boundaries: Unicode compatibility
forms (``H₂O`` -> ``h2o``), accents folded (``Paraná`` -> ``parana``), lowercase, a possessive
``'s`` dropped, ``n't`` read as ``not``, thousands separators joined (``299,792`` and
``300 000`` -> ``299792``, ``300000``), other punctuation removed inside a word (``Nur-Sultan``
-> ``nursultan``) as SQuAD's normalization does, the articles a/an/the dropped, a plural ``s``
folded (``diamonds`` -> ``diamond``, ``butterflies`` -> ``butterfly``), number words read as
digits (``twenty-four`` -> ``24``, ``two hundred and six`` -> ``206``, ``nineteen eighty-nine``
-> ``1989``), ordinals as ``Nth`` (``fourth``, ``4th`` -> ``4th``; ``first`` -> ``1th``) and
upper-case roman numerals of two letters or more as digits (``World War II`` -> ``world war
2``). Punctuation between words (``, ; : . ! ? ( )`` and dashes) and the words "but",
"however", "although", "though", "whereas", "while", "yet", "so", "because", "since" end a
clause: they become :data:`BOUNDARY`. Pure Python (``re``, ``unicodedata``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Sequence

BOUNDARY = "|"  # a clause boundary in the word list
_BOUNDARY_WORDS = {"but", "however", "although", "though", "whereas", "while", "yet", "so",
                   "because", "since"}
_ARTICLES = {"a", "an", "the"}
_UNITS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
          "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
          "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
          "eighteen": 18, "nineteen": 19}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
             "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11,
             "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15,
             "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
             "twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50,
             "sixtieth": 60, "seventieth": 70, "eightieth": 80, "ninetieth": 90,
             "hundredth": 100, "thousandth": 1000}
_NUMBER_WORDS = set(_UNITS) | set(_TENS) | set(_SCALES) | {"hundred"}

# a word (letters, digits, inner apostrophes/hyphens/dots/commas), or a boundary mark
_TOKEN = re.compile(r"[^\W_]+(?:['.,\-/][^\W_]+)*|[.,;:!?()\[\]\u2013\u2014]|\s-\s")
_DIGITS_GROUPED = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_ORDINAL_DIGITS = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_ROMAN = re.compile(r"^X{0,3}(?:IX|IV|V?I{0,3})$")  # II .. XXXIX, upper case, two letters or more
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10}


def roman_value(numeral: str) -> int:
    """The value of an upper-case roman numeral of I, V and X.

    >>> roman_value("XIV")
    14
    """
    values = [_ROMAN_VALUES[c] for c in numeral]
    return sum(-v if k + 1 < len(values) and v < values[k + 1] else v
               for k, v in enumerate(values))


@dataclass(frozen=True)
class Word:
    """One normalized word of a text; ``text`` is :data:`BOUNDARY` for a clause boundary.
    ``raw``: the word before the plural fold (``perhaps``, ``does``), for the cue words.
    ``capital``: the original word began with a capital letter."""

    text: str
    raw: str = ""
    capital: bool = False


def fold(text: str) -> str:
    """Compatibility forms and accents folded, lowercase kept as given.

    >>> fold("H₂O at 0 °C in Paraná")
    'H2O at 0 °C in Parana'
    """
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _singular(word: str) -> str:
    """A plural ``s`` folded: diamonds -> diamond, butterflies -> butterfly; short words,
    ``ss``, ``us`` and ``is`` endings stay (bus, glass, Venus, Paris)."""
    if len(word) <= 3 or not word.isalpha() or not word.endswith("s"):
        return word
    if word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-1]


def _raw_tokens(text: str) -> list[tuple[str, bool]]:
    """(token, capital) pairs: words split at inner hyphens between number words, possessives
    and n't handled, punctuation marks kept as boundaries."""
    text = fold(text)
    text = re.sub(r"(\d{1,3}) (?=\d{3}\b)", r"\1", text)  # 300 000 -> 300000
    out: list[tuple[str, bool]] = []
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if not tok[0].isalnum():
            out.append((BOUNDARY, False))
            continue
        capital = tok[0].isupper()
        if len(tok) > 1 and _ROMAN.match(tok):
            out.append((str(roman_value(tok)), capital))  # World War II -> world war 2
            continue
        low = tok.lower()
        if low.endswith("n't"):
            stem = low[:-3]
            out += [({"ca": "can", "wo": "will", "sha": "shall"}.get(stem, stem), capital),
                    ("not", False)]
            continue
        if low == "cannot":
            out += [("can", capital), ("not", False)]
            continue
        low = re.sub(r"'s$", "", low)
        parts = low.split("-")
        if len(parts) == 2 and parts[0] in _TENS and parts[1] in _ORDINALS \
                and _ORDINALS[parts[1]] < 10:
            out.append((f"{_TENS[parts[0]] + _ORDINALS[parts[1]]}th", capital))  # twenty-first
            continue
        if len(parts) > 1 and all(p in _NUMBER_WORDS or p in _ORDINALS for p in parts):
            out += [(p, capital) for p in parts]
            continue
        out.append((low, capital))
    return out


def _clean(token: str) -> str:
    """Inner punctuation: thousands separators and dots inside a number stay a number, other
    marks are removed (SQuAD: ``nur-sultan`` -> ``nursultan``)."""
    if _DIGITS_GROUPED.match(token):
        return token.replace(",", "")
    if re.match(r"^\d+\.\d+$", token):
        return token
    return re.sub(r"['.,\-/]", "", token)


def _numbers(tokens: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """Runs of number words as digits (see :func:`parse_number_words`)."""
    out: list[tuple[str, bool]] = []
    i = 0
    while i < len(tokens):
        tok, cap = tokens[i]
        if tok in _ORDINALS:
            out.append((f"{_ORDINALS[tok]}th", cap))
            i += 1
            continue
        m = _ORDINAL_DIGITS.match(tok)
        if m:
            out.append((f"{int(m.group(1))}th", cap))
            i += 1
            continue
        if tok in _NUMBER_WORDS or (tok == "a" and i + 1 < len(tokens)
                                    and tokens[i + 1][0] in ("hundred", *_SCALES)):
            j = i
            run = []
            while j < len(tokens) and (
                    tokens[j][0] in _NUMBER_WORDS
                    or (tokens[j][0] == "and" and run and j + 1 < len(tokens)
                        and tokens[j + 1][0] in _NUMBER_WORDS)
                    or (tokens[j][0] == "a" and not run)):
                run.append(tokens[j][0])
                j += 1
            values = parse_number_words(run)
            if values:
                out += [(str(v), cap) for v in values]
                i = j
                continue
        out.append((tok, cap))
        i += 1
    return out


def parse_number_words(run: Sequence[str]) -> list[int]:
    """The numbers a run of number words says; two-digit pairs read as a year.

    >>> parse_number_words(["two", "hundred", "and", "six"])
    [206]
    >>> parse_number_words(["nineteen", "eighty", "nine"])
    [1989]
    >>> parse_number_words(["six", "seven"])
    [6, 7]
    """
    numbers: list[tuple[int, bool]] = []  # (value, said as one or two digits without a scale)
    total = group = 0
    last = None  # "unit", "teen", "tens", "hundred", "scale"
    started = False

    def close() -> None:
        nonlocal total, group, last, started
        if started:
            value = total + group
            numbers.append((value, last in ("unit", "teen", "tens") and total == 0
                            and group < 100))
        total = group = 0
        last = None
        started = False

    for w in run:
        if w in ("and", "a"):
            if w == "a":
                group, last, started = 1, "unit", True  # "a hundred"
            continue
        if w in _TENS:
            if last in ("unit", "teen", "tens"):
                close()
            group += _TENS[w]
            last, started = "tens", True
        elif w in _UNITS:
            value = _UNITS[w]
            if last in ("unit", "teen") or (last == "tens" and (value >= 10 or value == 0)):
                close()
            group += value
            last = "teen" if value >= 10 else "unit"
            started = True
        elif w == "hundred":
            group = (group or 1) * 100
            last, started = "hundred", True
        elif w in _SCALES:
            total += (group or 1) * _SCALES[w]
            group = 0
            last, started = "scale", True
    close()
    out: list[int] = []
    k = 0
    while k < len(numbers):
        value, small = numbers[k]
        if (small and 10 <= value <= 99 and k + 1 < len(numbers) and numbers[k + 1][1]
                and numbers[k + 1][0] <= 99):
            out.append(value * 100 + numbers[k + 1][0])  # nineteen twelve -> 1912
            k += 2
            continue
        out.append(value)
        k += 1
    return out


def words(text: str) -> list[Word]:
    """The normalized words of ``text`` with :data:`BOUNDARY` marks (see the module docstring).

    >>> [w.text for w in words("It's not Sydney, it's the twenty-first Canberra's.")]
    ['it', 'not', 'sydney', '|', 'it', '21th', 'canberra', '|']
    """
    out: list[Word] = []
    for tok, cap in _numbers([(_clean(t) if t != BOUNDARY else t, c)
                              for t, c in _raw_tokens(text)]):
        if not tok:
            continue
        if tok == BOUNDARY or tok in _BOUNDARY_WORDS:
            if out and out[-1].text != BOUNDARY:
                out.append(Word(BOUNDARY))
            continue
        if tok in _ARTICLES:
            continue
        out.append(Word(_singular(tok), tok, cap))
    return out


def plain(text: str) -> list[str]:
    """The words of ``text`` without boundaries (a reference's or a question's words)."""
    return [w.text for w in words(text) if w.text != BOUNDARY]
