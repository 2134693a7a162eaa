"""Lexical similarity and P(True) against hand-computed values."""

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mars_demo.core.lexical import lexical_similarity, rouge_l
from mars_demo.core.p_true import PROMPT, SAMPLES_PROMPT, p_true, p_true_prompt

# --- ROUGE-L by hand: F = 2PR/(P+R) with P = LCS/|first|, R = LCS/|second| over lowercased
# alphanumeric words


def f_measure(lcs, first_len, second_len):
    p, r = lcs / first_len, lcs / second_len
    return 0.0 if lcs == 0 else 2 * p * r / (p + r)


def test_rouge_l_by_hand():
    assert rouge_l("Paris", "Paris, France") == pytest.approx(f_measure(1, 1, 2))  # 2/3
    # the, sat, on in order: LCS 3 of 6 and 6 words
    assert rouge_l("The cats sat on the mats", "the cat sat on a mat") == pytest.approx(0.5)
    # stemmed: the cat sat on (the|a) mat -> LCS 5
    assert rouge_l("The cats sat on the mats", "the cat sat on a mat", use_stemmer=True) == (
        pytest.approx(5 / 6)
    )
    # word order matters: LCS of "a b c d" and "d c b a" is 1
    assert rouge_l("a b c d", "d c b a") == pytest.approx(f_measure(1, 4, 4))


def test_lexical_similarity_is_negated_mean_over_pairs():
    texts = ["Paris", "Paris, France", "Lyon"]
    assert lexical_similarity(texts) == pytest.approx(-(2 / 3 + 0 + 0) / 3)
    texts = ["The cats sat on the mats", "the cat sat on a mat", "Cats are sitting"]
    # pairs: (0, 1) 3/6; (0, 2) "cats" 1 of 6 and 3 words; (1, 2) nothing (no stemming)
    expected = -(0.5 + f_measure(1, 6, 3) + 0.0) / 3
    assert lexical_similarity(texts) == pytest.approx(expected)
    # stemmed: (0, 1) 5/6; (0, 2) "cat" 1 of 6 and 3; (1, 2) "cat" 1 of 6 and 3 (sit != sat)
    stemmed = -(5 / 6 + 2 * f_measure(1, 6, 3)) / 3
    assert lexical_similarity(texts, use_stemmer=True) == pytest.approx(stemmed)


def test_lexical_similarity_extremes():
    assert lexical_similarity(["The Eiffel Tower"] * 4) == -1.0
    assert lexical_similarity(["red apple", "blue sky", "green grass"]) == 0.0
    assert math.copysign(1, lexical_similarity(["red", "blue"])) == 1.0  # 0.0, not -0.0
    assert lexical_similarity(["Paris"]) == -1.0  # one answer agrees with itself
    # identical samples count as a pair of similarity 1 (the papers' code skips them)
    assert lexical_similarity(["Paris", "Paris", "Lyon"]) == pytest.approx(-1 / 3)
    # ties: every pair equally similar
    assert lexical_similarity(["a b", "a c", "a d"]) == pytest.approx(-0.5)


def test_answers_without_ascii_words_score_zero_as_rouge_score_does():
    assert rouge_l("巴黎", "巴黎") == 0.0
    assert lexical_similarity(["巴黎", "巴黎"]) == 0.0


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ([], "texts is empty"),
        ("Paris", "one string 'Paris'"),
        (["Paris", 3], "texts[1] = 3 is not a string"),
        (None, "sequence of strings, got None"),
    ],
)
def test_lexical_similarity_bad_input(texts, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        lexical_similarity(texts)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(alphabet="abc ", max_size=12), min_size=1, max_size=5),
    st.randoms(use_true_random=False),
)
def test_lexical_similarity_bounds_and_order_invariance(texts, random):
    value = lexical_similarity(texts)
    assert -1.0 <= value <= 0.0
    shuffled = list(texts)
    random.shuffle(shuffled)
    assert lexical_similarity(shuffled) == pytest.approx(value, abs=1e-12)


# --- P(True) ---------------------------------------------------------------------------------


def test_p_true_prompt_is_lm_polygraphs_text():
    assert p_true_prompt("Who wrote Hamlet?", " Shakespeare") == (
        "Question: Who wrote Hamlet?\n Possible answer: Shakespeare\n Is the possible answer:\n"
        " (A) True\n (B) False\n The possible answer is:"
    )
    assert p_true_prompt("Q?", "A", ["x", "y", "z"]) == (
        "Question: Q?\n Here are some ideas that were brainstormed: x, y, z\n Possible answer:A\n"
        " Is the possible answer:\n (A) True\n (B) False\n The possible answer is:"
    )
    assert p_true_prompt("Q?", "A", []) == SAMPLES_PROMPT.format(q="Q?", s="", a="A")
    assert PROMPT.endswith("The possible answer is:")


def test_p_true_prompt_keeps_braces_in_user_text():
    assert "{x}" in p_true_prompt("What is {x}?", "{y}", ["{z}"])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: p_true_prompt(None, "a"), "question must be a string"),
        (lambda: p_true_prompt("q", 1), "answer must be a string"),
        (lambda: p_true_prompt("q", "a", "abc"), "sampled_answers must be a sequence"),
        (lambda: p_true_prompt("q", "a", ["x", None]), "sampled_answers[1] must be a string"),
        (lambda: p_true(0.5), "true_logprob[0] = 0.5 is positive"),
        (lambda: p_true(math.nan), "nan"),
        (lambda: p_true([-1.0]), "single number"),
    ],
)
def test_p_true_bad_input(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_p_true_is_negated_log_probability():
    assert p_true(math.log(0.8)) == pytest.approx(-math.log(0.8))
    assert p_true(math.log(1e-6)) == pytest.approx(6 * math.log(10))
    assert p_true(0.0) == 0.0 and math.copysign(1, p_true(0.0)) == 1.0
    assert p_true(1e-8) == 0.0  # float rounding above 0
