"""Numba kernels of the ``numba`` backend (SPEC sections 2-3).

Imported only by :mod:`aces_fast.backends.numba_backend` when the registry loads
that backend: this module imports numba at the top.

Conventions (the wrapper guarantees them):

* ``B`` is a C-contiguous ``uint8`` (n, m) array; nonzero means pass.
* ``cnt`` is int64 (n,): row multiplicities (``counts``, ones when absent); a
  row with count 0 is absent.
* column loops exist as a serial build and a ``parallel=True`` (prange) build
  (``loo_blocks``/``loo_blocks_parallel``; the ``parallel`` flag of
  ``surrogate`` and ``aces_o_fit``). Both run the same per-column code over
  the same fixed column blocks, so their results are identical bit for bit and
  do not depend on the number of threads.
* inputs are never written; the wrapper passes read-only arrays as writeable
  aliases, so every kernel has one signature per input dtype.

LOO-AUC (SPEC section 2), never an (n, m) matrix of scores:

* uniform weights: integer row sums, counting sort, then rows streamed level by
  level with all inner loops over a block of columns -- O(n m), integer counts;
* float weights: one stable sort of ``s = B w`` (done by the caller), then per
  column a two-pointer merge over the sorted order -- O(n log n + n m).

Surrogate (SPEC section 3): identical rows are merged into multiplicities
first, so pairs are over distinct rows, and ``exp(-z) = E_p F_f G_j`` (one
multiply, no exp; per-row tables E, F and one exp per test) while no factor can
overflow, a stable sigmoid beyond. Two kernels, chosen by a cost model:

* per column (``surrogate_bt``, on the transposed ``uint8`` copy of B): one
  sigmoid per (passer, failer) pair, the larger side in a vectorized inner loop
  -- for many distinct rows;
* by row pairs (``_surrogate_rows``): per unordered pair of rows, one
  contiguous, branch-free sweep over all columns -- for few distinct rows, as
  ACES-O's top_k rows, where the per-column loops are too short to vectorize.

Caching to disk is on only when ``ACES_FAST_NUMBA_CACHE=1`` (read at import):
an installed package may live on a read-only file system.
"""

from __future__ import annotations

import os
import types

import numpy as np
from numba import carray, njit, prange
from numba import types as nbtypes
from numba.core.extending import intrinsic, overload

CACHE = os.environ.get("ACES_FAST_NUMBA_CACHE", "") == "1"

#: exp(-gamma (s_p - s_f - w_j)) = E_p F_f G_j is used while gamma * (span of s +
#: w_j) stays below this, so no factor or product can overflow or underflow to 0.
FAST_SPAN_LIMIT = 600.0
#: The surrogate cuts the columns into fixed blocks, each with its own partial
#: ``v`` (gradient): at most MAX_BLOCKS, about one per BLOCK_CELLS cells of B
#: (fewer blocks = less overhead on small inputs), and at most
#: _MAX_VPART_DOUBLES partial-v doubles in all. Depends only on (n, m).
MAX_BLOCKS = 64
BLOCK_CELLS = 1 << 10
_MAX_VPART_DOUBLES = 1 << 23
#: Vector loops over doubles are zero-padded to a multiple of LANES (a multiple
#: of every vector width x unroll LLVM picks: 8 doubles x 4 with AVX-512), so
#: they never end in a scalar remainder: the inner rows of a column's pair loop,
#: the columns of the row-pair layout.
LANES = 32
#: Columns per block of the row-pair surrogate (a multiple of LANES). Blocks are
#: what its parallel build shares out; each is one sweep per row pair, so fewer,
#: wider blocks cost less per-sweep overhead.
ROW_PAIR_BLOCK = 512
#: Cost model choosing between the two surrogate kernels, in units of one
#: row-pair sweep element (~0.33 ns single-threaded with AVX-512): a sweep costs
#: SWEEP_OVERHEAD plus its columns; the per-column kernel COLUMN_OVERHEAD per
#: column plus about one per (passer, failer) pair. Measured on 8-96 rows x
#: 8-500 columns; the choice changes speed only, never results beyond rounding.
SWEEP_OVERHEAD = 48
COLUMN_OVERHEAD = 800

# The pair loops are reductions: letting LLVM reassociate them (and fuse
# multiply-adds) is what vectorizes them. These flags change rounding only (the
# order of a sum, a fused multiply-add); nnan/ninf/arcp/afn stay off, so inf,
# nan and divisions keep IEEE semantics. Results stay deterministic (the same
# helper code runs in the serial and the parallel build) and within ~1e-15 of
# the reference, far inside the 1e-12 the tests demand.
_VEC_MATH = {"reassoc", "contract", "nsz"}


def _jit(**options):
    # error_model="numpy": a float division never raises, so the division in the
    # pair loops carries no zero check and the loops vectorize; every division
    # here has a nonzero divisor by construction anyway.
    return njit(nogil=True, cache=CACHE, error_model="numpy", **options)


def _serial_and_parallel(fn):
    """Compile ``fn`` twice: serially (``prange`` acts as ``range``) and with ``parallel=True``.

    The parallel build is a renamed copy of the function: numba's on-disk cache
    keys by qualified name and bytecode, not by compile flags.
    """
    clone = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_parallel",
                               fn.__defaults__, fn.__closure__)
    clone.__qualname__ = fn.__qualname__ + "_parallel"
    clone.__doc__ = fn.__doc__
    return _jit()(fn), _jit(parallel=True)(clone)


# ---------------------------------------------------------------------------
# layout


@_jit()
def _copy(dst, src):
    """``dst[k] = src[k]`` for k < len(src) (1-D; ``dst`` at least as long).

    A loop rather than ``dst[:] = src``: numba's array-to-array slice assignment
    checks shapes with an error message whose formatting code alone costs
    seconds of JIT in :func:`warmup`.
    """
    for k in range(src.shape[0]):
        dst[k] = src[k]


@_jit()
def transposed(B, cols):
    """``BT[q, i] = (B[i, cols[q]] != 0)`` as a new (len(cols), n) uint8 array. O(n m)."""
    n = B.shape[0]
    mq = cols.shape[0]
    BT = np.empty((mq, n), dtype=np.uint8)
    # 64 columns at a time: one cache line of each row feeds 64 output streams
    for q0 in range(0, mq, 64):
        q1 = min(q0 + 64, mq)
        for i in range(n):
            for q in range(q0, q1):
                BT[q, i] = 1 if B[i, cols[q]] != 0 else 0
    return BT


# ---------------------------------------------------------------------------
# LOO-AUC


@_jit()
def _auc_value(wins, ties, P, F):
    if P <= 0 or F <= 0:
        return np.nan
    # integers below 2^53 are exact, so this single rounding of (wins + ties/2)/(P F)
    # gives the same bits as every other backend
    return (2.0 * wins + ties) / (2.0 * P * F)


@_jit()
def _uniform_block(B, cnt, row_of, lstart, lval, ltot, j0, j1, pcur, pprev, acc, ptot, out,
                   colsum):
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
    exactly; int64 wraps modulo 2^64 likewise). ``colsum`` (m,) int64 gets P
    per column when it is non-empty. O(n (j1 - j0)), integer counts.
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
            wins, ties = _merge_over_passers(ppos, npass, fpos, nfail, ss, cs, wj, tol, klo,
                                             khi, cum)
        out[j0 + jj] = _auc_value(wins, ties, P, F)


def _loo_blocks(B, uniform, cnt, row_of, lstart, lval, ltot, perm, ss, cs, w, tol, width, out,
                colsum):
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
            pc = np.empty(bw, dtype=np.int32)
            pp = np.empty(bw, dtype=np.int32)
            if ntot < (1 << 16):  # 2 wins + ties < 2^31: uint32 lanes, twice the SIMD width
                _uniform_block(B, cnt, row_of, lstart, lval, ltot, j0, j1, pc, pp,
                               np.empty(bw, dtype=np.uint32), np.empty(bw, dtype=np.uint32),
                               out, colsum)
            else:
                _uniform_block(B, cnt, row_of, lstart, lval, ltot, j0, j1, pc, pp,
                               np.empty(bw, dtype=np.int64), np.empty(bw, dtype=np.int64),
                               out, colsum)
        else:
            _weighted_block(B, perm, ss, cs, w, tol, j0, j1, out)


loo_blocks, loo_blocks_parallel = _serial_and_parallel(_loo_blocks)


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
def row_scores(B, w):
    """``s_i = sum_j w_j [B_ij != 0]``, float64 (n,), summed in ascending j (as the C++ core).

    Four rows at a time so four addition chains overlap. O(n m).
    """
    return _row_scores_of(B, w, np.arange(B.shape[0]))


@_jit()
def _row_scores_of(B, w, idx):
    """:func:`row_scores` of the rows ``idx`` (int64), float64 (len(idx),); each row's
    sum is the same ascending loop whatever the other rows."""
    n = idx.shape[0]
    m = B.shape[1]
    s = np.zeros(n)
    n4 = n - n % 4
    for k in range(0, n4, 4):
        i0 = idx[k]
        i1 = idx[k + 1]
        i2 = idx[k + 2]
        i3 = idx[k + 3]
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        for j in range(m):
            wj = w[j]
            a0 += wj * (B[i0, j] != 0)
            a1 += wj * (B[i1, j] != 0)
            a2 += wj * (B[i2, j] != 0)
            a3 += wj * (B[i3, j] != 0)
        s[k] = a0
        s[k + 1] = a1
        s[k + 2] = a2
        s[k + 3] = a3
    for k in range(n4, n):
        i = idx[k]
        acc = 0.0
        for j in range(m):
            acc += w[j] * (B[i, j] != 0)
        s[k] = acc
    return s


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


@_jit()
def uniform_loo_auc(B, cnt, out, colsum):
    """Uniform-weight LOO-AUC of every column into ``out`` (float64 (m,); ``nan`` if
    constant), serially, with row multiplicities ``cnt`` (int64 (n,)); ``colsum``
    (int64 (m,) or empty) gets the count-weighted passers per column. Merges
    identical rows first on large enough inputs. Returns ``rep`` (int64 (n,), see
    :func:`row_sums_and_reps`). O(n m)."""
    n, m = B.shape
    dedup = n >= DEDUP_MIN_ROWS and n * m >= DEDUP_MIN_CELLS
    rs, c, rep = row_sums_and_reps(B, cnt, dedup)
    row_of, lstart, lval, ltot = levels_by_count(rs, c, m)
    ei = np.empty(0, dtype=np.int64)
    ef = np.empty(0)
    # np.bool_/np.int64 and not literals: a literal argument makes numba compile
    # (and optimize) a separate specialization of the callee
    loo_blocks(B, np.bool_(True), c, row_of, lstart, lval, ltot, ei, ef, ei, ef, 0.0,
               np.int64(256), out, colsum)
    return rep


# ---------------------------------------------------------------------------
# logistic surrogate, J and dJ/dw


@_jit(fastmath=_VEC_MATH)
def _pairs_fast(a, co, x, ci, acc, ni):
    """One outer row against ``ni`` inner rows with ``t = a * x[k] = exp(-z)``.

    Returns (sum_k ci[k] sigma, sum_k ci[k] sigma'); ``acc[k] += co * sigma'``.
    One multiply and one division per pair, no exp; vectorizes.
    """
    s1 = 0.0
    s2 = 0.0
    for k in range(ni):
        t = a * x[k]
        sg = 1.0 / (1.0 + t)
        d = (t * sg) * sg
        s1 += ci[k] * sg
        s2 += ci[k] * d
        acc[k] += co * d
    return s1, s2


@_jit(fastmath=_VEC_MATH)
def _pairs_stable(a, sign, wj, gamma, co, x, ci, acc, ni):
    """As :func:`_pairs_fast` with ``z = gamma ((s_p - s_f) - wj)`` and a sigmoid that
    cannot overflow; ``s_p - s_f`` is ``a - x[k]`` (``sign = 1``, passer outer) or
    ``x[k] - a`` (``sign = -1``, failer outer)."""
    s1 = 0.0
    s2 = 0.0
    for k in range(ni):
        z = gamma * (sign * (a - x[k]) - wj)
        e = np.exp(-abs(z))
        q = 1.0 / (1.0 + e)
        sg = q if z >= 0.0 else e * q
        d = (e * q) * q
        s1 += ci[k] * sg
        s2 += ci[k] * d
        acc[k] += co * d
    return s1, s2


@_jit(fastmath=_VEC_MATH)
def _dot_column(btj, cv):
    acc = 0.0
    for i in range(btj.shape[0]):
        acc += btj[i] * cv[i]
    return acc


@_jit()
def _surrogate_column(btj, wj, gamma, c, s, E, F, fast, vb, ws, iw):
    """Surrogate of one column; returns ``(L_j, (L_j - 1/2) - gamma c_j D_j)`` and adds
    ``c_j u^j`` to the block's partial ``vb`` (SPEC section 3 notation).

    Rows must have ``c > 0``. The smaller of the passers/failers is the outer
    loop, the larger the inner, vectorized one. ``ws`` (6, n + LANES) float64 and
    ``iw`` (2, n) int64 are scratch. O(n + |P_j| |F_j|).
    """
    n = btj.shape[0]
    pidx = iw[0]
    fidx = iw[1]
    npass = np.int64(0)  # not a literal 0: see _weighted_block
    nfail = np.int64(0)
    Pc = 0.0
    Fc = 0.0
    for i in range(n):
        bit = np.int64(btj[i] != 0)
        pidx[npass] = i
        fidx[nfail] = i
        npass += bit
        nfail += 1 - bit
        Pc += bit * c[i]
        Fc += (1 - bit) * c[i]
    if npass == 0 or nfail == 0:
        return np.nan, 0.0
    passers_outer = npass <= nfail
    if passers_outer:
        oidx = pidx
        iidx = fidx
        no = npass
        ni = nfail
    else:
        oidx = fidx
        iidx = pidx
        no = nfail
        ni = npass
    oa = ws[0]
    oc = ws[1]
    od = ws[2]
    ix = ws[3]
    ic = ws[4]
    iacc = ws[5]
    for k in range(ni):
        r = iidx[k]
        ic[k] = c[r]
        iacc[k] = 0.0
    # pad the inner rows to a multiple of LANES with x = 0, c = 0 (exact zeros
    # in every sum, in both forms): the vectorized loop then runs no scalar remainder
    nip = (ni + LANES - 1) // LANES * LANES
    for k in range(ni, nip):
        ix[k] = 0.0
        ic[k] = 0.0
        iacc[k] = 0.0
    for o in range(no):
        oc[o] = c[oidx[o]]
    sum_sig = 0.0
    sum_dsig = 0.0
    if fast:
        # t = E_p G_j F_f: the passers carry G_j = exp(gamma w_j)
        Gj = np.exp(gamma * wj)
        if passers_outer:
            for o in range(no):
                oa[o] = E[oidx[o]] * Gj
            for k in range(ni):
                ix[k] = F[iidx[k]]
        else:
            for o in range(no):
                oa[o] = F[oidx[o]]
            for k in range(ni):
                ix[k] = E[iidx[k]] * Gj
        for o in range(no):
            s1, s2 = _pairs_fast(oa[o], oc[o], ix, ic, iacc, nip)
            sum_sig += oc[o] * s1
            sum_dsig += oc[o] * s2
            od[o] = s2
    else:
        sign = 1.0 if passers_outer else -1.0
        for o in range(no):
            oa[o] = s[oidx[o]]
        for k in range(ni):
            ix[k] = s[iidx[k]]
        for o in range(no):
            s1, s2 = _pairs_stable(oa[o], sign, wj, gamma, oc[o], ix, ic, iacc, nip)
            sum_sig += oc[o] * s1
            sum_dsig += oc[o] * s2
            od[o] = s2
    npairs = Pc * Fc
    Lj = sum_sig / npairs
    cj = wj / npairs
    if cj != 0.0:
        # passers get +c_j u, failers -c_j u
        so = cj if passers_outer else -cj
        for o in range(no):
            vb[oidx[o]] += so * od[o]
        for k in range(ni):
            vb[iidx[k]] -= so * iacc[k]
    return Lj, (Lj - 0.5) - gamma * cj * sum_dsig


@_jit()
def _surrogate_block(BT, w, gamma, c, s, E, F, fast_cols, L, gloc, vb, j0, j1):
    """Columns [j0, j1) into ``L``/``gloc``; their ``c_j u^j`` summed into ``vb`` (n,)."""
    n = BT.shape[1]
    ws = np.empty((6, n + LANES))
    iw = np.empty((2, n), dtype=np.int64)
    vb[:] = 0.0
    for j in range(j0, j1):
        lj, gj = _surrogate_column(BT[j], w[j], gamma, c, s, E, F, fast_cols[j], vb, ws, iw)
        L[j] = lj
        gloc[j] = gj


def _surrogate_columns(BT, w, gamma, c, s, E, F, fast_cols, L, gloc, vpart, grad):
    """The column work of one surrogate evaluation (serial or prange build)."""
    m, n = BT.shape
    nb = vpart.shape[0]
    for b in prange(nb):
        _surrogate_block(BT, w, gamma, c, s, E, F, fast_cols, L, gloc, vpart[b],
                         b * m // nb, (b + 1) * m // nb)
    # partials summed in block order: the bits do not depend on the thread count
    cv = np.zeros(n)
    for b in range(nb):
        for i in range(n):
            cv[i] += vpart[b, i]
    for i in range(n):
        cv[i] *= c[i]
    for j in prange(m):
        grad[j] = gloc[j] + gamma * _dot_column(BT[j], cv)


_surrogate_columns, _surrogate_columns_parallel = _serial_and_parallel(_surrogate_columns)


@_jit()
def _scores_bt(BT, w):
    """``s = BT.T @ w`` summed in ascending column order. O(n m)."""
    m, n = BT.shape
    s = np.zeros(n)
    for j in range(m):
        wj = w[j]
        row = BT[j]
        for i in range(n):
            s[i] += wj * row[i]
    return s


@_jit()
def surrogate_bt(BT, w, gamma, c, L, grad, parallel):
    """Surrogate on the transposed matrix ``BT`` (m, n); fills ``L``, ``grad``; returns J.

    ``c`` float64 (n,) multiplicities, all > 0 (the wrapper drops absent rows
    and merges identical ones). O(n m + sum_j |P_j| |F_j|) per call.
    """
    m, n = BT.shape
    if m == 0 or n == 0:
        for j in range(m):
            L[j] = np.nan
            grad[j] = 0.0
        return 0.0
    s = _scores_bt(BT, w)
    smin = s[0]
    smax = s[0]
    for i in range(1, n):
        smin = min(smin, s[i])
        smax = max(smax, s[i])
    center = 0.5 * (smin + smax)
    fast_cols = np.empty(m, dtype=np.bool_)
    any_fast = False
    for j in range(m):
        # False for inf/nan spans too
        fast_cols[j] = gamma * ((smax - smin) + w[j]) <= FAST_SPAN_LIMIT
        any_fast = any_fast or fast_cols[j]
    E = np.empty(n)
    F = np.empty(n)
    if any_fast:
        for i in range(n):
            E[i] = np.exp(-gamma * (s[i] - center))
            F[i] = np.exp(gamma * (s[i] - center))
    gloc = np.empty(m)
    nb = max(1, min(m, MAX_BLOCKS, (m * n) // BLOCK_CELLS, _MAX_VPART_DOUBLES // n))
    vpart = np.empty((nb, n))
    if parallel:
        _surrogate_columns_parallel(BT, w, gamma, c, s, E, F, fast_cols, L, gloc, vpart, grad)
    else:
        _surrogate_columns(BT, w, gamma, c, s, E, F, fast_cols, L, gloc, vpart, grad)
    J = 0.0
    for j in range(m):
        if L[j] == L[j]:  # not nan
            J += w[j] * (L[j] - 0.5)
    return J


# ---------------------------------------------------------------------------
# logistic surrogate by row pairs (few distinct rows)
#
# ACES-O optimizes on its top_k (24) rows, fewer once identical rows are merged:
# a column then has a handful of passers and failers, the per-column pair loops
# above run a few iterations each and the per-column work (split, gathers,
# scatter) dominates. Here the loops are turned around: for each unordered pair
# {p, q} of rows, one sweep over the columns. In column j, x = B_pj - B_qj is
# +1 (p passes, q fails), -1 (the reverse) or 0 (the pair is not a
# passer-failer pair there): x selects the factor of t = exp(-z) and masks the
# rest, so the sweep is long, contiguous and branch-free and vectorizes fully.
# It evaluates n (n - 1) / 2 sigmoids per column where sum_j |P_j| |F_j| do
# work (about half of them at pass rate 1/2); :func:`_surrogate_layout` picks
# this kernel only when that is cheaper than the per-column one.


@_jit(fastmath=_VEC_MATH)
def _pair_sweep(bp, bq, alpha, beta, cpq, G, cw, Ls, Ds):
    """Rows p and q (0/1 rows ``bp``, ``bq``) over the columns of a block.

    ``alpha = E_p F_q``, ``beta = E_q F_p``, ``cpq = c_p c_q``. Where the rows
    differ, adds ``cpq sigma`` to ``Ls[j]`` and ``cpq sigma'`` to ``Ds[j]``;
    returns ``R = sum_j x_j cw_j sigma'_j``, so that ``v_p += c_q R`` and
    ``v_q -= c_p R``. One multiply and one division per element, no exp.
    """
    # The arrays are the block's slices and the loop starts at 0: with an index
    # that might be negative numba emits a wraparound select per access, and
    # LLVM no longer vectorizes the loop.
    R = 0.0
    for j in range(bp.shape[0]):
        x = np.float64(bp[j]) - np.float64(bq[j])
        t = (alpha if x > 0.0 else beta) * G[j]
        sg = 1.0 / (1.0 + t)
        d = (t * sg) * sg
        cx = cpq * (x * x)
        Ls[j] += cx * sg
        Ds[j] += cx * d
        R += x * (cw[j] * d)
    return R


def _row_pair_blocks(Bc, c, E, F, G, cw, Ls, Ds, vpart):
    """All row pairs over each block of ROW_PAIR_BLOCK columns (serial or prange build).

    Block b fills ``Ls``/``Ds`` on its columns and its own partial ``vpart[b]``
    (n,), so blocks share no output.
    """
    n, mp = Bc.shape
    for b in prange(vpart.shape[0]):
        j0 = b * ROW_PAIR_BLOCK
        j1 = min(j0 + ROW_PAIR_BLOCK, mp)
        vb = vpart[b]
        vb[:] = 0.0
        Gb = G[j0:j1]
        cwb = cw[j0:j1]
        Lb = Ls[j0:j1]
        Db = Ds[j0:j1]
        Lb[:] = 0.0
        Db[:] = 0.0
        for p in range(n - 1):
            bp = Bc[p, j0:j1]
            for q in range(p + 1, n):
                R = _pair_sweep(bp, Bc[q, j0:j1], E[p] * F[q], E[q] * F[p], c[p] * c[q], Gb, cwb,
                                Lb, Db)
                vb[p] += c[q] * R
                vb[q] -= c[p] * R


_row_pair_blocks, _row_pair_blocks_parallel = _serial_and_parallel(_row_pair_blocks)


@_jit()
def _surrogate_rows(Bc, PF, w, gamma, c, L, grad, parallel):
    """The surrogate by row pairs on the layout of :func:`_surrogate_layout`.

    ``Bc`` uint8 (n, mp) and ``PF`` float64 (mp,) padded with zero columns;
    ``w`` (m,). Fills ``L``, ``grad`` (m,) and returns ``(J, True)``; returns
    ``(0.0, False)`` without touching them when some ``exp(-z)`` could
    overflow (the caller then runs :func:`surrogate_bt`). O(n^2 mp).
    """
    n, mp = Bc.shape
    m = w.shape[0]
    wp = np.zeros(mp)
    _copy(wp, w)
    s = np.empty(n)
    for i in range(n):
        s[i] = _dot_column(Bc[i], wp)
    smin = s.min()
    smax = s.max()
    # False for inf/nan spans too
    if not gamma * ((smax - smin) + wp.max()) <= FAST_SPAN_LIMIT:
        return 0.0, False
    center = 0.5 * (smin + smax)
    E = np.empty(n)
    F = np.empty(n)
    for i in range(n):
        E[i] = np.exp(-gamma * (s[i] - center))
        F[i] = np.exp(gamma * (s[i] - center))
    # padding: G = 1, cw = 0, so padded columns add exact zeros
    G = np.ones(mp)
    cw = np.zeros(mp)
    for j in range(m):
        G[j] = np.exp(gamma * w[j])
        if PF[j] > 0.0:
            cw[j] = w[j] / PF[j]
    Ls = np.empty(mp)
    Ds = np.empty(mp)
    vpart = np.empty(((mp + ROW_PAIR_BLOCK - 1) // ROW_PAIR_BLOCK, n))
    if parallel and vpart.shape[0] > 1:  # one block: threads would only add a launch
        _row_pair_blocks_parallel(Bc, c, E, F, G, cw, Ls, Ds, vpart)
    else:
        _row_pair_blocks(Bc, c, E, F, G, cw, Ls, Ds, vpart)
    # partials summed in block order: the bits do not depend on the thread count
    cv = np.zeros(n)
    for b in range(vpart.shape[0]):
        for i in range(n):
            cv[i] += vpart[b, i]
    # (B^T (c v))_j accumulated row by row, along the contiguous columns
    bv = np.zeros(mp)
    for i in range(n):
        ci = c[i] * cv[i]
        row = Bc[i]
        for j in range(mp):
            bv[j] += ci * row[j]
    J = 0.0
    for j in range(m):
        if PF[j] > 0.0:
            Lj = Ls[j] / PF[j]
            L[j] = Lj
            J += w[j] * (Lj - 0.5)
            grad[j] = ((Lj - 0.5) - gamma * cw[j] * Ds[j]) + gamma * bv[j]
        else:
            L[j] = np.nan
            grad[j] = gamma * bv[j]
    return J, True


@_jit()
def _surrogate_layout(B, cols, c):
    """The data of every surrogate evaluation on columns ``cols`` of ``B`` (rows with
    multiplicities ``c`` float64 (n,), all > 0): ``(BT, Bc, PF)``.

    ``BT`` (len(cols), n) uint8: the transposed copy the per-column kernel reads.
    ``Bc`` (n, mp) uint8, the columns 0/1 and zero-padded to mp (a multiple of
    LANES), and ``PF`` (mp,) float64 ``|P_j| |F_j|`` with multiplicities: the
    row-pair layout, with no rows when the per-column kernel costs less
    (many distinct rows, or few pairs per column). O(n m).
    """
    n = B.shape[0]
    mq = cols.shape[0]
    BT = transposed(B, cols)
    mp = (mq + LANES - 1) // LANES * LANES
    PF = np.zeros(mp)
    pairs = 0
    for j in range(mq):
        Pc = 0.0
        Fc = 0.0
        npass = 0
        for i in range(n):
            if BT[j, i] != 0:
                Pc += c[i]
                npass += 1
            else:
                Fc += c[i]
        PF[j] = Pc * Fc
        pairs += npass * (n - npass)
    nblocks = (mp + ROW_PAIR_BLOCK - 1) // ROW_PAIR_BLOCK
    row_pair_cost = (n * (n - 1) // 2) * (mp + SWEEP_OVERHEAD * nblocks)
    if n >= 2 and mq > 0 and row_pair_cost <= COLUMN_OVERHEAD * mq + pairs:
        Bc = np.zeros((n, mp), dtype=np.uint8)
        for j in range(mq):
            for i in range(n):
                Bc[i, j] = BT[j, i]
    else:
        Bc = np.zeros((0, mp), dtype=np.uint8)
    return BT, Bc, PF


@_jit()
def _surrogate_eval(BT, Bc, PF, w, gamma, c, L, grad, parallel):
    """One surrogate evaluation on a :func:`_surrogate_layout`: fills ``L``, ``grad``; returns J."""
    if Bc.shape[0] > 0:
        J, done = _surrogate_rows(Bc, PF, w, gamma, c, L, grad, parallel)
        if done:
            return J
    return surrogate_bt(BT, w, gamma, c, L, grad, parallel)


@_jit()
def surrogate(B, w, gamma, cnt, L, grad, parallel):
    """Surrogate LOO-AUC ``L`` (m,), ``J`` and ``dJ/dw`` (``grad`` (m,)) of ``B`` uint8
    (n, m) with row multiplicities ``cnt`` int64 (n,) (0 = absent); returns J.

    Identical rows are merged first (the pair work is quadratic in the rows);
    then row pairs or per-column pair loops, whichever is cheaper.
    O(n m log n + sum_j |P_j| |F_j|), at most O(n^2 m / 2 + n m).
    """
    Bd, cd = distinct_rows(B, cnt)
    c = cd.astype(np.float64)
    BT, Bc, PF = _surrogate_layout(Bd, np.arange(B.shape[1]), c)
    return _surrogate_eval(BT, Bc, PF, w, gamma, c, L, grad, parallel)


# ---------------------------------------------------------------------------
# ACES-O


@_jit()
def _softmax(logits, w):
    mx = logits[0]
    for k in range(1, logits.shape[0]):
        mx = max(mx, logits[k])
    tot = 0.0
    for k in range(logits.shape[0]):
        w[k] = np.exp(logits[k] - mx)
        tot += w[k]
    for k in range(logits.shape[0]):
        w[k] = w[k] / tot


@_jit()
def aces_o_fit(B, logits0, active, gamma, lr, steps, cnt, parallel):
    """A whole ACES-O run: Adam (PyTorch semantics) on ``-J(softmax(logits))``.

    ``B`` uint8 (n, m); ``logits0`` float64 (m,); ``active`` uint8 (m,) (inactive
    columns keep weight 0 and are left out of the surrogate: with ``w_j = 0`` they
    change neither scores, J nor any active gradient); ``cnt`` int64 (n,) row
    multiplicities (0 = absent; identical rows are merged first, as in
    :func:`surrogate`).
    Returns ``(weights (m,), objective (steps + 1,))`` with ``objective[t] = J(w_t)``.
    O(n m log n + steps * surrogate cost) on the active columns; the layout is
    built once.
    """
    m = B.shape[1]
    weights = np.zeros(m)
    objective = np.zeros(steps + 1)
    cols = np.nonzero(active)[0]
    ma = cols.shape[0]
    if ma == 0:
        return weights, objective
    Bd, cd = distinct_rows(B, cnt)
    c = cd.astype(np.float64)
    BT, Bc, PF = _surrogate_layout(Bd, cols, c)
    logits = np.empty(ma)
    for k in range(ma):
        logits[k] = logits0[cols[k]]
    beta1 = 0.9
    beta2 = 0.999
    eps = 1e-8
    m1 = np.zeros(ma)
    m2 = np.zeros(ma)
    w = np.empty(ma)
    L = np.empty(ma)
    grad = np.empty(ma)
    for t in range(1, steps + 2):
        _softmax(logits, w)
        objective[t - 1] = _surrogate_eval(BT, Bc, PF, w, gamma, c, L, grad, parallel)
        if t == steps + 1:
            break
        wg = 0.0
        for k in range(ma):
            wg += w[k] * grad[k]
        bc1 = 1.0 - beta1 ** float(t)
        bc2 = 1.0 - beta2 ** float(t)
        sbc2 = np.sqrt(bc2)
        step = lr / bc1
        for k in range(ma):
            lg = -(w[k] * (grad[k] - wg))
            m1[k] = beta1 * m1[k] + (1.0 - beta1) * lg
            m2[k] = beta2 * m2[k] + (1.0 - beta2) * lg * lg
            denom = np.sqrt(m2[k]) / sbc2 + eps
            logits[k] = logits[k] - step * m1[k] / denom
    _softmax(logits, w)
    for k in range(ma):
        weights[cols[k]] = w[k]
    return weights, objective


# ---------------------------------------------------------------------------
# method glue (SPEC section 3) shared by the per-task methods and the batch kernel
#
# The per-task methods of NumbaBackend and the batch kernel below run these same
# functions, so a batch gives the per-task results bit for bit. Sums are plain
# ascending loops (no fastmath): their rounding is fixed by the code alone.

#: method codes of :func:`rerank_tasks_c` (ACES_O: :func:`rerank_one_o`)
MAJORITY = 0
ACES_C = 1
ACES_C_FILTER = 2
ACES_O = 3


@_jit()
def column_counts(B):
    """Passing candidates per test, int64 (m,). O(n m)."""
    n, m = B.shape
    cs = np.zeros(m, dtype=np.int64)
    for i in range(n):
        for j in range(m):
            cs[j] += B[i, j] != 0
    return cs


@_jit()
def nonconstant(B):
    """uint8 (m,): 1 for tests some candidate passes and some fails."""
    n = B.shape[0]
    cs = column_counts(B)
    out = np.zeros(cs.shape[0], dtype=np.uint8)
    for j in range(cs.shape[0]):
        out[j] = 1 if 0 < cs[j] < n else 0
    return out


@_jit()
def aces_c_from_loo(B, L, weighted):
    """Unnormalized ACES-C weights from the uniform LOO-AUC ``L``; returns ``(w, fallback)``.

    See :func:`aces_c_weights`; counts the passers per column first. O(n m).
    """
    return aces_c_weights(column_counts(B), B.shape[0], L, weighted)


@_jit()
def aces_c_weights(cs, n, L, weighted):
    """ACES-C weights from the passers per column ``cs`` (int64 (m,)) of ``n`` rows
    and the uniform LOO-AUC ``L``; returns ``(w, fallback)``.

    ``weighted``: ``w_j = (L_j - 1/2) p_j (1 - p_j)`` where ``L_j > 1/2`` (``nan``
    fails the test), else 0; filter: ``w_j = 1`` where ``L_j > 1/2``. All zero ->
    majority-vote weights and ``fallback = True``. O(m).
    """
    m = cs.shape[0]
    w = np.zeros(m)
    any_positive = False
    for j in range(m):
        if L[j] > 0.5:
            if weighted:
                p = cs[j] / n
                w[j] = (L[j] - 0.5) * p * (1.0 - p)
            else:
                w[j] = 1.0
            any_positive = any_positive or w[j] > 0.0
    if not any_positive:
        for j in range(m):
            w[j] = 1.0 if 0 < cs[j] < n else 0.0
    return w, not any_positive


@_jit()
def _ascending_sum(x):
    acc = 0.0
    for k in range(x.shape[0]):
        acc += x[k]
    return acc


@_jit()
def normalized(w):
    """``w / sum(w)`` (sum in ascending order), or zeros when the sum is not positive."""
    total = _ascending_sum(w)
    out = np.zeros(w.shape[0])
    if total > 0.0:
        for k in range(w.shape[0]):
            out[k] = w[k] / total
    return out


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
def snap_ties(s, tol, out):
    """``out[i]`` = smallest score of the run of sorted neighbours closer than ``tol``
    containing ``s[i]`` (the rule of :func:`aces_fast.backends.base.snap_ties`). O(n log n)."""
    n = s.shape[0]
    if n < 2 or not tol > 0.0:
        _copy(out, s)
        return
    idx = stable_order(s)
    prev = s[idx[0]]
    run = prev
    out[idx[0]] = run
    for r in range(1, n):
        v = s[idx[r]]
        if v - prev > tol:
            run = v
        out[idx[r]] = run
        prev = v


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
def finish_weighted(B, w_raw, tie_tol, w_out, scores_out, order_out):
    """Normalize weights, score ``B w``, snap ties within ``tie_tol * sum(w)``, order.

    Writes ``w_out`` (m,), ``scores_out`` (n,) and ``order_out`` (n,) (descending,
    ties by lower index: a stable sort of ``-scores``). O(n m + n log n).
    """
    finish_weighted_rep(B, w_raw, tie_tol, np.arange(B.shape[0]), w_out, scores_out, order_out)


@_jit()
def finish_weighted_rep(B, w_raw, tie_tol, rep, w_out, scores_out, order_out):
    """:func:`finish_weighted`, scoring only the rows with ``rep[i] == i`` (``rep``
    from :func:`row_sums_and_reps`): the same bits."""
    w = normalized(w_raw)
    _copy(w_out, w)
    s = row_scores_rep(B, w, rep)
    snap_ties(s, tie_tol * _ascending_sum(w), scores_out)
    neg = np.empty(s.shape[0])
    for i in range(s.shape[0]):
        neg[i] = -scores_out[i]
    _copy(order_out, stable_order(neg))


@_jit()
def warm_logits(wc, active):
    """ACES-O's ``init="aces-c"`` logits: ``log(normalized(wc) + 1e-3)`` on active tests, else 0."""
    wn = normalized(wc)
    out = np.zeros(wc.shape[0])
    for j in range(wc.shape[0]):
        if active[j] != 0:
            out[j] = np.log(wn[j] + 1e-3)
    return out


@_jit()
def top_k_rows(B, top_k):
    """Ascending indices of the ``top_k`` rows with most passes (ties: lower index);
    every row when ``top_k < 0`` (None) or ``top_k >= n``. int64. O(n m + n log n)."""
    n = B.shape[0]
    if top_k < 0 or top_k >= n:
        return np.arange(n)
    rs = row_sums(B)
    neg = np.empty(n)
    for i in range(n):
        neg[i] = -rs[i]  # exact: integers far below 2**53
    by_sum = stable_order(neg)
    keep = np.zeros(n, dtype=np.bool_)
    for r in range(top_k):
        keep[by_sum[r]] = True
    out = np.empty(top_k, dtype=np.int64)
    k = 0
    for i in range(n):
        if keep[i]:
            out[k] = i
            k += 1
    return out


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
def rerank_one_c(B, code, tie_tol, w_out, scores_out, order_out, loo_out):
    """Majority vote (``code`` MAJORITY) or ACES-C (ACES_C, ACES_C_FILTER) of one task,
    as the per-task methods compute it; writes the outputs (``loo_out`` for ACES-C
    only), returns ``fallback``. ACES-C merges identical rows once, for the LOO-AUC
    and the scores alike."""
    n = B.shape[0]
    if code == MAJORITY:
        w = nonconstant(B).astype(np.float64)
        finish_weighted(B, w, tie_tol, w_out, scores_out, order_out)
        return False
    cs = np.empty(B.shape[1], dtype=np.int64)
    rep = uniform_loo_auc(B, np.ones(n, dtype=np.int64), loo_out, cs)
    w, fallback = aces_c_weights(cs, n, loo_out, code == ACES_C)
    finish_weighted_rep(B, w, tie_tol, rep, w_out, scores_out, order_out)
    return fallback


@_jit()
def rerank_one_o(B, tie_tol, gamma, lr, steps, top_k, warm, parallel, w_out, scores_out,
                 order_out, obj_out, rows_out):
    """ACES-O of one task (``warm``: init "aces-c"; ``top_k < 0``: None), the whole
    method in one call: :meth:`NumbaBackend.aces_o` and the batch path (serial,
    ``parallel`` False) both run it, so they give the same bits. Writes the
    outputs, returns the number of rows kept (``rows_out[:nrows]``)."""
    n, m = B.shape
    active = nonconstant(B)
    if warm:
        L = np.empty(m)
        cs = np.empty(m, dtype=np.int64)
        uniform_loo_auc(B, np.ones(n, dtype=np.int64), L, cs)
        wc, _ = aces_c_weights(cs, n, L, np.bool_(True))
        logits0 = warm_logits(wc, active)
    else:
        logits0 = np.zeros(m)
    rows = top_k_rows(B, top_k)
    nrows = rows.shape[0]
    _copy(rows_out, rows)
    if nrows == n:
        Bk = B
    else:
        Bk = np.empty((nrows, m), dtype=np.uint8)
        for r in range(nrows):
            _copy(Bk[r], B[rows[r]])
    w, objective = aces_o_fit(Bk, logits0, active, gamma, lr, steps,
                              np.ones(nrows, dtype=np.int64), parallel)
    _copy(obj_out, objective)
    finish_weighted(B, w, tie_tol, w_out, scores_out, order_out)
    return nrows


@intrinsic
def _uint8_pointer(typingctx, address):
    """``address`` (an integer) as a ``uint8*``; the caller keeps the memory alive."""
    if not isinstance(address, nbtypes.Integer):
        return None
    sig = nbtypes.CPointer(nbtypes.uint8)(address)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return sig, codegen


@_jit(parallel=True)
def rerank_tasks_c(addresses, shapes, todo, code, tie_tol, noff, moff, weights, scores, order,
                   loo, fallback):
    """Majority vote or ACES-C of many tasks, one per ``prange`` iteration.

    Task ``t`` is the C-contiguous ``uint8`` (n, m) matrix at memory address
    ``addresses[t]`` with ``(n, m) = shapes[t]`` (read in place: the caller
    validated each matrix and keeps it alive); ``todo`` lists the tasks in the
    order to start them (largest first balances the threads). Outputs are
    flat: task t's scores and order at ``noff[t]``, weights and LOO-AUC at
    ``moff[t]``; ``fallback`` per task. Each task runs :func:`rerank_one_c`
    (serial kernels), so results do not depend on threads or batch.
    """
    for q in prange(todo.shape[0]):
        t = todo[q]
        n = shapes[t, 0]
        m = shapes[t, 1]
        B = carray(_uint8_pointer(addresses[t]), (n, m))
        a = noff[t]
        b = moff[t]
        fallback[t] = rerank_one_c(B, code, tie_tol, weights[b:b + m], scores[a:a + n],
                                   order[a:a + n], loo[b:b + m])
