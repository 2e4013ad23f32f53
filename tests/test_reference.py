"""The NumPy reference backend against the brute-force definitions of ``brute.py``.

Every other backend is tested against ``numpy_ref``; this file is what makes
``numpy_ref`` trustworthy: exact rational LOO-AUC from explicit leave-one-out
scores, pairwise surrogates, finite-difference gradients, and the worked
example of docs/contract.rst §6.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import brute
from aces_fast._registry import method_params
from aces_fast.backends import numpy as numpy_ref
from brute import nonconstant_mask
from helpers import EXAMPLE, EXAMPLE_LABELS, random_matrix

REF = numpy_ref.NumpyBackend()
TOL = 1e-9


def ref(method, B, **params):
    """``method`` on the reference backend (the registry's validated parameters)."""
    return REF.rerank(B, method, method_params(method, params))


def assert_matches_exact(got, expected, atol=1e-12):
    """``got`` (float array) equals the exact values (Fractions / None -> nan)."""
    got = np.asarray(got, dtype=np.float64)
    want = brute.to_float_array(expected)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=0, atol=atol)


RANDOM_SHAPES = [(1, 1), (1, 5), (2, 3), (3, 1), (5, 4), (6, 7), (9, 5), (12, 6)]


def structured_matrices():
    """Edge-case matrices: duplicates, constants, degenerate shapes."""
    rng = np.random.default_rng(7)
    dup = random_matrix(rng, 8, 6, dup_rows=5)
    dup[4] = dup[0]
    return {
        "duplicate_rows": dup,
        "all_duplicate": np.tile(np.array([[1, 0, 1, 1, 0]], dtype=np.uint8), (5, 1)),
        "all_zero": np.zeros((4, 3), dtype=np.uint8),
        "all_one": np.ones((4, 3), dtype=np.uint8),
        "constant_columns": np.array([[1, 0, 1, 0], [1, 0, 0, 1], [1, 0, 1, 1]], dtype=np.uint8),
        "one_row": np.array([[1, 0, 1]], dtype=np.uint8),
        "one_column": np.array([[1], [0], [1], [0], [0]], dtype=np.uint8),
        "no_columns": np.zeros((4, 0), dtype=np.uint8),
        "identity": np.eye(5, dtype=np.uint8),
        "spec_example": EXAMPLE,
    }


# ---------------------------------------------------------------------------
# the brute force itself


def test_brute_auc_definition():
    assert brute.auc([3, 1], [1, 0]) == 1
    assert brute.auc([1, 3], [1, 0]) == 0
    assert brute.auc([2, 2], [1, 0]) == Fraction(1, 2)
    assert brute.auc([3, 2, 2, 1], [1, 1, 0, 0]) == Fraction(1 + 1 + Fraction(1, 2) + 1, 4)
    assert brute.auc([1, 2], [1, 1]) is None
    assert brute.auc([1, 2], [0, 0]) is None


def test_brute_reproduces_spec_example():
    assert brute.loo_auc(EXAMPLE) == [
        Fraction(2, 3),
        Fraction(2, 3),
        Fraction(1, 2),
        Fraction(2, 3),
        Fraction(1, 2),
        Fraction(2, 5),
        Fraction(7, 12),
        Fraction(7, 24),
        0,
        0,
    ]
    w, fallback = brute.aces_c_weights(EXAMPLE)
    assert not fallback
    assert w == [
        Fraction(5, 17),
        Fraction(5, 17),
        0,
        Fraction(5, 17),
        0,
        0,
        Fraction(2, 17),
        0,
        0,
        0,
    ]


def test_brute_pass_at_k_enumeration_small_case():
    # one tie group of 3 with 1 correct: the correct one is first in 2 of 6 orders
    assert brute.pass_at_k([1, 1, 1], [0, 1, 0], 1) == Fraction(1, 3)
    assert brute.pass_at_k([1, 1, 1], [0, 1, 0], 2) == Fraction(2, 3)
    assert brute.pass_at_k([2, 1, 1], [0, 1, 0], 2) == Fraction(1, 2)


# ---------------------------------------------------------------------------
# LOO-AUC


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("shape", RANDOM_SHAPES)
def test_loo_auc_uniform_random(seed, shape):
    rng = np.random.default_rng(seed)
    B = random_matrix(rng, *shape, density=rng.uniform(0.2, 0.8), dup_rows=shape[0] // 3)
    assert_matches_exact(numpy_ref.loo_auc(B, None, TOL), brute.loo_auc(B))


@pytest.mark.parametrize(("name", "B"), list(structured_matrices().items()))
def test_loo_auc_structured(name, B):
    got = numpy_ref.loo_auc(B, None, TOL)
    assert got.shape == (B.shape[1],)
    assert_matches_exact(got, brute.loo_auc(B))
    # constant columns, and only they, are nan
    np.testing.assert_array_equal(np.isnan(got), ~nonconstant_mask(B))


@pytest.mark.parametrize(("name", "B"), list(structured_matrices().items()))
def test_loo_auc_weighted_structured(name, B):
    m = B.shape[1]
    wq = [Fraction(1 + (3 * j) % 5, 4) for j in range(m)]
    got = numpy_ref.loo_auc(B, np.array([float(x) for x in wq]), TOL)
    assert_matches_exact(got, brute.loo_auc(B, wq))


def test_spec_example_loo_auc():
    got = numpy_ref.loo_auc(EXAMPLE, None, TOL)
    want = [2 / 3, 2 / 3, 1 / 2, 2 / 3, 1 / 2, 2 / 5, 7 / 12, 7 / 24, 0, 0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)


def test_spec_example_aces_c_and_ranking_auc():
    res = ref("aces-c", EXAMPLE, tie_tol=TOL)
    np.testing.assert_allclose(
        res.weights, np.array([5, 5, 0, 5, 0, 0, 2, 0, 0, 0]) / 17, rtol=0, atol=1e-15
    )
    assert not res.fallback
    # ranking AUC = AUC(scores, labels); ties between float scores must be exact
    assert brute.auc(list(res.scores), list(EXAMPLE_LABELS)) == Fraction(14, 15)
    maj = ref("majority", EXAMPLE)
    assert brute.auc(list(maj.scores), list(EXAMPLE_LABELS)) == Fraction(9, 10)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", [(4, 3), (7, 5), (10, 8), (13, 6)])
def test_loo_auc_rational_weights_random(seed, shape):
    # small denominators make exact ties common, and their float images are inexact
    rng = np.random.default_rng(100 + seed)
    B = random_matrix(rng, *shape, density=0.5, dup_rows=2)
    denom = int(rng.choice([3, 7, 10]))
    wq = [Fraction(int(k), denom) for k in rng.integers(0, 2 * denom, size=shape[1])]
    w = np.array([float(x) for x in wq])
    assert_matches_exact(numpy_ref.loo_auc(B, w, TOL), brute.loo_auc(B, wq))


def test_loo_auc_one_over_m_weights_equal_uniform():
    """w = 1/m (m = 10) ties exactly like integer weights; the paper's float tables did not."""
    w = np.full(10, 0.1)
    exact = brute.loo_auc(EXAMPLE)
    assert_matches_exact(numpy_ref.loo_auc(EXAMPLE, w, TOL), exact)
    # the naive float computation breaks ties (0.53 instead of 0.5): the test is meaningful
    s = EXAMPLE @ w
    naive = [brute.auc(list(s - w[j] * EXAMPLE[:, j]), list(EXAMPLE[:, j])) for j in range(10)]
    assert naive != exact


@pytest.mark.parametrize("seed", range(4))
def test_loo_auc_one_over_m_random(seed):
    rng = np.random.default_rng(200 + seed)
    B = random_matrix(rng, 11, 10, density=0.5)
    assert_matches_exact(numpy_ref.loo_auc(B, np.full(10, 0.1), TOL), brute.loo_auc(B))


def test_loo_auc_point_one_two_three_tie():
    """0.1 + 0.2 != 0.3 in float64, but the leave-one-out scores tie exactly."""
    assert 0.1 + 0.2 != 0.3
    wq = [Fraction(1, 10), Fraction(2, 10), Fraction(3, 10), Fraction(4, 10)]
    w = np.array([0.1, 0.2, 0.3, 0.4])
    B = np.array(
        [
            [1, 1, 0, 1],  # passes test 3; others' sum 0.1 + 0.2
            [0, 0, 1, 0],  # fails test 3; others' sum 0.3
            [1, 1, 0, 0],  # fails test 3; 0.3 again
            [0, 0, 1, 1],
        ],  # passes test 3; 0.3
        dtype=np.uint8,
    )
    exact = brute.loo_auc(B, wq)
    assert exact[3] == Fraction(1, 2)
    assert_matches_exact(numpy_ref.loo_auc(B, w, TOL), exact)


def test_loo_auc_zero_weights_all_tie():
    B = random_matrix(np.random.default_rng(3), 6, 4, density=0.5)
    B[0] = 1 - B[1]  # make every column non-constant
    got = numpy_ref.loo_auc(B, np.zeros(4), TOL)
    assert_matches_exact(got, brute.loo_auc(B, [Fraction(0)] * 4))
    assert np.all(got == 0.5)


def test_loo_auc_weight_scale_invariant():
    rng = np.random.default_rng(11)
    B = random_matrix(rng, 9, 6, density=0.5)
    wq = [Fraction(int(k), 7) for k in rng.integers(1, 10, size=6)]
    exact = brute.loo_auc(B, wq)
    for scale in (1e-6, 0.3, 1.0, 3.0, 1e6):
        w = np.array([float(x) * scale for x in wq])
        assert_matches_exact(numpy_ref.loo_auc(B, w, TOL), exact)


# ---------------------------------------------------------------------------
# surrogate


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gamma", [1.0, 10.0])
def test_surrogate_matches_pairs(seed, gamma):
    rng = np.random.default_rng(300 + seed)
    B = random_matrix(rng, 7, 5, density=0.5, dup_rows=2)
    B[:, 0] = 1  # one constant column
    w = rng.dirichlet(np.ones(5))
    L, J, _ = numpy_ref.surrogate(B, w, gamma)
    L_b, J_b = brute.surrogate(B, w, gamma)
    np.testing.assert_allclose(L, [math.nan if v is None else v for v in L_b], rtol=0, atol=1e-12)
    assert pytest.approx(J_b, abs=1e-12) == J


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gamma", [2.0, 10.0])
def test_surrogate_gradient_finite_differences(seed, gamma):
    rng = np.random.default_rng(400 + seed)
    B = random_matrix(rng, 8, 6, density=0.45, dup_rows=2)
    B[:, 5] = 0  # constant column: still gets a gradient through the other tests' scores
    w = rng.dirichlet(np.ones(6))
    _, _, grad = numpy_ref.surrogate(B, w, gamma)
    h = 1e-6
    fd = np.empty(6)
    for k in range(6):
        e = np.zeros(6)
        e[k] = h
        fd[k] = (
            numpy_ref.surrogate(B, w + e, gamma)[1] - numpy_ref.surrogate(B, w - e, gamma)[1]
        ) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)


def test_surrogate_no_columns_and_constant_only():
    L, J, g = numpy_ref.surrogate(np.zeros((3, 0), dtype=np.uint8), np.zeros(0), 10.0)
    assert L.shape == (0,) and J == 0.0 and g.shape == (0,)
    L, J, g = numpy_ref.surrogate(np.ones((3, 2), dtype=np.uint8), np.array([0.5, 0.5]), 10.0)
    assert np.isnan(L).all() and J == 0.0
    np.testing.assert_array_equal(g, 0.0)


# ---------------------------------------------------------------------------
# row multiplicities (counts) == repeated rows


def _counts_case(seed):
    rng = np.random.default_rng(500 + seed)
    B = random_matrix(rng, 7, 6, density=0.5)
    counts = rng.integers(0, 4, size=7).astype(np.int64)
    counts[0] = max(counts[0], 1)
    return B, counts, np.repeat(B, counts, axis=0), rng


@pytest.mark.parametrize("seed", range(4))
def test_counts_equal_repeated_rows_loo_auc(seed):
    B, counts, R, rng = _counts_case(seed)
    w = rng.dirichlet(np.ones(6))
    for weights in (None, w):
        got = numpy_ref.loo_auc(B, weights, TOL, counts)
        want = numpy_ref.loo_auc(R, weights, TOL)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert_matches_exact(numpy_ref.loo_auc(B, None, TOL, counts), brute.loo_auc(R))


@pytest.mark.parametrize("seed", range(4))
def test_counts_equal_repeated_rows_surrogate(seed):
    B, counts, R, rng = _counts_case(seed)
    w = rng.dirichlet(np.ones(6))
    L, J, g = numpy_ref.surrogate(B, w, 10.0, counts)
    L2, J2, g2 = numpy_ref.surrogate(R, w, 10.0)
    np.testing.assert_allclose(L, L2, rtol=0, atol=1e-12)
    assert pytest.approx(J2, abs=1e-12) == J
    np.testing.assert_allclose(g, g2, rtol=0, atol=1e-10)


@pytest.mark.parametrize("seed", range(2))
def test_counts_equal_repeated_rows_aces_o_fit(seed):
    B, counts, R, _ = _counts_case(seed)
    active = nonconstant_mask(R).astype(np.uint8)
    logits0 = np.zeros(6)
    w, obj = numpy_ref.aces_o_fit(B, logits0, active, 10.0, 0.05, 15, counts)
    w2, obj2 = numpy_ref.aces_o_fit(R, logits0, active, 10.0, 0.05, 15)
    np.testing.assert_allclose(w, w2, rtol=0, atol=1e-10)
    np.testing.assert_allclose(obj, obj2, rtol=0, atol=1e-10)


# ---------------------------------------------------------------------------
# methods of the reference backend vs their definitions


def _all_cases():
    rng = np.random.default_rng(600)
    cases = dict(structured_matrices())
    for i, (n, m) in enumerate([(5, 4), (8, 6), (10, 5), (12, 7)]):
        cases[f"random{i}"] = random_matrix(rng, n, m, density=0.5, dup_rows=n // 2)
    return cases


@pytest.mark.parametrize("variant", ["weighted", "filter"])
@pytest.mark.parametrize(("name", "B"), list(_all_cases().items()))
def test_aces_c_matches_formula(name, B, variant):
    res = ref("aces-c" if variant == "weighted" else "aces-c-filter", B, tie_tol=TOL)
    w, fallback = brute.aces_c_weights(B, variant)
    assert res.fallback == fallback
    np.testing.assert_allclose(res.weights, [float(x) for x in w], rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        res.scores, [float(x) for x in brute.weighted_scores(B, w)], rtol=0, atol=1e-12
    )
    assert_matches_exact(res.loo_auc, brute.loo_auc(B))


@pytest.mark.parametrize(("name", "B"), list(_all_cases().items()))
def test_majority_matches_definition(name, B):
    res = ref("majority", B)
    w = brute.majority_weights(B)
    np.testing.assert_allclose(res.weights, [float(x) for x in w], rtol=0, atol=1e-15)
    exact = brute.weighted_scores(B, w)
    np.testing.assert_allclose(res.scores, [float(x) for x in exact], rtol=0, atol=1e-12)
    assert list(res.order) == brute.stable_descending(exact)


@pytest.mark.parametrize("exponent", [0.5, 1.0])
@pytest.mark.parametrize(("name", "B"), list(_all_cases().items()))
def test_codet_matches_grouping(name, B, exponent):
    res = ref("codet", B, exponent=exponent)
    np.testing.assert_allclose(res.scores, brute.codet(B, exponent), rtol=1e-14, atol=0)
    assert res.weights is None


@pytest.mark.parametrize(("name", "B"), list(_all_cases().items()))
def test_b4_matches_formula(name, B):
    res = ref("b4", B, alpha=1e3, beta0=1e4)
    np.testing.assert_allclose(res.scores, brute.b4(B), rtol=1e-12, atol=1e-9)
    res = ref("b4", B, alpha=2.0, beta0=3.0)
    np.testing.assert_allclose(res.scores, brute.b4(B, 2.0, 3.0), rtol=1e-12, atol=1e-9)
