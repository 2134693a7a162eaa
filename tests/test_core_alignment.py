"""Token-to-phrase alignment by character offsets."""

import dataclasses
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mars_demo.core.alignment import (
    Alignment,
    align_tokens_to_phrases,
    phrase_spans_from_starts,
    word_spans,
)


def test_byte_level_bpe_tokens_with_leading_spaces():
    text = "It is Mars"
    phrases = phrase_spans_from_starts(word_spans(text), [0, 1, 2])
    assert phrases == [(0, 2), (3, 5), (6, 10)]
    # "It", " is", " Mars"
    result = align_tokens_to_phrases(text, [(0, 2), (2, 5), (5, 10)], phrases)
    assert result == Alignment([0, 1, 2], [], [], [])


def test_multi_token_phrase_and_token_spanning_words():
    text = "It's Mars"
    phrases = phrase_spans_from_starts(word_spans(text), [0, 3])  # words It ' s | Mars
    assert phrases == [(0, 4), (5, 9)]
    # "It", "'s", " Mars"
    result = align_tokens_to_phrases(text, [(0, 2), (2, 4), (4, 9)], phrases)
    assert result.phrase_of_token == [0, 0, 1]


def test_token_straddling_two_phrases_goes_to_majority_then_earlier():
    text = "abc def"
    phrases = [(0, 3), (4, 7)]
    # "a" | "bc d" (2 chars of phrase 0, 1 of phrase 1) | "ef"
    def phrase_of_token(tokens):
        return align_tokens_to_phrases(text, tokens, phrases).phrase_of_token

    assert phrase_of_token([(0, 1), (1, 5), (5, 7)]) == [0, 0, 1]
    # "ab" | "c d" (1 char each: tie, earlier phrase) | "ef"
    assert phrase_of_token([(0, 2), (2, 5), (5, 7)]) == [0, 0, 1]
    # "abc de" (3 vs 2 characters; the space does not count) | "f"
    assert phrase_of_token([(0, 6), (6, 7)]) == [0, 1]


def test_whitespace_only_token_joins_following_phrase():
    text = "It is\n\nMars"
    phrases = [(0, 2), (3, 5), (7, 11)]
    # "It", " is", "\n\n", "Mars"
    result = align_tokens_to_phrases(text, [(0, 2), (2, 5), (5, 7), (7, 11)], phrases)
    assert result.phrase_of_token == [0, 1, 2, 2]
    assert result.warnings == []


def test_whitespace_only_token_at_end_joins_preceding_phrase():
    text = "It is Mars \n"
    phrases = [(0, 2), (3, 5), (6, 10)]
    # "It", " is", " Mars", " ", "\n"
    result = align_tokens_to_phrases(text, [(0, 2), (2, 5), (5, 10), (10, 11), (11, 12)], phrases)
    assert result.phrase_of_token == [0, 1, 2, 2, 2]


def test_empty_tokens_join_following_phrase_or_preceding_at_end():
    text = "It is Mars"
    phrases = [(0, 2), (3, 5), (6, 10)]
    # "", "It", " is", "", " Mars", ""  (e.g. special tokens with empty offsets)
    tokens = [(0, 0), (0, 2), (2, 5), (5, 5), (5, 10), (10, 10)]
    result = align_tokens_to_phrases(text, tokens, phrases)
    assert result.phrase_of_token == [0, 0, 1, 2, 2, 2]
    assert result.warnings == []


def test_gaps_between_tokens_are_allowed():
    spans = [(0, 2), (3, 5), (6, 10)]  # "It", "is", "Mars" without the spaces
    result = align_tokens_to_phrases("It is Mars", spans, spans)
    assert result.phrase_of_token == [0, 1, 2]


def test_token_outside_every_phrase_falls_back_to_nearest_phrase():
    # A chunker that leaves out the final period.
    text = "It is Mars."
    tokens = [(0, 2), (2, 5), (5, 10), (10, 11)]
    result = align_tokens_to_phrases(text, tokens, [(0, 2), (3, 5), (6, 10)])
    assert result.phrase_of_token == [0, 1, 2, 2]
    assert result.fallback_tokens == [3]
    assert result.unaligned_phrases == []
    assert len(result.warnings) == 1
    assert "'.'" in result.warnings[0] and "'Mars'" in result.warnings[0]


def test_fallback_distance_ties_go_to_following_phrase():
    # "-" is 1 character from "ab" and 1 from "cd"; the leading space of " -" does not count.
    result = align_tokens_to_phrases("ab - cd", [(0, 2), (2, 4), (4, 7)], [(0, 2), (5, 7)])
    assert result.phrase_of_token == [0, 1, 1]
    assert result.fallback_tokens == [1]
    # "-" is 1 character from "ab" and 2 from "cd".
    result = align_tokens_to_phrases("ab -  cd", [(0, 2), (2, 4), (4, 8)], [(0, 2), (6, 8)])
    assert result.phrase_of_token == [0, 0, 1]


def test_phrase_without_token_is_reported():
    text = '"O"'
    phrases = phrase_spans_from_starts(word_spans(text), [0, 1, 2])  # '"', 'O', '"'
    # Tokens '"O' and '"': 'O' ties with the opening quote, which is earlier.
    result = align_tokens_to_phrases(text, [(0, 2), (2, 3)], phrases)
    assert result.phrase_of_token == [0, 2]
    assert result.unaligned_phrases == [1]
    assert result.fallback_tokens == []
    assert len(result.warnings) == 1
    assert "Phrase 2 'O'" in result.warnings[0]  # numbered from 1, as the page's table


def test_no_tokens_leaves_every_phrase_unaligned():
    result = align_tokens_to_phrases("ab cd", [], [(0, 2), (3, 5)])
    assert result.phrase_of_token == []
    assert result.unaligned_phrases == [0, 1]
    assert len(result.warnings) == 2


def test_only_whitespace_tokens_go_to_nearest_phrase_with_warning():
    # The tokens cover only the spaces around "x".
    result = align_tokens_to_phrases(" x ", [(0, 1), (2, 3)], [(1, 2)])
    assert result.phrase_of_token == [0, 0]
    assert result.unaligned_phrases == []
    assert len(result.warnings) == 1
    assert "non-whitespace" in result.warnings[0]


def test_alignment_is_frozen():
    result = align_tokens_to_phrases("ab", [(0, 2)], [(0, 2)])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.warnings = []


@pytest.mark.parametrize(
    ("tokens", "phrases", "message"),
    [
        ([(0, 2)], [], "phrase_spans is empty"),
        ([(0, 11)], [(0, 2)], "token_spans[0] = (0, 11) is out of range"),
        ([(-1, 2)], [(0, 2)], "token_spans[0] = (-1, 2) is out of range"),
        ([(3, 2)], [(0, 2)], "token_spans[0] = (3, 2) has start > end"),
        ([(0, 3), (2, 5)], [(0, 2)], "token_spans[1] = (2, 5) starts before token_spans[0]"),
        ([(3, 5), (0, 2)], [(0, 2)], "token_spans[1] = (0, 2) starts before"),
        ([(0.5, 2)], [(0, 2)], "token_spans[0] = (0.5, 2) is not a (start, end) pair"),
        ([(0, 1, 2)], [(0, 2)], "token_spans[0] = (0, 1, 2) is not a (start, end) pair"),
        ([(0, 2)], [(0, 5), (3, 10)], "phrase_spans[1] = (3, 10) starts before"),
        ([(0, 2)], [(0, 12)], "phrase_spans[0] = (0, 12) is out of range"),
    ],
)
def test_bad_spans_raise_value_error_naming_the_value(tokens, phrases, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        align_tokens_to_phrases("It is Mars", tokens, phrases)


def test_word_spans_match_importance_model_words():
    assert word_spans('It is "Mars".') == [(0, 2), (3, 5), (6, 7), (7, 11), (11, 12), (12, 13)]
    assert word_spans("Café, naïve!") == [(0, 4), (4, 5), (6, 11), (11, 12)]
    assert word_spans(" \n ") == []


def test_phrase_spans_from_starts():
    words = word_spans("The capital city is Paris")
    assert phrase_spans_from_starts(words, [0]) == [(0, 25)]
    assert phrase_spans_from_starts(words, [0, 3, 4]) == [(0, 16), (17, 19), (20, 25)]


@pytest.mark.parametrize(
    ("starts", "message"),
    [
        ([], "must begin with 0"),
        ([1, 2], "must begin with 0 (the first word), got [1, 2]"),
        ([0, 2, 1], "strictly increasing, got [0, 2, 1]"),
        ([0, 0], "strictly increasing, got [0, 0]"),
        ([0, 3], "refers to word 3, but there are only 3 words"),
        ([0, 1.5], "must be integers"),
    ],
)
def test_bad_phrase_starts_raise_value_error(starts, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        phrase_spans_from_starts(word_spans("It is Mars"), starts)


def test_phrase_starts_need_a_word():
    with pytest.raises(ValueError, match="only 0 words"):
        phrase_spans_from_starts([], [0])


def test_alignment_scales_linearly():
    # 20,000 tokens and 10,000 phrases: an O(T * K) scan would take minutes.
    text = " word" * 20_000
    tokens = [(i, i + 5) for i in range(0, len(text), 5)]
    phrases = phrase_spans_from_starts(word_spans(text), list(range(0, 20_000, 2)))
    started = time.perf_counter()
    result = align_tokens_to_phrases(text, tokens, phrases)
    assert time.perf_counter() - started < 2.0
    assert result.phrase_of_token[:4] == [0, 0, 1, 1]
    assert result.phrase_of_token[-1] == 9_999


# --- properties --------------------------------------------------------------------------


@st.composite
def partition(draw, text):
    """Token spans that cover ``text`` end to end, empty tokens allowed at the ends."""
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return [(start, end) for start, end in zip(bounds, bounds[1:]) if start < end or start in cuts]


def has_nonspace(text):
    return any(not char.isspace() for char in text)


def check_alignment_invariants(text, tokens, phrases, result):
    assert len(result.phrase_of_token) == len(tokens)
    assert all(0 <= k < len(phrases) for k in result.phrase_of_token)
    assert set(result.phrase_of_token).isdisjoint(result.unaligned_phrases)
    assert set(result.phrase_of_token) | set(result.unaligned_phrases) == set(range(len(phrases)))
    # A token whose non-whitespace characters all lie in one phrase belongs to it.
    for (start, end), phrase in zip(tokens, result.phrase_of_token):
        holders = {
            k
            for k, (p_start, p_end) in enumerate(phrases)
            for i in range(start, end)
            if p_start <= i < p_end and not text[i].isspace()
        }
        outside = any(
            not text[i].isspace() and not any(p_start <= i < p_end for p_start, p_end in phrases)
            for i in range(start, end)
        )
        if len(holders) == 1 and not outside:
            assert phrase == holders.pop()


@settings(max_examples=200, deadline=None)
@given(st.data(), st.text(max_size=40))
def test_alignment_on_arbitrary_text_with_word_phrases(data, text):
    tokens = data.draw(partition(text))
    words = word_spans(text)
    if not words:
        with pytest.raises(ValueError):
            phrase_spans_from_starts(words, [0])
        return
    starts = sorted({0} | data.draw(st.sets(st.integers(0, len(words) - 1))))
    phrases = phrase_spans_from_starts(words, starts)
    result = align_tokens_to_phrases(text, tokens, phrases)
    check_alignment_invariants(text, tokens, phrases, result)
    # Word phrases cover every non-whitespace character, so nothing falls back.
    assert result.fallback_tokens == []
    assert len(result.warnings) == len(result.unaligned_phrases)


@settings(max_examples=200, deadline=None)
@given(st.data(), st.text(min_size=1, max_size=40))
def test_alignment_on_arbitrary_text_with_arbitrary_phrases(data, text):
    tokens = data.draw(partition(text))
    points = sorted(data.draw(st.sets(st.integers(0, len(text)), min_size=2, max_size=8)))
    phrases = list(zip(points[::2], points[1::2]))
    result = align_tokens_to_phrases(text, tokens, phrases)
    check_alignment_invariants(text, tokens, phrases, result)
    # Fallback tokens: non-whitespace characters, none of them inside a phrase.
    expected_fallback = [
        index
        for index, (start, end) in enumerate(tokens)
        if has_nonspace(text[start:end])
        and not any(
            not text[i].isspace() and any(p_start <= i < p_end for p_start, p_end in phrases)
            for i in range(start, end)
        )
    ]
    assert result.fallback_tokens == expected_fallback
    all_whitespace = bool(tokens) and not any(has_nonspace(text[s:e]) for s, e in tokens)
    expected_warnings = len(result.fallback_tokens) + len(result.unaligned_phrases) + all_whitespace
    assert len(result.warnings) == expected_warnings


@st.composite
def sorted_spans(draw, length, min_size=0, max_size=8):
    """Sorted, non-overlapping spans in [0, length]: gaps, touching and empty spans allowed."""
    n = draw(st.integers(min_size, max_size))
    points = sorted(draw(st.lists(st.integers(0, length), min_size=2 * n, max_size=2 * n)))
    return list(zip(points[::2], points[1::2]))


@settings(max_examples=200, deadline=None)
@given(st.data(), st.text(max_size=40))
def test_alignment_with_arbitrary_token_and_phrase_spans(data, text):
    tokens = data.draw(sorted_spans(len(text), max_size=10))
    phrases = data.draw(sorted_spans(len(text), min_size=1, max_size=6))
    result = align_tokens_to_phrases(text, tokens, phrases)
    check_alignment_invariants(text, tokens, phrases, result)
    # Every phrase that receives no token is listed, ascending, with a warning quoting it.
    unaligned = set(range(len(phrases))) - set(result.phrase_of_token)
    assert result.unaligned_phrases == sorted(unaligned)
    for k in result.unaligned_phrases:
        start, end = phrases[k]
        assert any(
            warning.startswith(f"Phrase {k + 1} {text[start:end]!r} received no token")
            for warning in result.warnings
        )
    assert result.fallback_tokens == sorted(set(result.fallback_tokens))
    assert all(0 <= index < len(tokens) for index in result.fallback_tokens)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: align_tokens_to_phrases(None, [], [(0, 0)]), "text must be a string, got None"),
        (lambda: align_tokens_to_phrases(b"ab", [], [(0, 1)]), "text must be a string, got bytes"),
        (lambda: align_tokens_to_phrases("ab", None, [(0, 1)]), "token_spans must be a sequence"),
        (lambda: align_tokens_to_phrases("ab", [], 3), "phrase_spans must be a sequence"),
        (lambda: word_spans(12), "text must be a string, got int 12"),
    ],
)
def test_non_text_and_non_sequence_arguments_raise_value_error(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# --- align_phrases: "default" and "paper-code" (the published LLM_Uncertainty rule) -------

from statistics import mean  # noqa: E402

from mars_demo.core.alignment import ALIGNMENT_RULES, PhraseAlignment, align_phrases  # noqa: E402
from mars_demo.core.scoring import mars, token_importance  # noqa: E402


def mars_of(alignment, logprobs):
    u = token_importance(alignment.phrase_of_token, alignment.phrase_scores, logprobs)
    return mars(logprobs, u)


# "Hamlet was written in 1603." as Llama-2 tokenizes it: a lone "▁" token before the digits.
HAMLET = "Hamlet was written in 1603."
HAMLET_TOKENS = [(0, 3), (3, 6), (6, 10), (10, 18), (18, 21), (21, 22),
                 (22, 23), (23, 24), (24, 25), (25, 26), (26, 27)]
#                 Ham     let     ▁was     ▁written  ▁in      ▁
#                 1         6         0         3         .
HAMLET_PHRASES = [(0, 6), (7, 21), (22, 27)]  # "Hamlet" | "was written in" | "1603."
HAMLET_SCORES = [0.30, 0.05, 0.90]
HAMLET_LOGPROBS = [-0.9, -0.01, -0.2, -0.3, -0.4, -1.6, -2.0, -0.7, -0.5, -0.6, -0.05]


def test_lone_whitespace_token_before_a_number_joins_the_phrase_before_under_paper_code():
    assert [HAMLET[a:b] for a, b in HAMLET_TOKENS][5] == " "
    paper = align_phrases(HAMLET, HAMLET_TOKENS, HAMLET_PHRASES, HAMLET_SCORES, "paper-code")
    default = align_phrases(HAMLET, HAMLET_TOKENS, HAMLET_PHRASES, HAMLET_SCORES)
    assert paper.phrase_of_token == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2]  # " " with "in"
    assert default.phrase_of_token == [0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2]  # " " with "1603."
    for result in (paper, default):
        assert result.phrase_spans == HAMLET_PHRASES
        assert result.phrase_scores == HAMLET_SCORES
        assert result.members == [[0], [1], [2]]
        assert result.warnings == [] and result.dropped_phrases == []
    # By hand: MARS = 0.5 * sum_k U_k * mean(log p over phrase k) + 0.5 * mean(log p).
    lp, total = HAMLET_LOGPROBS, sum(HAMLET_SCORES)
    u = [s / total for s in HAMLET_SCORES]
    published = 0.5 * (u[0] * mean(lp[0:2]) + u[1] * mean(lp[2:6]) + u[2] * mean(lp[6:])) \
        + 0.5 * mean(lp)
    ours = 0.5 * (u[0] * mean(lp[0:2]) + u[1] * mean(lp[2:5]) + u[2] * mean(lp[5:])) \
        + 0.5 * mean(lp)
    assert round(published, 4) == -0.6743 and round(ours, 4) == -0.7176
    assert mars_of(paper, lp) == pytest.approx(published, abs=1e-12)
    assert mars_of(default, lp) == pytest.approx(ours, abs=1e-12)


def test_phrases_sharing_a_token_are_merged_with_the_mean_score_under_paper_code():
    text = "It's Mars."
    tokens = [(0, 2), (2, 4), (4, 9), (9, 10)]  # It|'s| Mars|.
    phrases = [(0, 3), (3, 10)]  # "It'" | "s Mars."
    assert [text[a:b] for a, b in phrases] == ["It'", "s Mars."]
    lp = [-0.1, -1.2, -0.05, -0.3]
    paper = align_phrases(text, tokens, phrases, [0.2, 0.6], "paper-code")
    assert paper == PhraseAlignment([(0, 10)], [pytest.approx(0.4)], [[0, 1]], [0, 0, 0, 0], [], [])
    # One phrase holds every token: U = [1], so MARS = 0.5 mean(lp) + 0.5 mean(lp) = LN.
    assert mars_of(paper, lp) == pytest.approx(mean(lp), abs=1e-12)
    assert round(mean(lp), 4) == -0.4125
    default = align_phrases(text, tokens, phrases, [0.2, 0.6])
    assert default.phrase_of_token == [0, 0, 1, 1]  # "'s": one character each way, the earlier
    by_hand = 0.5 * (0.25 * mean(lp[:2]) + 0.75 * mean(lp[2:])) + 0.5 * mean(lp)
    assert round(by_hand, 4) == -0.3531
    assert mars_of(default, lp) == pytest.approx(by_hand, abs=1e-12)


def test_merged_phrases_are_normalized_after_taking_the_mean_of_raw_scores():
    text = "It's Mars, probably."
    tokens = [(0, 2), (2, 4), (4, 9), (9, 10), (10, 19), (19, 20)]  # It|'s| Mars|,| probably|.
    phrases = [(0, 3), (3, 10), (11, 20)]  # "It'" | "s Mars," | "probably."
    scores = [0.2, 0.6, 0.1]
    lp = [-0.1, -1.2, -0.05, -0.3, -0.9, -0.02]
    paper = align_phrases(text, tokens, phrases, scores, "paper-code")
    assert paper.members == [[0, 1], [2]]
    assert paper.phrase_spans == [(0, 10), (11, 20)]
    assert paper.phrase_scores == pytest.approx([0.4, 0.1])
    assert paper.phrase_of_token == [0, 0, 0, 0, 1, 1]
    # U = [0.4, 0.1] / 0.5 = [0.8, 0.2]; normalizing first and adding would give [8/9, 1/9].
    by_hand = 0.5 * (0.8 * mean(lp[:4]) + 0.2 * mean(lp[4:])) + 0.5 * mean(lp)
    assert round(by_hand, 4) == -0.4252
    assert mars_of(paper, lp) == pytest.approx(by_hand, abs=1e-12)


def test_leading_and_trailing_whitespace_tokens_under_paper_code():
    text = " Paris . "
    tokens = [(0, 1), (1, 6), (6, 7), (7, 8), (8, 9)]  # " "|Paris|" "|.|" "
    phrases = [(1, 6), (7, 8)]
    paper = align_phrases(text, tokens, phrases, [0.5, 0.1], "paper-code")
    assert paper.phrase_of_token == [0, 0, 0, 1, 1]
    default = align_phrases(text, tokens, phrases, [0.5, 0.1])
    assert default.phrase_of_token == [0, 0, 1, 1, 1]


def test_paper_code_warns_where_the_published_code_would_hang():
    text = "Paris # is"
    tokens = [(0, 5), (5, 7), (7, 10)]  # Paris| #| is: "#" lies in no phrase
    phrases = [(0, 5), (8, 10)]
    paper = align_phrases(text, tokens, phrases, [0.5, 0.1], "paper-code")
    default = align_phrases(text, tokens, phrases, [0.5, 0.1])
    assert paper.phrase_of_token == default.phrase_of_token == [0, 1, 1]  # tie: following
    assert any("lies outside every phrase" in w for w in paper.warnings)
    assert any("would never finish" in w for w in paper.warnings)
    assert not any("would never finish" in w for w in default.warnings)


def test_a_phrase_without_token_is_dropped_with_a_warning_under_both_rules():
    text = "Paris is big"
    tokens = [(0, 5), (9, 12)]  # no token over "is"
    phrases = [(0, 5), (6, 8), (9, 12)]
    for rule in ALIGNMENT_RULES:
        result = align_phrases(text, tokens, phrases, [0.5, 0.2, 0.1], rule)
        assert result.dropped_phrases == [1]
        assert result.members == [[0], [2]]
        assert result.phrase_scores == [0.5, 0.1]
        assert result.phrase_of_token == [0, 1]
        assert any("renormalized" in w for w in result.warnings)
    paper = align_phrases(text, tokens, phrases, [0.5, 0.2, 0.1], "paper-code")
    assert any("would never finish" in w for w in paper.warnings)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rule": "paper"}, "unknown rule"),
        ({"phrase_scores": [0.1]}, "phrase_scores has 1 entries"),
        ({"phrase_scores": [0.1, -1.0]}, "phrase_scores"),
    ],
)
def test_align_phrases_rejects_bad_input(kwargs, message):
    args = {"text": "It is", "token_spans": [(0, 2), (2, 5)], "phrase_spans": [(0, 2), (3, 5)],
            "phrase_scores": [0.1, 0.2], **kwargs}
    with pytest.raises(ValueError, match=message):
        align_phrases(**args)


def published_merge(text, tokens, phrases, scores):
    """The published loop (get_likelihoods.py) written out, with ``decode`` = the token's text.

    For phrases i, i+1, ... it tries k = 1, 2, ... phrases joined, and takes the LAST token end j
    whose tokens, stripped and without spaces, spell the joined phrases; it then records the
    mean of their raw scores. Returns (groups, group of each token, merged scores)."""
    token_texts = [text[a:b] for a, b in tokens]
    phrase_texts = [text[a:b].strip() for a, b in phrases]

    def squash(string):
        return string.strip().replace(" ", "").lower()

    groups, token_group, merged = [], [None] * len(tokens), []
    i = token_idx = 0
    while i < len(phrase_texts):
        for k in range(1, len(phrase_texts) - i + 1):
            word = squash("".join(phrase_texts[i : i + k]))
            last = -1
            for j in range(token_idx + 1, len(tokens) + 1):
                if squash("".join(token_texts[token_idx:j])) == word:
                    last = j
            if last != -1:
                for t in range(token_idx, last):
                    token_group[t] = len(groups)
                groups.append(list(range(i, i + k)))
                merged.append(mean(scores[i : i + k]))
                i, token_idx = i + k, last
                break
        else:
            raise AssertionError("the published loop would never finish here")
    return groups, token_group, merged


@settings(max_examples=300, deadline=None)
@given(st.data(), st.text(alphabet="ab1'. ", min_size=1, max_size=30).filter(has_nonspace))
def test_paper_code_equals_the_published_string_matching_loop(data, text):
    tokens = data.draw(partition(text))
    words = word_spans(text)
    starts = sorted({0} | data.draw(st.sets(st.integers(0, len(words) - 1))))
    phrases = phrase_spans_from_starts(words, starts)
    scores = data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(phrases), max_size=len(phrases)))
    groups, token_group, merged = published_merge(text, tokens, phrases, scores)
    assert None not in token_group  # phrases cover every non-space character
    result = align_phrases(text, tokens, phrases, scores, "paper-code")
    assert result.members == groups
    assert result.phrase_of_token == token_group
    assert result.phrase_scores == pytest.approx(merged, abs=1e-15)
    assert result.warnings == [] and result.dropped_phrases == []
    assert result.phrase_spans == [(phrases[g[0]][0], phrases[g[-1]][1]) for g in groups]


@settings(max_examples=200, deadline=None)
@given(st.data(), st.text(max_size=40).filter(has_nonspace))
def test_default_rule_of_align_phrases_keeps_align_tokens_to_phrases(data, text):
    tokens = data.draw(partition(text))
    words = word_spans(text)
    starts = sorted({0} | data.draw(st.sets(st.integers(0, len(words) - 1))))
    phrases = phrase_spans_from_starts(words, starts)
    scores = [0.1 * (k + 1) for k in range(len(phrases))]
    base = align_tokens_to_phrases(text, tokens, phrases)
    result = align_phrases(text, tokens, phrases, scores)
    assert [result.members[k][0] for k in result.phrase_of_token] == base.phrase_of_token
    assert result.dropped_phrases == base.unaligned_phrases
    assert result.phrase_scores == [scores[g[0]] for g in result.members]
    assert result.warnings[: len(base.warnings)] == base.warnings
