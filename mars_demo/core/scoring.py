"""Answer scores: length-normalized scoring and MARS (Bakman et al., ACL 2024).

All scores are natural-log scores of an answer, so they are <= 0; higher (closer to 0) means the
model found the answer more probable. Uncertainties built from them live in
:mod:`mars_demo.core.uncertainty`.

Equation numbers refer to the paper as typeset (``paper/mars-paper.tex``, every ``equation``
environment numbered in order): length-normalized scoring is eq. (5), MARS eq. (9), its token
weight w eq. (10), and the slow importance function is Algorithm 1 in the appendix.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from . import _validation as check

MODES = ("equal", "max", "min")  # how a phrase's weight is spread over its tokens
# how phrase scores become phrase weights; "sum-softmax" is the published medical run's
NORMALIZATIONS = ("sum", "softmax", "sum-softmax")
MEDICAL_TEMPERATURE = 0.001  # the published code's medical run: "sum-softmax" at this temperature


def length_normalized(token_logprobs) -> float:
    """Length-normalized log score of an answer, paper eq. (5) (``length-normalized-prob``).

    ``LN(s) = (1/L) * sum_l log p_l``: the log of eq. (5)'s geometric-mean probability, in
    natural log, <= 0. Higher is more probable; its negation is the "Confidence" uncertainty
    (higher = less trustworthy).

    Args:
        token_logprobs: natural-log probabilities ``log p_l`` of the answer's L tokens (<= 0).

    Example: log p = [log 0.5, log 0.25] gives (log 0.5 + log 0.25) / 2 = log(0.125) / 2.

    >>> import math
    >>> round(length_normalized([math.log(0.5), math.log(0.25)]), 4)
    -1.0397
    """
    return check.mean(check.log_scores(token_logprobs, "token_logprobs"), "token_logprobs")


def mars_weights(token_importance) -> np.ndarray:
    """MARS token weights ``w_l = 1/(2L) + u_l/2``, paper eq. (10) (the w of eq. (9)).

    A convex combination of length normalization (1/L) and meaning importance u, so the weights
    are > 0 and sum to 1. Unitless.

    Args:
        token_importance: importance u_l of each of the L tokens, >= 0 and summing to 1
            (see :func:`token_importance`).

    Example: u = [0, 1] over L = 2 tokens gives w = [1/4 + 0, 1/4 + 1/2].

    >>> mars_weights([0.0, 1.0])
    array([0.25, 0.75])
    """
    u = check.distribution(token_importance, "token_importance")
    return 1.0 / (2 * u.size) + u / 2


def mars(token_logprobs, token_importance) -> float:
    """Meaning-Aware Response Score (log), paper eq. (9) (``mars``) with w from eq. (10).

    ``MARS(s) = sum_l w_l * log p_l`` with ``w_l = 1/(2L) + u_l/2``: natural log, <= 0, higher
    is more probable. It replaces the length-normalized score in every uncertainty
    (Confidence, Entropy, Semantic Entropy), where higher uncertainty = less trustworthy.
    With uniform importance (u_l = 1/L) it equals :func:`length_normalized`.

    Args:
        token_logprobs: natural-log probabilities of the L tokens (<= 0).
        token_importance: importance u of the same L tokens (>= 0, sums to 1).

    Example: log p = [log 0.5, log 0.25] and u = [0, 1] give w = [0.25, 0.75] and
    0.25 * log 0.5 + 0.75 * log 0.25 = -1.2130.

    >>> import math
    >>> round(mars([math.log(0.5), math.log(0.25)], [0.0, 1.0]), 4)
    -1.213
    """
    logprobs = check.log_scores(token_logprobs, "token_logprobs")
    weights = mars_weights(token_importance)
    check.same_length(weights, "token_importance", logprobs, "token_logprobs")
    with np.errstate(over="ignore"):
        score = float(weights @ logprobs)
    if np.isfinite(score):
        return score
    # Only for log-probs near float64's limit (-1.8e308): the rounded weights can sum to a hair
    # over 1, pushing the sum past the limit, although the exact convex combination lies in
    # [min log p, 0]. Scale by the largest magnitude and keep the result within that range.
    scale = -float(logprobs.min())
    return max(float(weights @ (logprobs / scale)), -1.0) * scale


def phrase_weights(
    phrase_scores, normalization: str = "sum", temperature: float = 0.1
) -> np.ndarray:
    """Phrase weights U_k (>= 0, sum to 1) from the importance model's phrase scores s_k.

    The step before eq. (10)'s token importance u (see :func:`token_importance`):

    - ``"sum"`` (the paper's code for Table 1): ``U_k = s_k / sum_j s_j``; all-zero scores give
      uniform weights.
    - ``"softmax"`` (the authors' later library, temperature 0.1): ``U = softmax(s /
      temperature)`` over the RAW scores, computed stably.
    - ``"sum-softmax"`` (the published code's medical run, temperature 0.001, see
      :data:`MEDICAL_TEMPERATURE`): ``U = softmax((s / sum_j s_j) / temperature)``, a softmax
      over the already sum-normalized weights. It is NOT the same as ``"softmax"``: dividing by
      the sum rescales the gaps between the scores, so at one temperature the two differ
      whenever the scores do not sum to 1.

    Unitless; a higher U_k means phrase k matters more to the answer's meaning.

    Args:
        phrase_scores: one score s_k >= 0 per phrase (e.g. the model's sigmoid output).
        normalization: ``"sum"``, ``"softmax"`` or ``"sum-softmax"``.
        temperature: softmax temperature, > 0 (always checked; not used by ``"sum"``).

    Example: scores [1, 3] sum-normalize to [0.25, 0.75]; scores [0, log 3] with softmax at
    temperature 1 give the same weights; "sum-softmax" of [1, 3] at temperature 1 is
    softmax([0.25, 0.75]).

    >>> phrase_weights([1.0, 3.0])
    array([0.25, 0.75])
    >>> import math
    >>> phrase_weights([0.0, math.log(3)], "softmax", temperature=1.0).round(6)
    array([0.25, 0.75])
    >>> phrase_weights([1.0, 3.0], "sum-softmax", temperature=1.0).round(4)
    array([0.3775, 0.6225])
    """
    scores = check.nonnegative_vector(phrase_scores, "phrase_scores")
    normalization = check.one_of(normalization, NORMALIZATIONS, "normalization")
    temperature = check.positive(temperature, "temperature")
    if normalization == "softmax":
        return _softmax(scores, temperature)
    if normalization == "sum-softmax":
        return _softmax(_sum_normalized(scores), temperature)
    return _sum_normalized(scores)


def _sum_normalized(scores: np.ndarray) -> np.ndarray:
    """``scores / scores.sum()`` for checked scores >= 0; all zeros give uniform weights."""
    with np.errstate(over="ignore"):
        total = scores.sum()
    if total == 0:
        return np.full(scores.size, 1.0 / scores.size)
    if np.isinf(total):  # finite scores whose sum overflows: divide by the largest one first
        scores = scores / scores.max()
        total = scores.sum()
    return scores / total


def token_importance(
    phrase_of_token,
    phrase_scores,
    token_logprobs,
    mode: str = "equal",
    normalization: str = "sum",
    temperature: float = 0.1,
) -> np.ndarray:
    """Token importance u (>= 0, sums to 1) for MARS, the u of paper eq. (10).

    Phrase scores become phrase weights U (:func:`phrase_weights`), then each U_k is spread
    over the tokens of phrase h_k:

    - ``"equal"`` (default, Table 1): ``u_l = U_k / |h_k|`` for every token l of h_k;
    - ``"max"`` (ablation Table 3): all of U_k goes to the least probable token of h_k
      (lowest log-probability; ties go to the earliest token);
    - ``"min"`` (ablation Table 3): all of U_k goes to the most probable token of h_k
      (highest log-probability; ties go to the earliest token).

    Unitless; feeds :func:`mars`, whose log score is natural log.

    Args:
        phrase_of_token: for each of the L tokens, the index k of the phrase holding it. Every
            phrase 0..K-1 must hold at least one token.
        phrase_scores: K phrase scores s_k >= 0.
        token_logprobs: natural-log probabilities of the L tokens (<= 0); used by "max"/"min",
            always checked.
        mode: ``"equal"``, ``"max"`` or ``"min"``.
        normalization: see :func:`phrase_weights`.
        temperature: see :func:`phrase_weights`.

    Example: tokens [a, b | c] in phrases [0, 0, 1] with scores [1, 3] give U = [0.25, 0.75].
    With log p = [log 0.5, log 0.9, log 0.8], "equal" gives [0.125, 0.125, 0.75] and "max"
    puts phrase 0's weight on token a (p = 0.5), the less probable one.

    >>> import math
    >>> logp = [math.log(0.5), math.log(0.9), math.log(0.8)]
    >>> token_importance([0, 0, 1], [1.0, 3.0], logp)
    array([0.125, 0.125, 0.75 ])
    >>> token_importance([0, 0, 1], [1.0, 3.0], logp, mode="max")
    array([0.25, 0.  , 0.75])
    """
    logprobs = check.log_scores(token_logprobs, "token_logprobs")
    mode = check.one_of(mode, MODES, "mode")
    weights = phrase_weights(phrase_scores, normalization, temperature)
    phrase, sizes = _phrase_membership(phrase_of_token, weights.size)
    check.same_length(logprobs, "token_logprobs", phrase, "phrase_of_token")
    if mode == "equal":
        return weights[phrase] / sizes[phrase]
    # Sort tokens by phrase, then by log-probability (ascending for "max", descending for
    # "min"), then by position; the first token of each phrase's run receives its weight.
    key = logprobs if mode == "max" else -logprobs
    order = np.lexsort((np.arange(phrase.size), key, phrase))
    chosen = order[np.searchsorted(phrase[order], np.arange(sizes.size))]
    importance = np.zeros(phrase.size)
    importance[chosen] = weights
    return importance


def bem_token_importance(phrase_of_token, phrase_scores, temperature: float = 0.01) -> np.ndarray:
    """Token importance from the paper's Algorithm 1 (phrase-level importance function).

    For each token l of phrase h_k, ``I_l = phrase_scores[k] / |h_k|``; then
    ``u = softmax(I / temperature)`` over all tokens (paper: temperature 0.01). The result is
    the u of eq. (10): >= 0, sums to 1, unitless.

    Args:
        phrase_of_token: phrase index k of each token; every phrase must hold a token.
        phrase_scores: ``1 - P(equivalent)`` per phrase from the answer-equivalence model
            (BEM in the paper), in [0, 1]; higher = masking the phrase changes the meaning more.
        temperature: softmax temperature, > 0.

    Example: phrases [0, 0, 1] with scores [0.02, 0.01] give I = [0.01, 0.01, 0.01]: the
    two-token phrase's score is split, so all three tokens end up equally important.

    >>> bem_token_importance([0, 0, 1], [0.02, 0.01]).round(6)
    array([0.333333, 0.333333, 0.333333])
    """
    scores = check.nonnegative_vector(phrase_scores, "phrase_scores")
    above_one = np.flatnonzero(scores > 1)
    if above_one.size:
        k = above_one[0]
        raise ValueError(
            f"phrase_scores[{k}] = {float(scores[k])} is above 1; "
            f"expected 1 - P(equivalent) in [0, 1]"
        )
    temperature = check.positive(temperature, "temperature")
    phrase, sizes = _phrase_membership(phrase_of_token, scores.size)
    return _softmax(scores[phrase] / sizes[phrase], temperature)


def _softmax(scores: np.ndarray, temperature: float) -> np.ndarray:
    """``softmax(scores / temperature)`` that neither overflows nor gives NaN.

    ``scores / temperature`` as is when finite (scipy's softmax already subtracts the maximum),
    so ordinary inputs give exactly the usual result. When the quotient overflows (huge scores or
    a tiny temperature), the mathematically identical ``softmax((scores - max) / temperature)``
    is used: its largest entry is 0 and the others are <= 0, at worst -inf, whose weight is 0.
    """
    with np.errstate(over="ignore"):
        logits = scores / temperature
    if not np.isfinite(logits).all():
        with np.errstate(over="ignore"):
            logits = (scores - scores.max()) / temperature
    return softmax(logits)


def _phrase_membership(phrase_of_token, n_phrases: int) -> tuple[np.ndarray, np.ndarray]:
    """Check ``phrase_of_token`` against K phrases; return it as int64 and the phrase sizes."""
    phrase = check.index_vector(phrase_of_token, "phrase_of_token")
    out_of_range = np.flatnonzero((phrase < 0) | (phrase >= n_phrases))
    if out_of_range.size:
        l = out_of_range[0]
        raise ValueError(
            f"phrase_of_token[{l}] = {int(phrase[l])} is not a phrase index; "
            f"there are {n_phrases} phrase scores (indices 0..{n_phrases - 1})"
        )
    sizes = np.bincount(phrase, minlength=n_phrases)
    empty = np.flatnonzero(sizes == 0)
    if empty.size:
        raise ValueError(
            f"phrases {empty.tolist()} hold no token; every phrase score needs at least one "
            f"token in phrase_of_token"
        )
    return phrase, sizes
