"""LARS's input text and score: by hand, and against TruthTorchLM 0.1.19's own code.

``reference/truthtorchlm_values.json`` holds TruthTorchLM's output on the same inputs, made by
``reference/truthtorchlm_reference.py`` (this test only reads it).
"""

import json
import math
import re
from pathlib import Path

import pytest

from mars_demo.core.lars import lars_answer_text, lars_log_score, probability_bin

REFERENCE = json.loads(
    (Path(__file__).parent / "reference" / "truthtorchlm_values.json").read_text()
)


def test_bins_without_edges_split_zero_to_one_evenly():
    assert [probability_bin(p, None, 4) for p in (0.0, 0.24, 0.25, 0.74, 0.75, 1.0)] == [
        0,
        0,
        1,
        2,
        3,
        3,  # 1.0 * 4 = 4, capped at the last bin
    ]


def test_bins_with_edges_count_the_edges_at_or_below():
    edges = [0.1, 0.4, 0.8]
    # below every edge -> 0; on an edge -> the bin above it; the top capped at bins - 1
    assert [probability_bin(p, edges, 3) for p in (0.05, 0.1, 0.3, 0.4, 0.9, 1.0)] == [
        0,
        1,
        1,
        2,
        2,
        2,
    ]
    assert [probability_bin(p, edges, 8) for p in (0.05, 0.5, 0.9)] == [0, 2, 3]


def test_answer_text_interleaves_bin_tokens():
    assert lars_answer_text([" Paris"], [0.99], None, 8) == " Paris[prob_token_7]"
    assert lars_answer_text(["A", "B"], [0.5, 0.5], None, 2) == "A[prob_token_1]B[prob_token_1]"


@pytest.mark.parametrize("row", REFERENCE["lars"], ids=lambda row: "".join(row["tokens"]))
def test_answer_text_matches_truthtorchlm(row):
    ours = lars_answer_text(row["tokens"], row["probs"], row["edges"], row["bins"])
    assert ours == row["text"]


def test_log_score_is_log_sigmoid():
    assert lars_log_score(0.0) == pytest.approx(math.log(0.5))
    assert lars_log_score(2.0) == pytest.approx(math.log(1 / (1 + math.exp(-2.0))))
    assert lars_log_score(-800.0) == pytest.approx(-800.0)  # no overflow in exp(800)
    assert lars_log_score(800.0) == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: probability_bin(1.5, None, 4), "probability = 1.5 is not in [0, 1]"),
        (lambda: probability_bin(math.nan, None, 4), "nan"),
        (lambda: probability_bin(0.5, None, 0), "number_of_bins must be an integer >= 1"),
        (lambda: probability_bin(0.5, None, 2.5), "number_of_bins must be an integer"),
        (lambda: probability_bin(0.5, [0.5, 0.2], 3), "edges must not decrease"),
        (lambda: lars_answer_text("ab", [0.5, 0.5], None, 2), "sequence of strings"),
        (lambda: lars_answer_text(["a"], [0.5, 0.5], None, 2), "token_texts has 1 entries"),
        (lambda: lars_answer_text(["a", 3], [0.5, 0.5], None, 2), "token_texts[1] must be"),
        (lambda: lars_answer_text([], [], None, 8), "token_probabilities is empty"),
        (lambda: lars_log_score(math.inf), "logit[0] = inf is not finite"),
    ],
)
def test_bad_input_raises_value_error_naming_the_value(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
