"""The readable report of an analysis: what ``ask`` and ``score`` print without ``--json``
(:meth:`AnalysisResult.report <mars_demo.result.AnalysisResult.report>`).

The first screen (about 25 lines) is what a reader can act on: the question, the answer, the
analysis' verdict (:mod:`mars_demo.verdict`, the sentence the page shows), the key uncertainties
each with its scale (where the value sits in a reference run, or else what its range is and which
way is worse), the words that carry the answer, and the warnings, a toy model's first. With
``details`` (``--details``) the rest follows: every phrase once with its tokens under it, the
samples with their meanings, both scorings of the three measures, the other methods and the
timings, each term explained in one line. Nothing from the question or the answers reaches the
terminal unescaped (:func:`terminal_safe`).
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

#: the report's width: long lines (the verdict, a warning) are wrapped to it
WIDTH = 100
#: the scoring the first screen shows (the details show both)
KEY_SCORING = "mars"


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


def _wrapped(text: str, indent: str = "  ", first: str = "") -> list[str]:
    """``text`` (already terminal-safe) wrapped to :data:`WIDTH`, its first line starting with
    ``first`` and the others with ``indent``."""
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=indent,
                         break_on_hyphens=False) or [first.rstrip()]


#: the report's line under a semantic entropy below 0 (the page says the same at more length)
SE_NEGATIVE = ("  (Semantic entropy below 0 is no error: the paper's estimator sums each meaning's "
               "sample probabilities unnormalized, so a meaning of probable answers sums past 1 "
               "and its -log is below 0.)")

#: what each term of the details means, one line each
GLOSSARY = (
    "p: the model's probability of the token. LN w: its weight in the length-normalized (LN) "
    "score, 1/L for each of L tokens. MARS w: its weight in the MARS score, half 1/L and half its "
    "share of the answer's meaning. Importance: the importance model's raw score of a phrase (not "
    "a probability). Phrase weight: the phrase's share of the meaning (the weights sum to 1).")


# --- the first screen ------------------------------------------------------------------------


def format_report(result: Any, details: bool = False, reference: Any = None) -> str:
    """A readable report of an :class:`~mars_demo.result.AnalysisResult`: the first screen
    (:func:`summary_lines`) and, with ``details``, everything else (:func:`detail_lines`).
    ``reference``: a run whose answers each key value is placed among (an object with
    ``placed(method, variant, value)``, :class:`mars_demo.evaluation.reference.RunValues`)."""
    lines = summary_lines(result, reference)
    if details:
        lines += [""] + detail_lines(result)
    else:
        lines += [""] + _wrapped(
            "More with --details: each token's probability and weights, the samples and their "
            "meanings, both scorings, the other methods, the timings.", indent="")
    return "\n".join(lines)


def summary_lines(result: Any, reference: Any = None) -> list[str]:
    """The first screen: question, answer, verdict, key uncertainties, the words that carry the
    answer, warnings (a toy model's first)."""
    safe = terminal_safe
    lines = _wrapped(safe(result.question), first="Question: ")
    lines += _wrapped(safe(result.greedy.text) or "(empty)", first="Answer:   ")
    lines.append("")
    lines += verdict_lines(result.verdict)
    lines += [""] + key_lines(result, reference)
    words = carrying_words(result.greedy)
    if words:
        lines += [""] + _wrapped(words, first="Words that carry the answer (MARS phrase weight): ")
    if result.warnings:
        lines += [""] + warning_lines(result.warnings, FIRST_WARNINGS)
    return lines


#: the most warnings the first screen lists (a toy model's first); --details lists them all
FIRST_WARNINGS = 3


def warning_lines(warnings: list[str], most: int | None = None) -> list[str]:
    """The warnings, a toy model's first (``most``: list that many, then say how many more)."""
    ordered = sorted(warnings, key=lambda w: not w.startswith("Toy model"))
    lines = [f"Warnings ({len(warnings)}):"]
    for warning in ordered[:most]:
        lines += _wrapped(terminal_safe(warning), indent="    ", first="  - ")
    if most is not None and len(ordered) > most:
        lines.append(f"  ... and {len(ordered) - most} more (--details lists them all)")
    return lines


def verdict_lines(verdict: Any) -> list[str]:
    """The verdict as the page says it: badge and sentence, then the calibrated chance and the
    reference run's record where there are some."""
    if verdict is None:
        return ["Verdict: none (this analysis holds no verdict)"]
    lines = _wrapped(terminal_safe(f"{verdict.badge}: {verdict.sentence}"), first="Verdict: ")
    for said in (verdict.calibrated, verdict.record):
        if said:
            lines += _wrapped(terminal_safe(said), first="  ")
    return lines


#: the key uncertainties of the first screen: (measure, name, its scale in words)
KEYS = (
    ("semantic_entropy", "Semantic entropy",
     "from {floor} up ({floor}: every try means the same, each one certain)"),
    ("confidence", "Confidence",
     "from 0 up (0: sure of every word; here {chance} per word on average)"),
    ("entropy", "Entropy",
     "from 0 up (0: sure of every word of every try; here {chance} per word)"),
)


def key_lines(result: Any, reference: Any = None) -> list[str]:
    """The three measures under MARS scoring, each with its scale: where it sits among a
    reference run's answers, else its range and which way is worse."""
    head = "Key uncertainties (MARS scoring; higher = less trustworthy)"
    if reference is not None:
        head += f", placed among the answers of run {terminal_safe(getattr(reference, 'name', ''))}"
    lines = [head + ":"]
    samples = len(result.samples)
    for measure, name, scale in KEYS:
        value = getattr(getattr(result.uncertainty, measure), KEY_SCORING)
        placed = reference.placed(measure, KEY_SCORING, value) if reference is not None else None
        words = placed or scale.format(
            floor=f"{-math.log(samples):.2f}" if samples else "0",
            chance=_percent(math.exp(-value)) if math.isfinite(value) else "no")
        lines += _wrapped(words, indent=" " * 28, first=f"  {name:<18} {value:7.3f}  ")
    return lines


def _percent(p: float) -> str:
    """A probability in whole percents, never "0%" or "100%" when it is not."""
    if 0.005 <= p < 0.995:
        return f"{p:.0%}"
    return ">99%" if p >= 0.995 else "<1%" if p > 0 else "0%"


def carrying_words(answer: Any, top: int = 3) -> str:
    """The answer's phrases with the most weight, in words ("'Mars' 0.72, 'is' 0.04")."""
    ranked = sorted((p for p in answer.phrases if p.tokens and p.weight >= 0.005),
                    key=lambda p: -p.weight)[:top]
    return ", ".join(f"'{terminal_safe(p.text)}' {p.weight:.2f}" for p in ranked)


# --- the details ------------------------------------------------------------------------------


def detail_lines(result: Any) -> list[str]:
    """Everything the first screen leaves out: tokens, samples, both scorings, the other
    methods, the timings."""
    lines = _wrapped(GLOSSARY, indent="", first="")
    lines += [""] + token_lines(result.greedy)
    lines += [""] + sample_lines(result)
    lines += [""] + measure_lines(result)
    others = method_lines(result)
    if others:
        lines += [""] + others
    lines += ["", "Time (s): " + ", ".join(f"{k} {v:.2f}" for k, v in result.timings_s.items())]
    if len(result.warnings) > FIRST_WARNINGS:
        lines += [""] + warning_lines(result.warnings)
    return lines


def token_lines(g: Any) -> list[str]:
    """Every phrase once, with its tokens under it (probability, LN and MARS weights), then
    the phrases no token holds."""
    safe = terminal_safe
    lines = ["Tokens by phrase (p = probability; weights in the LN and the MARS score):",
             f"    {'token':<18} {'p':>6}  {'LN w':>6}  {'MARS w':>6}"]
    previous = None
    for tok in g.weighted_tokens():
        k = tok.phrase_index
        if k != previous:  # a new group of tokens: its phrase once
            if k >= 0:
                ph = g.phrases[k]
                lines.append(f"  phrase {k + 1} '{safe(ph.text)}': importance {ph.score:.3f}, "
                             f"phrase weight {ph.weight:.3f}")
            else:
                lines.append("  (not part of any phrase)")
            previous = k
        lines.append(f"    {_token_cell(tok.text):<18} {tok.probability:6.3f}  "
                     f"{tok.ln_weight:6.3f}  {tok.mars_weight:6.3f}  {_bar(tok.mars_weight, 10)}")
    for k, ph in enumerate(g.phrases):
        if not ph.tokens:
            lines.append(f"  phrase {k + 1} '{safe(ph.text)}': importance {ph.score:.3f}, no "
                         "token (its weight went to the other phrases)")
    return lines


def sample_lines(result: Any) -> list[str]:
    """The sampled answers with their meaning (cluster) and both scores."""
    lines = ["Samples (meaning, LN score, MARS score; scores are mean log-probabilities, "
             "0 = certain):"]
    for cid, a in zip(result.cluster_ids, result.samples):
        lines.append(f"  [{cid + 1}] {a.scores.length_normalized:8.3f} {a.scores.mars:8.3f}  "
                     f"{terminal_safe(a.text) or '(empty)'}")
    return lines


def measure_lines(result: Any) -> list[str]:
    """The three measures under both scorings (and a line on a semantic entropy below 0)."""
    u = result.uncertainty
    lines = ["Uncertainty (higher = less trustworthy)   length-normalized      MARS"]
    for name, pair in (("Confidence", u.confidence), ("Entropy", u.entropy),
                       ("Semantic entropy", u.semantic_entropy)):
        lines.append(f"  {name:<39} {pair.length_normalized:17.4f} {pair.mars:9.4f}")
    if min(u.semantic_entropy.length_normalized, u.semantic_entropy.mars) < 0:
        lines.append(SE_NEGATIVE)
    return lines


def method_lines(result: Any) -> list[str]:
    """The other methods' values (each once: the three measures are in :func:`measure_lines`)."""
    shown = ("confidence", "entropy", "semantic_entropy")
    others = {k: v for k, v in (result.methods or {}).items() if k not in shown}
    if not others:
        return []
    from .methods import METHODS

    lines = ["Other methods (higher = less trustworthy; see docs/methods.md)"]
    for method_id, values in others.items():
        name = METHODS[method_id].label if method_id in METHODS else method_id
        if "value" in values:
            lines.append(f"  {name:<39} {values['value']:9.4f}")
        else:
            lines.append(f"  {name:<39} {values['length_normalized']:9.4f} (LN) "
                         f"{values['mars']:9.4f} (MARS)")
    return lines
