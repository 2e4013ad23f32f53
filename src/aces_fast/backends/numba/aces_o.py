"""A whole ACES-O Adam run in numba (csrc/kernels/aces_o.cpp's counterpart)."""

from __future__ import annotations

import numpy as np

from ._jit import _jit
from .dedup import distinct_rows
from .surrogate import _surrogate_eval, _surrogate_layout

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
