"""Tests of the compiled kernels in ``aces_fast._core`` against brute-force definitions.

Every reference here is the plain pairwise definition (O(n^2 m) loops), written
independently of the library's own numpy backend.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import aces_fast
import core_calls as kc
from aces_fast import _core
from helpers import EXAMPLE

SETTINGS = settings(max_examples=60, deadline=None)

# docs/contract.rst §6
EXAMPLE_LOO = np.array([2 / 3, 2 / 3, 1 / 2, 2 / 3, 1 / 2, 2 / 5, 7 / 12, 7 / 24, 0.0, 0.0])


# --------------------------------------------------------------------------------------
# brute-force references
# --------------------------------------------------------------------------------------


def seq_scores(B, w):
    """s_i = sum_j w_j [B_ij != 0], summed in ascending j (the kernel's order)."""
    s = np.zeros(B.shape[0])
    for j in range(B.shape[1]):
        s = s + np.where(B[:, j] != 0, w[j], 0.0)
    return s


def seq_sum(w):
    tot = 0.0
    for x in w:
        tot += float(x)
    return tot


def brute_loo_auc(B, w=None, counts=None, tie_tol=1e-9):
    """Pairwise LOO-AUC. Uniform: exact integers. Float: win iff s_f < x - T,
    tie iff x - T <= s_f <= x + T, x = s_p - w_j, T = tie_tol * sum(w)."""
    Bb = np.asarray(B) != 0
    n, m = Bb.shape
    c = np.ones(n, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    out = np.full(m, np.nan)
    if w is None:
        s = Bb.sum(axis=1).astype(np.int64)
        wj_all = np.ones(m, dtype=np.int64)
        T = 0
    else:
        s = seq_scores(Bb, w)
        wj_all = np.asarray(w, dtype=np.float64)
        T = tie_tol * seq_sum(w)
    for j in range(m):
        P = np.flatnonzero(Bb[:, j] & (c > 0))
        F = np.flatnonzero(~Bb[:, j] & (c > 0))
        if P.size == 0 or F.size == 0:
            continue
        num = 0  # 2 * wins + ties, in integer pair multiplicities
        for p in P:
            x = s[p] - wj_all[j]
            lo, hi = x - T, x + T
            for f in F:
                pair = int(c[p]) * int(c[f])
                if s[f] < lo:
                    num += 2 * pair
                elif s[f] <= hi:
                    num += pair
        den = 2 * int(c[P].sum()) * int(c[F].sum())
        out[j] = num / den
    return out


def stable_sigmoid(z):
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    e = np.exp(z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def brute_surrogate(B, w, gamma, counts=None):
    """(L, J, grad) by direct differentiation of J(w) = sum_j w_j (L_j - 1/2):
    dz_pf/dw_k = gamma (B_pk - B_fk - [k == j])."""
    Bb = (np.asarray(B) != 0).astype(np.float64)
    n, m = Bb.shape
    w = np.asarray(w, dtype=np.float64)
    c = np.ones(n) if counts is None else np.asarray(counts, dtype=np.float64)
    s = Bb @ w
    L = np.full(m, np.nan)
    J = 0.0
    grad = np.zeros(m)
    for j in range(m):
        P = np.flatnonzero((Bb[:, j] == 1) & (c > 0))
        F = np.flatnonzero((Bb[:, j] == 0) & (c > 0))
        if P.size == 0 or F.size == 0:
            continue
        pw = np.outer(c[P], c[F])
        npairs = pw.sum()
        z = gamma * (s[P][:, None] - s[F][None, :] - w[j])
        sig = stable_sigmoid(z)
        L[j] = (pw * sig).sum() / npairs
        J += w[j] * (L[j] - 0.5)
        ds = pw * sig * (1.0 - sig)  # pair-weighted sigma'
        # sum_pf ds_pf (B_p. - B_f. - e_j)
        dz = ds.sum(axis=1) @ Bb[P] - ds.sum(axis=0) @ Bb[F]
        dz[j] -= ds.sum()
        grad += w[j] * gamma * dz / npairs
        grad[j] += L[j] - 0.5
    return L, J, grad


def softmax_active(logits, active):
    w = np.zeros_like(logits)
    a = active.astype(bool)
    if a.any():
        e = np.exp(logits[a] - logits[a].max())
        w[a] = e / e.sum()
    return w


def numpy_aces_o_fit(B, logits0, active, gamma, lr, steps, counts=None):
    active = np.asarray(active).astype(bool)
    logits = np.asarray(logits0, dtype=np.float64).copy()
    obj = np.zeros(steps + 1)
    if not active.any():
        return np.zeros_like(logits), obj
    b1, b2, eps = 0.9, 0.999, 1e-8
    m1 = np.zeros_like(logits)
    m2 = np.zeros_like(logits)
    w = softmax_active(logits, active)
    for t in range(1, steps + 1):
        _, J, g = brute_surrogate(B, w, gamma, counts)
        obj[t - 1] = J
        g = np.where(active, g, 0.0)
        gl = -(w * (g - np.dot(w, g)))
        m1 = b1 * m1 + (1 - b1) * gl
        m2 = b2 * m2 + (1 - b2) * gl * gl
        denom = np.sqrt(m2) / math.sqrt(1 - b2**t) + eps
        logits = np.where(active, logits - (lr / (1 - b1**t)) * m1 / denom, logits)
        w = softmax_active(logits, active)
    obj[steps] = brute_surrogate(B, w, gamma, counts)[1]
    return w, obj


def random_B(rng, n, m, density=0.4):
    return (rng.random((n, m)) < density).astype(np.uint8)


small_B = hnp.arrays(
    np.uint8,
    st.tuples(st.integers(1, 9), st.integers(0, 7)),
    elements=st.integers(0, 1),
)


# --------------------------------------------------------------------------------------
# module basics
# --------------------------------------------------------------------------------------


def test_module_info():
    assert isinstance(_core.__version__, str) and _core.__version__
    # the full version, pre-release suffix included (CMakeLists.txt)
    assert _core.__version__ == aces_fast.__version__
    assert isinstance(_core.has_openmp(), bool)
    assert _core.max_threads() >= 1
    if not _core.has_openmp():
        assert _core.max_threads() == 1


@pytest.mark.skipif(
    _core.has_openmp(),
    reason="runs in a build without OpenMP (tools/check_portability.sh builds; the macOS wheels)",
)
def test_no_openmp_build_runs_single_threaded():
    """Without OpenMP (ACES_FAST_USE_OPENMP=OFF, or none found) the extension
    works on one thread: thread requests are accepted and change nothing."""
    assert _core.max_threads() == 1
    info = aces_fast.config()["backends"]["cpp"]
    assert info["openmp"] is False and info["max_threads"] == 1
    rng = np.random.default_rng(7)
    tasks = [(rng.random((40, 60)) < 0.5).astype(np.uint8) for _ in range(6)] + [EXAMPLE]
    for method in ("aces-c", "aces-o"):
        one = [aces_fast.rerank(B, method, backend="cpp") for B in tasks]
        many = aces_fast.rerank_batch(tasks, method, backend="cpp", n_threads=4)
        for a, b, B in zip(one, many, tasks):
            np.testing.assert_array_equal(a.scores, b.scores)
            np.testing.assert_array_equal(a.order, b.order)
            ref = aces_fast.rerank(B, method, backend="numpy")
            np.testing.assert_array_equal(a.order, ref.order)


# --------------------------------------------------------------------------------------
# loo_auc
# --------------------------------------------------------------------------------------


def test_spec_example_exact():
    out = kc.loo_auc(EXAMPLE)
    assert out.dtype == np.float64 and out.shape == (10,)
    np.testing.assert_allclose(out, EXAMPLE_LOO, rtol=0, atol=1e-15)
    # float weights w = 1/m: ties must survive rounding (the paper's 0.53 artefacts)
    m = EXAMPLE.shape[1]
    np.testing.assert_allclose(
        kc.loo_auc(EXAMPLE, np.full(m, 1.0 / m)), EXAMPLE_LOO, rtol=0, atol=1e-15
    )
    np.testing.assert_allclose(kc.loo_auc(EXAMPLE.astype(bool)), EXAMPLE_LOO, rtol=0, atol=1e-15)


@SETTINGS
@given(B=small_B, data=st.data())
def test_loo_auc_uniform_vs_brute(B, data):
    n = B.shape[0]
    counts = data.draw(st.none() | hnp.arrays(np.int64, n, elements=st.integers(0, 3)))
    np.testing.assert_array_equal(kc.loo_auc(B, counts=counts), brute_loo_auc(B, None, counts))


@SETTINGS
@given(B=small_B, data=st.data())
def test_loo_auc_weighted_vs_brute(B, data):
    n, m = B.shape
    w = data.draw(
        hnp.arrays(
            np.float64, m, elements=st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.25, 1.0 / 3, 0.7, 1.0])
        )
    )
    counts = data.draw(st.none() | hnp.arrays(np.int64, n, elements=st.integers(0, 3)))
    tol = data.draw(st.sampled_from([1e-9, 0.0, 0.05]))
    got = kc.loo_auc(B, w, counts, tol)
    np.testing.assert_array_equal(got, brute_loo_auc(B, w, counts, tol))


@SETTINGS
@given(B=small_B, data=st.data())
def test_loo_auc_decimal_weights_match_exact_integers(B, data):
    """w = k/10 (k integer): with the default tolerance the result equals the exact
    integer-weight computation although sums like 0.1 + 0.2 round differently."""
    m = B.shape[1]
    k = data.draw(hnp.arrays(np.int64, m, elements=st.integers(0, 4)))
    exact = brute_loo_auc(B, k.astype(np.float64), None, 0.0)  # small ints: float sums exact
    np.testing.assert_array_equal(kc.loo_auc(B, k / 10.0), exact)
    np.testing.assert_array_equal(kc.loo_auc(B, k * 0.1), exact)


def test_loo_auc_rounding_tie_example():
    B = np.array([[1, 1, 0, 1], [0, 0, 1, 0]], dtype=np.uint8)
    w = np.array([0.1, 0.2, 0.3, 0.5])
    out = kc.loo_auc(B, w)
    assert out[3] == 0.5  # 0.1 + 0.2 ties 0.3
    np.testing.assert_array_equal(out, [1.0, 1.0, 0.0, 0.5])
    # without tolerance float rounding breaks the tie, exactly as the brute force says
    np.testing.assert_array_equal(kc.loo_auc(B, w, tie_tol=0.0), brute_loo_auc(B, w, None, 0.0))


def test_loo_auc_random_weights_vs_brute():
    rng = np.random.default_rng(0)
    for _ in range(10):
        n, m = rng.integers(1, 30), rng.integers(1, 12)
        B = random_B(rng, n, m, rng.uniform(0.1, 0.9))
        w = rng.random(m) * (rng.random(m) < 0.8)
        counts = rng.integers(0, 4, n) if rng.random() < 0.5 else None
        np.testing.assert_array_equal(kc.loo_auc(B, w, counts), brute_loo_auc(B, w, counts))
        np.testing.assert_array_equal(kc.loo_auc(B, None, counts), brute_loo_auc(B, None, counts))


def brute_loo_auc_vec(B, w=None, counts=None, tie_tol=1e-9):
    """Same definition as brute_loo_auc, numpy-broadcast per column (for larger sizes)."""
    Bb = np.asarray(B) != 0
    n, m = Bb.shape
    c = np.ones(n, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    if w is None:
        s, wv, T = Bb.sum(axis=1).astype(np.int64), np.ones(m, dtype=np.int64), 0
    else:
        s, wv, T = seq_scores(Bb, w), np.asarray(w, dtype=np.float64), tie_tol * seq_sum(w)
    out = np.full(m, np.nan)
    for j in range(m):
        P = Bb[:, j] & (c > 0)
        F = ~Bb[:, j] & (c > 0)
        if not P.any() or not F.any():
            continue
        x = s[P] - wv[j]
        lo, hi = (x - T)[:, None], (x + T)[:, None]
        sf = s[F][None, :]
        pw = np.outer(c[P], c[F])
        num = int((2 * pw * (sf < lo)).sum() + (pw * ((sf >= lo) & (sf <= hi))).sum())
        out[j] = num / (2 * int(c[P].sum()) * int(c[F].sum()))
    return out


def test_loo_auc_larger_than_blocks_vs_brute():
    """n and m beyond the 64-row / 64-column blocks of the kernels."""
    rng = np.random.default_rng(15)
    for n, m, dens in [(150, 130, 0.3), (97, 70, 0.8), (300, 65, 0.5)]:
        B = random_B(rng, n, m, dens)
        counts = rng.integers(0, 3, n)
        w = rng.integers(0, 5, m) / 7.0
        for c in (None, counts):
            np.testing.assert_array_equal(kc.loo_auc(B, None, c), brute_loo_auc_vec(B, None, c))
            np.testing.assert_array_equal(kc.loo_auc(B, w, c), brute_loo_auc_vec(B, w, c))
            wr = rng.random(m)
            np.testing.assert_array_equal(
                kc.loo_auc(B, wr, c, 0.0), brute_loo_auc_vec(B, wr, c, 0.0)
            )


def test_loo_auc_extreme_tie_tol():
    B = random_B(np.random.default_rng(16), 30, 6, 0.5)
    w = np.full(6, 10.0)
    out = kc.loo_auc(B, w, tie_tol=1e308)  # T overflows to inf: every pair ties
    defined = B.any(axis=0) & ~B.all(axis=0)
    np.testing.assert_array_equal(out[defined], 0.5)
    assert np.isnan(out[~defined]).all()


@pytest.mark.parametrize("density", [0.05, 0.5, 0.95])
def test_loo_auc_tie_heavy_sparse_and_dense(density):
    """Many exact ties (decimal weights, few distinct scores); the merge walks the
    passers when they are the minority and the failers otherwise."""
    rng = np.random.default_rng(14)
    for _ in range(4):
        n, m = 60, 9
        B = random_B(rng, n, m, density)
        w = rng.integers(0, 4, m) / 10.0
        counts = rng.integers(0, 3, n)
        for c in (None, counts):
            for tol in (1e-9, 0.0):
                np.testing.assert_array_equal(kc.loo_auc(B, w, c, tol), brute_loo_auc(B, w, c, tol))
            np.testing.assert_array_equal(kc.loo_auc(B, None, c), brute_loo_auc(B, None, c))
        # every candidate identical score: all pairs tie -> 0.5 where defined
        out = kc.loo_auc(B, np.zeros(m))
        defined = (B.any(axis=0)) & (~B.all(axis=0))
        np.testing.assert_array_equal(out[defined], 0.5)


@pytest.mark.parametrize("weighted", [False, True])
def test_loo_auc_counts_equal_repeated_rows(weighted):
    rng = np.random.default_rng(1)
    for _ in range(10):
        n, m = rng.integers(1, 25), rng.integers(1, 15)
        B = random_B(rng, n, m)
        counts = rng.integers(0, 5, n)
        w = rng.random(m) if weighted else None
        expanded = np.repeat(B, counts, axis=0)
        got = kc.loo_auc(B, w, counts)
        if expanded.shape[0] == 0:
            assert np.isnan(got).all()
            continue
        ref = kc.loo_auc(expanded, w)
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(got, brute_loo_auc(B, w, counts))


def test_loo_auc_constant_columns_nan_and_edges():
    B = np.array([[1, 0, 1, 0], [1, 0, 0, 1], [1, 0, 1, 1]], dtype=np.uint8)
    for w in (None, np.array([0.2, 0.3, 0.1, 0.4])):
        out = kc.loo_auc(B, w)
        assert np.isnan(out[0]) and np.isnan(out[1])
        assert np.isfinite(out[2:]).all()
        # a count of 0 removes the row: column 2 becomes constant
        out = kc.loo_auc(B, w, counts=[1, 0, 1])
        assert np.isnan(out[2]) and np.isfinite(out[3])
        assert np.isnan(kc.loo_auc(B, w, counts=[0, 0, 0])).all()
    # m = 0
    out = kc.loo_auc(np.zeros((3, 0), np.uint8))
    assert out.shape == (0,) and out.dtype == np.float64
    assert kc.loo_auc(np.zeros((3, 0), np.uint8), np.zeros(0)).shape == (0,)
    # n = 1: every column constant
    assert np.isnan(kc.loo_auc(np.array([[1, 0, 1]], np.uint8))).all()
    assert np.isnan(kc.loo_auc(np.array([[1, 0, 1]], np.uint8), [1.0, 2.0, 3.0])).all()
    # all-zero weights: every pair ties
    np.testing.assert_array_equal(
        kc.loo_auc(np.ascontiguousarray(B[:, 2:]), [0.0, 0.0]), [0.5, 0.5]
    )


@pytest.mark.parametrize(
    "name",
    [
        "loo_auc",
        "surrogate_loo_auc",
        "aces_o_fit",
        "rerank",
        "surrogate_loo_auc_binned",
        "aces_o_fit_binned",
        "binned_grid_spacing",
    ],
)
def test_values_other_than_0_and_1_are_refused_inside_the_call(name):
    # the compiled check names the largest byte, as the Python validation does;
    # bool views of other bytes are checked too
    B = random_B(np.random.default_rng(2), 20, 6)
    kwargs = _valid_kwargs(name)
    for k, v in dict(
        B=B, weights=np.full(6, 1 / 6), logits0=np.zeros(6), active=np.ones(6)
    ).items():
        if k in kwargs:
            kwargs[k] = v
    getattr(_core, name)(**kwargs)
    for pos, value in [(0, 2), (B.size // 2, 255), (B.size - 1, 7)]:
        bad = B.copy()
        bad.flat[pos] = value
        for arr in (bad, bad.view(np.bool_)):
            with pytest.raises(
                ValueError, match=rf"^B must contain only 0 and 1; found value {value}$"
            ):
                getattr(_core, name)(**{**kwargs, "B": arr})


def test_batch_checks_every_task_and_names_the_first_bad_one():
    good = random_B(np.random.default_rng(3), 7, 5)
    bad = good.copy()
    bad[3, 2] = 9
    kwargs = _valid_kwargs("rerank_batch")
    for tasks, where in [([bad], 0), ([good, good, bad, bad], 2), ([good] * 5 + [bad], 5)]:
        with pytest.raises(
            ValueError, match=rf"^task {where}: B must contain only 0 and 1; found value 9$"
        ):
            _core.rerank_batch(**{**kwargs, "tasks": tasks})


def test_cpp_methods_cross_into_the_extension_once(monkeypatch):
    # validation and the 0/1 check happen inside the one compiled call
    import aces_fast as af
    from aces_fast.backends import cpp

    calls = []

    class Counting:
        def __getattr__(self, name):
            attr = getattr(_core, name)
            if not callable(attr):
                return attr

            def call(*args, **kwargs):
                calls.append(name)
                return attr(*args, **kwargs)

            return call

    B = random_B(np.random.default_rng(4), 24, 100)
    af.aces_c(B, backend="cpp")  # loads the backend (it asks _core for the thread count)
    monkeypatch.setattr(cpp, "core", Counting())
    for fn, name in [
        (lambda: af.aces_c(B, backend="cpp"), "rerank"),
        (lambda: af.aces_c(B.astype(bool), backend="cpp"), "rerank"),
        (lambda: af.majority_vote(B, backend="cpp"), "rerank"),
        (lambda: af.aces_o(B, steps=3, backend="cpp"), "rerank"),
        (lambda: af.loo_auc(B, backend="cpp"), "loo_auc"),
    ]:
        calls.clear()
        fn()
        assert calls == [name]
    bad = B.copy()
    bad[5, 7] = 3
    calls.clear()
    with pytest.raises(ValueError, match="found value 3"):
        af.aces_c(bad, backend="cpp")
    assert calls == ["rerank"]


def test_loo_auc_bool_and_readonly_input():
    rng = np.random.default_rng(3)
    B = random_B(rng, 15, 9)
    Bb = B.astype(bool)
    np.testing.assert_array_equal(kc.loo_auc(Bb), kc.loo_auc(B))
    B.setflags(write=False)
    np.testing.assert_array_equal(kc.loo_auc(B), kc.loo_auc(Bb))


def test_large_integer_counts_exact():
    # 2/3 style fractions with big multiplicities stay exact
    B = np.array([[1, 1], [0, 1], [1, 0]], dtype=np.uint8)
    counts = np.array([100000, 30000, 7])
    got = kc.loo_auc(B, counts=counts)
    np.testing.assert_array_equal(got, brute_loo_auc(B, None, counts))


# --------------------------------------------------------------------------------------
# surrogate
# --------------------------------------------------------------------------------------


def test_surrogate_vs_brute_and_finite_differences():
    rng = np.random.default_rng(4)
    for _trial in range(8):
        n, m = rng.integers(2, 12), rng.integers(1, 9)
        B = random_B(rng, n, m, rng.uniform(0.2, 0.8))
        w = rng.random(m) + 0.05
        w /= w.sum()
        gamma = float(rng.choice([1.0, 3.0, 10.0]))
        L, J, g = kc.surrogate_loo_auc(B, w, gamma)
        Lr, Jr, gr = brute_surrogate(B, w, gamma)
        assert L.shape == (m,) and g.shape == (m,) and isinstance(J, float)
        np.testing.assert_array_equal(np.isnan(L), np.isnan(Lr))
        np.testing.assert_allclose(L, Lr, rtol=1e-12, atol=1e-14)
        assert pytest.approx(Jr, rel=1e-12, abs=1e-14) == J
        np.testing.assert_allclose(g, gr, rtol=1e-10, atol=1e-12)
        # central finite differences of the brute-force J
        h = 1e-6
        fd = np.array(
            [
                (brute_surrogate(B, w + h * e, gamma)[1] - brute_surrogate(B, w - h * e, gamma)[1])
                / (2 * h)
                for e in np.eye(m)
            ]
        )
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)


def test_surrogate_spec_example_constant_columns():
    w = np.full(10, 0.1)
    L, J, g = kc.surrogate_loo_auc(EXAMPLE, w, 10.0)
    Lr, Jr, gr = brute_surrogate(EXAMPLE, w, 10.0)
    np.testing.assert_allclose(L, Lr, rtol=1e-12)
    np.testing.assert_allclose(g, gr, rtol=1e-10, atol=1e-12)
    # constant column -> nan, adds nothing to J
    B = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=np.uint8)
    w = np.array([0.5, 0.3, 0.2])
    L, J, g = kc.surrogate_loo_auc(B, w, 4.0)
    Lr, Jr, gr = brute_surrogate(B, w, 4.0)
    assert np.isnan(L[0]) and not np.isnan(L[1:]).any()
    assert pytest.approx(Jr, rel=1e-13) == J
    np.testing.assert_allclose(g, gr, rtol=1e-10, atol=1e-13)


def test_surrogate_counts_equal_expanded_rows():
    rng = np.random.default_rng(5)
    for _ in range(8):
        n, m = rng.integers(1, 10), rng.integers(1, 8)
        B = random_B(rng, n, m)
        counts = rng.integers(0, 4, n)
        w = rng.random(m)
        gamma = 5.0
        L, J, g = kc.surrogate_loo_auc(B, w, gamma, counts)
        Lr, _Jr, gr = brute_surrogate(B, w, gamma, counts)
        np.testing.assert_allclose(L, Lr, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g, gr, rtol=1e-10, atol=1e-12)
        E = np.repeat(B, counts, axis=0)
        if E.shape[0] == 0:
            assert np.isnan(L).all() and J == 0.0 and (g == 0).all()
            continue
        Le, Je, ge = kc.surrogate_loo_auc(E, w, gamma)
        np.testing.assert_allclose(L, Le, rtol=1e-12, atol=1e-14)
        assert pytest.approx(Je, rel=1e-12, abs=1e-14) == J
        np.testing.assert_allclose(g, ge, rtol=1e-10, atol=1e-12)


def test_surrogate_many_columns_vs_brute():
    """More columns than the kernel's 64 fixed chunks, rows with multiplicities."""
    rng = np.random.default_rng(17)
    B = random_B(rng, 37, 150, 0.35)
    counts = rng.integers(0, 3, 37)
    w = rng.random(150)
    w /= w.sum()
    for c in (None, counts):
        for gamma, scale in ((10.0, 1.0), (10.0, 300.0), (10.0, 1000.0)):
            s = B @ (w * scale)
            span = gamma * (np.ptp(s) + scale * w.max())
            assert (span < 600) == (scale < 1000)  # the last one takes the overflow fallback
            L, J, g = kc.surrogate_loo_auc(B, w * scale, gamma, c, n_threads=2)
            Lr, Jr, gr = brute_surrogate(B, w * scale, gamma, c)
            np.testing.assert_allclose(L, Lr, rtol=1e-11, atol=1e-13)
            assert pytest.approx(Jr, rel=1e-11, abs=1e-13) == J
            np.testing.assert_allclose(g, gr, rtol=1e-9, atol=1e-11 * max(1.0, np.abs(gr).max()))


@pytest.mark.parametrize("gamma", [290.0, 400.0, 5000.0])
def test_surrogate_large_gamma_overflow_paths(gamma):
    """gamma * (range(s) + max w) beyond ~600 switches to the stable per-pair sigmoid;
    both regimes must match the stable brute force."""
    rng = np.random.default_rng(6)
    for _ in range(5):
        n, m = 10, 8
        B = random_B(rng, n, m)
        w = rng.random(m) + 0.1
        w /= w.sum()
        if gamma > 1000:
            w = w * 3.0
        span = gamma * (np.ptp(B @ w) + w.max())
        if gamma == 290.0:
            assert span <= 600  # fast path close to its limit
        if gamma == 5000.0:
            assert span > 600  # overflow fallback
        L, J, g = kc.surrogate_loo_auc(B, w, gamma)
        Lr, Jr, gr = brute_surrogate(B, w, gamma)
        assert np.all(np.isfinite(g))
        np.testing.assert_array_equal(np.isnan(L), np.isnan(Lr))
        np.testing.assert_allclose(L, Lr, rtol=1e-9, atol=1e-12)
        assert pytest.approx(Jr, rel=1e-9, abs=1e-12) == J
        scale = max(1.0, np.abs(gr).max())
        np.testing.assert_allclose(g, gr, rtol=1e-8, atol=1e-10 * scale)


def test_surrogate_edges():
    L, J, g = kc.surrogate_loo_auc(np.zeros((4, 0), np.uint8), np.zeros(0), 10.0)
    assert L.shape == (0,) and g.shape == (0,) and J == 0.0
    L, J, g = kc.surrogate_loo_auc(np.array([[1, 0]], np.uint8), [0.5, 0.5], 10.0)
    assert np.isnan(L).all() and J == 0.0
    np.testing.assert_array_equal(g, [0.0, 0.0])


# --------------------------------------------------------------------------------------
# aces_o_fit
# --------------------------------------------------------------------------------------


def test_aces_o_fit_matches_numpy_adam():
    rng = np.random.default_rng(7)
    cases = [(EXAMPLE, np.zeros(10), np.array([1] * 8 + [0, 0]), None)]
    for _ in range(3):
        n, m = rng.integers(3, 10), rng.integers(2, 9)
        B = random_B(rng, n, m)
        active = (rng.random(m) < 0.8).astype(np.uint8)
        logits0 = rng.normal(size=m)
        counts = rng.integers(1, 4, n) if rng.random() < 0.5 else None
        cases.append((B, logits0, active, counts))
    for B, logits0, active, counts in cases:
        for gamma, lr, steps in [(10.0, 0.05, 25), (3.0, 0.01, 7)]:
            w, obj = kc.aces_o_fit(B, logits0, active, gamma, lr, steps, counts)
            wr, objr = numpy_aces_o_fit(B, logits0, active, gamma, lr, steps, counts)
            assert w.shape == (B.shape[1],) and obj.shape == (steps + 1,)
            np.testing.assert_allclose(w, wr, rtol=0, atol=1e-9)
            np.testing.assert_allclose(obj, objr, rtol=0, atol=1e-9)
            assert (w[active == 0] == 0).all()
            assert w.sum() == pytest.approx(1.0, abs=1e-12)
            # objective[0] is J at softmax(logits0)
            w0 = softmax_active(np.asarray(logits0, float), np.asarray(active))
            assert obj[0] == pytest.approx(kc.surrogate_loo_auc(B, w0, gamma, counts)[1], abs=1e-12)


def test_aces_o_fit_counts_equal_expanded_rows():
    rng = np.random.default_rng(8)
    B = random_B(rng, 8, 12)
    counts = rng.integers(0, 4, 8)
    counts[0] = 2
    active = np.ones(12, bool)
    w1, o1 = kc.aces_o_fit(B, np.zeros(12), active, 10.0, 0.01, 30, counts)
    w2, o2 = kc.aces_o_fit(np.repeat(B, counts, axis=0), np.zeros(12), active, 10.0, 0.01, 30)
    np.testing.assert_allclose(w1, w2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(o1, o2, rtol=0, atol=1e-12)


def test_aces_o_fit_edges():
    B = random_B(np.random.default_rng(9), 6, 5)
    w, obj = kc.aces_o_fit(B, np.zeros(5), np.zeros(5, np.uint8), 10.0, 0.01, 4)
    np.testing.assert_array_equal(w, np.zeros(5))
    np.testing.assert_array_equal(obj, np.zeros(5))
    w, obj = kc.aces_o_fit(B, np.arange(5.0), np.ones(5, bool), 10.0, 0.01, 0)
    np.testing.assert_allclose(w, softmax_active(np.arange(5.0), np.ones(5)), rtol=1e-15)
    assert obj.shape == (1,)
    # inactive logits may be non-finite, and never matter
    lg = np.array([0.0, -np.inf, 1.0, np.nan, 0.5])
    act = np.array([1, 0, 1, 0, 1])
    w, obj = kc.aces_o_fit(B, lg, act, 10.0, 0.01, 3)
    assert w[1] == 0 and w[3] == 0 and np.isfinite(obj).all()
    w, obj = kc.aces_o_fit(
        np.zeros((3, 0), np.uint8), np.zeros(0), np.zeros(0, bool), 10.0, 0.01, 2
    )
    assert w.shape == (0,) and obj.shape == (3,) and (obj == 0).all()


# --------------------------------------------------------------------------------------
# threads
# --------------------------------------------------------------------------------------


def test_thread_count_does_not_change_results():
    rng = np.random.default_rng(10)
    B = random_B(rng, 400, 300, 0.3)
    counts = rng.integers(0, 3, 400)
    w = rng.random(300)
    for args in [(None, None), (w, None), (None, counts), (w, counts)]:
        a = kc.loo_auc(B, *args, n_threads=1)
        b = kc.loo_auc(B, *args, n_threads=2)
        c = kc.loo_auc(B, *args)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    Bs = random_B(rng, 60, 200, 0.3)
    ws = rng.random(200) / 100
    r1 = kc.surrogate_loo_auc(Bs, ws, 10.0, n_threads=1)
    r2 = kc.surrogate_loo_auc(Bs, ws, 10.0, n_threads=2)
    for x, y in zip(r1, r2):
        np.testing.assert_array_equal(x, y)
    act = np.ones(200, np.uint8)
    f1 = kc.aces_o_fit(Bs, np.zeros(200), act, 10.0, 0.01, 5, n_threads=1)
    f2 = kc.aces_o_fit(Bs, np.zeros(200), act, 10.0, 0.01, 5, n_threads=2)
    for x, y in zip(f1, f2):
        np.testing.assert_array_equal(x, y)


def test_threads_and_gil_release_concurrent_calls():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(11)
    B = random_B(rng, 300, 200)
    ref = kc.loo_auc(B, n_threads=1)
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda _: kc.loo_auc(B, n_threads=1), range(8)))
    for o in outs:
        np.testing.assert_array_equal(o, ref)


# --------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------


def test_bad_B_raises():
    B = random_B(np.random.default_rng(12), 6, 8)
    for fn in (
        lambda X: kc.loo_auc(X),
        lambda X: kc.surrogate_loo_auc(
            X, np.ones(X.shape[-1]) if hasattr(X, "shape") else [1.0], 1.0
        ),
        lambda X: kc.aces_o_fit(X, np.zeros(8), np.ones(8), 10.0, 0.01, 2),
    ):
        with pytest.raises(TypeError):
            fn(B.tolist())  # not an ndarray
        with pytest.raises(TypeError):
            fn(B.astype(np.float64))
        with pytest.raises(TypeError):
            fn(B.astype(np.int64))
        with pytest.raises(TypeError):
            fn(B.astype(np.int8))
        with pytest.raises(TypeError):
            fn(np.asfortranarray(np.vstack([B, B])[:, :8]))  # F-order
        with pytest.raises(TypeError):
            fn(np.hstack([B, B])[:, ::2])  # strided view, shape (6, 8)
        with pytest.raises(ValueError):
            fn(B.ravel())
        with pytest.raises(ValueError):
            fn(B[None])
        with pytest.raises(ValueError):
            fn(np.zeros((0, 8), np.uint8))


def test_bad_arguments_raise():
    # _core keeps the checks that guard memory and the kernels' preconditions;
    # parameter ranges (gamma, lr, tie_tol, ...) are the package's to validate
    B = random_B(np.random.default_rng(13), 6, 4)
    w = np.full(4, 0.25)
    with pytest.raises(ValueError):
        kc.loo_auc(B, np.ones(3))
    with pytest.raises(ValueError):
        kc.loo_auc(B, np.ones((2, 2)))
    for bad in (-0.1, np.nan, np.inf):
        ww = w.copy()
        ww[1] = bad
        with pytest.raises(ValueError):
            kc.loo_auc(B, ww)
        with pytest.raises(ValueError):
            kc.surrogate_loo_auc(B, ww, 10.0)
    with pytest.raises(ValueError):
        kc.loo_auc(B, np.full(4, 1e308))  # sum overflows
    with pytest.raises(TypeError):
        kc.loo_auc(B, np.array(["a", "b", "c", "d"]))
    with pytest.raises(ValueError):
        kc.loo_auc(B, counts=np.ones(5, np.int64))
    with pytest.raises(ValueError):
        kc.loo_auc(B, counts=np.array([1, 1, -1, 1, 1, 1]))
    with pytest.raises(TypeError):
        kc.loo_auc(B, counts=np.ones(6))  # float counts
    with pytest.raises(ValueError):
        kc.loo_auc(B, counts=np.full(6, 2**30))  # total too large
    with pytest.raises(ValueError, match="n_threads"):
        kc.loo_auc(B, n_threads=-4097)
    with pytest.raises(TypeError):
        kc.surrogate_loo_auc(B, None, 10.0)
    with pytest.raises(ValueError):
        kc.surrogate_loo_auc(B, w, 10.0, counts=[1, 2])
    with pytest.raises(ValueError, match="steps"):
        kc.aces_o_fit(B, np.zeros(4), np.ones(4), 10.0, 0.01, -1)
    with pytest.raises(ValueError):
        kc.aces_o_fit(B, np.zeros(3), np.ones(4), 10.0, 0.01, 3)
    with pytest.raises(ValueError):
        kc.aces_o_fit(B, np.zeros(4), np.ones(5), 10.0, 0.01, 3)
    with pytest.raises(ValueError):
        kc.aces_o_fit(B, np.zeros(4), np.ones(4), 10.0, 0.01, 3, counts=[-1, 1, 1, 1, 1, 1])
    with pytest.raises(ValueError, match="method code"):
        kc.rerank(B, 7)


SIGNATURES = {
    "loo_auc": "B weights counts tie_tol dedup n_threads",
    "surrogate_loo_auc": "B weights gamma counts dedup n_threads",
    "aces_o_fit": "B logits0 active gamma lr steps counts dedup n_threads",
    "rerank": "B method tie_tol gamma lr steps top_k warm dedup power n_threads",
    "rerank_batch": "tasks method tie_tol gamma lr steps top_k warm dedup power n_threads",
    "surrogate_loo_auc_binned": "B weights gamma bins counts path n_threads",
    "aces_o_fit_binned": "B logits0 active gamma lr steps bins counts path n_threads",
    "binned_grid_spacing": "B weights bins counts",
    "binned_error_bound": "gamma h weight_sum",
}


def _valid_kwargs(name):
    B = random_B(np.random.default_rng(14), 5, 4)
    values = {
        "B": B,
        "tasks": [B],
        "weights": np.full(4, 0.25),
        "counts": None,
        "tie_tol": 1e-9,
        "dedup": None,
        "n_threads": 1,
        "gamma": 10.0,
        "logits0": np.zeros(4),
        "active": np.ones(4),
        "lr": 0.01,
        "steps": 2,
        "method": 3,
        "top_k": None,
        "warm": False,
        "bins": 16,
        "path": "auto",
        "h": 0.01,
        "weight_sum": 1.0,
        "power": None,
    }
    return {k: values[k] for k in SIGNATURES[name].split()}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_core_functions_are_keyword_only_without_defaults(name):
    fn = getattr(_core, name)
    kwargs = _valid_kwargs(name)
    fn(**kwargs)  # every argument given by keyword: accepted
    with pytest.raises(TypeError):
        fn(*kwargs.values())  # positionally: refused
    for k in kwargs:  # any argument left out: refused (no defaults)
        with pytest.raises(TypeError, match=f"missing required keyword argument '{k}'"):
            fn(**{key: v for key, v in kwargs.items() if key != k})
    with pytest.raises(TypeError, match="unexpected keyword argument 'extra'"):
        fn(**kwargs, extra=1)
    with pytest.raises(TypeError, match="keyword arguments only"):
        fn(next(iter(kwargs.values())), **dict(list(kwargs.items())[1:]))
    # introspection shows the same: every parameter keyword-only, none with a default
    params = inspect.signature(fn).parameters
    assert list(params) == SIGNATURES[name].split()
    assert all(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params.values())


@pytest.mark.parametrize("name", ["aces_o_fit", "aces_o_fit_binned", "rerank", "rerank_batch"])
@pytest.mark.parametrize("steps", [-1, 2**60, 2**63 - 1, 2**63, 2**64, -(2**70)])
def test_extreme_steps_are_refused_before_any_allocation(name, steps):
    # the objective holds steps + 1 float64 values: beyond an array's largest
    # length (and at 2**63 - 1, where steps + 1 overflows) the binding refuses
    kwargs = _valid_kwargs(name)
    kwargs["steps"] = steps
    with pytest.raises(ValueError, match="steps must be in"):
        getattr(_core, name)(**kwargs)


@pytest.mark.parametrize(
    "name",
    [
        "loo_auc",
        "surrogate_loo_auc",
        "aces_o_fit",
        "rerank",
        "rerank_batch",
        "surrogate_loo_auc_binned",
        "aces_o_fit_binned",
    ],
)
@pytest.mark.parametrize("n_threads", [-4097, 4097, 2**31, -(2**31), 2**64])
def test_extreme_thread_counts_are_refused(name, n_threads):
    kwargs = _valid_kwargs(name)
    kwargs["n_threads"] = n_threads
    with pytest.raises(ValueError, match="n_threads must be in"):
        getattr(_core, name)(**kwargs)


def test_extreme_integer_arguments():
    B = random_B(np.random.default_rng(15), 9, 5)
    # top_k beyond int64 (or n) keeps every row, like top_k=None
    for name in ("rerank", "rerank_batch"):
        kwargs = _valid_kwargs(name)
        kwargs.update({"B": B} if name == "rerank" else {"tasks": [B]}, steps=3)
        ref = getattr(_core, name)(**{**kwargs, "top_k": None})
        for top_k in (9, 2**63 - 1, 2**63, 2**100):
            got = getattr(_core, name)(**{**kwargs, "top_k": top_k})
            for x, y in zip(
                got if name == "rerank" else got[0], ref if name == "rerank" else ref[0]
            ):
                if isinstance(x, np.ndarray):
                    np.testing.assert_array_equal(x, y)
        for top_k, exc in (
            (0, ValueError),
            (-(2**70), ValueError),
            (2.0, TypeError),
            (True, TypeError),
        ):
            with pytest.raises(exc, match="top_k"):
                getattr(_core, name)(**{**kwargs, "top_k": top_k})
    for name in ("surrogate_loo_auc_binned", "aces_o_fit_binned", "binned_grid_spacing"):
        for bins in (1, 2**16 + 1, 2**63, -(2**64)):
            with pytest.raises(ValueError, match="bins must be in"):
                getattr(_core, name)(**{**_valid_kwargs(name), "bins": bins})
        with pytest.raises(TypeError, match="bins must be an int"):
            getattr(_core, name)(**{**_valid_kwargs(name), "bins": 16.0})
    # NumPy integers are integers
    kwargs = _valid_kwargs("aces_o_fit")
    _w, obj = _core.aces_o_fit(**{**kwargs, "steps": np.int64(3), "n_threads": np.uint8(1)})
    assert obj.shape == (4,)


@pytest.mark.parametrize("total", [65535, 65536, 65537, 100_000])
def test_uniform_counts_across_int32_accumulator_boundary(total):
    # the uniform kernel switches accumulator width when the total multiplicity
    # reaches 2**16; both sides of the switch must stay exact
    from aces_fast.backends.numpy import loo_auc as reference

    rng = np.random.default_rng(total)
    B = (rng.random((7, 5)) < 0.5).astype(np.uint8)
    B[0], B[1] = 1, 0  # keep every column non-constant
    counts = rng.integers(1, 100, size=7).astype(np.int64)
    counts[0] += total - counts.sum()
    assert counts.sum() == total and counts.min() >= 1
    got = kc.loo_auc(B, None, counts)
    want = reference(B, None, 0.0, counts)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
