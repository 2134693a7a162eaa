"""The LLM contract: what the engine asks of a language model, written down once.

Two adapters satisfy :class:`LanguageModel`: the in-process Hugging Face model
(:class:`mars_demo.models.llm.LLM`) and a client of an OpenAI-compatible server
(:class:`mars_demo.models.endpoint.EndpointLLM`). The engine builds a :class:`Prompt` with
:meth:`LanguageModel.build_prompt`, says what to generate in one :class:`GenerationRequest` (the
role ``GenerationConfig`` plays in transformers) and gets a :class:`GenerationResult` back: the
answers, where their log-probs came from and the seconds it took.

>>> GenerationRequest(samples=5, temperature=0.5, top_p=1.0, max_new_tokens=64, seed=0)
... # doctest: +ELLIPSIS
GenerationRequest(samples=5, temperature=0.5, ..., greedy=True, alternatives=0)

Pure Python: no torch or transformers here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, NamedTuple, Protocol, Sequence, runtime_checkable

from ..answers import Answer

if TYPE_CHECKING:
    from ..recipes import Recipe

#: ``GenerationResult.logprob_source`` of answers whose log-probs are the logits of generation.
SOURCE_GENERATION = "generation"


@dataclass(frozen=True)
class GenerationRequest:
    """What to generate for one prompt (or each prompt of a batch).

    The greedy answer (``greedy``) and ``samples`` sampled answers; the same ``seed`` and
    request give the same answers. ``stop_strings`` end an answer (with ``keep_stop`` the stop
    string stays in it and is scored, as the published MARS code kept its "." token);
    ``banned_strings`` never appear in an answer (no token holding one is generated) and are no
    stop strings. Log-probs are always the model's own at temperature 1, whatever the sampling
    settings.
    """

    samples: int  # sampled answers; 0 = the greedy answer alone
    temperature: float  # of the samples; the greedy answer is greedy
    top_p: float  # nucleus sampling; 1.0 = off
    max_new_tokens: int  # per answer
    seed: int
    top_k: int = 0  # top-k sampling; 0 = off
    stop_strings: tuple[str, ...] = ()  # end an answer (the paper prompt's "." and newline)
    keep_stop: bool = False  # the stop string stays in the answer and is scored
    banned_strings: tuple[str, ...] = ()  # never generated; no stop strings
    greedy: bool = True  # False: the samples alone, no greedy answer (a reference path)
    alternatives: int = 0  # top alternatives kept per greedy token (CCP); 0 = none


class Prompt(NamedTuple):
    """A prompt as built for one question: its ``text``, its ``token_ids`` (empty when only a
    server knows the tokenizer), the ``preset`` used ("paper" or "chat") and ``warnings``
    (e.g. a chat prompt asked for but no chat template known)."""

    text: str
    token_ids: list[int]
    preset: str
    warnings: list[str]


class NextToken(NamedTuple):
    """The log-prob of one token right after a text (:meth:`LanguageModel.next_token_logprob`):
    ``logprob`` (natural log, temperature 1; None when a server did not return it, with a
    warning saying so), the ``token`` read (its text) and ``warnings``."""

    logprob: float | None
    token: str
    warnings: list[str]


@dataclass
class GenerationResult:
    """The answers to one prompt: ``greedy`` (None for a request with ``greedy=False``), the
    ``samples``, where their log-probs came from (``logprob_source``: "generation" in-process;
    "endpoint" or "endpoint-teacher-forced" from a server) and ``timings_s`` ("generate",
    "logprobs"; in a batch each prompt's equal share of the batch's seconds)."""

    greedy: Answer | None
    samples: list[Answer]
    logprob_source: str = SOURCE_GENERATION
    timings_s: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class LanguageModel(Protocol):
    """What the engine needs from an LLM (see the module docstring)."""

    model_id: str  # how results name the model
    quantized: bool  # loaded in 4-bit
    quantization: str | None  # its 4-bit weights ("nf4", "torchao-int4"); None: unquantized
    decoding: str | None  # "dynamic" or "static-compiled"; None: a server's own
    notes: list[str]  # warnings every analysis of this LLM carries (how it was loaded)

    @property
    def bos_token_id(self) -> int | None:
        """The tokenizer's beginning-of-sequence id, when a tokenizer is known."""

    def build_prompt(self, question: str, preset: str | None,
                     recipe: "Recipe | None" = None,
                     context: Sequence[dict[str, str]] = ()) -> Prompt:
        """The prompt for ``question``: ``preset`` "paper", "chat" or None (the model's
        default); the ``recipe``'s prompt choices (the default recipe's when None);
        ``context``: chat messages before the question (a system prompt, earlier turns), which
        the chat prompt renders in place of its own system instruction
        (:func:`~mars_demo.models.prompts.chat_messages`). Raises ``OptionError`` for a
        question that would inject control tokens."""

    def generate(self, prompt: Prompt, request: GenerationRequest, *,
                 on_text: Callable[[str], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> GenerationResult:
        """The answers to one prompt. ``on_text`` receives the greedy answer's text as it grows
        (or once it is complete); once ``should_stop()`` is True generation stops with
        ``GenerationCancelled``."""

    def generate_many(self, prompts: Sequence[Prompt], request: GenerationRequest, *,
                      should_stop: Callable[[], bool] | None = None
                      ) -> list[GenerationResult]:
        """:meth:`generate` for several prompts at once (nothing streams), one result each."""

    def teacher_forced(self, prompt: Prompt, answers: Sequence[Answer]) -> list[Answer]:
        """Answers given as text, tokenized and scored by a teacher-forced pass after
        ``prompt``: new :class:`~mars_demo.answers.Answer` objects with tokens and log-probs."""

    def next_token_logprob(self, text: str, target: str) -> NextToken:
        """The log-prob that the next token after ``text`` (the whole input, tokenized as the
        model's tokenizer does, its beginning-of-sequence token included) is the first token of
        ``target`` (tokenized alone, special tokens left out; a warning when ``target`` takes
        several tokens). One forward pass; for P(True) (:mod:`mars_demo.core.p_true`)."""
