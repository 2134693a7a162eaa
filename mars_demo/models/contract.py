"""The LLM contract: what the engine asks of a language model, and what a backend declares,
written down once.

A backend is one module holding its adapter class, which satisfies :class:`LanguageModel`, and
its :class:`Backend` declaration (its name, when the settings choose it, how its model loads,
its :class:`Capabilities`); :mod:`mars_demo.models.backends` lists the declarations. Two ship:
the in-process Hugging Face model (:mod:`mars_demo.models.llm`, "transformers") and a client of
an OpenAI-compatible server (:mod:`mars_demo.models.endpoint`, "server"). The engine builds a
:class:`Prompt` with :meth:`LanguageModel.build_prompt`, says what to generate in one
:class:`GenerationRequest` (the role ``GenerationConfig`` plays in transformers) and gets a
:class:`GenerationResult` back: the answers, where their log-probs came from and the seconds it
took. What a backend cannot do (hidden states through a server, say) its capabilities say, and
the engine asks them before it calls the member that would need it.

>>> GenerationRequest(samples=5, temperature=0.5, top_p=1.0, max_new_tokens=64, seed=0)
... # doctest: +ELLIPSIS
GenerationRequest(samples=5, temperature=0.5, ..., greedy=True, alternatives=0)

Pure Python: no torch or transformers here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol, Sequence, runtime_checkable

from ..answers import Answer

if TYPE_CHECKING:
    from ..recipes import Recipe
    from ..settings import Settings

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
    #: its Hugging Face tokenizer when known here (a server's only when ``--llm`` names it):
    #: what counts a given answer's tokens before a teacher-forced pass; None when unknown
    tokenizer: Any

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
        several tokens). One forward pass; for P(True) (:mod:`mars_demo.core.p_true`).
        Called only where the backend declares ``next_token``."""

    def last_token_embeddings(self, prompt_ids: list[int], answers: Sequence[list[int]]
                              ) -> tuple[list[list[float]], int]:
        """The hidden state of each answer's last token (after ``prompt_ids``) at the middle
        layer, and that layer's index: EigenScore's embeddings. Called only where the backend
        declares ``embeddings``."""


class Unsupported(Exception):
    """A member called that the backend's :class:`Capabilities` say it lacks: a defect of the
    caller, which asks the capabilities first."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend can give beyond the answers and their tokens' log-probs, which every
    backend gives (the model's own, at temperature 1).

    ``full_distribution``: each generated token's entropy and KL from uniform over the whole
    vocabulary (False: the entropy of the top log-probs a server returns, a lower bound, and no
    KL); ``prompt_ids``: the prompt's token ids as the model reads them, always (False: only
    when the model's tokenizer is known here, else none); ``embeddings``: hidden states
    (:meth:`LanguageModel.last_token_embeddings`, EigenScore); ``batching``:
    :meth:`LanguageModel.generate_many` runs several questions together (one batched call, or
    concurrent requests; False: the engine asks one question after another); ``teacher_forcing``:
    answers given as text are scored (:meth:`LanguageModel.teacher_forced`); ``next_token``: one
    next token's log-prob (:meth:`LanguageModel.next_token_logprob`, P(True)'s extra pass)."""

    full_distribution: bool
    prompt_ids: bool
    embeddings: bool
    batching: bool
    teacher_forcing: bool
    next_token: bool

    def listed(self) -> str:
        """The capabilities it has, in words ("full distributions, embeddings, ...")."""
        words = {"full_distribution": "full distributions", "prompt_ids": "prompt ids",
                 "embeddings": "embeddings", "batching": "batching",
                 "teacher_forcing": "teacher forcing", "next_token": "next-token log-probs"}
        return ", ".join(w for k, w in words.items() if getattr(self, k)) or "answers only"


class Load(NamedTuple):
    """How a backend's model loads for some settings (:attr:`Backend.load`): the cache ``key``
    (two settings with the same key share one loaded model), what it is called in messages
    (``what``: "LLM", "LLM server"), the ``source`` it loads from (an id, a path or a URL; a
    model given as a loaded pair is found by it), ``build``, which loads it uncached, and a
    ``hint`` added to the message of a load that fails ("" for none)."""

    key: tuple
    what: str
    source: str
    build: Callable[[], LanguageModel]
    hint: str = ""


@dataclass(frozen=True)
class Backend:
    """One way to run the LLM, declared once in its module as ``BACKEND`` and listed in
    :data:`mars_demo.models.backends.BACKENDS`.

    ``name``: what ``--llm-backend`` takes and every analysis records (``llm_backend``);
    ``summary``: what it is, for ``--help``; ``chosen``: when the settings choose it without
    ``--llm-backend``, in words; ``claims``: that rule (the first backend of the registry that
    claims the settings runs them); ``fields``: the Settings fields that say which model it
    loads (equal fields, the same model); ``capabilities``; ``load``: how its model loads
    (:class:`Load`), given the settings and whether CUDA is usable; ``named``: the models it
    loads from this machine or the Hub, as (what, option, id) for the check before anything
    loads; ``model_name``: the id analyses name its model by, when known before it loads;
    ``describe``: the page's line about its model (``llm``, ``llm_preset``, ``cpu_fallback``,
    ``load_in_4bit``), from the settings, CUDA and the model once loaded (None before);
    ``check``: refuses, before anything loads, settings it cannot run (``OptionError`` or
    ``ModelLoadError`` saying what to change)."""

    name: str
    summary: str
    chosen: str
    claims: Callable[["Settings"], bool]
    fields: tuple[str, ...]
    capabilities: Capabilities
    load: Callable[["Settings", bool], Load]
    named: Callable[["Settings", bool], list[tuple[str, str, str]]]
    model_name: Callable[["Settings", bool], "str | None"]
    describe: Callable[["Settings", bool, Any], dict[str, Any]]
    check: Callable[["Settings", bool], None] = lambda settings, cuda: None

    def help(self) -> str:
        """Its line of ``--llm-backend``'s help: name, summary, capabilities, when chosen."""
        return (f"{self.name} ({self.summary}; {self.capabilities.listed()}; "
                f"chosen {self.chosen})")
