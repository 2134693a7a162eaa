"""An answer's words as the ``contains`` judge reads them (see :mod:`.containment`).

:func:`words` splits a text into normalized words and clause boundaries: Unicode compatibility
forms (``H₂O`` -> ``h2o``), accents folded (``Paraná`` -> ``parana``), lowercase, a possessive
``'s`` dropped, ``n't`` read as ``not``, thousands separators joined (``299,792`` and
``300 000`` -> ``299792``, ``300000``), integer powers computed (``10^3``, ``10³`` ->
``1000``) and numbers scaled (``1.5 million``, ``3.6 × 10^3``), other punctuation removed
inside a word (``Nur-Sultan`` -> ``nursultan``) as SQuAD's normalization does, the articles
a/an/the dropped, a plural ``s`` folded (``diamonds`` -> ``diamond``, ``butterflies`` ->
``butterfly``), number words read as digits (``twenty-four`` -> ``24``, ``two hundred and
six`` -> ``206``, ``nineteen eighty-nine`` -> ``1989``, ``two dozen`` -> ``24``), ordinals
as ``Nth`` (``fourth``, ``4th`` -> ``4th``; ``first`` -> ``1th``), upper-case roman numerals
as digits (``World War II`` -> ``world war 2``; numerals with L, C, D or M from four letters
on, ``MCMXIV`` -> ``1914``, so that ``DC`` or ``CIV`` stay words), and dates in one order
(``20th July``, ``the 20th of July``, ``July 20`` -> ``20 july``).

Punctuation between words (``, ; : . ! ? ( )`` and dashes) and the words "but", "however",
"although", "though", "whereas", "while", "yet", "so", "because", "since" end a clause: they
become one :data:`BOUNDARY` word whose ``raw`` keeps what made it (``", but"``). The dot of an
initial (``John F. Kennedy``, ``J. K. Rowling``) or of an abbreviation before a lower-case word
(``the U.S. president``) is not a boundary. Each word also keeps what normalization would lose
and a rule needs: its capital, whether it was written in capitals (``JFK``), a sign glued after
it (``O-``, ``AB+``) and a possessive. Pure Python (``re``, ``unicodedata``).
"""

from __future__ import annotations

import dataclasses
import decimal
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
_SCALES = {"dozen": 12, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
             "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11,
             "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15,
             "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
             "twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50,
             "sixtieth": 60, "seventieth": 70, "eightieth": 80, "ninetieth": 90,
             "hundredth": 100, "thousandth": 1000}
_NUMBER_WORDS = set(_UNITS) | set(_TENS) | set(_SCALES) | {"hundred"}
_MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december"}
_MONTHS_ONLY_CAPITALIZED = {"may", "march"}  # "it may be", "the march": words too

# a word (letters, digits, inner apostrophes/hyphens/dots/commas), or a boundary mark
_TOKEN = re.compile(r"[^\W_]+(?:['.,\-/][^\W_]+)*|[.,;:!?()\[\]\u2013\u2014]|\s-\s")
_SIGNS = "+-\u2212#"  # glued after a word they change its meaning: O-, AB+, C#
_DIGITS_GROUPED = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_ORDINAL_DIGITS = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_ROMAN = re.compile(r"^M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})$")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
_SUPERSCRIPTS = str.maketrans("\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079",
                              "0123456789")


def roman_value(numeral: str) -> int:
    """The value of an upper-case roman numeral.

    >>> roman_value("XIV"), roman_value("MCMXIV")
    (14, 1914)
    """
    values = [_ROMAN_VALUES[c] for c in numeral]
    return sum(-v if k + 1 < len(values) and v < values[k + 1] else v
               for k, v in enumerate(values))


def is_roman(token: str) -> bool:
    """Whether an upper-case token is read as a roman numeral: two letters or more of I, V
    and X (``II``, ``XIV``), four or more when it uses L, C, D or M (``MCMXIV``; ``DC``,
    ``CIV`` and ``MIX`` stay words).

    >>> [is_roman(t) for t in ("II", "I", "MCMXIV", "DC", "MMXX", "IIII")]
    [True, False, True, False, True, False]
    """
    if len(token) < 2 or not _ROMAN.match(token):
        return False
    return set(token) <= set("IVX") or len(token) >= 4


@dataclass(frozen=True)
class Word:
    """One normalized word of a text; ``text`` is :data:`BOUNDARY` for a clause boundary.

    ``raw``: the word before the plural fold (``perhaps``, ``does``), for the cue words; for a
    boundary, the marks and words that made it (``", but"``). ``capital``: the original word
    began with a capital letter. ``upper``: it was written in capitals, two letters or more
    (``JFK``, ``U.S.A.``, ``WW2``). ``sign``: a sign glued after it (``-`` in ``O-``).
    ``possessive``: it carried a possessive ``'s``."""

    text: str
    raw: str = ""
    capital: bool = False
    upper: bool = False
    sign: str = ""
    possessive: bool = False


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


def _power(m: re.Match) -> str:
    base, exponent = int(m.group(1)), int(m.group(2))
    if exponent > 15 or base > 1000:
        return m.group(0)
    return str(base ** exponent)


def _scaled(m: re.Match) -> str:
    """``1.5 million`` -> ``1500000``, ``3.6 × 10^3`` (after the power) -> ``3600``; left as
    written when the product is not a whole number."""
    scale = _SCALES.get(m.group(2).lower()) or int(m.group(2))
    value = decimal.Decimal(m.group(1)) * scale
    return str(int(value)) if value == value.to_integral_value() else m.group(0)


def _initial_dot(m: re.Match) -> str:
    """``F.`` of ``John F. Kennedy`` loses its dot (not a sentence end) when it follows the
    start, a capitalized word or another initial."""
    before = m.string[:m.start()].split()
    if not before or before[-1][0].isupper():
        return m.group(1)
    return m.group(0)


def prepare(text: str) -> str:
    """The text before it is split: superscript powers written with ``^``, compatibility
    forms and accents folded, digit groups joined, integer powers computed, the dots of
    initials, titles and abbreviations inside a sentence removed.

    >>> prepare("10³ m, 1 440 min, 2^10, John F. Kennedy, the U.S. army")
    '1000 m, 1440 min, 1024, John F Kennedy, the U.S army'
    >>> prepare("3.6 × 10^3 s, 1.5 million, St. Petersburg")
    '3600 s, 1500000, St Petersburg'
    """
    text = re.sub(r"(?<=\d)([\u2070\u00b9\u00b2\u00b3\u2074-\u2079]+)",
                  lambda m: "^" + m.group(1).translate(_SUPERSCRIPTS), text)
    text = fold(text)
    text = re.sub(r"(\d{1,3}) (?=\d{3}\b)", r"\1", text)  # 300 000 -> 300000
    text = re.sub(r"\b(\d+)\s*\^\s*(\d+)\b", _power, text)  # 10^3 -> 1000
    text = re.sub(r"\b(\d+(?:\.\d+)?)\s*[x\u00d7*]\s*(10+)\b", _scaled, text)  # 3.6 × 1000
    text = re.sub(r"\b(\d+(?:\.\d+)?) (dozen|thousand|million|billion)\b", _scaled, text,
                  flags=re.I)
    text = re.sub(r"\b(Dr|Mr|Mrs|Ms|St|Mt|Ft|Jr|Sr|Prof|Gen|Capt|Lt|Col|Sgt|Rev)\.(?=\s+\w)",
                  r"\1", text)  # St. Petersburg: a title, not a sentence end
    text = re.sub(r"(?<![\w.])([A-Z])\.(?=\s+[A-Z])", _initial_dot, text)
    return re.sub(r"\b((?:[A-Za-z]\.){1,}[A-Za-z])\.(?=\s+[a-z])", r"\1", text)


@dataclass(frozen=True)
class _Token:
    text: str
    capital: bool = False
    upper: bool = False
    sign: str = ""
    possessive: bool = False


def _raw_tokens(text: str) -> list[_Token]:
    """Tokens: words split at inner hyphens between number words, possessives and n't
    handled, roman numerals read, punctuation marks kept as boundaries (their mark in
    ``sign``)."""
    text = prepare(text)
    out: list[_Token] = []
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if not tok[0].isalnum():
            out.append(_Token(BOUNDARY, sign=tok.strip()))
            continue
        after = text[m.end():m.end() + 2]
        sign = after[0] if after[:1] and after[0] in _SIGNS and not after[1:2].isalnum() else ""
        sign = "-" if sign == "\u2212" else sign
        letters = [c for c in re.sub(r"'[sS]$", "", tok) if c.isalpha()]
        mark = dict(capital=tok[0].isupper(), sign=sign,
                    upper=len(letters) >= 2 and all(c.isupper() for c in letters))
        if is_roman(tok):
            out.append(_Token(str(roman_value(tok)), **mark))  # World War II -> world war 2
            continue
        low = tok.lower()
        if low.endswith("n't"):
            stem = low[:-3]
            out += [_Token({"ca": "can", "wo": "will", "sha": "shall"}.get(stem, stem),
                           mark["capital"]), _Token("not")]
            continue
        if low == "cannot":
            out += [_Token("can", mark["capital"]), _Token("not")]
            continue
        possessive = low.endswith("'s")
        low = re.sub(r"'s$", "", low)
        parts = low.split("-")
        if len(parts) == 2 and parts[0] in _TENS and parts[1] in _ORDINALS \
                and _ORDINALS[parts[1]] < 10:
            out.append(_Token(f"{_TENS[parts[0]] + _ORDINALS[parts[1]]}th", **mark))
            continue  # twenty-first
        if len(parts) > 1 and all(p in _NUMBER_WORDS or p in _ORDINALS for p in parts):
            out += [_Token(p, **mark) for p in parts]
            continue
        out.append(_Token(low, possessive=possessive, **mark))
    return out


def _clean(token: str) -> str:
    """Inner punctuation: thousands separators and dots inside a number stay a number, other
    marks are removed (SQuAD: ``nur-sultan`` -> ``nursultan``)."""
    if _DIGITS_GROUPED.match(token):
        return token.replace(",", "")
    if re.match(r"^\d+\.\d+$", token):
        return token
    return re.sub(r"['.,\-/]", "", token)


def _numbers(tokens: list[_Token]) -> list[_Token]:
    """Runs of number words as digits (see :func:`parse_number_words`), ordinals as Nth."""
    out: list[_Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.text in _ORDINALS:
            out.append(dataclasses.replace(tok, text=f"{_ORDINALS[tok.text]}th"))
            i += 1
            continue
        m = _ORDINAL_DIGITS.match(tok.text)
        if m:
            out.append(dataclasses.replace(tok, text=f"{int(m.group(1))}th"))
            i += 1
            continue
        if tok.text in _NUMBER_WORDS or (tok.text == "a" and i + 1 < len(tokens)
                                         and tokens[i + 1].text in ("hundred", *_SCALES)):
            j = i
            run: list[str] = []
            while j < len(tokens) and (
                    tokens[j].text in _NUMBER_WORDS
                    or (tokens[j].text == "and" and run and j + 1 < len(tokens)
                        and tokens[j + 1].text in _NUMBER_WORDS)
                    or (tokens[j].text == "a" and not run)):
                run.append(tokens[j].text)
                j += 1
            values = parse_number_words(run)
            if values:
                out += [dataclasses.replace(tok, text=str(v)) for v in values]
                i = j
                continue
        out.append(tok)
        i += 1
    return out


def _is_month(tok: _Token) -> bool:
    return tok.text in _MONTHS and (tok.capital or tok.text not in _MONTHS_ONLY_CAPITALIZED)


def _day(tok: _Token) -> str | None:
    """The day of the month a token says ("20th", "20"), or None."""
    text = tok.text[:-2] if tok.text.endswith("th") else tok.text
    return text if text.isdigit() and 1 <= int(text) <= 31 and len(text) <= 2 else None


def _dates(tokens: list[_Token]) -> list[_Token]:
    """A day of a month in one form, day first: ``20th July``, ``the 20th of July``,
    ``July 20th``, ``July the 20th`` and ``July 20`` -> ``20 july`` (a day next to a month;
    "May" and "March" only capitalized)."""
    out = list(tokens)
    i = 0
    while i < len(out):
        day = _day(out[i])
        nxt = i + 2 if i + 2 < len(out) and out[i + 1].text == "of" else i + 1
        ordinal = out[i].text.endswith("th")
        if day and nxt < len(out) and _is_month(out[nxt]) and (ordinal or nxt == i + 1):
            out[i:nxt] = [dataclasses.replace(out[i], text=day)]  # 20th (of) July, 20 July
        elif day and i > 0 and _is_month(out[i - 1]):
            out[i - 1:i + 1] = [dataclasses.replace(out[i], text=day), out[i - 1]]
        elif day and i > 1 and out[i - 1].text == "the" and _is_month(out[i - 2]):
            out[i - 2:i + 1] = [dataclasses.replace(out[i], text=day), out[i - 2]]
            i -= 1  # July the 4th
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
    >>> [w.text for w in words("John F. Kennedy, on the 20th of July, MCMXIV")]
    ['john', 'f', 'kennedy', '|', 'on', '20', 'july', '|', '1914']
    >>> [w.raw for w in words("Often cited, but wrong.") if w.text == BOUNDARY]
    [', but', '.']
    """
    out: list[Word] = []
    tokens = [t if t.text == BOUNDARY else dataclasses.replace(t, text=_clean(t.text))
              for t in _raw_tokens(text)]
    for tok in _dates(_numbers(tokens)):
        if not tok.text:
            continue
        if tok.text == BOUNDARY or tok.text in _BOUNDARY_WORDS:
            mark = tok.sign if tok.text == BOUNDARY else tok.text
            if out and out[-1].text == BOUNDARY:
                out[-1] = Word(BOUNDARY, f"{out[-1].raw} {mark}")
            elif out or tok.text != BOUNDARY:  # a leading "Although ..." is kept
                out.append(Word(BOUNDARY, mark))
            continue
        if tok.text in _ARTICLES:
            continue
        out.append(Word(_singular(tok.text), tok.text, tok.capital, tok.upper, tok.sign,
                        tok.possessive))
    return out


def plain(text: str) -> list[str]:
    """The words of ``text`` without boundaries (a reference's or a question's words)."""
    return [w.text for w in words(text) if w.text != BOUNDARY]
