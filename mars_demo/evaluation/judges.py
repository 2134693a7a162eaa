"""Is an answer correct? Judges of a generated answer against reference answers.

- ``contains`` (the default): a reference appears in the answer as whole words, and the answer
  claims it (not denied, not one of several candidates, not a point of comparison), after
  SQuAD-style normalization with numbers read as digits; see :mod:`.containment`. It reads
  short answers and sentences alike ("The capital city of Australia is Canberra.").
- ``nli``: the loaded NLI model (the engine's, :meth:`NLIJudge.load`) reads "question + answer"
  and "question + reference" and accepts when each entails the other for some reference (the
  bidirectional entailment of Kuhn et al., 2023, and Farquhar et al., 2024), for paraphrases no
  lexical rule catches. An answer equal to a reference after SQuAD's normalization is accepted
  without the model.
- ``em``: exact match after SQuAD's normalization (lowercase, punctuation removed, the articles
  a/an/the removed, whitespace collapsed), against any reference.
- ``f1``: SQuAD's token F1 (bag of normalized words) >= ``threshold`` (default 0.5) for the best
  reference.
- ``rouge``: ROUGE-L F-measure (the ``rouge-score`` package, no stemming) >= ``threshold``
  (default 0.3, as in Kuhn et al., 2023) for the best reference. Note: rouge-score's tokenizer
  keeps only ASCII letters and digits, so it suits English answers.
- ``llm``: an LLM judge through an OpenAI-compatible server (``/v1/chat/completions``, or
  ``/v1/completions``) with the paper's judge prompt (MARS paper, appendix "Prompts": the
  authors used gpt-3.5-turbo), at temperature 0. Its verdict is the first word of the reply:
  "correct" or "false"; any other reply is an error (never guessed).

Every judge records what it is (:meth:`Judge.describe`), so a run says how "correct" was decided.
:meth:`Judge.judge_many` judges a batch (the NLI judge in one batched pass).
"""

from __future__ import annotations

import abc
import collections
import os
import re
import string
from dataclasses import dataclass
from typing import Any, Sequence

JUDGES = ("contains", "em", "f1", "rouge", "nli", "llm")
DEFAULT_JUDGE = "contains"
DEFAULT_THRESHOLDS = {"f1": 0.5, "rouge": 0.3}
#: judges that compare the whole answer with a reference: long answers fail them
WHOLE_ANSWER_JUDGES = ("em", "f1", "rouge")

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


class JudgeError(RuntimeError):
    """The judge could not decide (server unreachable, an unexpected reply)."""


@dataclass
class Verdict:
    correct: bool
    score: float | None = None  # F1 or ROUGE-L of the best reference; None for the others
    detail: str | None = None  # why (contains), the NLI labels (nli), the LLM judge's reply


# ---- SQuAD normalization ------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's ``normalize_answer``: lowercase, remove punctuation, remove articles,
    collapse whitespace (in that order)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, reference: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(reference)


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD's token F1 between the normalized bags of words (0 when either is empty and they
    differ; 1 when both are empty)."""
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    common = collections.Counter(pred) & collections.Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


class Judge(abc.ABC):
    """Decides whether a prediction answers the question given its references."""

    name = ""
    threshold: float | None = None

    @abc.abstractmethod
    def __call__(self, question: str, prediction: str, references: Sequence[str]) -> Verdict:
        """The verdict on ``prediction``."""

    def judge_many(self, items: Sequence[tuple[str, str, Sequence[str]]]) -> list[Verdict]:
        """The verdicts on ``(question, prediction, references)`` items, in order."""
        return [self(q, p, refs) for q, p, refs in items]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "threshold": self.threshold}


class ContainsJudge(Judge):
    """A reference claimed by the answer as whole words (:func:`.containment.read`)."""

    name = "contains"

    def __call__(self, question, prediction, references):
        from .containment import read

        correct, why = read(question, prediction, references)
        return Verdict(correct, None, why)


class NLIJudge(Judge):
    """Bidirectional entailment between "question + reference" and "question + answer".

    ``nli``: an object with ``verdicts(pairs, truncated=None)`` returning "entailment",
    "neutral" or "contradiction" per (premise, hypothesis) pair and a ``model_id`` (the
    engine's :class:`~mars_demo.models.nli.NLIModel`; a fake in tests).
    """

    name = "nli"

    def __init__(self, nli: Any) -> None:
        self.nli = nli

    @classmethod
    def load(cls, settings: Any) -> "NLIJudge":
        """The judge on the NLI model the engine loads for ``settings`` (the same cached
        object; nothing else is loaded)."""
        from ..models.registry import nli_for

        return cls(nli_for(settings))

    def __call__(self, question, prediction, references):
        return self.judge_many([(question, prediction, references)])[0]

    def judge_many(self, items):
        pairs: list[tuple[str, str]] = []
        asked: list[list[tuple[str, int]]] = []  # per item: (reference, index of its pair)
        for question, prediction, references in items:
            q = question.strip()
            mine = []
            for ref in references:
                if normalize_answer(ref) == normalize_answer(prediction):
                    mine.append((ref, -1))  # the same words: no model call
                    continue
                mine.append((ref, len(pairs)))
                pairs += [(f"{q} {ref}", f"{q} {prediction}"), (f"{q} {prediction}", f"{q} {ref}")]
            asked.append(mine)
        truncated: list[int] = []
        labels = self.nli.verdicts(pairs, truncated) if pairs else []
        cut = set(truncated)
        out = []
        for mine in asked:
            seen = []
            verdict = None
            for ref, k in mine:
                if k < 0:
                    verdict = Verdict(True, None, f"{ref!r}: the same words")
                    break
                both = (labels[k], labels[k + 1])
                note = " (cut to fit the NLI model)" if {k, k + 1} & cut else ""
                seen.append(f"{ref!r}: {both[0]} / {both[1]}{note}")
                if both == ("entailment", "entailment"):
                    verdict = Verdict(True, None, seen[-1])
                    break
            out.append(verdict or Verdict(False, None, "; ".join(seen) or "no reference"))
        return out

    def describe(self):
        return {"name": self.name, "threshold": None, "model": self.nli.model_id}


class ExactMatchJudge(Judge):
    name = "em"

    def __call__(self, question, prediction, references):
        return Verdict(any(exact_match(prediction, r) for r in references))


class F1Judge(Judge):
    name = "f1"

    def __init__(self, threshold: float = DEFAULT_THRESHOLDS["f1"]) -> None:
        self.threshold = _check_threshold(threshold)

    def __call__(self, question, prediction, references):
        best = max((token_f1(prediction, r) for r in references), default=0.0)
        return Verdict(best >= self.threshold, best)


class RougeJudge(Judge):
    name = "rouge"

    def __init__(self, threshold: float = DEFAULT_THRESHOLDS["rouge"]) -> None:
        from rouge_score import rouge_scorer

        self.threshold = _check_threshold(threshold)
        self._scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)

    def __call__(self, question, prediction, references):
        best = max(
            (self._scorer.score(r, prediction)["rougeL"].fmeasure for r in references),
            default=0.0,
        )
        return Verdict(best >= self.threshold, float(best))


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


def _check_threshold(t: Any) -> float:
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 <= t <= 1.0:
        raise ValueError(f"the judge threshold must be a number from 0 to 1; got {t!r}")
    return float(t)


def make_judge(name: str, threshold: float | None = None, *, nli: Any = None,
               **llm_options: Any) -> Judge:
    """A judge by name (:data:`JUDGES`); ``threshold`` for f1/rouge (default
    :data:`DEFAULT_THRESHOLDS`); ``nli`` (an NLI model, see :class:`NLIJudge`) for nli;
    ``llm_options`` (endpoint, model, api, api_key_env) for llm."""
    if name in ("em", "contains", "nli") and threshold is not None:
        raise ValueError(f"the {name} judge takes no threshold")
    if name == "em":
        return ExactMatchJudge()
    if name == "contains":
        return ContainsJudge()
    if name == "nli":
        if nli is None:
            raise ValueError("the nli judge needs the NLI model (NLIJudge.load(settings))")
        return NLIJudge(nli)
    if name in ("f1", "rouge"):
        t = DEFAULT_THRESHOLDS[name] if threshold is None else threshold
        return F1Judge(t) if name == "f1" else RougeJudge(t)
    if name == "llm":
        if threshold is not None:
            raise ValueError("the llm judge takes no threshold")
        endpoint = llm_options.pop("endpoint", None)
        if not endpoint:
            raise ValueError("the llm judge needs a server: give --judge-endpoint URL")
        return LLMJudge(endpoint, **{k: v for k, v in llm_options.items() if v is not None})
    raise ValueError(f"judge must be one of {', '.join(JUDGES)}; got {name!r}")
