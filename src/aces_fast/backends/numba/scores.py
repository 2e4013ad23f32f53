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
def max_byte(B):
    """The largest entry of C-contiguous uint8 (n, m) ``B`` (0 when empty), int64.
    One flat loop with a select (it vectorizes; ``max()`` per row does not). O(n m)."""
    x = B.reshape(-1)
    top = np.uint8(0)
    for k in range(x.shape[0]):
        v = x[k]
        top = v if v > top else top
    return np.int64(top)


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

    Rows go in groups of 64, one lane each: the group's passes are packed into a
    word per column (:func:`pack_group`), then every column adds ``w_j`` or
    ``+0.0`` to each lane (:func:`add_group`, a loop over the 64 lanes that
    vectorizes). Each lane is still one sequential sum in ascending column order
    of the very terms of the scalar loop (``w_j`` where ``B_ij != 0``, else
    ``+0.0``; a select, no multiply), so the bits are those of a scalar loop per
    row, whatever the vector width or the lane. O(n m).
    """
    n = idx.shape[0]
    m = B.shape[1]
    bits = np.empty(m, dtype=np.uint64)
    acc = np.empty(64)
    s = np.zeros(n)
    for g in range(0, n, 64):
        k = min(64, n - g)
        pack_group(B, idx, g, k, bits)
        add_group(bits, w, m, acc)
        for l in range(k):
            s[g + l] = acc[l]
    return s


@_jit()
def pack_group(B, idx, g, k, bits):
    """``bits[j]`` (uint64, j < m) = the passes of rows ``idx[g:g+k]`` (k <= 64) at
    column j, bit l for row ``idx[g+l]``; higher bits 0. O(k m)."""
    m = B.shape[1]
    one = np.uint64(1)
    for j in range(m):
        bits[j] = 0
    k4 = k - k % 4
    for l in range(0, k4, 4):  # four rows per pass over the words
        r0 = B[idx[g + l]]
        r1 = B[idx[g + l + 1]]
        r2 = B[idx[g + l + 2]]
        r3 = B[idx[g + l + 3]]
        sh = np.uint64(l)
        for j in range(m):
            x = (
                np.uint64(r0[j] != 0)
                | (np.uint64(r1[j] != 0) << one)
                | (np.uint64(r2[j] != 0) << np.uint64(2))
                | (np.uint64(r3[j] != 0) << np.uint64(3))
            )
            bits[j] |= x << sh
    for l in range(k4, k):
        row = B[idx[g + l]]
        sh = np.uint64(l)
        for j in range(m):
            bits[j] |= np.uint64(row[j] != 0) << sh


@_jit()
def add_group(bits, w, m, acc):
    """``acc[l]`` (float64 (64,)) = the ascending sum over j < m of ``w_j`` where bit
    l of ``bits[j]`` is set, else ``+0.0`` -- row l's score of a packed group
    (:func:`pack_group`). All 64 lanes: a fixed count unrolls into whole vectors.
    O(64 m)."""
    one = np.uint64(1)
    for l in range(64):
        acc[l] = 0.0
    m2 = m - m % 2
    for j in range(0, m2, 2):  # two columns per pass over the lanes, in order
        c0 = bits[j]
        c1 = bits[j + 1]
        w0 = w[j]
        w1 = w[j + 1]
        for l in range(64):
            sh = np.uint64(l)
            acc[l] = (acc[l] + (w0 if (c0 >> sh) & one else 0.0)) + (
                w1 if (c1 >> sh) & one else 0.0
            )
    if m2 < m:
        c0 = bits[m2]
        w0 = w[m2]
        for l in range(64):
            acc[l] += w0 if (c0 >> np.uint64(l)) & one else 0.0


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
