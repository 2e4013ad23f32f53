"""LOO-AUC of every test with exact integer counting: per task, and the uniform
LOO-AUC of a zero-padded batch of tasks."""

from __future__ import annotations

import math

import torch

from .chunks import DEFAULT_CHUNK_ELEMENTS, column_chunks


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
        None means uniform integer weights: scores are int64 row sums and ties
        are exact equality. Float weights tie within ``tie_tol * sum(w)``.
    counts : int64 tensor (n,), optional
        Row multiplicities (0 = absent row).

    Method: rows with equal scores share every comparison, so candidates are
    grouped by their distinct score values ``u`` (one sort; V <= n groups, and
    V <= m + 1 under uniform weights). For a chunk of k tests, one
    ``index_add`` gives the (V, k) passer multiplicities per score group; the
    failers are the rest of each group, and their prefix sums over the sorted
    groups form a (V + 1, k) table. A passer group's shifted score
    ``u - w_j`` (+/- the tolerance) is located among the ``u`` with
    ``searchsorted``; the table entries there count the failers strictly below
    and at-or-below it. Under uniform weights the shift is 1 for every test, so
    the positions are one (V,) vector shared by all tests. The comparisons are
    the NumPy reference's and the counts exact integers (int32 when they cannot
    overflow, else int64), so the values equal the reference bit for bit.
    O(n log n + n m + V m log V) time, O(chunk_elements) extra memory; no
    (n, n) tensor.
    """
    n, m = B.shape
    dev = B.device
    out = torch.full((m,), math.nan, dtype=torch.float64, device=dev)
    if m == 0:
        return out
    c = (
        torch.ones(n, dtype=torch.int64, device=dev)
        if counts is None
        else counts.to(device=dev, dtype=torch.int64)
    )
    total = n if counts is None else int(c.sum())
    # every count and every passer x failer product below is at most total**2
    idt = torch.int32 if total * total < 2**31 else torch.int64
    if weights is None:
        s = B.sum(dim=1, dtype=torch.int64)
    else:
        w = weights.to(device=dev, dtype=torch.float64)
        s = B.to(torch.float64) @ w
        tol = tie_tol * float(w.sum())
    u, group = torch.unique(s, sorted=True, return_inverse=True)
    V = u.shape[0]
    c = c.to(idt)
    group_size = torch.zeros(V, dtype=idt, device=dev).index_add_(0, group, c)
    if weights is None:
        lo_shared = torch.searchsorted(u, u - 1, side="left")
        hi_shared = torch.searchsorted(u, u - 1, side="right")
    for a, b in column_chunks(m, n, chunk_elements):
        passers = torch.zeros((V, b - a), dtype=idt, device=dev).index_add_(
            0, group, B[:, a:b].to(idt) * c[:, None]
        )
        prefix = torch.zeros((V + 1, b - a), dtype=idt, device=dev)
        torch.cumsum(group_size[:, None] - passers, dim=0, out=prefix[1:])
        if weights is None:
            below = prefix.index_select(0, lo_shared)
            at_or_below = prefix.index_select(0, hi_shared)
        else:
            q = u[:, None] - w[None, a:b]
            q_hi = q + tol
            q_lo = q.sub_(tol)  # in place: (u - w) - tol, the reference's rounding order
            below = prefix.gather(0, torch.searchsorted(u, q_lo, side="left"))
            at_or_below = prefix.gather(0, torch.searchsorted(u, q_hi, side="right"))
        wins = (passers * below).sum(dim=0, dtype=idt)
        ties = (passers * (at_or_below - below)).sum(dim=0, dtype=idt)
        pairs = passers.sum(dim=0, dtype=torch.int64) * prefix[V].to(torch.int64)
        value = (wins.to(torch.float64) + 0.5 * ties.to(torch.float64)) / pairs.to(torch.float64)
        out[a:b] = torch.where(pairs > 0, value, out[a:b])
    return out


def _count_dtype(*bounds: int) -> torch.dtype:
    """float32 when every count stays below 2**24 (exact there; torch's float
    reductions are several times faster than its integer ones), else float64."""
    return torch.float32 if max(bounds) < 2**24 else torch.float64


def loo_auc_uniform_padded(
    B: torch.Tensor, n_rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
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
        return (
            torch.full((T, m), math.nan, dtype=f64, device=dev),
            torch.zeros((T, m), dtype=torch.int64, device=dev),
        )
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
    level_passers = lp.reshape(T, levels + 1, m)  # spare slot: 0 passers
    level_failers = size[:, :, None] - level_passers  # spare slot: 0 (size 0)
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
