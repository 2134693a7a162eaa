"""The uncertainty methods beside MARS's three measures: which exist, what each needs, and how
each is computed from what an analysis holds.

Every method is an uncertainty (higher = less trustworthy, natural logs); the math is
:mod:`mars_demo.core`'s (see ``docs/methods.md`` for each formula, its source and its peers).
A method that reads a sequence score (``scored``) is computed twice, with length-normalized and
with MARS scores: ``{"length_normalized": x, "mars": y}``; any other gives ``{"value": x}``.

:func:`compute_methods` reads only what a saved analysis JSON holds (the sample texts, their two
scores, the meaning clusters, the NLI probabilities of every ordered pair of samples and, for
P(True), the log-prob its extra LLM pass gave, for SAR the similarities its cross-encoder
gave and for LARS the logits its trained scorer gave, ``method_inputs``), so a saved analysis
gives the same values again without any model.

>>> parse_methods("eigv, degree")
('eigv', 'degree')
>>> label("semantic_entropy_normalized", "mars")
'Semantic entropy, normalized (MARS)'
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Sequence

VARIANTS = ("length_normalized", "mars", "value")  # how a method's values are named
SCORED_VARIANTS = VARIANTS[:2]  # the two scorings of a method that reads a sequence score
NEEDS = ("samples", "nli_probabilities", "similarity_model", "lars_model", "llm_pass")
FREE_NEEDS = frozenset({"samples", "nli_probabilities"})  # what every analysis already has


@dataclass(frozen=True)
class Method:
    """One uncertainty method: its id (CLI, JSON, page), a short ``label`` for tables, a
    one-line ``explain`` of what it measures, what it ``needs`` (of :data:`NEEDS`), whether it
    reads a sequence score (``scored``: LN and MARS variants) and its ``source`` (paper)."""

    id: str
    label: str
    explain: str
    needs: frozenset[str]
    scored: bool
    source: str

    @property
    def variants(self) -> tuple[str, ...]:
        return SCORED_VARIANTS if self.scored else ("value",)

    @property
    def free(self) -> bool:
        """Whether it needs nothing beyond what every analysis computes."""
        return self.needs <= FREE_NEEDS


_SAMPLES = frozenset({"samples"})
_NLI = frozenset({"samples", "nli_probabilities"})
_LIN = "Lin, Trivedi and Sun 2023"
_SAR_NEEDS = frozenset({"samples", "similarity_model"})
_SAR = "Duan et al. 2024"
_LARS_NEEDS = frozenset({"samples", "lars_model"})
_LARS = "Yaldiz et al. 2024"

METHODS: dict[str, Method] = {m.id: m for m in (
    Method("semantic_entropy", "Semantic entropy",
           "spread of the samples' probability over their meaning clusters (the paper's eq. 8)",
           _SAMPLES, True, "Kuhn et al. 2023; Bakman et al. 2024"),
    Method("semantic_entropy_normalized", "Semantic entropy, normalized",
           "entropy of the meaning clusters' probability shares, renormalized over the samples",
           _SAMPLES, True, "Farquhar et al. 2024"),
    Method("semantic_entropy_discrete", "Semantic entropy, discrete",
           "entropy of how many samples fall in each meaning cluster (no scores)",
           _SAMPLES, False, "Farquhar et al. 2024"),
    Method("num_sets", "Number of meanings",
           "how many meaning clusters the samples form", _SAMPLES, False, _LIN),
    Method("eigv", "Eigenvalue (entail.)",
           "a soft count of meanings from the entailment graph among the samples",
           _NLI, False, _LIN),
    Method("eigv_contra", "Eigenvalue (contra.)",
           "a soft count of meanings from the no-contradiction graph among the samples",
           _NLI, False, _LIN),
    Method("degree", "Degree (entail.)",
           "how little the samples entail each other on average", _NLI, False, _LIN),
    Method("degree_contra", "Degree (contra.)",
           "how much the samples contradict each other on average", _NLI, False, _LIN),
    Method("eccentricity", "Eccentricity (entail.)",
           "how far apart the samples lie in a spectral embedding of the entailment graph",
           _NLI, False, _LIN),
    Method("eccentricity_contra", "Eccentricity (contra.)",
           "how far apart the samples lie in a spectral embedding of the no-contradiction graph",
           _NLI, False, _LIN),
    Method("lexical_similarity", "Lexical similarity",
           "how little the samples share their words (negated mean ROUGE-L)",
           _SAMPLES, False, "Fomicheva et al. 2020; Kuhn et al. 2023"),
    Method("kernel_language_entropy", "Kernel language entropy",
           "von Neumann entropy of a heat kernel over the samples' NLI graph",
           _NLI, False, "Nikitin et al. 2024"),
    Method("p_true", "P(True)",
           "how little the LLM itself believes its answer is true, asked in one extra pass",
           frozenset({"llm_pass"}), False, "Kadavath et al. 2022"),
    Method("p_true_sampling", "P(True), with samples",
           "as P(True), the LLM shown its own sampled answers as brainstormed ideas first",
           frozenset({"samples", "llm_pass"}), False, "Kadavath et al. 2022"),
    Method("token_sar", "TokenSAR",
           "token log-probs weighted by how much dropping each token changes the answer's "
           "meaning (a similarity model's verdict), averaged over the samples",
           _SAR_NEEDS, False, _SAR),
    Method("sentence_sar", "SentenceSAR",
           "sentence entropy with probability shifted between samples a similarity model finds "
           "alike", _SAR_NEEDS, True, _SAR),
    Method("sar", "SAR",
           "SentenceSAR over TokenSAR's relevance-weighted scores (the paper's full method)",
           _SAR_NEEDS, False, _SAR),
    Method("lars", "LARS",
           "how little a scorer trained on correctness (LARS) believes the answer, read from "
           "its tokens and their probabilities", frozenset({"lars_model"}), False, _LARS),
    Method("lars_entropy", "Entropy (LARS)",
           "entropy of the samples with LARS's log-probability of being correct as each "
           "sample's score", _LARS_NEEDS, False, _LARS),
    Method("lars_semantic_entropy", "Semantic entropy (LARS)",
           "semantic entropy (the paper's eq. 8) with LARS's log-probability of being correct "
           "as each sample's score", _LARS_NEEDS, False, _LARS),
)}

#: The methods computed when none are asked for: all that need no extra model or pass.
FREE: tuple[str, ...] = tuple(m.id for m in METHODS.values() if m.free)

#: The models every analysis runs (the LLM that made the answers, the importance and NLI models
#: that scored them), as its recorded settings name them.
BASE_MODELS = ("llm", "importance", "nli")


class OptionalModel(NamedTuple):
    """A model that only some methods run. Each is loaded only when a method asked for needs it,
    so an analysis, a run or a page names it only then (see :func:`optional_models`)."""

    #: the Settings field (and recorded settings key) naming it
    field: str
    #: the need (:attr:`Method.needs`) of the methods that run it
    need: str
    #: its name for people
    label: str
    #: the ``method_inputs`` entry where what it computed is saved, and what that entry holds
    saved: str
    holds: str
    #: the command-line option that names it
    option: str


#: The optional models, in the order they are named.
OPTIONAL_MODELS: tuple[OptionalModel, ...] = (
    OptionalModel("similarity", "similarity_model", "similarity (SAR)", "sar",
                  "similarities of the SAR cross-encoder", "--similarity"),
    OptionalModel("lars", "lars_model", "LARS", "lars", "logits of the LARS model", "--lars"),
)


def optional_models(method_ids: Sequence[str] | None) -> tuple[str, ...]:
    """The optional models (Settings fields, :data:`OPTIONAL_MODELS` order) that the methods
    ``method_ids`` run; unknown ids are ignored, None is :data:`FREE` (which runs none).

    >>> optional_models(["eigv", "sar"]), optional_models(None)
    (('similarity',), ())
    """
    needs = set().union(*(METHODS[m].needs for m in method_ids or () if m in METHODS))
    return tuple(m.field for m in OPTIONAL_MODELS if m.need in needs)


def models_of(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The models an analysis used, from its recorded ``settings``: :data:`BASE_MODELS`, then
    each optional model its methods (``settings["methods"]``) ran, and no other.

    >>> models_of({"llm": "a", "importance": "b", "nli": "c", "similarity": "d",
    ...            "methods": ["sar"]})
    {'llm': 'a', 'importance': 'b', 'nli': 'c', 'similarity': 'd'}
    >>> models_of({"llm": "a", "similarity": "d", "methods": ["eigv"]})
    {'llm': 'a', 'importance': None, 'nli': None}
    """
    methods = settings.get("methods")
    used = optional_models(methods if isinstance(methods, (list, tuple)) else None)
    return {k: settings.get(k) for k in BASE_MODELS + used}


def parse_methods(text_or_list: str | Sequence[str]) -> tuple[str, ...]:
    """Method ids from ``"id,id,..."`` (spaces allowed) or a list of ids, in the order given,
    each once. Raises ``ValueError`` naming an unknown id and listing the known ones.

    >>> parse_methods(["num_sets", "eigv", "num_sets"])
    ('num_sets', 'eigv')
    """
    if isinstance(text_or_list, str):
        items = text_or_list.split(",")
    elif isinstance(text_or_list, (list, tuple)):
        items = list(text_or_list)
    else:
        raise ValueError(
            f"methods must be method ids separated by commas or a list of ids; got "
            f"{type(text_or_list).__name__}"
        )
    ids: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"methods must be method ids (text); got {item!r}")
        name = item.strip()
        if not name:
            continue
        if name not in METHODS:
            shown = name if len(name) <= 40 else name[:37] + "..."
            raise ValueError(f"unknown method {shown!r}; known: {', '.join(METHODS)}")
        if name not in ids:
            ids.append(name)
    if not ids:
        raise ValueError(f"methods is empty; name at least one of {', '.join(METHODS)}")
    return tuple(ids)


def label(method_id: str, variant: str) -> str:
    """The name of one method's value in a table: the method's label, with "(LN)" or "(MARS)"
    for the two scorings of a scored method.

    >>> label("eigv", "value"), label("semantic_entropy", "length_normalized")
    ('Eigenvalue (entail.)', 'Semantic entropy (LN)')
    """
    method = _method(method_id)
    if variant not in method.variants:
        raise ValueError(
            f"{method_id} has the variants {', '.join(method.variants)}; got {variant!r}"
        )
    suffix = {"length_normalized": " (LN)", "mars": " (MARS)"}.get(variant, "")
    return method.label + suffix


@dataclass(frozen=True)
class MethodInputs:
    """What the methods read of one analysis: the sampled answers' texts, their scores under
    each scoring (``{"length_normalized": [...], "mars": [...]}``), their meaning clusters and
    the NLI probabilities (entailment, neutral, contradiction) of every ordered pair of samples
    (m x m x 3; None when the analysis predates them, schema 2), what the extra LLM passes
    gave (``llm_pass``: the analysis' ``method_inputs``, ``{method id: {"logprob": x, "prompt":
    ..., ...}}``, see :func:`llm_pass_prompt`, and ``"sar"``: SAR's similarities, see
    :mod:`mars_demo.engine.stages.similarity`, and ``"lars"``: LARS's logits, see
    :mod:`mars_demo.engine.stages.lars`; empty when none ran) and each sample's token
    log-probs (``token_logprobs``; TokenSAR and SAR read them)."""

    texts: list[str]
    scores: Mapping[str, list[float]]
    cluster_ids: list[int]
    nli_probabilities: list | None
    llm_pass: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    token_logprobs: list[list[float]] = dataclasses.field(default_factory=list)


def inputs_of(result: Any) -> MethodInputs:
    """:class:`MethodInputs` of an :class:`~mars_demo.result.AnalysisResult` or its JSON
    (:meth:`~mars_demo.result.AnalysisResult.to_dict`)."""
    data = result if isinstance(result, Mapping) else result.to_dict()
    try:
        samples = data["samples"]
        return MethodInputs(
            texts=[s["text"] for s in samples],
            scores={k: [float(s["scores"][k]) for s in samples] for k in SCORED_VARIANTS},
            cluster_ids=list(data["cluster_ids"]),
            nli_probabilities=(data.get("nli") or {}).get("probabilities"),
            llm_pass=dict(data.get("method_inputs") or {}),
            token_logprobs=[[float(t["logprob"]) for t in s.get("tokens") or []]
                            for s in samples],
        )
    except (KeyError, TypeError) as err:
        raise ValueError(
            f"not an analysis: it lacks the samples, their scores or the cluster ids ({err!r})"
        ) from err


def compute_methods(result: Any, ids: Sequence[str] | str) -> dict[str, dict[str, float]]:
    """``{method id: {variant: value}}`` of the methods ``ids`` for one analysis (an
    :class:`~mars_demo.result.AnalysisResult` or its JSON), from what it holds alone: no model
    runs. Raises ``ValueError`` for an unknown id, or for a method that needs NLI
    probabilities of an analysis made before they were saved (schema 2)."""
    return compute_from(inputs_of(result), ids)


def compute_from(inputs: MethodInputs, ids: Sequence[str] | str) -> dict[str, dict[str, float]]:
    """:func:`compute_methods` from :class:`MethodInputs`."""
    ids = parse_methods(ids)
    missing = [i for i in ids if "nli_probabilities" in METHODS[i].needs]
    if missing and inputs.nli_probabilities is None:
        raise ValueError(
            f"this analysis predates the saved NLI probabilities (schema 2): "
            f"{', '.join(missing)} cannot be computed from it; score its answers again "
            f"(python -m mars_demo score FILE) to get them"
        )
    passes = [i for i in ids if "llm_pass" in METHODS[i].needs
              and (inputs.llm_pass.get(i) or {}).get("logprob") is None]
    if passes:
        _missing(passes, "log-prob of the extra LLM pass", "the LLM")
    for model in OPTIONAL_MODELS:
        lacking = [i for i in ids if model.need in METHODS[i].needs]
        if lacking and not inputs.llm_pass.get(model.saved):
            _missing(lacking, model.holds, f"the {model.label} model ({model.option})")
    formulas = _formulas()
    out: dict[str, dict[str, float]] = {}
    for method_id in ids:
        compute = formulas[method_id]
        method = METHODS[method_id]
        if method.scored:
            values = {k: compute(inputs, inputs.scores[k]) for k in SCORED_VARIANTS}
        else:
            values = {"value": compute(inputs, None)}
        for variant, value in values.items():
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"{method_id} ({variant}) is not finite: {value}")
            values[variant] = value
        out[method_id] = values
    return out


def _missing(ids: list[str], what: str, runs: str) -> None:
    raise ValueError(
        f"this analysis holds no {what} that {', '.join(ids)} "
        f"read{'s' if len(ids) == 1 else ''}; ask again (or score its answers again) with "
        f"--methods {','.join(ids)}, which runs {runs}"
    )


def _method(method_id: str) -> Method:
    if method_id not in METHODS:
        raise ValueError(f"unknown method {method_id!r}; known: {', '.join(METHODS)}")
    return METHODS[method_id]


def _formulas() -> dict[str, Callable[[MethodInputs, Any], float]]:
    """Each method's value from its inputs and, for a scored method, one scoring's sample
    scores. The math (numpy, scipy) is imported here, on first use: importing the registry
    (as the settings do) stays cheap."""
    from .core import graph, kernel, lars, lexical, p_true, sar, uncertainty

    def lin(fn: Callable[..., float], affinity: str) -> Callable[[MethodInputs, Any], float]:
        return lambda x, _: fn(x.nli_probabilities, affinity=affinity)

    return {
        "semantic_entropy": lambda x, scores: uncertainty.semantic_entropy(scores, x.cluster_ids),
        "semantic_entropy_normalized":
            lambda x, scores: uncertainty.semantic_entropy_normalized(scores, x.cluster_ids),
        "semantic_entropy_discrete":
            lambda x, _: uncertainty.semantic_entropy_discrete(x.cluster_ids),
        "num_sets": lambda x, _: graph.num_sets(x.cluster_ids),
        "eigv": lin(graph.eigv, "entail"),
        "eigv_contra": lin(graph.eigv, "contra"),
        "degree": lin(graph.degree, "entail"),
        "degree_contra": lin(graph.degree, "contra"),
        "eccentricity": lin(graph.eccentricity, "entail"),
        "eccentricity_contra": lin(graph.eccentricity, "contra"),
        "lexical_similarity": lambda x, _: lexical.lexical_similarity(x.texts),
        "kernel_language_entropy": lambda x, _: kernel.kernel_language_entropy(x.nli_probabilities),
        "p_true": lambda x, _: p_true.p_true(x.llm_pass["p_true"]["logprob"]),
        "p_true_sampling": lambda x, _: p_true.p_true(x.llm_pass["p_true_sampling"]["logprob"]),
        "token_sar": lambda x, _: sar.token_sar(x.token_logprobs, _sar(x)["token_similarities"]),
        "sentence_sar": lambda x, scores: sar.sentence_sar(scores, _sar(x)["sample_similarity"]),
        "sar": lambda x, _: sar.sar(x.token_logprobs, _sar(x)["token_similarities"],
                                    _sar(x)["sample_similarity"]),
        "lars": lambda x, _: -lars.lars_log_score(_lars(x)[0]),
        "lars_entropy": lambda x, _: uncertainty.entropy(
            [lars.lars_log_score(v) for v in _lars(x)[1:]]),
        "lars_semantic_entropy": lambda x, _: uncertainty.semantic_entropy(
            [lars.lars_log_score(v) for v in _lars(x)[1:]], x.cluster_ids),
    }


def _sar(inputs: MethodInputs) -> Mapping[str, Any]:
    """SAR's saved similarities, checked to be of these samples."""
    entry = inputs.llm_pass["sar"]
    if entry.get("answers") is not None and list(entry["answers"]) != list(inputs.texts):
        raise ValueError("the saved SAR similarities are of other answers than these samples")
    return entry


def _lars(inputs: MethodInputs) -> list[float]:
    """LARS's saved logits (the greedy answer's, then the samples'), checked to be of these
    samples."""
    entry = inputs.llm_pass["lars"]
    answers, logits = list(entry.get("answers") or []), list(entry.get("logits") or [])
    if len(logits) != len(answers) or answers[1:] != list(inputs.texts):
        raise ValueError("the saved LARS logits are not of the greedy answer and these samples")
    return logits


def llm_pass_prompt(method_id: str, question: str, answer: str,
                    samples: Sequence[str]) -> str:
    """The text the extra LLM pass of ``method_id`` reads; the log-prob of the next token
    :data:`mars_demo.core.p_true.TARGET` after it is what the method turns into a value.

    ``p_true`` is lm-polygraph's ``PTrue`` prompt (question and answer alone);
    ``p_true_sampling`` its ``PTrueSampling`` prompt, which first shows the sampled answers as
    brainstormed ideas (as Kadavath et al. do), joined by ", ". The answer is the greedy one,
    put after a space (the template has none after "Possible answer:"; the generated text
    lm-polygraph inserts starts with one); the samples follow the template's own space.

    >>> print(llm_pass_prompt("p_true", "Capital of France?", "Paris", ["Paris", "Lyon"]))
    Question: Capital of France?
     Possible answer: Paris
     Is the possible answer:
     (A) True
     (B) False
     The possible answer is:
    """
    from .core.p_true import p_true_prompt

    if method_id == "p_true":
        return p_true_prompt(question, " " + answer)
    if method_id == "p_true_sampling":
        return p_true_prompt(question, " " + answer, list(samples))
    raise ValueError(f"{method_id!r} runs no extra LLM pass")
