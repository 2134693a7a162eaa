"""How a server reads a prompt, held against the local tokenizer (mars_demo.models.served_prompt),
on made-up servers: one that adds its own BOS, one that adds none, one that reads another
tokenization, one with no tokenize route. The real servers: tests/test_real_llm_served.py
(llama.cpp on SmolLM2) and tests/test_vllm.py."""

from __future__ import annotations

import pytest

from mars_demo.models import served_prompt
from mars_demo.models.served_prompt import read_prompt

BOS, BOS_ID = "<s>", 1
WORDS = {"<s>": 1, "Hi": 7, " there": 8, "Hi there": 9}


class Tokenizer:
    """Reads "<s>" and the words of :data:`WORDS`, greedily; adds no BOS itself."""

    bos_token, bos_token_id = BOS, BOS_ID

    def ids(self, text: str) -> list[int]:
        out = []
        while text:
            word = max((w for w in WORDS if text.startswith(w)), key=len)
            out.append(WORDS[word])
            text = text[len(word):]
        return out

    def decode(self, ids, skip_special_tokens=False) -> str:
        names = {v: k for k, v in WORDS.items()}
        return "".join(names[i] for i in ids)


class Response:
    def __init__(self, status: int, data) -> None:
        self.status_code, self.data = status, data

    def json(self):
        return self.data


class Server:
    """A made-up server: ``routes`` (tokenize paths it has), whether it adds a BOS, what its
    completions report as usage; it records every request's path."""

    def __init__(self, routes=("/tokenize",), adds_bos=False, usage=True, reads=None) -> None:
        self.routes, self.adds_bos, self.usage, self.paths = routes, adds_bos, usage, []
        self.reads = reads or Tokenizer().ids

    def read(self, text: str) -> list[int]:
        return ([BOS_ID] if self.adds_bos else []) + self.reads(text)

    def post(self, url: str, json: dict, headers: dict) -> Response:
        path = url.removeprefix("http://h/")
        self.paths.append("/" + path)
        if "/" + path not in self.routes:
            return Response(404, {"detail": "Not Found"})
        return Response(200, {"tokens": self.read(json.get("prompt", json.get("input")))})


class LLM:
    """What read_prompt uses of an EndpointLLM."""

    base_url, model, tokenizer_id = "http://h/v1", "m", "local-tokenizer"

    def __init__(self, server: Server) -> None:
        self.server, self.tokenizer = server, Tokenizer()
        self.tokenize_route = None  # not found yet

    def _headers(self) -> dict:
        return {}

    def completion_body(self, prompt, **kw):
        return {"prompt": prompt, **kw}

    def _request(self, client, method, path, body, *, what):
        self.server.paths.append(path)
        n = len(self.server.read(body["prompt"]))
        return {"choices": [{"text": ""}], **({"usage": {"prompt_tokens": n}}
                                               if self.server.usage else {})}


def test_a_server_that_reads_the_local_ids_gets_the_text_as_it_is():
    server = Server()
    reading = read_prompt(LLM(server), server, "<s>Hi there", [1, 9])
    assert (reading.text, reading.token_ids, reading.warnings) == ("<s>Hi there", [1, 9], [])
    assert server.paths == ["/tokenize"]


def test_a_server_that_adds_its_own_bos_gets_the_text_without_it():
    """vLLM with a tokenizer that adds a BOS, and a chat template that writes it too."""
    server = Server(adds_bos=True)
    reading = read_prompt(LLM(server), server, "<s>Hi there", [1, 9])
    assert (reading.text, reading.token_ids, reading.warnings) == ("Hi there", [1, 9], [])


def test_a_server_that_adds_no_bos_gets_it_written_in_front():
    """A local tokenizer that adds a BOS (the paper prompt's ids start with it), a server
    that does not (a GGUF saying add_bos_token false): the BOS text goes in front."""
    server = Server(routes=("/extras/tokenize",))
    llm = LLM(server)
    reading = read_prompt(llm, server, "Hi there", [1, 9])
    assert (reading.text, reading.token_ids, reading.warnings) == ("<s>Hi there", [1, 9], [])
    assert server.paths == ["/tokenize", "/extras/tokenize", "/extras/tokenize"]
    read_prompt(llm, server, "Hi", [7])  # the route found is remembered
    assert server.paths[3:] == ["/extras/tokenize"]


def test_another_reading_is_named_and_recorded():
    server = Server(reads=lambda text: [WORDS[w] for w in text.split(" ") if w in WORDS])
    reading = read_prompt(LLM(server), server, "Hi there", [9])
    assert reading.text == "Hi there" and reading.token_ids == [7]
    assert len(reading.warnings) == 1
    said = reading.warnings[0]
    assert "reads this prompt as 1 tokens where the tokenizer given with --llm " in said
    assert "(local-tokenizer) reads 1; they first differ at token 0 ('Hi' on the server, " \
           "'Hi there' here)" in said


@pytest.mark.parametrize("adds_bos", [False, True])
def test_a_server_without_a_tokenize_route_is_checked_by_its_usage(adds_bos):
    server = Server(routes=(), adds_bos=adds_bos)
    reading = read_prompt(LLM(server), server, "<s>Hi there", [1, 9])
    assert reading.text == ("Hi there" if adds_bos else "<s>Hi there")
    assert (reading.token_ids, reading.warnings) == ([1, 9], [])
    assert "/completions" in server.paths


def test_a_server_that_says_nothing_is_used_with_a_warning():
    server = Server(routes=(), usage=False)
    reading = read_prompt(LLM(server), server, "Hi there", [9])
    assert (reading.text, reading.token_ids) == ("Hi there", [9])
    assert len(reading.warnings) == 1 and "could not be checked" in reading.warnings[0]
    counted = Server(routes=(), reads=lambda text: [7, 8, 8])
    reading = read_prompt(LLM(counted), counted, "Hi there", [9])
    assert reading.token_ids == [] and "reads this prompt as 3 tokens" in reading.warnings[0]


def test_candidates():
    tok = Tokenizer()
    assert served_prompt.candidates("<s>Hi", [1, 7], tok) == ["<s>Hi", "Hi"]
    assert served_prompt.candidates("Hi", [1, 7], tok) == ["Hi", "<s>Hi"]
    assert served_prompt.candidates("Hi", [7], tok) == ["Hi"]
