"""Judges: SQuAD exact match and F1, ROUGE-L, and the LLM judge's request/response shape.

The LLM judge is tested against a small local fake OpenAI-compatible server (a thread running
``http.server``) for the shape of its requests and replies only. A real server (llama.cpp) can be
plugged into the same tests through ``judge_server_url`` below.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mars_demo.evaluation import judges as J


@pytest.mark.parametrize("text, expected", [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  an   apple,  a pear ", "apple pear"),
    ("Theatre of the Absurd", "theatre of absurd"),  # "the" inside a word stays
    ("A.D. 1066", "ad 1066"),
])
def test_squad_normalization(text, expected):
    assert J.normalize_answer(text) == expected


def test_exact_match_against_any_reference():
    judge = J.make_judge("em")
    assert judge("q", "the Pacific Ocean.", ["Atlantic", "Pacific ocean"]).correct
    assert not judge("q", "Pacific", ["Pacific Ocean"]).correct
    assert judge.describe() == {"name": "em", "threshold": None}


def test_token_f1_by_hand():
    # pred {canberra, city}, ref {canberra}: P = 1/2, R = 1, F1 = 2/3
    assert J.token_f1("Canberra city", "Canberra") == pytest.approx(2 / 3)
    assert J.token_f1("the", "a") == 1.0  # both empty after normalization
    assert J.token_f1("Paris", "London") == 0.0
    judge = J.make_judge("f1", 0.6)
    v = judge("q", "Canberra city", ["Sydney", "Canberra"])
    assert v.correct and v.score == pytest.approx(2 / 3)
    assert not J.make_judge("f1", 0.7)("q", "Canberra city", ["Canberra"]).correct
    assert judge.describe() == {"name": "f1", "threshold": 0.6}


def lcs(a: list[str], b: list[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def rouge_l_by_hand(pred: str, ref: str) -> float:
    p = re.sub(r"[^a-z0-9]+", " ", pred.lower()).split()
    r = re.sub(r"[^a-z0-9]+", " ", ref.lower()).split()
    n = lcs(p, r)
    if n == 0:
        return 0.0
    prec, rec = n / len(p), n / len(r)
    return 2 * prec * rec / (prec + rec)


@pytest.mark.parametrize("pred, ref", [
    ("It was painted by Vincent van Gogh", "Vincent van Gogh"),
    ("Leonardo da Vinci painted it", "da Vinci"),
    ("Mars", "Venus"),
])
def test_rouge_l_matches_an_lcs_by_hand(pred, ref):
    judge = J.make_judge("rouge", 0.3)
    v = judge("q", pred, [ref])
    assert v.score == pytest.approx(rouge_l_by_hand(pred, ref))
    assert v.correct == (rouge_l_by_hand(pred, ref) >= 0.3)


def test_bad_thresholds_and_names_are_refused():
    with pytest.raises(ValueError, match="from 0 to 1"):
        J.make_judge("f1", 1.5)
    with pytest.raises(ValueError, match="takes no threshold"):
        J.make_judge("em", 0.5)
    with pytest.raises(ValueError, match="one of em, f1, rouge, llm"):
        J.make_judge("bleu")
    with pytest.raises(ValueError, match="--judge-endpoint"):
        J.make_judge("llm")


@pytest.mark.parametrize("reply, verdict", [
    ("correct", True), ("Correct.", True), ("\n\"correct\"", True),
    ("false", False), ("False.", False), ("incorrect", False),
])
def test_verdicts_are_read_from_the_first_word(reply, verdict):
    assert J.parse_verdict(reply) is verdict


def test_an_unclear_verdict_is_an_error_not_a_guess():
    with pytest.raises(J.JudgeError, match="neither 'correct' nor 'false'"):
        J.parse_verdict("I think the answer is right")


# ---- the LLM judge over HTTP ---------------------------------------------------------------


class FakeServer:
    """An OpenAI-compatible server that answers "correct" when the generated answer contains the
    first ground truth, else "false"; it records every request."""

    def __init__(self, reply=None):
        self.requests: list[tuple[str, dict | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                outer.requests.append((self.path, None))
                self._send(200, {"object": "list", "data": [{"id": "fake-judge"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body))
                text = (body["messages"][0]["content"] if self.path.endswith("chat/completions")
                        else body["prompt"])
                truth = re.search(r"Ground Truth: (.*?)( / |,\n)", text).group(1)
                generated = text.split("Generated Answer: ", 1)[1]
                verdict = reply or ("correct" if truth.lower() in generated.lower() else "false")
                if self.path.endswith("chat/completions"):
                    self._send(200, {"choices": [{"message": {"role": "assistant",
                                                              "content": verdict}}]})
                else:
                    self._send(200, {"choices": [{"text": " " + verdict}]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def fake():
    server = FakeServer()
    yield server
    server.close()


def test_llm_judge_chat_request_carries_the_papers_prompt(fake):
    judge = J.make_judge("llm", endpoint=fake.url)
    assert judge.model == "fake-judge"  # the only model /models lists
    v = judge("What is the capital of Australia?", "Canberra is the capital",
              ["Canberra", "Canberra, ACT"])
    assert v.correct and v.detail == "correct"
    path, body = fake.requests[-1]
    assert path == "/v1/chat/completions"
    assert body["model"] == "fake-judge" and body["temperature"] == 0.0
    content = body["messages"][0]["content"]
    assert content.startswith("You will behave as a question-answer evaluator.")
    assert "Question: What is the capital of Australia?, \n" in content  # one "?", as the paper
    assert "Ground Truth: Canberra / Canberra, ACT,\n" in content
    assert content.endswith("Generated Answer: Canberra is the capital")
    assert not judge("Capital of Australia?", "Sydney", ["Canberra"]).correct
    assert judge.describe() == {"name": "llm", "threshold": None, "endpoint": fake.url,
                                "model": "fake-judge", "api": "chat", "prompt": "paper"}


def test_llm_judge_completions_api(fake):
    judge = J.make_judge("llm", endpoint=fake.url.removesuffix("/v1"), model="m",
                         api="completions")
    assert judge("Who wrote Hamlet", "William Shakespeare", ["Shakespeare"]).correct
    path, body = fake.requests[-1]
    assert path == "/v1/completions" and body["model"] == "m"
    assert body["prompt"].startswith("You will behave") and "Question: Who wrote Hamlet?," in body["prompt"]
    assert not any(p == "/v1/models" for p, _ in fake.requests)  # a named model: no listing


def test_llm_judge_unclear_reply_and_dead_server_are_errors():
    server = FakeServer(reply="maybe")
    try:
        judge = J.make_judge("llm", endpoint=server.url)
        with pytest.raises(J.JudgeError, match="neither"):
            judge("q?", "a", ["b"])
    finally:
        server.close()
    with pytest.raises(J.JudgeError, match="cannot be reached|cannot list"):
        J.make_judge("llm", endpoint=server.url, model="m")("q?", "a", ["b"])


def test_llm_judge_api_key_from_a_named_variable(fake, monkeypatch):
    with pytest.raises(ValueError, match="JUDGE_KEY is not set"):
        J.make_judge("llm", endpoint=fake.url, api_key_env="JUDGE_KEY")
    monkeypatch.setenv("JUDGE_KEY", "sekret")
    judge = J.make_judge("llm", endpoint=fake.url, api_key_env="JUDGE_KEY", model="m")
    assert "sekret" not in json.dumps(judge.describe())
