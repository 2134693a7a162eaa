"""Answers in: the typed answer set that :func:`mars_demo.score` turns into an analysis.

An answer set is a question, the greedy answer and the sampled answers, each answer its text and
its LLM tokens (text, natural-log probability, and optionally the token id and the token's
character offsets in the answer). It is what generation produces (in-process, or through an
OpenAI-compatible server) and what a user brings from elsewhere: a log of production traffic, an
evaluation already run, another serving engine.

The JSON form uses the names of the analysis JSON, so ``ask --json`` output is an answer set too::

    {"question": "Which planet is known as the Red Planet?",
     "greedy":  {"text": "Mars", "tokens": [{"text": "Mars", "logprob": -0.05}]},
     "samples": [{"text": "It is Mars", "tokens": [{"text": "It", "logprob": -1.2},
                                                    {"text": " is", "logprob": -0.3},
                                                    {"text": " Mars", "logprob": -0.1}]}]}

An answer may also be given as text alone (a string, or an object without ``tokens``): its
log-probs then come from a teacher-forced pass of the loaded LLM, and the result says so.

Pure Python: no torch, numpy or transformers here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from . import texts
from .errors import AnswerSetError, OptionError
from .messages import parse_messages

# A log-prob a hair above 0 is float rounding of log(1) (a server's log-softmax); more is an error.
POSITIVE_LOGPROB_TOLERANCE = 1e-6
MAX_SAMPLES = 100  # answers beyond this per set are refused (NLI is quadratic in samples)
MAX_ANSWER_CHARS = 20_000  # one answer's text
MAX_TOKENS_PER_ANSWER = 4096

# Settings of an analysis JSON that describe how its answers were made; kept when it is re-scored.
RECORDED = ("llm", "load_in_4bit", "quantization", "decoding", "llm_endpoint", "llm_backend",
            "device", "samples", "temperature", "top_p", "max_new_tokens", "seed", "prompt")


CUT_OFF_NOTE = (
    "The answer hit the max-new-tokens limit and was cut off; raise max new tokens for a "
    "complete answer."
)
EMPTY_NOTE = "The answer is empty; its score is the probability of its tokens."


def known_notes(text: str, finish_reason: str) -> list[str]:
    """The warnings an answer's own fields imply (cut off at the token limit, empty)."""
    notes = [CUT_OFF_NOTE] if finish_reason == "length" else []
    if not text.strip():
        notes.append(EMPTY_NOTE)
    return notes


def recorded_generation(settings: dict[str, Any]) -> dict[str, Any]:
    """What an analysis's settings say about how its answers were made (see RECORDED)."""
    made = {k: settings[k] for k in RECORDED if k in settings}
    if settings.get("generated_with_recipe"):
        made["recipe"] = settings["generated_with_recipe"]
    if "llm" in (settings.get("toy_models") or ()):  # answers of a toy LLM stay said so
        made["toy_llm"] = True
    return made


@dataclass
class Answer:
    """One answer before scoring: its text, its LLM tokens and their log-probs (generated here,
    by a server, or given); :class:`~mars_demo.result.ScoredAnswer` is the same answer scored.

    ``spans[i]`` is token i's ``(start, end)`` character range in ``text`` (end exclusive; a token
    that is only part of a multi-byte character, or only the whitespace before the answer, may be
    empty). ``logprobs[i]`` is log P(token i | prompt, tokens before it) at temperature 1, or the
    whole list is ``None`` when the answer came as text alone (its tokens are then unknown too:
    ``token_ids``, ``token_texts`` and ``spans`` are empty until a teacher-forced pass fills them).
    ``token_ids`` holds ``None`` where the id is unknown (answers from a server that returns only
    token texts). ``finish_reason`` is "stop" (stop string or end of sequence) or "length".
    """

    text: str
    token_ids: list[int | None]
    token_texts: list[str]
    spans: list[tuple[int, int]]
    logprobs: list[float] | None
    finish_reason: str = "stop"
    warnings: list[str] = field(default_factory=list)
    # per token, beside the log-probs: "entropy", "kl_uniform", "alternatives" (see
    # mars_demo.result.Token); a key is absent where the source did not give it
    token_stats: dict[str, list] = field(default_factory=dict)
    entropy_top_k: int | None = None  # entropies from a server's top-k log-probs (a lower bound)
    # the end-of-sequence token the answer ended on, not part of it: {"id", "text", "logprob",
    # and where known "entropy", "kl_uniform", "alternatives"} (None: it ended otherwise, at a
    # stop string or the token limit, or the source did not say)
    end_token: dict[str, Any] | None = None

    @property
    def has_logprobs(self) -> bool:
        return self.logprobs is not None

    @classmethod
    def text_only(cls, text: str, finish_reason: str = "stop") -> "Answer":
        return cls(text=text, token_ids=[], token_texts=[], spans=[], logprobs=None,
                   finish_reason=finish_reason)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "finish_reason": self.finish_reason}
        if self.logprobs is not None:
            out["tokens"] = [
                {"id": i, "text": t, "start": a, "end": b, "logprob": lp}
                for i, t, (a, b), lp in zip(
                    self.token_ids, self.token_texts, self.spans, self.logprobs
                )
            ]
            for key, values in self.token_stats.items():
                for token, value in zip(out["tokens"], values):
                    if value is not None:
                        token[key] = value
            if self.entropy_top_k is not None:
                out["entropy_top_k"] = self.entropy_top_k
            if self.end_token is not None:
                out["end_token"] = {k: v for k, v in self.end_token.items() if v is not None}
        return out

    def cut_stats(self, keep: int) -> None:
        """Keep the token statistics of the first ``keep`` tokens (an answer cut short)."""
        self.token_stats = {k: list(v[:keep]) for k, v in self.token_stats.items()}


@dataclass
class AnswerSet:
    """A question with its greedy answer and sampled answers, ready to be scored.

    ``prompt``/``prompt_token_ids`` are what the answers continued (known for answers generated
    here; used for a teacher-forced pass when log-probs are missing). ``logprob_source`` says where
    the log-probs came from: "generation" (the logits of generation, in-process), "given" (the
    input carried them), "teacher-forced" (a pass of the loaded LLM over the given text), or a
    server's description (e.g. "endpoint").
    """

    question: str
    greedy: Answer
    samples: list[Answer]
    prompt: str | None = None
    prompt_token_ids: list[int] | None = None
    prompt_preset: str | None = None
    logprob_source: str = "given"
    warnings: list[str] = field(default_factory=list)
    # What made the answers, as far as known (llm, prompt, temperature, ...): the result's
    # settings record it. Timings of generation, in seconds.
    generation: dict[str, Any] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)
    # the chat messages the question came with (messages.parse_messages: a system prompt, earlier
    # turns, the question last), None for a question alone
    messages: list[dict[str, str]] | None = None

    @property
    def context(self) -> list[dict[str, str]]:
        """The messages before the question (a system prompt, earlier turns): what a chat
        prompt puts before it; empty for a question alone."""
        return list(self.messages[:-1]) if self.messages else []

    @property
    def answers(self) -> list[Answer]:
        return [self.greedy, *self.samples]

    @property
    def names(self) -> list[str]:
        """How warnings name the answers: "Greedy answer", "Sample 1", ..."""
        return ["Greedy answer"] + [f"Sample {i + 1}" for i in range(len(self.samples))]

    @property
    def missing_logprobs(self) -> bool:
        return any(not a.has_logprobs for a in self.answers)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "question": self.question,
            "greedy": self.greedy.to_dict(),
            "samples": [s.to_dict() for s in self.samples],
        }
        if self.prompt is not None:
            out["prompt"] = self.prompt
        if self.prompt_token_ids is not None:
            out["prompt_token_ids"] = list(self.prompt_token_ids)
        if self.messages is not None:
            out["messages"] = [dict(m) for m in self.messages]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> "AnswerSet":
        """Read an answer set (or an analysis JSON) and check it; raises :class:`AnswerSetError`
        naming the answer and token at fault.

        >>> s = AnswerSet.from_dict({"question": "Red planet?",
        ...     "greedy": {"text": "Mars", "tokens": [{"text": "Mars", "logprob": -0.1}]},
        ...     "samples": ["Mars", "It is Mars"]})
        >>> s.greedy.spans, s.samples[1].has_logprobs
        ([(0, 4)], False)
        """
        if not isinstance(data, dict):
            raise AnswerSetError(
                f"an answer set must be a JSON object with question, greedy and samples; got "
                f"{type(data).__name__}"
            )
        question = data.get("question")
        if not isinstance(question, str) or not question.strip():
            raise AnswerSetError("the answer set has no question (a non-empty string)")
        if "greedy" not in data:
            raise AnswerSetError("the answer set has no greedy answer ('greedy')")
        samples = data.get("samples")
        if not isinstance(samples, list) or len(samples) < 1:
            raise AnswerSetError(
                "the answer set needs at least one sampled answer ('samples': a non-empty list)"
            )
        if len(samples) > MAX_SAMPLES:
            raise AnswerSetError(
                f"the answer set has {len(samples)} samples; the limit is {MAX_SAMPLES}"
            )
        greedy = parse_answer(data["greedy"], "greedy answer")
        parsed = [parse_answer(s, f"sample {i + 1}") for i, s in enumerate(samples)]
        prompt = data.get("prompt")
        ids = data.get("prompt_token_ids")
        if prompt is not None and not isinstance(prompt, str):
            raise AnswerSetError("'prompt' must be a string")
        if ids is not None and not (
            isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool)
                                          for i in ids)
        ):
            raise AnswerSetError("'prompt_token_ids' must be a list of integers")
        negative = next(((n, i) for n, i in enumerate(ids or (), 1) if i < 0), None)
        if negative is not None:
            raise AnswerSetError(f"prompt_token_ids: id {negative[1]} (position {negative[0]}) "
                                 "is negative; token ids are 0 or more")
        messages = data.get("messages")
        if messages is not None:
            messages = parse_messages(messages)
            if messages[-1]["content"] != question:
                raise AnswerSetError("the last message's content must be the question")
        recorded = data.get("settings") if isinstance(data.get("settings"), dict) else {}
        preset = recorded.get("prompt")
        return cls(
            question=question,
            greedy=greedy,
            samples=parsed,
            prompt=prompt,
            prompt_token_ids=ids,
            prompt_preset=preset if preset in ("paper", "chat") else None,
            # an analysis JSON says where its log-probs came from; otherwise they were given
            logprob_source=str(recorded.get("logprob_source") or "given"),
            generation=recorded_generation(recorded),
            messages=messages,
        )


@dataclass(frozen=True)
class WorkCap:
    """The most an answer set may cost the LLM (a public page's cap; None: no limit), counted in
    the LLM's tokens once its tokenizer has read the answers (:meth:`check`; the page checks the
    same in characters before, :meth:`mars_demo.hosting.access.Access.check_score_work`).

    ``sample_tokens``: the samples x the longest answer, the main (greedy) answer included: what
    the heaviest question allowed would generate (samples x max new tokens). ``prompt_tokens``:
    the prompt the answers continue (their ``prompt_token_ids``, or the prompt built from the
    question)."""

    sample_tokens: int | None = None
    prompt_tokens: int | None = None

    def check(self, samples: int, longest: int, prompt: int) -> None:
        """Raise :class:`~mars_demo.errors.OptionError` saying which limit and by how much when
        ``samples`` sampled answers whose longest answer has ``longest`` tokens, after a prompt
        of ``prompt`` tokens, cost more than this cap."""
        if self.prompt_tokens is not None and prompt > self.prompt_tokens:
            raise OptionError(texts.ACCESS_PROMPT_TOO_LONG.format(
                size=prompt, unit="tokens of the LLM", limit=self.prompt_tokens,
                over=prompt - self.prompt_tokens))
        work = samples * longest
        if self.sample_tokens is not None and work > self.sample_tokens:
            raise OptionError(texts.ACCESS_TOO_MUCH_TOKENS.format(
                samples=samples, tokens=longest, work=work, limit=self.sample_tokens,
                over=work - self.sample_tokens))


def check_token_ids(ids: list[int], vocabulary: int, what: str = "prompt_token_ids") -> None:
    """Raise :class:`~mars_demo.errors.AnswerSetError` naming the first id of ``ids`` that is not
    a token of a vocabulary of ``vocabulary`` tokens (ids 0 to ``vocabulary - 1``), before any
    model reads it: an id out of range fails inside the model's embedding (on CUDA as a
    device-side assert that leaves the GPU unusable until the process restarts).

    >>> check_token_ids([5, 2000, -1], 1000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    mars_demo.errors.AnswerSetError: prompt_token_ids: id 2000 (position 2) is not a token ...
    """
    for position, token_id in enumerate(ids, 1):
        if not 0 <= token_id < vocabulary:
            shown = token_id if abs(token_id) < 10**15 else f"of {len(str(abs(token_id)))} digits"
            raise AnswerSetError(
                f"{what}: id {shown} (position {position}) is not a token of the LLM's "
                f"vocabulary (ids 0 to {vocabulary - 1})")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer too large for a float
        return None


def parse_answer(data: Any, name: str) -> Answer:
    """One answer of an answer set: a string (text only) or an object with ``text`` and/or
    ``tokens``. ``name`` ("sample 2") is how errors refer to it."""
    if isinstance(data, str):
        _check_text(data, name)
        _check_nonempty(data, name)
        return Answer.text_only(data)
    if not isinstance(data, dict):
        raise AnswerSetError(f"{name}: must be a string or an object with text and tokens")
    text = data.get("text")
    if text is not None and not isinstance(text, str):
        raise AnswerSetError(f"{name}: 'text' must be a string")
    finish = data.get("finish_reason", "stop")
    if finish not in ("stop", "length"):
        raise AnswerSetError(f"{name}: finish_reason must be 'stop' or 'length'; got {finish!r}")
    tokens = data.get("tokens")
    if tokens is None:
        if text is None:
            raise AnswerSetError(f"{name}: has neither 'text' nor 'tokens'")
        _check_text(text, name)
        _check_nonempty(text, name)
        gen = Answer.text_only(text, finish)
        gen.warnings = known_notes(text, finish)
        return gen
    if not isinstance(tokens, list):
        raise AnswerSetError(f"{name}: 'tokens' must be a list")
    if not tokens:
        raise AnswerSetError(
            f"{name}: has no tokens; give at least one token, or leave 'tokens' out to have the "
            "loaded LLM score the text"
        )
    if len(tokens) > MAX_TOKENS_PER_ANSWER:
        raise AnswerSetError(
            f"{name}: has {len(tokens)} tokens; the limit is {MAX_TOKENS_PER_ANSWER}"
        )
    texts, ids, logprobs, starts, ends = [], [], [], [], []
    stats: dict[str, list] = {"entropy": [], "kl_uniform": [], "alternatives": []}
    for i, tok in enumerate(tokens):
        token = _token(tok, f"{name}, token {i + 1}")
        texts.append(token["text"])
        ids.append(token["id"])
        logprobs.append(token["logprob"])
        for key in stats:
            stats[key].append(token[key])
        starts.append(tok.get("start"))
        ends.append(tok.get("end"))
    joined = "".join(texts)
    if text is None:
        text = joined.strip()
    _check_text(text, name)
    given = [s is not None or e is not None for s, e in zip(starts, ends)]
    if all(given):
        spans = _given_spans(text, starts, ends, name)
    elif any(given):
        raise AnswerSetError(
            f"{name}: some tokens have start/end and others not; give them for every token or "
            "for none"
        )
    else:
        spans = _joined_spans(text, texts, name)
    return Answer(
        text=text,
        token_ids=ids,
        token_texts=texts,
        spans=spans,
        logprobs=logprobs,
        finish_reason=finish,
        warnings=known_notes(text, finish),
        token_stats={k: v for k, v in stats.items() if any(x is not None for x in v)},
        entropy_top_k=_top_k(data.get("entropy_top_k"), name),
        end_token=(None if data.get("end_token") is None
                   else _token(data["end_token"], f"{name}, end token")),
    )


def _token(tok: Any, where: str) -> dict[str, Any]:
    """One token of a given answer, checked: ``text``, ``id`` (None where not given),
    ``logprob`` (at most 0) and the statistics (``entropy``, ``kl_uniform``, ``alternatives``;
    None where not given)."""
    if not isinstance(tok, dict):
        raise AnswerSetError(f"{where}: must be an object with text and logprob")
    t = tok.get("text")
    if not isinstance(t, str):
        raise AnswerSetError(f"{where}: 'text' must be a string")
    if "logprob" not in tok or tok["logprob"] is None:
        raise AnswerSetError(f"{where} ({t!r}): has no logprob")
    lp = _number(tok["logprob"])
    if lp is None or not math.isfinite(lp):
        shown = repr(tok["logprob"])
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise AnswerSetError(f"{where} ({t!r}): logprob must be a finite number; got {shown}")
    if lp > POSITIVE_LOGPROB_TOLERANCE:
        raise AnswerSetError(
            f"{where} ({t!r}): logprob {lp:g} is positive; log-probs are natural logs of "
            "probabilities, so at most 0"
        )
    tid = tok.get("id")
    if tid is not None and (isinstance(tid, bool) or not isinstance(tid, int)):
        raise AnswerSetError(f"{where} ({t!r}): 'id' must be an integer or absent")
    out: dict[str, Any] = {"text": t, "id": tid, "logprob": min(lp, 0.0)}
    for key in ("entropy", "kl_uniform"):
        value = _number(tok.get(key)) if tok.get(key) is not None else None
        if tok.get(key) is not None and (value is None or not math.isfinite(value)):
            raise AnswerSetError(f"{where} ({t!r}): {key} must be a finite number or absent")
        out[key] = value
    out["alternatives"] = _alternatives(tok.get("alternatives"), where, t)
    return out


def _alternatives(value: Any, where: str, text: str) -> list | None:
    """A token's saved alternatives, ``[[text, logprob], ...]``, checked; None when absent."""
    if value is None:
        return None
    ok = isinstance(value, list) and value and all(
        isinstance(a, (list, tuple)) and len(a) == 2 and isinstance(a[0], str)
        and _number(a[1]) is not None and math.isfinite(_number(a[1])) for a in value)
    if not ok:
        raise AnswerSetError(f"{where} ({text!r}): alternatives must be a list of [text, "
                             "logprob] pairs or absent")
    return [[a[0], min(float(a[1]), 0.0)] for a in value]


def _top_k(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AnswerSetError(f"{name}: entropy_top_k must be a whole number >= 1 or absent")
    return value


def _check_text(text: str, name: str) -> None:
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerSetError(
            f"{name}: is {len(text)} characters long; the limit is {MAX_ANSWER_CHARS}"
        )


def _check_nonempty(text: str, name: str) -> None:
    if not text.strip():
        raise AnswerSetError(
            f"{name}: is empty; an empty answer can only be scored with its tokens (the "
            "probability of stopping at once)"
        )


def _given_spans(text: str, starts: list, ends: list, name: str) -> list[tuple[int, int]]:
    spans = []
    prev = 0
    for i, (a, b) in enumerate(zip(starts, ends)):
        where = f"{name}, token {i + 1}"
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (a, b)):
            raise AnswerSetError(f"{where}: start and end must be integers")
        if not (prev <= a <= b <= len(text)):
            raise AnswerSetError(
                f"{where}: start {a}, end {b} must satisfy {prev} <= start <= end <= "
                f"{len(text)} (the answer's length), in order and without overlap"
            )
        spans.append((a, b))
        prev = b
    return spans


def _joined_spans(text: str, texts: list[str], name: str) -> list[tuple[int, int]]:
    """Offsets from concatenated token texts, which must spell the answer's text (surrounding
    whitespace aside: a server's first token often carries the space after "Answer:")."""
    joined = "".join(texts)
    lead = 0
    if joined != text:
        stripped = joined.strip()
        if stripped == text:
            lead = len(joined) - len(joined.lstrip())
        else:
            pos = 0
            for i, t in enumerate(texts):
                if not text.startswith(t, pos):
                    raise AnswerSetError(
                        f"{name}, token {i + 1} ({t!r}): the token texts do not spell the "
                        f"answer's text: after {text[:pos]!r} the text goes on with "
                        f"{text[pos:pos + len(t) + 10]!r}. Give start/end offsets, or tokens "
                        "whose texts concatenate to the answer's text"
                    )
                pos += len(t)
            raise AnswerSetError(
                f"{name}: the token texts spell {joined!r}, which is only the beginning of the "
                f"answer's text {text!r}"
            )
    end = len(text)
    spans = []
    pos = 0
    for t in texts:
        a, b = pos - lead, pos + len(t) - lead
        spans.append((max(0, min(a, end)), max(0, min(b, end))))
        pos += len(t)
    return spans
