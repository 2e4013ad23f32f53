"""The ranking methods' semantics (docs/contract.rst §3), written once for every Python backend.

Each function computes one method from a validated pass matrix ``B`` against a
backend object ``nx`` -- the way POT writes each solver once against
``nx = get_backend(...)``. The backend supplies kernels (LOO-AUC, row scores,
the ACES-O fit, distinct rows) and small array primitives (``nx.sum``,
``nx.log``, ``nx.where``, ``nx.argsort``, ...; see
:class:`aces_fast.backends.base.Backend`) whose rounding is its own: NumPy sums
pairwise, numba in ascending order, torch exactly. The formulas, the tie rule,
the fallback, the orders and the top-k prefilter live only here. The compiled
``cpp`` path runs its own copy in C++ (``csrc/methods/``).

Task axis: arrays may carry a leading task dimension (torch's padded batches):
``B`` (..., n, m), per-candidate arrays (..., n), per-test arrays (..., m);
reductions over the last axis keep it ((..., 1)). ``nx.row_count(B)`` is the
number of candidates (a scalar, or (..., 1) per task) and ``nx.row_mask(B)``
``None`` or a bool (..., n) mask of the real (non-padding) candidates. The
functions take no data-dependent Python branch except through ``nx.maybe``.

Every method returns an :class:`Outputs`; :meth:`aces_fast._registry.MethodSpec.pack`
turns it into a :class:`~aces_fast.result.RerankResult`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the backends import this module
    from ._ops import ArrayOps

#: ACES-C counts a test as informative when its uniform LOO-AUC exceeds this
HALF = 0.5
from ._constants import WARM_EPS  # noqa: E402 - ACES-O's warm start: log(w_C + WARM_EPS)


class Outputs(NamedTuple):
    """A method's raw results (arrays of the backend's type; see ``RerankResult``)."""

    scores: Any
    weights: Any
    order: Any
    loo_auc: Any = None
    fallback: Any = False
    objective: Any = None
    rows: Any = None

    def task(self, k: int, n: int, m: int) -> Outputs:
        """Task ``k`` (``n`` candidates, ``m`` tests) of outputs computed over a
        padded task axis: its rows of the arrays, cut to its own shape (views)."""

        def cut(x: Any, size: int | None) -> Any:
            if x is None or isinstance(x, bool):
                return x
            return x[k] if size is None else x[k, :size]

        rows = None if self.rows is None else cut(self.rows, min(n, self.rows.shape[1]))
        return Outputs(
            cut(self.scores, n),
            cut(self.weights, m),
            cut(self.order, n),
            cut(self.loo_auc, m),
            cut(self.fallback, None),
            cut(self.objective, None),
            rows,
        )


# ---------------------------------------------------------------------------
# building blocks


def nonconstant(colsum: Any, n_rows: Any) -> Any:
    """Tests some candidate passes and some fails (bool, like ``colsum``)."""
    return (colsum > 0) & (colsum < n_rows)


def normalized(nx: ArrayOps, w: Any) -> Any:
    """Non-negative ``w / sum(w)`` over the last axis, or zeros where the sum is 0
    (then ``w`` is all zeros: dividing by 1 keeps them)."""
    total = nx.sum(w)
    return w / nx.where(total > 0, total, 1.0)


def snap_and_order(nx: ArrayOps, s: Any, tol: Any, valid: Any = None) -> tuple[Any, Any]:
    """Tie-snapped scores and their descending order (docs/contract.rst §2).

    Scores that differ by at most ``tol`` become exactly equal: sums of float
    weights equal in exact arithmetic can differ in the last bits with the
    summation order; evaluation breaks ties at random, so such noise would
    silently change Pass@k. The scores are sorted and each run of neighbours at
    most ``tol`` apart gets the run's smallest value. The order is by descending
    score, ties by lower index. ``valid`` marks real candidates (padding gets
    ``-inf`` and is ordered last). One sort when nothing needs snapping, else
    two: O(n log n).
    """
    if valid is not None:
        s = nx.where(valid, s, -math.inf)
    order = nx.argsort(-s)
    n = s.shape[-1]
    if n < 2:
        return s, order
    # ascending (equal scores in any order, which snapping does not see)
    idx = nx.flip(order)
    sv = nx.take(s, idx)
    gaps = sv[..., 1:] - sv[..., :-1]
    # sorted position r starts a run when its gap to r - 1 exceeds tol
    starts = gaps > tol
    # the starts are some of the non-zero gaps: all of them when no gap is in (0, tol]
    if not nx.maybe(nx.count_nonzero(gaps) != nx.count_nonzero(starts)):
        return s, order  # no two different scores within tol: nothing to snap
    # the run of r starts at the largest start <= r (position 0 starts the first)
    first = nx.cummax(nx.where(starts, nx.arange(1, n, s), 0))
    snapped = nx.scatter(idx, nx.concat(sv[..., :1], nx.take(sv, first)))
    return snapped, nx.argsort(-snapped)


def snap_ties(nx: ArrayOps, s: Any, tol: Any) -> Any:
    """The tie-snapped scores of :func:`snap_and_order`."""
    return snap_and_order(nx, s, tol)[0]


def descending_order(nx: ArrayOps, scores: Any, valid: Any = None) -> Any:
    """Candidates by descending score, ties by lower index (int64); padding last."""
    if valid is not None:
        scores = nx.where(valid, scores, -math.inf)
    return nx.argsort(-scores)


def weighted_ranking(
    nx: ArrayOps, B: Any, w: Any, tie_tol: float, plan: Any = None
) -> tuple[Any, Any, Any]:
    """``(weights, scores, order)`` of unnormalized test weights ``w``.

    Weights normalized to sum 1, scores ``B w`` with ties snapped within
    ``tie_tol * sum(w)``, the descending order. ``plan``: what the backend's
    LOO-AUC kernel learnt about ``B`` (e.g. identical rows), for the scores.
    O(n m + n log n).
    """
    w = normalized(nx, w)
    scores, order = snap_and_order(
        nx, nx.row_scores(B, w, plan), tie_tol * nx.sum(w), nx.row_mask(B)
    )
    return w, scores, order


def aces_c_weights(
    nx: ArrayOps, L: Any, colsum: Any, n_rows: Any, weighted: bool
) -> tuple[Any, Any]:
    """ACES-C weights (unnormalized) from the uniform LOO-AUC ``L``; ``(w, fallback)``.

    ``weighted``: ``w_j = max(0, L_j - 1/2) p_j (1 - p_j)`` with ``p_j`` the pass
    rate; filter: ``w_j = 1`` where ``L_j > 1/2``. ``nan`` (constant tests) is not
    informative. Where every weight is 0, majority-vote weights and
    ``fallback`` True. O(m).
    """
    if weighted:
        p = colsum / n_rows  # true division: float64
        w = nx.fmax(L - HALF, 0.0) * p * (1.0 - p)  # fmax: nan (constant test) -> 0
    else:
        w = nx.to_float(L > HALF)
    fallback = nx.none(w)  # every weight 0 (they are >= 0)
    if nx.maybe(fallback):
        w = nx.where(fallback, nx.to_float(nonconstant(colsum, n_rows)), w)
    return w, fallback


def top_k_rows(nx: ArrayOps, B: Any, top_k: int | None) -> Any:
    """Ascending indices of the ``top_k`` candidates with most passes, ties by
    lower index; ``None`` when every candidate is kept (``top_k`` None or >= n).
    Padding rows rank last. O(n m + n log n)."""
    n = B.shape[-2]
    valid = nx.row_mask(B)
    k = n if top_k is None else min(n, top_k)
    if k == n and valid is None:
        return None
    sums = nx.row_sums(B)
    if valid is not None:
        sums = nx.where(valid, sums, -1)
    return nx.sort(nx.argsort(-sums)[..., :k])


# ---------------------------------------------------------------------------
# the methods


def majority(nx: ArrayOps, B: Any, tie_tol: float) -> Outputs:
    """Majority vote: weight 1 on every non-constant test. O(n m + n log n)."""
    w = nx.to_float(nonconstant(nx.column_sums(B), nx.row_count(B)))
    weights, scores, order = weighted_ranking(nx, B, w, tie_tol)
    return Outputs(scores, weights, order)


def aces_c(nx: ArrayOps, B: Any, weighted: bool, tie_tol: float) -> Outputs:
    """ACES-C (``weighted``) or its filter variant. One uniform LOO-AUC pass:
    O(n log n + n m)."""
    L, colsum, plan = nx.loo_auc_uniform(B)
    w, fallback = aces_c_weights(nx, L, colsum, nx.row_count(B), weighted)
    weights, scores, order = weighted_ranking(nx, B, w, tie_tol, plan)
    return Outputs(scores, weights, order, L, fallback)


def aces_o(
    nx: ArrayOps,
    B: Any,
    gamma: float,
    lr: float,
    steps: int,
    top_k: int | None,
    warm: bool,
    tie_tol: float,
    bins: int | None = None,
) -> Outputs:
    """ACES-O: Adam on the surrogate objective over the simplex (docs/contract.rst §3).

    Active tests are the non-constant ones. Logits start at 0, or (``warm``) at
    ``log(w_C + WARM_EPS)`` with ``w_C`` the normalized ACES-C weights. The fit
    runs on the ``top_k`` candidates with most passes; then every candidate is
    scored. ``bins``: the binned surrogate (a kernel option of the cpp backend).
    O(steps (sum_j |P_j||F_j| + k m)) for the fit.
    """
    n_rows = nx.row_count(B)
    if warm:
        L, colsum, _ = nx.loo_auc_uniform(B)
        active = nonconstant(colsum, n_rows)
        wc, _ = aces_c_weights(nx, L, colsum, n_rows, True)
        logits0 = nx.where(active, nx.log(normalized(nx, wc) + WARM_EPS), 0.0)
    else:
        active = nonconstant(nx.column_sums(B), n_rows)
        logits0 = nx.zeros(active)
    rows = top_k_rows(nx, B, top_k)
    if rows is None:
        w, objective = nx.aces_o_fit(B, logits0, active, gamma, lr, steps, None, bins)
        rows = nx.arange(0, B.shape[-2], B)
    else:
        valid = nx.row_mask(B)
        counts = None if valid is None else nx.take(valid, rows)
        w, objective = nx.aces_o_fit(
            nx.take_rows(B, rows), logits0, active, gamma, lr, steps, counts, bins
        )
    weights, scores, order = weighted_ranking(nx, B, w, tie_tol)
    return Outputs(scores, weights, order, objective=objective, rows=rows)


def _consensus(nx: ArrayOps, B: Any) -> tuple[Any, Any, Any, Any, Any]:
    """Identical rows over the non-constant tests: ``(patterns, inverse, sizes, Bn, M)``.

    ``Bn`` is ``B`` with its constant tests zeroed (same shape: no column
    selection of a data-dependent width), ``M`` the number of non-constant
    tests (an integer, or a 0-d array); ``patterns, inverse, sizes`` are
    ``nx.row_groups(Bn)``. Zero columns change no row's group, pass count or
    any count B4 takes, so this equals grouping the non-constant columns.
    """
    keep = nonconstant(nx.column_sums(B), B.shape[-2])
    M = nx.count(keep)
    Bn = B
    if nx.maybe(B.shape[-1] != M):  # some test is constant
        Bn = B * keep
    patterns, inverse, sizes = nx.row_groups(Bn)
    return patterns, inverse, sizes, Bn, M


def codet(nx: ArrayOps, B: Any, exponent: float) -> Outputs:
    """CodeT: a consensus set (identical rows over the non-constant tests) scores
    ``(#tests its row passes) * (set size) ** exponent``. O(n m log n)."""
    patterns, inverse, sizes, _, _ = _consensus(nx, B)
    n = B.shape[-2]

    def score(passed: Any, size: Any) -> Any:
        return nx.to_float(passed) * nx.int_power(size, exponent, n)

    scores = nx.by_distinct_keys(score, nx.row_sums(patterns), sizes)[inverse]
    return Outputs(scores, None, descending_order(nx, scores))


def _log_beta(nx: ArrayOps, a: Any, b: Any) -> Any:
    return nx.lgamma(a) + nx.lgamma(b) - nx.lgamma(a + b)


def b4(nx: ArrayOps, B: Any, alpha: float, beta0: float) -> Outputs:
    """B4 (Chen et al., ASE 2024): each consensus set's log posterior (docs/contract.rst §3).

    For a distinct row pattern ``y`` with consensus set ``x`` (``N`` candidates,
    ``M`` non-constant tests): ``lnB(|y|+a, M-|y|+1) + lnB(|x|+a, N-|x|+1) +
    lnB(k1+1, n1-k1+1) + lnB(k0+1, n0-k0+b)``, with ``k1`` ones in the ``n1``
    cells of rows outside ``x`` x tests in ``y`` and ``k0`` in the ``n0`` cells
    of rows outside ``x`` x tests outside ``y``; ``a = alpha``, ``b = beta0``.
    O(n m log n + U m) for U distinct rows.
    """
    patterns, inverse, sizes, Bn, M = _consensus(nx, B)
    N = Bn.shape[-2]
    col = nx.column_sums(Bn)
    ny = nx.row_sums(patterns)
    in_y = nx.count(patterns * col)  # members of x pass every test of y
    k1 = in_y - sizes * ny
    k0 = nx.count(col) - in_y

    def score(ny: Any, nxs: Any, k1: Any, k0: Any) -> Any:
        ny, nxs, k1, k0 = (nx.to_float(k) for k in (ny, nxs, k1, k0))
        n1 = (N - nxs) * ny
        n0 = (N - nxs) * (M - ny)
        return (
            _log_beta(nx, ny + alpha, M - ny + 1)
            + _log_beta(nx, nxs + alpha, N - nxs + 1)
            + _log_beta(nx, k1 + 1, n1 - k1 + 1)
            + _log_beta(nx, k0 + 1, n0 - k0 + beta0)
        )

    scores = nx.by_distinct_keys(score, ny, sizes, k1, k0)[inverse]
    return Outputs(scores, None, descending_order(nx, scores))
