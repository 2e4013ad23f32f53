"""Row sums and scores ``B w`` of the numba backend, and its two rounding primitives.

Sums are plain ascending loops (no fastmath), so their rounding is fixed by the
code alone: :func:`ascending_sum` is the backend's ``sum``, :func:`row_scores`
sums each row in ascending test order (as the C++ core), and :func:`log` is the
C library's ``log`` per element.
"""

from __future__ import annotations

import numpy as np

from ._jit import _jit

@_jit()
def row_sums(B):
    """Integer row sums, int64 (n,). O(n m)."""
    n, m = B.shape
    rs = np.zeros(n, dtype=np.int64)
    for i in range(n):
        acc = np.int64(0)
        for j in range(m):
            acc += B[i, j] != 0
        rs[i] = acc
    return rs


@_jit()
def column_sums(B):
    """Integer column sums ``sum_i [B_ij != 0]``, int64 (m,), row by row (contiguous
    inner loop; NumPy's ``B.sum(axis=0, dtype=int64)`` on uint8 is several times
    slower). O(n m)."""
    n, m = B.shape
    cs = np.zeros(m, dtype=np.int64)
    for i in range(n):
        row = B[i]
        for j in range(m):
            cs[j] += row[j] != 0
    return cs


@_jit()
def row_scores(B, w):
    """``s_i = sum_j w_j [B_ij != 0]``, float64 (n,), summed in ascending j (as the C++ core).

    O(n m); see :func:`_row_scores_of`.
    """
    return _row_scores_of(B, w, np.arange(B.shape[0]))


@_jit()
def _row_scores_of(B, w, idx):
    """:func:`row_scores` of the rows ``idx`` (int64), float64 (len(idx),); each row's
    sum is the same ascending loop whatever the other rows.

    Each term is read from a table, ``W[j, 0] = +0.0`` and ``W[j, 1] = w_j``: the
    very values ``w_j * [B_ij != 0]`` the product gives (``w_j`` finite, as every
    validated weight), added in the same order: the same bits, at about half the
    instructions per cell (no int-to-float conversion, no multiply). Four rows at
    a time so four addition chains overlap. O(n m).
    """
    n = idx.shape[0]
    m = B.shape[1]
    W = np.zeros((m, 2))
    for j in range(m):
        W[j, 1] = w[j]
    s = np.zeros(n)
    n4 = n - n % 4
    for k in range(0, n4, 4):
        r0 = B[idx[k]]
        r1 = B[idx[k + 1]]
        r2 = B[idx[k + 2]]
        r3 = B[idx[k + 3]]
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        for j in range(m):
            a0 += W[j, np.int64(r0[j] != 0)]
            a1 += W[j, np.int64(r1[j] != 0)]
            a2 += W[j, np.int64(r2[j] != 0)]
            a3 += W[j, np.int64(r3[j] != 0)]
        s[k] = a0
        s[k + 1] = a1
        s[k + 2] = a2
        s[k + 3] = a3
    for k in range(n4, n):
        r = B[idx[k]]
        acc = 0.0
        for j in range(m):
            acc += W[j, np.int64(r[j] != 0)]
        s[k] = acc
    return s


@_jit()
def row_scores_rep(B, w, rep):
    """:func:`row_scores` computed for the rows with ``rep[i] == i`` only, copied to
    the others (``rep[i]`` is an identical row): the same bits, per row."""
    n = B.shape[0]
    own = 0
    for i in range(n):
        own += rep[i] == i
    if own == n:
        return row_scores(B, w)
    idx = np.empty(own, dtype=np.int64)
    k = 0
    for i in range(n):
        if rep[i] == i:
            idx[k] = i
            k += 1
    s = np.empty(n)
    sk = _row_scores_of(B, w, idx)
    for k in range(own):
        s[idx[k]] = sk[k]
    for i in range(n):
        s[i] = s[rep[i]]
    return s


@_jit()
def ascending_sum(x):
    """``x[0] + x[1] + ...`` in ascending order (float64). O(len(x))."""
    acc = 0.0
    for k in range(x.shape[0]):
        acc += x[k]
    return acc


@_jit()
def log(x):
    """Natural log of every entry of float64 ``x`` (the C library's ``log``)."""
    out = np.empty(x.shape[0])
    for k in range(x.shape[0]):
        out[k] = np.log(x[k])
    return out
