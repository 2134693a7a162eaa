"""Graph measures (Lin et al.) and kernel language entropy against hand-computed values.

Expected numbers come from closed forms worked out by hand (two answers) or from a separate
numpy/scipy computation of the paper's formula, never from the function under test.
"""

import math
import re

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st
from numeric_checks import finite_or_value_error

from mars_demo.core.graph import (
    degree,
    eccentricity,
    eigv,
    entailment_sets,
    num_sets,
    similarity_matrix,
)
from mars_demo.core.kernel import kernel_language_entropy, semantic_graph

E, N, C = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
METHODS = (eigv, degree, eccentricity)


def pair(forward, backward, self_forward=E, self_backward=E):
    """Two answers: nli[0, 1] = forward, nli[1, 0] = backward."""
    return [[self_forward, forward], [backward, self_backward]]


def alike(m):
    return [[E] * m for _ in range(m)]


def apart(m):
    return [[E if i == j else C for j in range(m)] for i in range(m)]


# --- two answers: closed forms ---------------------------------------------------------------
# W = [[1, w], [w, 1]]: D = (1 + w) I, L = [[w, -w], [-w, w]] / (1 + w), eigenvalues 0 and
# 2w / (1 + w). EigV = 1 + max(0, 1 - 2w/(1+w)) = 1 + (1 - w)/(1 + w). Deg = 1 - (2 + 2w)/4.
# Ecc: both eigenvectors kept when 2w/(1+w) < 0.9 (w < 9/11): V orthogonal, ||V - mean||^2 =
# 2 - 1 = 1; otherwise only (1, 1)/sqrt 2, which centring zeroes.


@pytest.mark.parametrize("w", [0.0, 0.3, 0.5, 0.8, 0.85, 1.0])
def test_two_answers_entailment_closed_forms(w):
    nli = pair([w, 1 - w, 0.0], [w, 0.0, 1 - w])
    assert eigv(nli) == pytest.approx(1 + (1 - w) / (1 + w), abs=1e-12)
    assert degree(nli) == pytest.approx(1 - (2 + 2 * w) / 4, abs=1e-12)
    assert eccentricity(nli) == pytest.approx(1.0 if w < 9 / 11 else 0.0, abs=1e-12)


def test_two_answers_contradiction_affinity():
    # a_01 = 1 - 0.6, a_10 = 1 - 0.2: w = (0.4 + 0.8) / 2 = 0.6
    nli = pair([0.1, 0.3, 0.6], [0.5, 0.3, 0.2])
    w = 0.6
    assert similarity_matrix(nli, "contra")[0, 1] == pytest.approx(w)
    assert eigv(nli, "contra") == pytest.approx(1 + (1 - w) / (1 + w))
    assert degree(nli, "contra") == pytest.approx(1 - (2 + 2 * w) / 4)
    # the entailment view of the same verdicts: w = (0.1 + 0.5) / 2 = 0.3
    assert eigv(nli, "entail") == pytest.approx(1 + 0.7 / 1.3)


def test_unequal_degrees_keep_the_first_eigenvector_off_centre():
    # W = [[1, 0.9], [0.9, 0.5]] (self-entailment 0.5 for answer 1): degrees 1.9 and 1.4.
    # lambda_2 = 0.9/1.9 + 0.9/1.4 >= 0.9, so only u0 = sqrt(d) / |sqrt(d)| is kept, and
    # Ecc = |sqrt(1.9) - sqrt(1.4)| / sqrt(2 (1.9 + 1.4)).
    nli = pair([0.9, 0.1, 0.0], [0.9, 0.1, 0.0], E, [0.5, 0.5, 0.0])
    expected = abs(math.sqrt(1.9) - math.sqrt(1.4)) / math.sqrt(2 * 3.3)
    assert eccentricity(nli) == pytest.approx(expected, abs=1e-12)
    lam2 = 0.9 / 1.9 + 0.9 / 1.4
    assert eigv(nli) == pytest.approx(1 + max(0.0, 1 - lam2), abs=1e-12)


def test_eccentricity_threshold_decides_which_eigenvectors_count():
    nli = pair([0.85, 0.15, 0.0], [0.85, 0.15, 0.0])  # lambda_2 = 1.7 / 1.85 = 0.919
    assert eccentricity(nli) == pytest.approx(0.0, abs=1e-12)
    assert eccentricity(nli, threshold=0.95) == pytest.approx(1.0)


def test_temperature_sharpens_each_triple_before_use():
    # T = 0.5 squares the probabilities: (0.6, 0.3, 0.1) -> (0.36, 0.09, 0.01) / 0.46
    nli = pair([0.6, 0.3, 0.1], [0.6, 0.3, 0.1])
    w = 0.36 / 0.46
    assert similarity_matrix(nli, temperature=0.5)[0, 1] == pytest.approx(w)
    assert degree(nli, temperature=0.5) == pytest.approx(1 - (2 + 2 * w) / 4)
    # T = 3: cube roots, renormalized
    roots = np.array([0.6, 0.3, 0.1]) ** (1 / 3)
    w3 = roots[0] / roots.sum()
    assert eigv(nli, temperature=3) == pytest.approx(1 + (1 - w3) / (1 + w3))
    # self-similarity (1, 0, 0) stays 1 at any temperature
    assert similarity_matrix(nli, temperature=3)[0, 0] == 1.0


# --- three or more answers: the formula computed separately -----------------------------------

RNG = np.random.default_rng(7)
GENERIC = RNG.dirichlet([0.7, 0.5, 0.7], size=(4, 4))


def reference_laplacian(nli, plane, complement):
    a = nli[:, :, plane]
    a = 1 - a if complement else a
    w = (a + a.T) / 2
    d = np.diag(w.sum(axis=1))
    inv_sqrt = np.linalg.inv(np.sqrt(d))
    return w, inv_sqrt @ (d - w) @ inv_sqrt


@pytest.mark.parametrize(
    ("affinity", "plane", "complement"), [("entail", 0, False), ("contra", 2, True)]
)
def test_generic_four_answers_against_the_formulas(affinity, plane, complement):
    w, laplacian = reference_laplacian(GENERIC, plane, complement)
    values, vectors = scipy.linalg.eigh(laplacian)
    assert eigv(GENERIC, affinity) == pytest.approx(sum(max(0.0, 1 - v) for v in values), abs=1e-12)
    m = len(w)
    assert degree(GENERIC, affinity) == pytest.approx(
        np.trace(m * np.eye(m) - np.diag(w.sum(1))) / m**2
    )
    kept = vectors[:, values < 0.9]
    # ||(I - 11^T/m) V||_F^2 = k - (1/m) sum_k (1^T u_k)^2
    expected = math.sqrt(kept.shape[1] - np.sum(kept.sum(axis=0) ** 2) / m)
    assert eccentricity(GENERIC, affinity) == pytest.approx(expected, abs=1e-12)


def test_one_answer():
    for method in METHODS:
        assert method([[E]]) == pytest.approx({eigv: 1.0, degree: 0.0, eccentricity: 0.0}[method])
    assert num_sets([5]) == 1
    assert entailment_sets([[E]]) == [0]
    assert kernel_language_entropy([[E]]) == 0.0


@pytest.mark.parametrize("m", [2, 3, 6])
def test_identical_and_all_different_answers(m):
    for affinity in ("entail", "contra"):
        assert eigv(alike(m), affinity) == pytest.approx(1.0)
        assert degree(alike(m), affinity) == pytest.approx(0.0, abs=1e-15)
        assert eccentricity(alike(m), affinity) == pytest.approx(0.0, abs=1e-12)
        assert eigv(apart(m), affinity) == pytest.approx(m)
        assert degree(apart(m), affinity) == pytest.approx(1 - 1 / m)
        assert eccentricity(apart(m), affinity) == pytest.approx(math.sqrt(m - 1))
    assert entailment_sets(alike(m)) == [0] * m
    assert entailment_sets(apart(m)) == list(range(m))
    assert kernel_language_entropy(apart(m)) == pytest.approx(math.log(m))


def test_neutral_answers_count_apart_for_entailment_and_alike_for_contradiction():
    neutral = [[E if i == j else N for j in range(3)] for i in range(3)]
    assert eigv(neutral, "entail") == pytest.approx(3.0)
    assert eigv(neutral, "contra") == pytest.approx(1.0)


def test_ties_between_entailment_and_contradiction_do_not_link_answers():
    tie = [0.4, 0.2, 0.4]
    nli = [[E, E, tie], [E, E, tie], [tie, tie, E]]
    assert entailment_sets(nli) == [0, 0, 1]
    assert num_sets(entailment_sets(nli)) == 2


def test_entailment_sets_close_links_transitively():
    chain = [[E, E, C], [E, E, [0.6, 0.3, 0.1]], [C, [0.5, 0.4, 0.1], E]]
    assert entailment_sets(chain) == [0, 0, 0]
    one_way = [[E, E, C], [E, E, [0.6, 0.3, 0.1]], [C, [0.1, 0.4, 0.5], E]]
    assert entailment_sets(one_way) == [0, 0, 1]


def test_num_sets_counts_distinct_ids():
    assert num_sets([0, 1, 1, 2]) == 3
    assert num_sets([7, 7, 7]) == 1
    assert num_sets([3, 1, 2, 0]) == 4


# --- kernel language entropy ------------------------------------------------------------------
# Two answers with graph weight w: L = [[w, -w], [-w, w]], K = expm(-tL) = ((1+e) I + (1-e)
# (J - I)) / 2 with e = exp(-2wt); normalized K~ = [[1, r], [r, 1]] / 2 with r = (1-e)/(1+e),
# eigenvalues (1 +- r)/2.


def two_answer_kle(w, t):
    e = math.exp(-2 * w * t)
    r = (1 - e) / (1 + e)
    return -sum(x * math.log(x) for x in ((1 + r) / 2, (1 - r) / 2) if x > 0)


@pytest.mark.parametrize(
    ("forward", "backward", "w"),
    [
        (E, E, 2.0),
        (E, N, 1.5),
        (N, N, 1.0),
        ([0.5, 0.3, 0.2], [0.2, 0.2, 0.6], 0.65 + 0.3),
        (C, C, 0.0),
    ],
)
@pytest.mark.parametrize("t", [0.3, 1.0, 5.0])
def test_kle_of_two_answers(forward, backward, w, t):
    nli = pair(forward, backward)
    assert semantic_graph(nli)[0, 1] == pytest.approx(w)
    assert kernel_language_entropy(nli, t=t) == pytest.approx(two_answer_kle(w, t), abs=1e-12)


def test_kle_of_four_answers_against_expm():
    w = semantic_graph(GENERIC)
    one_way = GENERIC[:, :, 0] + 0.5 * GENERIC[:, :, 1]
    np.testing.assert_allclose(w, one_way + one_way.T)
    kernel = scipy.linalg.expm(-0.3 * (np.diag(w.sum(axis=0)) - w))
    d = np.sqrt(np.diag(kernel))
    unit = kernel / np.outer(d, d) / 4
    lam = np.linalg.eigvals(unit).real
    expected = -np.sum(lam * np.log(lam))
    assert kernel_language_entropy(GENERIC) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("t", [1e-300, 1e-10, 1e3, 1e300])
def test_kle_at_extreme_times(t):
    # t -> 0: no diffusion, K~ = I/m, log m; t -> inf: K~ projects on the constant vector of
    # a connected graph, 0
    value = kernel_language_entropy(GENERIC, t=t)
    assert value == pytest.approx(math.log(4) if t < 1 else 0.0, abs=1e-9)


def test_kle_label_weights_and_one_hot_verdicts():
    # one-hot verdicts (the reference code's "manual" graph): entailment + neutral = 1.5
    assert kernel_language_entropy(pair(E, N), t=1.0) == pytest.approx(two_answer_kle(1.5, 1.0))
    # neutral weighted 0 instead: only the entailment counts
    assert kernel_language_entropy(pair(E, N), t=1.0, label_weights=(1, 0, 0)) == pytest.approx(
        two_answer_kle(1.0, 1.0)
    )


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: eigv([[[1, 0]]]), "shape (m, m, 3)"),
        (lambda: eigv([]), "shape (m, m, 3)"),
        (lambda: eigv(np.zeros((0, 0, 3))), "nli is empty"),
        (lambda: eigv([[E, E], [E]]), "(m, m, 3)"),
        (lambda: degree([[[0.5, 0.6, -0.1]]]), "nli[0, 0, 2] = -0.1"),
        (lambda: degree([[[0.5, 0.6, 0.1]]]), "sums to 1.2"),
        (lambda: degree([[[math.nan, 0, 1]]]), "nli[0, 0, 0] = nan"),
        (lambda: eigv(pair(E, E), "both"), "unknown affinity 'both'"),
        (lambda: eigv(pair(E, E), temperature=0), "temperature must be a finite number > 0"),
        (lambda: eccentricity(pair(E, E), threshold=-1), "threshold must be"),
        (lambda: eigv([[C, C], [C, E]]), "answer 0 has similarity 0 to every answer"),
        (lambda: num_sets([]), "cluster_ids is empty"),
        (lambda: kernel_language_entropy(pair(E, E), t=-0.3), "t must be a finite number > 0"),
        (lambda: kernel_language_entropy(pair(E, E), label_weights=(1, 0.5)), "3 weights"),
        (lambda: kernel_language_entropy(pair(E, E), label_weights=(1, -0.5, 0)), "negative"),
    ],
)
def test_bad_input_raises_value_error_naming_the_value(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# --- properties --------------------------------------------------------------------------------


@st.composite
def nli_arrays(draw, max_m=6):
    m = draw(st.integers(1, max_m))
    raw = draw(
        st.lists(
            st.tuples(*[st.floats(0.0, 1.0, allow_nan=False)] * 3).filter(lambda x: sum(x) > 1e-3),
            min_size=m * m,
            max_size=m * m,
        )
    )
    array = np.array(raw, dtype=np.float64).reshape(m, m, 3)
    array /= array.sum(axis=2, keepdims=True)
    array[np.arange(m), np.arange(m)] = E  # a text entails itself, as the engine will give it
    return array


@settings(max_examples=150, deadline=None)
@given(nli_arrays(), st.randoms(use_true_random=False))
def test_permuting_the_answers_changes_no_value(nli, random):
    m = nli.shape[0]
    order = list(range(m))
    random.shuffle(order)
    permuted = nli[order][:, order]
    for affinity in ("entail", "contra"):
        for method in METHODS:
            assert method(permuted, affinity) == pytest.approx(method(nli, affinity), abs=1e-9)
    assert kernel_language_entropy(permuted) == pytest.approx(
        kernel_language_entropy(nli), abs=1e-9
    )
    assert num_sets(entailment_sets(permuted)) == num_sets(entailment_sets(nli))


@settings(max_examples=150, deadline=None)
@given(
    nli_arrays(max_m=8),
    st.sampled_from(["entail", "contra"]),
    st.floats(0.2, 5.0),
    st.floats(1e-300, 1e300),
)
def test_bounds(nli, affinity, temperature, t):
    m = nli.shape[0]
    finite_or_value_error(lambda: kernel_language_entropy(nli, t=t))
    assert 0 <= kernel_language_entropy(nli, t=t) <= math.log(m) + 1e-9
    assert 1 - 1e-9 <= eigv(nli, affinity, temperature) <= m + 1e-9
    assert 0 <= degree(nli, affinity, temperature) <= 1
    assert 0 <= eccentricity(nli, affinity, temperature=temperature) <= math.sqrt(m - 1) + 1e-9
    assert 0 <= kernel_language_entropy(nli) <= math.log(m) + 1e-9
    assert 1 <= num_sets(entailment_sets(nli)) <= m


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=27),
    st.sampled_from([eigv, degree, eccentricity, kernel_language_entropy]),
)
def test_any_numbers_give_finite_results_or_value_error(values, method):
    size = len(values)
    m = round((size / 3) ** 0.5)
    shaped = np.array(values).reshape(m, m, 3) if m * m * 3 == size else values
    finite_or_value_error(lambda: method(shaped))


def test_a_huge_heat_time_with_self_loops_and_a_weak_link_stays_in_bounds():
    """Found by test_bounds: two answers, each entailing itself (self-loops of 2 in W) and one
    weakly linked to the other, at t = 3.8e18. L's zero eigenvalue came out at 1.4e-16, above a
    tolerance scaled by L's largest eigenvalue (0.14), so exp(-t mu) underflowed and the
    kernel's diagonal was 0 (0/0). Rounded at the scale of the degrees, it is 0: at t -> inf
    the kernel is the projection onto the one connected part, whose entropy is 0."""
    nli = np.array([[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
                    [[0.0, 1 / 7, 6 / 7], [1.0, 0.0, 0.0]]])
    with np.errstate(all="raise"):
        value = kernel_language_entropy(nli, t=3.8351790718730066e18)
    assert value == pytest.approx(0.0, abs=1e-12)
