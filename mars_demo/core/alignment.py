"""Map the importance model's phrases onto the LLM's tokens by character offsets.

MARS (paper eq. (9)-(10)) needs, for every LLM token, the phrase that holds it
(``phrase_of_token`` for :func:`mars_demo.core.scoring.token_importance`). The phrases come from
a different tokenizer (the importance model's words), so both sides are expressed as character
spans ``(start, end)`` into the answer text, end exclusive, and matched by position, never by
comparing decoded strings. Nothing here computes a score; the mapping only decides which tokens
carry which phrase's weight (and so how the uncertainty, higher = less trustworthy, comes out).

:func:`align_phrases` offers two rules: this project's (``"default"``) and the one of the
published LLM_Uncertainty code (``"paper-code"``: whitespace tokens join the phrase before them,
phrases sharing a token are merged with the mean of their raw scores), both on offsets.
"""

from __future__ import annotations

import operator
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from . import _validation as check

Span = tuple[int, int]

# "default": this project's offsets rule; "paper-code": the published LLM_Uncertainty code's rule
ALIGNMENT_RULES = ("default", "paper-code")


@dataclass(frozen=True)
class Alignment:
    """Result of :func:`align_tokens_to_phrases`.

    Attributes:
        phrase_of_token: for each token, the index of its phrase in the ORIGINAL phrase list.
        unaligned_phrases: phrases that received no token, ascending.
        fallback_tokens: tokens with non-whitespace characters outside every phrase, attached to
            the nearest phrase, ascending.
        warnings: one English sentence per problem above, quoting the token or phrase text.
    """

    phrase_of_token: list[int]
    unaligned_phrases: list[int]
    fallback_tokens: list[int]
    warnings: list[str]


@dataclass(frozen=True)
class PhraseAlignment:
    """Result of :func:`align_phrases`: the phrases that carry weight, and their tokens.

    Attributes:
        phrase_spans: character span of each weighted phrase, in text order; under
            ``"paper-code"`` a merged phrase runs from its first member's start to its last
            member's end.
        phrase_scores: raw (not yet normalized) score of each weighted phrase; a merged phrase
            has the MEAN of its members' raw scores.
        members: for each weighted phrase, the indices of the ORIGINAL phrases it holds
            (one index unless phrases were merged).
        phrase_of_token: for each token, the index of its phrase in ``phrase_spans``; every
            weighted phrase holds at least one token.
        dropped_phrases: original phrases that received no token and carry no weight,
            ascending (the other phrases' weights are renormalized without them).
        warnings: one English sentence per problem, for the user.
    """

    phrase_spans: list[Span]
    phrase_scores: list[float]
    members: list[list[int]]
    phrase_of_token: list[int]
    dropped_phrases: list[int]
    warnings: list[str]


def align_tokens_to_phrases(
    text: str, token_spans: Sequence[Span], phrase_spans: Sequence[Span]
) -> Alignment:
    """Assign every LLM token to a phrase by character offsets (feeds eq. (10)'s u).

    Rules, for spans ``(start, end)`` into ``text`` (end exclusive):

    - a token whose non-whitespace characters overlap phrases belongs to the phrase holding
      most of them (ties: the earlier phrase);
    - a whitespace-only or empty token joins the following phrase, i.e. that of the next token
      with a phrase of its own; after the last such token, the preceding one;
    - a token with non-whitespace characters outside every phrase goes to the nearest phrase by
      character distance (ties: the following phrase) and is reported in ``fallback_tokens``;
    - a phrase that gets no token is reported in ``unaligned_phrases``.

    If no token has a non-whitespace character, every token goes to the nearest phrase by
    position, with a warning. Runs in O(N + (T + K) log K) for N characters, T tokens and K
    phrases.

    Args:
        text: the answer text.
        token_spans: the LLM tokens' character spans, sorted and non-overlapping (gaps allowed),
            e.g. a fast tokenizer's ``offset_mapping``.
        phrase_spans: the phrases' character spans, sorted and non-overlapping; at least one.

    Raises:
        ValueError: ``text`` not a string; no phrases; a span that is not two integers, out of
            range or with start > end; unsorted or overlapping spans.

    Example: byte-level BPE tokens "It", " is", " Mars" over three one-word phrases; the
    leading spaces do not matter.

    >>> align_tokens_to_phrases("It is Mars", [(0, 2), (2, 5), (5, 10)], [(0, 2), (3, 5), (6, 10)])
    Alignment(phrase_of_token=[0, 1, 2], unaligned_phrases=[], fallback_tokens=[], warnings=[])
    """
    check.text(text, "text")
    tokens = check.spans(token_spans, text, "token_spans")
    phrases = check.spans(phrase_spans, text, "phrase_spans")
    if not phrases:
        raise ValueError("phrase_spans is empty; at least one phrase is needed to align tokens")
    starts = [start for start, _ in phrases]
    ends = [end for _, end in phrases]
    nonspace = [0, *accumulate(int(not char.isspace()) for char in text)]  # count in text[:i]

    phrase_of: list[int | None] = []  # None: whitespace-only or empty, decided below
    fallback_tokens: list[int] = []
    warnings: list[str] = []
    for index, (start, end) in enumerate(tokens):
        if nonspace[end] == nonspace[start]:
            phrase_of.append(None)
            continue
        phrase = _most_overlapping_phrase(start, end, starts, ends, nonspace)
        if phrase is None:
            token = text[start:end]
            phrase = _nearest_phrase(*_nonspace_extent(token, start), starts, ends)
            fallback_tokens.append(index)
            warnings.append(
                f"Token {index + 1} {token!r} lies outside every phrase; it was attached to the "
                f"nearest phrase, {phrase + 1} {_quote(text, phrases[phrase])}."
            )
        phrase_of.append(phrase)

    _fill_gaps(phrase_of)
    if phrase_of and phrase_of[0] is None:  # no token has a non-whitespace character
        phrase_of = [_nearest_phrase(start, end, starts, ends) for start, end in tokens]
        warnings.append(
            "No token has a non-whitespace character; each token was attached to the nearest "
            "phrase by position."
        )

    unaligned = sorted(set(range(len(phrases))).difference(phrase_of))
    warnings.extend(
        f"Phrase {k + 1} {_quote(text, phrases[k])} received no token: the tokens over it belong "
        f"mostly to other phrases, or no token covers it."
        for k in unaligned
    )
    return Alignment(phrase_of, unaligned, fallback_tokens, warnings)


def align_phrases(
    text: str,
    token_spans: Sequence[Span],
    phrase_spans: Sequence[Span],
    phrase_scores: Sequence[float],
    rule: str = "default",
) -> PhraseAlignment:
    """The phrases that carry MARS weight, their raw scores and each token's phrase (eq. (10)).

    Feed the result to :func:`mars_demo.core.scoring.token_importance` as
    ``token_importance(a.phrase_of_token, a.phrase_scores, token_logprobs, ...)``: the
    normalization (sum or softmax) runs over ``phrase_scores``, i.e. AFTER any merging.

    - ``"default"`` (this project): :func:`align_tokens_to_phrases`. A token shared by two
      phrases goes to the phrase holding most of its non-whitespace characters (ties: the
      earlier); a whitespace-only or empty token joins the phrase AFTER it; phrases left
      without tokens are dropped (with a warning) and the rest renormalized.
    - ``"paper-code"`` (the published LLM_Uncertainty code, ``get_likelihoods.py``): adjacent
      phrases that share an LLM token are merged into one phrase whose raw score is the MEAN of
      theirs (normalization comes after merging); a whitespace-only or empty token joins the
      phrase BEFORE it (tokens before the first phrase join the first). The published code finds
      this by comparing decoded token strings with the phrases, without spaces and lower-cased,
      taking the longest run of tokens that matches; here the same grouping is computed from
      character offsets, which agrees wherever the published comparison finishes. Where it
      would not finish (it loops forever when no run of tokens matches the next phrases: a
      non-whitespace character outside every phrase, a phrase character under no token, or no
      token with a non-whitespace character), this rule does what ``"default"`` does for those
      tokens or phrases and says so in a warning.

    Args:
        text: the answer text.
        token_spans: the LLM tokens' character spans, sorted and non-overlapping.
        phrase_spans: the phrases' character spans, sorted and non-overlapping; at least one.
        phrase_scores: one raw score >= 0 per phrase (e.g. the importance model's sigmoid).
        rule: ``"default"`` or ``"paper-code"``.

    Raises:
        ValueError: as :func:`align_tokens_to_phrases`; scores not one finite value >= 0 per
            phrase; an unknown rule.

    Example: "It's Mars." as tokens ``It|'s| Mars|.`` against phrases "It'" and "s Mars.":
    the token "'s" straddles both phrases, so the published rule merges them (score
    (0.2 + 0.6) / 2); the default rule gives "'s" to the earlier phrase (a tie) and keeps both.

    >>> tokens, phrases = [(0, 2), (2, 4), (4, 9), (9, 10)], [(0, 3), (3, 10)]
    >>> merged = align_phrases("It's Mars.", tokens, phrases, [0.2, 0.6], "paper-code")
    >>> merged.phrase_spans, merged.phrase_scores, merged.phrase_of_token
    ([(0, 10)], [0.4], [0, 0, 0, 0])
    >>> align_phrases("It's Mars.", tokens, phrases, [0.2, 0.6]).phrase_of_token
    [0, 0, 1, 1]
    """
    rule = check.one_of(rule, ALIGNMENT_RULES, "rule")
    check.text(text, "text")
    phrases = check.spans(phrase_spans, text, "phrase_spans")
    if not phrases:
        raise ValueError("phrase_spans is empty; at least one phrase is needed to align tokens")
    scores = check.nonnegative_vector(phrase_scores, "phrase_scores")
    check.same_length(scores, "phrase_scores", phrases, "phrase_spans")
    if rule == "default":
        al = align_tokens_to_phrases(text, token_spans, phrases)
        kept = sorted(set(al.phrase_of_token))
        groups = [[k] for k in kept]
        local = {k: g for g, k in enumerate(kept)}
        phrase_of_token = [local[k] for k in al.phrase_of_token]
        warnings = list(al.warnings)
    else:
        tokens = check.spans(token_spans, text, "token_spans")
        groups, phrase_of_token, warnings = _paper_code_groups(text, tokens, phrases)
    covered = {k for group in groups for k in group}
    dropped = [k for k in range(len(phrases)) if k not in covered]
    if dropped and groups:
        warnings.append(
            f"{len(dropped)} of {len(phrases)} phrases received no LLM token and were left out of "
            "the importance weights; the other phrases' weights were renormalized."
        )
    return PhraseAlignment(
        phrase_spans=[(phrases[g[0]][0], phrases[g[-1]][1]) for g in groups],
        phrase_scores=[check.mean(scores[g], "phrase_scores") for g in groups],
        members=groups,
        phrase_of_token=phrase_of_token,
        dropped_phrases=dropped,
        warnings=warnings,
    )


def _paper_code_groups(
    text: str, tokens: list[Span], phrases: list[Span]
) -> tuple[list[list[int]], list[int], list[str]]:
    """The published code's grouping: (groups of phrase indices, group of each token, warnings)."""
    starts = [start for start, _ in phrases]
    ends = [end for _, end in phrases]
    nonspace = [0, *accumulate(int(not char.isspace()) for char in text)]
    hang = (
        "The published code compares decoded strings here and would never finish; this answer "
        "was aligned as the default recipe does instead."
    )
    warnings: list[str] = []
    joined = [False] * len(phrases)  # joined[k]: phrase k is merged with phrase k + 1
    first_phrase: list[int | None] = []  # per token: first phrase sharing a character with it
    outside = 0  # non-whitespace token characters outside every phrase
    for index, (start, end) in enumerate(tokens):
        inside = []
        phrase = bisect_right(ends, start)  # first phrase ending after the token starts
        while phrase < len(starts) and starts[phrase] < end:
            if nonspace[min(end, ends[phrase])] > nonspace[max(start, starts[phrase])]:
                inside.append(phrase)
            phrase += 1
        token_chars = nonspace[end] - nonspace[start]
        shared = sum(
            nonspace[min(end, ends[k])] - nonspace[max(start, starts[k])] for k in inside
        )
        outside += token_chars - shared
        if inside:
            for k in range(inside[0], inside[-1]):
                joined[k] = True
            first_phrase.append(inside[0])
        elif token_chars:
            token = text[start:end]
            nearest = _nearest_phrase(*_nonspace_extent(token, start), starts, ends)
            warnings.append(
                f"Token {index + 1} {token!r} lies outside every phrase; it was attached to the "
                f"nearest phrase, {nearest + 1} {_quote(text, phrases[nearest])}."
            )
            first_phrase.append(nearest)
        else:
            first_phrase.append(None)
    # Whitespace-only and empty tokens join the phrase before them (the first: the one after).
    preceding = next((k for k in first_phrase if k is not None), None)
    if preceding is None and tokens:
        first_phrase = [_nearest_phrase(start, end, starts, ends) for start, end in tokens]
        warnings.append(
            "No token has a non-whitespace character; each token was attached to the nearest "
            "phrase by position."
        )
        outside = 1  # the published code would not finish either
    for index, k in enumerate(first_phrase):
        if k is None:
            first_phrase[index] = preceding
        preceding = first_phrase[index]
    group_of_phrase = list(accumulate((0, *(int(not j) for j in joined[:-1]))))
    n_groups = group_of_phrase[-1] + 1
    members: list[list[int]] = [[] for _ in range(n_groups)]
    for k, g in enumerate(group_of_phrase):
        members[g].append(k)
    held = sorted({group_of_phrase[k] for k in first_phrase})
    local = {g: i for i, g in enumerate(held)}
    uncovered = sum(
        nonspace[end] - nonspace[start] for start, end in phrases
    ) - _covered_nonspace(tokens, phrases, nonspace)
    if outside or uncovered:
        warnings.append(hang)
    return (
        [members[g] for g in held],
        [local[group_of_phrase[k]] for k in first_phrase],
        warnings,
    )


def _covered_nonspace(tokens: list[Span], phrases: list[Span], nonspace: list[int]) -> int:
    """Non-whitespace characters of the phrases that lie under some token."""
    total, t = 0, 0
    for start, end in phrases:
        while t < len(tokens) and tokens[t][1] <= start:
            t += 1
        u = t
        while u < len(tokens) and tokens[u][0] < end:
            lo, hi = max(start, tokens[u][0]), min(end, tokens[u][1])
            total += nonspace[hi] - nonspace[lo]
            u += 1
    return total


def word_spans(text: str) -> list[Span]:
    """Character spans of the importance model's words, ``re.findall(r"\\w+|[^\\w\\s]", text)``.

    Each word is a run of word characters or a single other non-whitespace character, as the
    MARS importance model was trained. Feeds eq. (10)'s importance u through the phrases.

    Example:

    >>> word_spans('It is "Mars".')
    [(0, 2), (3, 5), (6, 7), (7, 11), (11, 12), (12, 13)]
    """
    check.text(text, "text")
    return [match.span() for match in re.finditer(r"\w+|[^\w\s]", text)]


def phrase_spans_from_starts(
    word_spans: Sequence[Span], phrase_starts: Sequence[int]
) -> list[Span]:
    """Phrase character spans from word spans and the word indices where phrases begin.

    Each phrase runs from its first word's start to the end of the word before the next phrase
    start (or the last word). Used to place the importance model's phrases (eq. (10)) in the
    text.

    Args:
        word_spans: character spans of the words, e.g. from :func:`word_spans`.
        phrase_starts: strictly increasing word indices, beginning with 0.

    Raises:
        ValueError: ``phrase_starts`` empty, not beginning with 0, not strictly increasing, not
            integers, or beyond the last word.

    Example: "The capital city is Paris" with phrases starting at words 0 and 3.

    >>> phrase_spans_from_starts(word_spans("The capital city is Paris"), [0, 3])
    [(0, 16), (17, 25)]
    """
    try:
        starts = [operator.index(start) for start in phrase_starts]
    except TypeError as error:
        raise ValueError(f"phrase_starts must be integers, got {phrase_starts!r}") from error
    if not starts or starts[0] != 0:
        raise ValueError(f"phrase_starts must begin with 0 (the first word), got {starts}")
    if any(later <= earlier for earlier, later in zip(starts, starts[1:])):
        raise ValueError(f"phrase_starts must be strictly increasing, got {starts}")
    if starts[-1] >= len(word_spans):
        raise ValueError(
            f"phrase_starts {starts} refers to word {starts[-1]}, but there are only "
            f"{len(word_spans)} words"
        )
    ends = [*starts[1:], len(word_spans)]
    return [(word_spans[first][0], word_spans[last - 1][1]) for first, last in zip(starts, ends)]


def _most_overlapping_phrase(
    start: int, end: int, starts: list[int], ends: list[int], nonspace: list[int]
) -> int | None:
    """The phrase sharing most non-whitespace characters with [start, end); ties: earlier."""
    best, best_overlap = None, 0
    phrase = bisect_right(ends, start)  # first phrase ending after the token starts
    while phrase < len(starts) and starts[phrase] < end:
        overlap = nonspace[min(end, ends[phrase])] - nonspace[max(start, starts[phrase])]
        if overlap > best_overlap:
            best, best_overlap = phrase, overlap
        phrase += 1
    return best


def _nearest_phrase(start: int, end: int, starts: list[int], ends: list[int]) -> int:
    """The phrase closest to [start, end) by character distance; ties: the following one."""
    before = bisect_right(ends, start) - 1  # last phrase ending at or before start
    after = bisect_left(starts, end)  # first phrase starting at or after end
    if after > before + 1:  # phrases in between touch [start, end): distance 0
        return after - 1
    candidates = []
    if before >= 0:
        candidates.append((start - ends[before], -before))
    if after < len(starts):
        candidates.append((starts[after] - end, -after))
    return -min(candidates)[1]


def _nonspace_extent(token: str, start: int) -> Span:
    """Span from the token's first to its last non-whitespace character."""
    return start + len(token) - len(token.lstrip()), start + len(token.rstrip())


def _fill_gaps(phrase_of: list[int | None]) -> None:
    """Give each None the next non-None value, or the previous one after the last."""
    following = None
    for index in reversed(range(len(phrase_of))):
        if phrase_of[index] is None:
            phrase_of[index] = following
        following = phrase_of[index]
    preceding = None
    for index, phrase in enumerate(phrase_of):
        if phrase is None:
            phrase_of[index] = preceding
        preceding = phrase_of[index]


def _quote(text: str, span: Span) -> str:
    return repr(text[span[0] : span[1]])
