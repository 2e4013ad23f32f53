"""``numpy``: the plain, readable reference kernels of docs/contract.rst §2–§3.

Written for clarity, not speed: one Python iteration per test. The methods
built on them are :mod:`aces_fast._semantics` on NumPy arrays (the primitives
of :class:`~aces_fast.backends.base.ArrayBackend`). Every other backend is
tested against this one, and this one against brute-force pairwise definitions
in ``tests/``.
"""

from __future__ import annotations

import math

import numpy as np

from .base import ArrayBackend, Backend


def _counts_or_ones(counts: np.ndarray | None, n: int) -> np.ndarray:
    return np.ones(n, dtype=np.float64) if counts is None else counts.astype(np.float64)


# The ACES-O path sums without BLAS (docs/contract.rst §7.5): a BLAS dot or
# matrix-vector product may change its summation order with the thread count,
# the CPU or the library's state, and ACES-O amplifies such last-bit
# differences near symmetric tests (an unstable equilibrium) into O(1) ones. NumPy's own reductions
# (np.add.reduce: pairwise along a contiguous axis, row after row along axis 0)
# depend only on the shapes, so the reference gives the same bits every run.
# The same holds for its scores (NumpyBackend.row_scores) and transcendental
# functions: np.exp and np.log take CPU-specific code paths (NumPy's AVX-512
# float64 exp and log round differently from the C library's), so the reference
# uses _exp below (IEEE multiplies and adds only) and the C library's log, and
# its results are the same on every CPU and under any BLAS (tests/test_golden.py).


def _row_sums(B: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``B @ w`` (float64 (n,)) in a fixed order: each row's products reduced by
    NumPy's pairwise sum. O(n m), an (n, m) float64 temporary."""
    return np.add.reduce(B * w[None, :], axis=1)


def _column_sums(B: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``B.T @ x`` (float64 (m,)) in a fixed order: the rows added one after the
    other. O(n m), an (n, m) float64 temporary."""
    return np.add.reduce(B * x[:, None], axis=0)


_LN2_HI = 6.93147180369123816490e-01  # 32 significant bits: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_SHIFTER = 6755399441055744.0  # 1.5 * 2^52: adding it rounds to an integer
# 1/13!, ..., 1/2!, 1, 1
_EXP_COEFFS = (
    1.6059043836821613e-10,
    2.08767569878681e-09,
    2.505210838544172e-08,
    2.755731922398589e-07,
    2.7557319223985893e-06,
    2.48015873015873e-05,
    0.0001984126984126984,
    0.001388888888888889,
    0.008333333333333333,
    0.041666666666666664,
    0.16666666666666666,
    0.5,
    1.0,
    1.0,
)


def _exp(x: np.ndarray) -> np.ndarray:
    """``exp(x)`` element-wise for ``x <= 709`` (float64; NaN stays NaN, below
    about -745 +0.0), with IEEE multiplies and adds only, so the same bits on
    every CPU: x = k ln2 + r with k = round(x / ln2), exp(r) by its degree-13
    Taylor polynomial (truncation < 5e-18 relative) in Horner form, times 2^k
    formed in the exponent bits as 2^(k//2) 2^(k - k//2) (subnormal results
    round instead of wrapping). About 1 ulp; the algorithm of the C++ kernels'
    exp8 (csrc/simd/lanes.hpp). O(len(x)) with ~35 array passes."""
    x = np.maximum(np.asarray(x, dtype=np.float64), -746.0)  # NaN propagates
    kd0 = x * 1.4426950408889634 + _SHIFTER
    with np.errstate(over="ignore", invalid="ignore"):  # NaN lanes: garbage k, NaN p
        ki = kd0.view(np.int64) - np.float64(_SHIFTER).view(np.int64)
        kd = kd0 - _SHIFTER
        r = (x - kd * _LN2_HI) - kd * _LN2_LO
        p = np.full_like(r, _EXP_COEFFS[0])
        for c in _EXP_COEFFS[1:]:
            p = p * r + c
        k1 = ki >> 1
        s1 = ((k1 + 1023) << 52).view(np.float64)
        s2 = ((ki - k1 + 1023) << 52).view(np.float64)
        return (p * s1) * s2


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``<a, b>`` of two float64 vectors in a fixed order (pairwise sum)."""
    return float(np.add.reduce(a * b))


def loo_auc(
    B: np.ndarray, weights: np.ndarray | None, tie_tol: float, counts: np.ndarray | None = None
) -> np.ndarray:
    """LOO-AUC of every test, float64 (m,); see :meth:`Backend.loo_auc`.

    For test ``j`` the passers' leave-one-out scores are ``s_p - w_j`` and the
    failers' are ``s_f``. With the failers' scores sorted, ``searchsorted``
    counts for each passer the failers strictly below (wins) and within the tie
    tolerance (ties). Uniform weights use integer scores and tolerance 0.
    O(m n log n).
    """
    n, m = B.shape
    c = _counts_or_ones(counts, n)
    if weights is None:
        s = B.sum(axis=1, dtype=np.int64).astype(np.float64)
        w = np.ones(m)
        tol = 0.0  # integer sums are exact in float64
    else:
        w = weights
        s = _row_sums(B, w)
        tol = tie_tol * float(w.sum())
    out = np.full(m, np.nan)
    for j in range(m):
        passed = (B[:, j] == 1) & (c > 0)
        failed = (B[:, j] == 0) & (c > 0)
        if not passed.any() or not failed.any():
            continue
        x = s[passed] - w[j]
        order = np.argsort(s[failed], kind="stable")
        f_sorted = s[failed][order]
        f_cum = np.concatenate([[0.0], np.cumsum(c[failed][order])])
        below = f_cum[np.searchsorted(f_sorted, x - tol, side="left")]
        at_or_below = f_cum[np.searchsorted(f_sorted, x + tol, side="right")]
        wins = np.dot(c[passed], below)
        ties = np.dot(c[passed], at_or_below - below)
        out[j] = (wins + 0.5 * ties) / (c[passed].sum() * c[failed].sum())
    return out


def _sigmoid(z: np.ndarray) -> np.ndarray:
    # two-branch form never overflows
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + _exp(-z[pos]))
    ez = _exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def surrogate(
    B: np.ndarray, weights: np.ndarray, gamma: float, counts: np.ndarray | None = None
) -> tuple[np.ndarray, float, np.ndarray]:
    """Logistic surrogate LOO-AUC, ``J`` and the analytic ``dJ/dw`` (docs/contract.rst §3).

    Per test ``j`` the |P_j| x |F_j| matrix of ``sigma(gamma (s_p - s_f - w_j))`` is
    formed explicitly (weighted by row multiplicities). Cost
    O(sum_j |P_j||F_j| + n m).
    """
    n, m = B.shape
    c = _counts_or_ones(counts, n)
    w = weights
    s = _row_sums(B, w)
    L = np.full(m, np.nan)
    grad = np.zeros(m)
    v = np.zeros(n)  # v_i = sum_j c_j u^j_i, per distinct row (multiplicity applied later)
    J = 0.0
    for j in range(m):
        P = np.flatnonzero((B[:, j] == 1) & (c > 0))
        F = np.flatnonzero((B[:, j] == 0) & (c > 0))
        if P.size == 0 or F.size == 0:
            continue
        pair_w = np.outer(c[P], c[F])  # multiplicity of each (p, f) pair
        n_pairs = pair_w.sum()
        sig = _sigmoid(gamma * (s[P][:, None] - s[F][None, :] - w[j]))
        dsig = sig * (1.0 - sig) * pair_w
        L[j] = (sig * pair_w).sum() / n_pairs
        J += w[j] * (L[j] - 0.5)
        cj = w[j] / n_pairs
        grad[j] += (L[j] - 0.5) - gamma * cj * dsig.sum()
        # u^j per distinct row: a passer p gets sum_f c_f sigma'_{pf}, a failer minus
        # sum_p c_p sigma'_{pf}; the row's own multiplicity enters through B^T (c * v).
        v[P] += cj * dsig.sum(axis=1) / c[P]
        v[F] -= cj * dsig.sum(axis=0) / c[F]
    grad += gamma * _column_sums(B, c * v)
    return L, J, grad


def softmax_masked(logits: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Softmax over the active entries; inactive entries get exactly 0."""
    w = np.zeros_like(logits)
    if active.any():
        z = logits[active] - logits[active].max()
        e = _exp(z)
        w[active] = e / e.sum()
    return w


from .._constants import ADAM_BETA1, ADAM_BETA2, ADAM_EPS, SNAP_RTOL  # noqa: E402


def logit_snap_tol(logits: np.ndarray, rtol: float = SNAP_RTOL) -> float:
    """Snapping tolerance of the starting logits (float (k,)): ``rtol`` times
    their largest finite magnitude (0 when there is none). O(k)."""
    finite = logits[np.isfinite(logits)]
    return rtol * float(np.max(np.abs(finite), initial=0.0))


def gradient_snap_tol(gamma: float, rtol: float = SNAP_RTOL) -> float:
    """Snapping tolerance of ``dJ/dw``: ``rtol`` times ``1/2 + 3|gamma|/4``, the
    bound on ``|dJ/dw_k|`` and on the magnitudes of the terms it sums (``w`` on
    the simplex), which its rounding noise is relative to. Not ``max |dJ/dw|``:
    that is itself noise where the gradient vanishes in exact arithmetic."""
    return rtol * (0.5 + 0.75 * abs(gamma))


def snap_classes(values: np.ndarray, classes: list[np.ndarray], tol: float) -> list[np.ndarray]:
    """Snap ``values`` within classes of columns; return the refined classes.

    ``values`` float64 (m,), changed in place; ``classes`` disjoint index arrays
    of two or more columns each. Within a class the values are sorted, and every
    run of neighbours at most ``tol`` apart takes the run's smallest value (a NaN
    or an infinity joins no run); the runs of two or more columns are the new classes (classes
    only refine). O(c log c) per class of c columns.
    """
    refined = []
    for cls in classes:
        order = cls[np.argsort(values[cls], kind="stable")]
        with np.errstate(invalid="ignore"):  # inf - inf is NaN: no run, as NaN
            breaks = np.flatnonzero(~(np.diff(values[order]) <= tol)) + 1
        for run in np.split(order, breaks):
            if run.size > 1:
                values[run] = values[run[0]]
                refined.append(run)
    return refined


def aces_o_fit(
    B: np.ndarray,
    logits0: np.ndarray,
    active: np.ndarray,
    gamma: float,
    lr: float,
    steps: int,
    counts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """ACES-O: maximize ``J(softmax(l))`` with Adam (PyTorch semantics on ``-J``).

    Returns ``(weights (m,), objective (steps + 1,))`` where ``objective[t]`` is
    ``J`` at the weights after ``t`` updates. Symmetric tests are kept exactly
    equal (docs/contract.rst §7.5): the active columns start in classes of equal
    (snapped) logits, and at every step ``dJ/dw`` is snapped within each class
    by :func:`snap_classes` (tolerance :func:`gradient_snap_tol`), which splits
    the classes whose gradients differ;
    a class's columns then get identical Adam updates. O(steps * surrogate
    cost), plus O(m log m) per step while classes of two or more columns remain.
    """
    active = active.astype(bool)
    logits = logits0.astype(np.float64).copy()
    objective = np.zeros(steps + 1)
    if not active.any():
        return np.zeros_like(logits), objective
    cols = np.flatnonzero(active)
    classes = snap_classes(logits, [cols], logit_snap_tol(logits[cols]))
    tol = gradient_snap_tol(gamma)
    beta1, beta2, eps = ADAM_BETA1, ADAM_BETA2, ADAM_EPS
    m1 = np.zeros_like(logits)
    m2 = np.zeros_like(logits)
    for t in range(1, steps + 2):
        w = softmax_masked(logits, active)
        _, J, g = surrogate(B, w, gamma, counts)
        objective[t - 1] = J
        if t == steps + 1:
            break
        if classes:
            classes = snap_classes(g, classes, tol)
        dl = w * (g - _dot(w, g))
        loss_grad = np.where(active, -dl, 0.0)
        m1 = beta1 * m1 + (1 - beta1) * loss_grad
        m2 = beta2 * m2 + (1 - beta2) * loss_grad * loss_grad
        bc1 = 1 - beta1**t
        bc2 = 1 - beta2**t
        denom = np.sqrt(m2) / np.sqrt(bc2) + eps
        logits = np.where(active, logits - (lr / bc1) * m1 / denom, logits)
    return softmax_masked(logits, active), objective


class NumpyBackend(ArrayBackend):
    """Reference backend on plain NumPy."""

    name = "numpy"

    def loo_auc(self, B, weights, tie_tol, counts=None):
        return loo_auc(B, weights, tie_tol, counts)

    def row_scores(self, B: np.ndarray, w: np.ndarray, plan=None) -> np.ndarray:
        """``B @ w`` without BLAS (a BLAS matrix-vector product's order depends on
        the CPU kernel it picks): each row's products summed pairwise, in blocks
        of rows that keep the float64 temporary at about 32 MiB. O(n m)."""
        n, m = B.shape
        rows = max(1, (1 << 22) // max(m, 1))
        out = np.empty(n)
        for start in range(0, n, rows):
            out[start : start + rows] = _row_sums(B[start : start + rows], w)
        return out

    @staticmethod
    def log(x):
        """The C library's log element by element (np.log has a CPU-specific path)."""
        x = np.asarray(x, dtype=np.float64)
        return np.array(
            [
                math.log(v) if v > 0 else (-math.inf if v == 0 else math.nan)
                for v in x.ravel().tolist()
            ],
            dtype=np.float64,
        ).reshape(x.shape)

    def surrogate(self, B, weights, gamma, counts=None):
        return surrogate(B, weights, gamma, counts)

    def aces_o_fit(self, B, logits0, active, gamma, lr, steps, counts=None, bins=None):
        self.no_bins(bins)
        return aces_o_fit(B, logits0, active, gamma, lr, steps, counts)

    def info(self) -> dict:
        return {"numpy": np.__version__}


def load() -> Backend:
    return NumpyBackend()
