"""Comparing the engine's results with the reference path's, within a dtype's tolerance."""

from __future__ import annotations

import math
from typing import Any


UNCERTAINTIES = ("confidence", "entropy", "semantic_entropy")


def summarize(greedy, samples, unc, cluster_ids, labels) -> dict[str, Any]:
    """What the two paths must agree on: per-answer LN and MARS scores, the six uncertainties,
    the NLI verdicts and the clusters (plus the token log-probs, for information)."""
    answers = [greedy] + list(samples)
    return {
        "scores": [[a.scores.length_normalized, a.scores.mars] for a in answers],
        "uncertainty": {
            f"{name}.{kind}": getattr(getattr(unc, name), kind)
            for name in UNCERTAINTIES for kind in ("length_normalized", "mars")
        },
        "cluster_ids": list(cluster_ids),
        "labels": [list(row) for row in labels],
        "logprobs": [[t.logprob for t in a.tokens] for a in answers],
    }


def compare(fast: dict, ref: dict, tolerance: float = 1e-4) -> dict[str, Any]:
    """Check two summaries agree: token log-probs, scores and uncertainties within ``tolerance``
    (absolute, nats), NLI verdicts and clusters identical. Returns ``{"match", "max_abs_diff",
    "max_token_logprob_diff", "largest", "mismatches", ...}``; ``largest`` names where the
    largest score and token differences were seen.

    One tolerance serves all: every score (LN, and MARS with the "equal" distribution) is a
    weighted mean of token log-probs with weights summing to 1, and confidence, entropy and
    semantic entropy (a mean of logsumexps) move by at most the largest score change; so token
    log-probs within ``tolerance`` keep all of them within it.
    """
    mismatches: list[str] = []
    worst = 0.0
    largest: dict[str, Any] = {"score": None, "token": None}

    def close(name: str, a: float, b: float) -> None:
        nonlocal worst
        if not (math.isfinite(a) and math.isfinite(b)):
            if a != b:
                mismatches.append(f"{name}: {a} vs {b}")
            return
        d = abs(a - b)
        if d >= worst:
            largest["score"] = {"where": name, "fast": a, "reference": b, "diff": d}
        worst = max(worst, d)
        if d > tolerance:
            mismatches.append(f"{name}: {a:.8g} vs {b:.8g} (diff {d:.2g})")

    if len(fast["scores"]) != len(ref["scores"]):
        mismatches.append(f"answers: {len(fast['scores'])} vs {len(ref['scores'])}")
    for i, (fa, ra) in enumerate(zip(fast["scores"], ref["scores"])):
        close(f"answer {i} LN score", fa[0], ra[0])
        close(f"answer {i} MARS score", fa[1], ra[1])
    for key in fast["uncertainty"]:
        close(key, fast["uncertainty"][key], ref["uncertainty"].get(key, float("nan")))
    if fast["labels"] != ref["labels"]:
        mismatches.append("NLI verdicts differ")
    if fast["cluster_ids"] != ref["cluster_ids"]:
        mismatches.append(f"clusters differ: {fast['cluster_ids']} vs {ref['cluster_ids']}")
    token_diff = 0.0
    for i, (fa, ra) in enumerate(zip(fast["logprobs"], ref["logprobs"])):
        for t, (a, b) in enumerate(zip(fa, ra)):
            d = abs(a - b)
            if d >= token_diff:
                token_diff = d
                largest["token"] = {"where": f"answer {i} token {t}", "fast": a,
                                    "reference": b, "diff": d}
            if d > tolerance:
                mismatches.append(f"answer {i} token {t} log-prob: {a:.8g} vs {b:.8g} "
                                  f"(diff {d:.2g})")
    return {
        "match": not mismatches,
        "tolerance": tolerance,
        "max_abs_diff": worst,
        "max_token_logprob_diff": token_diff,
        "largest": largest,
        "mismatches": mismatches[:20],
    }


#: Default tolerance of the match check (nats), by the LLM's compute dtype. float32: cached
#: decoding and a teacher-forced pass agree to ~1e-6 (summation order only). bfloat16 keeps 8
#: significant bits (unit roundoff 2**-8): a logit near 20 is already rounded by up to 0.06,
#: and the two paths round different intermediate sums through every layer; on the H100 (7B
#: shape, 4-bit NF4, bf16 compute) they were up to 0.24 nats per token apart, hence 0.5 (twice
#: that). float16 keeps 11 bits, 8x finer than bfloat16: 0.5 / 8.
TOLERANCE_BY_DTYPE = {"float32": 1e-4, "float16": 0.0625, "bfloat16": 0.5}
#: Importance phrase scores (a float32 model on every device): batched vs one answer at a time.
PHRASE_TOLERANCE = 1e-4


def default_tolerance(compute_dtype: str) -> float:
    """The match check's tolerance for an LLM computing in ``compute_dtype``."""
    return TOLERANCE_BY_DTYPE.get(compute_dtype, TOLERANCE_BY_DTYPE["bfloat16"])


def compare_phrases(comparison: dict[str, Any], fast: list[list], ref: list[list],
                     tolerance: float = PHRASE_TOLERANCE) -> None:
    """Add to ``comparison`` whether the batched importance pass gave each answer the same
    phrases and phrase scores as one call per answer."""
    worst = 0.0
    for i, (fa, ra) in enumerate(zip(fast, ref)):
        if [(a, b) for a, b, _ in fa] != [(a, b) for a, b, _ in ra]:
            comparison["mismatches"].append(f"answer {i} phrases differ")
            continue
        for (_, _, x), (_, _, y) in zip(fa, ra):
            worst = max(worst, abs(x - y))
            if abs(x - y) > tolerance:
                comparison["mismatches"].append(
                    f"answer {i} phrase score: {x:.8g} vs {y:.8g} (diff {abs(x - y):.2g})")
    comparison["max_phrase_score_diff"] = worst
    comparison["match"] = not comparison["mismatches"]


