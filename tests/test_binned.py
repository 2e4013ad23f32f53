"""Binned (grid) surrogate and ACES-O against the exact C++ kernels.

The binned kernels (csrc/binned.hpp) trade exactness for O(n m + m G log G) per
step. These tests hold them to their stated error bound
``_core.binned_error_bound(gamma, h, W)`` against ``_core.surrogate_loo_auc``,
check that the error is second order in the grid spacing, that counts act as
repeated rows, that results do not depend on the thread count, that both
kernel-sum paths (FFT and direct) agree, and that ACES-O weights stay within
1e-4 of the exact optimiser on real HumanEval data.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import aces_fast
import core_calls as core
from aces_fast._compiled import core as _core
from helpers import random_matrix

pytestmark = pytest.mark.skipif(
    _core is None or not hasattr(_core, "surrogate_loo_auc_binned"),
    reason="compiled extension without the binned kernels",
)

DATA = Path(aces_fast.__file__).resolve().parent / "data" / "humaneval_codet_codegen16b.npz"


def nonempty(B: np.ndarray, counts=None) -> np.ndarray:
    rows = np.ones(len(B), bool) if counts is None else np.asarray(counts) > 0
    Bk = B[rows].astype(bool)
    return Bk.any(0) & (~Bk).any(0)


def grid_spacing(B, w, bins, counts=None) -> float:
    """The documented grid: [max(0, min s - max w), max s] with `bins` nodes."""
    rows = np.ones(len(B), bool) if counts is None else np.asarray(counts) > 0
    s = B[rows].astype(float) @ w
    lo = max(0.0, s.min() - w.max())
    return (s.max() - lo) / (bins - 1)


def errors(B, w, gamma, bins, counts=None, **kw):
    L0, J0, g0 = core.surrogate_loo_auc(B, w, gamma, counts=counts)
    L, J, g = core.surrogate_loo_auc_binned(B, w, gamma, bins=bins, counts=counts, **kw)
    np.testing.assert_array_equal(np.isnan(L), np.isnan(L0))
    return np.nanmax(np.abs(L - L0), initial=0.0), abs(J - J0), np.abs(g - g0).max()


def binned_reference(B, w, gamma, bins, counts=None):
    """The binned surrogate straight from its definition (binned.hpp), O(m G^2)."""
    c = np.ones(len(B)) if counts is None else np.asarray(counts, float)
    keep = c > 0
    Bk, c = B[keep].astype(bool), c[keep]
    s = Bk.astype(float) @ w
    G = bins
    lo = max(0.0, s.min() - w.max())
    h = (s.max() - lo) / (G - 1)
    inv = 1 / h if h > 0 else 0.0
    z = gamma * np.subtract.outer(np.arange(G), np.arange(G)) * h  # (k - l) h, k passer node
    sig = 1 / (1 + np.exp(-z))
    dsig = sig * (1 - sig)

    def deposit(t, mass):
        t = np.clip(t, 0, G - 1)
        a = np.minimum(np.floor(t).astype(int), G - 2)
        al = t - a
        hist = np.zeros(G)
        np.add.at(hist, a, mass * (1 - al))
        np.add.at(hist, a + 1, mass * al)
        return hist, lambda vals: vals[a] + al * (vals[a + 1] - vals[a])

    m = B.shape[1]
    L, D, cj = np.full(m, np.nan), np.zeros(m), np.zeros(m)
    v = np.zeros(len(s))
    for j in range(m):
        P = Bk[:, j]
        if not P.any() or P.all():
            continue
        hp, read_p = deposit((s[P] - w[j] - lo) * inv, c[P])
        hf, read_f = deposit((s[~P] - lo) * inv, c[~P])
        pf = c[P].sum() * c[~P].sum()
        L[j] = hp @ sig @ hf / pf
        A, Bq = dsig @ hf, dsig.T @ hp
        D[j] = hp @ A
        cj[j] = w[j] / pf
        v[P] += cj[j] * read_p(A)
        v[~P] -= cj[j] * read_f(Bq)
    ok = ~np.isnan(L)
    grad = gamma * (Bk.T.astype(float) @ (c * v))
    grad[ok] += (L[ok] - 0.5) - gamma * cj[ok] * D[ok]
    J = float(np.sum(w[ok] * (L[ok] - 0.5)))
    return L, J, grad


@pytest.mark.parametrize(
    ("bins", "path"), [(2, "auto"), (7, "fft"), (40, "direct"), (200, "fft"), (200, "direct")]
)
def test_matches_definition(bins, path):
    rng = np.random.default_rng(bins)
    B = random_matrix(rng, 70, 9, 0.4, dup_rows=10)
    B[:, 2] = 0
    w = rng.random(9) * 2
    counts = rng.integers(0, 3, 70)
    for cnt in (None, counts):
        L, J, g = core.surrogate_loo_auc_binned(B, w, 6.0, bins=bins, counts=cnt, path=path)
        Lr, Jr, gr = binned_reference(B, w, 6.0, bins, cnt)
        np.testing.assert_allclose(L, Lr, rtol=0, atol=1e-12)
        assert pytest.approx(Jr, abs=1e-12) == J
        np.testing.assert_allclose(g, gr, rtol=0, atol=1e-11)


# ---- the stated bound ------------------------------------------------------------


def test_error_bound_formula_and_constants():
    x = np.linspace(-20, 20, 400001)
    sg = 1 / (1 + np.exp(-x))
    d1 = sg * (1 - sg)
    d2 = d1 * (1 - 2 * sg)
    d3 = d1 * (1 - 6 * sg + 6 * sg**2)
    # the constants the bound is built from
    assert np.abs(d2).max() == pytest.approx(1 / (6 * math.sqrt(3)), rel=1e-8)
    assert np.abs(d3).max() == pytest.approx(1 / 8, rel=1e-12)
    for gamma, h, W in [(10.0, 1 / 2047, 1.0), (3.0, 0.2, 7.5), (30.0, 1e-3, 0.0)]:
        eL, eJ, eg = core.binned_error_bound(gamma, h, W)
        disc = gamma**2 * h**2 * np.abs(d2).max() / 4
        assert eL == pytest.approx(disc + 1e-10, rel=1e-7)
        assert eJ == pytest.approx(W * eL, rel=1e-12)
        assert eg == pytest.approx(
            disc + 3 * gamma**3 * h**2 * W / 32 + 1e-10 * (1 + 3 * gamma * W), rel=1e-7
        )


def test_grid_spacing_is_the_documented_one():
    rng = np.random.default_rng(3)
    B = random_matrix(rng, 60, 12, 0.4)
    w = rng.random(12) * 3
    counts = rng.integers(0, 3, 60)
    for c in (None, counts):
        for bins in (2, 100, 2048):
            h = core.binned_grid_spacing(B, w, bins, counts=c)
            assert h == pytest.approx(grid_spacing(B, w, bins, c), rel=1e-12)


CASES = [
    # n, m, density, gamma, bins, normalized weights
    (400, 30, 0.3, 10.0, 2048, True),
    (400, 30, 0.3, 10.0, 64, True),
    (300, 40, 0.5, 3.0, 256, False),
    (250, 25, 0.2, 30.0, 512, True),
    (200, 20, 0.6, 1.0, 16, False),
    (150, 50, 0.4, 10.0, 4096, False),
]


@pytest.mark.parametrize(("n", "m", "density", "gamma", "bins", "normalized"), CASES)
def test_L_J_grad_within_stated_bound(n, m, density, gamma, bins, normalized):
    rng = np.random.default_rng(n * 7 + m)
    B = random_matrix(rng, n, m, density, dup_rows=n // 5)
    B[:, 0] = 1  # an all-pass column: NaN, adds nothing
    w = rng.random(m) * (1.0 if normalized else 2.5)
    w[1] = 0.0
    if normalized:
        w /= w.sum()
    eL, eJ, eg = errors(B, w, gamma, bins)
    h = grid_spacing(B, w, bins)
    W = w[nonempty(B)].sum()
    bL, bJ, bg = core.binned_error_bound(gamma, h, W)
    assert eL <= bL and eJ <= bJ and eg <= bg, (eL, bL, eJ, bJ, eg, bg)
    # an approximation, not the exact kernel in disguise
    if bins <= 512:
        assert eL > 1e-12


def test_error_is_second_order_in_h():
    rng = np.random.default_rng(11)
    B = random_matrix(rng, 300, 40, 0.35)
    w = rng.random(40)
    w /= w.sum()
    for gamma in (3.0, 10.0):
        eL = [errors(B, w, gamma, bins)[0] for bins in (32, 64, 128, 256)]
        eg = [errors(B, w, gamma, bins)[2] for bins in (32, 64, 128, 256)]
        for e in (eL, eg):
            ratios = np.array(e[:-1]) / np.array(e[1:])
            # h halves (almost exactly: h = span / (bins - 1)) -> error / ~4
            assert np.all(ratios > 2.5), ratios
            assert 3.3 < np.exp(np.log(ratios).mean()) < 5.0, ratios


def test_fft_and_direct_paths_agree():
    rng = np.random.default_rng(5)
    B = random_matrix(rng, 200, 15, 0.4, dup_rows=50)
    w = rng.random(15)
    for bins in (2, 3, 100, 1024):
        outs = [
            core.surrogate_loo_auc_binned(B, w, 7.0, bins=bins, path=p)
            for p in ("fft", "direct", "auto")
        ]
        for L, J, g in outs[1:]:
            np.testing.assert_allclose(L, outs[0][0], rtol=0, atol=1e-12)
            assert pytest.approx(outs[0][1], abs=1e-12) == J
            np.testing.assert_allclose(g, outs[0][2], rtol=0, atol=1e-12)


def test_zero_weights_are_exact():
    # all scores equal: every pair sits at difference 0, nothing to interpolate
    rng = np.random.default_rng(2)
    B = random_matrix(rng, 50, 8, 0.5)
    w = np.zeros(8)
    L0, _J0, g0 = core.surrogate_loo_auc(B, w, 10.0)
    L, J, g = core.surrogate_loo_auc_binned(B, w, 10.0, bins=2)
    np.testing.assert_allclose(L, L0, atol=1e-14)
    np.testing.assert_allclose(g, g0, atol=1e-13)
    assert J == 0.0


def test_large_gamma_stays_finite_and_bounded():
    rng = np.random.default_rng(8)
    B = random_matrix(rng, 120, 10, 0.4)
    w = rng.random(10)
    w /= w.sum()
    L, J, g = core.surrogate_loo_auc_binned(B, w, 2000.0, bins=8192)
    assert np.all(np.isfinite(L)) and np.isfinite(J) and np.all(np.isfinite(g))
    eL, eJ, eg = errors(B, w, 2000.0, 8192)
    bL, bJ, bg = core.binned_error_bound(2000.0, grid_spacing(B, w, 8192), 1.0)
    assert eL <= bL and eJ <= bJ and eg <= bg


# ---- conventions shared with the exact kernels -------------------------------------


def test_counts_equal_repeated_rows():
    rng = np.random.default_rng(9)
    B = random_matrix(rng, 80, 12, 0.4)
    counts = rng.integers(0, 4, 80)
    counts[0] = 0
    R = np.repeat(B, counts, axis=0)
    w = rng.random(12)
    a = core.surrogate_loo_auc_binned(B, w, 10.0, bins=300, counts=counts)
    b = core.surrogate_loo_auc_binned(R, w, 10.0, bins=300)
    np.testing.assert_allclose(a[0], b[0], rtol=0, atol=1e-12)
    assert a[1] == pytest.approx(b[1], abs=1e-12)
    np.testing.assert_allclose(a[2], b[2], rtol=0, atol=1e-12)

    l0 = rng.normal(size=12)
    act = np.ones(12, np.uint8)
    fa = core.aces_o_fit_binned(B, l0, act, 10.0, 0.05, 30, bins=300, counts=counts)
    fb = core.aces_o_fit_binned(R, l0, act, 10.0, 0.05, 30, bins=300)
    np.testing.assert_allclose(fa[0], fb[0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(fa[1], fb[1], rtol=0, atol=1e-10)


def test_empty_classes_and_absent_rows():
    B = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0]], np.uint8)
    w = np.array([0.2, 0.5, 0.3])
    L, J, g = core.surrogate_loo_auc_binned(B, w, 10.0, bins=64)
    assert np.isnan(L[0]) and np.isnan(L[2]) and not np.isnan(L[1])
    L0, J0, g0 = core.surrogate_loo_auc(B, w, 10.0)
    bL, bJ, bg = core.binned_error_bound(10.0, grid_spacing(B, w, 64), 0.5)
    assert abs(L[1] - L0[1]) <= bL and abs(J - J0) <= bJ
    assert np.abs(g - g0).max() <= bg
    # every row absent: nothing to compare
    L, J, g = core.surrogate_loo_auc_binned(B, w, 10.0, counts=np.zeros(4, int))
    assert np.all(np.isnan(L)) and J == 0.0 and np.all(g == 0.0)


@pytest.mark.parametrize(("n", "m", "bins"), [(600, 250, 2048), (10000, 500, 256)])
def test_thread_count_does_not_change_results(n, m, bins):
    # sizes above the kernel's thresholds for parallel columns (both) and
    # parallel row passes (the second)
    rng = np.random.default_rng(4)
    B = random_matrix(rng, n, m, 0.3, dup_rows=n // 20)
    w = rng.random(m)
    r1 = core.surrogate_loo_auc_binned(B, w, 10.0, bins=bins, n_threads=1)
    r2 = core.surrogate_loo_auc_binned(B, w, 10.0, bins=bins, n_threads=2)
    np.testing.assert_array_equal(r1[0], r2[0])
    assert r1[1] == r2[1]
    np.testing.assert_array_equal(r1[2], r2[2])
    act = np.ones(m, np.uint8)
    l0 = np.zeros(m)
    f1 = core.aces_o_fit_binned(B, l0, act, 10.0, 0.01, 3, bins=bins, n_threads=1)
    f2 = core.aces_o_fit_binned(B, l0, act, 10.0, 0.01, 3, bins=bins, n_threads=2)
    np.testing.assert_array_equal(f1[0], f2[0])
    np.testing.assert_array_equal(f1[1], f2[1])


# ---- ACES-O ------------------------------------------------------------------------


def test_aces_o_fit_binned_tracks_exact_on_random_data():
    rng = np.random.default_rng(12)
    B = random_matrix(rng, 300, 40, 0.35, dup_rows=40)
    B[:, 3] = 0  # constant column: inactive, weight 0
    act = (B.any(0) & ~B.all(0)).astype(np.uint8)
    l0 = np.where(act, rng.normal(size=40), 0.0)
    we, oe = core.aces_o_fit(B, l0, act, 10.0, 0.05, 90, n_threads=1)
    wb, ob = core.aces_o_fit_binned(B, l0, act, 10.0, 0.05, 90, bins=2048, n_threads=1)
    assert wb[3] == 0.0 and wb.sum() == pytest.approx(1.0)
    assert np.abs(wb - we).max() <= 1e-4
    assert np.abs(ob - oe).max() <= 1e-5
    # no active column: all zeros, like the exact optimiser
    w0, o0 = core.aces_o_fit_binned(B, l0, np.zeros(40), 10.0, 0.05, 3)
    assert np.all(w0 == 0) and np.all(o0 == 0)


@pytest.mark.skipif(not DATA.exists(), reason="bundled HumanEval data missing")
def test_aces_o_fit_binned_on_humaneval_top_k_none():
    """Full matrices (top_k=None): final weights within 1e-4 of the exact fit."""
    data = np.load(DATA)
    probs = sorted(range(164), key=lambda k: -data[f"B_{k:04d}"].shape[1])[:40]
    rng = np.random.default_rng(0)
    worst = 0.0
    for k in probs:
        B = np.ascontiguousarray(data[f"B_{k:04d}"])
        act = (B.any(0) & ~B.all(0)).astype(np.uint8)
        inits = [
            (np.zeros(B.shape[1]), 0.01),
            (np.zeros(B.shape[1]), 0.05),
            (rng.normal(size=B.shape[1]), 0.01),
        ]  # a warm start, as init="aces-c"
        for l0, lr in inits:
            we, oe = core.aces_o_fit(B, l0, act, 10.0, lr, 90, n_threads=1)
            wb, ob = core.aces_o_fit_binned(B, l0, act, 10.0, lr, 90, bins=2048, n_threads=1)
            worst = max(worst, np.abs(wb - we).max())
            assert np.abs(ob - oe).max() <= 1e-5
    assert worst <= 1e-4, worst


# ---- argument checking ---------------------------------------------------------------


def test_bad_arguments_raise():
    B = np.array([[1, 0], [0, 1], [1, 1]], np.uint8)
    w = np.array([0.5, 0.5])
    act = np.ones(2)
    f = core.surrogate_loo_auc_binned
    fit = core.aces_o_fit_binned
    for bins in (1, 0, -5, 2**16 + 1):
        with pytest.raises(ValueError, match="bins"):
            f(B, w, 10.0, bins=bins)
        with pytest.raises(ValueError, match="bins"):
            fit(B, w, act, 10.0, 0.01, 5, bins=bins)
    with pytest.raises(ValueError, match="weights"):
        f(B, np.array([0.5, -0.1]), 10.0)
    with pytest.raises(ValueError, match="weights"):
        f(B, np.array([0.5]), 10.0)
    with pytest.raises(ValueError, match="weights"):
        f(B, np.array([0.5, np.nan]), 10.0)
    with pytest.raises(ValueError, match="counts"):
        f(B, w, 10.0, counts=[1, -1, 1])
    with pytest.raises(ValueError, match="n_threads"):
        f(B, w, 10.0, n_threads=-4097)
    with pytest.raises(ValueError, match="path"):
        f(B, w, 10.0, path="bogus")
    with pytest.raises(ValueError, match="2-D"):
        f(B[0], w, 10.0)
    with pytest.raises(TypeError):
        f(B.tolist(), w, 10.0)
    with pytest.raises(TypeError):
        f(B.astype(np.int64), w, 10.0)
    with pytest.raises(TypeError, match="weights"):
        f(B, None, 10.0)
    with pytest.raises(ValueError, match="steps"):
        fit(B, w, act, 10.0, 0.01, -1)
    with pytest.raises(ValueError, match="active"):
        fit(B, w, np.ones(3), 10.0, 0.01, 5)
