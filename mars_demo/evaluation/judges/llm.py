"""``llm``: an LLM judge through an OpenAI-compatible server (``/v1/chat/completions``, or
``/v1/completions``) with the paper's judge prompt (MARS paper, appendix "Prompts": the authors
used gpt-3.5-turbo), at temperature 0. Its verdict is the first word of the reply: "correct" or
"false"; any other reply is an error (never guessed)."""

from __future__ import annotations

import os
import re
from typing import Any, Sequence

from .base import Judge, JudgeEntry, JudgeError, Verdict

# The paper's judge prompt (appendix, "Prompts"), its lines joined as one paragraph. The paper
# writes "{question}?"; a question that already ends with "?" is not given a second one.
PAPER_JUDGE_PROMPT = (
    'You will behave as a question-answer evaluator. I will give you a question, the ground '
    'truth of the question and a generated answer by a language model. You will output '
    '"correct" if the generated answer is correct regarding question and ground truth. '
    'Otherwise, output "false".\n'
    "Question: {question}?, \n"
    "Ground Truth: {answer},\n"
    "Generated Answer: {generation}"
)
# Several accepted answers are given to the judge joined by this (the paper shows one).
REFERENCE_SEPARATOR = " / "


class LLMJudge(Judge):
    """The paper's judge prompt sent to an OpenAI-compatible server.

    ``endpoint``: the server's base URL (``http://host:8000/v1``; ``/v1`` is added when
    missing). ``api``: "chat" (``/chat/completions``, the default: the paper used a chat model)
    or "completions" (``/completions``). ``model``: the model name on the server (None: the
    first one ``/models`` lists). ``api_key_env``: the NAME of the variable holding the API key.
    ``transport``: an ``httpx`` transport (tests; a real server needs none).
    """

    name = "llm"

    def __init__(
        self,
        endpoint: str,
        *,
        model: str | None = None,
        api: str = "chat",
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        prompt: str = PAPER_JUDGE_PROMPT,
        transport: Any = None,
    ) -> None:
        import httpx

        if api not in ("chat", "completions"):
            raise ValueError(f"judge api must be chat or completions; got {api!r}")
        base = endpoint.rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"the judge endpoint must be an http(s) URL; got {endpoint!r}")
        if not base.endswith("/v1"):
            base += "/v1"
        headers = {}
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise ValueError(f"the judge's API key variable {api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        self.endpoint = base
        self.api = api
        self.prompt = prompt
        self._client = httpx.Client(base_url=base, headers=headers, timeout=timeout_s,
                                    transport=transport)
        self.model = model or self._first_model()

    def _post(self, path: str, body: dict) -> dict:
        import httpx

        try:
            r = self._client.post(path, json=body)
        except httpx.HTTPError as err:
            raise JudgeError(f"the judge server at {self.endpoint} cannot be reached: {err}") from err
        if r.status_code != 200:
            raise JudgeError(
                f"the judge server at {self.endpoint}{path} answered HTTP {r.status_code}: "
                f"{r.text[:200]}"
            )
        try:
            return r.json()
        except ValueError as err:
            raise JudgeError(f"the judge server's reply to {path} is not JSON") from err

    def _first_model(self) -> str:
        import httpx

        try:
            r = self._client.get("/models")
            models = r.json().get("data") or []
            return str(models[0]["id"])
        except (httpx.HTTPError, ValueError, KeyError, IndexError, AttributeError) as err:
            raise JudgeError(
                f"cannot list the judge server's models at {self.endpoint}/models ({err}); "
                "name the model with --judge-model"
            ) from err

    def format(self, question: str, prediction: str, references: Sequence[str]) -> str:
        q = question.strip()
        q = q[:-1] if q.endswith("?") else q
        return self.prompt.format(question=q, answer=REFERENCE_SEPARATOR.join(references),
                                  generation=prediction)

    def __call__(self, question, prediction, references):
        text = self.format(question, prediction, references)
        if self.api == "chat":
            data = self._post("/chat/completions", {
                "model": self.model, "messages": [{"role": "user", "content": text}],
                "temperature": 0.0, "max_tokens": 8,
            })
            try:
                reply = data["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError) as err:
                raise JudgeError(f"the judge's chat reply has no choices[0].message.content: {data!r:.200}") from err
        else:
            data = self._post("/completions", {
                "model": self.model, "prompt": text + "\n", "temperature": 0.0, "max_tokens": 8,
            })
            try:
                reply = data["choices"][0]["text"]
            except (KeyError, IndexError, TypeError) as err:
                raise JudgeError(f"the judge's completion reply has no choices[0].text: {data!r:.200}") from err
        return Verdict(parse_verdict(reply), None, reply)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "threshold": None, "endpoint": self.endpoint,
                "model": self.model, "api": self.api, "prompt": "paper"
                if self.prompt == PAPER_JUDGE_PROMPT else self.prompt}


def parse_verdict(reply: Any) -> bool:
    """"correct" -> True, "false" -> False (first word, any case and punctuation); anything
    else raises :class:`JudgeError`."""
    if not isinstance(reply, str):
        raise JudgeError(f"the judge replied {reply!r}, not text")
    words = re.findall(r"[a-z]+", reply.lower())
    if words and words[0] == "correct":
        return True
    if words and words[0] in ("false", "incorrect"):
        return False
    raise JudgeError(f"the judge replied {reply.strip()[:80]!r}, neither 'correct' nor 'false'")


def _build(options) -> LLMJudge:
    given = {"model": options.model, "api": options.api, "api_key_env": options.api_key_env}
    return LLMJudge(options.endpoint, **{k: v for k, v in given.items() if v is not None})


JUDGE = JudgeEntry("llm", "the paper's judge prompt on --judge-endpoint", _build,
                   needs=("server",))
