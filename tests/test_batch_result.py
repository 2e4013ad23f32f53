"""``BatchResult``: the columnar result of ``rerank_batch``.

Item ``t`` must be ``rerank(tasks[t])`` bit for bit (every field, dtype and info
key) for every method on every backend; the flat columns must hold exactly the
items' arrays at their offsets; the sequence must behave like the list it
replaces; ``to_arrow`` must wrap the columns without copying them; and the
columns must not depend on the thread count or on how a batch is split.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence

import numpy as np
import pytest

import aces_fast as af
from aces_fast.batch_result import BatchResult
from aces_fast.datasets import load_dataset
from helpers import EXAMPLE, assert_same_result, npy, random_matrix, require_backend

#: short ACES-O fits: the comparisons are exact, the number of steps does not matter
PARAMS = {"aces-o": {"steps": 5, "lr": 0.05}, "aces-o-warm": {"steps": 5, "lr": 0.05, "top_k": 4}}


def _tasks(seed: int = 0, count: int = 12):
    """m = 0, n = 1, constant tests, a fallback, duplicate rows, random shapes."""
    rng = np.random.default_rng(seed)
    tasks = [
        EXAMPLE,
        np.zeros((4, 0), np.uint8),
        np.array([[1, 0, 1]], np.uint8),
        np.zeros((1, 0), np.uint8),
        np.ones((3, 5), np.uint8),
        np.eye(6, dtype=bool),
    ]
    for _ in range(count):
        n, m = int(rng.integers(1, 40)), int(rng.integers(0, 30))
        tasks.append(random_matrix(rng, n, m, rng.uniform(0.1, 0.9), dup_rows=n // 2))
    return tasks


TASKS = _tasks()


@pytest.fixture(scope="module")
def real_tasks():
    """Some gpt-3.5 problems (5 x m) and CodeGen ones (100 x m, m = 0 among them)."""
    gpt = [p.B for p in load_dataset("humaneval-gpt35")][:40]
    codegen = sorted(load_dataset("humaneval-codegen16b"), key=lambda p: p.m)
    picked = codegen[:2] + codegen[80:82]
    assert picked[0].m == 0
    return gpt + [p.B for p in picked]


def _columns_match_items(res: BatchResult) -> None:
    """The flat columns hold every item's arrays at its offsets (dtypes included)."""
    T = len(res)
    assert res.n_offsets.dtype == np.int64 and res.n_offsets.shape == (T + 1,)
    assert res.n_offsets[0] == 0 and res.fallback.dtype == bool and res.fallback.shape == (T,)
    for t, item in enumerate(res):
        a, b = res.n_offsets[t], res.n_offsets[t + 1]
        assert npy(res.scores[a:b]).tobytes() == npy(item.scores).tobytes()
        assert npy(res.order[a:b]).tobytes() == npy(item.order).tobytes()
        assert bool(res.fallback[t]) == item.fallback
        for name, off in (
            ("weights", res.m_offsets),
            ("loo_auc", res.m_offsets),
            ("objective", res.objective_offsets),
        ):
            col, got = getattr(res, name), getattr(item, name)
            assert (col is None) == (got is None), name
            if col is not None:
                assert npy(col[off[t] : off[t + 1]]).tobytes() == npy(got).tobytes(), name
        if res.rows is not None:
            rows = res.rows[res.rows_offsets[t] : res.rows_offsets[t + 1]]
            np.testing.assert_array_equal(npy(rows), npy(item.info["rows"]))


def _check_batch(tasks, method, backend):
    params = PARAMS.get(method, {})
    res = af.rerank_batch(tasks, method, backend=backend, **params)
    assert isinstance(res, BatchResult) and len(res) == len(tasks)
    assert (res.method, res.backend) == (res[0].method, backend)
    for B, item in zip(tasks, res):
        want = af.rerank(B, method, backend=backend, **params)
        if backend == "torch" and method.startswith("aces-o"):
            # torch's batched ACES-O sums its matrix products in another order
            # (documented: weights equal to ~1e-12, orders equal)
            _assert_close_result(item, want)
        else:
            assert_same_result(item, want)
    _columns_match_items(res)
    return res


def _assert_close_result(got, want):
    assert (got.method, got.backend, got.fallback) == (want.method, want.backend, want.fallback)
    np.testing.assert_array_equal(npy(got.order), npy(want.order))
    for name in ("scores", "weights", "objective"):
        a, b = npy(getattr(got, name)), npy(getattr(want, name))
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10, err_msg=name)
    assert got.info.keys() == want.info.keys()


@pytest.mark.parametrize("method", list(af.METHODS))
def test_items_equal_rerank_every_backend(backend, method):
    if backend == "numpy" and method.startswith("aces-o"):
        tasks = TASKS[:10]  # the NumPy reference fit is slow; the shapes are covered
    else:
        tasks = TASKS
    _check_batch(tasks, method, backend)


@pytest.mark.parametrize("method", ["majority", "aces-c", "aces-c-filter", "aces-o-warm", "b4"])
def test_items_equal_rerank_on_bundled_data(backend, method, real_tasks):
    tasks = real_tasks if backend != "numpy" or method != "aces-o-warm" else real_tasks[:12]
    _check_batch(tasks, method, backend)


@pytest.mark.parametrize("method", ["majority", "aces-c", "aces-c-filter"])
def test_columns_agree_with_numpy_reference(fast_backend, method):
    got = af.rerank_batch(TASKS, method, backend=fast_backend)
    want = af.rerank_batch(TASKS, method, backend="numpy")
    np.testing.assert_array_equal(got.n_offsets, want.n_offsets)
    np.testing.assert_array_equal(got.m_offsets, want.m_offsets)
    np.testing.assert_allclose(npy(got.scores), want.scores, rtol=0, atol=1e-12)
    np.testing.assert_allclose(npy(got.weights), want.weights, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got.fallback, want.fallback)


def test_cpp_columns_do_not_depend_on_threads_or_batch_size():
    require_backend("cpp")
    tasks = TASKS * 3
    for method in ("majority", "aces-c", "aces-c-filter", "aces-o", "aces-o-warm"):
        params = PARAMS.get(method, {})
        ref = af.rerank_batch(tasks, method, backend="cpp", n_threads=1, **params)
        fields = ("scores", "order", "weights", "loo_auc", "fallback", "objective", "rows")
        for n_threads in (2, 3):
            got = af.rerank_batch(tasks, method, backend="cpp", n_threads=n_threads, **params)
            for f in (*fields, "n_offsets", "m_offsets", "objective_offsets", "rows_offsets"):
                a, b = getattr(got, f), getattr(ref, f)
                assert (a is None) == (b is None), f
                assert a is None or a.tobytes() == b.tobytes(), (method, n_threads, f)
        for size in (1, 5):  # the batch split into pieces: the same values, task by task
            parts = [
                af.rerank_batch(tasks[i : i + size], method, backend="cpp", n_threads=2, **params)
                for i in range(0, len(tasks), size)
            ]
            for f in fields:
                if getattr(ref, f) is None:
                    assert all(getattr(p, f) is None for p in parts), f
                    continue
                joined = np.concatenate([getattr(p, f) for p in parts])
                assert joined.tobytes() == getattr(ref, f).tobytes(), (method, size, f)


def test_sequence_behaves_like_the_list():
    res = af.rerank_batch(TASKS, "aces-c")
    items = list(res)
    assert isinstance(res, Sequence) and len(res) == len(TASKS)
    assert res[0] is res[0] is items[0]  # built once, then kept
    assert res[-1] is items[-1] and res[len(TASKS) - 2] is items[-2]
    assert res[2:5] == items[2:5] and isinstance(res[2:5], list)
    assert res[::-3] == items[::-3] and res[100:] == []
    assert res == items and items == res and res == res
    assert res != items[:-1] and res != items[::-1] and res != tuple(items)
    assert res.index(items[3]) == 3 and items[4] in res
    assert [r.best for r in reversed(res)] == [r.best for r in items[::-1]]
    assert res[np.int64(1)] is items[1]
    with pytest.raises(IndexError, match="out of range"):
        res[len(TASKS)]
    with pytest.raises(IndexError):
        res[-len(TASKS) - 1]
    with pytest.raises(TypeError, match="integers or slices"):
        res["0"]
    with pytest.raises(TypeError):
        hash(res)
    assert repr(res) == (
        f"BatchResult(method='aces-c', backend='{res.backend}', "
        f"tasks={len(TASKS)}, candidates={sum(B.shape[0] for B in TASKS)})"
    )


def test_empty_batch(backend):
    for method in ("majority", "codet", "aces-o"):
        res = af.rerank_batch([], method, backend=backend)
        assert isinstance(res, BatchResult) and res == [] and len(res) == 0 and list(res) == []
        assert res.n_offsets.tolist() == [0] and res.scores.size == 0
        assert (res.weights is None) == (method == "codet")
        assert (res.objective is None) == (method != "aces-o")


def test_lazy_items_are_views_of_the_columns():
    require_backend("cpp")
    res = af.rerank_batch(TASKS, "aces-o", backend="cpp", steps=3)
    assert res._items.count(None) == len(TASKS)  # nothing built before it is asked for
    item = res[6]
    assert res._items.count(None) == len(TASKS) - 1
    assert np.shares_memory(item.scores, res.scores) and np.shares_memory(item.order, res.order)
    assert np.shares_memory(item.weights, res.weights)
    assert np.shares_memory(item.objective, res.objective)


def test_to_arrow_wraps_the_columns():
    pa = pytest.importorskip("pyarrow")
    for backend in ("cpp", "numpy"):
        require_backend(backend)
        for method in ("aces-c", "aces-o-warm", "codet"):
            res = af.rerank_batch(TASKS, method, backend=backend, **PARAMS.get(method, {}))
            table = res.to_arrow()
            assert table.num_rows == len(TASKS)
            want = (
                ["scores", "order"]
                + (["weights"] if res.weights is not None else [])
                + (["loo_auc"] if res.loo_auc is not None else [])
                + ["fallback"]
                + (["objective", "rows"] if res.objective is not None else [])
            )
            assert table.column_names == want
            assert table.schema.field("order").type == pa.list_(pa.int64())
            rows = table.to_pylist()
            for t, item in enumerate(res):
                assert rows[t]["scores"] == item.scores.tolist()
                assert rows[t]["order"] == item.order.tolist()
                assert rows[t]["fallback"] == item.fallback
                if item.weights is not None:
                    assert rows[t]["weights"] == item.weights.tolist()
                if item.objective is not None:
                    assert rows[t]["objective"] == item.objective.tolist()
                    assert rows[t]["rows"] == item.info["rows"].tolist()
            # the float64 values are the batch's own buffer, not a copy
            values = table.column("scores").chunk(0).values
            assert values.buffers()[1].address == res.scores.ctypes.data


def test_to_arrow_of_tensors_and_an_empty_batch():
    pytest.importorskip("pyarrow")
    torch = pytest.importorskip("torch")
    require_backend("torch")
    tasks = [torch.as_tensor(B.astype(np.uint8)) for B in TASKS[:6]]
    res = af.rerank_batch(tasks, "aces-c", backend="torch")
    assert isinstance(res.scores, torch.Tensor) and isinstance(res.n_offsets, np.ndarray)
    table = res.to_arrow()
    for t, item in enumerate(res):
        assert table.column("scores")[t].as_py() == npy(item.scores).tolist()
    assert (
        af.rerank_batch(
            [], "aces-c", backend="cpp" if "cpp" in af.available_backends() else "numpy"
        )
        .to_arrow()
        .num_rows
        == 0
    )


def test_pickle_round_trip():
    res = af.rerank_batch(TASKS, "aces-o-warm", steps=3)
    res[2]  # a built item and unbuilt ones both survive
    back = pickle.loads(pickle.dumps(res))
    assert len(back) == len(res) and back.method == "aces-o-warm"
    for a, b in zip(back, res):
        assert_same_result(a, b)


def test_torch_batch_of_tensors_and_arrays():
    """torch gives tensors for tensor inputs and arrays for array inputs: a mixed
    batch keeps each item's own type, its columns are NumPy."""
    torch = pytest.importorskip("torch")
    require_backend("torch")
    tasks = [torch.as_tensor(TASKS[0]), TASKS[1], TASKS[2], torch.as_tensor(TASKS[6])]
    res = af.rerank_batch(tasks, "aces-c", backend="torch")
    assert isinstance(res.scores, np.ndarray) and isinstance(res.weights, np.ndarray)
    assert isinstance(res[0].scores, torch.Tensor) and isinstance(res[1].scores, np.ndarray)
    for B, item in zip(tasks, res):
        assert_same_result(item, af.rerank(B, "aces-c", backend="torch"))
    _columns_match_items(res)
