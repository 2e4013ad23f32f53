"""The backend interface and the method glue shared by the NumPy-array backends.

A backend supplies three kernels (SPEC sections 2 and 3):

* :meth:`Backend.loo_auc` -- LOO-AUC of every column, exact ties;
* :meth:`Backend.surrogate` -- logistic surrogate values, ``J`` and ``dJ/dw``;
* :meth:`Backend.aces_o_fit` -- a whole ACES-O Adam run on a (top-k) matrix.

Everything else -- constant columns, weight formulas, the top-k prefilter,
scores, tie-exact orders -- is written once here on NumPy arrays and reused by
the ``cpp``, ``numba`` and ``numpy`` backends. A backend that keeps data on
another device (torch) overrides the method-level entry points instead.

Arguments reaching a backend are already validated: ``B`` is a C-contiguous
``uint8`` (n, m) array of 0/1 with n >= 1, weights are finite non-negative
float64 (m,), hyperparameters are checked scalars.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from .. import consensus
from .._validation import as_pass_matrix, as_weights
from ..result import RerankResult, SurrogateResult


class BackendUnavailableError(RuntimeError):
    """A backend was requested that cannot run here; ``reason`` says why."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"backend {name!r} is unavailable: {reason}")
        self.name = name
        self.reason = reason


# ---------------------------------------------------------------------------
# small NumPy helpers used by the glue (and by tests)


def column_sums(B: np.ndarray) -> np.ndarray:
    """Number of passing candidates per test, int64 (m,)."""
    return B.sum(axis=0, dtype=np.int64)


def nonconstant_mask(B: np.ndarray) -> np.ndarray:
    """bool (m,): True for tests that some candidate passes and some fails."""
    c = column_sums(B)
    return (c > 0) & (c < B.shape[0])


def normalized(w: np.ndarray) -> np.ndarray:
    """``w / w.sum()``, or all zeros when the sum is 0."""
    total = w.sum()
    return w / total if total > 0 else np.zeros_like(w)


def snap_ties(s: np.ndarray, tol: float) -> np.ndarray:
    """Make scores that differ by at most ``tol`` exactly equal.

    Sums of float weights that are equal in exact arithmetic can differ in the
    last bits depending on summation order; evaluation breaks ties at random, so
    such rounding noise would silently change Pass@k. Scores are sorted and each
    run of neighbours closer than ``tol`` gets the run's smallest value.
    O(n log n).
    """
    if s.shape[0] < 2 or tol <= 0:
        return s
    idx = np.argsort(s, kind="stable")
    sv = s[idx]
    starts = np.empty(sv.shape[0], dtype=bool)
    starts[0] = True
    np.greater(np.diff(sv), tol, out=starts[1:])
    group = np.cumsum(starts) - 1
    out = np.empty_like(s)
    out[idx] = sv[starts][group]
    return out


def codet_method_name(exponent: float) -> str:
    """The ``rerank`` name of CodeT with this exponent: 1 is ``"codet-linear"``."""
    return "codet-linear" if exponent == 1 else "codet"


def descending_order(scores: np.ndarray) -> np.ndarray:
    """Indices sorting ``scores`` descending, ties by lower index (int64)."""
    return np.argsort(-scores, kind="stable").astype(np.int64, copy=False)


def top_k_rows(B: np.ndarray, top_k: Optional[int]) -> np.ndarray:
    """Indices (ascending) of the ``top_k`` rows with the largest row sums.

    Stable: among equal row sums the lower index wins. ``None`` or ``top_k >= n``
    keeps every row.
    """
    n = B.shape[0]
    if top_k is None or top_k >= n:
        return np.arange(n)
    rs = B.sum(axis=1, dtype=np.int64)
    keep = np.argsort(-rs, kind="stable")[:top_k]
    return np.sort(keep)


class Backend:
    """Base class: kernels to implement, method glue on NumPy arrays provided."""

    #: registry name of the backend
    name: str = "base"

    # -- kernels ---------------------------------------------------------------

    def loo_auc(self, B: np.ndarray, weights: Optional[np.ndarray], tie_tol: float,
                counts: Optional[np.ndarray] = None) -> np.ndarray:
        """LOO-AUC of every column: float64 (m,), ``nan`` for constant columns.

        ``weights=None`` means uniform integer weights. ``counts`` (int64 (n,))
        gives row multiplicities: a row with count c acts as c identical rows.
        """
        raise NotImplementedError

    def surrogate(self, B: np.ndarray, weights: np.ndarray, gamma: float,
                  counts: Optional[np.ndarray] = None) -> Tuple[np.ndarray, float, np.ndarray]:
        """``(L (m,), J, dJ/dw (m,))`` of SPEC section 3; ``L_j = nan`` if P_j or F_j is empty."""
        raise NotImplementedError

    def aces_o_fit(self, B: np.ndarray, logits0: np.ndarray, active: np.ndarray,
                   gamma: float, lr: float, steps: int,
                   counts: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
        """Run ACES-O's Adam ascent on ``B``; return ``(weights (m,), objective (steps+1,))``."""
        raise NotImplementedError

    def row_scores(self, B: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``B @ w`` as float64 (n,), O(n m).

        ``B @ w`` on a uint8 matrix first casts all of ``B`` to float64 (8x the
        input); blocks of rows keep that temporary at about 32 MiB.
        """
        n, m = B.shape
        rows = max(1, (1 << 22) // max(m, 1))
        if n <= rows:
            return B @ w
        out = np.empty(n)
        for start in range(0, n, rows):
            out[start:start + rows] = B[start:start + rows] @ w
        return out

    def info(self) -> dict:
        """Versions and settings reported by :func:`aces_fast.show_config`."""
        return {}

    def warmup(self) -> dict:
        """Compile or load whatever the first call would (JIT backends); no-op here.

        Call before timing or serving so no measured call pays one-off costs.
        """
        return {}

    # -- conversions (overridden by device backends) ----------------------------

    def prepare(self, B: Any) -> np.ndarray:
        """Validate the user's pass matrix into this backend's working form."""
        return as_pass_matrix(B)

    def prepare_weights(self, w: Any, m: int) -> np.ndarray:
        """Validate user weights for an ``m``-test matrix into float64 (m,)."""
        return as_weights(w, m)

    def _result(self, B: np.ndarray, scores: np.ndarray, weights: Optional[np.ndarray],
                method: str, **extra: Any) -> RerankResult:
        return RerankResult(scores=scores, weights=weights, order=descending_order(scores),
                            method=method, backend=self.name, **extra)

    def _weighted_result(self, B: np.ndarray, w: np.ndarray, method: str, tie_tol: float,
                         **extra: Any) -> RerankResult:
        w = normalized(w)
        scores = snap_ties(self.row_scores(B, w), tie_tol * float(w.sum()))
        return self._result(B, scores, w, method, **extra)

    # -- methods (SPEC section 3) -----------------------------------------------

    def majority_vote(self, B: np.ndarray, tie_tol: float = 1e-9) -> RerankResult:
        w = nonconstant_mask(B).astype(np.float64)
        return self._weighted_result(B, w, "majority", tie_tol)

    def aces_c_weights(self, B: np.ndarray, variant: str, tie_tol: float
                       ) -> Tuple[np.ndarray, np.ndarray, bool]:
        """Unnormalized ACES-C weights, the uniform LOO-AUC, and whether it fell back."""
        L = self.loo_auc(B, None, tie_tol)
        informative = L > 0.5  # nan (constant column) compares False
        if variant == "weighted":
            p = column_sums(B) / B.shape[0]
            w = np.where(informative, (L - 0.5) * p * (1.0 - p), 0.0)
        else:
            w = informative.astype(np.float64)
        fallback = not bool(np.any(w > 0))
        if fallback:
            w = nonconstant_mask(B).astype(np.float64)
        return w, L, fallback

    def aces_c(self, B: np.ndarray, variant: str = "weighted", tie_tol: float = 1e-9
               ) -> RerankResult:
        w, L, fallback = self.aces_c_weights(B, variant, tie_tol)
        method = "aces-c" if variant == "weighted" else "aces-c-filter"
        return self._weighted_result(B, w, method, tie_tol, loo_auc=L, fallback=fallback,
                                     info={"variant": variant})

    def aces_o(self, B: np.ndarray, gamma: float, lr: float, steps: int,
               top_k: Optional[int], init: str, tie_tol: float = 1e-9) -> RerankResult:
        return self._aces_o_glue(B, gamma, lr, steps, top_k, init, tie_tol, self.aces_o_fit)

    def _aces_o_glue(self, B: np.ndarray, gamma: float, lr: float, steps: int,
                     top_k: Optional[int], init: str, tie_tol: float, fit: Any,
                     **extra_info: Any) -> RerankResult:
        """ACES-O around an optimizer ``fit`` with the signature of :meth:`aces_o_fit`:
        starting logits, top-k prefilter, then scores of every candidate."""
        active = nonconstant_mask(B)
        logits0 = np.zeros(B.shape[1])
        if init == "aces-c":
            wc, _, _ = self.aces_c_weights(B, "weighted", tie_tol)
            logits0 = np.where(active, np.log(normalized(wc) + 1e-3), 0.0)
        rows = top_k_rows(B, top_k)
        Bk = B if rows.shape[0] == B.shape[0] else np.ascontiguousarray(B[rows])
        w, objective = fit(Bk, logits0, active.astype(np.uint8), gamma, lr, steps)
        info = {"gamma": gamma, "lr": lr, "steps": steps, "top_k": top_k, "init": init,
                "rows": rows, **extra_info}
        method = "aces-o-warm" if init == "aces-c" else "aces-o"
        return self._weighted_result(B, w, method, tie_tol, objective=objective, info=info)

    def codet(self, B: np.ndarray, exponent: float) -> RerankResult:
        scores = consensus.codet_scores(B, exponent)
        return self._result(B, scores, None, codet_method_name(exponent),
                            info={"exponent": exponent})

    def b4(self, B: np.ndarray, alpha: float, beta0: float) -> RerankResult:
        scores = consensus.b4_scores(B, alpha, beta0)
        return self._result(B, scores, None, "b4", info={"alpha": alpha, "beta0": beta0})

    # -- public kernels with result packaging ----------------------------------

    def loo_auc_public(self, B: np.ndarray, weights: Optional[np.ndarray],
                       tie_tol: float) -> np.ndarray:
        return self.loo_auc(B, weights, tie_tol)

    def surrogate_public(self, B: np.ndarray, weights: np.ndarray,
                         gamma: float) -> SurrogateResult:
        L, J, g = self.surrogate(B, weights, gamma)
        return SurrogateResult(L, float(J), g)
