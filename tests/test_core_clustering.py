"""Semantic clustering from NLI verdicts, and the one judgement of each NLI pair."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mars_demo.core.clustering import (
    NLI_LABELS,
    RULES,
    passes_rule,
    semantic_clusters,
)
from mars_demo.core.uncertainty import semantic_entropy_discrete

E, N, C = NLI_LABELS  # entailment, neutral, contradiction


@pytest.mark.parametrize(
    ("forward", "backward", "strict", "lenient"),
    [
        (E, E, True, True),
        (E, N, False, True),
        (N, E, False, True),
        (N, N, False, True),
        (E, C, False, False),
        (C, E, False, False),
        (C, C, False, False),
    ],
)
def test_passes_rule(forward, backward, strict, lenient):
    assert passes_rule(forward, backward, "strict") is strict
    assert passes_rule(forward, backward, "lenient") is lenient


def test_passes_rule_reads_labels_case_insensitively():
    assert passes_rule("ENTAILMENT", "Entailment", "strict") is True
    assert passes_rule("NEUTRAL", "CONTRADICTION", "lenient") is False


def test_strict_and_lenient_differ():
    # 0 entails 1 but 1 is only neutral towards 0; 2 contradicts both.
    labels = [
        [E, E, C],
        [N, E, C],
        [C, C, E],
    ]
    assert semantic_clusters(labels, "strict") == [0, 1, 2]
    assert semantic_clusters(labels, "lenient") == [0, 0, 1]
    assert semantic_clusters(labels) == [0, 1, 2]  # strict by default


def test_answer_is_compared_with_first_member_only():
    # 1 joins 0's cluster; 2 is equivalent to 1 but only neutral with 0 (the first member).
    labels = [
        [E, E, N],
        [E, E, E],
        [N, E, E],
    ]
    assert semantic_clusters(labels, "strict") == [0, 0, 1]


def test_answer_joins_first_passing_cluster():
    # 0 and 1 contradict; 2 is neutral with both, so leniently it passes both clusters and
    # joins the first; 3 entails 1 both ways and is neutral with 0: lenient puts it in
    # cluster 0 as well, strict in cluster 1.
    labels = [
        [E, C, N, N],
        [C, E, N, E],
        [N, N, E, N],
        [N, E, N, E],
    ]
    assert semantic_clusters(labels, "lenient") == [0, 1, 0, 0]
    assert semantic_clusters(labels, "strict") == [0, 1, 2, 1]


def test_diagonal_is_ignored_and_arrays_accepted():
    labels = np.array([["?", E], [E, "anything"]])
    assert semantic_clusters(labels) == [0, 0]


def test_trivial_sizes():
    assert semantic_clusters([]) == []
    assert semantic_clusters([[E]]) == [0]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: semantic_clusters([[E, E], [E]]), "row 1 has 1 entries, n = 2"),
        (lambda: semantic_clusters([[E, E, E], [E, E, E]]), "row 0 has 3 entries, n = 2"),
        (lambda: semantic_clusters([[E, "maybe"], [E, E]]), "labels[0][1] 'maybe'"),
        (lambda: semantic_clusters([[E, E], [E, E]], rule="fuzzy"), "unknown rule 'fuzzy'"),
        (lambda: passes_rule(E, "yes", "strict"), "'yes'"),
        (lambda: passes_rule(E, E, "loose"), "unknown rule 'loose'"),
    ],
)
def test_bad_input_raises_value_error_naming_the_value(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_rules_constant():
    assert RULES == ("strict", "lenient")


# --- properties --------------------------------------------------------------------------


@st.composite
def label_matrices(draw):
    """n x n NLI verdicts in any of the accepted spellings (the diagonal is ignored)."""
    n = draw(st.integers(0, 7))
    label = st.sampled_from([*NLI_LABELS, "ENTAILMENT", "Neutral", "CONTRADICTION"])
    return [[draw(label) for _ in range(n)] for _ in range(n)]


@settings(max_examples=200, deadline=None)
@given(label_matrices(), st.sampled_from(RULES))
def test_semantic_clusters_follow_the_first_member_rule(labels, rule):
    ids = semantic_clusters(labels, rule)
    assert len(ids) == len(labels)
    first_members: list[int] = []
    for i, cluster in enumerate(ids):
        passing = [
            k
            for k, first in enumerate(first_members)
            if passes_rule(labels[first][i], labels[i][first], rule)
        ]
        if passing:  # joins the first cluster whose first member passes the rule with it
            assert cluster == passing[0]
        else:  # starts the next cluster: ids 0, 1, 2, ... in order of first appearance
            assert cluster == len(first_members)
            first_members.append(i)
    if ids:
        assert 0.0 <= semantic_entropy_discrete(ids) <= math.log(len(first_members)) + 1e-9


# --- all-pairs: the published LLM_Uncertainty algorithm ----------------------------------


def published_all_pairs(texts, verdict, rule="lenient"):
    """The published loop, written out as it reads: ids keyed by text, one id per distinct
    text, every pair i < j of distinct texts, ``ids[t_j] = ids[t_i]`` when the pair passes.
    ``verdict(a, b)`` is the NLI label with text a as premise. The distinct texts are taken in
    order of first appearance (the published code used ``list(set(texts))``)."""
    unique = list(dict.fromkeys(texts))
    ids = {text: index for index, text in enumerate(unique)}
    for i in range(len(unique)):
        for j in range(i + 1, len(unique)):
            forward, backward = verdict(unique[i], unique[j]), verdict(unique[j], unique[i])
            if rule == "lenient":
                same = C not in (forward.lower(), backward.lower())
            else:
                same = forward.lower() == backward.lower() == E
            if same:
                ids[unique[j]] = ids[unique[i]]
    return [ids[text] for text in texts]


def same_partition(a, b) -> bool:
    """Whether two id lists group the answers identically (ids may be named differently)."""
    return len(a) == len(b) and all(
        (a[i] == a[j]) == (b[i] == b[j]) for i in range(len(a)) for j in range(len(a))
    )


def test_all_pairs_and_first_member_differ_on_a_chain():
    # A ~ B and B ~ C (neutral both ways), A contradicts C.
    labels = [
        [E, N, C],
        [N, E, N],
        [C, N, E],
    ]
    assert semantic_clusters(labels, "lenient") == [0, 0, 1]  # C meets only A, the first member
    assert semantic_clusters(labels, "lenient", "all-pairs") == [0, 0, 0]  # C takes B's id
    assert semantic_clusters(labels, "lenient", algorithm="first-member") == [0, 0, 1]


def test_all_pairs_takes_the_last_passing_earlier_answer():
    # 0 ~ 2 and 1 ~ 2 pass, 0 and 1 contradict: 2 ends up with 1 (the later pair wins).
    labels = [
        [E, C, E],
        [C, E, E],
        [E, E, E],
    ]
    assert semantic_clusters(labels, "strict", "all-pairs") == [0, 1, 1]
    assert semantic_clusters(labels, "strict") == [0, 1, 0]


def test_all_pairs_depends_on_the_order_of_the_distinct_answers():
    # Why first appearance is used: the published code's set order changes the partition.
    verdicts = {("A", "B"): N, ("B", "A"): N, ("B", "C"): N, ("C", "B"): N,
                ("A", "C"): C, ("C", "A"): C}
    verdict = verdicts.__getitem__
    assert published_all_pairs(["A", "B", "C"], lambda a, b: verdict((a, b))) == [0, 0, 0]
    in_other_order = published_all_pairs(["A", "C", "B"], lambda a, b: verdict((a, b)))
    assert in_other_order == [0, 1, 1]  # {A}, {C, B}


def test_identical_answers_share_a_cluster_and_are_compared_once():
    texts = ["Paris", "Lyon", "Paris", "Paris."]
    # Pairs between the two "Paris" hold nonsense verdicts: they must not be read.
    labels = [
        [E, C, C, E],
        [C, E, C, C],
        [C, C, E, C],
        [E, C, C, E],
    ]
    for algorithm in ("first-member", "all-pairs"):
        assert semantic_clusters(labels, "strict", algorithm, answers=texts) == [0, 1, 0, 0]
        assert semantic_clusters(labels, "strict", algorithm) == [0, 1, 2, 0]


def test_answers_must_match_labels():
    labels = [[E, E], [E, E]]
    with pytest.raises(ValueError, match="answers has 3 entries"):
        semantic_clusters(labels, answers=["a", "b", "c"])
    with pytest.raises(ValueError, match="not hashable"):
        semantic_clusters(labels, answers=[["a"], ["b"]])
    with pytest.raises(ValueError, match="algorithm"):
        semantic_clusters(labels, algorithm="pairs")


@st.composite
def answer_sets(draw):
    """Answer texts with repeats and NLI verdicts between distinct texts (case varies)."""
    n = draw(st.integers(0, 8))
    texts = [draw(st.sampled_from("ABCDEF")) for _ in range(n)]
    label = st.sampled_from([*NLI_LABELS, "ENTAILMENT", "Neutral", "CONTRADICTION"])
    distinct = sorted(set(texts))
    verdicts = {(a, b): draw(label) for a in distinct for b in distinct if a != b}
    return texts, verdicts


@settings(max_examples=300, deadline=None)
@given(answer_sets(), st.sampled_from(RULES))
def test_all_pairs_equals_the_published_loop(answer_set, rule):
    texts, verdicts = answer_set
    # The matrix the published code never builds: identical texts get arbitrary verdicts.
    labels = [[verdicts.get((a, b), C) for b in texts] for a in texts]
    got = semantic_clusters(labels, rule, "all-pairs", answers=texts)
    expected = published_all_pairs(texts, lambda a, b: verdicts[(a, b)], rule)
    assert same_partition(got, expected)
    # ids 0, 1, 2, ... in order of first appearance
    assert got == [sorted(set(got), key=got.index).index(x) for x in got]
    assert all(got[i] in got[:i] or got[i] == max(got[:i], default=-1) + 1 for i in range(len(got)))


@settings(max_examples=200, deadline=None)
@given(label_matrices(), st.sampled_from(RULES))
def test_all_pairs_equals_the_published_loop_without_texts(labels, rule):
    # Every answer distinct: name answer i by its index.
    n = len(labels)
    got = semantic_clusters(labels, rule, "all-pairs")
    expected = published_all_pairs(list(range(n)), lambda a, b: labels[a][b], rule)
    assert same_partition(got, expected)
