"""Token-level uncertainties of the greedy answer: from its token log-probs and the model's
next-token distribution at each of its tokens (white-box baselines of lm-polygraph, Fadeeva et
al. 2023). Every function returns an uncertainty: higher = less trustworthy; natural logs.

``weights`` (one per token, summing to 1) say how the tokens are averaged: ``1/L`` each for the
length-normalized form, the MARS weights ``w_l`` for the MARS form, so every token-level
average here is shown with LN and MARS side by side, as the sequence scores are.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from . import _validation as check

#: the NLI labels of an alternative that count for and against the greedy token (CCP)
ENTAILMENT, CONTRADICTION, NEUTRAL = "entailment", "contradiction", "neutral"


def combine_nli(forward: str, backward: str) -> str:
    """One verdict from the NLI model's two, greedy token -> alternative (``forward``) and back
    (``backward``), as CCP's authors combine them (lm-polygraph
    ``estimators/claim_conditioned_probability.py``, ``_combine_nli``): the same verdict both
    ways is kept; entailment one way and contradiction the other is neutral; otherwise
    entailment or contradiction wins over neutral.

    >>> combine_nli("entailment", "neutral"), combine_nli("neutral", "contradiction")
    ('entailment', 'contradiction')
    >>> combine_nli("entailment", "contradiction"), combine_nli("neutral", "neutral")
    ('neutral', 'neutral')
    """
    if forward == backward:
        return forward
    both = {forward, backward}
    if both == {ENTAILMENT, CONTRADICTION}:
        return NEUTRAL
    for label in (ENTAILMENT, CONTRADICTION):
        if label in both:
            return label
    return NEUTRAL


def msp(token_logprobs) -> float:
    """Maximum sequence probability: ``-sum_l log p_l``, the greedy answer's negative
    log-probability (lm-polygraph ``estimators/max_probability.py``,
    ``MaximumSequenceProbability``).

    >>> round(msp([math.log(0.5), math.log(0.5)]), 4)
    1.3863
    """
    return -float(check.log_scores(token_logprobs, "token_logprobs").sum())


def _weights(weights, n: int) -> np.ndarray:
    if weights is None:
        return np.full(n, 1.0 / n)
    w = check.nonnegative_vector(weights, "weights")
    check.same_length(w, "weights", range(n), "tokens")
    if abs(w.sum() - 1.0) > check.SUM_TOLERANCE:
        raise ValueError(f"weights must sum to 1, got {float(w.sum())}: {list(weights)!r}")
    return w


def mean_token_entropy(token_entropies, weights=None) -> float:
    """The entropy of the next-token distribution at each greedy token, averaged: plainly
    (``weights`` None or 1/L each: lm-polygraph ``estimators/token_entropy.py``,
    ``MeanTokenEntropy``) or with the MARS weights.

    >>> mean_token_entropy([0.2, 1.0]), mean_token_entropy([0.2, 1.0], [0.75, 0.25])
    (0.6, 0.4)
    """
    h = check.nonnegative_vector(token_entropies, "token_entropies")
    return float(np.dot(_weights(weights, h.size), h))


def entropy_of(logprobs) -> float:
    """The entropy ``-sum p log p`` of one next-token distribution given as log-probs (the
    whole vocabulary; ``-inf`` entries are tokens of probability 0)."""
    lp = np.asarray(logprobs, dtype=np.float64)
    finite = lp[np.isfinite(lp)]
    return float(max(0.0, -np.sum(np.exp(finite) * finite)))


def top_k_entropy(top_logprobs) -> tuple[float, float]:
    """``(entropy, rest)`` of a next-token distribution known only by its top-k log-probs (a
    server's ``top_logprobs``): the k tokens plus ONE bucket holding the rest of the mass,
    ``rest = 1 - sum p_i`` (0 when rounding makes it negative). Lumping the other tokens into
    one outcome can only lower the entropy, so this is a lower bound of the full distribution's
    entropy, exact when the k tokens hold all the mass.

    >>> h, rest = top_k_entropy([math.log(0.5), math.log(0.25)])
    >>> round(h, 4), rest
    (1.0397, 0.25)
    """
    lp = check.float_vector(top_logprobs, "top_logprobs")
    if np.any(lp > check.LOG_TOLERANCE):
        raise ValueError(f"top_logprobs must be <= 0 (natural log): {list(top_logprobs)!r}")
    p = np.exp(np.minimum(lp, 0.0))
    rest = max(0.0, 1.0 - float(p.sum()))
    h = -float(np.sum(p * np.minimum(lp, 0.0)))
    if rest > 0:
        h -= rest * math.log(rest)
    return max(0.0, h), rest


def kl_from_uniform(logprobs) -> float:
    """Self-certainty's term of one next-token distribution: ``KL(U || p) = -mean_v log p_v -
    log V`` over the V tokens of finite log-prob (Kang et al. 2025; lm-polygraph
    ``estimators/self_certainty.py`` drops the ``-inf`` entries the same way)."""
    lp = np.asarray(logprobs, dtype=np.float64)
    finite = lp[np.isfinite(lp)]
    if finite.size == 0:
        raise ValueError("a next-token distribution with no token of finite log-prob")
    return float(-finite.mean() - math.log(finite.size))


def self_certainty(kl_uniform, weights=None) -> float:
    """Self-certainty as an uncertainty: minus the (weighted) mean over the greedy tokens of
    ``KL(U || p_l)`` (lm-polygraph ``estimators/self_certainty.py``, ``SelfCertainty``, with
    plain weights). A peaked distribution is far from uniform: large KL, low uncertainty.

    >>> self_certainty([2.0, 4.0])
    -3.0
    """
    kl = check.float_vector(kl_uniform, "kl_uniform")
    return -float(np.dot(_weights(weights, kl.size), kl))


def answer_length(token_logprobs) -> float:
    """The greedy answer's length in tokens, as an uncertainty baseline: a method that beats
    it only by tracking length shows it.

    >>> answer_length([-0.1, -0.2, -0.3])
    3.0
    """
    return float(len(check.float_vector(token_logprobs, "token_logprobs")))


def ccp_token_term(alternative_logprobs, labels) -> float:
    """One greedy token's claim-conditioned log-probability (Fadeeva et al. 2024; lm-polygraph
    ``estimators/claim_conditioned_probability.py``): ``alternative_logprobs[0]`` is the greedy
    token's own, the rest its top alternatives'; ``labels[i]`` the NLI verdict between
    alternative i and the greedy token (the authors combine both directions, :func:`combine_nli`;
    ``labels[0]`` is not read). The greedy token and every alternative entailed count for it,
    those contradicted against; neutral ones are left out:
    ``logsumexp(entailed) - logsumexp(entailed + contradicted)``, <= 0.

    >>> round(ccp_token_term([math.log(0.6), math.log(0.3), math.log(0.1)],
    ...                      ["entailment", "contradiction", "neutral"]), 4)
    -0.4055
    """
    lp = check.float_vector(alternative_logprobs, "alternative_logprobs")
    check.same_length(lp, "alternative_logprobs", list(labels), "labels")
    entailed = [lp[0]] + [lp[i] for i in range(1, lp.size) if labels[i] == ENTAILMENT]
    against = [lp[i] for i in range(1, lp.size) if labels[i] == CONTRADICTION]
    return float(logsumexp(entailed) - logsumexp(entailed + against))


def ccp(token_terms, weights=None) -> float:
    """Claim-conditioned probability of the greedy answer as an uncertainty: ``-exp(sum_l
    c_l)`` over its tokens' terms (:func:`ccp_token_term`; lm-polygraph's sequence-level
    ``ClaimConditionedProbability``). With ``weights`` (the MARS weights), ``-exp(L * sum_l
    w_l c_l)``: the same value when the weights are uniform, the tokens that carry the meaning
    counting more otherwise.

    >>> round(ccp([math.log(0.5), 0.0]), 4), round(ccp([math.log(0.5), 0.0], [0.5, 0.5]), 4)
    (-0.5, -0.5)
    """
    c = check.float_vector(token_terms, "token_terms")
    if weights is None:
        return -math.exp(float(c.sum()))
    return -math.exp(c.size * float(np.dot(_weights(weights, c.size), c)))
