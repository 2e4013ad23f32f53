"""The ``numba`` backend against the NumPy reference, plus its own guarantees.

JIT compilation dominates the cost of this module, so one module-scoped fixture
runs :func:`numba_backend.warmup` (which compiles every kernel) and every test
reuses the compiled code. Each kernel test runs twice: with the serial build
(``parallel_min_work`` huge) and with the ``parallel=True`` build (``0``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

pytest.importorskip("numba", reason="numba is not installed")

import aces_fast as af
from aces_fast._registry import method_params
from aces_fast.backends import get_backend
from aces_fast.backends import numba as numba_backend
from aces_fast.backends import numpy as numpy_ref
from helpers import EXAMPLE, NARROW_SIZES, narrow_lane_inputs, random_matrix

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXACT = dict(rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def warm():
    """Compile everything once for the module; returns ``warmup()``'s info dict."""
    return numba_backend.warmup()


@pytest.fixture(params=["serial", "parallel"])
def nb(request, warm):
    """A NumbaBackend forced onto its serial or its parallel build."""
    return numba_backend.NumbaBackend(parallel_min_work=10**18 if request.param == "serial" else 0)


def _cases(seed: int = 0):
    """(B, weights, counts) triples covering the awkward shapes."""
    rng = np.random.default_rng(seed)
    cases = []
    for n, m, dup in [(1, 5, 0), (2, 1, 0), (7, 0, 0), (9, 6, 4), (30, 12, 12), (64, 40, 20)]:
        B = random_matrix(rng, n, m, density=0.45, dup_rows=dup)
        if m >= 3:
            B[:, 0] = 1  # constant columns stay nan / zero
            B[:, 1] = 0
        w = rng.random(m)
        counts = rng.integers(0, 4, size=n)
        cases.append((B, w, None))
        cases.append((B, w, counts))
    return cases


# ---------------------------------------------------------------------------
# LOO-AUC


def test_spec_example_values(nb):
    expected = np.array([2 / 3, 2 / 3, 1 / 2, 2 / 3, 1 / 2, 2 / 5, 7 / 12, 7 / 24, 0, 0])
    np.testing.assert_array_equal(nb.loo_auc(EXAMPLE, None, 1e-9), expected)
    # w = 1/m is uniform in exact arithmetic: float rounding must not break ties
    w = np.full(10, 1 / 10)
    np.testing.assert_array_equal(nb.loo_auc(EXAMPLE, w, 1e-9), expected)


@pytest.mark.parametrize("case", range(12))
def test_loo_auc_matches_reference(nb, case):
    B, w, counts = _cases()[case]
    for weights in (None, w):
        got = nb.loo_auc(B, weights, 1e-9, counts)
        ref = numpy_ref.loo_auc(B, weights, 1e-9, counts)
        assert got.shape == (B.shape[1],) and got.dtype == np.float64
        np.testing.assert_allclose(got, ref, **EXACT)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))


@pytest.mark.parametrize("m", [3, 7, 10, 33])
def test_exact_tie_weights_equal_uniform(nb, m):
    rng = np.random.default_rng(m)
    B = random_matrix(rng, 200, m, density=0.5, dup_rows=50)
    uniform = nb.loo_auc(B, None, 1e-9)
    np.testing.assert_array_equal(nb.loo_auc(B, np.full(m, 1.0 / m), 1e-9), uniform)
    np.testing.assert_array_equal(nb.loo_auc(B, np.full(m, 0.1), 1e-9), uniform)


def test_weighted_ties_follow_tolerance(nb):
    # test 0: the passer's leave-one-out score is 2 - 1 = 1, the failer's 1 + 2e-9:
    # a tie within tie_tol * sum(w) ~ 3e-9, a loss for the passer beyond it
    B = np.array([[1, 1, 0], [0, 0, 1]], dtype=np.uint8)
    w = np.array([1.0, 1.0, 1.0 + 2e-9])
    tight = nb.loo_auc(B, w, 1e-12)
    loose = nb.loo_auc(B, w, 1e-9)
    np.testing.assert_allclose(tight, numpy_ref.loo_auc(B, w, 1e-12), **EXACT)
    np.testing.assert_allclose(loose, numpy_ref.loo_auc(B, w, 1e-9), **EXACT)
    assert tight[0] == 0.0 and loose[0] == 0.5


def test_uniform_loo_auc_in_narrow_lanes_is_exact(nb):
    """The uniform kernel counts in uint16 lanes while the total multiplicity is at
    most 361 (2 wins + ties < 2^16, sums modulo 2^16), in uint32 above: both sides
    of the switch, with multiplicities as counts and as repeated rows (which the
    kernel merges), equal the exact reference bit for bit."""
    for n in NARROW_SIZES:
        for with_counts in (False, True):
            B, counts = narrow_lane_inputs(n, with_counts)
            want = numpy_ref.loo_auc(B, None, 0.0, counts)
            np.testing.assert_array_equal(
                nb.loo_auc(B, None, 0.0, counts), want, err_msg=f"n={n} counts={with_counts}"
            )
            rows = B if counts is None else np.repeat(B, counts, axis=0)
            L, colsum, _ = nb.loo_auc_uniform(rows)
            np.testing.assert_array_equal(L, want, err_msg=f"n={n} repeated={with_counts}")
            np.testing.assert_array_equal(colsum, rows.sum(axis=0))


@pytest.mark.parametrize("method", ["majority", "aces-c", "aces-o"])
@pytest.mark.parametrize("threads", [1, 2])
def test_batch_names_the_lowest_bad_task(method, threads, warm):
    """Each task checks its own values on the batch's threads, largest task first;
    with two bad tasks the error still names the lower one, and no result comes
    back."""
    rng = np.random.default_rng(3)
    tasks = [random_matrix(rng, 20 + 10 * t, 30, density=0.5) for t in range(8)]
    tasks[6][4, 7] = 2  # larger, so it runs (and fails) first
    tasks[2][0, 0] = 5
    with pytest.raises(ValueError, match=r"^task 2: .*only 0 and 1.*found value 5"):
        af.rerank_batch(tasks, method, backend="numba", n_threads=threads)
    tasks[2][0, 0] = 1
    with pytest.raises(ValueError, match=r"^task 6: .*found value 2"):
        af.rerank_batch(tasks, method, backend="numba", n_threads=threads)


def test_counts_act_as_repeated_rows(nb):
    rng = np.random.default_rng(5)
    B = random_matrix(rng, 25, 15, density=0.4)
    counts = rng.integers(0, 4, size=25)
    counts[:3] = [0, 3, 1]
    repeated = np.repeat(B, counts, axis=0)
    w = rng.random(15)
    w /= w.sum()
    for weights in (None, w):
        np.testing.assert_allclose(
            nb.loo_auc(B, weights, 1e-9, counts), nb.loo_auc(repeated, weights, 1e-9), **EXACT
        )
    L1, J1, g1 = nb.surrogate(B, w, 10.0, counts)
    L2, J2, g2 = nb.surrogate(repeated, w, 10.0)
    np.testing.assert_allclose(L1, L2, **EXACT)
    assert pytest.approx(J2, abs=1e-12) == J1
    np.testing.assert_allclose(g1, g2, **EXACT)
    active = (rng.random(15) < 0.8).astype(np.uint8)
    W1, obj1 = nb.aces_o_fit(B, np.zeros(15), active, 10.0, 0.05, 40, counts)
    W2, obj2 = nb.aces_o_fit(repeated, np.zeros(15), active, 10.0, 0.05, 40)
    np.testing.assert_allclose(W1, W2, rtol=0, atol=1e-9)
    np.testing.assert_allclose(obj1, obj2, rtol=0, atol=1e-12)


def test_large_matrix_matches_reference(nb):
    rng = np.random.default_rng(11)
    B = random_matrix(rng, 400, 150, density=0.3, dup_rows=100)
    w = rng.random(150)
    np.testing.assert_allclose(nb.loo_auc(B, None, 1e-9), numpy_ref.loo_auc(B, None, 1e-9), **EXACT)
    np.testing.assert_allclose(nb.loo_auc(B, w, 1e-9), numpy_ref.loo_auc(B, w, 1e-9), **EXACT)


# ---------------------------------------------------------------------------
# surrogate and ACES-O


@pytest.mark.parametrize("case", range(12))
def test_surrogate_matches_reference(nb, case):
    B, w, counts = _cases(1)[case]
    w = w / w.sum() if w.size else w
    L, J, g = nb.surrogate(B, w, 10.0, counts)
    Lr, Jr, gr = numpy_ref.surrogate(B, w, 10.0, counts)
    np.testing.assert_allclose(L, Lr, **EXACT)
    np.testing.assert_array_equal(np.isnan(L), np.isnan(Lr))
    assert isinstance(J, float) and pytest.approx(Jr, abs=1e-12) == J
    np.testing.assert_allclose(g, gr, **EXACT)


@pytest.mark.parametrize("scale", [3.0, 40.0, 500.0])
def test_surrogate_wide_score_range(nb, scale):
    # gamma * (score span + w_j) from ~250 (fast factorized path) past the
    # overflow limit (stable per-pair sigmoid), and a mix across columns
    rng = np.random.default_rng(int(scale))
    B = random_matrix(rng, 40, 25, density=0.5, dup_rows=5)
    w = rng.random(25) * scale / 25
    w[:3] *= 20
    L, J, g = nb.surrogate(B, w, 20.0)
    Lr, Jr, gr = numpy_ref.surrogate(B, w, 20.0)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(L, Lr, **EXACT)
    assert pytest.approx(Jr, rel=1e-12, abs=1e-12) == J
    # dJ/dw sums terms as large as gamma * w_j ~ 1e4 that cancel to O(1): two
    # summation orders agree to ~1e-16 of the terms, not of the result
    tol = 1e-15 * 20.0 * w.sum()
    np.testing.assert_allclose(g, gr, rtol=0, atol=max(tol, 1e-12))


def test_surrogate_gradient_is_the_derivative(nb):
    rng = np.random.default_rng(3)
    B = random_matrix(rng, 20, 8, density=0.5)
    w = rng.random(8)
    w /= w.sum()
    _, _, g = nb.surrogate(B, w, 10.0)
    h = 1e-6
    for k in range(8):
        e = np.zeros(8)
        e[k] = h
        fd = (nb.surrogate(B, w + e, 10.0)[1] - nb.surrogate(B, w - e, 10.0)[1]) / (2 * h)
        assert g[k] == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("case", range(12))
def test_aces_o_fit_matches_reference(nb, case):
    B, _w, counts = _cases(2)[case]
    m = B.shape[1]
    rng = np.random.default_rng(case)
    active = (B.sum(axis=0) % B.shape[0] != 0).astype(np.uint8)
    if m > 4:
        active[4] = 0  # an inactive column that is not constant keeps weight 0
    logits0 = rng.normal(size=m)
    W, obj = nb.aces_o_fit(B, logits0, active, 10.0, 0.05, 30, counts)
    Wr, objr = numpy_ref.aces_o_fit(B, logits0, active, 10.0, 0.05, 30, counts)
    assert W.shape == (m,) and obj.shape == (31,)
    np.testing.assert_allclose(W, Wr, rtol=0, atol=1e-6)
    np.testing.assert_allclose(obj, objr, rtol=0, atol=1e-8)
    assert np.all(W[active == 0] == 0)
    if active.any():
        assert W.sum() == pytest.approx(1.0)


def test_aces_o_fit_paper_defaults_to_1e_10(nb):
    rng = np.random.default_rng(8)
    B = random_matrix(rng, 24, 60, density=0.5, dup_rows=6)
    active = ((B.sum(axis=0) > 0) & (B.sum(axis=0) < 24)).astype(np.uint8)
    W, obj = nb.aces_o_fit(B, np.zeros(60), active, 10.0, 0.01, 90)
    Wr, objr = numpy_ref.aces_o_fit(B, np.zeros(60), active, 10.0, 0.01, 90)
    np.testing.assert_allclose(W, Wr, rtol=0, atol=1e-10)
    np.testing.assert_allclose(obj, objr, rtol=0, atol=1e-12)
    assert obj[-1] > obj[0]  # the ascent does ascend


def test_aces_o_fit_degenerate(nb):
    B = np.array([[1, 0, 1], [1, 1, 0]], dtype=np.uint8)
    W, obj = nb.aces_o_fit(B, np.zeros(3), np.zeros(3, np.uint8), 10.0, 0.01, 5)
    np.testing.assert_array_equal(W, np.zeros(3))
    np.testing.assert_array_equal(obj, np.zeros(6))
    W, obj = nb.aces_o_fit(B, np.array([0.0, 1.0, 2.0]), np.ones(3, np.uint8), 10.0, 0.01, 0)
    np.testing.assert_allclose(
        W, numpy_ref.softmax_masked(np.array([0.0, 1.0, 2.0]), np.ones(3, bool)), **EXACT
    )
    assert obj.shape == (1,)
    W, obj = nb.aces_o_fit(
        np.zeros((3, 0), np.uint8), np.zeros(0), np.zeros(0, np.uint8), 10.0, 0.01, 3
    )
    assert W.shape == (0,) and np.all(obj == 0)


def _kernels():
    return numba_backend._load_kernels()


def _forced_kernels(B, w, gamma, counts, parallel):
    """``{"rows": (L, J, grad), "columns": (L, J, grad)}``: the surrogate of the
    row-pair kernel and of the per-column kernel, each forced, on the same merged rows."""
    k = _kernels()
    n, m = B.shape
    Bd, cd = k.distinct_rows(B, np.ones(n, np.int64) if counts is None else counts)
    c = cd.astype(np.float64)
    BT, _, PF = k._surrogate_layout(Bd, np.arange(m), c)
    X = k._row_pair_matrix(BT, PF.shape[0])
    out = {}
    L, grad = np.full(m, np.nan), np.zeros(m)
    J, done = k._surrogate_rows(X, PF, w, gamma, c, L, grad, parallel)
    assert done
    out["rows"] = (L, J, grad)
    L, grad = np.full(m, np.nan), np.zeros(m)
    out["columns"] = (L, k.surrogate_bt(BT, w, gamma, c, L, grad, parallel), grad)
    return out


def _kernel_cases():
    """The cases of :func:`_cases` with a test and a present row (the row-pair
    kernel needs both; its layout is never chosen otherwise)."""
    return [
        (B, w, c)
        for B, w, c in _cases(3)
        if B.shape[1] > 0 and (B.shape[0] if c is None else np.count_nonzero(c)) > 0
    ]


@pytest.mark.parametrize("case", range(len(_kernel_cases())))
def test_both_surrogate_kernels_match_reference(warm, case):
    # the cost model picks one kernel per input: force each on every case
    B, w, counts = _kernel_cases()[case]
    w = w / w.sum()
    Lr, Jr, gr = numpy_ref.surrogate(B, w, 10.0, counts)
    serial = _forced_kernels(B, w, 10.0, counts, False)
    for name, (L, J, g) in serial.items():
        np.testing.assert_allclose(L, Lr, **EXACT, err_msg=name)
        np.testing.assert_array_equal(np.isnan(L), np.isnan(Lr))
        assert pytest.approx(Jr, abs=1e-12) == J, name
        np.testing.assert_allclose(g, gr, **EXACT, err_msg=name)
    for name, got in _forced_kernels(B, w, 10.0, counts, True).items():
        for a, b in zip(got, serial[name]):
            np.testing.assert_array_equal(a, b)


def test_row_pair_kernel_several_blocks(warm):
    # more columns than one row-pair block: partial gradients summed across blocks,
    # padded columns, serial and parallel builds identical
    k = _kernels()
    rng = np.random.default_rng(17)
    m = 2 * k.ROW_PAIR_BLOCK + 37
    B = random_matrix(rng, 24, m, density=0.4, dup_rows=8)
    B[:, :5] = 1
    counts = rng.integers(0, 4, size=24)
    w = rng.random(m)
    w /= w.sum()
    Lr, Jr, gr = numpy_ref.surrogate(B, w, 10.0, counts)
    for parallel in (False, True):
        L, J, g = _forced_kernels(B, w, 10.0, counts, parallel)["rows"]
        np.testing.assert_allclose(L, Lr, **EXACT)
        assert pytest.approx(Jr, abs=1e-12) == J
        np.testing.assert_allclose(g, gr, **EXACT)
    serial = numba_backend.NumbaBackend(parallel_min_work=10**18)
    parallel = numba_backend.NumbaBackend(parallel_min_work=0)
    active = np.ones(m, np.uint8)
    for a, b in zip(
        serial.aces_o_fit(B, np.zeros(m), active, 10.0, 0.01, 5, counts),
        parallel.aces_o_fit(B, np.zeros(m), active, 10.0, 0.01, 5, counts),
    ):
        np.testing.assert_array_equal(a, b)


def test_row_pair_kernel_declines_overflow(warm):
    # gamma * (score span + w_j) beyond the factorized form's limit: the row-pair
    # kernel leaves the outputs alone and the public call falls back per column
    k = _kernels()
    rng = np.random.default_rng(2)
    B = random_matrix(rng, 12, 40, density=0.5)
    w = rng.random(40) * 2.0
    c = np.ones(12)
    _BT, X, PF = k._surrogate_layout(B, np.arange(40), c)
    assert X.shape[0] == 13  # few rows: the row-pair layout (and its zero row)
    L, grad = np.full(40, 7.0), np.full(40, 7.0)
    J, done = k._surrogate_rows(X, PF, w, 100.0, c, L, grad, False)
    assert not done and np.all(L == 7.0) and np.all(grad == 7.0)
    L, J, g = numba_backend.NumbaBackend().surrogate(B, w, 100.0)
    Lr, Jr, gr = numpy_ref.surrogate(B, w, 100.0)
    np.testing.assert_allclose(L, Lr, **EXACT)
    assert pytest.approx(Jr, rel=1e-12, abs=1e-12) == J
    np.testing.assert_allclose(g, gr, rtol=0, atol=1e-15 * 100.0 * w.sum())


def test_cost_model_picks_row_pairs_for_aces_o_rows(warm):
    k = _kernels()
    rng = np.random.default_rng(6)
    top = random_matrix(rng, 24, 500)  # ACES-O's default top_k rows
    many = random_matrix(rng, 300, 200)
    assert k._surrogate_layout(top, np.arange(500), np.ones(24))[1].shape == (25, 504)
    assert k._surrogate_layout(many, np.arange(200), np.ones(300))[1].shape[0] == 0


@pytest.mark.parametrize("size", [2, 5, 32, 33, 120])
def test_snap_classes_matches_reference(warm, size):
    # classes up to _INSERTION_SORT_MAX members are sorted in place, larger ones
    # by a merge sort: both take the reference's snapping decisions and values
    k = _kernels()
    rng = np.random.default_rng(size)
    m = 3 * size + 7
    base = rng.integers(0, 6, size=m).astype(np.float64)
    x = base + rng.choice([0.0, 3e-11, 2e-10], size=m)  # ties, near-ties, chains
    x[rng.choice(m, size=max(1, m // 10), replace=False)] = rng.choice(
        [np.nan, np.inf, -np.inf], size=max(1, m // 10)
    )
    perm = rng.permutation(m)
    classes = [perm[:size], perm[size : 2 * size], perm[2 * size : 2 * size + 2]]
    members = np.concatenate(classes).astype(np.int64)
    bounds = np.cumsum([0] + [len(c) for c in classes]).astype(np.int64)
    got = x.copy()
    next_members = np.empty(m, np.int64)
    next_bounds = np.zeros(m + 1, np.int64)
    n_next = k._snap_classes(got, members, bounds, len(classes), 1e-10, next_members, next_bounds)
    want = x.copy()
    refined = numpy_ref.snap_classes(want, [c.copy() for c in classes], 1e-10)
    np.testing.assert_array_equal(got, want)
    assert n_next == len(refined)
    got_classes = [sorted(next_members[next_bounds[i] : next_bounds[i + 1]]) for i in range(n_next)]
    assert sorted(got_classes) == sorted(sorted(c) for c in refined)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 37, 1000])
def test_exp_inplace_matches_libm(warm, n):
    # the vectorized exp of the ACES-O softmax and surrogate: within 1 ulp of
    # libm from -708 up, 0 below, inf above 709, NaN kept;
    # equal inputs give equal outputs wherever they sit (vector body or remainder)
    k = _kernels()
    rng = np.random.default_rng(n)
    x = np.concatenate([rng.uniform(-708.0, 709.0, n), rng.uniform(-1.0, 1.0, n)])
    got = x.copy()
    k._exp_inplace(got)
    want = np.exp(x)
    ok = x >= -708.0
    assert np.all(np.abs(got[ok] - want[ok]) <= np.spacing(want[ok]))
    assert np.all(got[~ok] == 0.0)  # libm: at most 3.3e-308 there
    special = np.array([0.0, -0.0, np.nan, -np.inf, np.inf, -750.0, -708.5, 709.5, 750.0])
    got = special.copy()
    k._exp_inplace(got)
    np.testing.assert_array_equal(got, [1.0, 1.0, np.nan, 0.0, np.inf, 0.0, 0.0, np.inf, np.inf])
    same = np.full(n + 3, 0.3)
    k._exp_inplace(same)
    assert np.all(same == same[0])


def test_stable_order_sorts_keys_and_rows(warm):
    k = _kernels()
    rng = np.random.default_rng(12)
    keys = rng.integers(0, 6, size=301).astype(np.float64)  # many ties
    np.testing.assert_array_equal(k.stable_order(keys), np.argsort(keys, kind="stable"))
    B = random_matrix(rng, 301, 6, dup_rows=120)
    # np.lexsort: stable, last key most significant
    np.testing.assert_array_equal(k.stable_order(B), np.lexsort(B.T[::-1]))
    assert k.stable_order(np.empty(0)).shape == (0,)


def test_distinct_rows_merges_counts(warm):
    k = _kernels()
    rng = np.random.default_rng(13)
    B = random_matrix(rng, 80, 9, dup_rows=40)
    counts = rng.integers(0, 3, size=80)
    rows, cnt = k.distinct_rows(B, counts)
    keep = counts > 0
    want_rows, inverse = np.unique(B[keep], axis=0, return_inverse=True)
    want_cnt = np.zeros(want_rows.shape[0], np.int64)
    np.add.at(want_cnt, inverse.reshape(-1), counts[keep])
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(cnt, want_cnt)
    # nothing to drop or merge: the input itself, no copy
    rows, cnt = k.distinct_rows(want_rows, want_cnt)
    assert np.shares_memory(rows, want_rows) and np.array_equal(cnt, want_cnt)
    # no tests: one empty row counting every present row
    rows, cnt = k.distinct_rows(np.zeros((5, 0), np.uint8), np.array([1, 0, 2, 1, 1]))
    assert rows.shape == (1, 0) and cnt.tolist() == [5]


# ---------------------------------------------------------------------------
# builds, threads, warmup


def test_serial_and_parallel_builds_agree_bitwise(warm):
    serial = numba_backend.NumbaBackend(parallel_min_work=10**18)
    parallel = numba_backend.NumbaBackend(parallel_min_work=0)
    rng = np.random.default_rng(21)
    B = random_matrix(rng, 300, 200, density=0.4, dup_rows=60)
    w = rng.random(200)
    w /= w.sum()
    counts = rng.integers(0, 3, size=300)
    for backend_args in [(None, 1e-9), (w, 1e-9)]:
        np.testing.assert_array_equal(
            serial.loo_auc(B, *backend_args, counts), parallel.loo_auc(B, *backend_args, counts)
        )
    for a, b in zip(serial.surrogate(B, w, 10.0, counts), parallel.surrogate(B, w, 10.0, counts)):
        np.testing.assert_array_equal(a, b)
    active = np.ones(200, np.uint8)
    for a, b in zip(
        serial.aces_o_fit(B[:24], np.zeros(200), active, 10.0, 0.01, 20),
        parallel.aces_o_fit(B[:24], np.zeros(200), active, 10.0, 0.01, 20),
    ):
        np.testing.assert_array_equal(a, b)
    for init in ("uniform", "aces-c"):
        values = method_params("aces-o", dict(steps=20, init=init))
        a, b = (be.rerank(B, "aces-o", values) for be in (serial, parallel))
        for field in ("weights", "scores", "order", "objective"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def _hammer(backend, jobs, n_threads=4, rounds=3):
    """Run every job from ``n_threads`` threads at once; return each thread's results."""
    barrier = threading.Barrier(n_threads)
    results = [None] * n_threads
    errors = []

    def work(t):
        try:
            barrier.wait()
            results[t] = [job(backend) for _ in range(rounds) for job in jobs]
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    return results


def test_concurrent_calls_from_threads_are_identical(warm):
    rng = np.random.default_rng(4)
    B = random_matrix(rng, 500, 300, density=0.4, dup_rows=100)
    w = rng.random(300)
    w /= w.sum()
    top = np.ascontiguousarray(B[:24])
    active = np.ones(300, np.uint8)
    jobs = [
        lambda be: be.loo_auc(B, None, 1e-9),
        lambda be: be.loo_auc(B, w, 1e-9),
        lambda be: be.surrogate(B, w, 10.0)[2],
        lambda be: be.aces_o_fit(top, np.zeros(300), active, 10.0, 0.01, 10)[0],
    ]
    parallel = numba_backend.NumbaBackend(parallel_min_work=0)
    expected = [job(parallel) for job in jobs]
    for per_thread in _hammer(parallel, jobs):
        for k, got in enumerate(per_thread):
            np.testing.assert_array_equal(got, expected[k % len(jobs)])


def _dispatchers():
    from numba.core.registry import CPUDispatcher

    kernels = numba_backend._load_kernels()
    return {name: obj for name, obj in vars(kernels).items() if isinstance(obj, CPUDispatcher)}


def test_warmup_compiles_every_signature(warm):
    assert warm["numba"] and warm["num_threads"] >= 1
    assert warm["threading_layer"] in ("tbb", "omp", "workqueue")
    again = numba_backend.warmup()
    assert again["compiled"] == 0 and again["loaded"] == 0  # a second warmup is a no-op
    facts = ("compiled", "loaded", "steps")  # what this call did, not the settings
    assert {k: v for k, v in again.items() if k not in facts} == {
        k: v for k, v in warm.items() if k not in facts
    }
    assert set(again["steps"]) == set(warm["steps"])
    # (kernels called only from other kernels have no signature of their own
    # when their callers were loaded from the disk cache)
    before = {name: len(d.signatures) for name, d in _dispatchers().items()}
    assert any(before.values())
    work = numba_backend._compile_counts()
    rng = np.random.default_rng(9)
    for min_work in (0, 10**18):
        be = numba_backend.NumbaBackend(parallel_min_work=min_work)
        for n, m in [(1, 1), (13, 9), (40, 70)]:
            B = random_matrix(rng, n, m, dup_rows=n // 3)
            w = rng.random(m)
            counts = rng.integers(0, 3, size=n)
            for c in (None, counts):
                be.loo_auc(B, None, 1e-9, c)
                be.loo_auc(B.astype(bool), w, 1e-9, c)
                be.surrogate(B, w, 10.0, c)
                be.aces_o_fit(B, np.zeros(m), np.ones(m, np.uint8), 10.0, 0.01, 2, c)
    after = {name: len(d.signatures) for name, d in _dispatchers().items()}
    assert after == before
    assert numba_backend._compile_counts() == work  # nothing compiled or loaded


def _read_only(*arrays):
    out = []
    for a in arrays:
        a = np.array(a)  # a copy: the original stays writeable
        a.flags.writeable = False
        out.append(a)
    return out


def test_read_only_inputs_reuse_the_warm_signatures(warm):
    # numba types a read-only array as a type of its own; the backend must hand the
    # kernels writeable aliases so such inputs compile nothing after warmup()
    from numba import types

    rng = np.random.default_rng(14)
    B = random_matrix(rng, 40, 30, dup_rows=12)
    B[:, 0] = 1
    w = rng.random(30)
    w /= w.sum()
    counts = rng.integers(0, 3, size=40)
    active = np.ones(30, np.uint8)
    logits0 = rng.normal(size=30)
    Br, wr, cr, ar, lr = _read_only(B, w, counts, active, logits0)
    before = {name: len(d.signatures) for name, d in _dispatchers().items()}
    work = numba_backend._compile_counts()
    for min_work in (0, 10**18):
        be = numba_backend.NumbaBackend(parallel_min_work=min_work)
        pairs = [
            (be.loo_auc(Br, None, 1e-9, cr), be.loo_auc(B, None, 1e-9, counts)),
            (be.loo_auc(Br, wr, 1e-9, cr), be.loo_auc(B, w, 1e-9, counts)),
            (be.surrogate(Br, wr, 10.0, cr), be.surrogate(B, w, 10.0, counts)),
            (
                be.aces_o_fit(Br, lr, ar, 10.0, 0.01, 3, cr),
                be.aces_o_fit(B, logits0, active, 10.0, 0.01, 3, counts),
            ),
            (be.row_scores(Br, wr), be.row_scores(B, w)),
        ]
        for got, want in pairs:
            for a, b in zip(
                got if isinstance(got, tuple) else (got,),
                want if isinstance(want, tuple) else (want,),
            ):
                np.testing.assert_array_equal(a, b)
    for method in ("majority", "aces-c", "aces-o", "aces-o-warm"):
        got = af.rerank(Br, method=method, backend="numba")
        want = af.rerank(B, method=method, backend="numba")
        np.testing.assert_array_equal(got.scores, want.scores)
        got = af.rerank_batch([Br, Br[:20]], method, backend="numba")
        np.testing.assert_array_equal(got[0].scores, want.scores)
    after = {name: len(d.signatures) for name, d in _dispatchers().items()}
    assert after == before
    assert numba_backend._compile_counts() == work  # nothing compiled or loaded
    read_only = [
        (name, sig)
        for name, d in _dispatchers().items()
        for sig in d.signatures
        if any(isinstance(t, types.Array) and not t.mutable for t in sig)
    ]
    assert not read_only


def test_registry_and_public_api(warm):
    be = get_backend("numba")
    assert isinstance(be, numba_backend.NumbaBackend) and be.name == "numba"
    info = be.info()
    assert {"numba", "threading_layer", "num_threads"} <= set(info)
    res = af.aces_c(EXAMPLE, backend="numba")
    assert res.backend == "numba"
    np.testing.assert_allclose(res.weights, np.array([5, 5, 0, 5, 0, 0, 2, 0, 0, 0]) / 17, **EXACT)
    np.testing.assert_allclose(
        af.loo_auc(EXAMPLE, backend="numba"), af.loo_auc(EXAMPLE, backend="numpy"), **EXACT
    )


def test_bad_inputs_raise(warm):
    be = numba_backend.NumbaBackend()
    B = np.zeros((3, 2), np.uint8)
    with pytest.raises(ValueError, match="counts"):
        be.loo_auc(B, None, 1e-9, np.array([1, -1, 1]))
    with pytest.raises(ValueError, match="counts"):
        be.loo_auc(B, None, 1e-9, np.array([1, 1]))
    with pytest.raises(ValueError, match="weights"):
        be.surrogate(B, np.ones(3), 10.0)
    with pytest.raises(ValueError, match="active"):
        be.aces_o_fit(B, np.zeros(2), np.ones(3, np.uint8), 10.0, 0.01, 3)
    with pytest.raises(ValueError, match="steps"):
        be.aces_o_fit(B, np.zeros(2), np.ones(2, np.uint8), 10.0, 0.01, -1)


# ---------------------------------------------------------------------------
# subprocesses: import hygiene, missing numba, the workqueue layer


def _run_python(code: str, **env) -> subprocess.CompletedProcess:
    full_env = dict(
        os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), **env
    )
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_import_does_not_import_numba():
    proc = _run_python("""
        import sys
        import aces_fast
        import aces_fast.backends.numba
        assert 'numba' not in sys.modules, 'numba imported'
        aces_fast.loo_auc([[1, 0], [0, 1]], backend='numpy')
        assert 'numba' not in sys.modules, 'numba imported by the numpy backend'
    """)
    assert proc.returncode == 0, proc.stderr


def test_missing_numba_is_reported():
    proc = _run_python("""
        import sys
        sys.modules['numba'] = None  # makes 'import numba' raise ImportError
        import numpy as np
        import aces_fast as af
        from aces_fast.backends import BackendUnavailableError, get_backend
        for _ in range(2):  # the reason is remembered
            try:
                get_backend('numba')
            except BackendUnavailableError as exc:
                print(exc.reason)
            else:
                raise SystemExit('numba backend loaded without numba')
        try:
            af.loo_auc(np.eye(3), backend='numba')
        except BackendUnavailableError as exc:
            assert "pip install 'aces_fast[numba]'" in str(exc), exc
        else:
            raise SystemExit('loo_auc ran on numba without numba')
    """)
    assert proc.returncode == 0, proc.stderr
    assert "numba is not installed (pip install 'aces_fast[numba]')" in proc.stdout


def test_workqueue_layer_concurrent_calls():
    # The workqueue layer aborts the process on concurrent parallel launches;
    # the backend must serialize them (or run the serial build) under it.
    proc = _run_python(
        """
        import threading
        import numpy as np
        import numba
        from aces_fast.backends import numba as numba_backend
        be = numba_backend.NumbaBackend(parallel_min_work=0)
        rng = np.random.default_rng(0)
        B = (rng.random((300, 200)) < 0.4).astype(np.uint8)
        expected = be.loo_auc(B, None, 1e-9)
        assert numba.threading_layer() == 'workqueue', numba.threading_layer()
        out, errors = [], []
        def work():
            try:
                for _ in range(20):
                    out.append(be.loo_auc(B, None, 1e-9))
            except BaseException as exc:
                errors.append(exc)
        threads = [threading.Thread(target=work) for _ in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert not errors, errors
        assert len(out) == 80 and all(np.array_equal(o, expected) for o in out)
        print('ok')
    """,
        NUMBA_THREADING_LAYER="workqueue",
        NUMBA_NUM_THREADS="2",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ok" in proc.stdout


def test_row_sums_and_reps_merges_passing_patterns(warm):
    k = _kernels()
    rng = np.random.default_rng(21)
    B = random_matrix(rng, 90, 70, density=0.5, dup_rows=40)
    B[B != 0] = rng.integers(1, 4, size=int((B != 0).sum()))  # nonzero bytes all mean pass
    cnt = rng.integers(0, 3, size=90).astype(np.int64)
    rs, c, rep = k.row_sums_and_reps(B, cnt, True)
    passes = B != 0
    np.testing.assert_array_equal(rs, passes.sum(axis=1))
    kept = cnt > 0
    first = {}
    for i in range(90):  # the representative is the first kept row with the same passes
        if kept[i]:
            first.setdefault(passes[i].tobytes(), i)
            assert rep[i] == first[passes[i].tobytes()]
    assert c.sum() == cnt.sum()
    for _key, i in first.items():
        same = kept & (passes == passes[i]).all(axis=1)
        assert c[i] == cnt[same].sum()
    assert (c[kept & (rep != np.arange(90))] == 0).all()


@pytest.mark.parametrize("scale", [1, 700])
def test_uniform_loo_auc_merged_rows_match_reference(nb, scale):
    """Inputs past the merge threshold, with small and (scale 700: total
    multiplicity >= 2^16, 64-bit accumulators) large counts: exact values."""
    rng = np.random.default_rng(22 + scale)
    B = random_matrix(rng, 200, 60, density=0.4, dup_rows=120)
    counts = rng.integers(0, 3, size=200) * scale
    for c in (None, counts):
        got = nb.loo_auc(B, None, 1e-9, c)
        want = numpy_ref.NumpyBackend().loo_auc(B, None, 1e-9, c)
        np.testing.assert_array_equal(got, want)
    values = method_params("aces-c")
    r, ref = nb.rerank(B, "aces-c", values), numpy_ref.NumpyBackend().rerank(B, "aces-c", values)
    np.testing.assert_allclose(r.weights, ref.weights, **EXACT)
    np.testing.assert_allclose(r.scores, ref.scores, **EXACT)
    np.testing.assert_array_equal(r.order, ref.order)
    np.testing.assert_array_equal(r.loo_auc, ref.loo_auc)


@pytest.mark.parametrize("scale", [1, 700])
def test_weighted_loo_auc_merged_rows_give_the_unmerged_bits(nb, monkeypatch, scale):
    """Weighted LOO-AUC past the merge threshold (identical rows merged into counts,
    as in C++) returns the bits of the unmerged computation, with and without
    counts (scale 700: large multiplicities), and the reference's values."""
    rng = np.random.default_rng(31 + scale)
    B = random_matrix(rng, 200, 60, density=0.4, dup_rows=120)
    w = rng.random(60)
    w[rng.integers(0, 60, size=10)] = 0.0
    counts = rng.integers(0, 3, size=200) * scale
    merged = [nb.loo_auc(B, w, 1e-9, c) for c in (None, counts)]
    kernels = numba_backend._load_kernels()
    monkeypatch.setattr(kernels, "DEDUP_MIN_ROWS", 10**9)  # never merge
    unmerged = [nb.loo_auc(B, w, 1e-9, c) for c in (None, counts)]
    for got, want, c in zip(merged, unmerged, (None, counts)):
        np.testing.assert_array_equal(got, want)
        ref = numpy_ref.NumpyBackend().loo_auc(B, w, 1e-9, c)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)


def _scalar_row_sums(B, w):
    """Each row's ascending sum of ``w_j`` where it passes, else ``+0.0``, in Python
    floats (IEEE double): the rounding the numba scores must reproduce."""
    out = []
    for row in B:
        acc = 0.0
        for j, b in enumerate(row):
            acc += float(w[j]) if b else 0.0
        out.append(acc)
    return np.array(out, dtype=np.float64).reshape(len(out))


@pytest.mark.parametrize(
    ("n", "m"), [(1, 0), (1, 1), (3, 7), (63, 5), (64, 64), (65, 9), (130, 33), (200, 101)]
)
def test_row_scores_are_the_ascending_scalar_sums(warm, n, m):
    """The 64-lane scores kernel against a scalar loop, bit for bit: every group
    size (n around 64), odd and even m, and weights of very different sizes (each
    addition rounds), zeros and -0.0; also on the rows a dedup plan keeps."""
    k = numba_backend._load_kernels()
    rng = np.random.default_rng(n * 1000 + m)
    B = random_matrix(rng, n, m, density=0.5, dup_rows=n // 4)
    w = rng.random(m) * 10.0 ** rng.integers(-12, 12, size=m)
    w[::5] = 0.0
    w[1::7] = -0.0
    want = _scalar_row_sums(B, w)
    got = k.row_scores(B, w)
    assert got.dtype == np.float64 and got.shape == (n,)
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
    rep = numba_backend.NumbaBackend().loo_auc_uniform(B)[2]  # None: no rows merged
    rep = np.arange(n) if rep is None else rep
    np.testing.assert_array_equal(k.row_scores_rep(B, w, rep).view(np.int64), want.view(np.int64))
    idx = np.flatnonzero(rng.random(n) < 0.6)
    np.testing.assert_array_equal(
        k._row_scores_of(B, w, idx).view(np.int64), want[idx].view(np.int64)
    )
