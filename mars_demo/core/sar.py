"""Shifting Attention to Relevance: TokenSAR, SentenceSAR and SAR (Duan et al., ACL 2024).

"Shifting Attention to Relevance: Towards the Predictive Uncertainty Quantification of Free-Form
Large Language Models" (arXiv 2307.01379; reference code: jinhaoduan/SAR). Every value is an
uncertainty in nats (natural log): higher = less trustworthy.

- TokenSAR reweights an answer's token log-probabilities by RELEVANCE: how much the answer's
  meaning changes when the token is dropped. It is MARS's closest sibling: both turn the token
  log-probs into a weighted mean, SAR with weights from a similarity model's verdict on each
  token-dropped answer, MARS with a trained phrase-importance model (plus length
  normalization).
- SentenceSAR shifts probability mass between the sampled answers according to how alike they
  are, so answers that agree support each other.
- SAR is SentenceSAR over TokenSAR's scores.

The similarity model (a cross-encoder, ``cross-encoder/stsb-roberta-large`` in the paper and in
lm-polygraph, whose sigmoid output lies in [0, 1]) runs elsewhere; here it enters as numbers:
``token_similarities`` (one per token) and a ``similarity`` matrix among the sampled answers.
:func:`relevance_pairs` lists the texts to give it for the tokens.

Relevance of token l of answer s to question x, as in the paper:
``R_T(l) = 1 - g(x + s, x + s without token l)`` with ``g`` the similarity model, so the
question is part of both texts. Normalized: ``R~_T(l) = R_T(l) / sum_k R_T(k)``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from . import _validation as check

SENTENCE_TEMPERATURE = 0.001  # t of SentenceSAR: the paper's, its code's and lm-polygraph's


def relevance_pairs(question: str, answer: str, token_spans) -> list[tuple[str, str]]:
    """The (full, token-dropped) text pairs whose similarity gives each token's relevance.

    One pair per token l: ``(question + " " + answer, question + " " + answer without token
    l)``, where the token is removed by its character span ``(start, end)`` (end exclusive) in
    ``answer``. Feed each pair to the similarity model: its output is ``token_similarities[l]``
    of :func:`token_relevance`. So an answer of L tokens costs L similarity calls.

    The paper compares "question + answer" with "question + answer without the token". Its
    code joins them without a space and deletes EVERY occurrence of the token's decoded text
    (``str.replace``), which can cut letters out of other words; lm-polygraph joins them with a
    space but puts the whole prompt (instructions, few-shot examples) in front, and re-decodes
    the remaining token ids. Here the bare question and one space, and exactly that one token.

    Args:
        question: the question as the user asked it (not the full LLM prompt).
        answer: the answer text.
        token_spans: the answer's LLM tokens as character spans, sorted and non-overlapping,
            e.g. a fast tokenizer's ``offset_mapping``.

    Example:

    >>> relevance_pairs("Capital of France?", "It is Paris", [(0, 2), (2, 5), (5, 11)])[2]
    ('Capital of France? It is Paris', 'Capital of France? It is')
    """
    check.text(question, "question")
    full = f"{question} {answer}"
    return [
        (full, f"{question} {dropped}") for dropped in token_dropped_answers(answer, token_spans)
    ]


def token_dropped_answers(answer: str, token_spans) -> list[str]:
    """The answer with each token left out in turn: ``answer[:start] + answer[end:]``.

    Example:

    >>> token_dropped_answers("It is Paris", [(0, 2), (2, 5), (5, 11)])
    [' is Paris', 'It Paris', 'It is']
    """
    spans = check.spans(token_spans, check.text(answer, "answer"), "token_spans")
    if not spans:
        raise ValueError("token_spans is empty; an answer needs at least one token")
    return [answer[:start] + answer[end:] for start, end in spans]


def token_relevance(token_similarities) -> np.ndarray:
    """Normalized token relevance ``R~_T(l) = (1 - g_l) / sum_k (1 - g_k)`` (the paper's R_T).

    ``g_l`` is the similarity of the answer with and without token l (see
    :func:`relevance_pairs`), in [0, 1]. The weights are >= 0 and sum to 1. A single token gets
    weight 1 whatever its similarity.

    Raises:
        ValueError: a similarity outside [0, 1] or not finite; two or more tokens whose
            similarities are all 1 (no token changes the meaning, so relevance cannot be
            normalized; the reference code then yields NaN).

    Example: dropping the first token keeps the meaning (g = 0.9), dropping the second does
    not (g = 0.3): relevance [0.1, 0.7] / 0.8.

    >>> token_relevance([0.9, 0.3]).round(4).tolist()
    [0.125, 0.875]
    """
    similarities = _unit_interval(token_similarities, "token_similarities")
    if similarities.size == 1:
        return np.ones(1)
    relevance = 1.0 - similarities
    total = float(relevance.sum())
    if total <= 0:
        raise ValueError(
            f"token_similarities = {similarities.tolist()} are all 1: dropping any token leaves "
            f"the meaning unchanged, so the relevance weights 1 - similarity cannot be normalized"
        )
    return relevance / total


def token_sar_score(token_logprobs, token_similarities) -> float:
    """TokenSAR's log score of one answer: ``sum_l R~_T(l) * log p_l`` (negated E_T).

    A weighted mean of the token log-probabilities (the weights sum to 1), natural log, <= 0;
    higher = more probable. Comparable to :func:`mars_demo.core.scoring.mars` and
    :func:`~mars_demo.core.scoring.length_normalized`, which it equals when every token is
    equally relevant.

    Example: log p = [log 0.5, log 0.25] with relevance [0.125, 0.875].

    >>> import math
    >>> round(token_sar_score([math.log(.5), math.log(.25)], [0.9, 0.3]), 4)
    -1.2997
    """
    logprobs = check.log_scores(token_logprobs, "token_logprobs")
    weights = token_relevance(token_similarities)
    check.same_length(logprobs, "token_logprobs", weights, "token_similarities")
    with np.errstate(over="ignore"):
        score = float(weights @ logprobs)
    if not np.isfinite(score):
        # Only near float64's limit (-1.8e308), where rounding can push the convex combination
        # past it: scale by the largest magnitude, which keeps it within [min log p, 0].
        scale = -float(logprobs.min())
        score = max(float(weights @ (logprobs / scale)), -1.0) * scale
    return min(0.0, score)


def token_sar(sample_token_logprobs, sample_token_similarities) -> float:
    """TokenSAR uncertainty: the mean over answers of ``E_T(s) = -sum_l R~_T(l) log p_l``.

    Over the sampled answers (the paper and its code: a predictive entropy with TokenSAR's
    scores), in nats, >= 0; higher = less trustworthy. lm-polygraph's ``TokenSAR`` scores the
    greedy answer alone: pass that one answer to get its value.

    Args:
        sample_token_logprobs: per answer, the natural-log probabilities of its tokens (<= 0).
        sample_token_similarities: per answer, one similarity in [0, 1] per token
            (:func:`token_relevance`).

    Example: one answer, as above.

    >>> import math
    >>> round(token_sar([[math.log(.5), math.log(.25)]], [[0.9, 0.3]]), 4)
    1.2997
    """
    scores = _token_sar_scores(sample_token_logprobs, sample_token_similarities)
    return -check.mean(scores, "token SAR scores")


def sentence_sar(sample_scores, similarity, temperature: float = SENTENCE_TEMPERATURE) -> float:
    """SentenceSAR uncertainty (the paper's E_S): relevance-shifted sentence entropy.

    For each of the K sampled answers j with log score ``score_j`` (``p_j = exp(score_j)``):
    ``E_S(s_j) = -log( p_j + (1/t) * sum_{k != j} similarity[j, k] * p_k )``, and
    ``SentenceSAR = (1/K) * sum_j E_S(s_j)``. In nats; it can be negative (when similar
    answers' shifted mass exceeds 1); higher = less trustworthy. The diagonal of
    ``similarity`` is not read.

    The scores are whatever the caller chooses: the paper, its code and lm-polygraph use the
    answer's full log-probability ``sum_l log p_l``; pass length-normalized or MARS scores for
    those variants, or TokenSAR scores for :func:`sar`.

    Args:
        sample_scores: natural-log score of each of the K answers, <= 0.
        similarity: K x K similarity among the answers, row j read as ``g(s_j, s_k)``, each
            off-diagonal entry in [0, 1]. The paper's code compares "question + answer" texts
            and fills both triangles from one direction; lm-polygraph compares the bare answers
            in both directions.
        temperature: t > 0 (0.001 in the paper): small t lets similar answers dominate.

    Example: two answers, p = 0.5 and 0.25, similarity 0.002, t = 0.001:
    E_S = [-log(0.5 + 2 * 0.25), -log(0.25 + 2 * 0.5)], mean (0 - log 1.25) / 2.

    >>> import math
    >>> round(sentence_sar([math.log(.5), math.log(.25)], [[1, .002], [.002, 1]]), 4)
    -0.1116
    """
    scores = check.log_scores(sample_scores, "sample_scores")
    t = check.positive(temperature, "temperature")
    matrix = _similarity_matrix(similarity, scores.size)
    shifted = []
    for j in range(scores.size):
        others = np.arange(scores.size) != j
        weights = matrix[j, others]
        with np.errstate(divide="ignore"):  # log 0 = -inf: an unrelated answer adds nothing
            terms = np.log(weights) - np.log(t) + scores[others]
        shifted.append(-float(logsumexp(np.concatenate(([scores[j]], terms)))))
    return check.mean(np.array(shifted), "SentenceSAR terms")


def sar(
    sample_token_logprobs,
    sample_token_similarities,
    similarity,
    temperature: float = SENTENCE_TEMPERATURE,
) -> float:
    """SAR uncertainty (the paper's full method): :func:`sentence_sar` over TokenSAR scores.

    ``p_j = exp(sum_l R~_T(l) log p_l)`` for each sampled answer (:func:`token_sar_score`),
    then ``SAR = (1/K) sum_j -log(p_j + (1/t) sum_{k != j} similarity[j, k] p_k)``. In nats;
    higher = less trustworthy. Same as the paper's code and lm-polygraph's ``SAR``.

    Args:
        sample_token_logprobs: per answer, its tokens' natural-log probabilities (<= 0).
        sample_token_similarities: per answer, one token-drop similarity in [0, 1] per token.
        similarity: K x K similarity among the answers (see :func:`sentence_sar`).
        temperature: t > 0 (0.001 in the paper).

    Example: two one-token answers (relevance weight 1), p = 0.5 and 0.25: SentenceSAR of
    those probabilities.

    >>> import math
    >>> round(sar([[math.log(.5)], [math.log(.25)]], [[.4], [.7]], [[1, .002], [.002, 1]]), 4)
    -0.1116
    """
    scores = _token_sar_scores(sample_token_logprobs, sample_token_similarities)
    return sentence_sar(scores, similarity, temperature)


def _token_sar_scores(sample_token_logprobs, sample_token_similarities) -> np.ndarray:
    logprobs = _per_answer(sample_token_logprobs, "sample_token_logprobs")
    similarities = _per_answer(sample_token_similarities, "sample_token_similarities")
    check.same_length(logprobs, "sample_token_logprobs", similarities, "sample_token_similarities")
    scores = []
    for i, (answer_logprobs, answer_similarities) in enumerate(zip(logprobs, similarities)):
        try:
            scores.append(token_sar_score(answer_logprobs, answer_similarities))
        except ValueError as error:
            raise ValueError(f"answer {i}: {error}") from error
    return np.array(scores)


def _per_answer(values, name: str) -> list:
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a sequence with one entry per answer, got {values!r}")
    try:
        rows = list(values)
    except TypeError as error:
        raise ValueError(
            f"{name} must be a sequence with one entry per answer, got {values!r}"
        ) from error
    if not rows:
        raise ValueError(f"{name} is empty; expected at least one answer")
    return rows


def _unit_interval(values, name: str) -> np.ndarray:
    array = check.float_vector(values, name)
    bad = np.flatnonzero((array < 0) | (array > 1))
    if bad.size:
        i = bad[0]
        raise ValueError(f"{name}[{i}] = {float(array[i])} is outside [0, 1]")
    return array


def _similarity_matrix(similarity, size: int) -> np.ndarray:
    try:
        matrix = np.array(similarity, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as error:
        raise ValueError(
            f"similarity must be a square matrix of numbers, got {similarity!r}"
        ) from error
    if matrix.shape != (size, size):
        raise ValueError(
            f"similarity must be {size} x {size} (one row and column per answer), got shape "
            f"{matrix.shape}"
        )
    np.fill_diagonal(matrix, 0.0)  # not read: may hold anything, NaN included
    bad = np.argwhere(~np.isfinite(matrix) | (matrix < 0) | (matrix > 1))
    if bad.size:
        i, j = bad[0]
        raise ValueError(f"similarity[{i}, {j}] = {float(matrix[i, j])} is outside [0, 1]")
    return matrix
