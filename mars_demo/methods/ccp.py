"""CCP, claim-conditioned probability (Fadeeva et al., ACL Findings 2024): each greedy token's
probability counted only against the alternatives that would change the claim. Opt-in: it runs
the NLI model on each greedy token against its top alternatives, both ways, as its authors do
(lm-polygraph's ``stat_calculators/greedy_alternatives_nli.py``: the token texts stripped of
punctuation and spaces; greedy word -> alternative and alternative -> greedy word, identical
words included), one pass per answer of about ``2 L k`` short pairs (deduplicated); the two
verdicts of each alternative are combined as the authors' estimator combines them
(:func:`mars_demo.core.token_level.combine_nli`, lm-polygraph's ``_combine_nli``). The
alternatives (``alternatives`` of each greedy token, from generation) and the verdicts
(``method_inputs["ccp"]``) are saved. Math: :mod:`mars_demo.core.token_level`; lm-polygraph
``estimators/claim_conditioned_probability.py``."""

from __future__ import annotations

from .base import method


def _rows(x) -> list[tuple[list, list[str], list[str]]]:
    """Each counted greedy token's alternatives and its two rows of verdicts (greedy word ->
    alternative, and back): the answer's tokens, then its end token under
    ``end_token="include"``."""
    g = x.greedy_answer
    entry = x.saved["ccp"]
    forward, backward = entry.get("labels"), entry.get("backward_labels")
    if forward is None or len(forward) != len(g.alternatives):
        raise ValueError("the saved CCP verdicts are not of this greedy answer's tokens")
    if backward is None or len(backward) != len(forward):
        raise ValueError("the saved CCP verdicts hold one direction only (made before both "
                         "were asked); ask again with --methods ccp")
    rows = list(zip(g.alternatives, forward, backward))
    if x.end_token == "include" and g.end_token is not None:
        if entry.get("end_labels") is None or not g.end_token.get("alternatives"):
            raise ValueError("the saved CCP verdicts hold none of the end token's alternatives "
                             "that --end-token include counts; ask again with --methods ccp")
        rows.append((g.end_token["alternatives"], entry["end_labels"],
                     entry["end_backward_labels"]))
    return rows


def token_terms(x) -> list[float]:
    """Each counted greedy token's CCP term from its saved alternatives and both verdicts."""
    from ..core import token_level

    terms = []
    for alts, forward, backward in _rows(x):
        if not alts:
            raise ValueError("a greedy token has no saved alternatives")
        if len(forward) != len(alts) or len(backward) != len(alts):
            raise ValueError("the saved CCP verdicts do not match a token's alternatives")
        labels = [token_level.combine_nli(f, b) for f, b in zip(forward, backward)]
        terms.append(token_level.ccp_token_term([float(a[1]) for a in alts], labels))
    return terms


def _ccp(x, variant):
    from ..core import token_level

    return token_level.ccp(token_terms(x), None if variant == "length_normalized"
                           else x.greedy_tokens.weights(variant))


METHODS = (
    method("ccp", "Claim-conditioned probability",
           "how likely the greedy tokens are against the top alternatives that would change "
           "the claim (NLI of each token with its alternatives, both ways)",
           ["greedy", "greedy_alternatives", "alternatives_nli"], True, "Fadeeva et al. 2024",
           _ccp,
           "estimators/claim_conditioned_probability.py"),
)
