"""What a method is (:class:`Method`), what it may read (:data:`NEEDS`, :class:`MethodInputs`),
and how a saved analysis becomes those inputs (:func:`inputs_of`).

A method declares what it reads, as lm-polygraph's calculators declare their statistics in
``meta_info``: each need names one part of an analysis (the samples, the NLI probabilities, the
greedy answer's token entropies, what an optional model or pass saved...), whether every
analysis has it (``free``) and how to tell that a given analysis lacks it. The registry
(:mod:`.registry`) checks the needs of every asked method before computing it, so a method's
compute function only does its math.

Pure Python: the math (numpy, scipy) is imported by each compute function when it runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

VARIANTS = ("length_normalized", "mars", "value")  # how a method's values are named
SCORED_VARIANTS = VARIANTS[:2]  # the two scorings of a method that reads a sequence score


@dataclass(frozen=True)
class AnswerInputs:
    """One answer as the methods read it: its text, its two log scores, and per token its
    log-prob, MARS weight, the entropy of the next-token distribution (None where unknown), the
    divergence of that distribution from the uniform one (``kl_uniform``, self-certainty's
    term; None where unknown) and its top alternatives (``[[text, logprob], ...]``, the token
    itself first; None where not saved)."""

    text: str
    scores: Mapping[str, float]
    token_logprobs: list[float]
    mars_weights: list[float]
    token_entropies: list[float | None]
    kl_uniform: list[float | None]
    alternatives: list[list | None]
    # the end-of-sequence token the answer ended on ({"logprob", and where known "entropy",
    # "kl_uniform", "alternatives"}); None: it ended otherwise or the analysis predates it
    end_token: Mapping[str, Any] | None = None

    def with_end_token(self) -> "AnswerInputs":
        """This answer as lm-polygraph counts its tokens: its end-of-sequence token appended
        as one more token (itself when it has none). The MARS weights become those of L + 1
        tokens, the end token belonging to no phrase (importance 0):
        ``w_l = 1/(2(L+1)) + u_l/2`` and ``w_end = 1/(2(L+1))``, still summing to 1."""
        end = self.end_token
        if end is None:
            return self
        n = len(self.token_logprobs)
        shift = 1.0 / (2 * (n + 1)) - (1.0 / (2 * n) if n else 0.0)
        return dataclasses.replace(
            self, end_token=None,
            token_logprobs=[*self.token_logprobs, float(end["logprob"])],
            mars_weights=[w + shift for w in self.mars_weights] + [1.0 / (2 * (n + 1))],
            token_entropies=[*self.token_entropies, end.get("entropy")],
            kl_uniform=[*self.kl_uniform, end.get("kl_uniform")],
            alternatives=[*self.alternatives, end.get("alternatives")])

    def weights(self, variant: str) -> list[float]:
        """The token weights of a scoring: 1/L each (``length_normalized``) or the MARS
        weights (``mars``)."""
        if variant == "mars":
            return list(self.mars_weights)
        n = len(self.token_logprobs)
        return [1.0 / n] * n


@dataclass(frozen=True)
class MethodInputs:
    """What the methods read of one analysis: the question, the greedy answer, the sampled
    answers (:class:`AnswerInputs`), their meaning clusters, the NLI probabilities (entailment,
    neutral, contradiction) of every ordered pair of samples (m x m x 3; None in an analysis
    made before they were saved, schema 2) and what the optional models and passes saved
    (``saved``: the analysis' ``method_inputs``, ``{entry: {...}}``)."""

    question: str
    greedy: AnswerInputs | None
    samples: list[AnswerInputs]
    cluster_ids: list[int]
    nli_probabilities: list | None
    saved: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    # whether the token-level methods count the greedy answer's end-of-sequence token
    # (mars_demo.options.END_TOKEN_RULES: "exclude" | "include"; see greedy_tokens)
    end_token: str = "exclude"

    @property
    def texts(self) -> list[str]:
        return [a.text for a in self.samples]

    @property
    def token_logprobs(self) -> list[list[float]]:
        """Each sample's token log-probs."""
        return [a.token_logprobs for a in self.samples]

    def sample_scores(self, variant: str) -> list[float]:
        """The samples' log scores under one scoring."""
        return [float(a.scores[variant]) for a in self.samples]

    @property
    def greedy_answer(self) -> AnswerInputs:
        if self.greedy is None:
            raise ValueError("this analysis holds no greedy answer")
        return self.greedy

    @property
    def greedy_tokens(self) -> AnswerInputs:
        """The greedy answer as the token-level methods count its tokens: with its
        end-of-sequence token appended under ``end_token="include"`` (where it ended on one),
        else as scored."""
        g = self.greedy_answer
        return g.with_end_token() if self.end_token == "include" else g


#: A method's math: its value from the inputs and, for a scored method, the scoring
#: (``"length_normalized"`` or ``"mars"``; None for a method with one value).
Compute = Callable[[MethodInputs, "str | None"], float]


@dataclass(frozen=True)
class Need:
    """One thing a method may read. ``free``: every analysis the engine makes has it (no
    extra model or pass). ``present``: whether an analysis' inputs hold it (None: always).
    ``lacking``: what an analysis without it lacks, and ``fix``: how to get it, for the
    error that names the methods that read it."""

    id: str
    free: bool
    present: Callable[[MethodInputs], bool] | None = None
    lacking: str = ""
    fix: str = ""


def _tokens_have(field: str) -> Callable[[MethodInputs], bool]:
    def present(x: MethodInputs) -> bool:
        g = x.greedy
        return g is not None and bool(g.token_logprobs) and all(
            v is not None for v in getattr(g, field))
    return present


def _has_alternatives(x: MethodInputs) -> bool:
    g = x.greedy
    return g is not None and bool(g.token_logprobs) and all(g.alternatives)


def _saved(entry: str, key: str) -> Callable[[MethodInputs], bool]:
    return lambda x: (x.saved.get(entry) or {}).get(key) is not None


#: Everything a method may read, by id. The optional models' entries (SAR's similarities,
#: LARS's logits, CCP's NLI of the alternatives) come from their declarations
#: (:data:`mars_demo.optional.OPTIONAL_MODELS`), added by the registry.
NEEDS: dict[str, Need] = {n.id: n for n in (
    Need("samples", True),
    Need("greedy", True, lambda x: x.greedy is not None,
         "greedy answer", "score its answers again with a greedy answer"),
    Need("nli_probabilities", True,
         lambda x: x.nli_probabilities is not None and all(
             cell is not None for row in x.nli_probabilities for cell in row),
         "NLI probabilities of every pair of samples (it predates the saved NLI probabilities, "
         "schema 2, or its NLI judged the clustering's pairs alone, nli_pairs clustering)",
         "score its answers again (python -m mars_demo score FILE --nli-pairs all) to get them"),
    Need("token_entropy", True, _tokens_have("token_entropies"),
         "entropy of the greedy answer's tokens (answers made before it was saved, or given "
         "without it)", "generate the answers again (in-process, or through a server that "
         "returns top log-probs)"),
    Need("full_distribution", True, _tokens_have("kl_uniform"),
         "full next-token distribution of the greedy answer's tokens (only an in-process LLM "
         "gives it; a server returns its top log-probs alone)",
         "generate the answers again with the LLM in this process (not --llm-endpoint)"),
    Need("greedy_nli", True, _saved("greedy_nli", "probabilities"),
         "NLI probabilities of the greedy answer against each sample",
         "score its answers again with these methods"),
    Need("greedy_alternatives", False, _has_alternatives,
         "top alternatives of the greedy answer's tokens (saved only by a generation that "
         "asked for a method reading them; scoring answers cannot make them)",
         "ask again with --methods {ids}, whose generation saves them"),
    Need("llm_pass", False),  # P(True): checked per method (its own entry), see the registry
    Need("embeddings", False, _saved("eigenscore", "embeddings"),
         "middle-layer embeddings of the samples (EigenScore's extra LLM pass)",
         "ask again with --methods eigenscore and the LLM in this process through "
         "transformers"),
)}


@dataclass(frozen=True)
class Method:
    """One uncertainty method, higher = less trustworthy.

    ``id``: its name in the CLI, the JSON and the page; ``label``: its name in tables;
    ``explain``: one line saying what it measures; ``source``: the paper(s); ``reference``:
    where a peer implements it (lm-polygraph's file), "" where none does; ``needs``: what it
    reads (ids of :data:`NEEDS`); ``scored``: it reads a sequence score, so it has a
    length-normalized and a MARS value (else one ``value``); ``compute``: its math
    (:data:`Compute`)."""

    id: str
    label: str
    explain: str
    needs: frozenset[str]
    scored: bool
    source: str
    compute: Compute
    reference: str = ""
    family: str = ""  # the registry sets it: the file the method is declared in

    @property
    def variants(self) -> tuple[str, ...]:
        return SCORED_VARIANTS if self.scored else ("value",)


def method(id: str, label: str, explain: str, needs: Sequence[str], scored: bool, source: str,
           compute: Compute, reference: str = "") -> Method:
    """A :class:`Method` (``needs`` as any sequence of need ids)."""
    return Method(id, label, explain, frozenset(needs), scored, source, compute, reference)


# --- an analysis JSON as inputs -----------------------------------------------------------------


def answer_inputs(answer: Mapping[str, Any]) -> AnswerInputs:
    """:class:`AnswerInputs` of one answer of an analysis JSON (a scored answer's dict)."""
    tokens = answer.get("tokens") or []
    return AnswerInputs(
        text=answer["text"],
        scores={k: float(answer["scores"][k]) for k in SCORED_VARIANTS},
        token_logprobs=[float(t["logprob"]) for t in tokens],
        mars_weights=[float(w) for w in answer.get("mars_weights") or []],
        token_entropies=[t.get("entropy") for t in tokens],
        kl_uniform=[t.get("kl_uniform") for t in tokens],
        alternatives=[t.get("alternatives") for t in tokens],
        end_token=answer.get("end_token") or None,
    )


def inputs_of(result: Any, end_token: str | None = None) -> MethodInputs:
    """:class:`MethodInputs` of an :class:`~mars_demo.result.AnalysisResult` or its JSON
    (:meth:`~mars_demo.result.AnalysisResult.to_dict`); ``end_token`` ("exclude" |
    "include"; None: as the analysis was scored, else "exclude") says whether the token-level
    methods count the greedy answer's end token."""
    data = result if isinstance(result, Mapping) else result.to_dict()
    if end_token is None:
        end_token = (data.get("settings") or {}).get("end_token") or "exclude"
    try:
        greedy = data.get("greedy")
        return MethodInputs(
            question=str(data.get("question") or ""),
            greedy=answer_inputs(greedy) if isinstance(greedy, Mapping) else None,
            samples=[answer_inputs(s) for s in data["samples"]],
            cluster_ids=list(data["cluster_ids"]),
            nli_probabilities=(data.get("nli") or {}).get("probabilities"),
            saved=dict(data.get("method_inputs") or {}),
            end_token=end_token,
        )
    except (KeyError, TypeError) as err:
        raise ValueError(
            f"not an analysis: it lacks the samples, their scores or the cluster ids ({err!r})"
        ) from err
