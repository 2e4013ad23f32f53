"""Row deduplication inside the compiled kernels (``dedup=True/False/None``).

Merging identical rows into one row with a multiplicity must not change any
result: LOO-AUC and the closed-form methods exactly, the surrogate and ACES-O
up to summation order (1e-12).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aces_fast
from helpers import random_matrix

pytest.importorskip("aces_fast._core", reason="the C++ extension is not built")
import core_calls as kc

DATA = Path(aces_fast.__file__).resolve().parent / "data"


def bundled(name: str, limit: int = 60):
    """The first ``limit`` pass matrices of a bundled HumanEval file with m >= 1."""
    with np.load(DATA / name) as d:
        keys = sorted(k for k in d.files if k.startswith("B_"))
        mats = [np.ascontiguousarray(d[k]) for k in keys]
    return [B for B in mats if B.shape[1] > 0][:limit]


CODET = bundled("humaneval_codet_codegen16b.npz")


def dup_heavy(seed: int, n: int = 60, m: int = 25, distinct: int = 7) -> np.ndarray:
    """n rows drawn from only ``distinct`` patterns (plus a constant column)."""
    rng = np.random.default_rng(seed)
    patterns = random_matrix(rng, distinct, m, density=0.5)
    B = patterns[rng.integers(0, distinct, size=n)]
    B[:, 0] = 1
    return np.ascontiguousarray(B)


# (the last two on either side of ACES-C's auto rule where its LOO-AUC reads
# packed words: off for short rows, on for long ones)
HEAVY = [dup_heavy(s) for s in range(6)] + [
    dup_heavy(9, n=300, m=70, distinct=40),
    dup_heavy(11, n=200, m=300, distinct=60),
]


def test_bundled_data_repeats_rows():
    """The premise: real pools have far fewer distinct rows than candidates."""
    n_rows = sum(B.shape[0] for B in CODET)
    n_distinct = sum(len(np.unique(B, axis=0)) for B in CODET)
    assert n_distinct < 0.6 * n_rows


@pytest.mark.parametrize("B", HEAVY + CODET[:20], ids=lambda B: f"{B.shape[0]}x{B.shape[1]}")
def test_loo_auc_dedup_exact(B):
    rng = np.random.default_rng(B.shape[1])
    w = rng.random(B.shape[1])
    wq = rng.integers(0, 4, B.shape[1]) / 10.0  # rational weights: many float ties
    counts = rng.integers(0, 3, B.shape[0])
    for weights in (None, w, wq):
        for c in (None, counts):
            off = kc.loo_auc(B, weights, c, dedup=False)
            np.testing.assert_array_equal(kc.loo_auc(B, weights, c, dedup=True), off)
            np.testing.assert_array_equal(kc.loo_auc(B, weights, c, dedup=None), off)


def test_loo_auc_dedup_matches_expanded_counts():
    """Dedup merged with caller counts equals the matrix with rows really repeated."""
    B = HEAVY[0]
    counts = np.arange(B.shape[0]) % 4
    expanded = np.repeat(B, counts, axis=0)
    np.testing.assert_array_equal(
        kc.loo_auc(B, None, counts, dedup=True), kc.loo_auc(expanded, dedup=False)
    )


def test_other_bytes_are_refused_before_dedup():
    """The 0/1 check runs before the hashing pass, whatever dedup says."""
    B2 = HEAVY[1].copy()
    B2[::2][B2[::2] == 1] = 255
    for dd in (True, False, None):
        with pytest.raises(ValueError, match="found value 255"):
            kc.loo_auc(B2, dedup=dd)
        for code in (0, 1, 2, 3):
            with pytest.raises(ValueError, match="found value 255"):
                kc.rerank(B2, code, dedup=dd)


def test_distinct_rows_are_never_merged():
    """All 2^10 patterns are distinct: dedup must keep every one (hash + compare)."""
    B = np.array(np.unravel_index(np.arange(1024), (2,) * 10)).T.astype(np.uint8)
    B = np.ascontiguousarray(np.vstack([B, B[:100]]))  # plus 100 true repeats
    np.testing.assert_array_equal(kc.loo_auc(B, dedup=True), kc.loo_auc(B, dedup=False))
    a = kc.rerank(B, 0, dedup=True)
    b = kc.rerank(B, 0, dedup=False)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[2], b[2])


def test_large_multiplicities_use_exact_int64_path():
    """Total multiplicity >= 2^26 switches the uniform kernel to int64; still exact."""
    B = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 0], [1, 1, 0]], dtype=np.uint8)
    counts = np.array([2**26, 3, 2**25 + 1, 5])
    got = kc.loo_auc(B, None, counts, dedup=True)
    assert np.array_equal(got, kc.loo_auc(B, None, counts, dedup=False))
    # exact value by integer arithmetic (rows 0 and 3 are identical)
    rs = B.sum(1)
    for j in range(3):
        P = [i for i in range(4) if B[i, j]]
        F = [i for i in range(4) if not B[i, j]]
        num = sum(
            int(counts[p]) * int(counts[f]) * (2 if rs[p] - 1 > rs[f] else rs[p] - 1 == rs[f])
            for p in P
            for f in F
        )
        den = 2 * int(counts[P].sum()) * int(counts[F].sum())
        assert got[j] == num / den


@pytest.mark.parametrize("B", HEAVY + CODET[:12], ids=lambda B: f"{B.shape[0]}x{B.shape[1]}")
def test_surrogate_dedup(B):
    m = B.shape[1]
    w = np.random.default_rng(m).dirichlet(np.ones(m))
    L0, J0, g0 = kc.surrogate_loo_auc(B, w, 10.0, dedup=False)
    L1, J1, g1 = kc.surrogate_loo_auc(B, w, 10.0, dedup=True)
    np.testing.assert_allclose(L1, L0, rtol=0, atol=1e-12)
    assert pytest.approx(J0, abs=1e-12) == J1
    np.testing.assert_allclose(g1, g0, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("B", HEAVY[:4] + CODET[:8], ids=lambda B: f"{B.shape[0]}x{B.shape[1]}")
def test_aces_o_fit_dedup(B):
    m = B.shape[1]
    c = B.sum(0)
    active = ((c > 0) & (c < B.shape[0])).astype(np.uint8)
    w0, o0 = kc.aces_o_fit(B, np.zeros(m), active, 10.0, 0.05, 40, dedup=False)
    w1, o1 = kc.aces_o_fit(B, np.zeros(m), active, 10.0, 0.05, 40, dedup=True)
    np.testing.assert_allclose(w1, w0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(o1, o0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("B", HEAVY + CODET, ids=lambda B: f"{B.shape[0]}x{B.shape[1]}")
def test_methods_dedup(B):
    """Whole methods: closed forms bitwise equal, ACES-O weights to 1e-12."""
    for code in (0, 1, 2):
        off = kc.rerank(B, code, dedup=False)
        for dd in (True, None):
            on = kc.rerank(B, code, dedup=dd)
            for k in (0, 1, 2, 3):
                if off[k] is None:
                    assert on[k] is None
                else:
                    np.testing.assert_array_equal(on[k], off[k])
            assert on[4] == off[4]
    for warm in (False, True):
        off = kc.rerank(B, 3, top_k=24, warm=warm, steps=30, lr=0.05, dedup=False)
        on = kc.rerank(B, 3, top_k=24, warm=warm, steps=30, lr=0.05, dedup=True)
        np.testing.assert_allclose(on[5], off[5], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(on[6], off[6])
        # A flat objective (J = 0 at every step, e.g. one informative test on the
        # top-k rows) has an exactly-zero gradient that floats only approximate;
        # Adam normalizes step sizes, so summation order alone moves the weights.
        flat = np.abs(off[5]).max() < 1e-12
        np.testing.assert_allclose(on[1], off[1], rtol=0, atol=1e-6 if flat else 1e-12)


def equal_sum_groups(seed: int, m: int = 200) -> np.ndarray:
    """Rows in groups of one row sum, of every size from 1 to 20 (around the
    compiled dedup's limit between comparing a group's rows directly and
    hashing them), each group a mix of exact copies and rows that equal an
    earlier one in their first two 64-test words and differ later (a 1 and a
    0 swapped past test 128, which keeps the sum), shuffled."""
    rng = np.random.default_rng(seed)
    rows = []
    for size in range(1, 21):
        base = np.zeros(m, np.uint8)
        base[rng.choice(m, size=40 + size, replace=False)] = 1  # one sum per group
        group = [base]
        while len(group) < size:
            src = group[rng.integers(len(group))]
            new = src.copy()
            if rng.random() < 0.5:
                late = np.arange(129, m)
                ones, zeros = late[new[late] == 1], late[new[late] == 0]
                new[rng.choice(ones)], new[rng.choice(zeros)] = 0, 1
            group.append(new)
        rows += group
    B = np.array(rows, dtype=np.uint8)
    return np.ascontiguousarray(B[rng.permutation(len(B))])


@pytest.mark.parametrize("seed", range(4))
def test_rows_of_equal_sums_merge_only_when_equal(seed):
    """Every group size on both sides of the direct-comparison limit: merging
    two different rows would give both one score, so the closed forms with
    dedup equal them without it, bit for bit, and copies score alike."""
    B = equal_sum_groups(seed)
    sums = B.sum(axis=1)
    assert np.bincount(np.unique(sums, return_counts=True)[1]).size == 21  # sizes 1..20
    for code in (0, 1, 2):  # majority, ACES-C, ACES-C filter
        off = kc.rerank(B, code, dedup=False)
        on = kc.rerank(B, code, dedup=True)
        for k in (0, 1, 2, 3):
            if off[k] is None:
                assert on[k] is None
            else:
                np.testing.assert_array_equal(on[k], off[k], err_msg=f"method {code}, output {k}")
    want = aces_fast.loo_auc(B, backend="numpy")
    np.testing.assert_array_equal(kc.loo_auc(B, dedup=True), want, err_msg="LOO-AUC with dedup")
    _, first, inverse = np.unique(B, axis=0, return_index=True, return_inverse=True)
    scores = kc.rerank(B, 1, dedup=True)[0]
    np.testing.assert_array_equal(scores, scores[first][inverse.ravel()])


def test_dedup_argument_checked():
    B = HEAVY[0]
    with pytest.raises(TypeError, match="dedup"):
        kc.loo_auc(B, dedup="yes")
    with pytest.raises(TypeError, match="dedup"):
        kc.rerank(B, 1, dedup=1)


def equal_sum_rows(seed: int, m: int = 200, lead: int = 64) -> np.ndarray:
    """Rows that the pass-count grouping cannot tell apart by their sums: 30
    patterns with one number of passes (a group too large to compare row by
    row), three with one pass more (a small group), all sharing their first
    ``lead`` tests (so equal first words), each repeated 1-3 times, shuffled."""
    rng = np.random.default_rng(seed)
    head = (rng.random(lead) < 0.5).astype(np.uint8)
    k = (m - lead) // 2
    patterns = []
    for extra, count in ((0, 30), (1, 3)):
        for _ in range(count):
            tail = np.zeros(m - lead, np.uint8)
            tail[rng.choice(m - lead, k + extra, replace=False)] = 1
            patterns.append(np.concatenate([head, tail]))
    rows = [p for p in patterns for _ in range(int(rng.integers(1, 4)))]
    B = np.array(rows, dtype=np.uint8)[rng.permutation(len(rows))]
    return np.ascontiguousarray(B)


@pytest.mark.parametrize(("m", "lead"), [(200, 64), (200, 128), (513, 448)])
def test_rows_of_equal_sums_are_told_apart(m, lead):
    """ACES-C deduplicates a small matrix by grouping its rows by their number
    of passes (the order its LOO-AUC's levels reuse): a small group compared row
    by row, a large one hashed. Rows of one sum that agree on their first words
    must still be told apart, and true repeats merged: every output equals the
    run without dedup and the NumPy reference. CodeT (whose scores are the sizes
    of the classes, found by hashing every row) equals the reference too."""
    B = equal_sum_rows(m, m=m, lead=lead)
    assert len(np.unique(B, axis=0)) == 33 < B.shape[0]
    for code in (0, 1, 2):
        off = kc.rerank(B, code, dedup=False)
        on = kc.rerank(B, code, dedup=True)
        for k in (0, 1, 2, 3):
            np.testing.assert_array_equal(on[k], off[k])
    np.testing.assert_array_equal(
        kc.rerank(B, 1, dedup=True)[3], aces_fast.loo_auc(B, backend="numpy")
    )
    for method in ("codet", "codet-linear"):
        got = aces_fast.rerank(B, method, backend="cpp")
        want = aces_fast.rerank(B, method, backend="numpy")
        np.testing.assert_array_equal(got.scores, want.scores)
        np.testing.assert_array_equal(got.order, want.order)
