"""The readable report of an analysis: what ``ask`` and ``score`` print without ``--json``.

Every phrase once with its tokens under it, the samples with their clusters, the uncertainties
(and a line on a semantic entropy below 0), the other methods, the timings and the warnings;
nothing from the question or the answers reaches the terminal unescaped (:func:`terminal_safe`).
"""

from __future__ import annotations

import math

def _bar(weight: float, width: int = 20) -> str:
    n = max(0, min(width, round(weight * width)))
    return "#" * n + "." * (width - n)


_UNSAFE_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")  # controls, bidi/zero-width, surrogates, breaks


def terminal_safe(text: object) -> str:
    r"""``text`` with every character that could move the cursor, recolor or reorder a terminal
    (control characters, ANSI escapes, bidirectional overrides, zero-width and line-separator
    characters) written as a visible escape, so an answer cannot disguise the report.

    >>> terminal_safe("Mars\x1b[31m is \u202ered\n")
    'Mars\\x1b[31m is \\u202ered\\n'
    """
    import unicodedata

    out = []
    for ch in str(text):
        if unicodedata.category(ch) in _UNSAFE_CATEGORIES:
            code = ord(ch)
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch) or (
                f"\\x{code:02x}" if code < 0x100 else
                f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"))
        else:
            out.append(ch)
    return "".join(out)


def _token_cell(text: str, width: int = 18) -> str:
    """A token between quotes, escaped, cut to ``width`` characters."""
    shown = "'" + terminal_safe(text) + "'"
    return shown if len(shown) <= width else shown[: width - 2] + "…'"


#: the report's line under a semantic entropy below 0 (the page says the same at more length)
SE_NEGATIVE = ("  (Semantic entropy below 0 is no error: the paper's estimator sums each meaning's "
               "sample probabilities unnormalized, so a meaning of probable answers sums past 1 "
               "and its -log is below 0.)")


def format_report(result) -> str:
    """A readable report of an :class:`~mars_demo.result.AnalysisResult`: every phrase once, with
    its tokens under it, and nothing from the question or the answers reaches the terminal
    unescaped (:func:`terminal_safe`)."""
    safe = terminal_safe
    g = result.greedy
    lines = [f"Question: {safe(result.question)}", "", f"Answer: {safe(g.text) or '(empty)'}", ""]
    L = len(g.tokens)
    lines.append("Tokens by phrase (p = probability; weights in the LN and the MARS score):")
    lines.append(f"    {'token':<18} {'p':>6}  {'LN w':>6}  {'MARS w':>6}")
    previous = None
    for l, tok in enumerate(g.tokens):
        k = g.phrase_of_token[l] if g.phrase_of_token else -1
        k = k if 0 <= k < len(g.phrases) else -1
        if k != previous:  # a new group of tokens: its phrase once
            if k >= 0:
                ph = g.phrases[k]
                lines.append(
                    f"  phrase {k + 1} '{safe(ph.text)}': importance {ph.score:.3f}, "
                    f"weight U {ph.weight:.3f}"
                )
            else:
                lines.append("  (not part of any phrase)")
            previous = k
        lines.append(
            f"    {_token_cell(tok.text):<18} {math.exp(tok.logprob):6.3f}  {1 / L:6.3f}  "
            f"{g.mars_weights[l]:6.3f}  {_bar(g.mars_weights[l], 10)}"
        )
    unaligned = [k for k, ph in enumerate(g.phrases) if not ph.tokens]
    for k in unaligned:
        ph = g.phrases[k]
        lines.append(
            f"  phrase {k + 1} '{safe(ph.text)}': importance {ph.score:.3f}, no token "
            "(its weight went to the other phrases)"
        )
    lines += ["", "Samples (cluster, LN score, MARS score):"]
    for cid, a in zip(result.cluster_ids, result.samples):
        lines.append(
            f"  [{cid + 1}] {a.scores.length_normalized:8.3f} {a.scores.mars:8.3f}  "
            f"{safe(a.text) or '(empty)'}"
        )
    u = result.uncertainty
    shown = {"confidence": ("Confidence", u.confidence), "entropy": ("Entropy", u.entropy),
             "semantic_entropy": ("Semantic entropy", u.semantic_entropy)}
    lines += ["", "Uncertainty (higher = less trustworthy)   length-normalized      MARS"]
    for name, pair in shown.values():
        lines.append(f"  {name:<39} {pair.length_normalized:17.4f} {pair.mars:9.4f}")
    if min(u.semantic_entropy.length_normalized, u.semantic_entropy.mars) < 0:
        lines.append(SE_NEGATIVE)
    others = {k: v for k, v in (result.methods or {}).items() if k not in shown}  # each once
    if others:
        from .methods import METHODS

        lines += ["", "Other methods (higher = less trustworthy; see docs/methods.md)"]
        for method_id, values in others.items():
            name = METHODS[method_id].label if method_id in METHODS else method_id
            if "value" in values:
                lines.append(f"  {name:<39} {values['value']:9.4f}")
            else:
                lines.append(f"  {name:<39} {values['length_normalized']:9.4f} (LN) "
                             f"{values['mars']:9.4f} (MARS)")
    lines += ["", "Time (s): " + ", ".join(f"{k} {v:.2f}" for k, v in result.timings_s.items())]
    if result.warnings:
        lines += ["", "Warnings:"] + [f"  - {safe(w)}" for w in result.warnings]
    return "\n".join(lines)
