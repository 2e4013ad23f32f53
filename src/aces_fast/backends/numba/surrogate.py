"""The logistic surrogate of LOO-AUC, ``J`` and ``dJ/dw`` (docs/contract.rst §3).

Identical rows are merged into multiplicities first, so pairs are over
distinct rows, and ``exp(-z) = E_p F_f G_j`` (one multiply, no exp; per-row
tables E, F and one exp per test) while no factor can overflow, a stable
sigmoid beyond. Two kernels, chosen by a cost model:

* per column (``surrogate_bt``, on the transposed ``uint8`` copy of B): one
  sigmoid per (passer, failer) pair, the larger side in a vectorized inner loop
  -- for many distinct rows;
* by row pairs (``_surrogate_rows``): per unordered pair of rows, one
  contiguous, branch-free sweep over all columns -- for few distinct rows, as
  ACES-O's top_k rows, where the per-column loops are too short to vectorize.

Both exist as a serial and a ``parallel=True`` build running the same code over
the same fixed column blocks: identical bits, whatever the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import _VEC_MATH, _exp_inplace, _jit, _serial_and_parallel
from .dedup import distinct_rows

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
#: of every vector width: 8 doubles with AVX-512), so they never end in a scalar
#: remainder: the inner rows of a column's pair loop, the columns of the
#: row-pair layout. What LLVM's unrolled main loop leaves, its vectorized
#: epilogue takes; padding further (to the unrolled width, 32) costs more in
#: padded work than it saves (24 rows x 100 tests: 7% slower row-pair sweeps).
LANES = 8
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
    ``c_j u^j`` to the block's partial ``vb`` (docs/contract.rst §3 notation).

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
        _surrogate_block(
            BT, w, gamma, c, s, E, F, fast_cols, L, gloc, vpart[b], b * m // nb, (b + 1) * m // nb
        )
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


# Inlined (numba IR), so its loop runs with the caller's fast-math flags: a
# call would cost an NRT reference-count increment and decrement per array
# argument, 10 atomic operations per call, several times the sweep itself on
# small inputs.
@_jit(fastmath=_VEC_MATH, inline="always")
def _pair_sweep2(X, p, q0, q1, j0, j1, a0, b0, c0, a1, b1, c1, G, cw, Ls, Ds):
    """Row ``p`` against rows ``q0`` and ``q1`` of ``X`` over the columns [j0, j1).

    ``X`` float64 (rows, mp) holds the rows as 0.0/1.0; ``(a0, b0, c0)`` and
    ``(a1, b1, c1)`` are ``(alpha, beta, cpq)`` of the two pairs:
    ``alpha = E_p F_q``, ``beta = E_q F_p``, ``cpq = c_p c_q``.
    Where the rows differ, adds ``cpq sigma`` to ``Ls[j]`` and ``cpq sigma'`` to
    ``Ds[j]`` (pair q0 first, then q1); returns ``R = sum_j x_j cw_j sigma'_j`` of
    each pair, so that ``v_p += c_q R`` and ``v_q -= c_p R``. One multiply and
    one division per pair and column, no exp.
    """
    # Indices are unsigned (the callers pass np.uint64): numba then emits no
    # negative-index wraparound select per access, and the loop vectorizes.
    # Rows are read in place, not as row views: a view made in a loop costs
    # two reference-count calls, which dominate such short sweeps.
    R0 = 0.0
    R1 = 0.0
    for j in range(j0, j1):
        xp = X[p, j]
        x0 = xp - X[q0, j]
        x1 = xp - X[q1, j]
        g = G[j]
        t0 = (a0 if x0 > 0.0 else b0) * g
        t1 = (a1 if x1 > 0.0 else b1) * g
        sg0 = 1.0 / (1.0 + t0)
        sg1 = 1.0 / (1.0 + t1)
        d0 = (t0 * sg0) * sg0
        d1 = (t1 * sg1) * sg1
        # c (x^2): a select, not two multiplies (same values; the multiplies
        # are what bounds this loop)
        cx0 = c0 if x0 != 0.0 else 0.0
        cx1 = c1 if x1 != 0.0 else 0.0
        Ls[j] = (Ls[j] + cx0 * sg0) + cx1 * sg1
        Ds[j] = (Ds[j] + cx0 * d0) + cx1 * d1
        cwj = cw[j]
        R0 += x0 * (cwj * d0)
        R1 += x1 * (cwj * d1)
    return R0, R1


def _row_pair_blocks(X, c, E, F, G, cw, Ls, Ds, vpart):
    """All row pairs over each block of ROW_PAIR_BLOCK columns (serial or prange build).

    ``X`` (n + 1, mp): the n rows, then a zero row. Row p meets rows q > p two at
    a time (shared loads of row p and of the column data); an odd one out is
    paired with the zero row at cost zero (``cpq = 0`` and ``x = 0``: exact
    zeros). Block b fills ``Ls``/``Ds`` on its columns and its own partial
    ``vpart[b]`` (n,), so blocks share no output.
    """
    n = X.shape[0] - 1
    mp = X.shape[1]
    for b in prange(vpart.shape[0]):
        j0 = np.uint64(b * ROW_PAIR_BLOCK)
        j1 = np.uint64(min(b * ROW_PAIR_BLOCK + ROW_PAIR_BLOCK, mp))
        for i in range(n):
            vpart[b, i] = 0.0
        for j in range(j0, j1):
            Ls[j] = 0.0
            Ds[j] = 0.0
        for p in range(n - 1):
            cp = c[p]
            vp = 0.0
            for q in range(p + 1, n, 2):
                q1 = min(q + 1, n)  # n: the zero row
                a1 = 1.0
                b1 = 1.0
                c1 = 0.0
                if q1 < n:
                    a1 = E[p] * F[q1]
                    b1 = E[q1] * F[p]
                    c1 = cp * c[q1]
                R0, R1 = _pair_sweep2(
                    X,
                    np.uint64(p),
                    np.uint64(q),
                    np.uint64(q1),
                    j0,
                    j1,
                    E[p] * F[q],
                    E[q] * F[p],
                    cp * c[q],
                    a1,
                    b1,
                    c1,
                    G,
                    cw,
                    Ls,
                    Ds,
                )
                vp += c[q] * R0
                vpart[b, q] -= cp * R0
                if q1 < n:
                    vp += c[q1] * R1
                    vpart[b, q1] -= cp * R1
            vpart[b, p] += vp


# fast-math: the flags of the inlined pair sweep (the rest is sums in a fixed
# order, run alike by both builds)
_row_pair_blocks, _row_pair_blocks_parallel = _serial_and_parallel(
    _row_pair_blocks, fastmath=_VEC_MATH
)


@_jit(fastmath=_VEC_MATH)
def _row_dot(X, i, w):
    """``sum_j X[i, j] w[j]`` over ``j < len(w)`` (a vectorized sum)."""
    acc = 0.0
    for j in range(w.shape[0]):
        acc += X[i, j] * w[j]
    return acc


@_jit()
def _surrogate_rows(X, PF, w, gamma, c, L, grad, parallel):
    """The surrogate by row pairs on the layout of :func:`_surrogate_layout`.

    ``X`` float64 (n + 1, mp): the rows as 0.0/1.0 then a zero row, and ``PF``
    float64 (mp,), both padded with zero columns; ``w`` (m,). Fills ``L``,
    ``grad`` (m,) and returns ``(J, True)``; returns ``(0.0, False)`` without
    touching them when some ``exp(-z)`` could overflow (the caller then runs
    :func:`surrogate_bt`). O(n^2 mp).
    """
    n = X.shape[0] - 1
    mp = X.shape[1]
    m = w.shape[0]
    s = np.empty(n)
    for i in range(n):
        s[i] = _row_dot(X, np.uint64(i), w)
    smin = s.min()
    smax = s.max()
    wmax = 0.0
    for j in range(m):
        wmax = max(wmax, w[j])
    # False for inf/nan spans too
    if not gamma * ((smax - smin) + wmax) <= FAST_SPAN_LIMIT:
        return 0.0, False
    center = 0.5 * (smin + smax)
    E = np.empty(n)
    F = np.empty(n)
    for i in range(n):
        E[i] = -gamma * (s[i] - center)
        F[i] = gamma * (s[i] - center)
    _exp_inplace(E)
    _exp_inplace(F)
    # padding: G = exp(0) = 1, cw = 0, so padded columns add exact zeros
    G = np.zeros(mp)
    cw = np.zeros(mp)
    for j in range(m):
        G[j] = gamma * w[j]
        if PF[j] > 0.0:
            cw[j] = w[j] / PF[j]
    _exp_inplace(G)
    Ls = np.empty(mp)
    Ds = np.empty(mp)
    vpart = np.empty(((mp + ROW_PAIR_BLOCK - 1) // ROW_PAIR_BLOCK, n))
    if parallel and vpart.shape[0] > 1:  # one block: threads would only add a launch
        _row_pair_blocks_parallel(X, c, E, F, G, cw, Ls, Ds, vpart)
    else:
        _row_pair_blocks(X, c, E, F, G, cw, Ls, Ds, vpart)
    # partials summed in block order: the bits do not depend on the thread count
    cv = np.zeros(n)
    for b in range(vpart.shape[0]):
        for i in range(n):
            cv[i] += vpart[b, i]
    # (B^T (c v))_j accumulated row by row, along the contiguous columns
    bv = np.zeros(mp)
    for i in range(n):
        ci = c[i] * cv[i]
        for j in range(mp):
            bv[j] += ci * X[i, j]
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
def _row_pair_matrix(BT, mp):
    """The row-pair layout of the transposed copy ``BT`` (mq, n) uint8: float64
    (n + 1, mp), ``X[i, q] = BT[q, i]`` (0.0/1.0), zero padding columns and a
    zero last row. O(n mp)."""
    mq, n = BT.shape
    X = np.zeros((n + 1, mp))
    # row by row: contiguous writes (column by column, every write would be a
    # cache miss of its own)
    for i in range(n):
        for q in range(mq):
            X[i, q] = 1.0 if BT[q, i] != 0 else 0.0
    return X


@_jit()
def _surrogate_layout(B, cols, c):
    """The data of every surrogate evaluation on columns ``cols`` of ``B`` (rows with
    multiplicities ``c`` float64 (n,), all > 0): ``(BT, X, PF)``.

    ``BT`` (len(cols), n) uint8: the transposed copy the per-column kernel reads.
    ``X`` float64 (n + 1, mp), the columns zero-padded to mp (a multiple of
    LANES) (:func:`_row_pair_matrix`), and ``PF`` (mp,) float64 ``|P_j| |F_j|``
    with multiplicities: the row-pair layout, with no rows when the per-column
    kernel costs less (many distinct rows, or few pairs per column). O(n m).
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
        X = _row_pair_matrix(BT, mp)
    else:
        X = np.zeros((0, mp))
    return BT, X, PF


@_jit()
def _surrogate_eval(BT, X, PF, w, gamma, c, L, grad, parallel):
    """One surrogate evaluation on a :func:`_surrogate_layout`: fills ``L``, ``grad``; returns J."""
    if X.shape[0] > 0:
        J, done = _surrogate_rows(X, PF, w, gamma, c, L, grad, parallel)
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
    BT, X, PF = _surrogate_layout(Bd, np.arange(B.shape[1]), c)
    return _surrogate_eval(BT, X, PF, w, gamma, c, L, grad, parallel)
