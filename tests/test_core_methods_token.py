"""The token-level, CoCoA and density methods' math (mars_demo.core.token_level, .cocoa,
.density), each computed here from its formula (lm-polygraph's estimator written out again on
the same inputs) on hand-made inputs: ties, one sample, identical samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mars_demo.core import cocoa, density, token_level

LOG = math.log


def test_msp_is_minus_the_sum_of_the_token_logprobs():
    assert token_level.msp([LOG(0.5), LOG(0.25)]) == pytest.approx(LOG(8), abs=1e-15)
    assert token_level.msp([0.0]) == 0.0  # one certain token
    with pytest.raises(ValueError, match="positive"):
        token_level.msp([0.1])


def test_mean_token_entropy_plain_and_weighted():
    h = [0.2, 1.0, 0.6]
    assert token_level.mean_token_entropy(h) == pytest.approx(np.mean(h), abs=1e-15)
    assert token_level.mean_token_entropy(h, [1 / 3] * 3) == pytest.approx(np.mean(h))
    assert token_level.mean_token_entropy(h, [0.5, 0.25, 0.25]) == pytest.approx(0.5)
    assert token_level.mean_token_entropy([0.7]) == 0.7  # one token
    with pytest.raises(ValueError, match="sum to 1"):
        token_level.mean_token_entropy(h, [0.5, 0.5, 0.5])


def test_entropy_of_a_full_distribution():
    assert token_level.entropy_of([LOG(0.5), LOG(0.5)]) == pytest.approx(LOG(2))
    assert token_level.entropy_of([0.0, -math.inf, -math.inf]) == 0.0  # certain
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(50))
    assert token_level.entropy_of(np.log(p)) == pytest.approx(-(p * np.log(p)).sum())


def test_top_k_entropy_is_a_lower_bound_and_exact_when_the_top_k_hold_all_mass():
    rng = np.random.default_rng(5)
    for _ in range(20):
        p = np.sort(rng.dirichlet(np.full(30, 0.3)))[::-1]
        full = -(p * np.log(p)).sum()
        for k in (1, 5, 20, 30):
            h, rest = token_level.top_k_entropy(np.log(p[:k]))
            assert h <= full + 1e-12
            assert rest == pytest.approx(max(0.0, 1 - p[:k].sum()), abs=1e-12)
        assert token_level.top_k_entropy(np.log(p))[0] == pytest.approx(full, abs=1e-12)
    # one token of probability 0.5, the rest one bucket of 0.5: log 2
    assert token_level.top_k_entropy([LOG(0.5)]) == pytest.approx((LOG(2), 0.5))


def test_self_certainty_as_lm_polygraph_computes_it_from_full_distributions():
    rng = np.random.default_rng(7)
    dists = [np.log(rng.dirichlet(np.ones(40))) for _ in range(4)]
    dists[1][[3, 9]] = -np.inf  # tokens of probability 0 are left out, as lm-polygraph does
    kl = [token_level.kl_from_uniform(lp) for lp in dists]
    # lm-polygraph's SelfCertainty, written out: per token -mean(lp) - log(V), negated mean
    by_hand = -np.mean([-np.mean(lp[np.isfinite(lp)]) - np.log(np.isfinite(lp).sum())
                        for lp in dists])
    assert token_level.self_certainty(kl) == pytest.approx(by_hand, abs=1e-12)
    assert token_level.kl_from_uniform(np.full(8, LOG(1 / 8))) == pytest.approx(0, abs=1e-15)
    # a peaked distribution is far from uniform: lower uncertainty than a flat one
    peaked = token_level.kl_from_uniform(np.log([0.97, 0.01, 0.01, 0.01]))
    assert token_level.self_certainty([peaked]) < token_level.self_certainty([0.0])


def test_answer_length():
    assert token_level.answer_length([-0.1]) == 1.0
    assert token_level.answer_length([-0.1] * 7) == 7.0


def ccp_by_hand(alternatives, labels):
    """lm-polygraph's ClaimConditionedProbability for one answer, written out."""
    terms = []
    for alts, nli in zip(alternatives, labels):
        entail = [lp for i, lp in enumerate(alts) if i == 0 or nli[i] == "entailment"]
        contra = [lp for i, lp in enumerate(alts) if i > 0 and nli[i] == "contradiction"]
        terms.append(np.logaddexp.reduce(entail) - np.logaddexp.reduce(entail + contra))
    return -np.exp(np.sum(terms)), terms


def test_ccp_follows_lm_polygraph():
    alternatives = [[LOG(0.6), LOG(0.3), LOG(0.1)], [LOG(0.9), LOG(0.05)],
                    [LOG(0.5), LOG(0.5)]]  # a tie between the greedy token and its rival
    labels = [["entailment", "contradiction", "neutral"], ["entailment", "entailment"],
              ["entailment", "contradiction"]]
    expected, terms = ccp_by_hand(alternatives, labels)
    got = [token_level.ccp_token_term(a, n) for a, n in zip(alternatives, labels)]
    assert got == pytest.approx(terms, abs=1e-15)
    assert got[2] == pytest.approx(LOG(0.5))  # the tie: half the claim's mass
    assert token_level.ccp(got) == pytest.approx(expected, abs=1e-15)
    # uniform weights give lm-polygraph's value; MARS weights move it toward the heavy token
    assert token_level.ccp(got, [1 / 3] * 3) == pytest.approx(expected, abs=1e-15)
    assert token_level.ccp(got, [0.0, 1.0, 0.0]) == pytest.approx(-math.exp(3 * got[1]))
    # a token without alternatives that change the claim has term 0; no token at all: -1
    assert token_level.ccp_token_term([LOG(0.7)], ["entailment"]) == 0.0
    assert token_level.ccp([0.0, 0.0]) == -1.0


def test_cocoa_as_lm_polygraph():
    f, b = [0.9, 0.2, 0.5], [0.7, 0.4, 0.5]
    dissimilarity = np.mean(1 - (np.array(f) + np.array(b)) / 2)
    assert cocoa.cocoa(2.5, f, b) == pytest.approx(2.5 * dissimilarity, abs=1e-14)
    assert cocoa.cocoa(2.5, [1.0] * 3, [1.0] * 3) == 0.0  # identical samples: no doubt added
    assert cocoa.cocoa(1.0, [0.25], [0.75]) == 0.5  # one sample
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        cocoa.cocoa(1.0, [1.2], [0.5])


def semantic_density_by_hand(greedy_lp, sample_lps, texts, nli):
    """lm-polygraph's SemanticDensity, written out: distinct sample texts, each weighed by its
    probability normalized by length, kernel 1 - (contra + neutral / 2)."""
    _, first = np.unique(texts, return_index=True)
    num, den = [], []
    for k in first:
        w = np.exp(np.sum(sample_lps[k])) ** (1 / len(sample_lps[k]))
        d = nli[k][2] + nli[k][1] / 2
        num.append(w * (1 - d if d <= 1 else 0))
        den.append(w)
    g = np.exp(np.sum(greedy_lp)) ** (1 / len(greedy_lp))
    return -(np.sum(num) + g) / (np.sum(den) + g)


def test_semantic_density_as_lm_polygraph_with_length_normalized_scores():
    greedy = [-0.1, -0.5, -0.2]
    samples = [[-0.3], [-0.2, -0.9], [-0.3], [-1.5, -0.1, -0.1]]
    texts = ["Mars", "It is Mars", "Mars", "Venus"]  # a repeat: counted once
    nli = [[0.8, 0.15, 0.05], [0.6, 0.3, 0.1], [0.8, 0.15, 0.05], [0.05, 0.15, 0.8]]
    got = density.semantic_density(np.mean(greedy), [np.mean(s) for s in samples], nli, texts)
    assert got == pytest.approx(semantic_density_by_hand(greedy, samples, texts, nli),
                                abs=1e-14)
    # one sample that entails fully: density 1
    assert density.semantic_density(-0.2, [-0.4], [[1, 0, 0]], ["Mars"]) == -1.0
    # identical samples equal to each other count once
    once = density.semantic_density(0.0, [0.0], [[0, 0, 1]], ["b"])
    assert density.semantic_density(0.0, [0.0, 0.0], [[0, 0, 1]] * 2, ["b", "b"]) == once
    # scores far below 0 do not underflow the weights
    assert density.semantic_density(-800.0, [-801.0], [[0, 1, 0]], ["x"]) == pytest.approx(
        -(1 + math.exp(-1) * 0.5) / (1 + math.exp(-1)))


def eigenscore_by_hand(z, alpha=1e-3):
    """lm-polygraph's EigenScore, written out with its J_d matrix."""
    z = np.asarray(z, dtype=float)
    d = z.shape[1]
    j = np.eye(d) - np.ones((d, d)) / d
    values = np.linalg.eigvalsh(z @ j @ z.T + alpha * np.eye(z.shape[0]))
    return np.mean(np.log([v if v > 0 else 1e-10 for v in values]))


def test_eigenscore_as_lm_polygraph():
    rng = np.random.default_rng(11)
    z = rng.normal(size=(5, 16))
    assert density.eigenscore(z) == pytest.approx(eigenscore_by_hand(z), abs=1e-10)
    same = np.repeat(z[:1], 5, axis=0)  # identical samples: one direction, the rest alpha
    assert density.eigenscore(same) == pytest.approx(eigenscore_by_hand(same), abs=1e-10)
    assert density.eigenscore(same) < density.eigenscore(z)
    one = z[:1]
    assert density.eigenscore(one) == pytest.approx(eigenscore_by_hand(one), abs=1e-12)
