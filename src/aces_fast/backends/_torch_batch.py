"""Padded-batch tensor operations of the ``torch`` backend: many tasks at once.

:meth:`aces_fast.backends.torch_backend.TorchBackend.rerank_batch` sorts tasks
by shape and groups them (:func:`shape_chunks`), stacks each group into one
zero-padded tensor (:func:`_pad`), ranks it with :func:`rerank_padded`
(majority vote, ACES-C) or :func:`aces_o_padded` (ACES-O), and copies the
results to the host once per group (:func:`_host_copy`). Every step is
vectorized over tasks and tests: Python loops run only over column (or row)
chunks of at most ``chunk_elements`` entries, over 62-column key words when
merging rows, over groups of tasks with similar shapes and over ACES-O's Adam
steps -- never over tasks, except for the padding copies.

Shapes: a batch of T tasks is a ``uint8`` (T, n, m) tensor with ``n`` the
most candidates and ``m`` the most tests of its tasks; task t's (n_t, m_t) pass
matrix sits in the top-left corner ``B[t, :n_t, :m_t]`` and ``n_rows`` int64
(T,) holds the n_t, on the same device. Results are (T, n) per candidate or
(T, m) per test; entries beyond a task's own shape are padding, which the
caller cuts off.

Padding conventions: padding is zeros. Padded rows count 0: they are not
candidates (left out of LOO-AUC's score levels, ranked last for the top-k
rows, ``+inf`` in the tie snapping, ordered last) and have multiplicity 0 in
the surrogate, so they are in no P_j or F_j. Padded columns are inactive: no candidate passes
them, so they are constant tests -- LOO-AUC ``nan``, weight exactly 0, no
pairs -- and add exactly 0 to every score and sum. Every quantity of a task is
then its per-task value: bit for bit for majority vote and ACES-C (scores and
sums are rounded independently of summation order), up to summation order
inside ACES-O's surrogate.

Names without a module in the docstrings below (:func:`snap_ties`,
:func:`loo_auc`, :class:`SurrogateData`, ...) are the per-task operations of
:mod:`aces_fast.backends._torch_ops`, which each ``*_padded`` function mirrors
and whose shared helpers it imports. Like that module, this one is imported
only by :mod:`aces_fast.backends.torch_backend`, itself imported lazily, so
``import aces_fast`` never imports torch.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ._torch_ops import (_EXP_SAFE, DEFAULT_CHUNK_ELEMENTS, aces_c_weights, adam_ascent_step,
                         column_chunks, exact_sum, from_numpy, normalized, row_scores)

# ---------------------------------------------------------------------------
# grouping tasks into padded chunks


def shape_chunks(shapes: Sequence[Tuple[int, int]], budget: int,
                 max_waste: Optional[float] = None, slack: int = 0) -> List[List[int]]:
    """Group indices of ``(rows, cols)`` sizes, sorted, into chunks of at most ``budget``
    padded cells (``len(chunk) * max rows * max cols``).

    Sorting by (rows, cols) keeps similar items together, so little of a chunk is
    padding; an item alone over the budget forms its own chunk. With
    ``max_waste``, a chunk also closes before its padded cells would exceed
    ``max_waste`` times its items' own cells plus ``slack`` (the cells whose
    cost per-operation overhead hides anyway). O(T log T).
    """
    order = sorted(range(len(shapes)), key=lambda t: (shapes[t][0], shapes[t][1]))
    chunks: List[List[int]] = []
    current: List[int] = []
    n_max = m_max = own = 0
    for t in order:
        n, m = shapes[t]
        nn, mm = max(n_max, n), max(m_max, m)
        padded = (len(current) + 1) * nn * max(mm, 1)
        if current and (padded > budget or (
                max_waste is not None and padded > max_waste * (own + n * m) + slack)):
            chunks.append(current)
            current, nn, mm, own = [], n, m, 0
        current.append(t)
        n_max, m_max, own = nn, mm, own + n * m
    if current:
        chunks.append(current)
    return chunks


# ---------------------------------------------------------------------------
# tie snapping and orders


def snap_ties_padded(s: torch.Tensor, valid: torch.Tensor, tol: torch.Tensor) -> torch.Tensor:
    """:func:`snap_ties` for every row of ``s`` (T, n) at once, row t with ``tol[t]``.

    ``valid`` bool (T, n) marks real candidates; padding sorts after them as
    ``+inf`` and comes back as ``+inf``. A real entry's value equals
    ``snap_ties(s[t, valid[t]], tol[t])``: same sorted prefix, same comparisons
    (with ``tol = 0`` the runs hold exactly equal values, so nothing changes,
    as the per-task early return). O(T n log n), no host sync.
    """
    T, n = s.shape
    x = s.masked_fill(~valid, math.inf)
    if n < 2:
        return x
    sv, idx = torch.sort(x, dim=1, stable=True)
    starts = torch.ones((T, n), dtype=torch.bool, device=s.device)
    starts[:, 1:] = (sv[:, 1:] - sv[:, :-1]) > tol[:, None]
    pos = torch.arange(n, device=s.device).expand(T, n)
    run_start = torch.cummax(torch.where(starts, pos, torch.zeros_like(pos)), dim=1).values
    return torch.empty_like(x).scatter_(1, idx, sv.gather(1, run_start))


def descending_order_padded(scores: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per row of ``scores`` (T, n): :func:`descending_order` of its ``valid`` entries,
    which come first (padding last); int64 (T, n)."""
    return torch.sort(-scores.masked_fill(~valid, -math.inf), dim=1, stable=True).indices


# ---------------------------------------------------------------------------
# LOO-AUC, majority vote and ACES-C


def _count_dtype(*bounds: int) -> torch.dtype:
    """float32 when every count stays below 2**24 (exact there; torch's float
    reductions are several times faster than its integer ones), else float64."""
    return torch.float32 if max(bounds) < 2**24 else torch.float64


def loo_auc_uniform_padded(B: torch.Tensor, n_rows: torch.Tensor
                           ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Uniform-weight LOO-AUC of every test of every task: ``(L (T, m), passers (T, m))``.

    ``B`` uint8 (T, n, m): task t's pass matrix in its top-left (n_rows[t], m_t)
    corner, zeros elsewhere; ``n_rows`` int64 (T,). ``L`` is float64 with
    ``nan`` for constant tests (padding columns have no passer, so they are
    constant); ``passers`` int64 counts each test's passing candidates.

    Rows of equal integer score u form a level (padding rows are left out).
    One ``index_add`` sums each level's rows, giving its passers per test
    (T, levels, m); failers are the rest of the level. A passer of a level has
    leave-one-out score u - 1: it beats the failers of the levels below u - 1
    (a running sum over levels, read at ``searchsorted(u - 1)``) and ties those
    of the level at u - 1, if any -- the same level positions for every test,
    since the shift is 1 for all. Counts are integers held exactly in floating
    point (below 2**24 in float32, 2**53 in float64), and the final
    expression is :func:`loo_auc`'s, so every value equals the per-task one
    bit for bit. O(T n m + T n log n) time, O(T n m) memory; one host sync
    (the largest number of levels).
    """
    T, n, m = B.shape
    dev = B.device
    f64 = torch.float64
    if T == 0 or m == 0:
        return (torch.full((T, m), math.nan, dtype=f64, device=dev),
                torch.zeros((T, m), dtype=torch.int64, device=dev))
    cdt = _count_dtype(n, m)
    Bc = B.to(cdt)
    n_col = n_rows[:, None]
    valid = torch.arange(n, device=dev)[None, :] < n_col
    # padding rows score m + 2: sorted last, never a real score minus 1
    score = Bc.sum(dim=2).to(torch.int64).masked_fill_(~valid, m + 2)
    sv, perm = torch.sort(score, dim=1)
    first = torch.ones((T, n), dtype=torch.bool, device=dev)
    first[:, 1:] = sv[:, 1:] != sv[:, :-1]
    first &= sv <= m
    per_task = first.sum(dim=1)
    levels = int(per_task.max())
    # level of each sorted row; padding rows go to a spare slot `levels`
    level = torch.where(sv <= m, torch.cumsum(first, dim=1) - 1, levels)
    value = torch.full((T, levels + 1), m + 3, dtype=torch.int64, device=dev)
    value.scatter_(1, torch.where(first, level, levels), sv)  # ascending, unused: m + 3
    value = value[:, :levels].contiguous()
    size = torch.zeros((T, levels + 1), dtype=cdt, device=dev)
    size.scatter_add_(1, level, valid.to(cdt))
    row_level = torch.empty_like(level).scatter_(1, perm, level)
    slot = (row_level + torch.arange(T, device=dev)[:, None] * (levels + 1)).reshape(-1)
    lp = torch.zeros((T * (levels + 1), m), dtype=cdt, device=dev)
    lp.index_add_(0, slot, Bc.reshape(T * n, m))
    del Bc
    level_passers = lp.reshape(T, levels + 1, m)                      # spare slot: 0 passers
    level_failers = size[:, :, None] - level_passers                  # spare slot: 0 (size 0)
    failers_below = torch.zeros((T, levels + 1, m), dtype=cdt, device=dev)
    torch.cumsum(level_failers[:, :levels], dim=1, out=failers_below[:, 1:])
    target = value - 1
    lo = torch.searchsorted(value, target, side="left")  # levels scoring < u - 1
    at = value.gather(1, lo.clamp(max=max(levels - 1, 0))) == target
    tie_level = torch.where(at & (lo < levels), lo, levels)  # spare slot: no failers
    base = torch.arange(T, device=dev)[:, None] * (levels + 1)

    def rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        flat = table.reshape(T * (levels + 1), m)
        return flat.index_select(0, (idx + base).reshape(-1)).reshape(T, levels, m).to(f64)

    passers = level_passers[:, :levels].to(f64)
    wins = (passers * rows(failers_below, lo)).sum(dim=1)
    ties = (passers * rows(level_failers, tie_level)).sum(dim=1)
    P = passers.sum(dim=1)
    pairs = P * (n_col.to(f64) - P)
    L = torch.where(pairs > 0, (wins + 0.5 * ties) / pairs, math.nan)
    return L, P.to(torch.int64)


def rerank_padded(B: torch.Tensor, n_rows: torch.Tensor, method: str, tie_tol: float,
                  chunk_elements: int = DEFAULT_CHUNK_ELEMENTS) -> dict:
    """Majority vote or ACES-C for a padded batch of tasks, all on ``B.device``.

    ``B`` uint8 (T, n, m) padded with zeros (see :func:`loo_auc_uniform_padded`),
    ``n_rows`` int64 (T,). ``method``: ``"majority"``, ``"aces-c"`` or
    ``"aces-c-filter"``. Returns tensors ``weights`` (T, m), ``scores`` (T, n),
    ``order`` (T, n) (a task's real candidates first), and for ACES-C
    ``loo_auc`` (T, m) and ``fallback`` bool (T,); entries beyond a task's shape
    are padding. The same operations as the per-task methods of
    :class:`~aces_fast.backends.torch_backend.TorchBackend` (order-independent
    sums, division by a tensor), so each task's values equal them bit for bit.
    No Python loop over tasks; one host sync (in :func:`loo_auc_uniform_padded`).
    O(T n m + T n log n).
    """
    out = {}
    if method == "majority":
        w = nonconstant_padded(B, n_rows).to(torch.float64)
    else:
        w, L, fallback, _ = aces_c_weights_padded(B, n_rows, method == "aces-c")
        out.update(loo_auc=L, fallback=fallback)
    out.update(weighted_ranking_padded(B, n_rows, w, tie_tol, chunk_elements))
    return out


def nonconstant_padded(B: torch.Tensor, n_rows: torch.Tensor) -> torch.Tensor:
    """bool (T, m): :func:`nonconstant_mask` of every task of a zero-padded (T, n, m)
    batch (padding columns have no passer, so they are constant). O(T n m)."""
    colsum = B.to(_count_dtype(B.shape[1])).sum(dim=1).to(torch.int64)
    return (colsum > 0) & (colsum < n_rows[:, None])


def aces_c_weights_padded(B: torch.Tensor, n_rows: torch.Tensor, weighted: bool
                          ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """ACES-C weights of a zero-padded batch, after the majority fallback, unnormalized.

    Returns ``(w (T, m) float64, L (T, m), fallback bool (T,), nonconstant bool
    (T, m))``, each task's values equal to :meth:`TorchBackend._aces_c_weights`
    bit for bit. One host sync (:func:`loo_auc_uniform_padded`). O(T n m + T n log n).
    """
    L, colsum = loo_auc_uniform_padded(B, n_rows)
    nonconstant = (colsum > 0) & (colsum < n_rows[:, None])
    w = aces_c_weights(L, colsum, n_rows.to(torch.float64)[:, None], weighted)
    fallback = ~(w > 0).any(dim=1)
    w = torch.where(fallback[:, None], nonconstant.to(torch.float64), w)
    return w, L, fallback, nonconstant


def weighted_ranking_padded(B: torch.Tensor, n_rows: torch.Tensor, w: torch.Tensor,
                            tie_tol: float, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
                            ) -> dict:
    """Normalized weights, tie-snapped scores ``B w`` and orders of a padded batch.

    ``B`` uint8 (T, n, m) zero-padded, ``n_rows`` int64 (T,), ``w`` float64
    (T, m) unnormalized (0 on padding columns). Returns ``weights`` (T, m),
    ``scores`` (T, n) and ``order`` (T, n); each task's values equal
    :meth:`TorchBackend._weighted_result`'s bit for bit (order-independent
    sums). O(T n m + T n log n), no host sync.
    """
    n = B.shape[1]
    w = normalized(w)
    valid = torch.arange(n, device=B.device)[None, :] < n_rows[:, None]
    scores = snap_ties_padded(row_scores(B, w, chunk_elements), valid,
                              tie_tol * exact_sum(w))
    return {"weights": w, "scores": scores, "order": descending_order_padded(scores, valid)}


# ---------------------------------------------------------------------------
# ACES-O for a padded batch of tasks
# (padding conventions: see the module docstring)


def top_k_rows_padded(B: torch.Tensor, n_rows: torch.Tensor, top_k: Optional[int]
                      ) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`top_k_rows` of every task: ``(rows (T, K), k_rows (T,))`` int64.

    ``K = min(n, top_k)`` (``n`` if ``top_k`` is None); task t's kept rows are
    ``rows[t, :k_rows[t]]`` with ``k_rows[t] = min(n_rows[t], top_k)``, ascending,
    equal to ``top_k_rows(B_t, top_k)`` (same stable sort by row sum; padding
    rows, ranked last, fill the rest). O(T n m + T n log n), no host sync.
    """
    T, n, _ = B.shape
    valid = torch.arange(n, device=B.device)[None, :] < n_rows[:, None]
    rs = B.to(_count_dtype(B.shape[2])).sum(dim=2).to(torch.int64).masked_fill_(~valid, -1)
    K = n if top_k is None else min(n, top_k)
    keep = torch.sort(-rs, dim=1, stable=True).indices[:, :K]
    return torch.sort(keep, dim=1).values, n_rows.clamp(max=K)


#: bits of a row packed into one int64 sort key by :func:`distinct_rows_padded`
_KEY_BITS = 62


def distinct_rows_padded(B: torch.Tensor, rows: torch.Tensor, k_rows: torch.Tensor,
                         dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor, List[int]]:
    """The distinct rows among each task's selected rows, with multiplicities.

    ``B`` uint8 (T, n, m), ``rows`` int64 (T, K) of which the first ``k_rows[t]``
    count. Returns ``(Bu (T, U, m), counts (T, U), distinct)``: ``Bu`` and
    ``counts`` in ``dtype``, task t's ``distinct[t]`` distinct rows first, in
    lexicographic order as ``torch.unique(dim=0)`` gives them to the per-task
    path (:class:`SurrogateData`), then zero rows with count 0 (U the largest
    ``distinct[t]``). Each row is packed into ``ceil(m / 62)`` exact int64
    keys, first column most significant; one stable sort per key word (least
    significant first) orders the rows lexicographically, so equal rows are
    adjacent. O(T K m + (m / 62) T K log K) time, O(T K m) memory; one host
    sync (``distinct``).
    """
    T, n, m = B.shape
    K = rows.shape[1]
    dev = B.device
    Bk = B.gather(1, rows[:, :, None].expand(T, K, m))
    valid = torch.arange(K, device=dev)[None, :] < k_rows[:, None]
    words = max(1, -(-m // _KEY_BITS))
    bits = torch.zeros((T, K, words * _KEY_BITS), dtype=torch.int64, device=dev)
    bits[:, :, :m] = Bk
    powers = torch.pow(2, torch.arange(_KEY_BITS - 1, -1, -1, dtype=torch.int64, device=dev))
    keys = (bits.view(T, K, words, _KEY_BITS) * powers).sum(dim=3)  # < 2**62: exact
    del bits
    perm = torch.arange(K, device=dev).expand(T, K)
    for word in range(words - 1, -1, -1):  # radix sort over the key words
        perm = perm.gather(1, torch.sort(keys[:, :, word].gather(1, perm), dim=1,
                                         stable=True).indices)
    # padding rows (zero rows, sorted among the real zero rows) go last
    perm = perm.gather(1, torch.sort((~valid).gather(1, perm).to(torch.uint8), dim=1,
                                     stable=True).indices)
    sorted_keys = keys.gather(1, perm[:, :, None].expand(T, K, words))
    sorted_valid = valid.gather(1, perm)
    new = sorted_valid.clone()
    new[:, 1:] &= (sorted_keys[:, 1:] != sorted_keys[:, :-1]).any(dim=2)
    distinct = new.sum(dim=1).tolist()
    U = max(1, max(distinct))
    pos = torch.cumsum(new, dim=1) - 1
    base = torch.arange(T, device=dev)[:, None] * (U + 1)
    # slot U of every task is a spare that collects what must not count
    slot = torch.where(sorted_valid, pos, U) + base
    counts = torch.zeros(T * (U + 1), dtype=dtype, device=dev).index_add_(
        0, slot.reshape(-1), sorted_valid.reshape(-1).to(dtype))
    first = torch.where(new, pos, U) + base
    Bu = torch.zeros((T * (U + 1), m), dtype=dtype, device=dev).index_add_(
        0, first.reshape(-1), Bk.gather(1, perm[:, :, None].expand(T, K, m))
        .reshape(T * K, m).to(dtype))
    return Bu.view(T, U + 1, m)[:, :U], counts.view(T, U + 1)[:, :U], distinct


class PaddedSurrogateData:
    """:class:`SurrogateData` for T tasks: ``Bf`` (T, U, m) distinct rows and their
    multiplicities ``counts`` (T, U) in the working dtype (count 0: padding)."""

    def __init__(self, Bf: torch.Tensor, counts: torch.Tensor):
        self.Bf = Bf
        self.passers = Bf * counts[:, :, None]
        self.failers = (1 - Bf) * counts[:, :, None]
        self.passers_t = self.passers.transpose(1, 2).contiguous()  # (T, m, U)
        self.failers_t = self.failers.transpose(1, 2).contiguous()
        self.pairs = self.passers.sum(dim=1) * self.failers.sum(dim=1)  # exact integers
        valid = self.pairs > 0
        self.valid_f = valid.to(Bf.dtype)
        self.safe_pairs = torch.where(valid, self.pairs, torch.ones_like(self.pairs))
        self.inv_pairs = self.valid_f / self.safe_pairs
        self._work: dict = {}

    def work(self, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Two reusable (T, k, U, U) buffers (see :meth:`SurrogateData.work`)."""
        if k not in self._work:
            T, U, _ = self.Bf.shape
            self._work[k] = (self.Bf.new_empty((T, k, U, U)), self.Bf.new_empty((T, k, U, U)))
        return self._work[k]


def surrogate_core_padded(data: PaddedSurrogateData, w: torch.Tensor, gamma: float,
                          exp_trick: bool, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
                          ) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(J (T,), dJ/dw (T, m))`` of every task at weights ``w`` (T, m).

    :func:`surrogate_core` with a task axis in front: the same operations, with
    (T, k, U, U) pair tensors for a chunk of k tests (k as large as
    ``chunk_elements`` allows, at least 1) and batched mat-vecs over the
    T * k (task, test) pairs. ``exp_trick`` needs ``gamma * max(w)`` below
    ``_EXP_SAFE`` (true on the simplex when the per-task path uses it).
    Padding rows and columns add exactly 0. O(T U^2 m) time.
    """
    Bf = data.Bf
    T, U, m = Bf.shape
    s = torch.bmm(Bf, w[:, :, None]).squeeze(2)  # (T, U)
    if exp_trick:
        E = torch.exp((s[:, None, :] - s[:, :, None]).mul_(gamma))  # exp(-gamma (s_p - s_f))
        e = torch.exp(gamma * w)
    else:
        gdiff = (s[:, :, None] - s[:, None, :]).mul_(gamma)
        gw = gamma * w
    cv = torch.zeros((T, U, 1), dtype=w.dtype, device=w.device)
    Ls, Ds = [], []
    for a, b in column_chunks(m, T * U * U, chunk_elements):
        k = b - a
        sig, dsig = data.work(k)
        if exp_trick:
            torch.mul(E[:, None], e[:, a:b, None, None], out=sig).add_(1.0).reciprocal_()
        else:
            torch.sub(gdiff[:, None], gw[:, a:b, None, None], out=sig).sigmoid_()
        torch.addcmul(sig, sig, sig, value=-1.0, out=dsig)
        pt = data.passers_t[:, a:b]
        ft = data.failers_t[:, a:b]
        sig2, dsig2 = sig.view(T * k, U, U), dsig.view(T * k, U, U)
        ft2 = ft.reshape(T * k, 1, U)
        sig_f = torch.bmm(ft2, sig2.transpose(1, 2)).view(T, k, U)
        dsig_f = torch.bmm(ft2, dsig2.transpose(1, 2)).view(T, k, U)
        dsig_p = torch.bmm(pt.reshape(T * k, 1, U), dsig2).view(T, k, U)
        Ls.append(torch.linalg.vecdot(pt, sig_f) / data.safe_pairs[:, a:b])
        Ds.append(torch.linalg.vecdot(pt, dsig_f))
        u = (pt * dsig_f).addcmul_(ft, dsig_p, value=-1.0)  # (T, k, U)
        cv.baddbmm_(u.transpose(1, 2), (w[:, a:b] * data.inv_pairs[:, a:b])[:, :, None])
    Lc = Ls[0] if len(Ls) == 1 else torch.cat(Ls, dim=1)
    D = Ds[0] if len(Ds) == 1 else torch.cat(Ds, dim=1)
    excess = (Lc - 0.5).mul_(data.valid_f)
    J = torch.linalg.vecdot(w, excess)
    grad = torch.addcmul(excess, w * data.inv_pairs, D, value=-gamma)
    grad = grad[:, :, None].baddbmm_(Bf.transpose(1, 2), cv, alpha=gamma).squeeze(2)
    return J, grad


def softmax_masked_padded(logits: torch.Tensor, active: torch.Tensor,
                          any_active: torch.Tensor) -> torch.Tensor:
    """:func:`softmax_masked` of every row of ``logits`` (T, m); a row without an
    active entry (``any_active`` bool (T, 1) False) gets all zeros, not NaN."""
    x = logits.masked_fill(~active, -math.inf).masked_fill_(~any_active, 0.0)
    return torch.softmax(x, dim=1).masked_fill_(~any_active, 0.0)


def aces_o_fit_padded(data: PaddedSurrogateData, logits0: torch.Tensor, active: torch.Tensor,
                      gamma: float, lr: float, steps: int,
                      chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
                      ) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`aces_o_fit` for T tasks at once: ``(weights (T, m), objective (T, steps + 1))``.

    ``logits0`` (T, m) in the working dtype, ``active`` bool (T, m). The Adam
    update is elementwise, so running it on (T, m) tensors is the per-task
    update of every task; a task without active tests gets zero weights and
    objective, as per task. No host sync in the loop. O(steps T U^2 m).
    """
    T, m = logits0.shape
    dtype = logits0.dtype
    objective = torch.zeros((T, steps + 1), dtype=dtype, device=logits0.device)
    if m == 0:
        return logits0.clone(), objective
    any_active = active.any(dim=1, keepdim=True)
    exp_trick = gamma * 1.0 < _EXP_SAFE.get(dtype, 0.0)  # w on the simplex: max_w = 1
    logits = logits0.clone()
    m1 = torch.zeros_like(logits)
    m2 = torch.zeros_like(logits)
    for t in range(1, steps + 2):
        w = softmax_masked_padded(logits, active, any_active)
        J, g = surrogate_core_padded(data, w, gamma, exp_trick, chunk_elements)
        objective[:, t - 1] = J
        if t == steps + 1:
            break
        dl = w * (g - torch.linalg.vecdot(w, g)[:, None])
        logits, m1, m2 = adam_ascent_step(logits, dl, m1, m2, t, lr, active)
    # a task without active tests has w = 0 throughout, hence J = 0 as per task
    return softmax_masked_padded(logits, active, any_active), objective


#: Adam groups of :func:`aces_o_padded` may hold this many times their tasks' own
#: pair cells, plus ``_GROUP_SLACK`` cells (about what one op's fixed overhead costs)
_GROUP_WASTE = 2.0
_GROUP_SLACK = 1 << 15


def aces_o_padded(B: torch.Tensor, n_rows: torch.Tensor, n_cols: Sequence[int], gamma: float,
                  lr: float, steps: int, top_k: Optional[int], warm: bool, tie_tol: float,
                  dtype: torch.dtype = torch.float64,
                  chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
                  pair_elements: Optional[int] = None) -> dict:
    """ACES-O (SPEC section 3) for a zero-padded batch of tasks, all on ``B.device``.

    ``B`` uint8 (T, n, m) (task t in the corner ``[:n_rows[t], :n_cols[t]]``),
    ``n_rows`` int64 (T,), ``n_cols`` ints (host); ``warm`` starts from the
    ACES-C logits (``init="aces-c"``). The whole run is vectorized over tasks
    and tests: active tests, warm start (:func:`aces_c_weights_padded`), top-k
    rows (:func:`top_k_rows_padded`) merged to distinct rows, the Adam loop in
    ``dtype`` (:func:`aces_o_fit_padded`), then float64 normalization, scores
    of all n rows, tie snapping and order (:func:`weighted_ranking_padded`).
    The Adam loop runs on groups of tasks with similar (distinct rows, tests),
    so that a task with few distinct rows is not padded to the most of the batch.
    Returns tensors ``weights`` (T, m), ``scores`` (T, n), ``order`` (T, n),
    ``objective`` (T, steps + 1) float64, ``rows`` (T, K) (task t's top-k rows
    are ``rows[t, :min(n_rows[t], top_k)]``); entries beyond a task's shape are
    padding. Each task's values equal the per-task ACES-O's up to summation
    order in the surrogate.

    Memory: O(T n m) for the batch (row scores chunked to ``chunk_elements``;
    the row keys of :func:`distinct_rows_padded` are int64 (T, K, m)), plus per
    group of T' tasks two (T', k, U', U') pair tensors of at most
    ``pair_elements`` entries each (default ``chunk_elements``; k tests per
    column chunk, at least one; U' the group's most distinct top-k rows).
    Groups: :func:`shape_chunks` on (U_t^2, m_t), closed early once padding
    would exceed ``_GROUP_WASTE`` times the group's own cells. Time
    O(T n m + T n log n + T K m log K + steps sum_t U_t^2 m_t) up to group
    padding; host syncs: the warm start's number of score levels and the
    distinct-row counts, none in the Adam loop.
    """
    T, n, m = B.shape
    f64 = torch.float64
    dev = B.device
    if warm:
        wc, _, _, active = aces_c_weights_padded(B, n_rows, True)
        logits0 = torch.where(active, torch.log(normalized(wc) + 1e-3), torch.zeros_like(wc))
    else:
        active = nonconstant_padded(B, n_rows)
        logits0 = torch.zeros((T, m), dtype=f64, device=dev)
    logits0 = logits0.to(dtype)
    rows, k_rows = top_k_rows_padded(B, n_rows, top_k)
    Bu, counts, distinct = distinct_rows_padded(B, rows, k_rows, dtype)
    w = torch.zeros((T, m), dtype=dtype, device=dev)
    objective = torch.zeros((T, steps + 1), dtype=dtype, device=dev)
    pair_elements = chunk_elements if pair_elements is None else pair_elements
    groups = shape_chunks([(u * u, c) for u, c in zip(distinct, n_cols)], pair_elements,
                          _GROUP_WASTE, _GROUP_SLACK)
    for group in groups:
        u = max(distinct[t] for t in group)
        c = max(n_cols[t] for t in group)
        if c == 0:
            continue  # no tests: zero weights and objective, as per task
        idx = torch.tensor(group, dtype=torch.int64, device=dev)
        data = PaddedSurrogateData(Bu.index_select(0, idx)[:, :u, :c].contiguous(),
                                   counts.index_select(0, idx)[:, :u].contiguous())
        wg, og = aces_o_fit_padded(data, logits0.index_select(0, idx)[:, :c],
                                   active.index_select(0, idx)[:, :c], gamma, lr, steps,
                                   pair_elements)
        w[idx, :c] = wg
        objective[idx] = og
    out = weighted_ranking_padded(B, n_rows, w.to(f64), tie_tol, chunk_elements)
    out.update(objective=objective.to(f64), rows=rows)
    return out


# ---------------------------------------------------------------------------
# padding on the host, and results back to it


def _pad(mats: Sequence["torch.Tensor"], via_numpy: Optional[bool] = None
         ) -> Tuple["torch.Tensor", "torch.Tensor"]:
    """Stack uint8 (n_t, m_t) tensors (one device) zero-padded: ``(B (T, n, m), n_rows (T,))``.

    One slice copy per task; on the CPU (``via_numpy`` None) through NumPy,
    cheaper per call than torch's slice assignment, which runs elsewhere (and
    on the CPU with ``via_numpy=False``, as the tests do). O(T n m).
    """
    device = mats[0].device
    n_max = max(Bt.shape[0] for Bt in mats)
    m_max = max(Bt.shape[1] for Bt in mats)
    if via_numpy is None:
        via_numpy = device.type == "cpu"
    if via_numpy:
        buffer = np.zeros((len(mats), n_max, m_max), dtype=np.uint8)
        for k, Bt in enumerate(mats):
            buffer[k, :Bt.shape[0], :Bt.shape[1]] = Bt.numpy()
        padded = from_numpy(buffer)
    else:
        padded = torch.zeros((len(mats), n_max, m_max), dtype=torch.uint8, device=device)
        for k, Bt in enumerate(mats):
            padded[k, :Bt.shape[0], :Bt.shape[1]] = Bt
    n_rows = torch.tensor([Bt.shape[0] for Bt in mats], dtype=torch.int64, device=device)
    return padded, n_rows


def _host_copy(out: Dict[str, Any], mats) -> Dict[str, Any]:
    """NumPy copies of the batch tensors in ``out`` if any task wants NumPy out
    (one transfer per chunk), else ``{}``."""
    if not any(numpy_out for _, numpy_out in mats):
        return {}
    return {key: value.cpu().numpy() for key, value in out.items()}
