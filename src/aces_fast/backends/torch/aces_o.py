"""ACES-O's Adam fit: per task, and for a padded batch of tasks in groups of similar
shape (no Python loop over tasks); both run the same code, a task alone being a
batch of one.

The Adam loop works on fixed-shape tensors and buffers made before it starts:
every step writes into the same buffers through views made once (``out=`` and
in-place ops), so a step dispatches a fixed sequence of 58 aten ops (one column
chunk of pair tensors: 25 for the weights, J and its gradient, of which 21 in
:class:`.surrogate.Surrogate`; 18 for the Adam update; 15 for the symmetry
snapping), allocates nothing large, sorts nothing and never reads the device
from the host -- on CUDA the steps queue without a synchronization. The step
counter, the bias corrections it selects and the objective's next column live
on the device, so every step dispatches the same ops with the same arguments
on the same tensors: ``ACES_FAST_TORCH_CUDA_GRAPHS=1`` captures one step in a
CUDA graph and replays it (:func:`repeat`; off by default until measured on a
GPU). tests/test_torch_sync.py counts the ops and checks the replay protocol
on CPU tensors.

Host reads: two per call, both before the loop: the distinct-row counts
(the shapes of the pair tensors and of the task groups) and the sizes of the
symmetry classes after the first step (the shape of the snapping table), read
for every group at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ... import _env
from ..._constants import ADAM_BETA1, ADAM_BETA2, ADAM_EPS, SNAP_RTOL_FLOAT32
from ..._constants import SNAP_RTOL as _SNAP_RTOL64
from ..._env import flag
from ..shapes import shape_chunks
from .chunks import DEFAULT_CHUNK_ELEMENTS
from .columns import upload
from .dedup import distinct_rows_padded
from .surrogate import Surrogate, Workspace, pair_route

#: Relative tolerance of the symmetry snapping (docs/contract.rst §7.5) per working
#: dtype: float64 as every other backend; float32's sums carry ~1e-7 relative
#: noise, so its snapping is coarser (float32 mode agrees to 1e-4 anyway).
SNAP_RTOL = {torch.float64: _SNAP_RTOL64, torch.float32: SNAP_RTOL_FLOAT32}

#: Share of the free CUDA memory (``torch.cuda.mem_get_info``) that ACES-O's two
#: per-chunk pair tensors may take when no cap is given (:func:`pair_budget`).
CUDA_PAIR_MEMORY_FRACTION = 0.5


def pair_budget(device: torch.device, dtype: torch.dtype, pair_elements: int | None) -> int:
    """Entries of each of the two per-chunk pair tensors (k, T, U, U) of the Adam loop.

    ``pair_elements`` when given (a cap chosen by the caller); otherwise, on
    CUDA, ``CUDA_PAIR_MEMORY_FRACTION`` of the free device memory split over
    the two tensors, so that large pools (``top_k=None``) run in few, large
    column chunks; on the CPU the fixed ``DEFAULT_CHUNK_ELEMENTS`` (2**22
    entries, 32 MiB in float64). A chunk holds at least one test, so one
    test's U x U pairs are the floor. Reads no tensor.
    """
    if pair_elements is not None:
        return max(1, int(pair_elements))
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        item = torch.finfo(dtype).bits // 8
        return max(1, int(free * CUDA_PAIR_MEMORY_FRACTION) // (2 * item))
    return DEFAULT_CHUNK_ELEMENTS


class SymmetryClasses:
    """Classes of columns of every row of a (T, m) problem batch that are kept exactly
    equal (docs/contract.rst §7.5), as integer labels (T, m): one label per class,
    a unique label for every inactive column (which therefore joins no class).

    :meth:`snap` sorts each row by (label, value), gives every run of
    neighbours of one class at most ``tol`` apart the run's smallest value (a
    NaN joins no run), and relabels by run (labels 1..m): classes only refine.
    Vectorized (two stable sorts per call, O(T m log m)), no host read; used
    before the Adam loop (the starting logits, the first step's gradient),
    whose steps snap with :class:`ClassTable` instead.
    """

    def __init__(self, logits: torch.Tensor, active: torch.Tensor):
        """Start from one class of the active columns of each row, split by
        ``logits`` (T, m), which are snapped in place (``tol`` =
        ``SNAP_RTOL`` times the row's largest finite ``|logit|``)."""
        T, m = logits.shape
        dev = logits.device
        self.pos = torch.arange(m, device=dev).expand(T, m)
        self.labels = torch.where(active, torch.zeros_like(self.pos), self.pos + 1)
        finite = active & torch.isfinite(logits)
        scale = torch.where(finite, logits.abs(), torch.zeros_like(logits)).amax(
            dim=1, keepdim=True
        )
        logits.copy_(self.snap(logits, SNAP_RTOL[logits.dtype] * scale))

    def snap(self, x: torch.Tensor, tol) -> torch.Tensor:
        """``x`` (T, m) snapped within the classes (a new tensor), the classes refined;
        ``tol``: a float or a (T, 1) tensor."""
        by_value = torch.argsort(x, dim=1, stable=True)
        order = by_value.gather(
            1, torch.argsort(self.labels.gather(1, by_value), dim=1, stable=True)
        )
        sx = x.gather(1, order)
        sl = self.labels.gather(1, order)
        start = torch.ones_like(order, dtype=torch.bool)
        start[:, 1:] = (sl[:, 1:] != sl[:, :-1]) | ~(sx[:, 1:] - sx[:, :-1] <= tol)
        first = torch.where(start, self.pos, torch.zeros_like(self.pos)).cummax(dim=1).values
        run = start.cumsum(dim=1)
        self.labels = torch.empty_like(self.labels).scatter_(1, order, run)
        return torch.empty_like(x).scatter_(1, order, sx.gather(1, first))

    def sizes(self) -> torch.Tensor:
        """Each column's class size (T, m) int64, from a table of the labels 0..m."""
        T, m = self.labels.shape
        counts = torch.zeros((T, m + 1), dtype=torch.int64, device=self.labels.device)
        counts.scatter_add_(1, self.labels, torch.ones_like(self.labels))
        return counts.gather(1, self.labels)


def gradient_snap_tol(gamma: float, dtype: torch.dtype) -> float:
    """Snapping tolerance of ``dJ/dw``: ``SNAP_RTOL`` times ``1/2 + 3|gamma|/4``, the
    bound on ``|dJ/dw_k|`` and its terms (as :func:`..numpy.gradient_snap_tol`)."""
    return SNAP_RTOL[dtype] * (0.5 + 0.75 * abs(gamma))


class ClassTable:
    """Sort-free snapping (docs/contract.rst §7.5) within the classes of two or more
    columns, for the Adam loop: a fixed-shape table of every class member
    against the members of its class.

    ``labels`` and ``sizes`` (T, m) int64 (:class:`SymmetryClasses`) give the
    classes; ``members`` (M) and ``width`` (W) are the number of columns in
    classes of two or more and the largest class size, read from the device
    before the loop. Member ``i`` (flat column ``midx[i]`` of ``x`` (T, m))
    has row ``kidx[i]`` (M, W) of member positions: its class, starting with
    itself, cycling when the class has fewer than W members. :meth:`snap`
    compares every member with its row (``d = x_i - x_j``): ``i`` starts a
    run when no member lies in ``[x_i - tol, x_i)`` (``0 < d <= tol``; equal
    values share a run, so every copy of a run's smallest value is a start),
    and its snapped value is the largest run start ``<= x_i`` -- the sorted
    rule's run minimum, since rounding of ``x_i - x_j`` is monotone in
    ``x_j``. Members whose snapped values differ leave each other's rows
    (replaced by the member itself): classes only refine. Columns outside the
    table are single-column classes, which snapping leaves alone. Values must
    be finite (the gradient is: ``w`` is on the simplex). 15 ops per call, no
    sort, no host read; O(M W) time and memory.
    """

    def __init__(
        self,
        x: torch.Tensor,
        labels: torch.Tensor,
        sizes: torch.Tensor,
        members: int,
        width: int,
        tol: float,
    ):
        T, m = labels.shape
        dev = labels.device
        M, W = members, width
        multi = sizes > 1
        _, order = torch.sort(labels, dim=1, stable=True)  # classes contiguous, by column
        is_member = multi.gather(1, order).reshape(-1)
        flat = (order + torch.arange(T, device=dev)[:, None] * m).reshape(-1)
        rank = torch.where(is_member, is_member.cumsum(0) - 1, M)
        midx = torch.zeros(M + 1, dtype=torch.int64, device=dev).scatter_(0, rank, flat)[:M]
        # in member order the (task, label) keys are non-decreasing: classes are runs
        key = (labels + torch.arange(T, device=dev)[:, None] * (m + 1)).reshape(-1).take(midx)
        starts = torch.ones(M, dtype=torch.bool, device=dev)
        starts[1:] = key[1:] != key[:-1]
        pos = torch.arange(M, device=dev)
        first = torch.where(starts, pos, 0).cummax(0).values
        size = sizes.reshape(-1).take(midx)
        cycle = (pos - first)[:, None] + torch.arange(W, device=dev)[None, :]
        self.kidx = first[:, None] + cycle % size[:, None]
        self.kself = pos[:, None].clone()
        self.midx = midx
        self.x_flat = x.view(-1)
        # bucketize: 0 for d < 0, 1 for d == 0, 2 for 0 < d <= tol, 3 for d > tol
        finfo = torch.finfo(x.dtype)
        below_zero = -finfo.smallest_normal * finfo.eps  # the negative number nearest 0
        np_dtype = np.float32 if x.dtype == torch.float32 else np.float64
        bounds = np.array([below_zero, 0.0, tol], dtype=np_dtype)
        self.bounds = upload(bounds, dev)  # pinned, non-blocking: the host does not wait
        self.xm = x.new_empty(M)
        self.xm_col = self.xm.view(M, 1)
        self.xt = x.new_empty((M, W))
        self.d = x.new_empty((M, W))
        self.bucket = torch.empty((M, W), dtype=torch.int64, device=dev)
        self.mask = torch.empty((M, W), dtype=torch.bool, device=dev)
        self.inside = torch.empty(M, dtype=torch.bool, device=dev)
        self.starts = x.new_empty((M, W))
        self.snapped = x.new_empty(M)
        self.snapped_col = self.snapped.view(M, 1)
        self.snapped_t = x.new_empty((M, W))

    def snap(self) -> None:
        """Snap ``x`` in place within the classes and refine them."""
        torch.take(self.x_flat, self.midx, out=self.xm)
        torch.take(self.xm, self.kidx, out=self.xt)
        torch.sub(self.xm_col, self.xt, out=self.d)  # d[i, j] = x_i - x_j
        torch.bucketize(self.d, self.bounds, out=self.bucket)
        torch.eq(self.bucket, 2, out=self.mask)
        torch.any(self.mask, 1, out=self.inside)  # a neighbour below within tol
        start_values = self.xm.masked_fill(self.inside, -math.inf)
        torch.take(start_values, self.kidx, out=self.starts)
        torch.eq(self.bucket, 0, out=self.mask)  # x_j > x_i
        self.starts.masked_fill_(self.mask, -math.inf)
        torch.amax(self.starts, 1, out=self.snapped)
        self.x_flat.put_(self.midx, self.snapped)
        torch.take(self.snapped, self.kidx, out=self.snapped_t)
        torch.ne(self.snapped_t, self.snapped_col, out=self.mask)
        torch.where(self.mask, self.kself, self.kidx, out=self.kidx)


class _Adam:
    """Adam ascent state of T tasks: logits, moments and buffers (T, m).

    Inactive tests have logit ``-inf`` (weight exactly 0, gradient ``dl``
    exactly 0, so Adam leaves them there); a task without active tests has all
    logits 0 and a zero gradient. The update is the reference's
    (:func:`aces_fast.backends.numpy.aces_o_fit`, PyTorch semantics: beta =
    (0.9, 0.999), eps 1e-8, bias correction) op for op, with the first moment
    of the ascent direction (``-m1``, exact): single-rounding elementwise ops
    only, so columns with equal inputs get equal bits wherever they sit.
    """

    def __init__(
        self, logits: torch.Tensor, m1: torch.Tensor, m2: torch.Tensor, lr: float, steps: int
    ):
        T, m = logits.shape
        self.logits, self.m1, self.m2 = logits, m1, m2
        self.w = torch.empty_like(logits)
        self.g = torch.empty_like(logits)
        self.dl = torch.empty_like(logits)
        self.tmp = torch.empty_like(logits)
        self.den = torch.empty_like(logits)
        self.wg = logits.new_empty((T, 1, 1))
        self.wg2 = self.wg.view(T, 1)
        self.w_row = self.w.view(T, 1, m)
        self.g_col = self.g.view(T, m, 1)
        # The bias corrections of steps 1..steps, computed in Python floats as the
        # reference does and rounded to the working dtype as a scalar operand would
        # be, are read on the device at the step counter ``t``: a step's ops and
        # arguments are then the same at every step (what a CUDA graph replays).
        t = range(1, max(steps, 1) + 1)
        corrections = np.array(
            [[lr / (1 - ADAM_BETA1**k) for k in t], [math.sqrt(1 - ADAM_BETA2**k) for k in t]]
        )
        np_dtype = np.float32 if logits.dtype == torch.float32 else np.float64
        self.corrections = upload(corrections.astype(np_dtype), logits.device)  # (2, steps)
        self.t = torch.zeros(1, dtype=torch.int64, device=logits.device)  # steps made
        self.c = logits.new_empty((2, 1))
        self.c1, self.c2 = self.c[0], self.c[1]

    def softmax(self) -> None:
        torch.softmax(self.logits, 1, out=self.w)

    def ascent(self) -> None:
        """The next Adam step with ``g = dJ/dw`` in ``self.g``. 18 ops."""
        beta1, beta2 = ADAM_BETA1, ADAM_BETA2
        torch.index_select(self.corrections, 1, self.t, out=self.c)
        self.t.add_(1)
        torch.bmm(self.w_row, self.g_col, out=self.wg)  # <w, g> per task
        dl = torch.sub(self.g, self.wg2, out=self.dl).mul_(self.w)  # dJ/dlogits
        tmp = self.tmp
        self.m1.mul_(beta1).add_(torch.mul(dl, 1 - beta1, out=tmp))
        self.m2.mul_(beta2).add_(torch.mul(dl, 1 - beta2, out=tmp).mul_(dl))
        den = torch.sqrt(self.m2, out=self.den).div_(self.c2).add_(ADAM_EPS)
        self.logits.add_(torch.mul(self.m1, self.c1, out=tmp).div_(den))


class _GroupFit:
    """ACES-O of a group of T tasks padded to (U, m): the first Adam step (with the
    sort-based :class:`SymmetryClasses`), then the loop (with :class:`ClassTable`)."""

    def __init__(
        self,
        Bf: torch.Tensor,
        counts: torch.Tensor,
        logits0: torch.Tensor,
        active: torch.Tensor,
        gamma: float,
        lr: float,
        steps: int,
        chunk_tests: int,
        workspace: Workspace,
        fused: bool = False,
    ):
        self.any_active = active.any(dim=1, keepdim=True)
        logits = logits0.masked_fill(~active, -math.inf).masked_fill_(~self.any_active, 0.0)
        self.classes = SymmetryClasses(logits, active)
        zeros = torch.zeros_like(logits)
        self.adam = _Adam(logits, zeros, zeros.clone(), lr, steps)
        # a task without active tests: no rows, so J = 0 and dJ/dw = 0 at its uniform w
        counts = counts * self.any_active
        self.surrogate = Surrogate(
            Bf, counts, gamma, self.adam.w, self.adam.g, chunk_tests, workspace, fused=fused
        )
        self.tol = gradient_snap_tol(gamma, Bf.dtype)
        self.steps = steps
        self.objective = logits.new_zeros((logits.shape[0], steps + 1))
        self.column = torch.zeros(1, dtype=torch.int64, device=logits.device)  # J's recorded

    def evaluate(self) -> None:
        """Weights, J (into the objective's next column) and ``dJ/dw``. 25 ops."""
        self.adam.softmax()
        J = self.surrogate.evaluate()
        self.objective.index_copy_(1, self.column, J.view(-1, 1))
        self.column.add_(1)

    def first_step(self) -> torch.Tensor | None:
        """J at the start and, if ``steps``, Adam step 1; then ``(members, width)``
        (2, T) of the symmetry classes for :class:`ClassTable`."""
        self.evaluate()
        if self.steps == 0:
            return None
        self.adam.g.copy_(self.classes.snap(self.adam.g, self.tol))
        self.adam.ascent()
        self.sizes = self.classes.sizes()
        multi = self.sizes > 1
        width = torch.where(multi, self.sizes, 0).amax(dim=1)
        return torch.stack([multi.sum(dim=1), width])

    def run(self, members: int, width: int, graph: type[StepGraph] | None) -> None:
        """Steps 2..``steps`` and the last J: no sort, no host read, the same ops with
        the same arguments at every step, repeated eagerly or by ``graph``."""
        adam = self.adam
        table = None
        if members:
            table = ClassTable(adam.g, self.classes.labels, self.sizes, members, width, self.tol)

        def step() -> None:
            self.evaluate()
            if table is not None:
                table.snap()
            adam.ascent()

        repeat(step, self.steps - 1, graph)
        self.evaluate()

    def result(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(weights (T, m), objective (T, steps + 1))``: a task without active tests
        gets zero weights (its objective is 0: no test has pairs)."""
        return self.adam.w.masked_fill(~self.any_active, 0.0), self.objective


class StepGraph:
    """A step captured once and replayed (the protocol of :func:`repeat`): here
    ``torch.cuda.CUDAGraph`` on the current CUDA device, after torch's recipe
    (one eager warm-up step on a side stream, then the capture)."""

    def __init__(self) -> None:
        self.graph = torch.cuda.CUDAGraph()

    def warm_up(self, step: Callable[[], None]) -> None:
        """Run ``step`` once."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()
        torch.cuda.current_stream().wait_stream(side)

    def capture(self, step: Callable[[], None]) -> None:
        """Record ``step`` without running it."""
        with torch.cuda.graph(self.graph):
            step()

    def replay(self) -> None:
        """Run the recorded step once more."""
        self.graph.replay()


def repeat(step: Callable[[], None], count: int, graph: type[StepGraph] | None) -> None:
    """``step()`` ``count`` times: eagerly, or with ``graph`` (at least three steps):
    one warm-up step, one captured, replayed ``count - 1`` times -- one launch per
    step instead of one per op. ``step`` must dispatch the same ops with the same
    arguments every time, its state in tensors (tests/test_torch_sync.py checks)."""
    if graph is None or count < 3:
        for _ in range(count):
            step()
        return
    g = graph()
    g.warm_up(step)
    g.capture(step)
    for _ in range(count - 1):
        g.replay()


#: "0" (or another off word, :func:`aces_fast._env.flag`) repeats ACES-O's Adam
#: steps on CUDA eagerly; unset (or "1"), from a
#: captured CUDA graph (:class:`StepGraph`). Measured on an H200
#: (benchmarks/results/2026-11-29-h200.txt, same bits either way): one 200x500
#: call 38.7 ms eager, 21.0 ms replayed; a batch of 200 such tasks 260 / 254 ms.
CUDA_GRAPHS_ENV_VAR = _env.TORCH_CUDA_GRAPHS


def step_graph(device: torch.device) -> type[StepGraph] | None:
    """How the Adam loop repeats its steps on ``device``: :class:`StepGraph` on CUDA
    unless ``CUDA_GRAPHS_ENV_VAR`` is an off word, else ``None`` (eagerly). Read at every
    call; a value that is no switch word raises ``ValueError``."""
    if device.type == "cuda" and flag(CUDA_GRAPHS_ENV_VAR, True):
        return StepGraph
    return None


#: Adam groups of :func:`aces_o_fit_groups` may hold this many times their tasks' own
#: pair cells, plus ``_GROUP_SLACK`` cells (about what one op's fixed overhead costs)
_GROUP_WASTE = 2.0
_GROUP_SLACK = 1 << 15


def aces_o_fit(
    B: torch.Tensor,
    logits0: torch.Tensor,
    active: torch.Tensor,
    gamma: float,
    lr: float,
    steps: int,
    counts: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
    pair_elements: int | None = None,
    fused: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ACES-O's Adam ascent; ``(weights (m,), objective (steps + 1,))`` in float64.

    Adam with PyTorch semantics (beta = (0.9, 0.999), eps = 1e-8, bias
    correction) on the loss ``-J(softmax(logits))`` restricted to ``active``
    (bool (m,)) tests; inactive tests keep weight exactly 0. ``B`` uint8
    (n, m), ``counts`` int (n,) row multiplicities or None. Written out by
    hand with the operation order of :func:`aces_fast.backends.numpy.aces_o_fit`,
    including its symmetry snapping (docs/contract.rst §7.5).
    ``objective[t]`` is J after t updates. The task runs as a batch of one
    (:func:`aces_o_fit_groups`): identical rows merged, pair tensors of at
    most ``pair_budget(pair_elements)`` entries, two host reads, none in the
    loop; ``fused``: the pair sums compiled instead, no pair tensor
    (:mod:`.fused`). O(steps U^2 m + m log m + n m) for U distinct rows.
    """
    n, m = B.shape
    dev = B.device
    if counts is None:
        valid = torch.ones((1, n), dtype=torch.bool, device=dev)
        weights = None
    else:
        weights = counts.to(device=dev, dtype=torch.int64)[None, :]
        valid = weights > 0
    w, objective = aces_o_fit_groups(
        B[None],
        valid,
        [m],
        logits0.reshape(1, m),
        active.reshape(1, m),
        gamma,
        lr,
        steps,
        dtype,
        pair_elements,
        weights,
        fused,
    )
    return w[0], objective[0]


def aces_o_fit_groups(
    Bk: torch.Tensor,
    valid: torch.Tensor,
    n_cols: Sequence[int],
    logits0: torch.Tensor,
    active: torch.Tensor,
    gamma: float,
    lr: float,
    steps: int,
    dtype: torch.dtype = torch.float64,
    pair_elements: int | None = None,
    weights: torch.Tensor | None = None,
    fused: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`aces_o_fit` of every task of a padded batch: ``(weights (T, m), objective
    (T, steps + 1))`` in float64.

    ``Bk`` uint8 (T, K, m): each task's rows to fit on (``valid`` bool (T, K)
    marks the real ones; padding rows count 0), task t's tests in its first
    ``n_cols[t]`` columns; ``logits0`` (T, m) and ``active`` bool (T, m) as per
    task; ``weights`` int (T, K): each valid row's multiplicity (default 1).
    The rows are merged to distinct rows with multiplicities
    (:func:`.dedup.distinct_rows_padded`), and the Adam loop runs on groups of
    tasks with similar (distinct rows U, tests m), so that a task with few
    distinct rows is not padded to the most of the batch: :func:`shape_chunks`
    on (U_t^2, m_t), a group's two per-step pair tensors (k, T', U', U')
    holding at most :func:`pair_budget` entries, closed early once padding
    would exceed ``_GROUP_WASTE`` times the group's own cells. Each group:
    the first step with sort-based snapping (:class:`SymmetryClasses`), then
    steps 2.. with the fixed-shape :class:`ClassTable` -- no sort, no host
    read, 58 ops per step (``fused``: one compiled call for the pair sums,
    :mod:`.fused`, with no pair tensor or workspace; the budget then only
    bounds the groups). A task's values equal the per-task fit's up
    to summation order in the surrogate. Time O(T K m log K + steps sum_t
    U_t^2 m_t) up to group padding; two host reads per call (distinct-row
    counts; class sizes, for all groups at once), none in the Adam loop.
    """
    T, _, m = Bk.shape
    dev = Bk.device
    budget = pair_budget(dev, dtype, pair_elements)
    graph = step_graph(dev)
    logits0 = logits0.to(device=dev, dtype=dtype)
    active = active.to(device=dev, dtype=torch.bool)
    Bu, counts, distinct = distinct_rows_padded(Bk, valid, dtype, weights)  # host read 1
    w = torch.zeros((T, m), dtype=dtype, device=dev)
    objective = torch.zeros((T, steps + 1), dtype=dtype, device=dev)
    groups = shape_chunks(
        [(u * u, c) for u, c in zip(distinct, n_cols)], budget, _GROUP_WASTE, _GROUP_SLACK
    )
    plans = []
    for group in groups:
        u = max(distinct[t] for t in group)
        c = max(n_cols[t] for t in group)
        if c == 0:
            continue  # no tests: zero weights and objective, as per task
        chunk_tests = max(1, min(c, budget // (len(group) * u * u)))
        plans.append((group, u, c, chunk_tests))
    # pair tensors for the groups that run chunked (pair_route)
    entries = max(
        (len(g) * u * u * k for g, u, c, k in plans if pair_route(fused, u, c, dev) == "chunks"),
        default=0,
    )
    workspace = Workspace(entries, dtype, dev)
    fits, stats = [], []
    for group, u, c, chunk_tests in plans:
        idx = upload(np.array(group, dtype=np.int64), dev)
        fit = _GroupFit(
            Bu.index_select(0, idx)[:, :u, :c].contiguous(),
            counts.index_select(0, idx)[:, :u].contiguous(),
            logits0.index_select(0, idx)[:, :c].contiguous(),
            active.index_select(0, idx)[:, :c],
            gamma,
            lr,
            steps,
            chunk_tests,
            workspace,
            fused,
        )
        stat = fit.first_step()
        fits.append((idx, len(group), c, fit))
        if stat is not None:
            stats.append(stat)
    # host read 2: the symmetry classes' sizes (the snapping tables' shapes), all groups
    sizes = torch.cat(stats, dim=1).tolist() if stats else [[], []]
    start = 0
    for idx, k, c, fit in fits:
        if steps:
            members = sum(sizes[0][start : start + k])
            width = max(sizes[1][start : start + k])
            start += k
            fit.run(members, width, graph)
        wg, og = fit.result()
        w[idx, :c] = wg
        objective[idx] = og
    return w.to(torch.float64), objective.to(torch.float64)
