"""Invariants of LOO-AUC and the ranking methods, checked with hypothesis on every backend.

Each property holds exactly by the definitions of docs/contract.rst §1–§3, so the
comparisons use the 1e-12 tolerance for exact quantities.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import aces_fast as af
from brute import nonconstant_mask
from helpers import npy

# the backend fixture only returns a name, so reusing it across examples is safe
SETTINGS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
EXACT = 1e-12


@st.composite
def pass_matrices(draw, max_n=9, max_m=7, min_m=1):
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(min_m, max_m))
    return draw(arrays(np.uint8, (n, m), elements=st.integers(0, 1)))


@st.composite
def matrix_and_weights(draw):
    B = draw(pass_matrices())
    # rational weights k/10: exact ties are frequent and inexact in binary
    k = draw(arrays(np.int64, B.shape[1], elements=st.integers(0, 10)))
    return B, k / 10.0


def assert_same(a, b, atol=EXACT):
    a, b = npy(a), npy(b)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(a, b, rtol=0, atol=atol, equal_nan=True)


@SETTINGS
@given(data=matrix_and_weights(), seed=st.integers(0, 2**16))
def test_column_permutation_permutes_loo_auc(backend, data, seed):
    B, w = data
    perm = np.random.default_rng(seed).permutation(B.shape[1])
    for weights, wp in ((None, None), (w, w[perm])):
        base = npy(af.loo_auc(B, weights, backend=backend))
        assert_same(af.loo_auc(B[:, perm], wp, backend=backend), base[perm])


@SETTINGS
@given(data=matrix_and_weights(), seed=st.integers(0, 2**16))
def test_row_permutation_keeps_loo_auc(backend, data, seed):
    B, w = data
    perm = np.random.default_rng(seed).permutation(B.shape[0])
    for weights in (None, w):
        assert_same(
            af.loo_auc(B[perm], weights, backend=backend), af.loo_auc(B, weights, backend=backend)
        )


@SETTINGS
@given(data=matrix_and_weights(), r=st.integers(2, 3))
def test_repeating_rows_keeps_loo_auc_and_aces_c(backend, data, r):
    B, w = data
    R = np.repeat(B, r, axis=0)
    for weights in (None, w):
        assert_same(
            af.loo_auc(R, weights, backend=backend), af.loo_auc(B, weights, backend=backend)
        )
    a, b = af.aces_c(R, backend=backend), af.aces_c(B, backend=backend)
    assert a.fallback == b.fallback
    assert_same(a.weights, b.weights)


@SETTINGS
@given(data=matrix_and_weights(), value=st.integers(0, 1), extra=st.integers(0, 10))
def test_constant_column_changes_nothing_else(backend, data, value, extra):
    """A new all-pass (or all-fail) test shifts every score equally: other LOO-AUCs stay."""
    B, w = data
    Bc = np.hstack([B, np.full((B.shape[0], 1), value, dtype=np.uint8)])
    for weights, wc in ((None, None), (w, np.r_[w, extra / 10.0])):
        got = npy(af.loo_auc(Bc, wc, backend=backend))
        assert np.isnan(got[-1])
        assert_same(got[:-1], af.loo_auc(B, weights, backend=backend))
    a, b = af.aces_c(Bc, backend=backend), af.aces_c(B, backend=backend)
    assert npy(a.weights)[-1] == 0
    assert_same(npy(a.weights)[:-1], b.weights)
    assert npy(a.order).tolist() == npy(b.order).tolist()


@SETTINGS
@given(data=matrix_and_weights(), scale=st.sampled_from([1e-3, 0.7, 3.0, 1e4]))
def test_scaling_weights_keeps_loo_auc(backend, data, scale):
    B, w = data
    assert_same(af.loo_auc(B, w * scale, backend=backend), af.loo_auc(B, w, backend=backend))


@SETTINGS
@given(data=matrix_and_weights(), j=st.integers(0, 100))
def test_complementing_a_test_complements_its_loo_auc(backend, data, j):
    """Flipping test j swaps its passers and failers; the other tests' votes are unchanged."""
    B, w = data
    j %= B.shape[1]
    F = B.copy()
    F[:, j] = 1 - F[:, j]
    for weights in (None, w):
        before = npy(af.loo_auc(B, weights, backend=backend))[j]
        after = npy(af.loo_auc(F, weights, backend=backend))[j]
        if np.isnan(before):
            assert np.isnan(after)
        else:
            assert after == pytest.approx(1.0 - before, abs=EXACT)


@SETTINGS
@given(data=matrix_and_weights())
def test_loo_auc_range_and_nan_exactly_at_constant_tests(backend, data):
    B, w = data
    for weights in (None, w):
        L = npy(af.loo_auc(B, weights, backend=backend))
        assert L.shape == (B.shape[1],)
        np.testing.assert_array_equal(np.isnan(L), ~nonconstant_mask(B))
        finite = L[~np.isnan(L)]
        assert ((finite >= 0) & (finite <= 1)).all()


@SETTINGS
@given(
    B=pass_matrices(),
    method=st.sampled_from(
        ["majority", "aces-c", "aces-c-filter", "aces-o", "codet", "codet-linear", "b4"]
    ),
)
def test_identical_rows_get_equal_scores(backend, B, method):
    B = np.vstack([B, B[:1]])  # guarantee a duplicate
    params = {"steps": 5} if method == "aces-o" else {}
    res = af.rerank(B, method, backend=backend, **params)
    scores = npy(res.scores)
    _, first, inverse = np.unique(B, axis=0, return_index=True, return_inverse=True)
    np.testing.assert_array_equal(scores, scores[first][inverse.reshape(-1)])
    order = npy(res.order)
    assert np.all(np.diff(scores[order]) <= 0)


@SETTINGS
@given(B=pass_matrices())
def test_aces_c_weights_positive_exactly_where_loo_auc_above_half(backend, B):
    res = af.aces_c(B, backend=backend)
    L, w = npy(res.loo_auc), npy(res.weights)
    if res.fallback:
        assert not (L > 0.5).any()
    else:
        np.testing.assert_array_equal(w > 0, L > 0.5)
        assert w.sum() == pytest.approx(1.0, abs=1e-12)


@SETTINGS
@given(B=pass_matrices())
def test_majority_order_follows_nonconstant_pass_counts(backend, B):
    res = af.majority_vote(B, backend=backend)
    counts = B[:, nonconstant_mask(B)].sum(axis=1, dtype=np.int64)
    np.testing.assert_array_equal(npy(res.order), np.argsort(-counts, kind="stable"))
