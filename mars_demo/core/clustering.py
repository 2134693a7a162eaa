"""Semantic clustering of sampled answers from NLI verdicts (for semantic entropy, eq. (8)).

The NLI model itself lives elsewhere; this module only turns its verdicts into cluster ids, so
any source of labels (a real model, a fake in tests) can drive it. Cluster ids feed
:func:`mars_demo.core.uncertainty.semantic_entropy`, where more clusters among probable answers
means higher uncertainty (less trustworthy).
"""

from __future__ import annotations

import re
import unicodedata

from . import _validation as check

# "strict": entailment both ways (the papers); "lenient": no contradiction (the original code)
RULES = ("strict", "lenient")
NLI_LABELS = ("entailment", "neutral", "contradiction")


def passes_rule(forward_label: str, backward_label: str, rule: str) -> bool:
    """Whether two answers share a meaning, given the NLI verdicts in both directions.

    Decides which answers form one cluster c of the semantic entropy, paper eq. (7)-(8)
    (same meaning -> fewer clusters -> lower uncertainty; higher = less trustworthy).

    - ``"strict"`` (the definition of Kuhn et al. and the MARS paper): both verdicts are
      ``"entailment"``;
    - ``"lenient"`` (the original MARS / semantic-entropy code): neither verdict is
      ``"contradiction"``.

    Labels are matched case-insensitively (NLI models' ``id2label`` often uses upper case).

    Args:
        forward_label: verdict with answer a as premise and answer b as hypothesis.
        backward_label: verdict with b as premise and a as hypothesis.
        rule: ``"strict"`` or ``"lenient"``.

    Example: entailment one way and neutral the other passes only the lenient rule.

    >>> [passes_rule("entailment", "neutral", rule) for rule in RULES]
    [False, True]
    """
    rule = check.one_of(rule, RULES, "rule")
    return _same_meaning(_nli_label(forward_label), _nli_label(backward_label), rule)


def semantic_clusters(labels, rule: str = "strict") -> list[int]:
    """Cluster id per answer, from an n x n matrix of NLI verdicts (for SE, eq. (8)).

    ``labels[i][j]`` is the verdict with answer i as premise and answer j as hypothesis (one of
    :data:`NLI_LABELS`, any case; the diagonal is ignored). Answers are taken in order; each is
    compared with the FIRST member of every existing cluster, in cluster order, and joins the
    first cluster that passes ``rule`` (:func:`passes_rule`), else it starts a new cluster. Ids
    are 0, 1, 2, ... in order of first appearance. Unitless.

    Args:
        labels: n x n array-like of label strings.
        rule: ``"strict"`` or ``"lenient"``.

    Example: answers 0 and 1 entail each other; answer 2 contradicts both.

    >>> E, C = "entailment", "contradiction"
    >>> semantic_clusters([[E, E, C], [E, E, C], [C, C, E]])
    [0, 0, 1]
    """
    rule = check.one_of(rule, RULES, "rule")
    rows = [list(row) for row in labels]
    n = len(rows)
    for i, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(
                f"labels must be square (n x n); row {i} has {len(row)} entries, n = {n}"
            )
        for j, label in enumerate(row):
            if i != j:
                row[j] = _nli_label(label, f"labels[{i}][{j}]")
    first_members: list[int] = []  # first answer of each cluster, in cluster order
    cluster_of: list[int] = []
    for i in range(n):
        for cluster, first in enumerate(first_members):
            if _same_meaning(rows[first][i], rows[i][first], rule):
                cluster_of.append(cluster)
                break
        else:
            cluster_of.append(len(first_members))
            first_members.append(i)
    return cluster_of


def normalize_answer(text: str) -> str:
    """Canonical form of an answer, to spot identical answers without an NLI call.

    Casefolds, collapses every whitespace run to one space, strips both ends, then removes
    trailing punctuation (Unicode categories ``P*``) and whitespace. Leading and inner
    punctuation is kept. Two answers with equal normal forms can share a cluster without
    asking the model; this feeds semantic entropy (eq. (8)), where fewer distinct meanings
    mean lower uncertainty.

    Example:

    >>> normalize_answer("  The Eiffel\\n  Tower!! ")
    'the eiffel tower'
    >>> normalize_answer('"O" represents Oxygen.')
    '"o" represents oxygen'
    """
    text = re.sub(r"\s+", " ", text.casefold()).strip()
    end = len(text)
    while end and (text[end - 1].isspace() or unicodedata.category(text[end - 1]).startswith("P")):
        end -= 1
    return text[:end]


def _same_meaning(forward_label: str, backward_label: str, rule: str) -> bool:
    """:func:`passes_rule` on labels and rule already checked."""
    if rule == "strict":
        return forward_label == backward_label == "entailment"
    return "contradiction" not in (forward_label, backward_label)


def _nli_label(label, name: str = "label") -> str:
    """Return ``label`` lower-cased if it is one of :data:`NLI_LABELS`."""
    normalized = label.lower() if isinstance(label, str) else label
    if normalized not in NLI_LABELS:
        raise ValueError(f"unknown NLI {name} {label!r}; expected one of {NLI_LABELS}")
    return normalized
