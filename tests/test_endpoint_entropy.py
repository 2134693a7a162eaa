"""Token entropies through an OpenAI-compatible server: from the top log-probs it returns, the
rest of the mass as one outcome (a lower bound), the k named in the answer; CCP's alternatives
from the same top log-probs, the token first."""

from __future__ import annotations

import math

import pytest

from mars_demo.core.token_level import top_k_entropy
from mars_demo.models.completions import parse_choice, to_answer

LOG = math.log


def completion(tops):
    tokens = [" Mars", " is", " red"]
    return {"choices": [{
        "text": " Mars is red", "finish_reason": "stop",
        "logprobs": {"tokens": tokens, "text_offset": [0, 5, 8],
                     "token_logprobs": [LOG(0.7), LOG(0.9), LOG(0.4)],
                     "top_logprobs": tops}}]}


TOPS = [{" Mars": LOG(0.7), " Venus": LOG(0.2)},
        {" is": LOG(0.9), " was": LOG(0.05), " looks": LOG(0.01)},
        {" red": LOG(0.4), " orange": LOG(0.4)}]  # a tie with the chosen token


def test_entropy_from_the_top_log_probs_with_the_rest_as_one_bucket():
    choice = parse_choice(completion(TOPS), "http://server")
    answer, _ = to_answer(choice, (), alternatives=3)
    assert answer.text == "Mars is red" and answer.entropy_top_k == 3
    expected = [top_k_entropy(list(t.values()))[0] for t in TOPS]
    assert answer.token_stats["entropy"] == pytest.approx(expected, abs=1e-15)
    # the first token: 0.7, 0.2 and a bucket of 0.1
    assert expected[0] == pytest.approx(-(0.7 * LOG(0.7) + 0.2 * LOG(0.2) + 0.1 * LOG(0.1)))
    alts = answer.token_stats["alternatives"]
    assert alts[0] == [[" Mars", pytest.approx(LOG(0.7))], [" Venus", pytest.approx(LOG(0.2))]]
    assert alts[2][1] == [" orange", pytest.approx(LOG(0.4))]
    # samples keep no alternatives; the entropy stays
    sample, _ = to_answer(choice, ())
    assert "alternatives" not in sample.token_stats and "entropy" in sample.token_stats


def test_no_top_log_probs_no_entropies():
    answer, _ = to_answer(parse_choice(completion(None), "http://server"), ())
    assert answer.token_stats == {} and answer.entropy_top_k is None
    partly = [TOPS[0], None, TOPS[2]]
    answer, _ = to_answer(parse_choice(completion(partly), "http://server"), ())
    assert answer.token_stats == {}
