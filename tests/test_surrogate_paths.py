"""The two kernels of the compiled surrogate (csrc/surrogate.cpp): per column and by
row pairs. ``ACES_FAST_SURROGATE_KERNEL=rows|columns`` (read by every surrogate
workspace, documented in csrc/kernels.hpp as a test hook) forces one; both must
agree with each other and with the NumPy brute force to 1e-12, keep the counts
semantics, fall back from row pairs to columns where exp(-z) could overflow,
and stay bitwise independent of the thread count.
"""

from __future__ import annotations

import numpy as np
import pytest

import core_calls as kc
from test_core_kernels import brute_surrogate, numpy_aces_o_fit, random_B

KERNELS = ("rows", "columns")


def with_kernel(monkeypatch, kernel, fn, *args, **kwargs):
    """fn(*args, **kwargs) with the surrogate kernel forced to ``kernel``."""
    monkeypatch.setenv("ACES_FAST_SURROGATE_KERNEL", kernel)
    try:
        return fn(*args, **kwargs)
    finally:
        monkeypatch.delenv("ACES_FAST_SURROGATE_KERNEL")


def surrogate_with(monkeypatch, kernel, *args, **kwargs):
    return with_kernel(monkeypatch, kernel, kc.surrogate_loo_auc, *args, **kwargs)


def fit_with(monkeypatch, kernel, *args, **kwargs):
    return with_kernel(monkeypatch, kernel, kc.aces_o_fit, *args, **kwargs)


def assert_close(res, ref, tol=1e-12):
    L, J, g = res
    Lr, Jr, gr = ref
    np.testing.assert_allclose(L, Lr, atol=tol, rtol=0)  # NaN positions must agree too
    assert pytest.approx(Jr, abs=tol) == J
    np.testing.assert_allclose(g, gr, atol=tol, rtol=0)


@pytest.mark.parametrize("seed", range(10))
def test_both_kernels_match_brute_force(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    # up to 40 rows: the per-column kernel keeps at most 32 in registers
    n = int(rng.integers(2, 26)) if seed < 6 else int(rng.integers(26, 41))
    m = int(rng.integers(1, 90))  # not a multiple of 8 in general: padded columns
    B = random_B(rng, n, m, float(rng.uniform(0.1, 0.9)))
    counts = rng.integers(0, 4, n) if seed % 2 else None
    w = rng.random(m)
    w /= w.sum()
    gamma = float(rng.choice([1.0, 10.0, 40.0]))
    ref = brute_surrogate(B, w, gamma, counts)
    out = {}
    for k in KERNELS:
        out[k] = surrogate_with(monkeypatch, k, B, w, gamma, counts, dedup=False)
        assert_close(out[k], ref)
    # the hook really switches kernels: their summation orders differ somewhere
    # (a 20 x 60 problem whose pair sums do not all round alike)
    if n >= 6 and m >= 20:
        assert any(
            not np.array_equal(a, b, equal_nan=True) for a, b in zip(out["rows"], out["columns"])
        )


def test_row_pairs_counts_equal_expanded_rows(monkeypatch):
    rng = np.random.default_rng(11)
    B = random_B(rng, 9, 70, 0.4)
    counts = np.array([3, 0, 1, 2, 1, 0, 4, 1, 2])
    E = np.repeat(B, counts, axis=0)
    w = rng.random(70) / 20
    for k in KERNELS:
        got = surrogate_with(monkeypatch, k, B, w, 10.0, counts, dedup=False)
        expanded = surrogate_with(monkeypatch, k, E, w, 10.0, dedup=False)
        assert_close(got, expanded)
        assert_close(got, brute_surrogate(B, w, 10.0, counts))


def test_row_pairs_constant_columns_get_zero_gradient(monkeypatch):
    rng = np.random.default_rng(12)
    B = random_B(rng, 10, 30, 0.5)
    B[:, 3] = 1  # every row passes
    B[:, 7] = 0  # every row fails
    B[1:, 11] = 1
    counts = np.ones(10, np.int64)
    counts[0] = 0  # column 11 is constant over the kept rows
    w = rng.random(30) / 10
    L, J, g = surrogate_with(monkeypatch, "rows", B, w, 10.0, counts, dedup=False)
    for j in (3, 7, 11):
        assert np.isnan(L[j])
        assert g[j] == 0.0
    assert_close((L, J, g), brute_surrogate(B, w, 10.0, counts))


@pytest.mark.parametrize("gamma", [200.0, 2000.0])
def test_row_pairs_overflow_guard_falls_back_to_columns(monkeypatch, gamma):
    # gamma * (span of s + max w) > 600: exp(-z) could overflow, so the row-pair
    # workspace must run the stable per-column kernel (bit for bit the same).
    rng = np.random.default_rng(13)
    B = random_B(rng, 12, 40, 0.5)
    w = rng.random(40) * 0.5  # span of s ~ 5: gamma * span >= 1000
    rows = surrogate_with(monkeypatch, "rows", B, w, gamma, dedup=False)
    cols = surrogate_with(monkeypatch, "columns", B, w, gamma, dedup=False)
    for a, b in zip(rows, cols):
        np.testing.assert_array_equal(a, b)
    assert_close(rows, brute_surrogate(B, w, gamma), tol=1e-9 * max(1.0, gamma))


def test_row_pairs_thread_count_does_not_change_bits(monkeypatch):
    # 1500 columns: three row-pair blocks, shared out over threads when n_threads > 1
    rng = np.random.default_rng(14)
    B = random_B(rng, 14, 1500, 0.4)
    counts = rng.integers(1, 3, 14)
    w = rng.random(1500) / 1500
    r1 = surrogate_with(monkeypatch, "rows", B, w, 10.0, counts, n_threads=1, dedup=False)
    r2 = surrogate_with(monkeypatch, "rows", B, w, 10.0, counts, n_threads=2, dedup=False)
    for a, b in zip(r1, r2):
        np.testing.assert_array_equal(a, b)
    assert_close(r1, brute_surrogate(B, w, 10.0, counts))
    act = np.ones(1500, np.uint8)
    f1 = fit_with(monkeypatch, "rows", B, np.zeros(1500), act, 10.0, 0.05, 4, counts, n_threads=1)
    f2 = fit_with(monkeypatch, "rows", B, np.zeros(1500), act, 10.0, 0.05, 4, counts, n_threads=2)
    for a, b in zip(f1, f2):
        np.testing.assert_array_equal(a, b)


def test_columns_thread_count_does_not_change_bits(monkeypatch):
    # the per-column kernel shares fixed chunks of columns out over threads, each
    # chunk with its own partial v (24 distinct rows: the register kernel)
    rng = np.random.default_rng(18)
    B = random_B(rng, 24, 1500, 0.55)
    counts = rng.integers(1, 3, 24)
    w = rng.random(1500) / 1500
    for c in (None, counts):
        r1 = surrogate_with(monkeypatch, "columns", B, w, 10.0, c, n_threads=1, dedup=False)
        r2 = surrogate_with(monkeypatch, "columns", B, w, 10.0, c, n_threads=2, dedup=False)
        for a, b in zip(r1, r2):
            np.testing.assert_array_equal(a, b)
        assert_close(r1, brute_surrogate(B, w, 10.0, c))


@pytest.mark.parametrize("kernel", KERNELS)
def test_aces_o_fit_both_kernels_match_numpy_adam(monkeypatch, kernel):
    rng = np.random.default_rng(15)
    B = random_B(rng, 16, 45, 0.45)
    counts = rng.integers(0, 3, 16)
    active = (rng.random(45) < 0.8).astype(np.uint8)
    logits0 = rng.normal(size=45)
    w, obj = fit_with(monkeypatch, kernel, B, logits0, active, 10.0, 0.05, 30, counts, dedup=False)
    wr, objr = numpy_aces_o_fit(B, logits0, active, 10.0, 0.05, 30, counts)
    np.testing.assert_allclose(w, wr, atol=1e-6, rtol=0)
    np.testing.assert_allclose(obj, objr, atol=1e-9, rtol=0)


def test_auto_choice_equals_a_forced_kernel(monkeypatch):
    # Few distinct rows pick row pairs, many pick columns; either way auto is one of
    # the two kernels bit for bit (no third code path).
    rng = np.random.default_rng(16)
    for n, m in [(6, 200), (120, 40)]:
        B = random_B(rng, n, m, 0.5)
        w = rng.random(m) / m
        auto = kc.surrogate_loo_auc(B, w, 10.0, dedup=False)
        forced = [surrogate_with(monkeypatch, k, B, w, 10.0, dedup=False) for k in KERNELS]
        assert any(
            all(np.array_equal(a, b, equal_nan=True) for a, b in zip(auto, f)) for f in forced
        )


def test_many_distinct_rows_pick_the_per_column_kernel(monkeypatch):
    # ACES-O's default top-24 on distinct rows and 500 tests: the row-pair sweeps
    # would cover 276 pairs x 504 columns, about twice the work of the per-column
    # kernel; the choice is that of the shape only and equal to the forced kernel
    rng = np.random.default_rng(17)
    B = random_B(rng, 24, 500, 0.6)
    assert len(np.unique(B, axis=0)) == 24
    w = rng.random(500)
    w /= w.sum()
    auto = kc.surrogate_loo_auc(B, w, 10.0, dedup=False)
    cols = surrogate_with(monkeypatch, "columns", B, w, 10.0, dedup=False)
    for a, b in zip(auto, cols):
        np.testing.assert_array_equal(a, b)
    assert_close(auto, brute_surrogate(B, w, 10.0))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("span", [150.0, 290.0, 590.0])
def test_fast_path_exponentials_near_the_limit(monkeypatch, kernel, span):
    # The fast path forms exp(gamma w_j) and exp(+-gamma (s - s0)) with the
    # kernels' own vectorized exp (csrc/simd/lanes.hpp); gamma * (span of s +
    # max w) just below its limit of 600 drives those arguments to ~590 and
    # ~300. The pair sums must still equal the stable brute force.
    rng = np.random.default_rng(int(span))
    B = random_B(rng, 20, 37, 0.5)
    w = rng.random(37)
    w /= w.sum()
    s = B.astype(float) @ w
    gamma = span / (s.max() - s.min() + w.max())
    L, J, g = surrogate_with(monkeypatch, kernel, B, w, gamma, dedup=False)
    Lr, Jr, gr = brute_surrogate(B, w, gamma)
    np.testing.assert_allclose(L, Lr, rtol=1e-12, atol=1e-300)
    assert pytest.approx(Jr, rel=1e-12) == J
    np.testing.assert_allclose(g, gr, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(gr).max()))


def test_fit_softmax_far_into_underflow(monkeypatch):
    # Starting logits 0 ... -800: softmax weights from 1 down past the smallest
    # subnormal (exp(-745) rounds to 0), where the vectorized exp scales by two
    # powers of two; the fit must still follow numpy's Adam.
    rng = np.random.default_rng(3)
    B = random_B(rng, 12, 40, 0.5)
    active = np.ones(40, dtype=np.uint8)
    logits0 = -np.linspace(0.0, 800.0, 40)
    for kernel in KERNELS:
        w, obj = fit_with(
            monkeypatch, kernel, B, logits0, active, 10.0, 0.05, 20, None, dedup=False
        )
        wr, objr = numpy_aces_o_fit(B, logits0, active, 10.0, 0.05, 20, None)
        np.testing.assert_allclose(w, wr, atol=1e-12, rtol=1e-9)
        np.testing.assert_allclose(obj, objr, atol=1e-12, rtol=0)
        assert (w[-3:] == 0).all() and (w > 0).sum() >= 20
