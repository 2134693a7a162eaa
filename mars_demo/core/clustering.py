"""Semantic clustering of sampled answers from NLI verdicts (for semantic entropy, eq. (8)).

The NLI model itself lives elsewhere; this module only turns its verdicts into cluster ids, so
any source of labels (a real model, a fake in tests) can drive it. Cluster ids feed
:func:`mars_demo.core.uncertainty.semantic_entropy`, where more clusters among probable answers
means higher uncertainty (less trustworthy). :func:`one_judgement` makes the matrix the
clustering and the graph methods both read: each pair's label is the arg-max of its saved
probabilities, and pairs of identical texts are the model's or the rule's, never half of each.
"""

from __future__ import annotations

from . import _validation as check

# "strict": entailment both ways (the papers); "lenient": no contradiction (the published
# LLM_Uncertainty code and the authors' later library)
RULES = ("strict", "lenient")
# "first-member": compare with each cluster's first member (the authors' later library, default);
# "all-pairs": every pair of distinct answers (the published LLM_Uncertainty code)
ALGORITHMS = ("first-member", "all-pairs")
NLI_LABELS = ("entailment", "neutral", "contradiction")
# Who decides a pair of identical texts (a sample against itself, a repeated sample):
# "model": the NLI model, as every other pair (lm-polygraph's SemanticMatrixCalculator,
# TruthTorchLM's clustering, Farquhar et al.'s semantic-entropy code); "rule": exactly equal
# texts are entailment with probabilities (1, 0, 0), without the model (the published MARS code,
# which compares only distinct texts)
IDENTICAL_TEXTS = ("model", "rule")
RULE_PROBABILITIES = (1.0, 0.0, 0.0)  # (entailment, neutral, contradiction) of a pair by rule


def passes_rule(forward_label: str, backward_label: str, rule: str) -> bool:
    """Whether two answers share a meaning, given the NLI verdicts in both directions.

    Decides which answers form one cluster c of the semantic entropy, paper eq. (7)-(8)
    (same meaning -> fewer clusters -> lower uncertainty; higher = less trustworthy).

    - ``"strict"`` (the definition of Kuhn et al. and the MARS paper): both verdicts are
      ``"entailment"``;
    - ``"lenient"`` (the published MARS code, LLM_Uncertainty, and the authors' later library):
      neither verdict is ``"contradiction"``.

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


def semantic_clusters(
    labels, rule: str = "strict", algorithm: str = "first-member", answers=None
) -> list[int]:
    """Cluster id per answer, from an n x n matrix of NLI verdicts (for SE, eq. (8)).

    ``labels[i][j]`` is the verdict with answer i as premise and answer j as hypothesis (one of
    :data:`NLI_LABELS`, any case; the diagonal is ignored). Two answers "pass" when
    :func:`passes_rule` holds for ``labels[i][j]`` and ``labels[j][i]`` under ``rule``.

    When ``answers`` is given (one hashable per answer, e.g. the answer texts), answers with
    equal entries are ONE distinct answer: they share a cluster, only the first occurrence's
    verdicts are read, and the algorithm runs over the distinct answers in order of first
    appearance. Without it every answer is distinct.

    - ``"first-member"`` (default; the authors' later library, TruthTorchLM): distinct answers
      are taken in order; each is compared with the FIRST member of every existing cluster, in
      cluster order, and joins the first cluster that passes, else it starts a new cluster.
    - ``"all-pairs"`` (the published LLM_Uncertainty code behind the paper's Table 1): each
      distinct answer starts with its own id; then for every pair i < j, in order (i outer,
      j inner), a passing pair sets ``id[j] = id[i]``. Since ``id[i]`` is final once the outer
      loop reaches i, j ends up in the cluster of the LAST earlier answer it passes with.
      The published code takes the distinct answers from ``list(set(texts))``, whose order
      follows Python's string hashing and changes from run to run (its ``PYTHONHASHSEED`` is
      set inside the running process, too late to take effect), so its clusters can change
      between runs; here the order is that of first appearance, which is reproducible.

    The two algorithms differ when A~B and B~C pass but A and C do not: first-member gives
    {A, B}, {C}; all-pairs gives {A, B, C}.

    Ids are 0, 1, 2, ... in order of first appearance among all n answers. Unitless.

    Args:
        labels: n x n array-like of label strings.
        rule: ``"strict"`` or ``"lenient"``.
        algorithm: ``"first-member"`` or ``"all-pairs"``.
        answers: optional sequence of n hashables; equal entries are the same answer.

    Example: answers 0 and 1 entail each other; answer 2 contradicts both.

    >>> E, N, C = "entailment", "neutral", "contradiction"
    >>> semantic_clusters([[E, E, C], [E, E, C], [C, C, E]])
    [0, 0, 1]

    A~B and B~C pass the lenient rule, A contradicts C:

    >>> chain = [[E, N, C], [N, E, N], [C, N, E]]
    >>> semantic_clusters(chain, "lenient"), semantic_clusters(chain, "lenient", "all-pairs")
    ([0, 0, 1], [0, 0, 0])
    """
    rule = check.one_of(rule, RULES, "rule")
    algorithm = check.one_of(algorithm, ALGORITHMS, "algorithm")
    rows = [list(row) for row in labels]
    n = len(rows)
    for i, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(
                f"labels must be square (n x n); row {i} has {len(row)} entries, n = {n}"
            )
    distinct, index_of = _distinct_answers(answers, n)
    for i in distinct:
        for j in distinct:
            if i != j and (rows[i][j] is not None or algorithm == "all-pairs"):
                rows[i][j] = _nli_label(rows[i][j], f"labels[{i}][{j}]")

    def passes(a: int, b: int) -> bool:
        for x, y in ((a, b), (b, a)):
            if rows[x][y] is None:  # a pair the NLI was not asked (see pending_pairs)
                raise ValueError(f"labels[{x}][{y}] is None: the clustering reads that pair, "
                                 "so it must be judged")
        return _same_meaning(rows[a][b], rows[b][a], rule)

    # group[d]: a representative label for distinct answer d (any id; renumbered below)
    group: list[int] = []
    if algorithm == "first-member":
        first_members: list[int] = []  # first distinct answer of each cluster, in cluster order
        for d, i in enumerate(distinct):
            for cluster, first in enumerate(first_members):
                if passes(distinct[first], i):
                    group.append(cluster)
                    break
            else:
                group.append(len(first_members))
                first_members.append(d)
    else:
        for d, j in enumerate(distinct):
            last = next((e for e in reversed(range(d)) if passes(distinct[e], j)), None)
            group.append(d if last is None else group[last])
    renumber: dict[int, int] = {}
    return [renumber.setdefault(group[index_of[i]], len(renumber)) for i in range(n)]


def pending_pairs(labels, rule: str = "strict", answers=None) -> list[tuple[int, int]]:
    """The (premise, hypothesis) pairs the first-member algorithm of :func:`semantic_clusters`
    must still read, given ``labels`` where None marks a pair not judged yet; empty once the
    clusters are determined. Judging them and asking again takes one round per cluster: round
    1 every answer against the first answer; then the answers that failed it against the first
    of them, and so on. The pairs never read stay None (the diagonal is never read).

    >>> E, C = "entailment", "contradiction"
    >>> labels = [[E, None, None], [None, E, None], [None, None, E]]
    >>> pending_pairs(labels)
    [(0, 1), (1, 0), (0, 2), (2, 0)]
    >>> labels[0][1], labels[1][0], labels[0][2], labels[2][0] = E, E, C, C
    >>> pending_pairs(labels)
    []
    >>> labels[0][2] = E  # 2 passes 0 one way only: strict, it starts the second cluster
    >>> pending_pairs(labels)
    []
    >>> labels[0][2] = labels[2][0] = C; labels[1][0] = C  # 1 and 2 both fail 0
    >>> pending_pairs(labels)
    [(1, 2), (2, 1)]
    """
    rule = check.one_of(rule, RULES, "rule")
    rows = [list(row) for row in labels]
    n = len(rows)
    distinct, _ = _distinct_answers(answers, n)
    first_members: list[int] = []
    need: list[tuple[int, int]] = []
    for i in distinct:
        placed = blocked = False
        for first in first_members:  # in cluster order, as semantic_clusters reads them
            unknown = [(x, y) for x, y in ((first, i), (i, first)) if rows[x][y] is None]
            if unknown:
                need += unknown
                blocked = True
                break
            forward = _nli_label(rows[first][i], f"labels[{first}][{i}]")
            backward = _nli_label(rows[i][first], f"labels[{i}][{first}]")
            if _same_meaning(forward, backward, rule):
                placed = True
                break
        # an answer that failed every first member starts a cluster, unless an earlier answer
        # is still unplaced (it may start one first, which this answer is then tested against)
        if not placed and not blocked and not need:
            first_members.append(i)
    return need


def label_of(probabilities) -> str:
    """The NLI label of one (entailment, neutral, contradiction) probability triple: its
    arg-max, the first of :data:`NLI_LABELS` on an exact tie.

    >>> label_of([0.2, 0.5, 0.3]), label_of([0.4, 0.2, 0.4])
    ('neutral', 'entailment')
    """
    values = [float(x) for x in probabilities]
    if len(values) != 3:
        raise ValueError(f"an NLI probability triple has 3 entries, got {probabilities!r}")
    return NLI_LABELS[values.index(max(values))]


def one_judgement(texts, probabilities, identical: str = "model"
                  ) -> tuple[list[list], list[list], list[list[int]]]:
    """The NLI matrix of ``texts`` with one judgement per ordered pair: ``(labels,
    probabilities, by_rule)``.

    ``probabilities[i][j]`` holds what the NLI model said of pair (i, j), premise i, as an
    (entailment, neutral, contradiction) triple, or None where it was not asked. With
    ``identical`` "rule" (see :data:`IDENTICAL_TEXTS`) every pair of exactly equal texts, the
    diagonal included, is decided without the model: "entailment" with
    :data:`RULE_PROBABILITIES`, and listed as ``[i, j]`` in ``by_rule``; with "model" those pairs
    are the model's like any other. Every other label is :func:`label_of` its probabilities, so
    the label is always the arg-max of the probabilities saved with it; a pair neither judged
    nor ruled stays None in both.

    >>> p = [[[0.1, 0.8, 0.1], [0.1, 0.8, 0.1]], [[0.1, 0.8, 0.1], None]]
    >>> one_judgement(["Paris.", "Paris."], p, "model")[0]
    [['neutral', 'neutral'], ['neutral', None]]
    >>> labels, probabilities, by_rule = one_judgement(["Paris.", "Paris."], p, "rule")
    >>> labels[1][1], probabilities[1][1], by_rule
    ('entailment', [1.0, 0.0, 0.0], [[0, 0], [0, 1], [1, 0], [1, 1]])
    """
    identical = check.one_of(identical, IDENTICAL_TEXTS, "identical")
    texts = list(texts)
    n = len(texts)
    if len(probabilities) != n or any(len(row) != n for row in probabilities):
        raise ValueError(f"probabilities must be {n} x {n}, one entry per ordered pair of texts")
    labels: list[list] = [[None] * n for _ in range(n)]
    shares: list[list] = [[None] * n for _ in range(n)]
    by_rule: list[list[int]] = []
    for i in range(n):
        for j in range(n):
            if identical == "rule" and texts[i] == texts[j]:
                labels[i][j], shares[i][j] = "entailment", list(RULE_PROBABILITIES)
                by_rule.append([i, j])
            elif probabilities[i][j] is not None:
                shares[i][j] = [float(x) for x in probabilities[i][j]]
                labels[i][j] = label_of(shares[i][j])
    return labels, shares, by_rule


def _distinct_answers(answers, n: int) -> tuple[list[int], list[int]]:
    """(first index of each distinct answer, distinct-answer number of every answer)."""
    if answers is None:
        return list(range(n)), list(range(n))
    try:
        keys = list(answers)
    except TypeError as error:
        raise ValueError(f"answers must be a sequence of {n} entries, got {answers!r}") from error
    if len(keys) != n:
        raise ValueError(f"answers has {len(keys)} entries but labels is {n} x {n}")
    number: dict = {}
    first: list[int] = []
    index_of: list[int] = []
    for i, key in enumerate(keys):
        try:
            d = number.setdefault(key, len(number))
        except TypeError as error:
            raise ValueError(f"answers[{i}] = {key!r} is not hashable; pass e.g. the texts") from error
        if d == len(first):
            first.append(i)
        index_of.append(d)
    return first, index_of


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
