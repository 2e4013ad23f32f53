"""Identical rows: distinct rows with their sizes (per task) or multiplicities (a
padded batch), and evaluating a function once per distinct key.

Grouping here never reads the device: equal rows (or key tuples) are found by
a lexicographic stable sort of exact int64 keys, and every table has a fixed
size (one slot per row) instead of ``torch.unique``'s data-dependent one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .chunks import DEFAULT_CHUNK_ELEMENTS


def row_keys(B: torch.Tensor, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS) -> torch.Tensor:
    """Each row of 0/1 matrices as exact int64 sort keys: B (..., n, m) -> int64
    (..., n, W), W = max(1, ceil(m / 62)).

    Word ``k`` holds columns ``62 k .. 62 k + 61``, the first most significant
    (< 2**62: exact), so rows compare lexicographically as their key tuples and
    equal rows have equal keys. Temporaries of at most about ``chunk_elements``
    int64 entries. O(rows m).
    """
    *lead, n, m = B.shape
    R = math.prod(lead) * n  # (reshape(-1, m) is ambiguous for m = 0)
    rows = B.reshape(R, m)
    words = max(1, -(-m // _KEY_BITS))
    powers = torch.pow(2, torch.arange(_KEY_BITS - 1, -1, -1, dtype=torch.int64, device=B.device))
    keys = torch.zeros((R, words), dtype=torch.int64, device=B.device)
    step = max(1, chunk_elements // max(1, R * _KEY_BITS))  # words per chunk
    for a in range(0, words, step):
        b = min(words, a + step)
        lo, hi = a * _KEY_BITS, min(m, b * _KEY_BITS)
        bits = torch.zeros((R, (b - a) * _KEY_BITS), dtype=torch.int64, device=B.device)
        bits[:, : hi - lo] = rows[:, lo:hi]
        keys[:, a:b] = (bits.view(R, b - a, _KEY_BITS) * powers).sum(dim=2)
    return keys.view(*lead, n, words)


def sorted_groups(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Equal key tuples made adjacent: ``(perm (..., K), new (..., K))`` for int64
    ``keys`` (..., K, W), every leading index on its own.

    ``perm`` orders the tuples lexicographically (first column most
    significant; ties by index), by one stable sort per column, least
    significant first; ``new[..., r]`` is True where ``keys[..., perm[r], :]``
    differs from the tuple before it (always at r = 0): it starts a group.
    Fixed shapes, no host read. O(W K log K) per leading index.
    """
    *lead, K, W = keys.shape
    perm = torch.arange(K, device=keys.device).expand(*lead, K)
    for w in range(W - 1, -1, -1):
        perm = perm.gather(-1, torch.sort(keys[..., w].gather(-1, perm), stable=True).indices)
    ordered = keys.gather(-2, perm[..., None].expand(*lead, K, W))
    new = torch.ones((*lead, K), dtype=torch.bool, device=keys.device)
    new[..., 1:] = (ordered[..., 1:, :] != ordered[..., :-1, :]).any(dim=-1)
    return perm, new


def row_groups(B: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Identical rows, in fixed shapes: ``(patterns (n, m), inverse (n,), sizes (n,))``.

    Unlike ``consensus.row_groups`` (which returns the U distinct rows), every
    row is its own representative: ``patterns`` is ``B``, ``inverse`` is
    ``0 .. n - 1`` and ``sizes[i]`` (int64) counts the rows equal to row ``i``.
    What CodeT and B4 compute per representative is then the same for equal
    rows, and the shapes do not depend on the data (no host read):
    :func:`row_keys`, :func:`sorted_groups`, and group sizes summed into a
    table of n slots. O(n m + (m / 62) n log n).
    """
    n = B.shape[0]
    perm, new = sorted_groups(row_keys(B))
    group = torch.cumsum(new, dim=0) - 1  # of each sorted row, < n
    ones = torch.ones(n, dtype=torch.int64, device=B.device)
    sizes = torch.zeros(n, dtype=torch.int64, device=B.device).index_add_(0, group, ones)
    sizes = torch.empty_like(sizes).scatter_(0, perm, sizes.gather(0, group))
    return B, torch.arange(n, device=B.device), sizes


def by_distinct_keys(fn: Callable[..., torch.Tensor], *keys: torch.Tensor) -> torch.Tensor:
    """``fn(*keys)`` (int64 columns (K,)) with equal key tuples given bit-equal results.

    An elementwise op can round the same input differently at different
    positions (vectorized body vs scalar tail), so ``fn`` runs on every key
    and each tuple takes the value computed at the first of its equals (in
    :func:`sorted_groups` order): sets with equal keys get bit-equal scores.
    Fixed shapes, no host read. O(len(keys) K log K).
    """
    K = keys[0].shape[0]
    perm, new = sorted_groups(torch.stack(keys, dim=1))
    first = torch.cummax(
        torch.where(new, torch.arange(K, device=perm.device), 0), dim=0
    ).values  # the sorted position starting each tuple's group
    leader = torch.empty_like(perm).scatter_(0, perm, perm.gather(0, first))
    return fn(*keys).gather(0, leader)


#: bits of a row packed into one int64 sort key by :func:`row_keys`
_KEY_BITS = 62


def distinct_rows_padded(
    Bk: torch.Tensor,
    valid: torch.Tensor,
    dtype: torch.dtype,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """The distinct rows among each task's rows, with multiplicities.

    ``Bk`` uint8 (T, K, m), ``valid`` bool (T, K): the rows that count (padding
    rows are zero rows that do not); ``weights`` (T, K): each valid row's
    multiplicity (default 1). Returns ``(Bu (T, U, m), counts (T, U), distinct)``: ``Bu`` and
    ``counts`` in ``dtype``, task t's ``distinct[t]`` distinct rows first, in
    lexicographic order (as ``torch.unique(dim=0)`` sorts them), then zero rows
    with count 0 (U the largest ``distinct[t]``). Each row is packed into ``ceil(m / 62)`` exact int64
    keys (:func:`row_keys`) and the rows ordered lexicographically
    (:func:`sorted_groups`), so equal rows are adjacent. O(T K m + (m / 62)
    T K log K) time, O(T K m) memory; one host sync (``distinct``).
    """
    T, K, m = Bk.shape
    dev = Bk.device
    keys = row_keys(Bk)  # (T, K, words)
    words = keys.shape[2]
    perm, _ = sorted_groups(keys)
    # padding rows (zero rows, sorted among the real zero rows) go last
    perm = perm.gather(
        1, torch.sort((~valid).gather(1, perm).to(torch.uint8), dim=1, stable=True).indices
    )
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
    mult = sorted_valid.to(dtype)
    if weights is not None:
        mult *= weights.gather(1, perm).to(dtype)
    counts = torch.zeros(T * (U + 1), dtype=dtype, device=dev).index_add_(
        0, slot.reshape(-1), mult.reshape(-1)
    )
    first = torch.where(new, pos, U) + base
    Bu = torch.zeros((T * (U + 1), m), dtype=dtype, device=dev).index_add_(
        0,
        first.reshape(-1),
        Bk.gather(1, perm[:, :, None].expand(T, K, m)).reshape(T * K, m).to(dtype),
    )
    return Bu.view(T, U + 1, m)[:, :U], counts.view(T, U + 1)[:, :U], distinct
