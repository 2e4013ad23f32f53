"""ACES-O's Adam fit: per task, and for a padded batch of tasks in groups of similar
shape (no Python loop over tasks)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..._constants import ADAM_BETA1, ADAM_BETA2, ADAM_EPS, SNAP_RTOL_FLOAT32
from ..._constants import SNAP_RTOL as _SNAP_RTOL64
from ..shapes import shape_chunks
from .chunks import DEFAULT_CHUNK_ELEMENTS
from .dedup import distinct_rows_padded
from .surrogate import (
    _EXP_SAFE,
    PaddedSurrogateData,
    SurrogateData,
    surrogate_core,
    surrogate_core_padded,
)


def softmax_masked(logits: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """Softmax over ``active`` entries; inactive entries get exactly 0 (exp(-inf))."""
    return torch.softmax(logits.masked_fill(~active, -math.inf), dim=0)


def adam_ascent_step(
    logits: torch.Tensor,
    dl: torch.Tensor,
    m1: torch.Tensor,
    m2: torch.Tensor,
    t: int,
    lr: float,
    active: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Adam step ``t`` (1-based; PyTorch semantics: beta = (0.9, 0.999), eps 1e-8,
    bias correction) on the loss ``-J`` given ``dl = dJ/dlogits``; inactive
    entries keep their logits. Any shape (per task ``(m,)`` or batched ``(T, m)``),
    elementwise; returns ``(logits, m1, m2)``.
    """
    beta1, beta2, eps = ADAM_BETA1, ADAM_BETA2, ADAM_EPS
    loss_grad = torch.where(active, -dl, torch.zeros_like(dl))
    m1 = beta1 * m1 + (1 - beta1) * loss_grad
    m2 = beta2 * m2 + (1 - beta2) * loss_grad * loss_grad
    bc1 = 1 - beta1**t
    bc2 = 1 - beta2**t
    denom = torch.sqrt(m2) / math.sqrt(bc2) + eps
    return torch.where(active, logits - (lr / bc1) * m1 / denom, logits), m1, m2


#: Relative tolerance of the symmetry snapping (docs/contract.rst §7.5) per working
#: dtype: float64 as every other backend; float32's sums carry ~1e-7 relative
#: noise, so its snapping is coarser (float32 mode agrees to 1e-4 anyway).
SNAP_RTOL = {torch.float64: _SNAP_RTOL64, torch.float32: SNAP_RTOL_FLOAT32}


class SymmetryClasses:
    """Classes of columns of every row of a (T, m) problem batch that are kept exactly
    equal (docs/contract.rst §7.5), as integer labels (T, m): one label per class,
    a unique label for every inactive column (which therefore joins no class).

    :meth:`snap` sorts each row by (label, value), gives every run of
    neighbours of one class at most ``tol`` apart the run's smallest value (a
    NaN joins no run), and relabels by run: classes only refine. Vectorized (two
    stable sorts per call, O(T m log m)), no host sync except on the CPU, where
    snapping stops once every class is a single column.
    """

    def __init__(self, logits: torch.Tensor, active: torch.Tensor):
        """Start from one class of the active columns of each row, split by
        ``logits`` (T, m), which are snapped in place (``tol`` =
        ``SNAP_RTOL`` times the row's largest finite ``|logit|``)."""
        T, m = logits.shape
        dev = logits.device
        self.done = False
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
        if self.done:
            return x
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
        if x.device.type == "cpu":  # a free check here; a sync per step on a GPU
            self.done = bool((run[:, -1] == x.shape[1]).all())
        return torch.empty_like(x).scatter_(1, order, sx.gather(1, first))


def gradient_snap_tol(gamma: float, dtype: torch.dtype) -> float:
    """Snapping tolerance of ``dJ/dw``: ``SNAP_RTOL`` times ``1/2 + 3|gamma|/4``, the
    bound on ``|dJ/dw_k|`` and its terms (as :func:`..numpy.gradient_snap_tol`)."""
    return SNAP_RTOL[dtype] * (0.5 + 0.75 * abs(gamma))


def aces_o_fit(
    B: torch.Tensor,
    logits0: torch.Tensor,
    active: torch.Tensor,
    gamma: float,
    lr: float,
    steps: int,
    counts: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ACES-O's Adam ascent; ``(weights (m,), objective (steps + 1,))`` in ``dtype``.

    Adam with PyTorch semantics (beta = (0.9, 0.999), eps = 1e-8, bias
    correction) on the loss ``-J(softmax(logits))`` restricted to ``active``
    (bool (m,)) tests; inactive tests keep weight exactly 0. Written out by hand
    with the same operation order as :func:`aces_fast.backends.numpy.aces_o_fit`,
    including its symmetry snapping (:class:`SymmetryClasses`, docs/contract.rst §7.5).
    ``objective[t]`` is J after t updates. The loop never reads a value back to
    the host, so on CUDA the steps queue without synchronizing.
    O(steps * (n^2 m + m log m)).
    """
    m = B.shape[1]
    dev = B.device
    active = active.to(device=dev, dtype=torch.bool)
    objective = torch.zeros(steps + 1, dtype=dtype, device=dev)
    if not bool(active.any()):
        return torch.zeros(m, dtype=dtype, device=dev), objective
    data = SurrogateData(B, counts, dtype)
    logits = logits0.to(device=dev, dtype=dtype).clone()
    classes = SymmetryClasses(logits[None, :], active[None, :])
    tol = gradient_snap_tol(gamma, dtype)
    m1 = torch.zeros_like(logits)
    m2 = torch.zeros_like(logits)
    for t in range(1, steps + 2):
        w = softmax_masked(logits, active)
        _, J, g = surrogate_core(data, w, gamma, chunk_elements, max_w=1.0)  # w on the simplex
        objective[t - 1] = J
        if t == steps + 1:
            break
        g = classes.snap(g[None, :], tol)[0]
        dl = w * (g - torch.dot(w, g))
        logits, m1, m2 = adam_ascent_step(logits, dl, m1, m2, t, lr, active)
    return softmax_masked(logits, active), objective


def softmax_masked_padded(
    logits: torch.Tensor, active: torch.Tensor, any_active: torch.Tensor
) -> torch.Tensor:
    """:func:`softmax_masked` of every row of ``logits`` (T, m); a row without an
    active entry (``any_active`` bool (T, 1) False) gets all zeros, not NaN."""
    x = logits.masked_fill(~active, -math.inf).masked_fill_(~any_active, 0.0)
    return torch.softmax(x, dim=1).masked_fill_(~any_active, 0.0)


def aces_o_fit_padded(
    data: PaddedSurrogateData,
    logits0: torch.Tensor,
    active: torch.Tensor,
    gamma: float,
    lr: float,
    steps: int,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`aces_o_fit` for T tasks at once: ``(weights (T, m), objective (T, steps + 1))``.

    ``logits0`` (T, m) in the working dtype, ``active`` bool (T, m). The Adam
    update is elementwise, so running it on (T, m) tensors is the per-task
    update of every task, and so is the symmetry snapping (:class:`SymmetryClasses`,
    row by row); a task without active tests gets zero weights and
    objective, as per task. No host sync in the loop on a GPU.
    O(steps T (U^2 m + m log m)).
    """
    T, m = logits0.shape
    dtype = logits0.dtype
    objective = torch.zeros((T, steps + 1), dtype=dtype, device=logits0.device)
    if m == 0:
        return logits0.clone(), objective
    any_active = active.any(dim=1, keepdim=True)
    exp_trick = gamma * 1.0 < _EXP_SAFE.get(dtype, 0.0)  # w on the simplex: max_w = 1
    logits = logits0.clone()
    classes = SymmetryClasses(logits, active)
    tol = gradient_snap_tol(gamma, dtype)
    m1 = torch.zeros_like(logits)
    m2 = torch.zeros_like(logits)
    for t in range(1, steps + 2):
        w = softmax_masked_padded(logits, active, any_active)
        J, g = surrogate_core_padded(data, w, gamma, exp_trick, chunk_elements)
        objective[:, t - 1] = J
        if t == steps + 1:
            break
        g = classes.snap(g, tol)
        dl = w * (g - torch.linalg.vecdot(w, g)[:, None])
        logits, m1, m2 = adam_ascent_step(logits, dl, m1, m2, t, lr, active)
    # a task without active tests has w = 0 throughout, hence J = 0 as per task
    return softmax_masked_padded(logits, active, any_active), objective


#: Adam groups of :func:`aces_o_fit_groups` may hold this many times their tasks' own
#: pair cells, plus ``_GROUP_SLACK`` cells (about what one op's fixed overhead costs)
_GROUP_WASTE = 2.0
_GROUP_SLACK = 1 << 15


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
    pair_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`aces_o_fit` of every task of a padded batch: ``(weights (T, m), objective
    (T, steps + 1))`` in float64.

    ``Bk`` uint8 (T, K, m): each task's rows to fit on (``valid`` bool (T, K)
    marks the real ones; padding rows count 0), task t's tests in its first
    ``n_cols[t]`` columns; ``logits0`` (T, m) and ``active`` bool (T, m) as per
    task. The rows are merged to distinct rows with multiplicities
    (:func:`distinct_rows_padded`, as the per-task :class:`SurrogateData` does),
    and the Adam loop runs on groups of tasks with similar (distinct rows U,
    tests m), so that a task with few distinct rows is not padded to the most of
    the batch: :func:`shape_chunks` on (U_t^2, m_t), a group's two per-step pair
    tensors (T', k, U', U') holding at most ``pair_elements`` entries, closed
    early once padding would exceed ``_GROUP_WASTE`` times the group's own
    cells. Each task's values equal the per-task fit's up to summation order in
    the surrogate. Time O(T K m log K + steps sum_t U_t^2 m_t) up to group
    padding; one host sync (the distinct-row counts), none in the Adam loop.
    """
    T, _, m = Bk.shape
    dev = Bk.device
    logits0 = logits0.to(dtype)
    Bu, counts, distinct = distinct_rows_padded(Bk, valid, dtype)
    w = torch.zeros((T, m), dtype=dtype, device=dev)
    objective = torch.zeros((T, steps + 1), dtype=dtype, device=dev)
    groups = shape_chunks(
        [(u * u, c) for u, c in zip(distinct, n_cols)], pair_elements, _GROUP_WASTE, _GROUP_SLACK
    )
    for group in groups:
        u = max(distinct[t] for t in group)
        c = max(n_cols[t] for t in group)
        if c == 0:
            continue  # no tests: zero weights and objective, as per task
        idx = torch.tensor(group, dtype=torch.int64, device=dev)
        data = PaddedSurrogateData(
            Bu.index_select(0, idx)[:, :u, :c].contiguous(),
            counts.index_select(0, idx)[:, :u].contiguous(),
        )
        wg, og = aces_o_fit_padded(
            data,
            logits0.index_select(0, idx)[:, :c],
            active.index_select(0, idx)[:, :c],
            gamma,
            lr,
            steps,
            pair_elements,
        )
        w[idx, :c] = wg
        objective[idx] = og
    return w.to(torch.float64), objective.to(torch.float64)
