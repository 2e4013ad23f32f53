"""A whole ACES-O Adam run in numba (csrc/kernels/aces_o.cpp's counterpart)."""

from __future__ import annotations

import numpy as np

from ..._constants import ADAM_BETA1, ADAM_BETA2, ADAM_EPS
from ..._constants import SNAP_RTOL as _SNAP_RTOL  # a compile-time constant in the kernels
from . import _cancel
from ._jit import _exp_inplace, _jit
from .dedup import distinct_rows
from .surrogate import _surrogate_eval, _surrogate_layout

#: classes up to this size are sorted in place by insertion (no allocation);
#: larger ones (the one class of the first step, say) by a merge sort
_INSERTION_SORT_MAX = 32


@_jit()
def _snap_classes(x, members, bounds, n_classes, tol, next_members, next_bounds):
    """Snap ``x`` within the classes of symmetric columns, refining them (docs/contract.rst §7.5).

    Class ``c`` holds positions ``members[bounds[c]:bounds[c + 1]]`` (two or
    more). Within each, ``x`` is sorted and every run of neighbours at most
    ``tol`` apart takes the run's smallest value (a NaN joins no run); runs of
    two or more are written to ``next_members`` / ``next_bounds`` as the new
    classes, whose count is returned. O(c log c) per class of c positions.
    """
    n_next = 0
    written = 0
    next_bounds[0] = 0
    if n_classes == 0:
        return 0
    # one scratch for every class: classes persist for many steps, and
    # allocating per class and step would cost more than the sorting
    cap = 0
    for c in range(n_classes):
        cap = max(cap, bounds[c + 1] - bounds[c])
    p = np.empty(cap, dtype=np.int64)
    key = np.empty(cap)
    for c in range(n_classes):
        b0 = bounds[c]
        length = bounds[c + 1] - b0
        if length <= _INSERTION_SORT_MAX:
            # stable insertion sort by value, NaN last (it joins no run either way)
            for k in range(length):
                pk = members[b0 + k]
                v = x[pk]
                if np.isnan(v):
                    v = np.inf
                i = k
                while i > 0 and key[i - 1] > v:
                    key[i] = key[i - 1]
                    p[i] = p[i - 1]
                    i -= 1
                key[i] = v
                p[i] = pk
        else:
            for k in range(length):
                v = x[members[b0 + k]]
                key[k] = np.inf if np.isnan(v) else v
            order = np.argsort(key[:length], kind="mergesort")
            for k in range(length):
                p[k] = members[b0 + order[k]]
        run = 0
        prev = x[p[0]]  # the previous member's unsnapped value
        for i in range(1, length + 1):
            cur = x[p[i]] if i < length else 0.0
            if i < length and cur - prev <= tol:
                prev = cur
                continue
            if i - run >= 2:
                v = x[p[run]]
                for k in range(run, i):
                    x[p[k]] = v
                    next_members[written] = p[k]
                    written += 1
                n_next += 1
                next_bounds[n_next] = written
            run = i
            prev = cur
    return n_next


@_jit()
def _softmax(logits, w):
    mx = logits[0]
    for k in range(1, logits.shape[0]):
        mx = max(mx, logits[k])
    for k in range(logits.shape[0]):
        w[k] = logits[k] - mx
    _exp_inplace(w)
    tot = 0.0
    for k in range(logits.shape[0]):
        tot += w[k]
    for k in range(logits.shape[0]):
        w[k] = w[k] / tot


@_jit()
def _aces_o_setup(B, logits0, active, cnt):
    """The active columns, the surrogate layout on the distinct rows and the starting
    logits of :func:`aces_o_fit`: ``(cols, BT, X, PF, c, logits)``. O(n m log n)."""
    cols = np.nonzero(active)[0]
    ma = cols.shape[0]
    Bd, cd = distinct_rows(B, cnt)
    c = cd.astype(np.float64)
    BT, X, PF = _surrogate_layout(Bd, cols, c)
    logits = np.empty(ma)
    for k in range(ma):
        logits[k] = logits0[cols[k]]
    return cols, BT, X, PF, c, logits


@_jit()
def _aces_o_classes(logits):
    """The classes of symmetric columns at the start: one class of all active columns,
    split by the starting logits (:func:`_snap_classes`, which snaps ``logits``).

    Returns ``(mem, bnd, n_classes)``: the classes in row 0 of ``mem`` (2, ma) and
    ``bnd`` (2, ma + 1); row 1 is the buffer the next refinement writes."""
    ma = logits.shape[0]
    mem = np.empty((2, ma), dtype=np.int64)
    bnd = np.zeros((2, ma + 1), dtype=np.int64)
    for k in range(ma):
        mem[1, k] = k
    bnd[1, 1] = ma
    scale = 0.0
    for k in range(ma):
        if np.isfinite(logits[k]):
            scale = max(scale, abs(logits[k]))
    n_classes = _snap_classes(logits, mem[1], bnd[1], 1, _SNAP_RTOL * scale, mem[0], bnd[0])
    return mem, bnd, n_classes


@_jit()
def _aces_o_steps(
    BT,
    X,
    PF,
    c,
    gamma,
    lr,
    steps,
    t0,
    t1,
    logits,
    m1,
    m2,
    w,
    L,
    grad,
    objective,
    mem,
    bnd,
    n_classes,
    cur,
    parallel,
):
    """Adam iterations ``t0 <= t < t1`` of :func:`aces_o_fit` (``1 <= t <= steps + 1``;
    iteration ``steps + 1`` only evaluates ``J``), updating the state ``logits``, ``m1``,
    ``m2`` (ma,) in place and filling ``objective[t0 - 1 : t1 - 1]``. The symmetry
    classes are ``n_classes`` in row ``cur`` of ``mem``/``bnd``; returns the new
    ``(n_classes, cur)``. Any split of ``[1, steps + 2)`` into consecutive calls gives
    the bits of one call."""
    ma = logits.shape[0]
    snap_tol = _SNAP_RTOL * (0.5 + 0.75 * abs(gamma))
    beta1 = ADAM_BETA1
    beta2 = ADAM_BETA2
    eps = ADAM_EPS
    for t in range(t0, t1):
        _softmax(logits, w)
        objective[t - 1] = _surrogate_eval(BT, X, PF, w, gamma, c, L, grad, parallel)
        if t == steps + 1:
            break
        if n_classes > 0:
            n_classes = _snap_classes(
                grad, mem[cur], bnd[cur], n_classes, snap_tol, mem[1 - cur], bnd[1 - cur]
            )
            cur = 1 - cur
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
    return n_classes, cur


@_jit()
def _aces_o_weights(logits, cols, m):
    """The weights (m,) of the final logits: softmax on ``cols``, 0 elsewhere."""
    weights = np.zeros(m)
    w = np.empty(logits.shape[0])
    _softmax(logits, w)
    for k in range(cols.shape[0]):
        weights[cols[k]] = w[k]
    return weights


@_jit()
def _aces_o_fit_kernel(B, logits0, active, gamma, lr, steps, cnt, parallel):
    """:func:`aces_o_fit` in one kernel call (not interruptible)."""
    m = B.shape[1]
    objective = np.zeros(steps + 1)
    if not active.any():
        return np.zeros(m), objective
    cols, BT, X, PF, c, logits = _aces_o_setup(B, logits0, active, cnt)
    ma = cols.shape[0]
    mem, bnd, n_classes = _aces_o_classes(logits)
    _aces_o_steps(
        BT,
        X,
        PF,
        c,
        gamma,
        lr,
        steps,
        1,
        steps + 2,
        logits,
        np.zeros(ma),
        np.zeros(ma),
        np.empty(ma),
        np.empty(ma),
        np.empty(ma),
        objective,
        mem,
        bnd,
        n_classes,
        0,
        parallel,
    )
    return _aces_o_weights(logits, cols, m), objective


#: Pair terms (about a nanosecond each) per kernel call of an interruptible fit:
#: Ctrl-C waits for at most about one such call (or one surrogate evaluation, if
#: larger); fits below it run in one call, without the Python loop.
CHUNK_PAIRS = 5 * 10**7


def aces_o_fit(B, logits0, active, gamma, lr, steps, cnt, parallel):
    """A whole ACES-O run: Adam (PyTorch semantics) on ``-J(softmax(logits))``.

    ``B`` uint8 (n, m); ``logits0`` float64 (m,); ``active`` uint8 (m,) (inactive
    columns keep weight 0 and are left out of the surrogate: with ``w_j = 0`` they
    change neither scores, J nor any active gradient); ``cnt`` int64 (n,) row
    multiplicities (0 = absent; identical rows are merged first, as in
    :func:`surrogate`).
    Returns ``(weights (m,), objective (steps + 1,))`` with ``objective[t] = J(w_t)``.
    Symmetric columns stay exactly equal (docs/contract.rst §7.5): classes of equal
    starting logits, ``dJ/dw`` snapped within them every step (:func:`_snap_classes`,
    tolerance ``1e-10 (1/2 + 3|gamma|/4)``), as in the C++ fit.
    O(n m log n + steps * surrogate cost) on the active columns; the layout is
    built once.

    A fit of more than :data:`CHUNK_PAIRS` pair terms runs as a Python loop over
    kernel calls of about that many (whole Adam steps, the Adam state and the
    symmetry classes carried between them, so the bits are those of one call):
    between them Ctrl-C raises ``KeyboardInterrupt`` on the main thread and a
    stopped batch stops its helper threads (:mod:`._cancel`).
    """
    m = B.shape[1]
    ma = int(np.count_nonzero(active))
    n = int(np.count_nonzero(cnt))
    per_eval = max(1, ma * (n // 2) * (n - n // 2))  # at most sum_j |P_j||F_j|
    if ma == 0 or per_eval * (steps + 1) <= CHUNK_PAIRS:
        return _aces_o_fit_kernel(B, logits0, active, gamma, lr, steps, cnt, parallel)
    _cancel.check()
    cols, BT, X, PF, c, logits = _aces_o_setup(B, logits0, active, cnt)
    mem, bnd, n_classes = _aces_o_classes(logits)
    cur = 0
    nd = BT.shape[1]  # distinct rows
    per_eval = max(1, ma * (nd // 2) * (nd - nd // 2))
    chunk = max(1, CHUNK_PAIRS // per_eval)
    m1, m2 = np.zeros(ma), np.zeros(ma)
    w, L, grad = np.empty(ma), np.empty(ma), np.empty(ma)
    objective = np.zeros(steps + 1)
    for t0 in range(1, steps + 2, chunk):
        _cancel.check()
        n_classes, cur = _aces_o_steps(
            BT,
            X,
            PF,
            c,
            gamma,
            lr,
            steps,
            t0,
            min(t0 + chunk, steps + 2),
            logits,
            m1,
            m2,
            w,
            L,
            grad,
            objective,
            mem,
            bnd,
            n_classes,
            cur,
            parallel,
        )
    return _aces_o_weights(logits, cols, m), objective
