"""CCP, claim-conditioned probability (Fadeeva et al., ACL Findings 2024): each greedy token's
probability counted only against the alternatives that would change the claim. Opt-in: it runs
the NLI model on each greedy token against its top alternatives (as lm-polygraph's
``stat_calculators/greedy_alternatives_nli.py``: the token texts stripped of punctuation and
spaces, premise the greedy token), one pass per answer of about ``L * k`` short pairs
(deduplicated); the alternatives (``alternatives`` of each greedy token, from generation) and the verdicts
(``method_inputs["ccp"]``) are saved. Math: :mod:`mars_demo.core.token_level`;
lm-polygraph ``estimators/claim_conditioned_probability.py``."""

from __future__ import annotations

from .base import method


def token_terms(x) -> list[float]:
    """Each greedy token's CCP term from its saved alternatives and verdicts."""
    from ..core import token_level

    g = x.greedy_answer
    entry = x.saved["ccp"]
    labels = entry.get("labels")
    if labels is None or len(labels) != len(g.alternatives):
        raise ValueError("the saved CCP verdicts are not of this greedy answer's tokens")
    terms = []
    for alts, verdicts in zip(g.alternatives, labels):
        if not alts:
            raise ValueError("a greedy token has no saved alternatives")
        terms.append(token_level.ccp_token_term([float(a[1]) for a in alts], verdicts))
    return terms


def _ccp(x, variant):
    from ..core import token_level

    g = x.greedy_answer
    return token_level.ccp(token_terms(x), None if variant == "length_normalized"
                           else g.weights(variant))


METHODS = (
    method("ccp", "Claim-conditioned probability",
           "how likely the greedy tokens are against the top alternatives that would change "
           "the claim (NLI of each token with its alternatives)",
           ["greedy", "greedy_alternatives", "alternatives_nli"], True, "Fadeeva et al. 2024", _ccp,
           "estimators/claim_conditioned_probability.py"),
)
