"""Host synchronizations and op counts of the ``torch`` backend (issue #22).

On a GPU every operation that reads device memory from the host (``.item()``,
``bool(tensor)``, a ``nonzero`` or ``unique`` whose output shape depends on the
data, ``.tolist()``) stalls the host until the device has caught up, and
every dispatched op is a kernel launch. Both are visible on CPU tensors, where
CI runs: :class:`OpLog` records every aten op dispatched (a
``TorchDispatchMode``) and the host reads made through tensor methods that
bypass the dispatcher (``tolist``), each with the aces_fast function that
made it. (``Tensor.numpy`` is not a read: it works on CPU tensors only, so
code that calls it never runs on a device.)

Between validated input and results the torch path must not read the device,
apart from one copy-out: :func:`aces_fast._registry.host_flag` turns ACES-C's
device ``fallback`` flag into the ``bool`` a :class:`~aces_fast.RerankResult`
holds, once, after everything else. Methods and kernels that still read the
device carry a budget (:data:`HOST_READS`) that may only go down. A batch is
one computation over padded (T, n, m) tensors whose results stay on the device
as the columns of a :class:`~aces_fast.BatchResult`: it reads nothing at all,
and its op count does not depend on the number of tasks ``T`` (for tasks that
share one padded chunk of at most ``chunk_elements`` cells; a bigger batch is
several chunks). ACES-O reads twice, before its Adam loop, whose steps each
dispatch a fixed sequence of at most :data:`ADAM_STEP_OPS` ops with no sort
and no read.

The ``cuda`` tests run the same calls on a GPU under
``torch.cuda.set_sync_debug_mode("error")`` and compare with the cpp backend;
they skip without CUDA.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode

import aces_fast as af
from aces_fast import _registry
from aces_fast.backends.torch import TorchBackend
from aces_fast.backends.torch.chunks import DEFAULT_CHUNK_ELEMENTS
from helpers import EXAMPLE, npy, random_matrix, require_backend, strict_adam_loop

pytestmark = [pytest.mark.usefixtures("one_torch_thread")]

#: aten ops that read device memory on the host (a sync on CUDA) whatever their arguments
SYNC_OPS = frozenset(
    {
        "aten::item",
        "aten::_local_scalar_dense",
        "aten::is_nonzero",
        "aten::nonzero",
        "aten::nonzero_numpy",
        "aten::argwhere",
        "aten::masked_select",
        "aten::equal",
        "aten::allclose",
        "aten::bincount",
        "aten::repeat_interleave",
    }
)
#: aten ops whose output shape depends on the data (``unique`` and its kin)
SYNC_PREFIXES = ("aten::unique", "aten::_unique")
#: ops that sync when an index is a bool mask (``x[mask]``: a data-dependent shape)
MASK_INDEX_OPS = frozenset({"aten::index", "aten::index_put", "aten::index_put_"})
#: the one function allowed to read the device: the single call's copy-out
COPY_OUT = ("_registry.py", "host_flag")


def _caller() -> tuple[str, str]:
    """(file name, function) of the innermost aces_fast frame on the stack."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename.replace("\\", "/")
        if "/aces_fast/" in path:
            return path.rsplit("/", 1)[-1], frame.f_code.co_name
        frame = frame.f_back
    return "?", "?"


def _tensors(x: Any) -> list:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in _tensors(item)]
    return []


def _syncs(name: str, args: tuple, kwargs: dict) -> bool:
    if name in SYNC_OPS or name.startswith(SYNC_PREFIXES):
        return True
    if name in MASK_INDEX_OPS:
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(t.dtype in (torch.bool, torch.uint8) for t in _tensors(indices))
    if name in ("aten::_to_copy", "aten::copy_", "aten::to"):
        # a device-to-host copy (only ever seen with a device input)
        src = [t.device.type for t in _tensors(args[1:2] if name == "aten::copy_" else args[:1])]
        dst = kwargs.get("device")
        if name == "aten::copy_":
            dst = args[0].device
        return bool(src) and dst is not None and torch.device(dst).type == "cpu" != src[0]
    return False


class OpLog(TorchDispatchMode):
    """Records every aten op dispatched in its ``with`` block, and host reads.

    Attributes
    ----------
    ops : list of str
        Every op's name (``"aten::add"``), in dispatch order; host reads through
        ``Tensor.tolist`` appear as ``"host::tolist"``.
    reads : list of (int, str, tuple of str)
        ``(position in ops, op name, (file, function))`` of every op that reads
        the device from the host.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.reads: list[tuple[int, str, tuple[str, str]]] = []
        self._patched: dict[str, Any] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        if _syncs(name, args, kwargs):
            self.reads.append((len(self.ops), name, _caller()))
        self.ops.append(name)
        return func(*args, **kwargs)

    def _host(self, method: str) -> Callable[..., Any]:
        original = getattr(torch.Tensor, method)

        def read(tensor, *args, **kwargs):
            self.reads.append((len(self.ops), f"host::{method}", _caller()))
            self.ops.append(f"host::{method}")
            return original(tensor, *args, **kwargs)

        return read

    def __enter__(self):
        for method in ("tolist",):
            self._patched[method] = getattr(torch.Tensor, method)
            setattr(torch.Tensor, method, self._host(method))
        return super().__enter__()

    def __exit__(self, *exc):
        for method, original in self._patched.items():
            setattr(torch.Tensor, method, original)
        return super().__exit__(*exc)

    def counts(self) -> Counter:
        return Counter(self.ops)

    def stray_reads(self) -> list[tuple[int, str, tuple[str, str]]]:
        """Host reads other than one final copy-out (:data:`COPY_OUT`, after
        every other op)."""
        stray = [r for r in self.reads if r[2] != COPY_OUT]
        copy_out = [r for r in self.reads if r[2] == COPY_OUT]
        if len(copy_out) > 1 or (copy_out and copy_out[0][0] != len(self.ops) - 1):
            stray += copy_out  # more than one, or not the last op
        return stray


def record(fn: Callable[[], Any]) -> tuple[OpLog, Any]:
    with OpLog() as log:
        out = fn()
    return log, out


TB = TorchBackend()
RNG = np.random.default_rng(22)
#: 200 x 500, the issue's cell: Bernoulli, a duplicated row block and a constant column
MATRIX = random_matrix(RNG, 200, 500, 0.5, dup_rows=40)
MATRIX[:, 7] = 1

#: host reads per call (after validation) of each method and kernel, by the counter
#: below; 0 means sync-free. A budget may only go down.
HOST_READS = {
    "majority": 0,
    "aces-c": 0,
    "aces-c-filter": 0,
    "aces-o": 2,
    "aces-o-warm": 2,
    "codet": 0,
    "codet-linear": 0,
    "b4": 0,
    "loo_auc": 0,
    "loo_auc_weighted": 0,
    "surrogate_loo_auc": 1,
}
#: ... and of rerank_batch of a list of tensors
BATCH_HOST_READS = {"majority": 0, "aces-c": 0, "aces-c-filter": 0, "aces-o": 2, "aces-o-warm": 2}

#: ACES-O with fewer steps keeps the test quick; the loop is the same
PARAMS = {"aces-o": {"steps": 6}, "aces-o-warm": {"steps": 6}}


def _values(method: str) -> dict:
    return _registry.method_params(method, PARAMS.get(method, {}))


def _kernel_call(name: str, B: Any) -> Callable[[], Any]:
    w = TB.prepare_weights(torch.from_numpy(RNG.random(B.shape[1])), B.shape[1])
    if name == "loo_auc":
        return lambda: TB.loo_auc_public(B, None, 1e-9)
    if name == "loo_auc_weighted":
        return lambda: TB.loo_auc_public(B, w, 1e-9)
    return lambda: TB.surrogate_public(B, w / w.sum(), 10.0)


def _call(name: str, B: Any) -> Callable[[], Any]:
    if name in _registry.names():
        return lambda: TB.rerank(B, name, _values(name))
    return _kernel_call(name, B)


def test_every_method_and_kernel_has_a_budget():
    assert set(HOST_READS) == set(af.METHODS) | {
        "loo_auc",
        "loo_auc_weighted",
        "surrogate_loo_auc",
    }
    over_tasks = {s.name for s in _registry.specs() if s.over_tasks}
    assert set(BATCH_HOST_READS) == over_tasks


@pytest.mark.parametrize("name", list(HOST_READS))
@pytest.mark.parametrize("matrix", ["random", "example"])
def test_host_reads_within_budget(name, matrix):
    """(a) Host reads of one call on a validated tensor: none but the copy-out for
    the sync-free methods and kernels, at most the budget for the others."""
    B = TB.prepare(torch.from_numpy(MATRIX if matrix == "random" else EXAMPLE))
    log, _ = record(_call(name, B))
    stray = log.stray_reads()
    assert len(stray) <= HOST_READS[name], stray
    if HOST_READS[name] == 0:
        assert stray == []


@pytest.mark.parametrize("method", list(BATCH_HOST_READS))
def test_batch_host_reads_within_budget(method):
    """(a) rerank_batch of tensors of mixed shapes, results left on the device:
    no host read at all for the sync-free methods (not even the copy-out)."""
    tasks = [TB.prepare(torch.from_numpy(random_matrix(RNG, n, m))) for n, m in SHAPES]
    log, out = record(lambda: TB.rerank_batch(tasks, method, _values(method), None))
    assert len(out) == len(tasks)
    assert len(log.reads) <= BATCH_HOST_READS[method], log.reads
    if BATCH_HOST_READS[method] == 0:
        assert log.reads == []


SHAPES = [(8, 10), (1, 4), (5, 0), (30, 12), (12, 30), (60, 80)]


def test_the_counter_sees_host_reads():
    """The recorder catches each kind of read, and names the function that made it."""

    def reads():
        x = torch.arange(6.0)
        bool(x.any())
        x[x > 2].sum()
        torch.unique(x)
        x.nonzero()
        x.tolist()
        return float(x.sum())

    log, _ = record(reads)
    names = [r[1] for r in log.reads]
    assert names == [
        "aten::_local_scalar_dense",  # bool(x.any())
        "aten::index",  # x[mask]
        "aten::_unique2",
        "aten::nonzero",
        "host::tolist",
        "aten::_local_scalar_dense",  # float(...)
    ]
    assert all(r[2][1] in ("?", "reads") for r in log.reads)
    # arithmetic, views and reductions that stay on the device are not reads
    log, _ = record(lambda: (torch.arange(6.0) * 2).cumsum(0).sort().values[:3].max())
    assert log.reads == [] and len(log.ops) >= 5


def test_copy_out_is_allowed_once_and_last():
    log = OpLog()
    log.ops = ["aten::add", "aten::is_nonzero"]
    log.reads = [(1, "aten::is_nonzero", COPY_OUT)]
    assert log.stray_reads() == []
    log.ops.append("aten::mul")  # not the last op any more
    assert log.stray_reads() == log.reads


@pytest.mark.parametrize("m", [0, 1, 61, 62, 63, 124, 200])
def test_fixed_shape_row_groups_match_unique(m):
    """CodeT's and B4's grouping without torch.unique: every row's group size, by
    a sort over exact packed keys (rows that differ only past a word boundary
    included), equals NumPy's distinct-row counts."""
    from aces_fast.backends.torch import dedup

    B = random_matrix(RNG, 40, m, 0.5, dup_rows=12)
    if m > 62:
        B[1] = B[0]
        B[1, 62] ^= 1  # equal in the first word, different in the second
    log, (patterns, inverse, sizes) = record(lambda: dedup.row_groups(torch.from_numpy(B)))
    assert log.reads == []
    assert torch.equal(patterns[inverse], torch.from_numpy(B))
    if m == 0:
        want = np.full(40, 40)
    else:
        _, inv, counts = np.unique(B, axis=0, return_inverse=True, return_counts=True)
        want = counts[inv.reshape(-1)]
    np.testing.assert_array_equal(sizes.numpy(), want)


def test_by_distinct_keys_gives_equal_keys_equal_bits():
    from aces_fast.backends.torch import dedup

    a = torch.from_numpy(RNG.integers(0, 4, 300))
    b = torch.from_numpy(RNG.integers(0, 3, 300))

    def noisy(x, y):  # a different rounding at every position
        return x * 1.0 + y * 0.1 + torch.rand(x.shape, dtype=torch.float64) * 1e-3

    log, out = record(lambda: dedup.by_distinct_keys(noisy, a, b))
    assert log.reads == []
    for key in set(zip(a.tolist(), b.tolist())):
        same = out[(a == key[0]) & (b == key[1])]
        assert (same == same[0]).all()
    assert len(set(out.tolist())) == len(set(zip(a.tolist(), b.tolist())))


# ---------------------------------------------------------------------------
# validation: one route (tensor ops where the tensor lives), one read per batch

#: dtypes a pass matrix tensor may come in (bool and uint8 are checked by their
#: largest byte, the others by their first offending entry)
TENSOR_DTYPES = ["uint8", "bool", "int8", "int64", "float16", "bfloat16", "float32", "float64"]


def _as(B: np.ndarray, dtype: str) -> Any:
    return torch.from_numpy(B).to(getattr(torch, dtype))


def test_a_batch_of_tensors_is_validated_with_one_host_read():
    tasks = [
        _as(random_matrix(RNG, n, m), TENSOR_DTYPES[i % len(TENSOR_DTYPES)])
        for i, (n, m) in enumerate(SHAPES * 3)
    ]
    tasks[4] = tasks[4].t().contiguous().t()  # a non-contiguous layout
    log, out = record(lambda: TB.prepare_batch(tasks))
    assert [r[1] for r in log.reads] == ["host::tolist"], log.reads
    for B, got in zip(tasks, out):
        assert got.dtype == torch.uint8 and got.is_contiguous()
        assert torch.equal(got, B.to(torch.uint8))
    # one matrix and weights: one read each; a contiguous uint8 tensor is not copied
    B = torch.from_numpy(MATRIX)
    log, got = record(lambda: TB.prepare(B))
    assert len(log.reads) == 1 and got.data_ptr() == B.data_ptr()
    log, _ = record(lambda: TB.prepare_weights(torch.rand(MATRIX.shape[1]), MATRIX.shape[1]))
    assert len(log.reads) == 1


def test_tensors_are_validated_without_numpy(monkeypatch):
    """No torch -> NumPy -> torch round trip: validating (and ranking) CPU tensors
    never converts one to NumPy."""
    import aces_fast._validation as validation

    def refuse(*args, **kwargs):
        raise AssertionError("a tensor went through NumPy")

    monkeypatch.setattr(torch.Tensor, "numpy", refuse)
    monkeypatch.setattr(torch.Tensor, "__array__", refuse)
    monkeypatch.setattr(validation, "tensor_to_numpy", refuse)
    tasks = [_as(random_matrix(RNG, n, m), d) for (n, m), d in zip(SHAPES, TENSOR_DTYPES)]
    TB.prepare_batch(tasks)
    TB.prepare(tasks[0])
    TB.prepare_weights(torch.ones(8, dtype=torch.float32), 8)
    af.rerank_batch(tasks, "aces-c", backend="torch")
    af.rerank(tasks[0], "codet", backend="torch")
    af.loo_auc(tasks[0], torch.ones(10), backend="torch")


def _corrupt(rng: np.random.Generator, B: Any, how: str) -> Any:
    if how == "value":
        bad = torch.tensor(rng.choice([2, 3, -1, 7]), dtype=B.dtype)
        if B.dtype == torch.bool:  # a bool tensor whose bytes are not 0/1
            B = B.view(torch.uint8).clone()
            B[0, -1] = 5
            return B.view(torch.bool)
        if B.dtype == torch.uint8:
            bad = torch.tensor(rng.choice([2, 3, 7]), dtype=B.dtype)
        B = B.clone()
        B[-1, -1] = bad
        return B
    if how == "nan":
        return B.to(torch.float32).index_fill(1, torch.tensor([0]), float("nan"))
    if how == "shape":
        return B[0]
    if how == "empty":
        return B[:0]
    if how == "complex":
        return B.to(torch.complex64)
    A = B.numpy() if B.is_complex() else B.float().numpy()  # NumPy items
    return A.astype(object) if how == "object" else A * 2


@pytest.mark.parametrize("seed", range(40))
def test_batch_errors_name_the_first_invalid_task(seed):
    """The error of a batch mixing tensors (validated together, one read) and NumPy
    items is the first invalid task's, prefixed ``task <i>:``, word for word what
    validating task by task (the NumPy backend's route) raises."""
    from aces_fast.backends import get_backend

    rng = np.random.default_rng(seed)
    T = int(rng.integers(1, 7))
    tasks: list[Any] = []
    for _ in range(T):
        dtype = TENSOR_DTYPES[int(rng.integers(len(TENSOR_DTYPES)))]
        tasks.append(_as(random_matrix(rng, int(rng.integers(2, 6)), 3), dtype))
    for t in rng.choice(T, size=min(T, int(rng.integers(1, 3))), replace=False):
        how = ["value", "nan", "shape", "empty", "complex", "object", "numpy"][rng.integers(7)]
        tasks[t] = _corrupt(rng, tasks[t], how)
    ref = get_backend("numpy")
    try:
        ref.prepare_batch(list(tasks))
    except (TypeError, ValueError) as exc:
        want: Exception | None = exc
    else:
        want = None
    if want is None:
        assert len(TB.prepare_batch(tasks)) == T
        return
    with pytest.raises(type(want)) as got:
        TB.prepare_batch(tasks)
    assert str(got.value) == str(want)
    assert str(got.value).startswith("task ")


def test_a_batch_of_plain_bytes_skips_the_per_task_rules(monkeypatch):
    """Contiguous 2-D uint8 tensors on one device (the usual batch) are checked by
    one reduction and one read, without a rule object per task; the tensors
    come back as they are."""
    from aces_fast.backends.torch import validate

    tasks = [torch.from_numpy(random_matrix(RNG, n, m)) for n, m in SHAPES * 3]

    def refuse(*args):
        raise AssertionError("the per-task rules ran")

    monkeypatch.setattr(validate, "_Task", refuse)
    log, out = record(lambda: TB.prepare_batch(tasks))
    assert len(log.reads) == 1, log.reads
    assert all(got is B for got, B in zip(out, tasks))


@pytest.mark.parametrize("seed", range(30))
def test_plain_byte_batches_report_the_first_invalid_task(seed):
    """A batch that the fast rules turn down (a byte over 1, no candidates, a
    1-D or non-contiguous matrix, another dtype) gets the full rules: the first
    invalid task's error, word for word the NumPy backend's."""
    from aces_fast.backends import get_backend

    rng = np.random.default_rng(seed)
    tasks: list[Any] = [
        torch.from_numpy(random_matrix(rng, int(rng.integers(1, 6)), int(rng.integers(0, 5))))
        for _ in range(int(rng.integers(2, 8)))
    ]
    for t in rng.choice(len(tasks), size=int(rng.integers(0, 3)), replace=False):
        how = ["value", "shape", "empty", "strided", "bool"][rng.integers(5)]
        B = tasks[t]
        if how == "strided" and B.shape[1] > 1:
            tasks[t] = B.t().contiguous().t()
        elif how == "bool":
            tasks[t] = B.bool()
        elif how in ("value", "shape", "empty") and B.numel():
            tasks[t] = _corrupt(rng, B, how)
    want: Exception | None = None
    try:
        get_backend("numpy").prepare_batch(list(tasks))
    except (TypeError, ValueError) as exc:
        want = exc
    if want is None:
        for B, got in zip(tasks, TB.prepare_batch(tasks)):
            assert got.dtype == torch.uint8 and got.is_contiguous()
            assert torch.equal(got, B.to(torch.uint8))
        return
    with pytest.raises(type(want)) as raised:
        TB.prepare_batch(tasks)
    assert str(raised.value) == str(want)


# ---------------------------------------------------------------------------
# (b) a batch's op count does not grow with its number of tasks


@pytest.mark.parametrize("method", ["majority", "aces-c", "aces-c-filter"])
def test_batch_op_count_does_not_depend_on_the_number_of_tasks(method):
    n, m = 50, 80
    assert 1000 * n * m <= DEFAULT_CHUNK_ELEMENTS  # one padded chunk
    counts = {}
    for T in (10, 1000):
        tasks = [
            TB.prepare(torch.from_numpy(random_matrix(RNG, n, m, 0.5, dup_rows=10)))
            for _ in range(T)
        ]
        log, out = record(lambda tasks=tasks: TB.rerank_batch(tasks, method, _values(method), None))
        assert len(out) == T
        counts[T] = log.counts()
    assert counts[10] == counts[1000]
    assert sum(counts[10].values()) < 400


@pytest.mark.parametrize("method", ["majority", "aces-c", "aces-c-filter"])
def test_a_stack_of_tasks_runs_a_fixed_op_sequence_with_one_read(method):
    """A (T, n, m) uint8 tensor stack: one read (its check), the same ops for 10
    tasks as for 1 000, none per task."""
    n, m = 50, 80
    counts = {}
    for T in (10, 1000):
        S = torch.from_numpy((RNG.random((T, n, m)) < 0.5).astype(np.uint8))
        log, out = record(lambda S=S: af.rerank_batch(S, method, backend="torch"))
        assert len(out) == T and out.backend == "torch"
        assert len(log.reads) == 1, log.reads
        counts[T] = log.counts()
    assert counts[10] == counts[1000]


# ---------------------------------------------------------------------------
# (c) one ACES-O Adam step: a fixed, short op sequence without sort or host read

#: aten ops one Adam step of ACES-O may dispatch (one column chunk of pair tensors)
ADAM_STEP_OPS = 60
#: ops that sort (or select by sorting)
SORT_OPS = ("aten::sort", "aten::argsort", "aten::topk", "aten::kthvalue", "aten::msort")


def _with_symmetric_tests(B: np.ndarray, copies: int) -> np.ndarray:
    """``B`` with its first ``copies`` columns duplicated: symmetry classes that last
    through the whole fit, so every step snaps."""
    return np.ascontiguousarray(np.hstack([B, B[:, :copies]]))


def _adam_step_ops(run: Callable[[int], Any], steps: tuple[int, int] = (6, 10)) -> Counter:
    """The aten ops one Adam step adds: the op counts of ``run(steps[1])`` minus those
    of ``run(steps[0])``, divided by the step difference (each op a whole number of
    times per step, the host reads the same)."""
    a, b = (record(lambda s=s: run(s))[0] for s in steps)
    k = steps[1] - steps[0]
    diff = b.counts()
    diff.subtract(a.counts())
    assert all(v >= 0 and v % k == 0 for v in diff.values()), diff
    assert [r[1:] for r in a.reads] == [r[1:] for r in b.reads]  # none per step
    return Counter({name: v // k for name, v in diff.items() if v})


@pytest.mark.parametrize("method", ["aces-o", "aces-o-warm"])
@pytest.mark.parametrize("route", ["single", "batch"])
def test_aces_o_adam_step_op_budget(method, route):
    """(c) An Adam step runs at most ``ADAM_STEP_OPS`` ops, none of them a sort or a
    host read, while symmetry classes are snapped (duplicate columns) -- per task on
    the issue's 200 x 500 cell, and for a batch whose tasks share one Adam group."""
    if route == "single":
        B = TB.prepare(torch.from_numpy(_with_symmetric_tests(MATRIX, 20)))

        def run(steps):
            return TB.rerank(B, method, _registry.method_params(method, {"steps": steps}))

    else:
        tasks = [
            TB.prepare(torch.from_numpy(_with_symmetric_tests(random_matrix(RNG, 40, 50), 8)))
            for _ in range(4)
        ]

        def run(steps):
            params = _registry.method_params(method, {"steps": steps})
            return TB.rerank_batch(tasks, method, params, None)

    per_step = _adam_step_ops(run)
    assert sum(per_step.values()) <= ADAM_STEP_OPS, per_step
    assert per_step["aten::bucketize"] == 1  # the classes are snapped every step
    assert not [name for name in per_step if name.startswith(SORT_OPS)], per_step
    assert not [name for name in per_step if name in SYNC_OPS or name.startswith("host::")]


class _Signatures(TorchDispatchMode):
    """Each op's name with its non-tensor arguments and its tensors' shapes and
    dtypes: what a CUDA graph captures of a step (besides the addresses)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        sig = tuple(
            ("tensor", tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else repr(x)
            for x in leaves
        )
        self.calls.append((func._schema.name, sig))
        return func(*args, **kwargs)


class _RecordingGraph:
    """:class:`aces_o.StepGraph`'s protocol on the CPU: the warm-up runs the step,
    the capture only records it (as CUDA's does), each replay runs it again and
    must dispatch exactly what the captured step would have."""

    made: ClassVar[list[_RecordingGraph]] = []

    def __init__(self) -> None:
        self.step: Callable[[], None] | None = None
        self.signature: list[Any] = []
        self.replays = 0
        _RecordingGraph.made.append(self)

    def warm_up(self, step):
        with _Signatures() as sig:
            step()
        self.signature = sig.calls

    def capture(self, step):
        self.step = step

    def replay(self):
        with _Signatures() as sig:
            self.step()
        assert sig.calls == self.signature  # a step that changed would replay stale
        self.replays += 1


@pytest.mark.parametrize("method", ["aces-o", "aces-o-warm"])
def test_adam_steps_replayed_as_a_captured_graph_give_the_same_bits(method, monkeypatch):
    """(item 2) The Adam loop is graph-ready: every step dispatches the same ops with
    the same arguments (the step counter and bias corrections live on the device),
    and repeating it by warm-up, capture and replays -- the CUDA graph protocol,
    here on CPU tensors -- gives the eager loop's weights and objective bit for bit,
    per task and in a batch."""
    from aces_fast.backends.torch import aces_o

    steps = 12
    params = _registry.method_params(method, {"steps": steps})
    tasks = [
        TB.prepare(torch.from_numpy(_with_symmetric_tests(random_matrix(RNG, n, m), 5)))
        for n, m in ((40, 30), (24, 50), (60, 20))
    ]
    eager = [TB.rerank(B, method, params) for B in tasks]
    eager_batch = TB.rerank_batch(tasks, method, params, None)
    _RecordingGraph.made.clear()
    monkeypatch.setattr(aces_o, "step_graph", lambda device: _RecordingGraph)
    replayed = [TB.rerank(B, method, params) for B in tasks]
    replayed_batch = TB.rerank_batch(tasks, method, params, None)
    # steps 2..12: one warm-up, one capture, ten replays, per group
    assert _RecordingGraph.made and {g.replays for g in _RecordingGraph.made} == {steps - 2}
    for a, b in zip([*eager, *eager_batch], [*replayed, *replayed_batch]):
        np.testing.assert_array_equal(npy(a.weights), npy(b.weights))
        np.testing.assert_array_equal(npy(a.objective), npy(b.objective))
        np.testing.assert_array_equal(npy(a.order), npy(b.order))


def test_repeat_runs_a_step_count_times_either_way():
    from aces_fast.backends.torch import aces_o

    for count in range(6):
        for graph in (None, _RecordingGraph):
            done = []
            aces_o.repeat(lambda done=done: done.append(1), count, graph)
            assert len(done) == count
    assert aces_o.step_graph(torch.device("cpu")) is None  # CUDA only


@pytest.mark.parametrize(
    ("setting", "graphed"),
    [(None, True), ("1", True), ("yes", True), (" 0 ", False), ("0", False), ("Off", False)],
)
def test_cuda_graphs_are_on_by_default_and_off_with_zero(monkeypatch, setting, graphed):
    """The rule only (no device needed): on CUDA the steps replay a graph unless
    ``ACES_FAST_TORCH_CUDA_GRAPHS`` is 0; the CPU never does."""
    from aces_fast.backends.torch import aces_o

    if setting is None:
        monkeypatch.delenv(aces_o.CUDA_GRAPHS_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(aces_o.CUDA_GRAPHS_ENV_VAR, setting)
    want = aces_o.StepGraph if graphed else None
    assert aces_o.step_graph(torch.device("cuda")) is want
    assert aces_o.step_graph(torch.device("cpu")) is None


def test_a_misspelt_cuda_graphs_switch_is_an_error_on_cuda(monkeypatch):
    from aces_fast.backends.torch import aces_o

    monkeypatch.setenv(aces_o.CUDA_GRAPHS_ENV_VAR, "fasle")
    with pytest.raises(ValueError, match="ACES_FAST_TORCH_CUDA_GRAPHS='fasle' is not a switch"):
        aces_o.step_graph(torch.device("cuda"))
    assert aces_o.step_graph(torch.device("cpu")) is None  # not read for the CPU


# ---------------------------------------------------------------------------
# CUDA: the same calls under torch's sync debug mode, against the cpp backend

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture
def sync_errors():
    """Any host synchronization on the GPU raises inside the test."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize(
    "method", ["majority", "aces-c", "aces-c-filter", "codet", "codet-linear", "b4"]
)
def test_cuda_method_without_syncs(method, sync_errors):
    require_backend("cpp")
    Bs = [MATRIX, EXAMPLE, random_matrix(RNG, 30, 12)]
    for B in Bs:
        torch.cuda.set_sync_debug_mode("default")
        prepared = TB.prepare(torch.from_numpy(B).cuda())  # validation reads once
        torch.cuda.set_sync_debug_mode("error")
        spec = _registry.get(method)
        out = spec.run(TB, prepared, _values(method))  # no sync up to the copy-out
        torch.cuda.set_sync_debug_mode("default")
        got = spec.pack(out, _values(method), TB.name)
        want = af.rerank(B, method, backend="cpp")
        assert got.scores.device.type == "cuda"
        np.testing.assert_array_equal(npy(got.order), want.order)
        np.testing.assert_allclose(npy(got.scores), want.scores, rtol=1e-12, atol=1e-12)
        if want.weights is not None:
            np.testing.assert_allclose(npy(got.weights), want.weights, rtol=0, atol=1e-12)
        assert got.fallback == want.fallback


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("method", ["majority", "aces-c"])
def test_cuda_batch_without_syncs(method, sync_errors):
    require_backend("cpp")
    mats = [random_matrix(RNG, n, m) for n, m in SHAPES]
    torch.cuda.set_sync_debug_mode("default")
    tasks = [TB.prepare(torch.from_numpy(B).cuda()) for B in mats]
    torch.cuda.set_sync_debug_mode("error")
    got = TB.rerank_batch(tasks, method, _values(method), None)
    torch.cuda.set_sync_debug_mode("default")
    want = af.rerank_batch(mats, method, backend="cpp")
    assert got.scores.device.type == "cuda"
    np.testing.assert_array_equal(npy(got.order), want.order)
    np.testing.assert_allclose(npy(got.scores), want.scores, rtol=0, atol=1e-12)


@pytest.mark.cuda
@cuda
def test_cuda_loo_auc_without_syncs(sync_errors):
    require_backend("cpp")
    torch.cuda.set_sync_debug_mode("default")
    B = TB.prepare(torch.from_numpy(MATRIX).cuda())
    torch.cuda.set_sync_debug_mode("error")
    got = TB.loo_auc_public(B, None, 1e-9)
    torch.cuda.set_sync_debug_mode("default")
    np.testing.assert_array_equal(npy(got), af.loo_auc(MATRIX, backend="cpp"))


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("method", ["aces-o", "aces-o-warm"])
def test_cuda_aces_o_adam_loop_without_syncs(method, monkeypatch):
    """The Adam loop (steps 2.., symmetry classes snapped every step) runs under
    ``set_sync_debug_mode("error")``, per task and in a batch; results match cpp."""
    require_backend("cpp")
    strict_adam_loop(monkeypatch)
    mats = [_with_symmetric_tests(MATRIX, 20), _with_symmetric_tests(random_matrix(RNG, 40, 50), 8)]
    tasks = [TB.prepare(torch.from_numpy(B).cuda()) for B in mats]
    single = [TB.rerank(B, method, _values(method)) for B in tasks]
    batch = TB.rerank_batch(tasks, method, _values(method), None)
    for k, B in enumerate(mats):
        want = af.rerank(B, method, backend="cpp", **PARAMS[method])
        for got in (single[k], batch[k]):
            assert got.weights.device.type == "cuda"
            np.testing.assert_allclose(npy(got.weights), want.weights, rtol=0, atol=1e-9)
            np.testing.assert_array_equal(npy(got.order), want.order)


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("method", ["aces-o", "aces-o-warm"])
def test_cuda_graph_adam_loop_equals_the_eager_loop(method, monkeypatch):
    """By default on CUDA the Adam steps replay a captured CUDA graph: the same
    weights and objective as the eager loop (``ACES_FAST_TORCH_CUDA_GRAPHS=0``),
    per task and in a batch."""
    from aces_fast.backends.torch import aces_o

    mats = [_with_symmetric_tests(MATRIX, 20), _with_symmetric_tests(random_matrix(RNG, 40, 50), 8)]
    tasks = [TB.prepare(torch.from_numpy(B).cuda()) for B in mats]
    params = _registry.method_params(method, {"steps": 30})
    monkeypatch.setenv(aces_o.CUDA_GRAPHS_ENV_VAR, "0")
    assert aces_o.step_graph(tasks[0].device) is None
    eager = [TB.rerank(B, method, params) for B in tasks] + list(
        TB.rerank_batch(tasks, method, params, None)
    )
    monkeypatch.delenv(aces_o.CUDA_GRAPHS_ENV_VAR)
    assert aces_o.step_graph(tasks[0].device) is aces_o.StepGraph
    graphed = [TB.rerank(B, method, params) for B in tasks] + list(
        TB.rerank_batch(tasks, method, params, None)
    )
    for a, b in zip(eager, graphed):
        np.testing.assert_array_equal(npy(a.weights), npy(b.weights))
        np.testing.assert_array_equal(npy(a.objective), npy(b.objective))


@pytest.mark.cuda
@cuda
def test_cuda_surrogate_does_not_read_the_weights(sync_errors, monkeypatch):
    """The public surrogate on a device does not read the weights (``torch.sigmoid``
    instead of the CPU's exp trick, which needs max(w) on the host). Its one
    read left, the distinct-row merge (which sizes the pair tensors), runs beforehand."""
    from aces_fast.backends.torch import surrogate as _surrogate

    require_backend("cpp")
    torch.cuda.set_sync_debug_mode("default")
    B = TB.prepare(torch.from_numpy(MATRIX).cuda())
    w = torch.from_numpy(RNG.random(MATRIX.shape[1]))
    w = (w / w.sum()).cuda()
    valid = torch.ones((1, B.shape[0]), dtype=torch.bool, device=B.device)
    merged = _surrogate.distinct_rows_padded(B[None], valid, torch.float64, None)
    monkeypatch.setattr(_surrogate, "distinct_rows_padded", lambda *args: merged)
    torch.cuda.set_sync_debug_mode("error")
    L, J, g = _surrogate.surrogate(B, w, 10.0)
    torch.cuda.set_sync_debug_mode("default")
    want = af.surrogate_loo_auc(MATRIX, npy(w), 10.0, backend="cpp")
    np.testing.assert_allclose(npy(L), want.values, rtol=1e-12, atol=1e-12)
    assert abs(float(J) - want.objective) <= 1e-12
    np.testing.assert_allclose(npy(g), want.gradient, rtol=1e-12, atol=1e-12)


@pytest.mark.cuda
@cuda
def test_cuda_stack_batch_synchronizes_once():
    """ACES-C over a stack of CUDA tasks: its check is the one synchronization;
    results equal cpp's on the same stack."""
    import warnings

    S = (torch.rand((300, 40, 60), device="cuda") < 0.5).to(torch.uint8)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            got = af.rerank_batch(S, "aces-c", backend="torch")
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [str(c.message) for c in caught if "synchroniz" in str(c.message)]
    assert len(syncs) == 1, syncs
    want = af.rerank_batch(S.cpu().numpy(), "aces-c", backend="cpp")
    assert got.scores.device == S.device
    np.testing.assert_array_equal(npy(got.order), want.order)
    np.testing.assert_allclose(npy(got.weights), want.weights, rtol=0, atol=1e-12)


@pytest.mark.cuda
@cuda
def test_cuda_batch_validation_synchronizes_once():
    """Validating a batch of CUDA tensors of mixed dtypes: one synchronization."""
    import warnings

    tasks = [_as(random_matrix(RNG, n, m), d).cuda() for (n, m), d in zip(SHAPES, TENSOR_DTYPES)]
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            out = TB.prepare_batch(tasks)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [str(c.message) for c in caught if "synchroniz" in str(c.message)]
    assert len(syncs) == 1, syncs
    for B, got in zip(tasks, out):
        assert got.device == B.device and torch.equal(got, B.to(torch.uint8))
