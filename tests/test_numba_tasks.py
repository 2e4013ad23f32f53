"""The numba kernels over task lists (``backends/numba/tasks.py``) and the batch
route that runs the semantics over a task axis (``backends/numba/batch.py``).

Each task kernel must give, for every task, its per-task kernel's values bit for
bit (and those agree with the NumPy reference and brute-force definitions), leave
the padding of the (T, n_max) / (T, m_max) outputs untouched, and do so in its
serial and its parallel build. The batch route must equal ``rerank`` task by task
however the tasks are grouped.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba", reason="numba is not installed")

import aces_fast as af  # noqa: E402
from aces_fast._registry import method_params  # noqa: E402
from aces_fast.backends import numba as numba_backend  # noqa: E402
from aces_fast.backends.numba import batch as nb_batch  # noqa: E402
import brute  # noqa: E402
from helpers import EXAMPLE, assert_same_result, random_matrix  # noqa: E402


@pytest.fixture(scope="module")
def k():
    """The kernel namespace, every kernel compiled (or loaded) once."""
    numba_backend.warmup()
    return numba_backend._load_kernels()


@pytest.fixture(params=["serial", "parallel"])
def build(request):
    return request.param


def _tasks(seed: int = 0):
    """Awkward shapes: n = 1, m = 0, constant columns, duplicate rows, a fallback."""
    rng = np.random.default_rng(seed)
    tasks = [EXAMPLE.copy(), np.zeros((3, 0), np.uint8), np.array([[1, 0, 1]], np.uint8),
             np.eye(5, dtype=np.uint8), np.repeat(EXAMPLE[:2], 3, axis=0)]
    for _ in range(9):
        n, m = int(rng.integers(1, 50)), int(rng.integers(0, 30))
        B = random_matrix(rng, n, m, rng.uniform(0.1, 0.9), dup_rows=n // 3)
        if m >= 3:
            B[:, 1] = 1
        tasks.append(np.ascontiguousarray(B, dtype=np.uint8))
    tasks.append(random_matrix(rng, 80, 70, 0.5, dup_rows=30).astype(np.uint8))  # dedup path
    return tasks


def _kernel(k, name, build):
    return getattr(k, name + ("_parallel" if build == "parallel" else ""))


def _padded(tasks, fill, dtype, axis):
    T = len(tasks)
    size = max(B.shape[axis] for B in tasks)
    return np.full((T, size), fill, dtype=dtype)


def _words(tasks):
    T = len(tasks)
    return np.full((T, -(-max(B.shape[0] for B in tasks) // 64), max(B.shape[1] for B in tasks)),
                   7, dtype=np.uint64)


def test_tasks_loo_auc_uniform(k, build):
    from numba.typed import List

    tasks = _tasks()
    L = _padded(tasks, np.nan, np.float64, 1)
    colsum = _padded(tasks, 0, np.int64, 1)
    rep = _padded(tasks, -7, np.int64, 0)
    words = _words(tasks)
    _kernel(k, "tasks_loo_auc_uniform", build)(List(tasks), L, colsum, rep, words)
    for t, B in enumerate(tasks):
        n, m = B.shape
        out, cs = np.empty(m), np.zeros(m, dtype=np.int64)
        r = np.full(n, -1, dtype=np.int64)
        merged = k.uniform_loo_auc(B, np.ones(n, dtype=np.int64), out, cs, r)
        assert merged == bool((r != np.arange(n)).any())
        np.testing.assert_array_equal(L[t, :m], out)  # the per-task kernel's bits
        np.testing.assert_array_equal(colsum[t, :m], cs)
        np.testing.assert_array_equal(rep[t, :n], r)
        assert np.isnan(L[t, m:]).all() and (colsum[t, m:] == 0).all() and (rep[t, n:] == -7).all()
        np.testing.assert_array_equal(cs, B.sum(axis=0))
        np.testing.assert_allclose(out, brute.to_float_array(brute.loo_auc(B)), rtol=0,
                                   atol=1e-12)
        for i in range(n):  # a representative is an identical row, not after it
            assert r[i] <= i and np.array_equal(B[r[i]], B[i])
        for i in range(n):  # packed rows: bit i % 64 of word (i // 64, j) is B[i, j]
            bits = (words[t, i // 64, :m] >> np.uint64(i % 64)) & np.uint64(1)
            np.testing.assert_array_equal(bits, B[i] != 0)
        for q in range(-(-n // 64), words.shape[1]):
            assert (words[t, q] == 7).all()  # groups beyond the task: untouched


@pytest.mark.parametrize("packed", [False, True])
def test_tasks_row_scores(k, build, packed):
    from numba.typed import List

    tasks = _tasks(1) + [random_matrix(np.random.default_rng(8), 150, 21, 0.5).astype(np.uint8)]
    rng = np.random.default_rng(2)
    T = len(tasks)
    w = _padded(tasks, 0.0, np.float64, 1)
    for t, B in enumerate(tasks):
        w[t, :B.shape[1]] = rng.random(B.shape[1]) * (rng.random(B.shape[1]) < 0.7)
    s = _padded(tasks, -1.0, np.float64, 0)
    if packed:
        words = np.zeros(_words(tasks).shape, dtype=np.uint64)
        _kernel(k, "tasks_loo_auc_uniform", build)(
            List(tasks), _padded(tasks, np.nan, np.float64, 1), _padded(tasks, 0, np.int64, 1),
            _padded(tasks, 0, np.int64, 0), words)
        shapes = np.array([B.shape for B in tasks], dtype=np.int64)
        _kernel(k, "tasks_packed_row_scores", build)(shapes[:, 0].copy(), shapes[:, 1].copy(),
                                                     words, w, s)
    else:
        _kernel(k, "tasks_row_scores", build)(List(tasks), w, s)
    assert s.shape == (T, max(B.shape[0] for B in tasks))
    for t, B in enumerate(tasks):
        n, m = B.shape
        wt = np.ascontiguousarray(w[t, :m])
        np.testing.assert_array_equal(s[t, :n], k.row_scores(B, wt))  # the per-task bits
        assert (s[t, n:] == -1.0).all()
        exact = [float(v) for v in brute.weighted_scores(B, brute.exact_weights(wt, m))]
        np.testing.assert_allclose(s[t, :n], exact, rtol=1e-14, atol=0)


def test_tasks_column_sums(k, build):
    from numba.typed import List

    tasks = _tasks(3)
    out = _padded(tasks, -1, np.int64, 1)
    _kernel(k, "tasks_column_sums", build)(List(tasks), out)
    for t, B in enumerate(tasks):
        m = B.shape[1]
        np.testing.assert_array_equal(out[t, :m], B.sum(axis=0))
        assert (out[t, m:] == -1).all()


def test_ascending_row_sums(k):
    rng = np.random.default_rng(4)
    x = rng.random((7, 33)) * 10.0 ** rng.integers(-8, 8, size=(7, 33))
    x[2] = 0.0
    got = k.ascending_row_sums(x)
    assert got.shape == (7, 1)
    for t in range(7):
        assert got[t, 0] == k.ascending_sum(x[t])  # the backend's rounding, row by row
        assert math.isclose(got[t, 0], math.fsum(x[t]), rel_tol=1e-14, abs_tol=0)
    assert k.ascending_row_sums(np.zeros((3, 0))).tolist() == [[0.0]] * 3


@pytest.mark.parametrize("group_cells", [1, 200, 1 << 25])
@pytest.mark.parametrize("method", ["majority", "aces-c", "aces-c-filter"])
def test_grouping_does_not_change_results(k, monkeypatch, group_cells, method):
    """Singleton groups (per-task route), small mixed-shape groups and one big group:
    every task's result is its ``rerank`` result bit for bit, on 1 and 2 threads."""
    tasks = _tasks(5) + [t.astype(bool) for t in _tasks(6)]
    want = [af.rerank(B, method, backend="numba") for B in tasks]
    monkeypatch.setattr(nb_batch, "GROUP_CELLS", group_cells)
    for be in (numba_backend.NumbaBackend(parallel_min_work=0),
               numba_backend.NumbaBackend(parallel_min_work=1 << 62)):
        prepared = [be.prepare(B) for B in tasks]
        for threads in (1, 2):
            got = be.rerank_batch(prepared, method, method_params(method), threads)
            for g, w in zip(got, want):
                assert_same_result(g, w)


def test_read_only_tasks(k):
    tasks = _tasks(7)
    want = af.rerank_batch(tasks, "aces-c", backend="numba", n_threads=2)
    frozen = []
    for B in tasks:
        B = B.copy()
        B.flags.writeable = False
        frozen.append(B)
    before = numba_backend._compile_counts()
    got = af.rerank_batch(frozen, "aces-c", backend="numba", n_threads=2)
    for g, w in zip(got, want):
        assert_same_result(g, w)
    assert numba_backend._compile_counts() == before  # the warm signatures served them


@pytest.mark.parametrize("n", [0, 1, 2, 17, 200])
def test_order_ties_by_index_gives_the_stable_argsort(k, n):
    """Any unstable sorting order, its ties put in index order, is the stable argsort:
    keys with many ties (runs shorter and longer than the insertion-sort cut-off),
    -0.0 next to 0.0, infinities and nan."""
    rng = np.random.default_rng(n)
    x = np.round(rng.random((6, n)) * rng.choice([2, 5, 1000], size=(6, 1)))
    if n >= 4:
        x[1, ::3] = -0.0
        x[2, :2] = np.inf
        x[2, -2:] = -np.inf
        x[3, ::4] = np.nan
    x[4] = 7.0  # one run over the whole row
    for seed in range(3):
        order = np.empty(x.shape, dtype=np.int64)
        for t in range(x.shape[0]):  # a valid but scrambled order of equal keys
            perm = np.random.default_rng(seed * 10 + t).permutation(n)
            order[t] = perm[np.argsort(x[t, perm], kind="stable")]
        k.order_ties_by_index(x, order)
        np.testing.assert_array_equal(order, np.argsort(x, axis=-1, kind="stable"))
