"""LOO-AUC kernels (docs/contract.rst §2), never an (n, m) matrix of scores.

* uniform weights: integer row sums, counting sort, then rows streamed level by
  level with all inner loops over a block of columns -- O(n m), integer counts;
* float weights: one stable sort of ``s = B w`` (done by the caller), then per
  column a two-pointer merge over the sorted order -- O(n log n + n m).

Column loops exist as a serial build and a ``parallel=True`` (prange) build
(``loo_blocks``/``loo_blocks_parallel``); both run the same per-column code
over the same fixed column blocks, so their results are identical bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._constants import NARROW_MAX_TOTAL  # uint16 lanes up to this total
from ._jit import _jit, _serial_and_parallel
from .dedup import row_sums_and_reps


@_jit()
def _auc_value(wins, ties, P, F):
    if P <= 0 or F <= 0:
        return np.nan
    # integers below 2^53 are exact, so this single rounding of (wins + ties/2)/(P F)
    # gives the same bits as every other backend
    return (2.0 * wins + ties) / (2.0 * P * F)


@_jit()
def _uniform_block(B, cnt, row_of, lstart, lval, ltot, j0, j1, pcur, pprev, acc, ptot, out, colsum):
    """Uniform-weight LOO-AUC of columns [j0, j1) by streaming rows level by level.

    Rows come grouped by ascending integer score ``lval[k]`` (level k holds
    ``row_of[lstart[k]:lstart[k+1]]`` with total multiplicity ``ltot[k]``). A
    passer at score v has leave-one-out score v - 1: it beats the failers at
    score <= v - 2 and ties those at v - 1. Writing the failers as all rows
    minus the passers, with p_k the column's passers at level k, C(t) / N(t)
    all rows at score <= t / == t and prev_k = p_{k-1} when level k - 1 has
    score v_k - 1 (else 0):
        2 wins + ties = sum_k p_k (a_k + p_k + prev_k) - P^2,
        a_k = 2 C(v_k - 2) + N(v_k - 1),  P = sum_k p_k
    (passer pairs at distance >= 2 and at distance 1 cancel out), so a level
    costs one multiply-add per column on top of counting its passers.

    Scratch (length >= j1 - j0): ``pcur``/``pprev`` int32, ``acc``/``ptot``
    int64 or uint32 (uint32 only when the total multiplicity is below 2^16:
    sums run modulo 2^32 and the true 2 wins + ties <= ntot^2 / 2 comes out
    exactly; int64 wraps modulo 2^64 likewise); or all four uint16 while the
    total multiplicity is at most :data:`NARROW_MAX_TOTAL` (sums modulo 2^16).
    ``colsum`` (m,) int64 gets P per column when it is non-empty.
    O(n (j1 - j0)), integer counts.
    """
    bw = j1 - j0
    for jj in range(bw):
        acc[jj] = 0
        ptot[jj] = 0
        pprev[jj] = 0
    total = np.int64(0)  # all rows below the current level
    nlev = lval.shape[0]
    for k in range(nlev):
        rbeg = lstart[k]
        rend = lstart[k + 1]
        adjacent = k > 0 and lval[k - 1] == lval[k] - 1
        below = ltot[k - 1] if adjacent else np.int64(0)
        a = 2 * (total - below) + below
        total += ltot[k]
        for jj in range(bw):
            pcur[jj] = 0
        for r in range(rbeg, rend):
            i = row_of[r]
            ci = cnt[i]
            row = B[i, j0:j1]
            if ci == 1:  # no multiply in the widest loop
                for jj in range(bw):
                    pcur[jj] += row[jj] != 0
            else:
                for jj in range(bw):
                    pcur[jj] += ci * (row[jj] != 0)
        up = np.int32(1) if adjacent else np.int32(0)
        for jj in range(bw):
            p = pcur[jj]
            # int64 arithmetic stored into acc's type: modulo 2^32 for uint32
            acc[jj] += p * (a + p + up * pprev[jj])
            ptot[jj] += p
        pcur, pprev = pprev, pcur
    for jj in range(bw):
        P = np.int64(ptot[jj])
        twice = np.int64(acc[jj]) - P * P
        if acc.itemsize == 4:
            twice &= 0xFFFFFFFF
        elif acc.itemsize == 2:
            twice &= 0xFFFF
        out[j0 + jj] = _auc_value2(twice, P, total - P)
    if colsum.shape[0] > 0:
        for jj in range(bw):
            colsum[j0 + jj] = np.int64(ptot[jj])


@_jit()
def _auc_value2(twice, P, F):
    if P <= 0 or F <= 0:
        return np.nan
    return twice / (2.0 * P * F)


@_jit()
def _merge_over_failers(ppos, npass, fpos, nfail, ss, cs, wj, tol, keys, cum):
    """(wins, ties) of one column, walking the passers and a pointer into the failers.

    A passer at sorted position r has leave-one-out score ``x = ss[r] - wj``; a
    failer with score y is a win when ``y < x - tol`` and a tie when
    ``x - tol <= y <= x + tol``. x grows with r, so the pointer only moves forward.
    """
    acc = np.int64(0)
    for k in range(nfail):
        r = fpos[k]
        keys[k] = ss[r]
        cum[k] = acc
        acc += cs[r]
    keys[nfail] = np.inf  # sentinel: the pointer loops need no bounds test
    cum[nfail] = acc
    lo = 0
    hi = 0
    wins = np.int64(0)
    ties = np.int64(0)
    for q in range(npass):
        r = ppos[q]
        x = ss[r] - wj
        below = x - tol
        above = x + tol
        while keys[lo] < below:
            lo += 1
        # ties are rare: starting from lo this loop usually stops at once
        hi = max(hi, lo)
        while keys[hi] <= above:
            hi += 1
        wins += cs[r] * cum[lo]
        ties += cs[r] * (cum[hi] - cum[lo])
    return wins, ties


@_jit()
def _merge_over_passers(ppos, npass, fpos, nfail, ss, cs, wj, tol, klo, khi, cum):
    """(wins, ties) of one column, walking the failers and a pointer into the passers.

    Same predicates as :func:`_merge_over_failers` (``y < x - tol`` wins,
    ``x - tol <= y <= x + tol`` ties), counted from the failers' side: used when
    they are fewer, since the cost is mostly one unpredictable branch per
    element of the walked side.
    """
    acc = np.int64(0)
    for q in range(npass):
        r = ppos[q]
        x = ss[r] - wj
        klo[q] = x - tol
        khi[q] = x + tol
        cum[q] = acc
        acc += cs[r]
    klo[npass] = np.inf
    cum[npass] = acc
    P = acc
    u = 0  # passers with x - tol <= y: the failer is not below them
    v = 0  # passers with x + tol < y: the failer is above them
    wins = np.int64(0)
    ties = np.int64(0)
    for k in range(nfail):
        r = fpos[k]
        y = ss[r]
        while klo[u] <= y:
            u += 1
        # v <= u, usually v == u (no tie): step back from u instead of forward
        lower = v
        v = u
        while v > lower and khi[v - 1] >= y:
            v -= 1
        wins += cs[r] * (P - cum[u])
        ties += cs[r] * (cum[u] - cum[v])
    return wins, ties


@_jit()
def _weighted_block(B, perm, ss, cs, w, tol, j0, j1, out):
    """Float-weight LOO-AUC of columns [j0, j1): a two-pointer merge per column.

    ``perm`` lists the kept rows in ascending score order, ``ss``/``cs`` their
    scores and multiplicities. The block is first copied to a transposed tile
    so each column is contiguous. Per column: split the sorted order into
    passers and failers, then merge walking the smaller side. O(n (j1 - j0)).
    """
    n = B.shape[0]
    ne = perm.shape[0]
    bw = j1 - j0
    tile = np.empty((bw, n), dtype=np.uint8)
    for i in range(n):
        for jj in range(bw):
            tile[jj, i] = B[i, j0 + jj]
    ppos = np.empty(ne, dtype=np.int64)
    fpos = np.empty(ne, dtype=np.int64)
    klo = np.empty(ne + 1)
    khi = np.empty(ne + 1)
    cum = np.empty(ne + 1, dtype=np.int64)
    for jj in range(bw):
        col = tile[jj]
        # np.int64(0), not 0: a literal 0 reaching a jitted call makes numba
        # compile an extra specialization for it
        npass = np.int64(0)
        nfail = np.int64(0)
        P = np.int64(0)
        F = np.int64(0)
        for r in range(ne):
            bit = np.int64(col[perm[r]] != 0)
            c = cs[r]
            # branch-free split of the sorted order
            ppos[npass] = r
            fpos[nfail] = r
            npass += bit
            nfail += 1 - bit
            P += bit * c
            F += (1 - bit) * c
        if npass == 0 or nfail == 0:
            out[j0 + jj] = np.nan
            continue
        wj = w[j0 + jj]
        if npass <= nfail:
            wins, ties = _merge_over_failers(ppos, npass, fpos, nfail, ss, cs, wj, tol, klo, cum)
        else:
            wins, ties = _merge_over_passers(
                ppos, npass, fpos, nfail, ss, cs, wj, tol, klo, khi, cum
            )
        out[j0 + jj] = _auc_value(wins, ties, P, F)


def _loo_blocks(
    B, uniform, cnt, row_of, lstart, lval, ltot, perm, ss, cs, w, tol, width, out, colsum
):
    """LOO-AUC of every column into ``out`` (float64 (m,)), ``width`` columns per block.

    Uniform (``row_of``.. from :func:`levels_by_count`): rows streamed level by
    level, O(n m); ``colsum`` (int64 (m,), or empty) gets each column's
    count-weighted passers. Weighted (``perm``: kept rows in stable ascending
    order of ``s = B w``, ``ss = s[perm]``, ``cs = cnt[perm]``, ``tol = tie_tol *
    sum(w)``): a two-pointer merge per column, O(n m). Each column's value is
    computed independently of the blocking, so ``width`` only tunes speed.
    """
    m = B.shape[1]
    nb = (m + width - 1) // width
    ntot = np.int64(0)
    for k in range(ltot.shape[0]):
        ntot += ltot[k]
    for b in prange(nb):
        j0 = b * width
        j1 = min(j0 + width, m)
        if uniform:
            bw = j1 - j0
            if ntot <= NARROW_MAX_TOTAL:
                # uint16 lanes throughout, the counts too (a level's passers <= ntot):
                # four times the int64 width
                _uniform_block(
                    B,
                    cnt,
                    row_of,
                    lstart,
                    lval,
                    ltot,
                    j0,
                    j1,
                    np.empty(bw, dtype=np.uint16),
                    np.empty(bw, dtype=np.uint16),
                    np.empty(bw, dtype=np.uint16),
                    np.empty(bw, dtype=np.uint16),
                    out,
                    colsum,
                )
            elif ntot < (1 << 16):  # 2 wins + ties < 2^31: uint32 lanes, twice the SIMD width
                _uniform_block(
                    B,
                    cnt,
                    row_of,
                    lstart,
                    lval,
                    ltot,
                    j0,
                    j1,
                    np.empty(bw, dtype=np.int32),
                    np.empty(bw, dtype=np.int32),
                    np.empty(bw, dtype=np.uint32),
                    np.empty(bw, dtype=np.uint32),
                    out,
                    colsum,
                )
            else:
                _uniform_block(
                    B,
                    cnt,
                    row_of,
                    lstart,
                    lval,
                    ltot,
                    j0,
                    j1,
                    np.empty(bw, dtype=np.int32),
                    np.empty(bw, dtype=np.int32),
                    np.empty(bw, dtype=np.int64),
                    np.empty(bw, dtype=np.int64),
                    out,
                    colsum,
                )
        else:
            _weighted_block(B, perm, ss, cs, w, tol, j0, j1, out)


loo_blocks, loo_blocks_parallel = _serial_and_parallel(_loo_blocks)


@_jit()
def levels_by_count(rs, cnt, m):
    """Counting sort of the rows with ``cnt > 0`` by integer score ``rs`` in [0, m].

    Returns ``(row_of, lstart, lval, ltot)``: the kept rows grouped by ascending
    score; level k holds ``row_of[lstart[k]:lstart[k+1]]``, has score ``lval[k]``
    and total multiplicity ``ltot[k]``. O(n + m).
    """
    n = rs.shape[0]
    start = np.zeros(m + 2, dtype=np.int64)
    htot = np.zeros(m + 1, dtype=np.int64)
    for i in range(n):
        if cnt[i] > 0:
            start[rs[i] + 1] += 1
            htot[rs[i]] += cnt[i]
    nlev = 0
    for v in range(m + 1):
        nlev += start[v + 1] > 0
        start[v + 1] += start[v]
    row_of = np.empty(start[m + 1], dtype=np.int64)
    pos = start.copy()
    for i in range(n):
        if cnt[i] > 0:
            row_of[pos[rs[i]]] = i
            pos[rs[i]] += 1
    lstart = np.empty(nlev + 1, dtype=np.int64)
    lval = np.empty(nlev, dtype=np.int64)
    ltot = np.empty(nlev, dtype=np.int64)
    k = 0
    for v in range(m + 1):
        if start[v + 1] > start[v]:
            lstart[k] = start[v]
            lval[k] = v
            ltot[k] = htot[v]
            k += 1
    lstart[nlev] = start[m + 1]
    return row_of, lstart, lval, ltot


#: Identical rows are merged into counts before the uniform LOO-AUC from this
#: many rows and cells on (below, hashing costs more than it saves).
DEDUP_MIN_ROWS = 8
DEDUP_MIN_CELLS = 4096


@_jit()
def uniform_loo_auc(B, cnt, out, colsum, rep):
    """Uniform-weight LOO-AUC of every column into ``out`` (float64 (m,); ``nan`` if
    constant), serially, with row multiplicities ``cnt`` (int64 (n,)); ``colsum``
    (int64 (m,) or empty) gets the count-weighted passers per column. Merges
    identical rows first on large enough inputs: ``rep`` (int64 (n,)) gets the
    representative identical row of every row (see :func:`row_sums_and_reps`).
    Returns whether any row was merged (else ``rep[i] = i``). O(n m)."""
    n, m = B.shape
    dedup = n >= DEDUP_MIN_ROWS and n * m >= DEDUP_MIN_CELLS
    rs, c, r = row_sums_and_reps(B, cnt, dedup)
    row_of, lstart, lval, ltot = levels_by_count(rs, c, m)
    ei = np.empty(0, dtype=np.int64)
    ef = np.empty(0)
    # np.bool_/np.int64 and not literals: a literal argument makes numba compile
    # (and optimize) a separate specialization of the callee
    loo_blocks(
        B,
        np.bool_(True),
        c,
        row_of,
        lstart,
        lval,
        ltot,
        ei,
        ef,
        ei,
        ef,
        0.0,
        np.int64(256),
        out,
        colsum,
    )
    merged = False
    for i in range(n):
        rep[i] = r[i]
        merged |= r[i] != i
    return merged
