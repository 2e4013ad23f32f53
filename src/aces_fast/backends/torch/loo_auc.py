"""LOO-AUC of every test with exact integer counting, without reading the device:
uniform weights over a task axis (one task, or a zero-padded batch), float
weights per task.

Both kernels group candidates by score into a table of fixed size -- at most
``min(n, m + 1)`` integer score levels, at most ``n`` distinct float scores --
so no shape depends on the data and no value is read back to the host
(docs/contract.rst §2.4 for the method).
"""

from __future__ import annotations

import math

import torch

from . import count_kernels
from .chunks import DEFAULT_CHUNK_ELEMENTS, column_chunks


def count_dtype(*bounds: int) -> torch.dtype:
    """float32 when every count stays below 2**24 (exact there; torch's float
    reductions are several times faster than its integer ones), else float64."""
    return torch.float32 if max(bounds) < 2**24 else torch.float64


def _sorted_groups(
    sv: torch.Tensor, real: torch.Tensor, size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Groups of equal sorted values ``sv`` (..., n): ``(group (..., n), first (..., n))``.

    ``group`` numbers the runs of equal values 0, 1, ... along the last axis;
    entries not ``real`` go to the spare group ``size``. ``first`` marks the
    first entry of each real run.
    """
    first = torch.ones_like(real)
    first[..., 1:] = sv[..., 1:] != sv[..., :-1]
    first &= real
    group = torch.where(real, first.cumsum(dim=-1) - 1, size)
    return group, first


def loo_auc_uniform(
    B: torch.Tensor,
    valid: torch.Tensor | None = None,
    counts: torch.Tensor | None = None,
    chunk_elements: int | None = DEFAULT_CHUNK_ELEMENTS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform-weight LOO-AUC of every test of every task: ``(L (T, m), passers (T, m))``.

    Parameters
    ----------
    B : uint8 tensor (T, n, m) of 0/1
        One task per leading index (``B[None]`` for a single matrix).
    valid : bool tensor (T, n), optional
        The rows that are candidates (a padded batch: task t's first
        ``n_t``); the others never count.
    counts : int tensor (T, n), optional
        Row multiplicities (0 = absent row).
    chunk_elements : int or None
        Cap on the entries of the per-chunk temporaries (about
        ``T (n + 2 levels)`` per test); ``None``: all tests at once (a padded
        batch is already bounded by its chunking).

    Returns
    -------
    L : float64 tensor (T, m)
        ``nan`` for constant tests (padding columns have no passer, so they are constant).
    passers : int64 tensor (T, m)
        Passing candidates per test (with multiplicity).

    Notes
    -----
    Rows of equal integer score form a level. The levels are the runs of the
    sorted row sums, numbered into a table of ``levels = min(n, m + 1)``
    slots (unused slots are empty and score ``m + 3``, so nothing depends on
    how many levels a task has) plus a spare slot that takes what must not
    count. One ``index_add`` sums each level's rows: ``p_i``, the passers of
    level i per test (T, levels, k); failers are the rest of the level.

    A passer of level i (score ``u_i``) has leave-one-out score ``u_i - 1``:
    it beats every failer of the levels below i except those of level i - 1
    when ``u_{i-1} = u_i - 1`` (``a_i``, the same for every test, since the
    shift is 1 for all), and ties those. With ``s_i`` the rows of level i,
    ``S_i`` the rows below it and ``P = sum_i p_i``, the pairs among passers
    sum to ``(P**2 - sum_i p_i**2) / 2``, so ::

        2 wins + ties = sum_i p_i (2 S_i - a_i s_{i-1} + p_i + a_i p_{i-1}) - P**2

    -- one table expression and two sums over levels per test, no gather.
    Each factor lies in [0, 2 n], so every partial sum is an integer of at
    most ``2 n**2``, held exactly (float32 below 2**24, else float64; int64
    with ``counts``), and ``L = (2 wins + ties) / 2 / (P (N - P))`` equals
    the NumPy reference bit for bit. O(T n log n + T n m) time,
    O(chunk_elements) extra memory; no host read.
    """
    T, n, m = B.shape
    dev = B.device
    f64 = torch.float64
    L = torch.full((T, m), math.nan, dtype=f64, device=dev)
    passers_out = torch.zeros((T, m), dtype=torch.int64, device=dev)
    if T == 0 or m == 0:
        return L, passers_out
    levels = min(n, m + 1)
    cdt = count_dtype(n) if counts is None else torch.int64
    # the level tables' sums of products are at most 2 n**2 (see the Notes)
    wide = count_dtype(2 * n * n) if counts is None else torch.int64
    per_test = T * (n + 2 * levels)
    budget = per_test * m if chunk_elements is None else chunk_elements
    chunks = list(column_chunks(m, per_test, budget))
    kernel = count_kernels.runs_loo(B, counts)  # one read of B, the same bits
    # one chunk (a padded batch): B is converted once, for the scores and the level
    # sums (not for the kernel, which reads the bytes)
    Bc = B.to(cdt) if len(chunks) == 1 and counts is None and not kernel else None
    score = (B.sum(dim=2) if Bc is None else Bc.sum(dim=2)).to(torch.int64)  # exact: m < 2**24
    if valid is not None:
        score = score.masked_fill(~valid, m + 2)  # sorted last, never a real score - 1
    sv, perm = torch.sort(score, dim=1)
    real = sv <= m
    level, first = _sorted_groups(sv, real, levels)
    # score of each level, ascending; unused slots m + 3 (the spare slot collects junk)
    value = torch.full((T, levels + 1), m + 3, dtype=torch.int64, device=dev)
    value = value.scatter_(1, torch.where(first, level, levels), sv)[:, :levels]
    if counts is None:
        row_weight = real.to(cdt)
    else:
        row_weight = torch.where(real, counts.to(cdt).gather(1, perm), 0)
    size = torch.zeros((T, levels + 1), dtype=cdt, device=dev).scatter_add_(1, level, row_weight)
    size = size[:, :levels].to(wide)
    total = size.sum(dim=1, keepdim=True).to(f64)
    # per level: rows strictly below, and whether the level below scores exactly one less
    rows_below = torch.cumsum(size, dim=1) - size
    adjacent = torch.zeros((T, levels), dtype=wide, device=dev)
    adjacent[:, 1:] = value[:, 1:] == value[:, :-1] + 1
    shift = (2 * rows_below).sub_(torch.cat((size[:, :1] * 0, size[:, :-1]), dim=1) * adjacent)
    if kernel:
        return count_kernels.loo_auc_uniform(B, perm, level, first, real, shift, adjacent, total)
    base = torch.arange(T, device=dev)[:, None] * (levels + 1)
    slot = (torch.empty_like(level).scatter_(1, perm, level) + base).reshape(-1)
    for a, b in chunks:
        k = b - a
        rows = B[:, :, a:b].to(cdt) if Bc is None else Bc
        if counts is not None:
            rows = rows * counts.to(cdt)[:, :, None]
        lp = torch.zeros((T * (levels + 1), k), dtype=cdt, device=dev)
        lp = lp.index_add_(0, slot, rows.reshape(T * n, k)).view(T, levels + 1, k)
        lp = lp[:, :levels].to(wide)  # passers per level; the spare slot is not a level
        P = lp.sum(dim=1).to(f64)
        # x: in the rows' buffer when they are B converted (no longer needed, and
        # already paged in: a fresh tensor of this size costs page faults on the CPU)
        out = None
        if rows is Bc and rows.dtype == wide and B.dtype != wide:  # Bc is a copy
            out = rows.view(-1)[: T * levels * k].view(T, levels, k)
        x = torch.add(lp, shift[:, :, None], out=out)
        x[:, 1:].addcmul_(adjacent[:, 1:, None], lp[:, :-1])
        twice = x.mul_(lp).sum(dim=1).to(f64)  # 2 wins + ties + P**2, exact
        pairs = P * (total - P)
        value_k = (twice - P * P) * 0.5 / pairs
        L[:, a:b] = torch.where(pairs > 0, value_k, math.nan)
        passers_out[:, a:b] = P.to(torch.int64)
    return L, passers_out


def loo_auc(
    B: torch.Tensor,
    weights: torch.Tensor | None,
    tie_tol: float,
    counts: torch.Tensor | None = None,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> torch.Tensor:
    """LOO-AUC of every test, float64 (m,) on ``B.device``; ``nan`` for constant tests.

    Parameters
    ----------
    B : uint8 tensor (n, m) of 0/1.
    weights : float64 tensor (m,) or None
        None means uniform integer weights (:func:`loo_auc_uniform`). Float
        weights tie within ``tie_tol * sum(w)``.
    counts : int64 tensor (n,), optional
        Row multiplicities (0 = absent row).

    Method (float weights): rows with equal scores share every comparison, so
    candidates are grouped by their distinct score values ``u``: one sort, and a
    table of n slots (unused ones score ``+inf``, after every real score). For
    a chunk of k tests, one ``index_add`` gives the (n, k) passer
    multiplicities per score group; the failers are the rest of each group,
    and their prefix sums over the sorted groups form an (n + 1, k) table. A
    passer group's shifted score ``u - w_j`` (+/- the tolerance) is located
    among the ``u`` with ``searchsorted``; the table entries there count the
    failers strictly below and at-or-below it. The comparisons are the NumPy
    reference's and the counts exact integers (int32 when they cannot
    overflow, else int64), so the values equal the reference bit for bit.
    O(n log n + n m log n) time, O(chunk_elements) extra memory; no (n, n)
    tensor and no host read.
    """
    n, m = B.shape
    dev = B.device
    if weights is None:
        L, _ = loo_auc_uniform(
            B[None], None, None if counts is None else counts[None], chunk_elements
        )
        return L[0]
    out = torch.full((m,), math.nan, dtype=torch.float64, device=dev)
    if m == 0:
        return out
    # every count and every passer x failer product below is at most (sum of counts)**2
    idt = torch.int32 if counts is None and n * n < 2**31 else torch.int64
    c = torch.ones(n, dtype=idt, device=dev) if counts is None else counts.to(device=dev, dtype=idt)
    w = weights.to(device=dev, dtype=torch.float64)
    s = B.to(torch.float64) @ w
    tol = tie_tol * w.sum()
    sv, perm = torch.sort(s)
    sorted_group, first = _sorted_groups(sv, torch.ones_like(sv, dtype=torch.bool), n)
    group = torch.empty_like(sorted_group).scatter_(0, perm, sorted_group)
    u = torch.full((n + 1,), math.inf, dtype=torch.float64, device=dev)
    u = u.scatter_(0, torch.where(first, sorted_group, n), sv)[:n].contiguous()
    group_size = torch.zeros(n, dtype=idt, device=dev).index_add_(0, group, c)
    for a, b in column_chunks(m, n, chunk_elements):
        passers = torch.zeros((n, b - a), dtype=idt, device=dev).index_add_(
            0, group, B[:, a:b].to(idt) * c[:, None]
        )
        prefix = torch.zeros((n + 1, b - a), dtype=idt, device=dev)
        torch.cumsum(group_size[:, None] - passers, dim=0, out=prefix[1:])
        q = u[:, None] - w[None, a:b]
        q_hi = q + tol
        q_lo = q.sub_(tol)  # in place: (u - w) - tol, the reference's rounding order
        below = prefix.gather(0, torch.searchsorted(u, q_lo, side="left"))
        at_or_below = prefix.gather(0, torch.searchsorted(u, q_hi, side="right"))
        wins = (passers * below).sum(dim=0, dtype=idt)
        ties = (passers * (at_or_below - below)).sum(dim=0, dtype=idt)
        pairs = passers.sum(dim=0, dtype=torch.int64) * prefix[n].to(torch.int64)
        value = (wins.to(torch.float64) + 0.5 * ties.to(torch.float64)) / pairs.to(torch.float64)
        out[a:b] = torch.where(pairs > 0, value, out[a:b])
    return out
