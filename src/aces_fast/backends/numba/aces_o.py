"""A whole ACES-O Adam run in numba (csrc/kernels/aces_o.cpp's counterpart)."""

from __future__ import annotations

import numpy as np

from ._jit import _jit
from .dedup import distinct_rows
from .surrogate import _surrogate_eval, _surrogate_layout

#: symmetry snapping tolerance relative to the value scale (numpy.SNAP_RTOL)
_SNAP_RTOL = 1e-10


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
    for c in range(n_classes):
        seg = members[bounds[c]:bounds[c + 1]]
        key = x[seg]
        for k in range(key.shape[0]):
            if np.isnan(key[k]):
                key[k] = np.inf  # NaN last (it joins no run either way)
        p = seg[np.argsort(key, kind="mergesort")]
        length = p.shape[0]
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
    Symmetric columns stay exactly equal (docs/contract.rst §7.5): classes of equal
    starting logits, ``dJ/dw`` snapped within them every step (:func:`_snap_classes`,
    tolerance ``1e-10 (1/2 + 3|gamma|/4)``), as in the C++ fit.
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
    # one class of all active columns, split by the starting logits
    members = np.arange(ma)
    bounds = np.zeros(ma + 1, dtype=np.int64)
    bounds[1] = ma
    next_members = np.empty(ma, dtype=np.int64)
    next_bounds = np.empty(ma + 1, dtype=np.int64)
    scale = 0.0
    for k in range(ma):
        if np.isfinite(logits[k]):
            scale = max(scale, abs(logits[k]))
    n_classes = _snap_classes(logits, members, bounds, 1, _SNAP_RTOL * scale,
                              next_members, next_bounds)
    members, next_members = next_members, members
    bounds, next_bounds = next_bounds, bounds
    snap_tol = _SNAP_RTOL * (0.5 + 0.75 * abs(gamma))
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
        if n_classes > 0:
            n_classes = _snap_classes(grad, members, bounds, n_classes, snap_tol,
                                      next_members, next_bounds)
            members, next_members = next_members, members
            bounds, next_bounds = next_bounds, bounds
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
