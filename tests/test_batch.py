"""``rerank_batch``: many tasks in one call, identical to ranking them one by one.

Also the C++ method path behind it (``_core.rerank``): agreement with the NumPy
reference, thread-count independence and thread safety under concurrent calls.
"""

from __future__ import annotations

import inspect
import threading

import numpy as np
import pytest

import aces_fast as af
from aces_fast import methods
from aces_fast.batch import METHOD_PARAMS, rerank_batch
from helpers import EXAMPLE, assert_same_result, npy, random_matrix, require_backend

EXACT = 1e-12
OPT = 1e-6


def _cpp():
    require_backend("cpp")
    import core_calls

    return core_calls


def mixed_tasks(seed=0, count=24):
    """Tasks of many shapes: m = 0, n = 1, constant columns, heavy duplicates."""
    rng = np.random.default_rng(seed)
    tasks = [
        EXAMPLE,
        np.zeros((4, 0), np.uint8),
        np.array([[1, 0, 1]], np.uint8),
        np.ones((3, 5), np.uint8),
        np.eye(6, dtype=np.uint8).astype(bool),
    ]
    for _ in range(count):
        n, m = int(rng.integers(1, 70)), int(rng.integers(0, 40))
        tasks.append(random_matrix(rng, n, m, rng.uniform(0.1, 0.9), dup_rows=n // 2))
    tasks.append(random_matrix(rng, 300, 60, 0.5, dup_rows=200))  # > 24 rows: top-k matters
    return tasks


TASKS = mixed_tasks()

#: small ACES-O settings so the exhaustive comparisons stay fast
FAST_O = {"aces-o": dict(steps=12, lr=0.05), "aces-o-warm": dict(steps=12, lr=0.05)}


@pytest.mark.parametrize("method", list(af.METHODS))
def test_batch_equals_one_by_one_cpp(method):
    _cpp()
    params = FAST_O.get(method, {})
    for n_threads in (None, 1, 2):
        results = rerank_batch(TASKS, method, backend="cpp", n_threads=n_threads, **params)
        assert len(results) == len(TASKS)
        for B, res in zip(TASKS, results):
            assert_same_result(res, af.rerank(B, method, backend="cpp", **params))


@pytest.mark.parametrize("method", ["aces-c", "majority", "codet"])
def test_batch_around_the_prefetch_size(method):
    """Tasks whose bytes are above, inside and below the sizes run_batch
    prefetches (2^14 to 2^19, methods/batch.cpp), interleaved, with ranges of
    several small tasks per claim: a task run twice or skipped, or a schedule
    broken where the sizes change, would show here."""
    _cpp()
    rng = np.random.default_rng(11)
    big = [random_matrix(rng, 1100, 500, 0.5, dup_rows=300) for _ in range(3)]  # 550 000 bytes
    small = [random_matrix(rng, int(rng.integers(2, 300)), 500, 0.4) for _ in range(40)]
    tasks = [t for pair in zip(small[:3], big) for t in pair] + small[3:]
    assert all(t.size > 1 << 19 for t in big) and all(t.size <= 1 << 19 for t in small)
    assert min(t.size for t in small) < 1 << 14 < max(t.size for t in small)
    want = [af.rerank(B, method, backend="cpp") for B in tasks]
    for n_threads in (1, 2, 3):
        got = rerank_batch(tasks, method, backend="cpp", n_threads=n_threads)
        assert len(got) == len(tasks)
        for res, ref in zip(got, want):
            assert_same_result(res, ref)


@pytest.mark.parametrize("backend_name", ["numpy", "torch"])
@pytest.mark.parametrize("method", ["majority", "aces-c", "codet"])
def test_batch_equals_one_by_one_other_backends(backend_name, method):
    """Backends without a batch path run the per-task loop: the same results.

    numpy (plain arrays) and torch (its own ``prepare``: tensors in, tensors out)
    cover both kinds of backend; numba is left out only for its JIT start-up time.
    """
    require_backend(backend_name)
    backend = backend_name
    tasks = TASKS[:8]
    params = FAST_O.get(method, {})
    results = rerank_batch(tasks, method, backend=backend, **params)
    for B, res in zip(tasks, results):
        assert_same_result(res, af.rerank(B, method, backend=backend, **params))


def test_batch_parameters_reach_every_task():
    _cpp()
    kw = dict(gamma=3.0, lr=0.1, steps=7, top_k=5, init="aces-c", tie_tol=1e-6)
    results = rerank_batch(TASKS[:10], "aces-o", backend="cpp", **kw)
    for B, res in zip(TASKS[:10], results):
        assert res.method == "aces-o-warm"
        assert npy(res.objective).shape == (8,)
        assert {k: res.info[k] for k in ("gamma", "lr", "steps", "top_k", "init")} == {
            k: kw[k] for k in ("gamma", "lr", "steps", "top_k", "init")
        }
        assert_same_result(res, af.aces_o(B, backend="cpp", **kw))
    filt = rerank_batch(TASKS[:6], "aces-c-filter", backend="cpp", tie_tol=0.0)
    for B, res in zip(TASKS[:6], filt):
        assert_same_result(res, af.aces_c(B, "filter", tie_tol=0.0, backend="cpp"))
    lin = rerank_batch(TASKS[:6], "codet-linear", backend="cpp", exponent=2.0)
    for B, res in zip(TASKS[:6], lin):
        assert_same_result(res, af.codet(B, 2.0, backend="cpp"))


def test_batch_input_forms():
    _cpp()
    assert rerank_batch([], "aces-c", backend="cpp") == []
    stack = np.stack([random_matrix(np.random.default_rng(i), 9, 6) for i in range(4)])
    from_stack = rerank_batch(stack, "aces-c", backend="cpp")
    from_list = rerank_batch(list(stack), "aces-c", backend="cpp")
    for a, b in zip(from_stack, from_list):
        assert_same_result(a, b)
    # lists, tuples, generators, bool and float matrices, nested lists
    gen = (B.astype(np.float64) for B in stack)
    for a, b in zip(
        rerank_batch(gen, "majority", backend="cpp"),
        rerank_batch(tuple(stack.tolist()), "majority", backend="cpp"),
    ):
        assert_same_result(a, b)


def _same_columns(a, b):
    """Two BatchResults hold the same bits in every column."""
    assert (len(a), a.backend) == (len(b), b.backend)
    for name in (
        *("n_offsets", "m_offsets", "scores", "weights", "order", "loo_auc", "fallback"),
        *("objective", "objective_offsets", "rows", "rows_offsets"),
    ):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), name
    for t in range(len(a)):
        assert_same_result(a[t], b[t])


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("majority", {}),
        ("aces-c", {}),
        ("aces-c-filter", {"tie_tol": 0.0}),
    ],
)
@pytest.mark.parametrize("shape", [(5, 1, 7), (3, 9, 0), (7, 40, 65), (2, 129, 64), (40, 24, 100)])
def test_a_ready_stack_is_ranked_in_place_like_its_slices(monkeypatch, method, params, shape):
    """A 3-D C-contiguous uint8 stack goes to C++ whole (no Python view per task)
    and gives the bits of the list of its slices, at any thread count."""
    _cpp()
    rng = np.random.default_rng(sum(shape))
    stack = np.stack(
        [random_matrix(rng, *shape[1:], dup_rows=shape[1] // 3) for _ in range(shape[0])]
    )
    stack.setflags(write=False)  # ranked in place: a read-only stack is fine
    want = rerank_batch(list(stack), method, backend="cpp", **params)

    def no_task_list(tasks):
        raise AssertionError("a ready stack was split into a list")

    monkeypatch.setattr("aces_fast.batch._task_list", no_task_list)
    for threads in (1, 2, None):
        _same_columns(rerank_batch(stack, method, backend="cpp", n_threads=threads, **params), want)


def test_other_stacks_take_the_general_path():
    """Stacks that need converting (another dtype, not C-contiguous, no rows),
    methods without a compiled copy and ACES-O (whose cost warning reads each
    task; per-task views are nothing next to its fit) rank exactly as their
    list of slices."""
    _cpp()
    rng = np.random.default_rng(3)
    stack = np.stack([random_matrix(rng, 8, 10) for _ in range(6)])
    for other in (
        stack.astype(bool),
        stack.astype(np.int64),
        np.asfortranarray(stack),
        stack[:, :, ::2],
        stack[::2],
    ):
        _same_columns(
            rerank_batch(other, "aces-c", backend="cpp"),
            rerank_batch(list(other), "aces-c", backend="cpp"),
        )
    for method, params in (
        ("codet", {}),
        ("b4", {}),
        ("aces-o", {"steps": 3, "top_k": 4}),
        ("aces-o-warm", {"steps": 2}),
    ):
        _same_columns(
            rerank_batch(stack, method, backend="cpp", **params),
            rerank_batch(list(stack), method, backend="cpp", **params),
        )
    with pytest.raises(ValueError, match=r"^task 0: B has an empty candidate axis"):
        rerank_batch(np.zeros((2, 0, 3), np.uint8), "aces-c", backend="cpp")


def test_a_stack_names_its_bad_task():
    _cpp()
    stack = np.stack([EXAMPLE] * 5)
    stack[3, 1, 2] = 2
    with pytest.raises(ValueError, match=r"^task 3: B must contain only 0 and 1; found value 2$"):
        rerank_batch(stack, "aces-c", backend="cpp")
    core = _cpp()
    with pytest.raises(ValueError, match=r"^task 3: B must contain only 0 and 1"):
        core.rerank_batch_flat(stack, 1)
    with pytest.raises(TypeError, match="3-D C-contiguous uint8 stack"):
        core.rerank_batch_flat(stack.astype(np.int64), 1)
    with pytest.raises(TypeError, match="3-D C-contiguous uint8 stack"):
        core.rerank_batch_flat(np.asfortranarray(stack), 1)
    with pytest.raises(TypeError, match="3-D C-contiguous uint8 stack"):
        core.rerank_batch_flat(EXAMPLE, 1)
    with pytest.raises(ValueError, match="task 0: B has no rows"):
        core.rerank_batch_flat(np.zeros((2, 0, 3), np.uint8), 1)


def test_batch_errors_name_the_task():
    _cpp()
    good = EXAMPLE
    with pytest.raises(ValueError, match=r"^task 2: .*2-D"):
        rerank_batch([good, good, np.zeros(5), good], backend="cpp")
    with pytest.raises(ValueError, match=r"^task 1: .*only 0 and 1"):
        rerank_batch([good, np.full((3, 3), 2)], backend="cpp")
    with pytest.raises(ValueError, match=r"^task 0: .*empty candidate axis"):
        rerank_batch([np.zeros((0, 3))], backend="cpp")
    with pytest.raises(TypeError, match=r"^task 1: .*dtype"):
        rerank_batch([good, np.array([["a", "b"]])], backend="cpp")
    with pytest.raises(TypeError, match="list"):
        rerank_batch(good, backend="cpp")  # one matrix, not a list of them
    with pytest.raises(TypeError, match="list"):
        rerank_batch(3, backend="cpp")
    with pytest.raises(ValueError, match="unknown method"):
        rerank_batch([good], "aces-x", backend="cpp")
    with pytest.raises(TypeError, match="unexpected parameter.*lr"):
        rerank_batch([good], "aces-c", lr=0.1, backend="cpp")
    with pytest.raises(ValueError, match="gamma"):
        rerank_batch([good], "aces-o", gamma=-1.0, backend="cpp")
    with pytest.raises(ValueError, match="init"):
        rerank_batch([good], "aces-o", init="zeros", backend="cpp")
    with pytest.raises(TypeError, match="top_k"):
        rerank_batch([good], "aces-o", top_k=2.5, backend="cpp")
    with pytest.raises(ValueError, match="n_threads"):
        rerank_batch([good], n_threads=0, backend="cpp")


def test_core_batch_errors_name_the_task():
    core = _cpp()
    with pytest.raises(ValueError, match="task 1: B must be 2-D"):
        core.rerank_batch([EXAMPLE, np.zeros(3, np.uint8)], 1)
    with pytest.raises(TypeError, match="task 0: B must have dtype uint8 or bool"):
        core.rerank_batch([EXAMPLE.astype(np.int64)], 1)
    with pytest.raises(TypeError, match="tasks must be a list"):
        core.rerank_batch(EXAMPLE, 1)
    with pytest.raises(ValueError, match="method code"):
        core.rerank_batch([EXAMPLE], 7)


def test_core_flat_batch_errors_name_the_task():
    core = _cpp()

    bad = EXAMPLE.copy()
    bad[2, 1] = 7
    with pytest.raises(ValueError, match="task 1: B must be 2-D"):
        core.rerank_batch_flat([EXAMPLE, np.zeros(3, np.uint8)], 1)
    with pytest.raises(TypeError, match="task 0: B must have dtype uint8 or bool"):
        core.rerank_batch_flat([EXAMPLE.astype(np.int64)], 1)
    with pytest.raises(TypeError, match="task 1: B must be C-contiguous"):
        core.rerank_batch_flat([EXAMPLE, np.asfortranarray(EXAMPLE)], 1)
    with pytest.raises(ValueError, match="task 2: B has no rows"):
        core.rerank_batch_flat([EXAMPLE, EXAMPLE, np.zeros((0, 3), np.uint8)], 1)
    with pytest.raises(ValueError, match="^task 1: B must contain only 0 and 1; found value 7"):
        core.rerank_batch_flat([EXAMPLE, bad, bad], 3, steps=2)
    with pytest.raises(ValueError, match="method code"):
        core.rerank_batch_flat([EXAMPLE], 7)
    # the public function reports the same task, through its own checks
    with pytest.raises(ValueError, match="^task 1: B must contain only 0 and 1"):
        af.rerank_batch([EXAMPLE, bad], "aces-c", backend="cpp")


def test_core_batch_calls_allocate_only_their_results():
    """Past its results, a batch call allocates nothing per task (numpy arrays
    are traced by tracemalloc): each task's matrix is referenced, not wrapped in
    a new array. A default-constructed pybind11 array is a new empty array, and
    two per task once cost a tenth of a 24x100 task. Also for one ``rerank``."""
    import tracemalloc

    core = _cpp()
    tasks = [np.ones((1, 1), np.uint8) for _ in range(4000)]
    for call in (lambda: core.rerank_batch_flat(tasks, 1), lambda: core.rerank(EXAMPLE, 1)):
        call()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            out = call()
            kept, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert kept > base  # the results are traced
        # 4 000 tasks: 64 bytes per task more would be 256 KB
        assert peak - kept < 16 * 1024, (peak - kept, kept - base)
        del out


def test_core_flat_batch_layout():
    """The flat call's offsets and column lengths, on a method of each kind."""
    core = _cpp()

    tasks = TASKS[:8]
    n = [B.shape[0] for B in tasks]
    m = [B.shape[1] for B in tasks]
    P = [np.ascontiguousarray(B, dtype=np.uint8) for B in tasks]
    out = core.rerank_batch_flat(P, 3, steps=4, top_k=2)
    n_off, m_off, scores, weights, order, loo, fallback, objective, o_off, rows, r_off = out
    assert n_off.tolist() == np.concatenate([[0], np.cumsum(n)]).tolist()
    assert m_off.tolist() == np.concatenate([[0], np.cumsum(m)]).tolist()
    assert (scores.size, order.size, weights.size) == (sum(n), sum(n), sum(m))
    assert scores.dtype == np.float64 and order.dtype == np.int64 and fallback.dtype == bool
    assert loo is None and o_off.tolist() == list(range(0, 5 * len(tasks) + 1, 5))
    assert r_off.tolist() == np.concatenate([[0], np.cumsum([min(2, k) for k in n])]).tolist()
    assert objective.size == 5 * len(tasks) and rows.size == r_off[-1]
    c = core.rerank_batch_flat(P, 1)
    assert c[5].size == sum(m) and c[7] is None and c[9] is None


def test_core_prepared_prefix():
    """The leading tasks a cpp batch passes on unconverted: exactly what
    as_pass_matrix returns unchanged, nothing else."""
    _cpp()
    from aces_fast._compiled import core

    u8 = np.ascontiguousarray(EXAMPLE, dtype=np.uint8)

    class Sub(np.ndarray):
        pass

    others = [
        u8.astype(bool),
        u8.astype(np.int8),
        u8.astype(np.float64),
        np.asfortranarray(u8),
        u8[:, ::2],
        u8[None],
        u8[:0],
        u8.view(Sub),
        u8.tolist(),
        u8.reshape(-1),
    ]
    for other in others:
        assert core.prepared_prefix(tasks=[u8, u8, other, u8]) == 2
    assert core.prepared_prefix(tasks=[]) == 0
    assert core.prepared_prefix(tasks=(u8, np.zeros((1, 0), np.uint8))) == 2
    with pytest.raises(TypeError, match="tasks must be a list"):
        core.prepared_prefix(tasks=u8)
    # the tasks after the prefix are converted, and errors count from the batch's start
    with pytest.raises(ValueError, match=r"^task 2: .*empty candidate axis"):
        rerank_batch([u8, u8, np.zeros((0, 3), np.uint8)], backend="cpp")
    with pytest.raises(ValueError, match=r"^task 3: .*only 0 and 1"):
        rerank_batch([u8, u8, u8.astype(bool), np.full((2, 2), 3.0)], backend="cpp")
    mixed = [u8, u8.astype(bool), u8, np.asfortranarray(u8), u8.astype(np.float64)]
    for B, res in zip(mixed, rerank_batch(mixed, "aces-c", backend="cpp")):
        assert_same_result(res, af.rerank(B, "aces-c", backend="cpp"))


def test_method_param_defaults_match_public_functions():
    """METHOD_PARAMS repeats the defaults of the public functions; keep them in sync."""
    sig = {
        name: inspect.signature(fn).parameters
        for name, fn in [
            ("aces-c", methods.aces_c),
            ("aces-o", methods.aces_o),
            ("codet", methods.codet),
            ("b4", methods.b4),
        ]
    }
    for method, spec in METHOD_PARAMS.items():
        base = {"aces-c-filter": "aces-c", "aces-o-warm": "aces-o", "codet-linear": "codet"}.get(
            method, method
        )
        for name, (default, _) in spec.items():
            if (method, name) in (("aces-o-warm", "init"), ("codet-linear", "exponent")):
                continue  # the method name fixes these (see methods.METHODS)
            assert sig[base][name].default == default, (method, name)
    assert set(METHOD_PARAMS) == set(af.METHODS)


# ---------------------------------------------------------------------------
# the C++ method path


def reference_cases():
    rng = np.random.default_rng(77)
    out = [
        EXAMPLE,
        np.eye(5, dtype=np.uint8),
        np.zeros((3, 0), np.uint8),
        np.array([[1, 0, 1]], np.uint8),
    ]
    for n, m, dup in [(30, 12, 10), (80, 40, 50), (200, 60, 150), (25, 100, 5)]:
        B = random_matrix(rng, n, m, 0.5, dup_rows=dup)
        B[:, 0] = 1
        out.append(B)
    return out


@pytest.mark.parametrize("B", reference_cases(), ids=lambda B: f"{B.shape[0]}x{B.shape[1]}")
def test_cpp_methods_match_reference(B):
    _cpp()
    for name, call in [
        ("majority", lambda b: af.majority_vote(B, backend=b)),
        ("aces-c", lambda b: af.aces_c(B, backend=b)),
        ("aces-c-filter", lambda b: af.aces_c(B, "filter", backend=b)),
    ]:
        got, ref = call("cpp"), call("numpy")
        assert got.method == ref.method == name and got.fallback == ref.fallback
        np.testing.assert_allclose(got.weights, ref.weights, rtol=0, atol=EXACT)
        np.testing.assert_allclose(got.scores, ref.scores, rtol=0, atol=EXACT)
        np.testing.assert_array_equal(got.order, ref.order)
        if ref.loo_auc is not None:
            np.testing.assert_allclose(got.loo_auc, ref.loo_auc, rtol=0, atol=EXACT)
    for kw in (
        dict(steps=25),
        dict(init="aces-c", lr=0.05, steps=25),
        dict(top_k=None, steps=15),
        dict(top_k=7, steps=20),
    ):
        got, ref = af.aces_o(B, backend="cpp", **kw), af.aces_o(B, backend="numpy", **kw)
        assert got.method == ref.method
        np.testing.assert_allclose(got.weights, ref.weights, rtol=0, atol=OPT)
        np.testing.assert_allclose(got.objective, ref.objective, rtol=0, atol=OPT)
        np.testing.assert_array_equal(got.info["rows"], ref.info["rows"])
        assert got.info.keys() == ref.info.keys()


def test_core_rerank_thread_count_independent():
    core = _cpp()
    # above the cells threshold (2^18) from which the kernels use threads
    B = random_matrix(np.random.default_rng(5), 5000, 64, 0.5, dup_rows=2000)
    for code in (0, 1, 2):
        outs = [core.rerank(B, code, n_threads=t) for t in (1, 2, 0)]
        for out in outs[1:]:
            for a, b in zip(out[:4], outs[0][:4]):
                np.testing.assert_array_equal(a, b)
    outs = [core.rerank(B, 3, top_k=300, steps=5, n_threads=t) for t in (1, 2)]
    for weights in (None, np.random.default_rng(6).random(64)):
        outs_l = [
            core.loo_auc(B, weights, n_threads=t, dedup=d) for t in (1, 2) for d in (False, True)
        ]
        for out in outs_l[1:]:
            np.testing.assert_array_equal(out, outs_l[0])
    for a, b in zip(outs[0][:3], outs[1][:3]):
        np.testing.assert_array_equal(a, b)


def test_concurrent_calls_from_python_threads():
    """8 threads hammering the C++ paths at once get exactly the serial results."""
    _cpp()
    tasks = TASKS[5:20]
    calls = [
        lambda B: af.aces_c(B, backend="cpp"),
        lambda B: af.majority_vote(B, backend="cpp"),
        lambda B: af.aces_o(B, steps=8, init="aces-c", backend="cpp"),
    ]
    expected = [[call(B) for B in tasks] for call in calls]
    expected_batch = rerank_batch(tasks, "aces-c", backend="cpp", n_threads=2)
    failures = []
    barrier = threading.Barrier(8)

    def worker(k):
        try:
            barrier.wait()
            for rep in range(3):
                c = (k + rep) % len(calls)
                for B, want in zip(tasks, expected[c]):
                    assert_same_result(calls[c](B), want)
                for got, want in zip(
                    rerank_batch(tasks, "aces-c", backend="cpp", n_threads=2), expected_batch
                ):
                    assert_same_result(got, want)
        except Exception as exc:  # pragma: no cover - reported below
            failures.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
