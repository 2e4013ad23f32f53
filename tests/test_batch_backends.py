"""Batch paths of the ``numba`` and ``torch`` backends.

``aces_fast.rerank_batch(tasks, method, backend=...)`` must give, task by task,
exactly what ``aces_fast.rerank`` gives on the same backend: bit-identical
arrays, same flags and info. Checked on awkward shapes (n = 1, m = 0,
constant columns, duplicate rows, fallbacks), on the bundled real data, for
both the parallel and the serial route of each backend, for 1 and 2 threads,
and for tensor inputs (tensors out). numba's JIT compilation dominates the
run time of this module, so ACES-O runs with few steps.
"""

from __future__ import annotations

import threading
from fractions import Fraction

import numpy as np
import pytest

import aces_fast as af
from aces_fast.backends import get_backend
from aces_fast.batch import METHOD_PARAMS
from aces_fast.datasets import load_dataset
from helpers import EXAMPLE, assert_same_result, random_matrix, require_backend

NUMBA_METHODS = ("majority", "aces-c", "aces-c-filter", "aces-o", "aces-o-warm")
TORCH_METHODS = ("majority", "aces-c", "aces-c-filter")
#: short ACES-O runs: the comparisons are exact, the number of steps does not matter
PARAMS = {"aces-o": {"steps": 6, "lr": 0.05}, "aces-o-warm": {"steps": 6, "lr": 0.05, "top_k": 4}}


def _mixed_tasks(seed: int = 0):
    """Awkward shapes: m = 0, n = 1, all-constant, fallback, duplicate rows, > top_k rows."""
    rng = np.random.default_rng(seed)
    tasks = [
        EXAMPLE,
        np.zeros((4, 0), np.uint8),  # no tests
        np.array([[1, 0, 1]], np.uint8),  # one candidate: every test constant
        np.ones((3, 5), np.uint8),  # every test constant
        np.eye(6, dtype=bool),  # every LOO-AUC is 0: ACES-C falls back
        np.repeat(EXAMPLE[:3], 4, axis=0),  # only duplicate rows
    ]
    for _ in range(14):
        n, m = int(rng.integers(1, 60)), int(rng.integers(0, 40))
        B = random_matrix(rng, n, m, rng.uniform(0.1, 0.9), dup_rows=n // 2)
        if m >= 4:
            B[:, 0], B[:, 3] = 1, 0  # constant columns in the middle
        tasks.append(B)
    tasks.append(random_matrix(rng, 120, 50, 0.5, dup_rows=60))
    return tasks


MIXED = _mixed_tasks()


@pytest.fixture(scope="module")
def real_tasks():
    """All 164 gpt-3.5 problems (5 x m) and a few CodeGen ones (100 x m, incl. m = 0)."""
    gpt = [p.B for p in load_dataset("humaneval-gpt35")]
    codegen = list(load_dataset("humaneval-codegen16b"))
    by_m = sorted(codegen, key=lambda p: p.m)
    picked = by_m[:2] + by_m[60:63] + by_m[-2:]
    assert picked[0].m == 0
    return gpt + [p.B for p in picked]


def _one_by_one(tasks, method, backend):
    return [af.rerank(B, method, backend=backend, **PARAMS.get(method, {})) for B in tasks]


def _full_params(method):
    spec = METHOD_PARAMS[method]
    given = PARAMS.get(method, {})
    return {name: given.get(name, default) for name, (default, _) in spec.items()}


# ---------------------------------------------------------------------------
# numba


@pytest.fixture(scope="module")
def numba_routes():
    """The registry's numba backend plus two forced onto the parallel / serial route."""
    require_backend("numba")
    from aces_fast.backends import numba as numba_backend

    return {
        "parallel": numba_backend.NumbaBackend(parallel_min_work=0),
        "serial": numba_backend.NumbaBackend(parallel_min_work=1 << 62),
    }


@pytest.mark.parametrize("method", NUMBA_METHODS)
def test_numba_batch_equals_one_by_one(numba_routes, method):
    want = _one_by_one(MIXED, method, "numba")
    for n_threads in (1, 2):
        got = af.rerank_batch(
            MIXED, method, backend="numba", n_threads=n_threads, **PARAMS.get(method, {})
        )
        assert len(got) == len(MIXED)
        for g, w in zip(got, want):
            assert_same_result(g, w)
    prepared = [get_backend("numba").prepare(B) for B in MIXED]
    for _route, be in numba_routes.items():
        got = be.rerank_batch(prepared, method, _full_params(method), 2)
        for g, w in zip(got, want):
            assert_same_result(g, w)


@pytest.mark.parametrize("method", NUMBA_METHODS)
def test_numba_batch_real_data(numba_routes, real_tasks, method):
    got = af.rerank_batch(real_tasks, method, backend="numba", **PARAMS.get(method, {}))
    for g, w in zip(got, _one_by_one(real_tasks, method, "numba")):
        assert_same_result(g, w)


@pytest.mark.parametrize("method", ["aces-c", "aces-o-warm"])
def test_numba_batch_matches_reference(numba_routes, method):
    tol = 1e-6 if method.startswith("aces-o") else 1e-12
    got = af.rerank_batch(MIXED, method, backend="numba", **PARAMS.get(method, {}))
    for g, ref in zip(got, _one_by_one(MIXED, method, "numpy")):
        np.testing.assert_allclose(g.weights, ref.weights, rtol=0, atol=tol)
        np.testing.assert_array_equal(g.order, ref.order)
        if ref.loo_auc is not None:
            np.testing.assert_allclose(g.loo_auc, ref.loo_auc, rtol=0, atol=1e-12)


def test_numba_thread_count_does_not_change_results(numba_routes):
    import numba

    rng = np.random.default_rng(3)
    tasks = [
        random_matrix(rng, int(rng.integers(1, 80)), int(rng.integers(0, 60)), 0.4, dup_rows=10)
        for _ in range(40)
    ]
    be = numba_routes["parallel"]
    prepared = [be.prepare(B) for B in tasks]
    before = numba.get_num_threads()
    for method in ("aces-c", "aces-o-warm"):
        p = _full_params(method)
        one, two = be.rerank_batch(prepared, method, p, 1), be.rerank_batch(prepared, method, p, 2)
        for a, b in zip(one, two):
            assert_same_result(a, b)
    # more threads than numba has are capped, not an error
    capped = be.rerank_batch(prepared, "aces-c", _full_params("aces-c"), 10_000)
    for a, b in zip(capped, be.rerank_batch(prepared, "aces-c", _full_params("aces-c"), 1)):
        assert_same_result(a, b)
    assert numba.get_num_threads() == before  # restored after every call


def test_numba_batch_chunks_cover_every_task_once_largest_first(numba_routes):
    """A compiled batch's chunks: every task exactly once, in the given (largest
    first) order, each chunk within the work cap unless one task exceeds it, and
    at most an eighth of the tasks per thread."""
    from aces_fast.backends import numba as numba_backend

    rng = np.random.default_rng(9)
    for T, threads in ((1, 1), (7, 2), (200, 2), (1000, 1), (33, 4)):
        cost = rng.choice([10.0, 1e5, 3e6, 5e7], size=T)
        by_cost = np.argsort(-cost, kind="stable")
        chunks = numba_backend._chunks(by_cost, cost, threads)
        np.testing.assert_array_equal(np.concatenate(chunks), by_cost)
        cap = -(-T // (8 * threads))
        for c in chunks:
            assert c.dtype == np.int64 and 1 <= len(c) <= cap
            assert len(c) == 1 or cost[c].sum() <= numba_backend._CHUNK_WORK


def test_numba_compiled_batch_results_own_their_slices(numba_routes):
    """Each task's arrays are its own slices of the batch's outputs: writing one
    changes no other task's result."""
    got = af.rerank_batch(MIXED, "aces-c", backend="numba", n_threads=2)
    want = _one_by_one(MIXED, "aces-c", "numba")
    for k, (g, w) in enumerate(zip(got, want)):
        for other in got[k + 1 :]:
            assert not np.shares_memory(g.scores, other.scores)
            assert not np.shares_memory(g.weights, other.weights)
        # the earlier tasks were overwritten: this one still holds its own values
        assert_same_result(g, w)
        g.scores[:] = -1.0
        g.weights[:] = -1.0
        g.order[:] = -1


def test_numba_batch_from_concurrent_python_threads(numba_routes):
    rng = np.random.default_rng(5)
    tasks = [random_matrix(rng, 50, 30, 0.5, dup_rows=5) for _ in range(30)]
    expected = af.rerank_batch(tasks, "aces-c", backend="numba", n_threads=2)
    results, errors = [None] * 4, []

    def work(k):
        try:
            results[k] = af.rerank_batch(tasks, "aces-c", backend="numba", n_threads=2)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for res in results:
        for a, b in zip(res, expected):
            assert_same_result(a, b)


def test_numba_has_no_batch_kernel_for_consensus_methods(numba_routes):
    be = get_backend("numba")
    prepared = [be.prepare(B) for B in MIXED[:5]]
    assert be.rerank_batch(prepared, "codet", {"exponent": 0.5}, None) is None
    assert be.rerank_batch(prepared, "b4", {"alpha": 1e3, "beta0": 1e4}, None) is None
    for g, w in zip(
        af.rerank_batch(MIXED[:5], "b4", backend="numba"), _one_by_one(MIXED[:5], "b4", "numba")
    ):
        assert_same_result(g, w)


# ---------------------------------------------------------------------------
# torch


@pytest.fixture(scope="module")
def torch_mod():
    require_backend("torch")
    import torch

    return torch


@pytest.mark.parametrize("method", TORCH_METHODS)
def test_torch_batch_equals_one_by_one(torch_mod, method):
    want = _one_by_one(MIXED, method, "torch")
    for n_threads in (None, 1, 2):
        got = af.rerank_batch(MIXED, method, backend="torch", n_threads=n_threads)
        assert len(got) == len(MIXED)
        for g, w in zip(got, want):
            assert isinstance(g.scores, np.ndarray)
            assert_same_result(g, w)


@pytest.mark.parametrize("method", TORCH_METHODS)
def test_torch_tensors_in_tensors_out(torch_mod, method):
    torch = torch_mod
    tasks = [torch.from_numpy(np.asarray(B)) for B in MIXED]
    tasks[4] = tasks[4].to(torch.float32)  # any 0/1 dtype
    got = af.rerank_batch(tasks, method, backend="torch")
    for g, w in zip(got, _one_by_one(tasks, method, "torch")):
        assert isinstance(g.scores, torch.Tensor) and isinstance(g.order, torch.Tensor)
        assert g.scores.device == tasks[0].device
        assert_same_result(g, w)
    # NumPy and tensor tasks may be mixed on the CPU: each result mirrors its input
    mixed = [MIXED[0], tasks[0]]
    a, b = af.rerank_batch(mixed, method, backend="torch")
    assert isinstance(a.scores, np.ndarray) and isinstance(b.scores, torch.Tensor)
    np.testing.assert_array_equal(a.scores, b.scores.numpy())


@pytest.mark.parametrize("method", TORCH_METHODS)
def test_torch_batch_real_data(torch_mod, real_tasks, method):
    got = af.rerank_batch(real_tasks, method, backend="torch")
    for g, w in zip(got, _one_by_one(real_tasks, method, "torch")):
        assert_same_result(g, w)


@pytest.mark.parametrize("chunk", [1, 64, 2000])
def test_torch_chunking_does_not_change_results(torch_mod, chunk):
    from aces_fast.backends.torch import TorchBackend

    be = TorchBackend(chunk_elements=chunk)  # 1: every task alone, over budget (per-task path)
    prepared = [be.prepare(B) for B in MIXED]
    want = _one_by_one(MIXED, "aces-c", "torch")
    for g, w in zip(be.rerank_batch(prepared, "aces-c", {"tie_tol": 1e-9}, None), want):
        assert_same_result(g, w)


def test_torch_batch_matches_reference(torch_mod):
    got = af.rerank_batch(MIXED, "aces-c", backend="torch")
    for g, ref in zip(got, _one_by_one(MIXED, "aces-c", "numpy")):
        np.testing.assert_allclose(g.weights, ref.weights, rtol=0, atol=1e-12)
        np.testing.assert_allclose(g.loo_auc, ref.loo_auc, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(g.order, ref.order)
        assert g.fallback == ref.fallback


def test_torch_consensus_run_task_by_task(torch_mod):
    be = get_backend("torch")
    prepared = [be.prepare(B) for B in MIXED[:6]]
    for method in ("codet", "b4"):
        assert be.rerank_batch(prepared, method, _full_params(method), None) is None


@pytest.mark.parametrize("method", ["aces-o", "aces-o-warm"])
def test_torch_aces_o_batch_close_to_one_by_one(torch_mod, method):
    """Batched ACES-O sums in another order than the per-task path: equal to
    rounding (1e-12 here), and to the reference within the contract's tolerance (docs/contract.rst §4)."""
    got = af.rerank_batch(MIXED, method, backend="torch", **PARAMS[method])
    for g, w, r in zip(
        got, _one_by_one(MIXED, method, "torch"), _one_by_one(MIXED, method, "numpy")
    ):
        assert g.method == w.method
        np.testing.assert_allclose(g.weights, w.weights, rtol=0, atol=1e-12)
        np.testing.assert_allclose(g.weights, r.weights, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(g.order, w.order)


def test_torch_batch_needs_one_device(torch_mod):
    torch = torch_mod
    be = get_backend("torch")
    cpu = torch.from_numpy(EXAMPLE)
    other = torch.zeros((3, 2), dtype=torch.uint8, device="meta")  # a second device, no data
    with pytest.raises(ValueError, match=r"task 2: .*'meta'.*one device"):
        be.rerank_batch([cpu, cpu, other], "aces-c", {"tie_tol": 1e-9}, None)


def test_torch_n_threads_is_restored(torch_mod):
    torch = torch_mod
    before = torch.get_num_threads()
    af.rerank_batch(MIXED, "aces-c", backend="torch", n_threads=1)
    assert torch.get_num_threads() == before


def test_torch_padded_loo_auc_against_per_task(torch_mod):
    """Padding rows and columns never count; every value is the NumPy reference's per
    task, bit for bit (and with row multiplicities, that of the repeated rows)."""
    torch = torch_mod
    from aces_fast.backends.torch import loo_auc as torch_loo_auc

    rng = np.random.default_rng(11)
    for _ in range(40):
        T, n, m = int(rng.integers(1, 6)), int(rng.integers(1, 30)), int(rng.integers(1, 25))
        rows = rng.integers(1, n + 1, size=T)
        cols = rng.integers(0, m + 1, size=T)
        B = np.zeros((T, n, m), np.uint8)
        for t in range(T):
            B[t, : rows[t], : cols[t]] = random_matrix(
                rng, rows[t], cols[t], rng.random(), dup_rows=rows[t] // 2
            )
        valid = torch.arange(n)[None, :] < torch.from_numpy(rows)[:, None]
        counts = rng.integers(0, 4, size=(T, n))
        chunk = int(rng.choice([1, 50, 10**6]))
        L, passers = torch_loo_auc.loo_auc_uniform(torch.from_numpy(B), valid, None, chunk)
        Lc, passers_c = torch_loo_auc.loo_auc_uniform(
            torch.from_numpy(B), valid, torch.from_numpy(counts), chunk
        )
        for t in range(T):
            Bt = np.ascontiguousarray(B[t, : rows[t], : cols[t]])
            want = af.loo_auc(Bt, backend="numpy")
            np.testing.assert_array_equal(L[t, : cols[t]].numpy(), want)
            assert torch.isnan(L[t, cols[t] :]).all()
            np.testing.assert_array_equal(passers[t, : cols[t]].numpy(), Bt.sum(0))
            repeated = np.repeat(Bt, counts[t, : rows[t]], axis=0)
            if len(repeated):
                want = af.loo_auc(repeated, backend="numpy")
                np.testing.assert_array_equal(Lc[t, : cols[t]].numpy(), want)
                np.testing.assert_array_equal(passers_c[t, : cols[t]].numpy(), repeated.sum(0))


def test_torch_loo_auc_counts_stay_exact_past_float32(torch_mod):
    """From n = 2897 on, the level tables' sums of products (at most 2 n**2) pass
    2**24: the kernel counts in float64 there, and still equals the reference bit
    for bit on both sides of the switch (and where n**2 passes 2**24 too)."""
    torch = torch_mod
    from aces_fast.backends.torch import loo_auc as torch_loo_auc

    rng = np.random.default_rng(13)
    for n in (2896, 2897, 4100):
        B = random_matrix(rng, n, 6, 0.5, dup_rows=n // 3)
        L, _ = torch_loo_auc.loo_auc_uniform(torch.from_numpy(B)[None])
        np.testing.assert_array_equal(L[0].numpy(), af.loo_auc(B, backend="numpy"))


def test_torch_scores_and_sums_do_not_depend_on_order_or_padding(torch_mod):
    """Scores and weight sums: padding, batching and order leave them bit-identical, and
    they are within two roundings of the exact sums (checked with fractions)."""
    torch = torch_mod
    from aces_fast.backends.torch import scores as ops

    rng = np.random.default_rng(12)
    for _trial in range(25):
        n, m = int(rng.integers(1, 30)), int(rng.integers(1, 80))
        B = (rng.random((n, m)) < rng.random()).astype(np.uint8)
        w = rng.random(m) ** int(rng.integers(1, 20))  # wide dynamic range
        s = ops.row_scores(torch.from_numpy(B), torch.from_numpy(w)).numpy()
        exact = np.array(
            [float(sum((Fraction(float(x)) for x in w[B[i] == 1]), Fraction(0))) for i in range(n)]
        )
        np.testing.assert_allclose(s, exact, rtol=4.5e-16, atol=m * 2.0**-78 * w.max())
        padded_B = np.zeros((3, n + 4, m + 5), np.uint8)
        padded_B[1, :n, :m] = B
        padded_w = rng.random((3, m + 5))
        padded_w[1] = 0.0
        padded_w[1, :m] = w
        batch = ops.row_scores(torch.from_numpy(padded_B), torch.from_numpy(padded_w))
        np.testing.assert_array_equal(batch[1, :n].numpy(), s)
        # the weight sum (normalization, tie tolerance) has the same property
        total = float(ops.exact_sum(torch.from_numpy(w)))
        exact_total = float(sum((Fraction(float(x)) for x in w), Fraction(0)))
        assert abs(total - exact_total) <= 4.5e-16 * exact_total + m * 2.0**-78 * w.max()
        assert float(ops.exact_sum(torch.from_numpy(padded_w))[1]) == total
        assert float(ops.exact_sum(torch.from_numpy(w[::-1].copy()))) == total  # any order


def test_numba_task_threads_reraise_the_first_error(numba_routes):
    from aces_fast.backends.numba import _in_threads

    done = []

    def fn(item):
        if item == 3:
            raise ValueError("task 3 failed")
        done.append(item)

    with pytest.raises(ValueError, match="task 3 failed"):
        _in_threads(fn, np.arange(8), 2)
    done.clear()
    _in_threads(done.append, np.arange(50), 3)  # every item exactly once
    assert sorted(done) == list(range(50))
