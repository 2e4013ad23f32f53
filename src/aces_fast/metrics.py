"""Evaluation given ground-truth labels (docs/contract.rst §5).

Labels never enter a ranking method; these functions judge a ranking
afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validation import as_labels, as_pass_matrix, as_scores, as_weights, check_int
from .backends import check_backend_choice
from .result import RerankResult


def _miss_probability(g: int, c: int, r: int) -> float:
    """``C(g - c, r) / C(g, r)``: r uniform picks from g items, c good, all miss."""
    if r > g - c:
        return 0.0
    p = 1.0
    for i in range(r):
        p *= (g - c - i) / (g - i)
    return p


def pass_at_k(scores: Any, labels: Any, k: int = 1, *, backend: str | None = None) -> float:
    """Probability that a correct candidate is among the top ``k`` of a ranking.

    Ties are broken uniformly at random and the probability is computed
    exactly: walk the score levels from the top; a level that fits entirely
    succeeds if it holds a correct candidate; in the level straddling position
    ``k`` with ``g`` tied candidates, ``c`` correct and ``r`` places left, all
    ``r`` picks miss with probability ``C(g - c, r) / C(g, r)``.

    Parameters
    ----------
    scores : RerankResult or array_like, shape (n,)
        Higher is better.
    labels : array_like, shape (n,)
        1 for a correct candidate.
    k : int >= 1
        ``k > n`` is treated as ``n``.
    backend : str, optional
        Accepted for API uniformity and validated; the walk runs in NumPy.

    Returns
    -------
    float
        In [0, 1]. Cost O(n log n).

    Examples
    --------
    >>> import aces_fast as af
    >>> af.pass_at_k([3.0, 2.0, 2.0, 1.0], [0, 1, 0, 0], k=2)  # a coin flip for place 2
    0.5
    >>> af.pass_at_k([3.0, 2.0, 2.0, 1.0], [0, 1, 0, 0], k=3)
    1.0
    """
    check_backend_choice(backend)
    s = as_scores(scores.scores if isinstance(scores, RerankResult) else scores)
    y = as_labels(labels, s.shape[0])
    k = check_int(k, "k", minimum=1)
    levels, inverse = np.unique(-s, return_inverse=True)  # ascending -s = descending s
    size = np.bincount(inverse, minlength=levels.shape[0])
    good = np.bincount(inverse, weights=y, minlength=levels.shape[0]).astype(np.int64)
    filled = 0
    for g, c in zip(size.tolist(), good.tolist()):
        room = k - filled
        if room <= 0:
            break
        if g <= room:
            if c > 0:
                return 1.0
            filled += g
            continue
        return 1.0 - _miss_probability(g, c, room)
    return 0.0


#: the most samples ``pass_at_k_unbiased`` accepts (its product has at most
#: ``min(c, k, sqrt(40 n))`` factors: a few million here)
MAX_SAMPLES = 2**40


def _unbiased(n: int, c: int, k: int) -> float:
    """``1 - C(n - c, k) / C(n, k)`` for ``1 <= k <= n - c``, ``0 <= c <= n``."""
    if c * k >= 40 * n:
        # the product is <= (1 - k/n)^c <= exp(-c k / n) < 5e-18: 1 - it rounds to 1
        return 1.0
    if c <= k:  # c factors (the form of Chen et al.)
        return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
    # k < c: C(n-c, k) / C(n, k) = prod_{j<k} (n - c - j) / (n - j), fewer factors
    j = np.arange(k, dtype=np.float64)
    return 1.0 - float(np.prod((n - c - j) / (n - j)))


def pass_at_k_unbiased(n: Any, c: Any, k: int, *, backend: str | None = None) -> Any:
    """Unbiased pass@k of a sampler (Chen et al. 2021): ``1 - C(n-c, k) / C(n, k)``.

    Parameters
    ----------
    n, c : int or array_like of int
        Samples drawn and how many are correct, ``0 <= c <= n <= 2**40``;
        scalars or equal-shape (broadcastable) integer arrays.
    k : int >= 1
        ``k > n`` raises ``ValueError``.
    backend : str, optional
        Validated only (the computation is scalar NumPy).

    Returns
    -------
    float or numpy.ndarray of float64, the broadcast shape of ``n`` and ``c``
        Computed with the numerically stable product form over ``min(c, k)``
        factors (1.0 without a product where ``c k >= 40 n``: the product is
        below float64's resolution there).

    Examples
    --------
    >>> import aces_fast as af
    >>> round(af.pass_at_k_unbiased(10, 3, 1), 4), round(af.pass_at_k_unbiased(10, 3, 5), 4)
    (0.3, 0.9167)
    >>> af.pass_at_k_unbiased([10, 10], [0, 10], 2).tolist()
    [0.0, 1.0]
    """
    check_backend_choice(backend)
    k = check_int(k, "k", minimum=1)
    n_arr = np.asarray(n)
    c_arr = np.asarray(c)
    for name, arr in (("n", n_arr), ("c", c_arr)):
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must be integer (within int64/uint64); got dtype {arr.dtype}")
    try:
        n_arr, c_arr = np.broadcast_arrays(n_arr, c_arr)
    except ValueError:
        raise ValueError(
            f"n and c must have broadcastable shapes; got {n_arr.shape} and {c_arr.shape}"
        ) from None
    if (c_arr < 0).any() or (c_arr > n_arr).any():
        raise ValueError("need 0 <= c <= n")
    if (n_arr > MAX_SAMPLES).any():
        raise ValueError(f"n must be <= 2**40 = {MAX_SAMPLES}; got {int(n_arr.max())}")
    if (n_arr < k).any():
        raise ValueError(f"need n >= k={k}")
    out = np.empty(n_arr.shape, dtype=np.float64)
    for idx in np.ndindex(n_arr.shape):
        ni, ci = int(n_arr[idx]), int(c_arr[idx])
        out[idx] = 1.0 if ni - ci < k else _unbiased(ni, ci, k)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class Diagnostics:
    """Per-test and per-problem quantities of docs/contract.rst §5 (needs labels).

    Attributes
    ----------
    alpha, beta, delta : (m,) float64
        ``P(pass | correct)``, ``P(pass | incorrect)``, their difference
        (``nan`` when a class is empty).
    nonconstant : (m,) bool
    delta_bar : float
        Mean ``delta`` over non-constant tests (``nan`` if none).
    threshold : float
        ``2 sqrt(ln 2 / M)`` with ``M`` the number of non-constant tests.
    assumption_holds : bool
        ``delta_bar > threshold``.
    oracle_weights : (m,) float64
        ``max(0, delta_j)`` on non-constant tests (not normalized).
    snr, snr_oracle : float
        ``R(w) = (sum w_j delta_j)^2 / sum w_j^2`` for the given weights (uniform
        over non-constant tests by default) and for the oracle weights.
    bound : float
        ``1 - (n_minus / k) exp(-R/2)`` for the given weights, a lower bound on Pass@k.
    informative, uninformative, misleading : float
        Shares of (correct, incorrect, test) triples where the test separates the
        pair the right way, not at all, or the wrong way.
    n_plus, n_minus : int
        Numbers of correct and incorrect candidates.
    """

    alpha: np.ndarray
    beta: np.ndarray
    delta: np.ndarray
    nonconstant: np.ndarray
    delta_bar: float
    threshold: float
    assumption_holds: bool
    oracle_weights: np.ndarray
    snr: float
    snr_oracle: float
    bound: float
    informative: float
    uninformative: float
    misleading: float
    n_plus: int
    n_minus: int


def _snr(w: np.ndarray, delta: np.ndarray) -> float:
    """``(sum w_j delta_j)^2 / sum w_j^2``; ``nan`` for zero weights.

    ``R`` does not depend on the scale of ``w``: dividing by ``max(w)`` first keeps
    the squares finite for any finite weights."""
    d = np.nan_to_num(delta)
    top = float(w.max()) if w.size else 0.0
    if top <= 0:
        return float("nan")
    w = w / top
    return float(np.dot(w, d) ** 2 / np.dot(w, w))


def diagnostics(
    B: Any, labels: Any, weights: Any | None = None, k: int = 1, *, backend: str | None = None
) -> Diagnostics:
    """Test-quality diagnostics of a pass matrix given candidate labels.

    Parameters
    ----------
    B : array_like, shape (n, m)
        0/1 pass matrix (see :func:`aces_fast.aces_c`).
    labels : array_like, shape (n,)
        1 for a correct candidate, 0 otherwise.
    weights : array_like, shape (m,), optional
        Weights whose signal-to-noise ``R`` and Pass@k bound are reported
        (default: uniform over non-constant tests); non-negative, finite, summing
        to at most 1e300 (``R`` does not depend on their scale).
    k : int >= 1, default 1
        The ``k`` of the Pass@k bound.
    backend : str, optional
        Validated only: column counts are computed in NumPy, O(n m). Tensors on
        any device are copied to the host.

    Returns
    -------
    Diagnostics
        Per test (shape (m,), float64): ``alpha`` and ``beta``, the pass rates
        among correct and incorrect candidates, ``delta = alpha - beta``; and
        the summaries of docs/contract.rst §5.3 (``snr``, ``bound``, the
        fractions of ``informative`` / ``uninformative`` / ``misleading`` tests,
        ``n_plus`` and ``n_minus``, ...).

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> d = af.diagnostics(B, [1, 0, 0, 1])
    >>> d.delta.tolist(), d.n_plus, d.n_minus
    ([0.5, 0.5, -0.5, 1.0], 2, 2)
    >>> d.misleading  # test 2 is passed only by an incorrect candidate
    0.125
    """
    check_backend_choice(backend)
    Bv = as_pass_matrix(B, host_copy=True)
    n, m = Bv.shape
    y = as_labels(labels, n)
    k = check_int(k, "k", minimum=1)
    n_plus = int(y.sum())
    n_minus = n - n_plus
    a = Bv[y].sum(axis=0, dtype=np.int64)  # correct candidates passing each test
    b = Bv[~y].sum(axis=0, dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = a / n_plus if n_plus else np.full(m, np.nan)
        beta = b / n_minus if n_minus else np.full(m, np.nan)
    delta = alpha - beta
    col = a + b
    nonconst = (col > 0) & (col < n)
    M = int(nonconst.sum())
    delta_bar = float(np.mean(delta[nonconst])) if M and n_plus and n_minus else float("nan")
    threshold = 2.0 * math.sqrt(math.log(2) / M) if M else float("inf")
    oracle = np.where(nonconst, np.maximum(0.0, np.nan_to_num(delta)), 0.0)
    w = nonconst.astype(np.float64) if weights is None else as_weights(weights, m, host_copy=True)
    snr = _snr(w, delta)
    bound = 1.0 - (n_minus / k) * math.exp(-snr / 2) if math.isfinite(snr) else float("nan")
    triples = n_plus * n_minus * m
    if triples:
        informative = float(np.sum(a * (n_minus - b))) / triples
        misleading = float(np.sum((n_plus - a) * b)) / triples
        uninformative = 1.0 - informative - misleading
    else:
        informative = misleading = uninformative = float("nan")
    return Diagnostics(
        alpha=alpha,
        beta=beta,
        delta=delta,
        nonconstant=nonconst,
        delta_bar=delta_bar,
        threshold=threshold,
        assumption_holds=bool(delta_bar > threshold),
        oracle_weights=oracle,
        snr=snr,
        snr_oracle=_snr(oracle, delta),
        bound=bound,
        informative=informative,
        uninformative=uninformative,
        misleading=misleading,
        n_plus=n_plus,
        n_minus=n_minus,
    )
