"""Many tasks at once on the ``torch`` backend: the method semantics on zero-padded batches.

:func:`rerank_batch` sorts tasks by shape and groups them (:func:`..shapes.shape_chunks`),
stacks each group into one zero-padded tensor (:func:`pad`) and runs the
method's semantics (:mod:`aces_fast._semantics`, the same functions as per task)
on it with :class:`PaddedTasks` as the backend: the semantics broadcast over the
leading task axis, and :class:`PaddedTasks` supplies padded kernels. The
chunks' outputs are gathered into the flat columns of a
:class:`~aces_fast.BatchResult` (:mod:`.columns`), on the tasks' device. Every
step is vectorized over tasks and tests: Python loops run only over column (or
row) chunks of at most ``chunk_elements`` entries, over 62-column key words
when merging rows, over groups of tasks with similar shapes and over ACES-O's
Adam steps -- never over tasks, except for the padding copies (host copies on
the CPU) and host-side index arithmetic. Majority vote and ACES-C read nothing
back from the device (tests/test_torch_sync.py).

Shapes: a batch of T tasks is a ``uint8`` (T, n, m) tensor with ``n`` the most
candidates and ``m`` the most tests of its tasks; task t's (n_t, m_t) pass
matrix sits in the top-left corner ``B[t, :n_t, :m_t]``. Results are (T, n)
per candidate or (T, m) per test; entries beyond a task's own shape are
padding, cut off when the results are split.

Padding conventions: padding is zeros. Padded rows are not candidates
(:meth:`PaddedTasks.row_mask`): left out of LOO-AUC's score levels, ranked last
for the top-k rows, ``+inf`` in the tie snapping, ordered last, multiplicity 0
in the surrogate (in no P_j or F_j). Padded columns are inactive: no
candidate passes them, so they are constant tests -- LOO-AUC ``nan``, weight
exactly 0, no pairs -- and add exactly 0 to every score and sum. Every
quantity of a task is then its per-task value: bit for bit for majority vote
and ACES-C (scores and sums are rounded independently of summation order), up
to summation order inside ACES-O's surrogate.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ... import _registry
from ...batch_result import BatchResult
from ...result import RerankResult
from ..shapes import shape_chunks
from . import TorchBackend, _to_numpy
from . import aces_o as _aces_o
from . import loo_auc as _loo_auc
from .columns import Columns, upload

#: cap on batched ACES-O's per-step pair tensors on the CPU (8 MiB in float64):
#: measured fastest among 2**17..2**22 for 100 x m real tasks and 200 x 500 ones
CPU_PAIR_ELEMENTS = 1 << 20

_threads_lock = threading.Lock()


class PaddedTasks(TorchBackend):
    """The backend the semantics see for one padded batch (T, n, m): per-task row
    counts and masks, and padded kernels; the primitives are :class:`TorchBackend`'s."""

    def __init__(self, parent: TorchBackend, n_rows: torch.Tensor, n_cols: Sequence[int]):
        super().__init__(parent.dtype, parent.chunk_cap(n_rows.device))
        self.fused = parent.fused  # the parent checked that torch.compile runs here
        self.n_rows = n_rows
        self.n_cols = list(n_cols)
        self._count = n_rows.to(torch.float64)[:, None]
        self._valid: torch.Tensor | None = None
        device = n_rows.device
        # ACES-O's per-step pair tensors: tensors that stay in cache run faster on
        # the CPU (a GPU wants them large: by default sized by its free memory)
        self.pair_elements = (
            min(self.chunk_elements, CPU_PAIR_ELEMENTS)
            if device.type == "cpu"
            else parent.pair_elements
        )

    def row_count(self, B):
        return self._count

    def row_mask(self, B):
        if self._valid is None or self._valid.shape[1] != B.shape[1]:
            self._valid = torch.arange(B.shape[1], device=B.device)[None, :] < self.n_rows[:, None]
        return self._valid

    @staticmethod
    def column_sums(B):
        # exact in float32 below 2**24 rows; torch's float reductions beat its integer ones
        return B.to(_loo_auc.count_dtype(B.shape[1])).sum(dim=1).to(torch.int64)

    @staticmethod
    def row_sums(B):
        return B.to(_loo_auc.count_dtype(B.shape[2])).sum(dim=2).to(torch.int64)

    @staticmethod
    def take_rows(B, rows):
        T, _, m = B.shape
        return B.gather(1, rows[:, :, None].expand(T, rows.shape[1], m))

    def loo_auc_uniform(self, B):
        # no column chunks: the padded batch is bounded by its own chunking
        L, passers = _loo_auc.loo_auc_uniform(B, self.row_mask(B), chunk_elements=None)
        return L, passers, None

    def aces_o_fit(self, B, logits0, active, gamma, lr, steps, counts=None, bins=None):
        """The fit of every task on its rows ``B`` (T, K, m) (``counts``: bool (T, K),
        the real rows), in groups of similar shape (:func:`.aces_o.aces_o_fit_groups`)."""
        self.no_bins(bins)
        valid = counts if counts is not None else self.row_mask(B)
        return _aces_o.aces_o_fit_groups(
            B,
            valid,
            self.n_cols,
            logits0,
            active,
            gamma,
            lr,
            steps,
            self.dtype,
            self.pair_elements,
            fused=self.fused,
        )


@contextlib.contextmanager
def _intra_op_threads(n_threads: int | None):
    """Run the block with torch's intra-op thread count set to ``n_threads`` (None:
    unchanged), restored afterwards; serialized because the setting is process-wide."""
    if n_threads is None:
        yield
        return
    with _threads_lock:
        previous = torch.get_num_threads()
        torch.set_num_threads(n_threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


def rerank_batch(
    be: TorchBackend, Bs: Sequence[Any], method: str, values: dict[str, Any], n_threads: int | None
) -> BatchResult | None:
    """Rank many tasks with a method over tasks, in padded batches (:meth:`TorchBackend.rerank_batch`).

    The protocol of :mod:`aces_fast.batch`. Tasks (all on one device; NumPy
    inputs count as the CPU) are sorted by shape and grouped into chunks of at
    most ``chunk_elements`` padded cells ``T n_max m_max``; each chunk is one
    zero-padded (T, n_max, m_max) ``uint8`` tensor ranked by the method's
    semantics on :class:`PaddedTasks` -- for ACES-O: active tests, warm start,
    top-k rows merged to distinct rows, the Adam loop (in groups of similar
    shape, two per-step pair tensors of at most ``chunk_elements`` entries, on
    the CPU at most ``CPU_PAIR_ELEMENTS``, which run faster in cache),
    normalization, scores of all rows, tie snapping, orders. A task whose own
    ``n m`` exceeds ``chunk_elements`` runs alone through the same semantics
    on the backend itself (whose kernels chunk over tests).

    Returns the columnar :class:`~aces_fast.BatchResult` (:class:`.columns.Columns`
    gathers the chunks' outputs into task order): tensors on the tasks' device
    for tensor tasks -- majority vote and ACES-C never read the device, not even
    the ``fallback`` flags, which stay a bool tensor column (tests/test_torch_sync.py)
    -- NumPy columns for NumPy tasks, and for a batch mixing the two NumPy
    columns with items that mirror each task's input. Item ``t`` equals
    :meth:`TorchBackend.rerank` of task ``t`` bit for bit for majority vote and
    ACES-C, and for ACES-O up to summation order in the surrogate (weights to
    1e-9, see the package docstring; same top-k rows). ``n_threads`` sets
    torch's (process-wide) intra-op thread count for the call on the CPU and
    restores it afterwards. ``None`` for methods not over tasks (CodeT, B4:
    the caller loops over tasks). Cost O(sum over chunks of T n_max m_max),
    plus for ACES-O O(T K m log K) to find distinct rows and O(steps sum_t
    U_t^2 m_t) (up to group padding) for the Adam loop, plus one copy per task
    to pad; the number of ops grows with the number of chunks, not of tasks.
    """
    spec = _registry.get(method)
    if not spec.over_tasks:
        return None
    mats = [be._matrix(B) for B in Bs]
    if not mats:
        return BatchResult.from_results([], spec, values, be.name)
    device = mats[0][0].device
    for t, (Bt, _) in enumerate(mats):
        if Bt.device != device:
            raise ValueError(
                f"task {t}: the pass matrix is on device '{Bt.device}' but task 0 "
                f"is on '{device}'; a torch batch runs on one device: move "
                "every task there first"
            )
    shapes = [(int(Bt.shape[0]), int(Bt.shape[1])) for Bt, _ in mats]
    cap = be.chunk_cap(device)
    n, m = shapes[0]
    if (
        len(mats) > 1
        and len(mats) * n * max(m, 1) <= cap
        and not any(numpy_out for _, numpy_out in mats)
        and shapes.count(shapes[0]) == len(shapes)
    ):
        # tasks of one shape in one chunk: stacked once (the copy padding would
        # make anyway), then ranked as a stack, without grouping or a list per chunk
        return rerank_stack(be, torch.stack([Bt for Bt, _ in mats]), method, values, n_threads)
    fields = _rank_chunks(
        be,
        spec,
        values,
        shapes,
        device,
        n_threads,
        cap,
        shape_chunks(shapes, cap),
        lambda t: mats[t][0],
        lambda chunk: pad([mats[t][0] for t in chunk]),
    )
    return _batch_result(spec, values, be.name, fields, [numpy_out for _, numpy_out in mats])


def rerank_stack(
    be: TorchBackend,
    stack: torch.Tensor,
    method: str,
    values: dict[str, Any],
    n_threads: int | None,
) -> BatchResult:
    """:func:`rerank_batch` of the tasks ``stack[0], stack[1], ...`` of a validated
    (T, n, m) ``uint8`` tensor, without a view or a Python object per task: the
    chunks are slices ``stack[a:b]`` of at most ``chunk_elements`` cells (what
    :func:`~..shapes.shape_chunks` makes of equal shapes), already padded.
    Results equal :func:`rerank_batch` on the slices bit for bit. ``method``
    must be over tasks (the callers check). The per-task Python of the list
    path (about 13 us a task on an H200's host: validation, grouping, padding)
    is gone; the stack's own GPU time is not measured yet.
    """
    spec = _registry.get(method)
    T, n, m = (int(x) for x in stack.shape)
    cap = be.chunk_cap(stack.device)
    per = max(1, cap // (n * max(m, 1)))
    chunks = [list(range(a, min(T, a + per))) for a in range(0, T, per)]

    def padded(chunk: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        rows = np.full(len(chunk), n, np.int64)
        return stack[chunk[0] : chunk[-1] + 1], upload(rows, stack.device)

    fields = _rank_chunks(
        be,
        spec,
        values,
        [(n, m)] * T,
        stack.device,
        n_threads,
        cap,
        chunks,
        stack.__getitem__,
        padded,
    )
    return _batch_result(spec, values, be.name, fields, [False] * T)


def _rank_chunks(
    be: TorchBackend,
    spec: _registry.MethodSpec,
    values: dict[str, Any],
    shapes: list[tuple[int, int]],
    device: torch.device,
    n_threads: int | None,
    cap: int,
    chunks: list[list[int]],
    matrix: Callable[[int], torch.Tensor],
    padded: Callable[[list[int]], tuple[torch.Tensor, torch.Tensor]],
) -> dict[str, Any]:
    """The columns of tasks ranked chunk by chunk: ``matrix(t)`` is task ``t``'s
    tensor, ``padded(chunk)`` a chunk's ``(B (T_c, n, m), n_rows (T_c,))``; a
    chunk of one task over ``cap`` (the budget the chunks were made with) runs
    alone on the backend (whose kernels chunk over tests)."""
    columns = Columns(shapes, device)
    with _intra_op_threads(n_threads if device.type == "cpu" else None):
        for chunk in chunks:
            if len(chunk) == 1 and shapes[chunk[0]][0] * shapes[chunk[0]][1] > cap:
                columns.add(spec.run(be, matrix(chunk[0]), values), chunk, padded=False)
                continue
            B, n_rows = padded(chunk)
            nx = PaddedTasks(be, n_rows, [shapes[t][1] for t in chunk])
            columns.add(spec.run(nx, B, values), chunk)
        return columns.fields()


def _batch_result(
    spec: _registry.MethodSpec,
    values: dict[str, Any],
    backend: str,
    fields: dict[str, Any],
    numpy_out: list[bool],
) -> BatchResult:
    """The BatchResult of a batch's columns (tensors): as they are for tensor tasks,
    NumPy for NumPy tasks; a mixed batch has NumPy columns and items of each
    task's own type."""

    def make(convert: Any, items: list[RerankResult] | None = None) -> BatchResult:
        col = {
            k: v if v is None or k.endswith("_offsets") else convert(v) for k, v in fields.items()
        }
        return BatchResult(
            spec,
            values,
            backend,
            n_offsets=col["scores_offsets"],
            scores=col["scores"],
            order=col["order"],
            m_offsets=(
                col["weights_offsets"] if col["weights"] is not None else col["loo_auc_offsets"]
            ),
            weights=col["weights"],
            loo_auc=col["loo_auc"],
            fallback=col["fallback"],
            objective=col["objective"],
            objective_offsets=col["objective_offsets"],
            rows=col["rows"],
            rows_offsets=col["rows_offsets"],
            items=items,
        )

    on_device = make(lambda x: x)
    if not any(numpy_out):
        return on_device
    host = make(_to_numpy)
    if all(numpy_out):
        return host
    return make(_to_numpy, [host[t] if out else on_device[t] for t, out in enumerate(numpy_out)])


def pad(mats: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack uint8 (n_t, m_t) tensors (one device) zero-padded: ``(B (T, n, m), n_rows (T,))``.

    Tasks with the same number of tests ``m_t`` are joined by one ``cat`` and
    their rows copied into place by one ``index_copy_`` (the row positions are
    computed on the host from the shapes); tasks of one shape need only the
    ``cat``. A few ops per distinct ``m_t``, none per task, no host read, and
    the same route on every device. O(T n m).
    """
    device = mats[0].device
    n = np.array([Bt.shape[0] for Bt in mats], np.int64)
    m = np.array([Bt.shape[1] for Bt in mats], np.int64)
    T, n_max, m_max = len(mats), int(n.max()), int(m.max())
    if (n == n_max).all() and (m == m_max).all():  # equal shapes: one copy
        joined = torch.cat(list(mats)) if T > 1 else mats[0].clone()
        return joined.view(T, n_max, m_max), upload(n, device)
    padded = torch.zeros((T * n_max, m_max), dtype=torch.uint8, device=device)
    for width in np.unique(m[m > 0]).tolist():
        group = np.flatnonzero(m == width)
        rows = torch.cat([mats[t] for t in group.tolist()])
        counts = n[group]
        first = np.zeros(len(group), np.int64)
        np.cumsum(counts[:-1], out=first[1:])
        # padded row of each row of ``rows``: its task's first padded row + its rank
        where = np.repeat(group * n_max - first, counts) + np.arange(int(counts.sum()))
        padded[:, :width].index_copy_(0, upload(where, device), rows)
    return padded.view(T, n_max, m_max), upload(n, device)
