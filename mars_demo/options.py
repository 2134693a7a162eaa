"""One schema of every option: its type, range or choices, default and help text.

The command line's flags, the page's controls and the API's parameters are all built from
:data:`REQUEST_OPTIONS` (what one analysis may choose) and :data:`MODEL_OPTIONS` (which models the
engine loads; the host chooses those, never a page visitor). :class:`~mars_demo.settings.Settings`
validates against the same schema, so every entry point refuses the same values with the same
message. The page's server (``python app.py``, :mod:`mars_demo.serve`) takes the model options,
``methods`` and :data:`SERVER_OPTIONS` (its address, who may see it, its limits), each also from
its environment variable (:attr:`Option.variable`).

Request options come in two stages: ``generation`` options change the answers (changing one
means generating again); ``scoring`` options only change how answers already generated are scored,
so changing one re-scores without calling the LLM.

Pure Python: no torch, transformers or gradio here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import OptionError
from .optional import OWN_MODELS

# Model ids (Hub ids; a local directory works wherever an id does).
DEFAULT_IMPORTANCE = "duygunuryldz/MARS"  # BERT-base token classifier trained for MARS
DEFAULT_NLI = "microsoft/deberta-large-mnli"
CPU_NLI = "microsoft/deberta-base-mnli"  # smaller NLI model of the CPU preset
DEFAULT_BEM = "zli12321/answer_equivalence_bert"  # answer-equivalence classifier for "bem"
DEFAULT_CHUNKER = "flair/chunk-english"  # Flair phrase chunker for "bem"

PROMPTS = ("paper", "chat")
IMPORTANCE_METHODS = ("model", "token", "bem")
NORMALIZATIONS = ("sum", "softmax", "sum-softmax")
DISTRIBUTIONS = ("equal", "max", "min")
CLUSTER_RULES = ("strict", "lenient")
#: whether the token-level methods count the end-of-sequence token an answer ended on
END_TOKEN_RULES = ("exclude", "include")
#: which pairs of samples the NLI model judges: every ordered pair, or the clustering's alone
NLI_PAIRS = ("all", "clustering")
RECIPES = ("default", "paper-code", "truthtorchlm")
#: the in-process LLM's 4-bit weights (with load_in_4bit) and how it decodes: the operator's
#: choice (mars_demo.models.llm_options); the defaults are today's (NF4, dynamic)
QUANTIZATIONS = ("nf4", "torchao-int4")
DECODINGS = ("dynamic", "static-compiled")
#: why torchao-int4 with load_in_4bit false is refused (by Settings and by the loader alike)
TORCHAO_NEEDS_4BIT = ("quantization torchao-int4 makes 4-bit weights, so it cannot go with "
                      "load_in_4bit false (--no-4bit): drop one of them")
# An environment variable's words for a boolean (any case, spaces around ignored); "" is off.
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class Option:
    """One option. ``kind`` is int, float, str, bool or tuple (names: one text of names
    separated by commas, or a list of names); ``bounds`` (lo, hi) for numbers,
    ``choices`` for names; ``optional``: None is allowed (it means "automatic", see ``help``).
    ``stage``: "model", "generation", "scoring" or "server" (see the module's docstring).
    ``flag_name``: the flag without its dashes where it is not the name's (``4bit``);
    ``env``: the environment variable where it is not ``MARS_DEMO_`` + the name in capitals;
    ``metavar``: the value's name in ``--help``."""

    name: str
    kind: type
    default: Any
    help: str
    stage: str
    bounds: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None
    optional: bool = False
    label: str = ""  # the page's label
    auto: str = "automatic"  # what None (the default of an optional option) means
    flag_name: str = ""
    env: str = ""
    metavar: str = ""

    @property
    def flag(self) -> str:
        return "--" + (self.flag_name or self.name.replace("_", "-"))

    @property
    def variable(self) -> str:
        """The environment variable of the page's server (``python app.py``) for this option."""
        return self.env or "MARS_DEMO_" + self.name.upper()

    def parse(self, text: str, source: str = "") -> Any:
        """The value of ``text`` (a flag's argument or an environment variable) for this option,
        checked; ``source`` (the flag or the variable) names it in the error. Names (str, tuple)
        stay as given (:class:`~mars_demo.settings.Settings` checks them); a list is one text of
        items separated by commas."""
        name = source or self.name
        text = text.strip() if self.kind is not str else text
        if self.kind is bool:
            lowered = text.lower()
            if lowered in TRUE or lowered in FALSE:
                return lowered in TRUE
            raise OptionError(f"{name} must be one of {', '.join(TRUE + FALSE[:-1])}; got {text!r}")
        if self.kind is list:
            return [item.strip() for item in text.split(",") if item.strip()]
        if self.kind in (int, float):
            try:
                value = self.kind(text)
            except ValueError:
                value = text
            self.check(value, name)
            return value
        return text

    def describe(self) -> str:
        """The help text with the allowed values and the default (for --help and the API)."""
        if self.bounds is not None:
            allowed = f"{_num(self.bounds[0])} to {_num(self.bounds[1])}"
        elif self.choices is not None:
            allowed = ", ".join(self.choices)
        else:
            allowed = ""
        default = self.auto if self.default is None else _num(self.default)
        parts = [self.help]
        if allowed:
            parts.append(f"allowed: {allowed}")
        parts.append(f"default: {default}")
        return "; ".join(parts)

    def check(self, value: Any, name: str = "") -> None:
        """Raise :class:`OptionError` naming the allowed values unless ``value`` is allowed;
        ``name`` (default: the option's) is who the message says must be so."""
        if value is None and self.optional:
            return
        name = name or self.name
        if self.kind in (int, float):
            _check_range(name, value, self.bounds, self.kind is int)
        elif self.kind is bool:
            if not isinstance(value, bool):
                auto = " or None (automatic)" if self.optional else ""
                raise OptionError(f"{name} must be true, false{auto}; got {_shown(value)}")
        elif self.kind is list:
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise OptionError(f"{name} must be a list of texts; got {_shown(value)}")
        elif self.kind is tuple:  # which names are known is checked where they are defined
            names = value.split(",") if isinstance(value, str) else value
            if (not isinstance(names, (list, tuple)) or not names
                    or not all(isinstance(n, str) for n in names)
                    or not any(n.strip() for n in names)):
                what = self.help.split(": ", 1)[-1]
                raise OptionError(f"{name} must be {what}; got {_shown(value)}")
        elif self.choices is not None:
            if value not in self.choices:
                raise OptionError(
                    f"{name} must be one of {', '.join(self.choices)}; got {_shown(value)}"
                )
        elif not isinstance(value, str) or not value.strip():
            what = self.help.split(": ", 1)[-1]
            raise OptionError(f"{name} must be {what}; got {_shown(value)}")


def _num(v: Any) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(v)
    if isinstance(v, int) and not isinstance(v, bool) and v >= 2**31:
        return f"2**{v.bit_length()} - 1" if v == 2 ** v.bit_length() - 1 else str(v)
    return str(v)


def _shown(value: Any, limit: int = 40) -> str:
    """``repr(value)``, cut short: a 300-digit number is not echoed back whole."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    try:
        text = repr(value)
    except ValueError:  # an int too large for repr (Python's digit limit)
        text = f"<an integer of more than {limit} digits>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_range(name: str, value: Any, bounds, integer: bool) -> None:
    lo, hi = bounds
    kind = "an integer" if integer else "a number"
    message = f"{name} must be {kind} from {_num(lo)} to {_num(hi)}; got {_shown(value)}"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        raise OptionError(message)
    try:
        finite = integer or math.isfinite(value)
        inside = lo <= value <= hi
    except OverflowError:  # an integer too large for a float compared with a float bound
        finite = inside = False
    if not finite or not inside:
        raise OptionError(message)


#: every model a page names, with its name for people: the three every analysis runs, then the
#: optional ones with a model of their own
MODEL_LABELS: dict[str, str] = {"llm": "LLM", "importance": "importance", "nli": "NLI",
                                **{m.field: m.label for m in OWN_MODELS}}


MODEL_OPTIONS: tuple[Option, ...] = (
    Option("llm", str, None, "LLM: a Hub id, a local directory, a GGUF file or a preset", "model",
           optional=True, label="Language model",
           auto="the 7B preset in 4-bit on a GPU, the small CPU preset otherwise"),
    Option("importance", str, DEFAULT_IMPORTANCE, "importance model: a Hub id or a local directory",
           "model", label="Importance model"),
    Option("nli", str, None, "NLI model: a Hub id or a local directory", "model",
           optional=True, label="NLI model",
           auto=f"{DEFAULT_NLI} on a GPU, {CPU_NLI} otherwise"),
    Option("nli_int8", bool, False,
           "run the NLI model in int8 on the CPU (--nli-int8: torch's dynamic quantization of "
           "its linear layers, about 1.5x faster on two cores; a few verdicts change, see "
           "docs/benchmark.md; no effect on a GPU)", "model"),
    # one per optional model of its own (mars_demo.optional: its declaration's field, default,
    # help and label)
    *(Option(m.field, str, m.default, m.help, "model", label=m.page_label) for m in OWN_MODELS),
    Option("bem", str, DEFAULT_BEM,
           "answer-equivalence model for importance_method bem: a Hub id or a local directory",
           "model"),
    Option("chunker", str, DEFAULT_CHUNKER,
           "Flair chunker for importance_method bem: a Hub id or a local directory", "model"),
    Option("load_in_4bit", bool, None,
           "load the LLM in 4-bit NF4 (--4bit) or unquantized: bf16 or fp16 on a GPU (--no-4bit)",
           "model", optional=True, flag_name="4bit",
           auto="4-bit on CUDA, except on ZeroGPU; full precision on CPU"),
    Option("quantization", str, "nf4",
           "the in-process LLM's 4-bit weights when it loads in 4-bit: nf4 (bitsandbytes NF4) "
           "or torchao-int4 (torchao's int4 weight-only kernel: a CUDA GPU of compute "
           "capability 8.0 or newer, pip install torchao; it loads in 4-bit unless --no-4bit, "
           "which it cannot go with)", "model", choices=QUANTIZATIONS),
    Option("decoding", str, "dynamic",
           "how the in-process LLM decodes: dynamic (a key-value cache that grows with the "
           "answer) or static-compiled (a static key-value cache and each decoding step run "
           "through torch.compile, CUDA graphs on a GPU; the first questions of each batch "
           "size pay the compilation; refused on ZeroGPU, where torch.compile is not allowed)",
           "model", choices=DECODINGS),
    Option("llm_endpoint", str, None,
           "server: the URL of an OpenAI-compatible server (vLLM, llama.cpp, ...) that generates "
           "the answers instead of an in-process LLM, e.g. http://127.0.0.1:8000/v1", "model", optional=True,
           auto="none: the LLM runs in this process"),
    Option("llm_model", str, None,
           "server model: the name of the model to ask the server for", "model",
           optional=True, auto="the only model the server serves"),
    Option("llm_api_key_env", str, None,
           "API key variable: the NAME of an environment variable holding the server's API key (never logged)",
           "model", optional=True, auto="no API key"),
    Option("llm_timeout", float, 120.0,
           "server timeout: seconds to wait for each request to the LLM server", "model",
           bounds=(1, 3600), label="Server timeout"),
    Option("llm_backend", str, None,
           "LLM backend: how the LLM runs, by name (transformers, llama.cpp, server, or one a "
           "plug-in registers: mars_demo.models.backends)", "model", optional=True,
           auto="chosen from the other LLM options: server with llm_endpoint, llama.cpp for a "
           "GGUF file where llama-cpp-python is installed, else transformers"),
)

REQUEST_OPTIONS: tuple[Option, ...] = (
    Option("samples", int, 5, "sampled answers (B in the paper)", "generation",
           bounds=(1, 20), label="Sampled answers"),
    Option("temperature", float, 0.5, "sampling temperature of the samples (the paper: 0.5)",
           "generation", bounds=(0.05, 2.0), label="Temperature"),
    Option("top_p", float, 1.0, "nucleus sampling; 1.0 = off", "generation",
           bounds=(0.05, 1.0), label="Top-p"),
    Option("max_new_tokens", int, 64, "token limit per answer", "generation",
           bounds=(1, 512), label="Max new tokens"),
    Option("seed", int, 0, "random seed: same seed and options, same answers", "generation",
           bounds=(0, 2**32 - 1), label="Seed"),
    Option("prompt", str, None,
           "prompt: paper (the paper's few-shot prompt, answers end at '.' and newline) or chat "
           "(the model's chat template)",
           "generation", choices=PROMPTS, optional=True, label="Prompt",
           auto="chat for instruction models with a chat template, paper otherwise"),
    Option("importance_method", str, "model",
           "token importance: model (the trained MARS model, phrase level), token (every word "
           "its own phrase) or bem (the paper's Algorithm 1, answer equivalence)",
           "scoring", choices=IMPORTANCE_METHODS, label="Importance"),
    Option("normalization", str, "sum",
           "phrase scores to weights: sum (s/sum s, the paper's Table 1), softmax "
           "(softmax(s/T), the authors' later library) or sum-softmax (softmax((s/sum s)/T), the "
           "published medical run, with softmax_temperature 0.001)",
           "scoring", choices=NORMALIZATIONS, label="Normalization"),
    Option("softmax_temperature", float, 0.1, "T of normalization softmax and sum-softmax", "scoring",
           bounds=(1e-4, 10.0), label="Softmax temperature"),
    Option("distribution", str, "equal",
           "phrase weight to tokens: equal (spread evenly), max (all to the least probable "
           "token), min (all to the most probable token)",
           "scoring", choices=DISTRIBUTIONS, label="Distribution"),
    Option("cluster_rule", str, "strict",
           "semantic clusters: strict (entailment both ways) or lenient (no contradiction "
           "either way)", "scoring", choices=CLUSTER_RULES, label="Cluster rule"),
    Option("nli_pairs", str, "all",
           "which pairs of samples the NLI model judges: all (every ordered pair, each answer "
           "with itself too: the full matrix the graph and kernel methods read and that "
           "re-scoring with another cluster rule reuses) or clustering (only the pairs the "
           "first-member clustering reads, one round per cluster, as TruthTorchLM does; the "
           "methods that read every pair are then left out)", "scoring", choices=NLI_PAIRS,
           label="NLI pairs"),
    Option("end_token", str, "exclude",
           "the end-of-sequence token an answer ended on, in the token-level methods of the "
           "greedy answer (msp, mean_token_entropy, self_certainty, ccp): exclude (left out, "
           "as in the answer's own scores) or include (counted as one more token, "
           "lm-polygraph's convention); every analysis stores it, so a saved one re-scores "
           "either way", "scoring", choices=END_TOKEN_RULES, label="End token"),
    Option("recipe", str, "default",
           "default (this project's documented choices), paper-code (the published code's "
           "choices, see docs/paper-code.md) or truthtorchlm (the choices of the authors' "
           "library TruthTorchLM 0.1.19: softmax(score / 0.1) phrase weights, its "
           "token-to-phrase rule and its lenient clustering)", "scoring", choices=RECIPES,
           label="Recipe"),
    Option("methods", tuple, None,
           "other uncertainty methods: method ids separated by commas, e.g. "
           "eigv,degree,lexical_similarity; those that run an extra LLM pass or model are "
           "computed only when named (python -m mars_demo methods lists them; see "
           "docs/methods.md)",
           "scoring",
           optional=True, label="Methods",
           auto="every method that needs no extra model (mars_demo.methods.FREE)"),
)

#: The page's server (``python app.py``): where it listens, who may see it and what visitors may
#: ask of it (:mod:`mars_demo.hosting.access`), the names its models show under, and what it offers
#: besides answers. Not options of an analysis: neither the CLI's ``ask`` nor the API takes them.
SERVER_OPTIONS: tuple[Option, ...] = (
    Option("host", str, None, "address to listen on", "server", optional=True,
           auto="127.0.0.1, or $GRADIO_SERVER_NAME"),
    Option("port", int, None, "port to listen on", "server", bounds=(1, 65535), optional=True,
           auto="7860, or $GRADIO_SERVER_PORT"),
    Option("share", bool, False, "also serve through a public *.gradio.live link", "server"),
    Option("allow_model_switch", bool, False,
           "show the language-model switch on the page (only on a page only you can open; "
           "refused with --share, a non-loopback --host or on a Space)", "server"),
    Option("max_sample_tokens", int, None,
           "public pages: the most sampled answers x max new tokens one question may ask for; "
           "0 = no limit", "server", bounds=(0, 10**9), optional=True,
           auto="the public page's limit (mars_demo.hosting.access.PUBLIC_MAX_SAMPLE_TOKENS)"),
    Option("per_client", int, None,
           "public pages: analyses one client (IP address) may have running or waiting at once; "
           "0 = no limit", "server", bounds=(0, 10**9), optional=True,
           auto="the public page's limit (mars_demo.hosting.access.PUBLIC_PER_CLIENT)"),
    Option("trusted_proxy", list, None,
           "a reverse proxy in front of the page (an IP address or network; repeat the flag, or "
           "separate them by commas in the variable), which appends the client to "
           "X-Forwarded-For (nginx: $proxy_add_x_forwarded_for); a public page then identifies "
           "its clients by that header", "server", optional=True, env="MARS_DEMO_TRUSTED_PROXIES",
           metavar="ADDRESS", auto="none"),
    *(Option(f"{role}_name", str, None,
             f"the {label} model's name on the page and in its results, instead of its folder's "
             "name", "server", optional=True, metavar="NAME", auto="its id, or its folder's name")
      for role, label in MODEL_LABELS.items()),
    Option("calibration", str, None,
           "a calibration file made by `python -m mars_demo evaluate calibrate RUN_DIR`: the "
           "page and the API then show each answer's chance of being right; it must be made "
           "with the models loaded here", "server", optional=True, metavar="FILE", auto="none"),
    Option("runs", str, None,
           "a folder of evaluation runs (python -m mars_demo evaluate run --out DIR/NAME) that the "
           "page's Evaluation view offers", "server", optional=True, metavar="DIR", auto="none"),
    Option("example_cache", str, None,
           "a folder where the analyses of the page's example questions are kept once made "
           "(with the page's default settings), so that later visitors get them at once, also "
           "after a restart; only the fixed examples are ever kept", "server", optional=True,
           metavar="DIR", auto="~/.cache/mars-demo/examples ($XDG_CACHE_HOME)"),
    # how a public page's server treats connections and other web sites (mars_demo.hosting.access,
    # mars_demo.ui.guards.connections)
    Option("ipv6_prefix", int, 64,
           "public page: an IPv6 client counts as its whole network of this prefix length (one "
           "subscriber gets a /64, from some providers a /56 or /48), wherever its address comes "
           "from (the connection, a Space's proxy, --trusted-proxy)", "server",
           bounds=(16, 128)),
    Option("header_timeout", float, 10.0,
           "public page: seconds a connection may take to send a request's headers (also between "
           "two requests on one connection) before it is closed", "server", bounds=(1, 300)),
    Option("body_timeout", float, 30.0,
           "public page: seconds a request's body may pause before its connection is closed; "
           "past that time from its headers a body must also average 8 KiB a second", "server",
           bounds=(1, 600)),
    Option("connections_per_client", int, 64,
           "public page: connections one client may hold open at once; more are refused (HTTP "
           "429). Behind a proxy the connections are the proxy's: limit them there", "server",
           bounds=(1, 100_000)),
    Option("allowed_origins", list, None,
           "public page: web origins (scheme://host[:port]) besides the page's own whose web pages "
           "may call this page from a browser (repeat the flag, or separate them by commas)",
           "server", optional=True, metavar="ORIGIN", auto="none: the page's own origin only"),
    Option("public_host", list, None,
           "public page: the host names visitors reach the page by (e.g. mars.example.org; repeat "
           "the flag, or separate them by commas); a request naming another host is refused. A "
           "Space's host, the share link's, the hosts of --allowed-origins, --host, localhost "
           "and IP addresses need not be named", "server", optional=True, metavar="HOST",
           auto="none besides those"),
)

OPTIONS: dict[str, Option] = {o.name: o for o in MODEL_OPTIONS + REQUEST_OPTIONS}
SERVER: dict[str, Option] = {o.name: o for o in SERVER_OPTIONS}
MODEL_FIELDS = tuple(o.name for o in MODEL_OPTIONS)
REQUEST_FIELDS = tuple(o.name for o in REQUEST_OPTIONS)
GENERATION_FIELDS = tuple(o.name for o in REQUEST_OPTIONS if o.stage == "generation")
SCORING_FIELDS = tuple(o.name for o in REQUEST_OPTIONS if o.stage == "scoring")


#: the model options that also take an already loaded transformers ``(model, tokenizer)`` pair
#: in the library (:mod:`mars_demo.models.given`), and what each model is called
GIVEN_MODELS = {"llm": "LLM", "importance": "importance model", "nli": "NLI model"}
#: the line of a docstring that :func:`documented` replaces with one line per option
KEYWORDS_LINE = "**options: the options of mars_demo.options (one line each below)."
_TYPES = {int: "int", float: "float", str: "str", bool: "bool", tuple: "str | list[str]"}


def type_of(opt: Option) -> str:
    """The Python type a library caller gives ``opt`` as.

    >>> type_of(OPTIONS["samples"]), type_of(OPTIONS["nli"]), type_of(OPTIONS["methods"])
    ('int', 'str | tuple[PreTrainedModel, PreTrainedTokenizer] | None', 'str | list[str] | None')
    """
    kind = _TYPES[opt.kind]
    if opt.name in GIVEN_MODELS:
        kind += " | tuple[PreTrainedModel, PreTrainedTokenizer]"
    return kind + (" | None" if opt.optional else "")


def keyword_lines(names: tuple[str, ...], indent: str) -> list[str]:
    """One Google-style ``name (type): help; allowed; default`` line per option of ``names``
    (the docstrings of :func:`mars_demo.analyze`, :func:`mars_demo.score` and
    :class:`mars_demo.Engine`), so their keywords cannot drift from the schema."""
    lines = []
    for name in names:
        opt = OPTIONS[name]
        text = opt.describe()  # it starts with the help
        if name in GIVEN_MODELS:
            text = (opt.help + ", or a loaded transformers (model, tokenizer) pair"
                    + text[len(opt.help):])
        lines.append(f"{indent}{name} ({type_of(opt)}): {text}.")
    return lines


def documented(names: tuple[str, ...]):
    """A decorator: the function's docstring line :data:`KEYWORDS_LINE` becomes one line per
    option of ``names`` (:func:`keyword_lines`), and its signature names each as a keyword with
    its type and default, so ``help()`` and an editor show them."""
    import inspect

    def decorate(func):
        doc = func.__doc__ or ""
        at = doc.find(KEYWORDS_LINE)
        if at >= 0:
            indent = doc[doc.rfind("\n", 0, at) + 1:at]
            func.__doc__ = doc.replace(KEYWORDS_LINE, "\n".join(keyword_lines(names, indent))
                                       .lstrip(), 1)
        signature = inspect.signature(func)
        kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        func.__signature__ = signature.replace(parameters=kept + [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=OPTIONS[n].default,
                              annotation=type_of(OPTIONS[n])) for n in names])
        return func

    return decorate


def check(name: str, value: Any) -> None:
    """Validate one option by name (raises :class:`OptionError`)."""
    OPTIONS[name].check(value)


def defaults() -> dict[str, Any]:
    return {o.name: o.default for o in MODEL_OPTIONS + REQUEST_OPTIONS}
