"""Typed results of one analysis and their JSON form.

The JSON produced by :meth:`AnalysisResult.to_dict` is the project's exchange format: the CLI
prints it, the page offers it for download and the API returns it. Field names are part of the
contract. Units: every ``logprob`` and score is a natural log; every uncertainty is
"higher = less trustworthy".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from .verdict import Verdict, verdict as judge_result

if TYPE_CHECKING:
    from .answers import AnswerSet

# 2: nli.warnings, settings.recipe/logprob_source, token ids may be null
# 3: nli.probabilities (every ordered pair of samples) and "methods" (the registry's other
#    uncertainty methods); a schema-2 analysis still loads, without them
# 4: nli.by_rule; every NLI label is the arg-max of the probabilities saved with it (an older
#    analysis still loads; re-scoring judges its NLI again where its labels disagree)
SCHEMA_VERSION = 4

# The one list of each, in display order: every uncertainty measure is computed under both
# scorings (LN = length-normalized, the baseline; MARS = meaning-aware weights).
MEASURES = ("confidence", "entropy", "semantic_entropy")
SCORINGS = ("length_normalized", "mars")


@dataclass
class Token:
    """One LLM token of an answer.

    ``start``/``end`` are character offsets into the answer's ``text`` (end exclusive); a token that
    only carries part of a multi-byte character, or only whitespace before the answer, may be empty
    (``start == end``). ``logprob`` is log P(token | prompt, previous tokens) at temperature 1.
    """

    id: int | None  # None when the answers came from a source that gave no token ids
    text: str
    start: int
    end: int
    logprob: float
    # the entropy of the model's next-token distribution at this token (nats; from the top
    # log-probs of a server, a lower bound: see ScoredAnswer.entropy_top_k); None: not known
    entropy: float | None = None
    # KL(uniform || that distribution), self-certainty's term; None: not known (a server)
    kl_uniform: float | None = None
    # the top alternatives at this position, [[text, logprob], ...], this token first; saved
    # for the greedy answer when CCP is asked for, else None
    alternatives: list | None = None


@dataclass
class Phrase:
    """A phrase of an answer as the importance function saw it.

    ``score`` is the raw importance the function gave (a sigmoid output for the trained model,
    1 - P(equivalent) for BEM); ``weight`` is the phrase weight U_k after normalization (the
    weights of all aligned phrases sum to 1). ``tokens`` lists the indices of the LLM tokens that
    belong to it (empty when the phrase could not be aligned; see the result's warnings).
    """

    text: str
    start: int
    end: int
    score: float
    weight: float
    tokens: list[int] = field(default_factory=list)


@dataclass
class Scores:
    """An answer's two log scores: LN (eq. (5) of the paper, in log) and MARS (eq. (9), in log)."""

    length_normalized: float
    mars: float


class TokenWeights(NamedTuple):
    """One token of an answer with everything its scores give it
    (:meth:`ScoredAnswer.weighted_tokens`): its ``text``, ``probability`` (``exp(logprob)``,
    the model's at temperature 1), ``logprob`` (natural log), ``ln_weight`` (1/L, its weight
    in the length-normalized score), ``mars_weight`` (w_l, its weight in the MARS score),
    ``importance`` (u_l, its share of the phrase weights) and the ``phrase`` it belongs to (its
    text; None for a token of no phrase) with that phrase's index ``phrase_index`` (-1: none).
    """

    text: str
    probability: float
    logprob: float
    ln_weight: float
    mars_weight: float
    importance: float
    phrase: str | None
    phrase_index: int


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(repr=False)
class ScoredAnswer:
    """One answer scored (an :class:`~mars_demo.answers.Answer` after the scoring stages), with
    everything needed to explain its scores.

    ``token_importance`` is u (one per token, sums to 1); ``mars_weights`` is
    w_l = 1/(2L) + u_l/2 (sums to 1). ``phrase_of_token`` maps each token to its phrase index.
    ``finish_reason`` is "stop" (stop string or end of sequence) or "length" (hit the token limit).
    """

    text: str
    tokens: list[Token]
    phrases: list[Phrase]
    token_importance: list[float]
    mars_weights: list[float]
    scores: Scores
    phrase_of_token: list[int] = field(default_factory=list)
    finish_reason: str = "stop"
    # the number of top log-probs a server returned per token, from which each token's
    # entropy was computed (a lower bound); None: exact (in-process) or not known
    entropy_top_k: int | None = None
    # the end-of-sequence token the answer ended on (not part of it: not scored, no phrase;
    # start = end = the text's length), with its log-prob and, where known, its entropy, KL
    # from uniform and alternatives: what lm-polygraph's token-level methods count
    # (``--end-token include``). None: the answer ended otherwise or the source did not say.
    end_token: Token | None = None

    def weighted_tokens(self) -> list[TokenWeights]:
        """The answer's tokens, each with its probability, its LN and MARS weights, its
        importance and its phrase, in one list (:class:`TokenWeights`): what the readable
        report's token table shows.

        >>> [(t.text, round(t.mars_weight, 3), t.phrase) for t in answer.weighted_tokens()]
        ... # doctest: +SKIP
        [('It', 0.132, 'It is'), (' is', 0.132, 'It is'), (' Mars', 0.736, 'Mars')]
        """
        n = len(self.tokens)
        out = []
        for i, token in enumerate(self.tokens):
            k = self.phrase_of_token[i] if i < len(self.phrase_of_token) else -1
            k = k if 0 <= k < len(self.phrases) else -1
            out.append(TokenWeights(
                text=token.text, probability=math.exp(token.logprob), logprob=token.logprob,
                ln_weight=1 / n, mars_weight=self.mars_weights[i],
                importance=self.token_importance[i] if i < len(self.token_importance) else 0.0,
                phrase=self.phrases[k].text if k >= 0 else None, phrase_index=k))
        return out

    def __repr__(self) -> str:
        return (f"ScoredAnswer(text={_short(self.text)!r}, tokens={len(self.tokens)}, "
                f"phrases={len(self.phrases)}, ln={self.scores.length_normalized:.4f}, "
                f"mars={self.scores.mars:.4f})")


#: token fields left out of the JSON when None, so an analysis that has none of them reads as
#: before they existed
TOKEN_EXTRAS = ("entropy", "kl_uniform", "alternatives")


def token_stats(tokens: list[Token]) -> dict[str, list]:
    """The tokens' :data:`TOKEN_EXTRAS` as lists (an :class:`~mars_demo.answers.Answer`'s
    ``token_stats``), each kept only where some token has it."""
    out = {key: [getattr(t, key) for t in tokens] for key in TOKEN_EXTRAS}
    return {k: v for k, v in out.items() if any(x is not None for x in v)}


def end_token_of(answer) -> Token | None:
    """The :class:`Token` of an :class:`~mars_demo.answers.Answer`'s ``end_token`` (None when
    it has none), placed at the end of its text."""
    end = answer.end_token
    if end is None:
        return None
    at = len(answer.text)
    return Token(id=end.get("id"), text=end["text"], start=at, end=at,
                 logprob=float(end["logprob"]),
                 **{key: end.get(key) for key in TOKEN_EXTRAS})


def end_token_dict(token: Token | None) -> dict[str, Any] | None:
    """An :class:`~mars_demo.answers.Answer`'s ``end_token`` from a scored answer's."""
    if token is None:
        return None
    return {"id": token.id, "text": token.text, "logprob": token.logprob,
            **{key: getattr(token, key) for key in TOKEN_EXTRAS}}


@dataclass
class NLIResult:
    """NLI verdicts over the sampled answers: ``labels[i][j]`` with answer i as premise.
    ``probabilities[i][j]``: the (entailment, neutral, contradiction) probabilities of the same
    ordered pair, m x m x 3, of which the label is the arg-max: one judgement per pair. Pairs
    of identical texts (the diagonal, a repeated answer) are the NLI model's, or, where the
    recipe decides them by rule (``paper-code``), "entailment" with (1, 0, 0), each such pair
    listed as ``[i, j]`` in ``by_rule``. A pair the NLI was not asked (``nli_pairs``
    "clustering") is None in both. ``probabilities`` is None in an analysis made before they
    were saved (schema 2). ``warnings``: what the NLI model could not see (inputs cut at its
    window, unknown characters); they are in the result's warnings too."""

    answers: list[str]
    labels: list[list[str | None]]
    warnings: list[str] = field(default_factory=list)
    probabilities: list[list[list[float] | None]] | None = None
    by_rule: list[list[int]] = field(default_factory=list)


@dataclass
class Pair:
    """One uncertainty measure under both scorings (higher = less trustworthy)."""

    length_normalized: float
    mars: float


@dataclass
class Uncertainty:
    confidence: Pair
    entropy: Pair
    semantic_entropy: Pair


@dataclass(repr=False)
class AnalysisResult:
    """Everything one question produced. ``to_dict()`` is plain JSON; ``verdict`` is the
    verdict on the greedy answer (:class:`~mars_demo.verdict.Verdict`, computed once when the
    analysis is made or re-scored); ``report()`` the readable report the command line prints;
    ``messages``: the chat messages the question came with (a system prompt, earlier turns),
    None for a question alone."""

    question: str
    prompt: str
    prompt_token_ids: list[int]
    greedy: ScoredAnswer
    samples: list[ScoredAnswer]
    nli: NLIResult
    cluster_ids: list[int]
    uncertainty: Uncertainty
    settings: dict[str, Any]
    timings_s: dict[str, float]
    warnings: list[str]
    schema_version: int = SCHEMA_VERSION
    # the other uncertainty methods asked for (mars_demo.methods): {id: {variant: value}},
    # variants "length_normalized" and "mars" for a method that reads a score, else "value"
    methods: dict[str, dict[str, float]] = field(default_factory=dict)
    # what a method's extra LLM pass gave, so that it is recomputed without the LLM:
    # {id: {"logprob": x, "prompt": text, "target": token text, "llm": model id}} (p_true);
    # empty in an analysis made before it (still schema 3: the field is optional)
    method_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the verdict on the greedy answer (mars_demo.verdict): computed by the engine when the
    # analysis is made or re-scored; an analysis saved before it gets one when it is read
    verdict: Verdict | None = None
    # the chat messages the question came with (role/content dicts, the question the last
    # user message), None for a question alone
    messages: list[dict[str, str]] | None = None

    def to_dict(self) -> dict[str, Any]:
        verdict = self.verdict
        out = dataclasses.asdict(dataclasses.replace(self, verdict=None))
        out["verdict"] = verdict.to_dict() if verdict is not None else None
        if self.messages is None:
            out.pop("messages")
        for answer in [out["greedy"], *out["samples"]]:
            for key in ("entropy_top_k", "end_token"):
                if answer.get(key) is None:
                    answer.pop(key, None)
            for token in answer["tokens"] + ([answer["end_token"]] if "end_token" in answer
                                             else []):
                for key in TOKEN_EXTRAS:
                    if token.get(key) is None:
                        token.pop(key, None)
        return out

    def report(self, details: bool = False, reference: Any = None) -> str:
        """The readable report the command line prints (``ask``, ``score``): the question,
        the answer, the verdict, the key uncertainties each with its scale, the warnings;
        ``details``: also the token table, the samples, both scorings, the other methods and
        the timings (``--details``); ``reference``: a run whose answers each key value is
        placed among (:func:`mars_demo.evaluation.reference.load_run`). Nothing from the
        question or the answers reaches a terminal unescaped (:mod:`mars_demo.readable`)."""
        from .readable import format_report

        return format_report(self, details=details, reference=reference)

    def __repr__(self) -> str:
        badge = self.verdict.badge if self.verdict is not None else None
        se = self.uncertainty.semantic_entropy
        return (f"AnalysisResult(question={_short(self.question)!r}, "
                f"answer={_short(self.greedy.text)!r}, verdict={badge!r}, "
                f"samples={len(self.samples)}, semantic_entropy=(ln={se.length_normalized:.4f}, "
                f"mars={se.mars:.4f}))")

    # --- what the sampled answers say, from the scores and clusters already here ------------
    # (for display: no model runs; the math is mars_demo.core's)

    def cluster_masses(self, scoring: str) -> dict[int, float]:
        """Each meaning cluster's share of the samples' probability mass under ``scoring``
        ("length_normalized" or "mars"): exp of the cluster's log score (paper eq. (7)),
        normalized over the clusters to sum to 1; ``{cluster id: share}`` in id order.

        E.g. sample scores [-0.1, -0.2, -2.0] with cluster ids [0, 0, 1] give
        {0: 0.88, 1: 0.12}. Empty when there are no samples."""
        from scipy.special import softmax

        from mars_demo.core.uncertainty import cluster_log_scores

        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}; got {scoring!r}")
        if not self.samples or len(self.cluster_ids) != len(self.samples):
            return {}
        scores = [getattr(s.scores, scoring) for s in self.samples]
        log_scores = cluster_log_scores(scores, self.cluster_ids)
        shares = softmax(list(log_scores.values()))
        return dict(sorted(zip(log_scores, (float(x) for x in shares))))

    def semantic_entropy_normalized(self) -> dict[str, float]:
        """The normalized semantic entropy (Farquhar et al. 2024) of the samples under each
        scoring, ``{scoring: nats}`` (NaN without samples or cluster ids)."""
        from mars_demo.core.uncertainty import semantic_entropy_normalized

        if not self.samples or len(self.cluster_ids) != len(self.samples):
            return {key: math.nan for key in SCORINGS}
        return {
            key: semantic_entropy_normalized(
                [getattr(s.scores, key) for s in self.samples], self.cluster_ids)
            for key in SCORINGS
        }

    def answer_set(self) -> "AnswerSet":
        """The answers of this analysis, ready to be scored again (see ``mars_demo.score``)."""
        from .answers import Answer, AnswerSet, known_notes, recorded_generation

        def unscored(a: ScoredAnswer) -> Answer:
            return Answer(
                text=a.text,
                token_ids=[t.id for t in a.tokens],
                token_texts=[t.text for t in a.tokens],
                spans=[(t.start, t.end) for t in a.tokens],
                logprobs=[t.logprob for t in a.tokens],
                finish_reason=a.finish_reason,
                warnings=known_notes(a.text, a.finish_reason),
                token_stats=token_stats(a.tokens),
                entropy_top_k=a.entropy_top_k,
                end_token=end_token_dict(a.end_token),
            )

        preset = self.settings.get("prompt")
        return AnswerSet(
            question=self.question,
            greedy=unscored(self.greedy),
            samples=[unscored(a) for a in self.samples],
            prompt=self.prompt or None,
            prompt_token_ids=list(self.prompt_token_ids) or None,
            prompt_preset=preset if preset in ("paper", "chat") else None,
            logprob_source=self.settings.get("logprob_source", "generation"),
            generation=recorded_generation(self.settings),
            messages=[dict(m) for m in self.messages] if self.messages else None,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AnalysisResult":
        """Rebuild a result from :meth:`to_dict` output (for the page and for tests)."""

        def answer(d: dict[str, Any]) -> ScoredAnswer:
            return ScoredAnswer(
                text=d["text"],
                tokens=[Token(**t) for t in d["tokens"]],
                phrases=[Phrase(**p) for p in d["phrases"]],
                token_importance=list(d["token_importance"]),
                mars_weights=list(d["mars_weights"]),
                scores=Scores(**d["scores"]),
                phrase_of_token=list(d.get("phrase_of_token", [])),
                finish_reason=d.get("finish_reason", "stop"),
                entropy_top_k=d.get("entropy_top_k"),
                end_token=Token(**d["end_token"]) if d.get("end_token") else None,
            )

        u = data["uncertainty"]
        result = cls(
            question=data["question"],
            prompt=data["prompt"],
            prompt_token_ids=list(data["prompt_token_ids"]),
            greedy=answer(data["greedy"]),
            samples=[answer(s) for s in data["samples"]],
            nli=NLIResult(
                answers=list(data["nli"]["answers"]),
                labels=[list(row) for row in data["nli"]["labels"]],
                warnings=list(data["nli"].get("warnings", [])),
                probabilities=data["nli"].get("probabilities"),
                by_rule=[list(pair) for pair in data["nli"].get("by_rule", [])],
            ),
            cluster_ids=list(data["cluster_ids"]),
            uncertainty=Uncertainty(
                confidence=Pair(**u["confidence"]),
                entropy=Pair(**u["entropy"]),
                semantic_entropy=Pair(**u["semantic_entropy"]),
            ),
            settings=dict(data["settings"]),
            timings_s=dict(data["timings_s"]),
            warnings=list(data["warnings"]),
            schema_version=data.get("schema_version", SCHEMA_VERSION),
            methods={name: {k: float(v) for k, v in values.items()}
                     for name, values in (data.get("methods") or {}).items()},
            method_inputs={name: dict(values)
                           for name, values in (data.get("method_inputs") or {}).items()},
            messages=[dict(m) for m in data["messages"]] if data.get("messages") else None,
        )
        saved = data.get("verdict")
        # an analysis saved before verdicts were part of it gets one now, from its answers
        result.verdict = Verdict.from_dict(saved) if saved else judge_result(result)
        return result
