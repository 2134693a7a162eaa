"""The options of an analysis (validated against :mod:`mars_demo.options`) and the model presets.

Pure Python: no torch, transformers or gradio here, so the CLI, the page and the library validate
options the same way before any model is touched.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .errors import OptionError
from .methods import FREE, METHODS, parse_methods
from .optional import OWN_MODELS
from .options import (  # noqa: F401  (re-exported: the names callers have always used)
    CLUSTER_RULES,
    CPU_NLI,
    DECODINGS,
    DEFAULT_BEM,
    DEFAULT_CHUNKER,
    DEFAULT_IMPORTANCE,
    DEFAULT_NLI,
    DISTRIBUTIONS,
    END_TOKEN_RULES,
    GENERATION_FIELDS,
    NLI_PAIRS,
    IMPORTANCE_METHODS,
    MODEL_FIELDS,
    NORMALIZATIONS,
    OPTIONS,
    PROMPTS,
    QUANTIZATIONS,
    RECIPES,
    REQUEST_FIELDS,
    SCORING_FIELDS,
    TORCHAO_NEEDS_4BIT,
)


@dataclass(frozen=True)
class LLMPreset:
    """A named LLM: its Hub id, whether it is instruction-tuned (-> "chat" prompt by default),
    and whether its Hub repository is gated (needs HF_TOKEN and an accepted license)."""

    model_id: str
    instruct: bool
    gated: bool = False
    label: str = ""


LLM_PRESETS: dict[str, LLMPreset] = {
    "qwen2.5-7b-instruct": LLMPreset("Qwen/Qwen2.5-7B-Instruct", True, False, "Qwen2.5 7B Instruct"),
    "llama-2-7b": LLMPreset("meta-llama/Llama-2-7b-hf", False, True, "Llama-2 7B (paper)"),
    "llama-2-7b-chat": LLMPreset("meta-llama/Llama-2-7b-chat-hf", True, True, "Llama-2 7B chat (paper)"),
    "mistral-7b": LLMPreset("mistralai/Mistral-7B-v0.1", False, True, "Mistral 7B (paper)"),
    "falcon-7b-instruct": LLMPreset("tiiuae/falcon-7b-instruct", True, False, "Falcon 7B instruct (paper)"),
    "llama-2-13b": LLMPreset("meta-llama/Llama-2-13b-hf", False, True, "Llama-2 13B (paper)"),
    "cpu-small": LLMPreset("Qwen/Qwen2.5-0.5B-Instruct", True, False, "Qwen2.5 0.5B Instruct (CPU)"),
}
GPU_DEFAULT_PRESET = "qwen2.5-7b-instruct"  # used when CUDA is available, loaded in 4-bit
CPU_DEFAULT_PRESET = "cpu-small"  # used automatically when there is no GPU

MAX_QUESTION_CHARS = 1000  # longer questions are refused (the page and the API too)
SAMPLES_RANGE = OPTIONS["samples"].bounds  # sampled answers per question
TEMPERATURE_RANGE = OPTIONS["temperature"].bounds  # sampling temperature; 0.5 in the paper
TOP_P_RANGE = OPTIONS["top_p"].bounds
MAX_NEW_TOKENS_RANGE = OPTIONS["max_new_tokens"].bounds
SOFTMAX_TEMPERATURE_RANGE = OPTIONS["softmax_temperature"].bounds
SEED_RANGE = OPTIONS["seed"].bounds


@dataclass(frozen=True)
class Settings:
    """Which models (:data:`MODEL_FIELDS`) and the options of one analysis
    (:data:`REQUEST_FIELDS`). ``None`` for a model means "the automatic default". Every field is
    described, with its range, in :mod:`mars_demo.options`."""

    # which models
    llm: str | None = None  # Hub id, local dir or preset name; None = GPU/CPU default preset
    importance: str = DEFAULT_IMPORTANCE
    nli: str | None = None  # None = deberta-large-mnli on GPU, deberta-base-mnli on CPU
    # one field per optional model of its own, named and defaulted by its declaration
    # (mars_demo.optional: "similarity", SAR's cross-encoder; "lars", LARS's scorer), loaded
    # only for the methods that run it
    __annotations__.update({m.field: "str" for m in OWN_MODELS})
    locals().update({m.field: m.default for m in OWN_MODELS})
    bem: str = DEFAULT_BEM
    chunker: str = DEFAULT_CHUNKER
    load_in_4bit: bool | None = None  # None = 4-bit on CUDA, full precision on CPU
    quantization: str = "nf4"  # the 4-bit weights: "nf4" (bitsandbytes) | "torchao-int4"
    decoding: str = "dynamic"  # "dynamic" | "static-compiled" (static cache + torch.compile)
    llm_endpoint: str | None = None  # OpenAI-compatible server instead of an in-process LLM
    llm_model: str | None = None  # the model name on that server (None: the only one served)
    llm_api_key_env: str | None = None  # NAME of the variable holding its API key
    llm_timeout: float = 120.0  # seconds per request to that server
    llm_backend: str | None = None  # how the LLM runs (models.backends); None: from the above
    nli_int8: bool = False  # the NLI model in int8 on the CPU (dynamic quantization)
    # generation: changing one means generating again
    samples: int = 5  # sampled answers (B in the paper)
    temperature: float = 0.5  # sampling temperature of the samples (greedy answer is greedy)
    top_p: float = 1.0  # 1.0 = no nucleus truncation
    max_new_tokens: int = 64  # per answer
    seed: int = 0  # same seed + same settings = same answers
    prompt: str | None = None  # "paper" | "chat"; None = chat for instruction models
    # scoring: changing one re-scores the answers already generated
    importance_method: str = "model"  # "model" | "token" | "bem"
    normalization: str = "sum"  # phrase scores -> phrase weights: "sum" | "softmax"
    softmax_temperature: float = 0.1  # only for normalization="softmax"
    distribution: str = "equal"  # phrase weight -> tokens: "equal" | "max" | "min"
    cluster_rule: str = "strict"  # "strict": entailment both ways; "lenient": no contradiction
    end_token: str = "exclude"  # "include": the token-level methods count the end token
    nli_pairs: str = "all"  # "clustering": the NLI judges only the pairs the clustering reads
    recipe: str = "default"  # "default" | "paper-code" (the published code's choices)
    # the other uncertainty methods (mars_demo.methods): ids, in order; None = methods.FREE.
    # Given as "id,id" or a list, kept as a tuple.
    methods: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        validate(self)
        if self.methods is not None:
            try:
                ids = parse_methods(self.methods)
            except ValueError as err:
                raise OptionError(str(err)) from err
            object.__setattr__(self, "methods", ids)  # frozen: set once, here

    @property
    def method_ids(self) -> tuple[str, ...]:
        """The methods to compute: those asked for, else every free one (with ``nli_pairs``
        "clustering", every free one that does not read every pair's NLI probabilities)."""
        if self.methods is not None:
            return self.methods
        if self.nli_pairs == "clustering":
            return tuple(m for m in FREE if not reads_every_pair(m))
        return FREE

    def replace(self, **changes: Any) -> "Settings":
        """These settings with ``changes``; an unknown name raises :class:`OptionError`."""
        check_names(changes)
        return dataclasses.replace(self, **changes)

    def with_models_of(self, other: "Settings") -> "Settings":
        """These analysis options with ``other``'s models (every field of MODEL_FIELDS)."""
        return self.replace(**{name: getattr(other, name) for name in MODEL_FIELDS})

    def models(self) -> dict[str, Any]:
        """Which models: the fields of :data:`MODEL_FIELDS`."""
        return {name: getattr(self, name) for name in MODEL_FIELDS}

    def request(self) -> dict[str, Any]:
        """The per-request options: the fields of :data:`REQUEST_FIELDS`."""
        return {name: getattr(self, name) for name in REQUEST_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON has them (``methods`` a list), so a saved copy compares equal."""
        out = dataclasses.asdict(self)
        if out["methods"] is not None:
            out["methods"] = list(out["methods"])
        return out


def reads_every_pair(method_id: str) -> bool:
    """Whether a method reads the NLI probabilities of every pair of samples."""
    return "nli_probabilities" in METHODS[method_id].needs


def validate(s: Settings) -> None:
    """Raise :class:`OptionError` naming the allowed range for the first bad option."""
    for name in REQUEST_FIELDS + MODEL_FIELDS:
        OPTIONS[name].check(getattr(s, name))
    if s.nli_pairs == "clustering" and s.methods is not None:
        try:
            every = [m for m in parse_methods(s.methods) if reads_every_pair(m)]
        except ValueError:
            every = []  # an unknown id: __post_init__ says so
        if every:
            raise OptionError(
                f"nli_pairs clustering judges only the pairs the clustering reads, and "
                f"{', '.join(every)} read{'s' if len(every) == 1 else ''} every pair's NLI "
                "probabilities: drop them or use nli_pairs all")
    if s.quantization == QUANTIZATIONS[1] and s.load_in_4bit is False:
        raise OptionError(TORCHAO_NEEDS_4BIT)
    if s.llm_endpoint and (s.quantization, s.decoding) != (QUANTIZATIONS[0], DECODINGS[0]):
        raise OptionError("quantization and decoding are the in-process LLM's; the server of "
                          "llm_endpoint loads and decodes its model itself: drop them")


#: the models scoring loads, named by an analysis' (or a run's) recorded settings
SCORING_MODELS = ("importance", "nli", *(m.field for m in OWN_MODELS), "bem", "chunker")


def recorded_models(recorded: dict[str, Any]) -> dict[str, Any]:
    """The Settings model fields that an analysis or a run recorded (its ``settings``), so that
    scoring its answers again loads the models that scored them: the importance, NLI and
    optional models, and the LLM that made the answers (in-process, or the model of its server),
    which only answers without log-probs and an extra LLM pass (P(True)) need. Fields it does
    not record are left out.

    >>> recorded_models({"llm": "/m/llm", "load_in_4bit": False, "quantization": None,
    ...                  "decoding": "dynamic", "llm_endpoint": None, "nli": "/m/nli",
    ...                  "importance": "/m/importance", "samples": 5})
    {'importance': '/m/importance', 'nli': '/m/nli', 'llm': '/m/llm', 'load_in_4bit': False, 'decoding': 'dynamic'}
    >>> recorded_models({"llm": "qwen", "llm_endpoint": "http://h:8000/v1", "llm_model": None})
    {'llm_endpoint': 'http://h:8000/v1', 'llm_model': 'qwen'}
    """
    out: dict[str, Any] = {k: recorded[k] for k in SCORING_MODELS
                           if isinstance(recorded.get(k), str) and recorded[k]}
    if isinstance(recorded.get("llm_endpoint"), str) and recorded["llm_endpoint"]:
        out["llm_endpoint"] = recorded["llm_endpoint"]
        served = recorded.get("llm_model") or recorded.get("llm")
        if isinstance(served, str) and served:
            out["llm_model"] = served
        return out
    if isinstance(recorded.get("llm"), str) and recorded["llm"]:
        out["llm"] = recorded["llm"]
        for name in ("load_in_4bit", "quantization", "decoding"):
            value = recorded.get(name)
            if value is not None and (name != "load_in_4bit" or isinstance(value, bool)):
                out[name] = value
    return out


def for_answers(recorded: dict[str, Any] | None, given: dict[str, Any]) -> Settings:
    """The settings to score answers again: the options ``given``, then for every model and
    scoring option not given what the answers' analysis ``recorded`` (its models,
    :func:`recorded_models`, and its scoring options), then the defaults. Generation options
    are never taken from it (scoring does not generate)."""
    values = dict(recorded_models(recorded)) if recorded else {}
    if recorded:
        values.update({k: recorded[k] for k in SCORING_FIELDS if k in recorded})
    values.update(given)
    return Settings(**values)


def resolve_llm(llm: str | None, cuda: bool) -> tuple[str, LLMPreset | None]:
    """Turn a preset name, Hub id or directory into (model id or path, preset if known)."""
    if llm is None:
        llm = GPU_DEFAULT_PRESET if cuda else CPU_DEFAULT_PRESET
    if llm in LLM_PRESETS:
        preset = LLM_PRESETS[llm]
        return preset.model_id, preset
    for preset in LLM_PRESETS.values():
        if preset.model_id == llm:
            return llm, preset
    return llm, None


def check_names(options: Any) -> None:
    """Raise :class:`OptionError` naming every keyword of ``options`` that is no field of
    :class:`Settings` (with the known ones), as every public call does.

    >>> check_names({"normalisation": "sum"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    mars_demo.errors.OptionError: unknown option(s) normalisation; known: llm, ...
    """
    unknown = sorted(set(options) - set(Settings.__dataclass_fields__))
    if unknown:
        raise OptionError(f"unknown option(s) {', '.join(unknown)}; known: "
                          f"{', '.join(Settings.__dataclass_fields__)}")


def _checked_init(init: Any) -> Any:
    """``Settings``' own ``__init__`` with its keywords checked by :func:`check_names` first,
    so ``Settings(normalisation=...)`` raises :class:`OptionError`, not ``TypeError``."""
    import functools

    @functools.wraps(init)
    def __init__(self: Settings, *args: Any, **kwargs: Any) -> None:
        check_names(kwargs)
        init(self, *args, **kwargs)

    return __init__


Settings.__init__ = _checked_init(Settings.__init__)  # type: ignore[method-assign]


def resolve_nli(nli: str | None, cuda: bool) -> str:
    if nli is None:
        return DEFAULT_NLI if cuda else CPU_NLI
    return nli


# Zero-width (non-)joiners are kept between two visible characters, where they are part of the
# text: Persian and Indic words need ZWNJ, emoji sequences such as a family are held by ZWJ.
JOINERS = ("\u200c", "\u200d")
# A question longer than this many characters is refused before it is even cleaned (cleaning can
# only shorten it by collapsing whitespace and removing invisible characters).
MAX_RAW_QUESTION_CHARS = 20 * MAX_QUESTION_CHARS


def clean_question(question: Any) -> str:
    r"""Validate and normalize a question: str, non-empty, at most MAX_QUESTION_CHARS characters.

    Control characters (except ordinary whitespace), lone surrogates and invisible format
    characters (zero-width space, bidirectional controls, byte-order mark, Unicode tag
    characters...) are removed; a zero-width joiner or non-joiner stays only between two visible
    characters. Whitespace runs collapse to one space. Raises :class:`OptionError`.

    >>> clean_question("  Which\u200b planet\u202e is red?\n")
    'Which planet is red?'
    >>> clean_question("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645") == "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"
    True
    """
    import unicodedata

    if not isinstance(question, str):
        raise OptionError(f"question must be text; got {type(question).__name__}")
    if len(question) > MAX_RAW_QUESTION_CHARS:
        raise OptionError(
            f"question is {len(question)} characters long; the limit is {MAX_QUESTION_CHARS}"
        )
    kept: list[str] = []
    for ch in question:
        if ch.isspace():
            kept.append(" ")
        elif ch in JOINERS or unicodedata.category(ch) not in ("Cc", "Cf", "Cs"):
            kept.append(ch)
        # else: control, format (zero-width, bidi marks, tags), lone surrogate: dropped
    visible = [ch != " " and ch not in JOINERS for ch in kept]
    kept = [
        ch
        for i, ch in enumerate(kept)
        if ch not in JOINERS or (0 < i < len(kept) - 1 and visible[i - 1] and visible[i + 1])
    ]
    text = " ".join("".join(kept).split())
    if not text:
        if question.strip():  # something was typed, but nothing visible
            raise OptionError(
                "question is empty once control and invisible (zero-width, direction) "
                "characters are removed: type a question"
            )
        raise OptionError("question is empty: type a question")
    if len(text) > MAX_QUESTION_CHARS:
        raise OptionError(
            f"question is {len(text)} characters long; the limit is {MAX_QUESTION_CHARS}"
        )
    return text
