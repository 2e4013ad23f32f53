"""Identical rows: distinct rows with their sizes (per task) or multiplicities (a
padded batch), and evaluating a function once per distinct key."""

from __future__ import annotations

from collections.abc import Callable

import torch


def row_groups(B: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Distinct rows: ``(patterns (U, m), inverse (n,), sizes (U,))`` like consensus.row_groups."""
    if B.shape[1] == 0:
        n = B.shape[0]
        return (
            B[:1],
            torch.zeros(n, dtype=torch.int64, device=B.device),
            torch.tensor([n], dtype=torch.int64, device=B.device),
        )
    patterns, inverse, sizes = torch.unique(B, dim=0, return_inverse=True, return_counts=True)
    return patterns, inverse.reshape(-1), sizes


def by_distinct_keys(fn: Callable[..., torch.Tensor], *keys: torch.Tensor) -> torch.Tensor:
    """``fn(*keys)`` evaluated once per distinct key tuple (int64 columns (K,)),
    gathered back to (K,).

    Evaluating each distinct key once makes sets with equal keys get bit-equal
    scores, whatever code path (vectorized or scalar) an elementwise op takes.
    """
    uniq, inv = torch.unique(torch.stack(keys, dim=1), dim=0, return_inverse=True)
    return fn(*uniq.unbind(dim=1))[inv.reshape(-1)]


#: bits of a row packed into one int64 sort key by :func:`distinct_rows_padded`
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
    lexicographic order as ``torch.unique(dim=0)`` gives them to the per-task
    path (:class:`SurrogateData`), then zero rows with count 0 (U the largest
    ``distinct[t]``). Each row is packed into ``ceil(m / 62)`` exact int64
    keys, first column most significant; one stable sort per key word (least
    significant first) orders the rows lexicographically, so equal rows are
    adjacent. O(T K m + (m / 62) T K log K) time, O(T K m) memory; one host
    sync (``distinct``).
    """
    T, K, m = Bk.shape
    dev = Bk.device
    words = max(1, -(-m // _KEY_BITS))
    bits = torch.zeros((T, K, words * _KEY_BITS), dtype=torch.int64, device=dev)
    bits[:, :, :m] = Bk
    powers = torch.pow(2, torch.arange(_KEY_BITS - 1, -1, -1, dtype=torch.int64, device=dev))
    keys = (bits.view(T, K, words, _KEY_BITS) * powers).sum(dim=3)  # < 2**62: exact
    del bits
    perm = torch.arange(K, device=dev).expand(T, K)
    for word in range(words - 1, -1, -1):  # radix sort over the key words
        perm = perm.gather(
            1, torch.sort(keys[:, :, word].gather(1, perm), dim=1, stable=True).indices
        )
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
