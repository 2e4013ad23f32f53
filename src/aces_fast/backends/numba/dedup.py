"""Identical rows: a stable sort of rows, distinct rows with counts, and hashing
rows into representatives (csrc/kernels/dedup.cpp's counterparts)."""

from __future__ import annotations

import numpy as np
from numba.core.extending import overload

from ._jit import _copy, _jit


def _before(data, a, b):
    """Whether item a of ``data`` sorts strictly before item b: 1-D keys by value,
    2-D rows lexicographically (column 0 most significant). Jitted code only."""
    raise TypeError("_before runs only inside numba-compiled code")


@overload(_before)
def _before_typed(data, a, b):
    # chosen while typing, per array type: one sort serves keys and rows
    if data.ndim == 1:

        def key_before(data, a, b):
            return data[a] < data[b]

        return key_before

    def row_before(data, a, b):
        for j in range(data.shape[1]):
            if data[a, j] != data[b, j]:
                return data[a, j] < data[b, j]
        return False

    return row_before


@_jit()
def stable_order(data):
    """Indices sorting the items of ``data`` ascending, equal items by lower index:
    float64 keys (n,) by value (``np.argsort(kind="stable")`` for non-nan keys),
    or the rows of a (n, m) array lexicographically. A bottom-up merge sort,
    O(n log n) comparisons."""
    n = data.shape[0]
    a = np.arange(n)
    b = np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            for k in range(lo, hi):
                # the right run's head goes first only when strictly before: stable
                if j < hi and (i >= mid or _before(data, a[j], a[i])):
                    b[k] = a[j]
                    j += 1
                else:
                    b[k] = a[i]
                    i += 1
        a, b = b, a
        width *= 2
    return a


@_jit()
def _rows_equal(B, a, b):
    for j in range(B.shape[1]):
        if B[a, j] != B[b, j]:
            return False
    return True


@_jit()
def _merge_identical(B, cnt):
    """Rows of ``B`` merged with ``cnt`` (all > 0); see :func:`distinct_rows`."""
    n, m = B.shape
    if n < 2:
        return B, cnt
    if m == 0:
        return B[:1].copy(), np.full(1, cnt.sum(), dtype=np.int64)
    perm = stable_order(B)
    u = 1
    for r in range(1, n):
        u += not _rows_equal(B, perm[r], perm[r - 1])
    if u == n:
        return B, cnt
    rows = np.empty((u, m), dtype=np.uint8)
    counts = np.zeros(u, dtype=np.int64)
    k = -1
    for r in range(n):
        if r == 0 or not _rows_equal(B, perm[r], perm[r - 1]):
            k += 1
            _copy(rows[k], B[perm[r]])
        counts[k] += cnt[perm[r]]
    return rows, counts


@_jit()
def distinct_rows(B, cnt):
    """Drop the rows of ``B`` uint8 (n, m) with count 0 and merge identical rows,
    adding their counts (``cnt`` int64 (n,)): returns ``(rows, counts int64)``.

    A row with count c stands for c identical rows, so this changes no value of
    the surrogate (beyond rounding) while its pair work is quadratic in the
    rows. Returns the inputs themselves when there is nothing to drop or merge;
    merged rows come in ascending lexicographic order (as ``np.unique(B,
    axis=0)`` sorts them); with no tests, one empty row counting all.
    O(n m log n).
    """
    n, m = B.shape
    kept = 0
    for i in range(n):
        kept += cnt[i] > 0
    if kept == n:
        return _merge_identical(B, cnt)
    Bk = np.empty((kept, m), dtype=np.uint8)
    ck = np.empty(kept, dtype=np.int64)
    k = 0
    for i in range(n):
        if cnt[i] > 0:
            _copy(Bk[k], B[i])
            ck[k] = cnt[i]
            k += 1
    return _merge_identical(Bk, ck)


@_jit()
def _same_passes(B, a, b):
    """Whether rows a and b pass the same tests: no early exit, so it vectorizes
    (a hash match almost always means equal rows)."""
    d = np.int64(0)
    for j in range(B.shape[1]):
        d += (B[a, j] != 0) != (B[b, j] != 0)
    return d == 0


@_jit()
def row_sums_and_reps(B, cnt, dedup):
    """Integer row sums and, when ``dedup``, identical rows merged into counts.

    Returns ``(rs int64 (n,), c int64 (n,), rep int64 (n,))``: ``c`` is ``cnt``
    with each kept row's count added to the first identical kept row (its
    representative, ``rep[i]``) and zeroed on the others; without ``dedup``,
    ``c`` is ``cnt`` itself and ``rep[i] = i``. Rows are hashed by a sum of
    per-column random words over their passes (one vectorized pass that also
    gives the row sums) into an open-addressing table; equal hashes are
    confirmed by comparing the rows. O(n m) expected.
    """
    n, m = B.shape
    rs = np.empty(n, dtype=np.int64)
    rep = np.arange(n)
    if not dedup:
        for i in range(n):
            acc = np.int64(0)
            for j in range(m):
                acc += B[i, j] != 0
            rs[i] = acc
        return rs, cnt, rep
    R = np.empty(m, dtype=np.int64)
    for j in range(m):
        # int64 arithmetic wraps: a multiplicative mix of the column index
        x = (j + 1) * np.int64(-7046029254386353131)
        x ^= x >> 29
        R[j] = x * np.int64(-4658895280553007687)
    hsh = np.empty(n, dtype=np.int64)
    for i in range(n):
        acc = np.int64(0)
        h = np.int64(0)
        for j in range(m):
            b = np.int64(B[i, j] != 0)
            acc += b
            h += R[j] & -b
        rs[i] = acc
        hsh[i] = h ^ (h >> 31)
    size = 1
    while size < 2 * n:
        size *= 2
    table = np.full(size, -1, dtype=np.int64)
    c = cnt.copy()
    for i in range(n):
        if cnt[i] <= 0:
            continue
        slot = hsh[i] & (size - 1)
        while True:
            t = table[slot]
            if t < 0:
                table[slot] = i
                break
            if hsh[t] == hsh[i] and rs[t] == rs[i] and _same_passes(B, t, i):
                rep[i] = t
                c[t] += cnt[i]
                c[i] = 0
                break
            slot = (slot + 1) & (size - 1)
    return rs, c, rep
