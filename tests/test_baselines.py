"""The benchmark baselines compute what aces_fast computes, so speed-ups are honest.

Baseline (a) -- rankdata LOO-AUC and ACES-C -- and baseline (b) -- autograd
ACES-O -- are compared with every available backend; the benchmark workloads
(``distinct``, ``dup-heavy``, ``real``) are checked for the properties the
benchmark relies on. Both live in the checkout's ``benchmarks/harness``, not in
the installed package.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import aces_fast as af
from aces_fast import _semantics
from aces_fast.backends.base import ArrayBackend
from helpers import EXAMPLE, random_matrix

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the harness is importable from the checkout only
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import baselines as bl
from benchmarks.harness import workloads

EXAMPLE_LOO = np.array([2 / 3, 2 / 3, 1 / 2, 2 / 3, 1 / 2, 2 / 5, 7 / 12, 7 / 24, 0, 0])


def _matrices():
    rng = np.random.default_rng(7)
    yield EXAMPLE
    yield workloads.make_pass_matrix(60, 40, seed=3)
    yield random_matrix(rng, 35, 25, density=0.5, dup_rows=15)
    yield random_matrix(rng, 9, 12, density=0.2)


# ---------------------------------------------------------------------------
# the benchmark workloads


def test_make_pass_matrix_shape_and_determinism():
    B = workloads.make_pass_matrix(200, 50, seed=5)
    assert B.shape == (200, 50) and B.dtype == np.uint8 and B.flags.c_contiguous
    assert set(np.unique(B)) <= {0, 1}
    np.testing.assert_array_equal(B, workloads.make_pass_matrix(200, 50, seed=5))
    assert not np.array_equal(B, workloads.make_pass_matrix(200, 50, seed=6))


def test_make_pass_matrix_has_duplicates_constant_columns_and_signal():
    B = workloads.make_pass_matrix(400, 200, seed=1, dup_frac=0.5, const_frac=0.05)
    assert len(np.unique(B, axis=0)) <= 200  # half the rows repeat others
    col = B.sum(axis=0)
    assert ((col == 0) | (col == B.shape[0])).sum() >= 10
    # planted signal: the tests disagree with each other far more than noise
    L = af.loo_auc(B, backend="numpy")
    assert np.nanmean(L) > 0.55


@pytest.mark.parametrize("kwargs", [dict(n=0, m=3), dict(n=3, m=-1), dict(n=3, m=3, dup_frac=1.0)])
def test_make_pass_matrix_rejects_bad_sizes(kwargs):
    with pytest.raises(ValueError):
        workloads.make_pass_matrix(**kwargs)


@pytest.mark.parametrize(("n", "m"), [(24, 100), (200, 500), (64, 6)])
def test_distinct_matrix_has_no_duplicate_rows(n, m):
    B, correct, *_ = workloads.make_distinct_matrix(n, m, seed=n + m)
    assert B.shape == (n, m) and B.dtype == np.uint8 and B.flags.c_contiguous
    assert B.flags.writeable and set(np.unique(B)) <= {0, 1}
    assert len(np.unique(B, axis=0)) == n  # (64, 6): 64 of the 64 possible rows, by redraws
    assert correct.shape == (n,) and correct.sum() == round(0.3 * n)
    np.testing.assert_array_equal(B, workloads.make_distinct_matrix(n, m, seed=n + m).B)


def test_distinct_matrix_follows_the_planted_model():
    n, m = 3000, 400
    B, correct, alpha, beta, misleading = workloads.make_distinct_matrix(n, m, seed=9)
    assert misleading.sum() == round(0.2 * m)
    ok = ~misleading
    assert ((alpha[ok] >= 0.5) & (alpha[ok] <= 1)).all() and (beta[ok] <= 0.6).all()
    assert (alpha[misleading] <= 0.4).all() and (beta[misleading] >= 0.5).all()
    # the empirical pass rates follow alpha (correct rows) and beta (the others)
    for rows, p in ((correct, alpha), (~correct, beta)):
        error = np.abs(B[rows].mean(axis=0) - p)
        assert error.mean() < 0.03 and error.max() < 0.12
    # ranking signal despite the misleading tests: ACES-C puts a correct candidate first
    assert correct[af.aces_c(B, backend="numpy").order[0]]


@pytest.mark.parametrize(("n", "m"), [(0, 5), (5, 0), (9, 3)])
def test_distinct_matrix_rejects_impossible_sizes(n, m):
    with pytest.raises(ValueError):
        workloads.make_distinct_matrix(n, m)


def test_workload_families_differ_and_are_cached():
    Bd, wd = workloads.workload("distinct", 200, 500)
    Bh, wh = workloads.workload("dup-heavy", 200, 500)
    assert len(np.unique(Bd, axis=0)) == 200 and len(np.unique(Bh, axis=0)) <= 100
    np.testing.assert_array_equal(wd, wh)  # the weights depend on the size only
    assert workloads.workload("distinct", 200, 500)[0] is Bd
    with pytest.raises(ValueError, match="unknown synthetic family"):
        workloads.workload("real", 24, 100)
    tasks = workloads.batch_tasks("distinct", 3, 20, 30)
    assert len(tasks) == 3 and not np.array_equal(tasks[0], tasks[1])
    assert all(len(np.unique(t, axis=0)) == 20 for t in tasks)


@pytest.mark.parametrize("name", workloads.REAL_DATASETS)
def test_real_problems_are_the_bundled_dataset(name):
    from aces_fast.datasets import load_dataset

    problems = workloads.real_problems(name)
    dataset = load_dataset(name)
    assert len(problems) == len(dataset) > 100
    for (B, w), problem in zip(problems, dataset):
        np.testing.assert_array_equal(B, problem.B)
        assert B.dtype == np.uint8 and B.flags.writeable and w.shape == (B.shape[1],)
    with pytest.raises(ValueError, match="unknown real dataset"):
        workloads.real_problems("nope")


# ---------------------------------------------------------------------------
# baseline (a)


def test_numpy_loo_auc_spec_example():
    np.testing.assert_allclose(bl.numpy_loo_auc(EXAMPLE), EXAMPLE_LOO, atol=1e-12)


@pytest.mark.parametrize("index", range(4))
def test_numpy_loo_auc_matches_backends(backend, index):
    B = list(_matrices())[index]
    expect = np.asarray(af.loo_auc(B, backend=backend))
    got = bl.numpy_loo_auc(B)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expect))
    np.testing.assert_allclose(got, expect, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("index", range(4))
def test_numpy_loo_auc_weighted_matches_backends(backend, index):
    B = list(_matrices())[index]
    # multiples of 1/8: float sums are exact, so float-equality ties are the exact ties
    w = np.random.default_rng(index).integers(0, 6, B.shape[1]) / 8
    expect = np.asarray(af.loo_auc(B, w, backend=backend))
    np.testing.assert_allclose(bl.numpy_loo_auc(B, w), expect, atol=1e-12, equal_nan=True)


def test_numpy_aces_c_spec_example():
    w, s = bl.numpy_aces_c(EXAMPLE)
    np.testing.assert_allclose(w, np.array([5, 5, 0, 5, 0, 0, 2, 0, 0, 0]) / 17, atol=1e-12)
    np.testing.assert_allclose(s, EXAMPLE @ w, atol=1e-12)


@pytest.mark.parametrize("index", range(4))
def test_numpy_aces_c_matches_backends(backend, index):
    B = list(_matrices())[index]
    res = af.aces_c(B, backend=backend)
    w, s = bl.numpy_aces_c(B)
    np.testing.assert_allclose(w, np.asarray(res.weights), atol=1e-12)
    np.testing.assert_allclose(s, np.asarray(res.scores), atol=1e-9)


@pytest.mark.parametrize(
    "B",
    [
        np.array([[1, 0], [0, 1]]),  # every LOO-AUC is 0: fallback
        np.array([[1, 0, 1], [1, 0, 1]]),
    ],
)  # every column constant
def test_numpy_aces_c_degenerate_cases_match(B):
    res = af.aces_c(B, backend="numpy")
    w, _ = bl.numpy_aces_c(B)
    np.testing.assert_allclose(w, res.weights, atol=1e-15)


# ---------------------------------------------------------------------------
# baseline (b)


def library_top_k_rows(B, k):
    """The library's top-k prefilter on NumPy arrays (``None``: every row)."""
    rows = _semantics.top_k_rows(ArrayBackend, B, k)
    return np.arange(B.shape[0]) if rows is None else rows


def test_top_k_rows_matches_library():
    B = workloads.make_pass_matrix(50, 20, seed=2)
    for k in (1, 7, 24, 50, 80, None):
        np.testing.assert_array_equal(bl.top_k_rows(B, k), library_top_k_rows(B, k))


@pytest.mark.parametrize("top_k", [24, None])
def test_torch_aces_o_matches_backends(backend, top_k):
    pytest.importorskip("torch")
    B = workloads.make_pass_matrix(40, 30, seed=11)  # 40 rows: top_k=24 really filters
    res = af.aces_o(B, lr=0.05, steps=40, top_k=top_k, backend=backend)
    w, s, objective = bl.torch_aces_o(B, lr=0.05, steps=40, top_k=top_k)
    np.testing.assert_allclose(w, np.asarray(res.weights), atol=1e-6)
    np.testing.assert_allclose(objective, np.asarray(res.objective), atol=1e-9)
    np.testing.assert_allclose(s, np.asarray(res.scores), atol=1e-6)
    assert objective[-1] > objective[0]  # the optimizer really moved


def test_torch_aces_o_without_informative_tests_returns_zero_weights():
    pytest.importorskip("torch")
    w, s, objective = bl.torch_aces_o(np.ones((5, 3), dtype=np.uint8), steps=3)
    assert not w.any() and not s.any() and objective.shape == (4,)


def test_baselines_handle_problems_without_tests():
    B = np.zeros((5, 0), dtype=np.uint8)  # some bundled problems have no tests
    assert bl.numpy_loo_auc(B).shape == (0,)
    w, s = bl.numpy_aces_c(B)
    assert w.shape == (0,) and not s.any()


def test_torch_aces_o_memory_estimate_grows_quadratically():
    assert bl.torch_aces_o_bytes(2000, 1000) == 100 * bl.torch_aces_o_bytes(200, 1000)
    assert bl.torch_aces_o_bytes(20000, 1000) > 1e12  # why 20 000 rows are skipped
