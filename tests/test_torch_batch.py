"""Batched ACES-O of the ``torch`` backend (``rerank_batch(..., "aces-o")``).

The batch runs ACES-O for many tasks at once on zero-padded tensors. It must
give, task by task, what the per-task :meth:`TorchBackend.aces_o` gives: the
same operations with a task axis in front, so only the summation order inside
the surrogate's matrix products differs -- weights agree to 1e-12 on the
synthetic tasks here and to 1e-9 on real data -- and what the NumPy reference
gives within the contract's 1e-6 (docs/contract.rst §4). Orders, top-k rows, method names and types are
identical. Padding must be inert: padding rows are absent and padding columns
inactive, whatever else shares the batch.

Only a CPU is available in CI; the packing code (``_pad``) takes the same route
on CPU and CUDA tensors.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import aces_fast as af
from aces_fast import _semantics
from aces_fast._registry import METHOD_PARAMS, method_params
from aces_fast.backends import torch as torch_backend
from aces_fast.backends.shapes import shape_chunks
from aces_fast.backends.torch import FLOAT32_WEIGHT_ATOL, TorchBackend
from aces_fast.backends.torch import aces_o as torch_aces_o
from aces_fast.backends.torch import dedup as torch_dedup
from aces_fast.backends.torch import loo_auc as torch_loo_auc
from aces_fast.backends.torch import surrogate as torch_surrogate
from aces_fast.backends.torch.batch import PaddedTasks
from aces_fast.backends.torch.batch import pad as _pad
from aces_fast.datasets import load_dataset
from helpers import EXAMPLE, npy, random_matrix

TB = TorchBackend()


# tiny inputs: intra-op threads only add barrier waits (conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tasks(seed: int = 0):
    """Mixed shapes: n < top_k, n = 1, m = 0, constant columns, all-constant,
    duplicate rows (also among the top-k rows), and n > top_k."""
    rng = np.random.default_rng(seed)
    const_cols = random_matrix(rng, 30, 12, 0.5, dup_rows=5)
    const_cols[:, [0, 5]] = 1
    const_cols[:, 7] = 0
    tasks = [
        EXAMPLE,  # n = 8 < top_k
        np.array([[1, 0, 1, 1]], np.uint8),  # n = 1: every test constant
        np.zeros((5, 0), np.uint8),  # no tests
        np.ones((4, 6), np.uint8),  # every test constant
        const_cols,  # constant columns inside, n > top_k
        np.repeat(EXAMPLE[:4], 3, axis=0),  # only duplicate rows
        np.array([[1, 1], [0, 1], [1, 1]], np.uint8),  # one active test: its weight is 1
        random_matrix(rng, 50, 25, 0.6, dup_rows=30),  # duplicates among the top-k rows
    ]
    for _ in range(7):
        n, m = int(rng.integers(2, 45)), int(rng.integers(1, 30))
        tasks.append(random_matrix(rng, n, m, rng.uniform(0.2, 0.8), dup_rows=n // 3))
    return tasks


TASKS = _tasks()

#: parameter sets: the defaults' shape with fewer steps, each option once
PARAM_SETS = {
    "uniform": dict(steps=25, lr=0.05),
    "warm": dict(steps=25, lr=0.05, init="aces-c"),
    "top_k_none": dict(steps=15, top_k=None),
    "top_k_3": dict(steps=15, top_k=3, init="aces-c"),
    "steps_0": dict(steps=0, init="aces-c"),
    "sigmoid_path": dict(steps=10, gamma=750.0),  # gamma * 1 > 700: no exp trick
}


def assert_close(got, want, atol):
    """Same method, types, dtypes, devices, shapes, orders and info; arrays to ``atol``."""
    assert (got.method, got.backend, got.fallback) == (want.method, want.backend, want.fallback)
    assert got.loo_auc is None and want.loo_auc is None
    for name in ("scores", "weights", "order", "objective"):
        a, b = getattr(got, name), getattr(want, name)
        assert type(a) is type(b), name
        if isinstance(b, torch.Tensor):
            assert a.device == b.device, name
        a, b = npy(a), npy(b)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        if name == "order":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=0, atol=atol, err_msg=name)
    assert got.info.keys() == want.info.keys()
    for key, value in want.info.items():
        if key == "rows":
            assert type(got.info[key]) is type(value)
            np.testing.assert_array_equal(npy(got.info[key]), npy(value))
        else:
            assert got.info[key] == value, key


def _per_task(tasks, params, be=TB):
    p = method_params("aces-o", params)
    return [be.rerank(be.prepare(B), "aces-o", p) for B in tasks]


def _top_k_rows(nx, B, top_k):
    """The semantics' top-k prefilter, ``None`` (every row) spelled out."""
    rows = _semantics.top_k_rows(nx, B, top_k)
    return torch.arange(B.shape[-2]) if rows is None else rows


def _padded_top_k(B, n_rows, top_k):
    """``(rows (T, K), valid rows (T, K))`` of a padded batch, as ACES-O selects them."""
    nx = PaddedTasks(TB, n_rows, [B.shape[2]] * B.shape[0])
    rows = _top_k_rows(nx, B, top_k)
    return rows, nx.take(nx.row_mask(B), rows)


# ---------------------------------------------------------------------------
# whole method: batch against per-task and the reference


@pytest.mark.parametrize("name", list(PARAM_SETS))
def test_batch_equals_per_task(name):
    params = PARAM_SETS[name]
    got = af.rerank_batch(TASKS, "aces-o", backend="torch", **params)
    want = _per_task(TASKS, params)
    assert len(got) == len(TASKS)
    for g, w in zip(got, want):
        assert isinstance(g.weights, np.ndarray)
        assert_close(g, w, atol=1e-12)
    if params.get("steps") == 0:
        assert all(g.objective.shape == (1,) for g in got)


@pytest.mark.parametrize("name", ["uniform", "warm", "top_k_none"])
def test_batch_matches_reference(name):
    params = PARAM_SETS[name]
    got = af.rerank_batch(TASKS, "aces-o", backend="torch", **params)
    for g, B in zip(got, TASKS):
        ref = af.rerank(B, "aces-o", backend="numpy", **params)
        np.testing.assert_allclose(g.weights, ref.weights, rtol=0, atol=1e-6)
        np.testing.assert_allclose(g.objective, ref.objective, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(g.order, ref.order)
        np.testing.assert_array_equal(g.info["rows"], ref.info["rows"])
        assert g.method == ref.method


def test_warm_method_name_and_paper_defaults():
    """ "aces-o-warm" defaults to init="aces-c"; 90 steps at the defaults stay within 1e-12."""
    tasks = TASKS[:6]
    got = af.rerank_batch(tasks, "aces-o-warm", backend="torch")
    for g, w in zip(got, _per_task(tasks, {"init": "aces-c"})):
        assert g.method == "aces-o-warm" and g.objective.shape == (91,)
        assert_close(g, w, atol=1e-12)


def test_padding_is_inert():
    """A task's result does not depend on what shares its batch (padding rows and
    columns, other tasks' sizes), on the task order, or on being alone."""
    rng = np.random.default_rng(4)
    B = random_matrix(rng, 20, 15, 0.5, dup_rows=6)
    big = random_matrix(rng, 60, 40, 0.5)
    alone = af.rerank_batch([B], "aces-o", backend="torch", steps=20)[0]
    for batch in ([B, big], [big, B, np.ones((70, 3), np.uint8)], [np.eye(5, dtype=bool), B]):
        k = next(i for i, x in enumerate(batch) if x is B)
        res = af.rerank_batch(batch, "aces-o", backend="torch", steps=20)[k]
        np.testing.assert_allclose(res.weights, alone.weights, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(res.order, alone.order)
        assert res.weights.shape == (15,) and res.scores.shape == (20,)


def test_real_data_equals_per_task():
    tasks = [p.B for p in load_dataset("humaneval-gpt35")][:60]
    codegen = sorted(load_dataset("humaneval-codegen16b"), key=lambda p: p.m)
    tasks += [p.B for p in codegen[::20]]  # m from 0 up
    for params in ({}, {"init": "aces-c"}):
        got = af.rerank_batch(tasks, "aces-o", backend="torch", **params)
        for g, w in zip(got, _per_task(tasks, params)):
            assert_close(g, w, atol=1e-9)


# ---------------------------------------------------------------------------
# types, routes, chunking, dtypes


def test_tensors_in_tensors_out():
    tasks = [torch.from_numpy(np.asarray(B)) for B in TASKS]
    tasks[4] = tasks[4].to(torch.float32)  # any 0/1 dtype
    tasks[6] = tasks[6].to(torch.bool)
    params = PARAM_SETS["warm"]
    got = af.rerank_batch(tasks, "aces-o", backend="torch", **params)
    for g, w in zip(got, _per_task(tasks, params)):
        assert isinstance(g.scores, torch.Tensor) and isinstance(g.info["rows"], torch.Tensor)
        assert g.weights.dtype == torch.float64 and g.order.dtype == torch.int64
        assert_close(g, w, atol=1e-12)
    # NumPy and tensor tasks may be mixed on the CPU: each result mirrors its input
    a, b = af.rerank_batch([TASKS[0], tasks[0]], "aces-o", backend="torch", **params)
    assert isinstance(a.weights, np.ndarray) and isinstance(b.weights, torch.Tensor)
    np.testing.assert_array_equal(a.weights, b.weights.numpy())
    np.testing.assert_array_equal(a.info["rows"], b.info["rows"].numpy())


def test_hot_path_never_runs_the_per_task_method(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the batch called a per-task ACES-O function")

    want = _per_task(TASKS, PARAM_SETS["warm"])
    monkeypatch.setattr(TorchBackend, "rerank", forbidden)
    monkeypatch.setattr(torch_aces_o, "aces_o_fit", forbidden)
    monkeypatch.setattr(torch_surrogate, "surrogate", forbidden)
    monkeypatch.setattr(torch_loo_auc, "loo_auc", forbidden)
    got = af.rerank_batch(TASKS, "aces-o", backend="torch", **PARAM_SETS["warm"])
    for g, w in zip(got, want):
        assert_close(g, w, atol=1e-12)


@pytest.mark.parametrize("chunk", [1, 40, 300, 5000])
def test_chunking_does_not_change_results(chunk, monkeypatch):
    """Small budgets: tasks alone (1: every task over budget, per-task route),
    several padded chunks, Adam groups split and pair tensors split over tests."""
    be = TorchBackend(chunk_elements=chunk)
    prepared = [be.prepare(B) for B in TASKS]
    params = PARAM_SETS["warm"]
    want = _per_task(TASKS, params)
    calls = []  # tasks per fit with tests (a task without tests is no cell)
    fit = torch_aces_o.aces_o_fit_groups
    monkeypatch.setattr(
        torch_aces_o,
        "aces_o_fit_groups",
        lambda *a, **k: (max(a[2]) > 0 and calls.append(len(a[2]))) or fit(*a, **k),
    )
    got = be.rerank_batch(prepared, "aces-o", method_params("aces-o", params), None)
    for g, w in zip(got, want):
        assert_close(g, w, atol=1e-12)
    assert calls
    if chunk == 1:
        assert set(calls) == {1}  # every task alone: the per-task method, a batch of one
    else:
        assert max(calls) > 1


def _padded_surrogate(data, w, gamma, chunk_tests):
    """``(J (T,), dJ/dw (T, m))`` of the batched surrogate (``surrogate.Surrogate``, as
    the Adam loop runs it) at weights ``w`` (T, m), pair tensors of ``chunk_tests`` tests."""
    Bu, counts = data
    T, U, _ = Bu.shape
    g = torch.empty_like(w)
    workspace = torch_surrogate.Workspace(chunk_tests * T * U * U, w.dtype, w.device)
    sur = torch_surrogate.Surrogate(Bu, counts, gamma, w, g, chunk_tests, workspace)
    return sur.evaluate().view(T), g


def test_pair_tensors_split_over_tests_are_exact():
    """The batched surrogate with column chunks of 1, 2 and all tests agree, and
    equal the NumPy reference of every task (padding rows and columns add 0), on
    both the exp-trick and the sigmoid path."""
    rng = np.random.default_rng(8)
    shapes = [(9, 7), (4, 11), (15, 3), (1, 5)]
    mats = [torch.from_numpy(random_matrix(rng, n, m, 0.5, dup_rows=2)) for n, m in shapes]
    B, n_rows = _pad(mats)
    rows, valid = _padded_top_k(B, n_rows, None)
    Bk = B.gather(1, rows[:, :, None].expand(*rows.shape, B.shape[2]))
    Bu, counts, _distinct = torch_dedup.distinct_rows_padded(Bk, valid, torch.float64)
    data = (Bu.contiguous(), counts.contiguous())
    w = torch.from_numpy(rng.random(B.shape[::2]))
    for t, (_, m) in enumerate(shapes):
        w[t, m:] = 0  # padding columns are inactive: weight 0
    w = w / w.sum(dim=1, keepdim=True)
    for gamma in (10.0, 750.0):  # exp trick, sigmoid
        J1, g1 = _padded_surrogate(data, w, gamma, 1)
        J2, g2 = _padded_surrogate(data, w, gamma, 2)
        J3, g3 = _padded_surrogate(data, w, gamma, B.shape[2])
        for J, g in ((J1, g1), (J2, g2)):
            np.testing.assert_allclose(J.numpy(), J3.numpy(), rtol=0, atol=1e-14)
            np.testing.assert_allclose(g.numpy(), g3.numpy(), rtol=0, atol=1e-13 * gamma)
        for t, (_n, m) in enumerate(shapes):
            want = af.surrogate_loo_auc(mats[t].numpy(), w[t, :m].numpy(), gamma, backend="numpy")
            assert abs(float(J3[t]) - want.objective) <= 1e-14
            np.testing.assert_allclose(g3[t, :m].numpy(), want.gradient, rtol=0, atol=1e-13 * gamma)
            np.testing.assert_array_equal(g3[t, m:].numpy(), 0.0)


def test_float32_mode(monkeypatch):
    """The working dtype option applies to the batch too: within the documented
    bound of the float64 reference, and close to the per-task float32 run."""
    monkeypatch.setenv(torch_backend.DTYPE_ENV_VAR, "float32")
    be = torch_backend.load()
    assert be.dtype == torch.float32
    tasks = TASKS[:8]
    params = dict(steps=40, lr=0.05, init="aces-c")
    p = method_params("aces-o", params)
    got = be.rerank_batch([be.prepare(B) for B in tasks], "aces-o", p, None)
    for g, w, B in zip(got, _per_task(tasks, params, be), tasks):
        ref = af.rerank(B, "aces-o", backend="numpy", **params)
        assert g.weights.dtype == np.float64
        np.testing.assert_allclose(g.weights, ref.weights, rtol=0, atol=FLOAT32_WEIGHT_ATOL)
        np.testing.assert_allclose(g.weights, w.weights, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "shapes",
    [
        [(3, 5), (7, 0), (1, 2), (4, 5), (2, 2)],  # several widths, m = 0
        [(6, 4), (6, 4), (6, 4)],  # one shape: a single cat
        [(5, 3)],
    ],
)
def test_pad_places_every_task_in_its_corner(shapes):
    """_pad (the same route on every device) against a NumPy zero-padded stack."""
    rng = np.random.default_rng(2)
    mats = [torch.from_numpy(random_matrix(rng, n, m)) for n, m in shapes]
    B, n_rows = _pad(mats)
    n_max, m_max = max(n for n, _ in shapes), max(m for _, m in shapes)
    want = np.zeros((len(shapes), n_max, m_max), np.uint8)
    for k, Bt in enumerate(mats):
        want[k, : Bt.shape[0], : Bt.shape[1]] = Bt.numpy()
    assert B.dtype == torch.uint8 and B.shape == want.shape
    np.testing.assert_array_equal(B.numpy(), want)
    np.testing.assert_array_equal(n_rows.numpy(), [n for n, _ in shapes])
    # the padded batch is a copy: writing to it leaves the tasks alone
    before = [Bt.clone() for Bt in mats]
    B.fill_(7)
    assert all(torch.equal(a, b) for a, b in zip(mats, before))


def test_consensus_methods_still_run_task_by_task():
    be = TB
    prepared = [be.prepare(B) for B in TASKS[:4]]
    for method in ("codet", "codet-linear", "b4"):
        assert be.rerank_batch(prepared, method, method_params(method, {}), None) is None
    assert {"aces-o", "aces-o-warm"} <= set(METHOD_PARAMS)


# ---------------------------------------------------------------------------
# the padded building blocks against their per-task counterparts


def test_top_k_rows_padded_matches_per_task():
    rng = np.random.default_rng(5)
    mats = [
        torch.from_numpy(random_matrix(rng, n, m, 0.5, dup_rows=n // 2))
        for n, m in [(1, 4), (6, 3), (30, 8), (12, 0), (25, 5)]
    ]
    B, n_rows = _pad(mats)
    for top_k in (None, 1, 5, 24, 100):
        rows, valid = _padded_top_k(B, n_rows, top_k)
        for t, Bt in enumerate(mats):
            want = _top_k_rows(TB, Bt, top_k)
            assert int(valid[t].sum()) == want.shape[0]
            assert valid[t, : want.shape[0]].all()
            np.testing.assert_array_equal(rows[t, : want.shape[0]].numpy(), want.numpy())


def test_distinct_rows_padded_matches_unique():
    """Same distinct rows in the same (lexicographic) order and multiplicities as
    torch.unique, beyond 62 columns too (several key words); padding rows never count."""
    rng = np.random.default_rng(6)
    mats = []
    for n, m in [(1, 3), (10, 2), (40, 70), (20, 130), (8, 0), (30, 124)]:
        B = random_matrix(rng, n, m, 0.5, dup_rows=n // 2)
        if m > 64:
            B[:, :64] = 0  # rows equal in the first word, different later
        mats.append(torch.from_numpy(B))
    B, n_rows = _pad(mats)
    for top_k in (None, 7):
        rows, valid = _padded_top_k(B, n_rows, top_k)
        Bk = B.gather(1, rows[:, :, None].expand(*rows.shape, B.shape[2]))
        Bu, counts, distinct = torch_dedup.distinct_rows_padded(Bk, valid, torch.float64)
        assert Bu.shape[1] == counts.shape[1] == max(distinct)
        for t, Bt in enumerate(mats):
            n, m = Bt.shape
            sub = Bt[_top_k_rows(TB, Bt, top_k)]
            if m == 0:
                assert distinct[t] == 1 and float(counts[t, 0]) == sub.shape[0]
                continue
            want, inverse = torch.unique(sub, dim=0, return_inverse=True)
            want_counts = torch.bincount(inverse.reshape(-1), minlength=want.shape[0])
            u = distinct[t]
            assert u == want.shape[0]
            np.testing.assert_array_equal(Bu[t, :u, :m].numpy(), want.numpy())
            np.testing.assert_array_equal(counts[t, :u].numpy(), want_counts.numpy())
            assert not counts[t, u:].any() and not Bu[t, u:].any() and not Bu[t, :, m:].any()


def test_tasks_without_active_tests_get_zeros_in_a_shared_group():
    """A task whose tests are all inactive shares an Adam group with others: zero
    weights and objective (no NaN from a softmax over nothing), the others unchanged."""
    rng = np.random.default_rng(9)
    B = torch.from_numpy(random_matrix(rng, 6, 5, 0.5))
    Bk = torch.stack([B, B])
    valid = torch.ones((2, 6), dtype=torch.bool)
    active = torch.tensor([[True] * 5, [False] * 5])
    logits0 = torch.zeros((2, 5), dtype=torch.float64)
    w, obj = torch_aces_o.aces_o_fit_groups(Bk, valid, [5, 5], logits0, active, 10.0, 0.1, 8)
    assert not torch.isnan(w).any() and not torch.isnan(obj).any()
    np.testing.assert_array_equal(w[1].numpy(), 0.0)
    np.testing.assert_array_equal(obj[1].numpy(), 0.0)
    alone, obj_alone = torch_aces_o.aces_o_fit(B, logits0[0], active[0], 10.0, 0.1, 8)
    np.testing.assert_allclose(w[0].numpy(), alone.numpy(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(obj[0].numpy(), obj_alone.numpy(), rtol=0, atol=1e-15)


@pytest.mark.parametrize("seed", range(6))
def test_class_table_snaps_as_the_sorted_rule(seed):
    """The Adam loop's sort-free snapping (aces_o.ClassTable) gives the sorted rule's
    values bit for bit (SymmetryClasses, docs/contract.rst §7.5) and the same
    refined classes, step after step: ties, chains of neighbours within tol whose
    ends are further apart, gaps just above tol, classes that split and that stay."""
    rng = np.random.default_rng(seed)
    T, m, tol = int(rng.integers(1, 5)), int(rng.integers(2, 40)), 1e-10
    # starting logits with many ties: classes of all sizes
    logits = torch.from_numpy(rng.integers(0, 4, (T, m)).astype(np.float64))
    active = torch.from_numpy(rng.random((T, m)) < 0.85)
    sorted_rule = torch_aces_o.SymmetryClasses(logits, active)
    levels = np.array([0.0, 0.4, 0.9, 1.0, 1.3, 2.2, 2.5, 3.6, 7.0]) * tol

    def gradient():  # one value per class (kept), plus noise at the scale of tol
        base = rng.choice([-0.3, 0.0, 0.25], size=(T, m + 1))
        g = np.take_along_axis(base, sorted_rule.labels.numpy(), axis=1)
        noise = rng.choice(levels, size=(T, m)) * (rng.random((T, m)) < 0.4)
        return torch.from_numpy(g + noise * rng.choice([1.0, 1.0, 3.0], size=(T, 1)))

    x = gradient()
    x.copy_(sorted_rule.snap(x, tol))  # the first step, as in the fit
    sizes = sorted_rule.sizes()
    multi = sizes > 1
    members, width = int(multi.sum()), int(torch.where(multi, sizes, 0).max())
    if members == 0:
        return
    table = torch_aces_o.ClassTable(x, sorted_rule.labels, sizes, members, width, tol)
    for _ in range(4):
        x.copy_(gradient())
        want = sorted_rule.snap(x, tol)
        table.snap()
        np.testing.assert_array_equal(x.numpy(), want.numpy())
        keys = sorted_rule.labels + torch.arange(T)[:, None] * (m + 1)  # (task, label)
        flat = keys.reshape(-1)[table.midx]
        same = flat[:, None] == flat[table.kidx]
        assert bool(same.all())  # a row holds only its own class
        for i in range(members):  # ... and all of it
            assert set(table.kidx[i].tolist()) == set(
                torch.nonzero(flat == flat[i]).reshape(-1).tolist()
            )


def test_shape_chunks_budget_and_waste():
    shapes = [(1, 100), (4, 100), (400, 100), (1, 3), (576, 500)]
    # budget only: every chunk within it unless alone
    for budget in (10, 1000, 10**5, 10**9):
        chunks = shape_chunks(shapes, budget)
        assert sorted(t for c in chunks for t in c) == list(range(len(shapes)))
        for c in chunks:
            cells = len(c) * max(shapes[t][0] for t in c) * max(max(shapes[t][1] for t in c), 1)
            assert len(c) == 1 or cells <= budget
    # waste: padded cells at most twice the chunk's own cells; the budget alone
    # would put everything in one chunk
    assert len(shape_chunks(shapes, 10**9)) == 1
    chunks = shape_chunks(shapes, 10**9, max_waste=2.0, slack=0)
    assert sorted(t for c in chunks for t in c) == list(range(len(shapes)))
    assert [4] in chunks  # (576, 500) padded with anything smaller would waste cells
    for c in chunks:
        cells = len(c) * max(shapes[t][0] for t in c) * max(shapes[t][1] for t in c)
        assert len(c) == 1 or cells <= 2.0 * sum(shapes[t][0] * shapes[t][1] for t in c)
    # slack lets small items share a chunk whatever their padding
    assert len(shape_chunks(shapes[:2] + shapes[3:4], 10**9, 2.0, slack=10**4)) == 1


# ---------------------------------------------------------------------------
# a (T, n, m) tensor stack, ranked as slices of itself


@pytest.mark.parametrize("method", ["majority", "aces-c", "aces-c-filter"])
@pytest.mark.parametrize("chunk", [None, 3 * 7 * 11])
def test_a_tensor_stack_equals_its_tasks_as_a_list(method, chunk, monkeypatch):
    """Bit for bit the list path's columns, in one chunk or in chunks of 3 tasks."""
    from aces_fast.backends.torch import chunks

    if chunk is not None:
        monkeypatch.setattr(chunks, "DEFAULT_CHUNK_ELEMENTS", chunk)
    rng = np.random.default_rng(7)
    S = torch.from_numpy((rng.random((20, 7, 11)) < 0.4).astype(np.uint8))
    S[3] = 0  # a task of constant tests: ACES-C's fallback
    got = af.rerank_batch(S, method, backend="torch")
    want = af.rerank_batch(list(S), method, backend="torch")
    for name in ("scores", "order", "weights", "loo_auc", "fallback", "n_offsets", "m_offsets"):
        a, b = getattr(got, name), getattr(want, name)
        assert (a is None) == (b is None), name
        if a is not None:  # bit for bit; LOO-AUC is NaN on constant tests
            torch.testing.assert_close(
                torch.as_tensor(a), torch.as_tensor(b), rtol=0, atol=0, equal_nan=True, msg=name
            )
    for t in (0, 3, 19):
        ref = af.rerank(S[t].numpy(), method, backend="cpp")
        np.testing.assert_array_equal(got[t].order.numpy(), ref.order)


def test_a_tensor_stack_that_fails_its_check_names_the_task():
    S = torch.zeros((6, 3, 4), dtype=torch.uint8)
    S[4, 1, 2] = 2
    with pytest.raises(ValueError, match=r"^task 4: B must contain only 0 and 1; found value 2$"):
        af.rerank_batch(S, "aces-c", backend="torch")


@pytest.mark.parametrize(
    "make",
    [
        lambda S: S.bool(),  # another dtype
        lambda S: S.transpose(1, 2).contiguous().transpose(1, 2),  # another layout
        lambda S: S.double(),
    ],
)
def test_other_tensor_stacks_take_the_list_path(make):
    rng = np.random.default_rng(8)
    S = torch.from_numpy((rng.random((5, 6, 4)) < 0.5).astype(np.uint8))
    got = af.rerank_batch(make(S), "aces-c", backend="torch")
    want = af.rerank_batch(list(S), "aces-c", backend="torch")
    assert torch.equal(got.order, want.order) and torch.equal(got.scores, want.scores)


def test_a_cpu_tensor_stack_under_auto_and_aces_o_stacks():
    """auto picks cpp for CPU tensors (the stack's tasks go to it); ACES-O stacks,
    whose cost warning reads each task, go through the list of tasks."""
    rng = np.random.default_rng(9)
    S = torch.from_numpy((rng.random((4, 8, 6)) < 0.5).astype(np.uint8))
    auto = af.rerank_batch(S, "aces-c")
    assert auto.backend == "cpp"
    np.testing.assert_array_equal(auto.order, af.rerank_batch(S.numpy(), "aces-c").order)
    params = {"steps": 5}
    got = af.rerank_batch(S, "aces-o", backend="torch", **params)
    want = af.rerank_batch(list(S), "aces-o", backend="torch", **params)
    assert torch.equal(got.order, want.order)


def test_a_list_of_one_shape_in_one_chunk_is_ranked_as_a_stack(monkeypatch):
    """Equal-shape tensor tasks that fit one chunk are stacked once and ranked as
    a stack; mixed shapes, NumPy tasks or several chunks keep the chunk path.
    Either way the results equal the tasks ranked one by one."""
    from aces_fast.backends.torch import batch as torch_batch

    calls = []
    original = torch_batch.rerank_stack
    monkeypatch.setattr(
        torch_batch, "rerank_stack", lambda *a: calls.append(a[1].shape) or original(*a)
    )
    rng = np.random.default_rng(10)
    same = [torch.from_numpy((rng.random((6, 9)) < 0.5).astype(np.uint8)) for _ in range(5)]
    mixed = [*same[:4], same[4][:5]]
    for tasks, stacked in ((same, True), (mixed, False), ([*same[:4], same[4].numpy()], False)):
        calls.clear()
        got = af.rerank_batch(tasks, "aces-c", backend="torch")
        assert calls == ([torch.Size((5, 6, 9))] if stacked else [])
        for t, B in enumerate(tasks):
            want = af.rerank(B, "aces-c", backend="torch")
            np.testing.assert_array_equal(np.asarray(got[t].order), np.asarray(want.order))
            np.testing.assert_array_equal(np.asarray(got[t].scores), np.asarray(want.scores))


def test_columns_in_task_order_are_the_outputs_themselves():
    """One padded piece whose tasks fill it (one shape, in order, as a stack gives)
    becomes its columns without a gather: the same storage, no index built;
    padding or another task order is gathered."""
    from aces_fast import _semantics
    from aces_fast.backends.torch.columns import Columns

    T, n, m = 3, 4, 5
    scores = torch.arange(T * n, dtype=torch.float64).view(T, n)
    weights = torch.arange(T * m, dtype=torch.float64).view(T, m)
    fields = dict.fromkeys(_semantics.Outputs._fields)
    out = _semantics.Outputs(**dict(fields, scores=scores, weights=weights))

    cols = Columns([(n, m)] * T, scores.device)
    cols.add(out, [0, 1, 2])
    values, offsets = cols.column("scores")
    assert values.data_ptr() == scores.data_ptr()
    np.testing.assert_array_equal(offsets, [0, 4, 8, 12])

    shuffled = Columns([(n, m)] * T, scores.device)
    shuffled.add(out, [2, 0, 1])  # task 2 first along the task axis
    values, _ = shuffled.column("scores")
    assert values.data_ptr() != scores.data_ptr()
    np.testing.assert_array_equal(npy(values), npy(scores[[1, 2, 0]].reshape(-1)))

    padded = Columns([(n, m), (n - 1, m - 2), (n, m)], scores.device)
    padded.add(out, [0, 1, 2])
    values, offsets = padded.column("weights")
    np.testing.assert_array_equal(offsets, [0, 5, 8, 13])
    want = np.concatenate([npy(weights[0]), npy(weights[1, :3]), npy(weights[2])])
    np.testing.assert_array_equal(npy(values), want)
